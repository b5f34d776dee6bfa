"""Live-mode benchmark: desched run against a real kube-apiserver holding many pods.

    python -m benchmarks.live --nodes 1000 --pods 30000

Starts the e2e control plane (etcd + kube-apiserver + kwok, built by hack/e2e/build-control-plane.sh),
creates kwok nodes and pods bound to them, then measures (docs/performance.md, "Live"):

1. the apiserver alone: the time to answer a paginated LIST of every pod (500 per page, what a
   LIST-based informer asks), one unpaged LIST from its watch cache in JSON and in protobuf (what
   encoding the pods costs it in each), and a watch-list stream (``sendInitialEvents=true``) up to
   its ``k8s.io/initial-events-end`` bookmark, each read by this process without decoding;
2. ``desched run --dry-run --descheduling-interval 1h`` with every plugin (benchmarks/policy-all.yaml):
   the time from the process's start to its cache synced (its ``cache synced`` line) and to the
   end of its first cycle; its RSS sampled every 20 ms (peak, and steady state a few seconds after
   the cycle); then the CPU it spends per watch event under a burst of pod updates (label patches;
   an upper bound: kwok's node heartbeats arrive as watch events meanwhile, and the CPU they cost
   at the rate measured before the burst is reported next to it);
3. ``desched run --event-driven`` (not dry-run) with RemovePodsViolatingNodeTaints only: for
   ``--trials`` nodes in turn, a ``NoSchedule`` taint is added and the time until the first pod on
   that node is seen terminating by a watch of this process (the eviction request has been
   served) is the reaction time; p50 and p99.

Every figure comes with the machine's load average (wall time on a shared machine is noisy).
"""

from __future__ import annotations

import argparse
import compileall
import concurrent.futures
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.controlplane import ControlPlane  # noqa: E402

import desched  # noqa: E402

POLICY = ROOT / "benchmarks" / "policy-all.yaml"
#: where the installed desched's package lies (an editable install: this checkout's src/)
INSTALLED_SRC = Path(desched.__file__).resolve().parents[1]
TAINT_POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: taints
    pluginConfig:
      - name: DefaultEvictor
      - name: RemovePodsViolatingNodeTaints
    plugins:
      deschedule:
        enabled: [RemovePodsViolatingNodeTaints]
"""
PAGE = 500


def make_pod(ns: str, i: int, node: str) -> dict[str, Any]:
    app = f"app-{i % 97}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p-{i}",
            "namespace": ns,
            "labels": {"app": app, "tier": ["web", "api", "worker"][i % 3]},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": app,
                    "uid": f"00000000-0000-0000-0000-{i % 97:012d}",
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": f"registry.example/{app}:1.{i % 7}",
                    "resources": {
                        "requests": {"cpu": f"{50 + (i % 8) * 25}m", "memory": f"{64 + (i % 5) * 64}Mi"}
                    },
                }
            ],
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def node_name(n: int) -> str:
    return f"node-{n:05d}"


def fill(cp: ControlPlane, nodes: int, pods: int, workers: int) -> dict[str, Any]:
    pool = concurrent.futures.ThreadPoolExecutor(workers)
    t0 = time.monotonic()
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
    cp.request("POST", "/api/v1/namespaces", body)
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    cp.raw_request("POST", "/api/v1/namespaces/bench/serviceaccounts", sa)

    def create_node(n: int) -> None:
        node = cp.fake_node(node_name(n), cpu="32", memory="128Gi", pods="250")
        cp.request("POST", "/api/v1/nodes", node)

    list(pool.map(create_node, range(nodes)))
    time.sleep(2)

    def untaint(n: int) -> None:
        # no node-lifecycle controller runs: lift the not-ready taint node admission added, as it would
        for _ in range(10):
            node = cp.request("GET", f"/api/v1/nodes/{node_name(n)}")
            taints = node["spec"].get("taints", [])
            node["spec"]["taints"] = [t for t in taints if t["key"] != "node.kubernetes.io/not-ready"]
            status, _ = cp.raw_request("PUT", f"/api/v1/nodes/{node_name(n)}", node)
            if status == 200:
                return

    list(pool.map(untaint, range(nodes)))

    def create(i: int) -> None:
        cp.request("POST", "/api/v1/namespaces/bench/pods", make_pod("bench", i, node_name(i % nodes)))

    list(pool.map(create, range(pods)))
    pool.shutdown()
    return {"fill_s": round(time.monotonic() - t0, 1), "load_after_fill": load()}


def apiserver_list_times(cp: ControlPlane) -> dict[str, Any]:
    """What the apiserver alone takes to hand over every pod: paginated LIST, then watch-list."""
    t0 = time.monotonic()
    cont, pages, size = "", 0, 0
    while True:
        q = {"limit": str(PAGE)} | ({"continue": cont} if cont else {})
        status, data = cp.raw_request("GET", "/api/v1/pods?" + urllib.parse.urlencode(q), timeout=300)
        assert status == 200, data[:300]
        pages += 1
        size += len(data)
        cont = json.loads(data)["metadata"].get("continue", "")
        if not cont:
            break
    listed = time.monotonic() - t0
    # one unpaged LIST from the watch cache (resourceVersion=0) in each encoding the apiserver
    # serves pods in: what it costs the apiserver to encode them, JSON against protobuf
    encodings: dict[str, Any] = {}
    for name, accept in (("json", "application/json"), ("protobuf", "application/vnd.kubernetes.protobuf")):
        req = urllib.request.Request(cp.server + "/api/v1/pods?resourceVersion=0")
        req.add_header("Authorization", f"Bearer {cp.admin_token}")
        req.add_header("Accept", accept)
        t2 = time.monotonic()
        with cp._opener().open(req, timeout=300) as resp:
            body = resp.read()
            served = resp.headers.get("Content-Type", "")
        encodings[f"apiserver_list_rv0_{name}_s"] = round(time.monotonic() - t2, 2)
        encodings[f"apiserver_list_rv0_{name}_mb"] = round(len(body) / 1e6, 2)
        encodings[f"apiserver_list_rv0_{name}_served"] = served.split(";")[0]
        del body
    q = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "300",
    }
    req = urllib.request.Request(cp.server + "/api/v1/pods?" + urllib.parse.urlencode(q))
    req.add_header("Authorization", f"Bearer {cp.admin_token}")
    t1 = time.monotonic()
    events, streamed = 0, None
    with cp._opener().open(req, timeout=300) as resp:
        for line in resp:
            if b'"BOOKMARK"' in line[:40] and b"k8s.io/initial-events-end" in line:
                streamed = time.monotonic() - t1
                break
            events += 1
    return {
        "apiserver_list_s": round(listed, 2),
        **encodings,
        "list_pages": pages,
        "list_mb": round(size / 1e6, 1),
        "apiserver_watchlist_s": round(streamed, 2) if streamed is not None else None,
        "watchlist_events": events,
        "watchlist_supported": streamed is not None,
        "load_at_list": load(),
    }


class Desched:
    """``desched run`` as a child process: its log lines timestamped on arrival, its RSS sampled."""

    def __init__(self, mode: str, args: list[str], src: Path | None = None) -> None:
        env = os.environ | {"DESCHED_WATCH_LIST": "true" if mode == "watch-list" else "false"}
        if src is not None:  # another checkout's desched (e.g. main, to compare before and after)
            env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "desched.cli", "--v=2", "--logging-format=json", "run", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self.rss: list[tuple[float, int]] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._sample, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            t = time.monotonic() - self.t0
            try:
                rec = json.loads(raw)
            except ValueError:
                rec = {"msg": raw.rstrip()}
            with self.cond:
                self.lines.append((t, rec))
                self.cond.notify_all()

    def _status(self, field: str) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return 0

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _sample(self) -> None:
        while self.proc.poll() is None:
            try:
                self.rss.append((time.monotonic() - self.t0, self._status("VmRSS")))
            except (OSError, ValueError):
                return
            time.sleep(0.02)

    def peak_rss(self) -> int:
        return self._status("VmHWM")

    def wait_for(self, pred: Any, timeout: float, start: int = 0) -> tuple[float, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        seen = start
        with self.cond:
            while True:
                for t, rec in self.lines[seen:]:
                    if pred(rec):
                        return t, rec
                seen = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    tail = "\n".join(str(r) for _, r in self.lines[-20:])
                    raise RuntimeError(f"desched did not log what was expected; last lines:\n{tail}")
                self.cond.wait(min(left, 1.0))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def msg(rec: dict[str, Any]) -> str:
    return str(rec.get("msg", ""))


def measure_run(cp: ControlPlane, burst: int, workers: int, mode: str, src: Path | None) -> dict[str, Any]:
    d = Desched(
        mode,
        [
            "--policy-config-file",
            str(POLICY),
            "--kubeconfig",
            str(cp.kubeconfig),
            "--dry-run",
            "--descheduling-interval",
            "1h",
            "--secure-port",
            "0",
        ],
        src,
    )
    try:
        t_sync, sync_rec = d.wait_for(lambda r: msg(r).startswith("cache synced"), 1800)
        cpu_sync, load_sync = d.cpu_s(), load()
        t_cycle, cycle = d.wait_for(lambda r: msg(r) == "cycle done", 1800)
        cpu_cycle, load_cycle = d.cpu_s(), load()
        peak = d.peak_rss()
        time.sleep(5)
        steady = d._status("VmRSS")
        # the cost of a watch event: a burst of pod label updates. desched's CPU over the burst,
        # per update: an upper bound, as the nodes' heartbeats (kwok updates every node's status)
        # are watch events too; its CPU rate between bursts is reported next to it
        idle0, i0 = d.cpu_s(), time.monotonic()
        time.sleep(10)
        idle_rate = (d.cpu_s() - idle0) / (time.monotonic() - i0)
        c0, w0 = d.cpu_s(), time.monotonic()

        def patch(i: int) -> bool:
            body = json.dumps({"metadata": {"labels": {"bench-burst": str(i)}}}).encode()
            status, data = cp.raw_request(
                "PATCH",
                f"/api/v1/namespaces/bench/pods/p-{i}",
                body,
                content_type="application/merge-patch+json",
            )
            # an earlier round's reaction trials evicted some pods (--src, --rounds): not updates
            assert status in (200, 404), data[:300]
            return status == 200

        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            burst = sum(pool.map(patch, range(burst)))
        sent = time.monotonic() - w0
        # wait until desched is idle again (its CPU stops growing for a second)
        last = d.cpu_s()
        while True:
            time.sleep(1.0)
            now = d.cpu_s()
            if now - last < 0.02 + idle_rate:
                break
            last = now
        spent = d.cpu_s() - c0
        took = time.monotonic() - w0
        peak_after_burst = d.peak_rss()
        after_burst = d._status("VmRSS")
        return {
            "synced_s": round(t_sync, 2),
            "synced_line": msg(sync_rec) + " " + str({k: v for k, v in sync_rec.items() if k != "msg"}),
            "load_at_sync": load_sync,
            "first_cycle_done_s": round(t_cycle, 2),
            "cycle_s": cycle.get("seconds"),
            "would_evict": cycle.get("evicted"),
            "load_at_cycle": load_cycle,
            "peak_rss_mib": round(peak / 2**20, 1),
            "steady_rss_mib": round(steady / 2**20, 1),
            "burst_events": burst,
            "burst_sent_s": round(sent, 2),
            "cpu_us_per_event": round(spent / max(1, burst) * 1e6, 1),
            "background_cpu_us_per_update": round(idle_rate * took / max(1, burst) * 1e6, 1),
            "cpu_s_at_sync": round(cpu_sync, 2),
            "cpu_s_at_first_cycle": round(cpu_cycle, 2),
            "rss_after_burst_mib": round(after_burst / 2**20, 1),
            "peak_rss_after_burst_mib": round(peak_after_burst / 2**20, 1),
            "load_at_burst": load(),
        }
    finally:
        d.stop()


class PodWatch:
    """A watch (from now on) of every pod: when the first pod of each node is seen terminating."""

    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp
        self.first: dict[str, float] = {}
        self.cond = threading.Condition()
        self.events = cp.watch("/api/v1/pods", timeout=3000)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for t, ev in self.events:
            obj = ev["object"]
            node = obj.get("spec", {}).get("nodeName", "")
            if ev["type"] == "DELETED" or obj.get("metadata", {}).get("deletionTimestamp"):
                with self.cond:
                    self.first.setdefault(node, t)
                    self.cond.notify_all()

    def wait(self, node: str, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while node not in self.first:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            return self.first[node]


def measure_reaction(
    cp: ControlPlane, trials: int, debounce: str, nodes: int, src: Path | None, first: int = 0
) -> dict[str, Any]:
    policy = Path(tempfile.mkdtemp(prefix="desched-live-")) / "taints.yaml"
    policy.write_text(TAINT_POLICY)
    d = Desched(
        "watch-list",
        [
            "--policy-config-file",
            str(policy),
            "--kubeconfig",
            str(cp.kubeconfig),
            "--descheduling-interval",
            "1h",
            "--event-driven",
            "--event-debounce",
            debounce,
            "--secure-port",
            "0",
        ],
        src,
    )
    times: list[float] = []
    quiet = seconds(debounce)
    try:
        d.wait_for(lambda r: msg(r) == "cycle done", 1800)
        watch = PodWatch(cp)
        for k in range(trials):
            # from the end: not the nodes the burst's pods are on, nor an earlier round's
            node = node_name(nodes - 1 - first - k)
            # each taint comes to a quiet cluster (no relevant change for the debounce window):
            # what is measured is the reaction to one change, not to a burst (which waits the window)
            time.sleep(quiet * 1.1)
            cycles = sum(1 for _, r in d.lines if msg(r) == "cycle done")
            start = len(d.lines)
            taint = {"key": "bench/reaction", "value": str(k), "effect": "NoSchedule"}
            cur = cp.request("GET", f"/api/v1/nodes/{node}")
            body = {"spec": {"taints": [*cur["spec"].get("taints", []), taint]}}
            t0 = time.monotonic()
            cp.request(
                "PATCH",
                f"/api/v1/nodes/{node}",
                json.dumps(body).encode(),
                content_type="application/merge-patch+json",
            )
            seen = watch.wait(node, 120)
            if seen is None:
                raise RuntimeError(f"no pod on {node} was evicted within 120 s")
            times.append(seen - t0)
            # the next trial starts after this one's cycle ended (its own debounce window)
            d.wait_for(lambda r: msg(r) == "cycle done", 300, start)
            assert sum(1 for _, r in d.lines if msg(r) == "cycle done") > cycles
    finally:
        d.stop()
    times.sort()

    def pct(p: float) -> float:
        return times[max(0, math.ceil(p / 100 * len(times)) - 1)]  # nearest rank

    return {
        "reaction_trials": len(times),
        "event_debounce": debounce,
        "reaction_p50_s": round(pct(50), 3),
        "reaction_p99_s": round(pct(99), 3),
        "reaction_max_s": round(times[-1], 3),
        "load_at_reaction": load(),
    }


def seconds(duration: str) -> float:
    """A Go duration as the benchmark passes them ("1s", "500ms", "0.5s") in seconds."""
    if duration.endswith("ms"):
        return float(duration[:-2]) / 1000
    return float(duration.rstrip("s"))


def compile_sources(src: Path) -> None:
    """Byte-compile desched as an install does (a wheel's install and the container image ship
    .pyc files): an editable checkout would otherwise compile every module at each start
    (PYTHONDONTWRITEBYTECODE, as the image sets it, means it never caches them)."""
    compileall.compile_dir(str(src / "desched"), quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=30000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--burst", type=int, default=5000, help="pod updates in the watch-event burst")
    parser.add_argument("--trials", type=int, default=20, help="event-driven reaction trials")
    parser.add_argument("--event-debounce", default="1s", help="desched's --event-debounce in the trials")
    parser.add_argument("--skip", nargs="*", default=[], choices=["run", "reaction"])
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["watch-list", "list"],
        choices=["watch-list", "list"],
        help="how desched fills its cache: watch-list streaming, or LIST+WATCH (DESCHED_WATCH_LIST=false)",
    )
    parser.add_argument(
        "--src",
        type=Path,
        action="append",
        default=[],
        help="run desched from this source tree (its src/ directory; repeat to compare checkouts on "
        "the same filled cluster, measured alternately); default: the installed desched",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure every --src this many times, alternately"
    )
    args = parser.parse_args()
    srcs: list[Path | None] = [p.resolve() for p in args.src] or [None]
    for src in srcs:
        compile_sources(src or INSTALLED_SRC)

    cp = ControlPlane(
        apiserver_args=["--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"]
    )
    cp.start()
    result: dict[str, Any] = {"nodes": args.nodes, "pods": args.pods, "cpus": os.cpu_count()}
    try:
        cp.start_kwok()
        result |= fill(cp, args.nodes, args.pods, args.workers)
        print(json.dumps(result), flush=True)
        result |= apiserver_list_times(cp)
        print(json.dumps(result), flush=True)
        trials = min(args.trials, args.nodes // max(1, args.rounds * len(srcs)))
        used = 0
        for r in range(args.rounds):
            for src in srcs:
                # with one checkout and one round the keys are as before ("watch-list:synced_s")
                tag = "" if len(srcs) == 1 and args.rounds == 1 else f"{src or 'installed'}#{r + 1}:"
                if "run" not in args.skip:
                    for mode in args.modes:
                        figures = measure_run(cp, min(args.burst, args.pods), args.workers, mode, src)
                        result |= {f"{tag}{mode}:{k}": v for k, v in figures.items()}
                        print(json.dumps(result), flush=True)
                if "reaction" not in args.skip:
                    figures = measure_reaction(cp, trials, args.event_debounce, args.nodes, src, used)
                    used += trials
                    result |= {f"{tag}{k}": v for k, v in figures.items()}
                    print(json.dumps(result), flush=True)
        print(json.dumps(result), flush=True)
        return 0
    finally:
        cp.stop()


if __name__ == "__main__":
    sys.exit(main())
