"""desched run through a fault-injecting proxy in front of the real kube-apiserver (issue 17).

Every test prepares a namespace with more pods eligible than the policy's limits allow (4 pods on
each of the 3 kwok nodes, PodLifeTime evicting any pod older than 1 s; limits: 5 per cycle, 2 per
node), runs ``desched run`` through :class:`tests.e2e.faultproxy.FaultProxy` in one fault mode,
and measures what really happened from the apiserver and from the requests the proxy forwarded:

- no limit exceeded in any cycle (pods evicted per cycle and per node, as the apiserver did them);
- no duplicated eviction (no pod sent an eviction that reached the apiserver after one it accepted);
- no lost eviction (a pod desched reports evicted really was; a pod evicted was reported);
- no traceback in desched's output; recovery once the fault is over.

The figures (expected / done / duplicated / lost / limit violations per mode) are printed at the end
of the module: ``pytest tests/e2e/test_fault_injection.py -q``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.faultproxy import Eviction, FaultProxy, token_of
from tests.e2e.support import DeschedProcess, lease_args, run_desched, wait_for
from tests.e2e.test_live_run import NODES, Cluster, cluster, make_pod, new_namespace, wait_running

__all__ = ["cluster"]  # the module-scoped fixture, shared with test_live_run

TOTAL, PER_NODE, PODS_PER_NODE = 5, 2, 4
ROWS: list[tuple[str, str, int | str, int, int, int, int]] = []
NOTES: list[str] = []


@pytest.fixture(scope="module")
def proxy(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[FaultProxy]:
    with FaultProxy(cluster.cp.server, cluster.cp.ca_file) as p:
        yield p
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and ROWS:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            reporter.write_line(
                "fault mode      run         expected  done  duplicated  lost  limit violations"
            )
            for mode, run, expected, done, dup, lost, viol in ROWS:
                reporter.write_line(
                    f"{mode:<15} {run:<11} {expected:>8}  {done:>4}  {dup:>10}  {lost:>4}  {viol:>16}"
                )
            for note in NOTES:
                reporter.write_line(note)


@pytest.fixture
def via_proxy(cluster: Cluster, proxy: FaultProxy, tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for desched's ServiceAccount that goes through the proxy."""
    proxy.set_mode("pass")
    yield proxy.kubeconfig(tmp_path / "via-proxy.kubeconfig", token_of(cluster.kubeconfig))
    proxy.set_mode("pass")


@dataclass
class Scene:
    ns: str
    nodes: dict[str, str]  # pod -> node
    policy: Path
    reported: set[str] = field(default_factory=set)


def prepare(
    cp: ControlPlane, tmp: Path, prefix: str, *, total: int = TOTAL, per_node: int = PER_NODE
) -> Scene:
    ns = new_namespace(cp, prefix)
    nodes = {}
    for n, node in enumerate(NODES):
        for i in range(PODS_PER_NODE):
            name = f"p{n}{i}"
            make_pod(cp, ns, name, node, owner="owner")
            nodes[name] = node
    wait_running(cp, ns, len(nodes))
    # every pod older than PodLifeTime's 1 s when the cycle starts (creation times are whole
    # seconds): a pod created in the same second as the cycle is left ("age 1s, not above 1s")
    time.sleep(2.5)
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/live=true",
        "maxNoOfPodsToEvictTotal": total,
        "maxNoOfPodsToEvictPerNode": per_node,
        "profiles": [
            {
                "name": "faults",
                "pluginConfig": [
                    {
                        "name": "PodLifeTime",
                        "args": {"namespaces": {"include": [ns]}, "maxPodLifeTimeSeconds": 1},
                    }
                ],
                "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
            }
        ],
    }
    policy = tmp / f"policy-{uuid.uuid4().hex[:6]}.yaml"
    policy.write_text(yaml.safe_dump(doc))
    return Scene(ns, nodes, policy)


def evicted(cp: ControlPlane, scene: Scene) -> set[str]:
    """The scene's pods the apiserver has evicted: terminating or gone."""
    items = cp.request("GET", f"/api/v1/namespaces/{scene.ns}/pods")["items"]
    alive = {p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")}
    return set(scene.nodes) - alive


def reported_evicted(scene: Scene, log: str) -> set[str]:
    """The pods desched says it evicted (answered, or reconciled after a lost answer)."""
    ns = re.escape(scene.ns)
    names = set(re.findall(rf"\] evicted pod={ns}/(\S+) node=", log))
    names |= set(re.findall(rf"eviction of pod {ns}/(\S+) \(outcome unknown.*reconciled: evicted", log))
    return names


@dataclass
class Outcome:
    done: set[str]  # evicted by the apiserver in this run
    per_cycle: list[list[str]]  # evictions the apiserver accepted, per desched cycle
    duplicated: set[str]
    lost: set[str]
    violations: list[str]


def measure(
    cp: ControlPlane, scene: Scene, proxy: FaultProxy, since: int, log: str, before: set[str]
) -> Outcome:
    requests = [r for r in proxy.records()[since:] if r.namespace == scene.ns]
    now = evicted(cp, scene)
    done = now - before
    duplicated = _duplicated(requests, before)
    reported = reported_evicted(scene, log)
    lost = (reported - now) | (done - reported - _unresolved(scene, log))
    per_cycle = _per_cycle([r for r in requests if r.done], log)
    violations = []
    for i, cycle in enumerate(per_cycle, 1):
        if len(cycle) > TOTAL:
            violations.append(f"cycle {i}: {len(cycle)} evicted > {TOTAL}")
        for node, n in Counter(scene.nodes[name] for name in cycle).items():
            if n > PER_NODE:
                violations.append(f"cycle {i}: {n} evicted on {node} > {PER_NODE}")
    return Outcome(done, per_cycle, duplicated, lost, violations)


def _duplicated(requests: list[Eviction], before: set[str]) -> set[str]:
    """Pods sent an eviction that reached the apiserver after one it had accepted (or after the
    pod was evicted by an earlier run). A request whose answer the apiserver never gave (it died
    mid-request) proves nothing: a later one for the same pod is not counted as a duplicate."""
    accepted = set(before)
    dup = set()
    for r in sorted(requests, key=lambda r: r.arrived):
        if r.forwarded and r.name in accepted:
            dup.add(r.name)
        if r.done:
            accepted.add(r.name)
    return dup


def _unresolved(scene: Scene, log: str) -> set[str]:
    """Pods desched said may have been evicted (outcome unknown) and never said were not."""
    ns = re.escape(scene.ns)
    flagged = set(re.findall(rf"eviction of pod {ns}/(\S+) \(\S+\): outcome unknown, counted", log))
    refuted = set(re.findall(rf"eviction of pod {ns}/(\S+) \(outcome unknown.*reconciled: not evicted", log))
    return flagged - refuted


def _stamp(line: str) -> float:
    """The time of a klog-style text line (``I1124 16:34:05.100471 ...``: local time, no year)."""
    head = line[1:21]
    year = datetime.now().year
    return datetime.strptime(f"{year}{head}", "%Y%m%d %H:%M:%S.%f").timestamp()


def _per_cycle(accepted: list[Eviction], log: str) -> list[list[str]]:
    """Attribute the evictions the apiserver accepted to desched's cycles (by the cycle lines)."""
    ends = [_stamp(line) for line in log.splitlines() if re.search(r"\] cycle done cycle=\d+ ", line)]
    cycles: list[list[str]] = [[] for _ in range(len(ends) + 1)]
    for r in accepted:
        i = next((k for k, end in enumerate(ends) if r.arrived <= end + 0.05), len(ends))
        cycles[i].append(r.name)
    return [c for c in cycles if c] or [[]]


def one_shot(kubeconfig: Path, scene: Scene, timeout: float = 90) -> str:
    proc = run_desched(
        "--v=2",
        "run",
        "--policy-config-file",
        str(scene.policy),
        "--kubeconfig",
        str(kubeconfig),
        "--descheduling-interval",
        "0",
        "--secure-port",
        "0",
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def check(mode: str, run: str, outcome: Outcome, log: str, *, expected: int, exact: bool = True) -> None:
    ROWS.append(
        (
            mode,
            run,
            expected,
            len(outcome.done),
            len(outcome.duplicated),
            len(outcome.lost),
            len(outcome.violations),
        )
    )
    assert "Traceback" not in log, log
    assert not outcome.violations, (outcome.violations, log)
    assert not outcome.duplicated, (outcome.duplicated, log)
    assert not outcome.lost, (outcome.lost, log)
    if exact:
        assert len(outcome.done) == expected, (sorted(outcome.done), log)
    else:
        assert len(outcome.done) <= expected, (sorted(outcome.done), log)


def fault_then_recovery(
    cluster: Cluster, proxy: FaultProxy, kubeconfig: Path, tmp: Path, mode: str, expected: int
) -> str:
    """One cycle under the fault, then one after it: returns the first run's log."""
    cp = cluster.cp
    scene = prepare(cp, tmp, mode.replace("-", ""))
    since = len(proxy.records())
    proxy.set_mode(mode)
    log = one_shot(kubeconfig, scene)
    proxy.set_mode("pass")
    first = measure(cp, scene, proxy, since, log, set())
    check(mode, "fault", first, log, expected=expected)
    # recovery: the next cycle evicts up to the limits again, never a pod already evicted
    since = len(proxy.records())
    log2 = one_shot(kubeconfig, scene)
    second = measure(cp, scene, proxy, since, log2, first.done)
    check(mode, "recovery", second, log2, expected=TOTAL)
    return log


def test_429_refusals_are_not_charged(
    cluster: Cluster, proxy: FaultProxy, via_proxy: Path, tmp_path: Path
) -> None:
    log = fault_then_recovery(cluster, proxy, via_proxy, tmp_path, "429", expected=0)
    # refused for sure: every eligible pod is tried, none counts against the limits
    assert log.count("did not evict pod") == len(NODES) * PODS_PER_NODE, log
    assert "outcome unknown, counted" not in log


def test_5xx_before_the_apiserver_acted(
    cluster: Cluster, proxy: FaultProxy, via_proxy: Path, tmp_path: Path
) -> None:
    since = len(proxy.records())
    log = fault_then_recovery(cluster, proxy, via_proxy, tmp_path, "5xx-before", expected=0)
    # the answers are lost: 5 attempts charged to the limits, then reconciled as not evicted
    assert len([r for r in proxy.records()[since:] if r.mode == "5xx-before"]) == TOTAL
    assert log.count("reconciled: not evicted") == TOTAL, log


def test_5xx_after_the_apiserver_acted(
    cluster: Cluster, proxy: FaultProxy, via_proxy: Path, tmp_path: Path
) -> None:
    log = fault_then_recovery(cluster, proxy, via_proxy, tmp_path, "5xx-after", expected=TOTAL)
    assert log.count("reconciled: evicted") == TOTAL, log


def test_connection_reset_after_forwarding(
    cluster: Cluster, proxy: FaultProxy, via_proxy: Path, tmp_path: Path
) -> None:
    log = fault_then_recovery(cluster, proxy, via_proxy, tmp_path, "reset", expected=TOTAL)
    assert log.count("reconciled: evicted") == TOTAL, log
    # one line per pod, no stack: the "outcome unknown" warning and the reconciliation line
    assert log.count("outcome unknown, counted against the limits") == TOTAL, log


def test_slow_answers(cluster: Cluster, proxy: FaultProxy, via_proxy: Path, tmp_path: Path) -> None:
    proxy.delay = 1.0
    log = fault_then_recovery(cluster, proxy, via_proxy, tmp_path, "slow", expected=TOTAL)
    assert "outcome unknown, counted" not in log


@pytest.mark.parametrize("mode", ["watch-cut", "watch-410", "watch-stall"])
def test_watch_faults_over_several_cycles(
    cluster: Cluster, proxy: FaultProxy, via_proxy: Path, tmp_path: Path, mode: str
) -> None:
    """Three cycles with the watches cut, expired or stalled: the cache may be stale, yet no pod is
    sent a second eviction and every cycle keeps to the limits (5 + 5 + 2 pods)."""
    cp = cluster.cp
    scene = prepare(cp, tmp_path, mode.replace("-", ""))
    proxy.delay = 1.0
    since = len(proxy.records())
    proxy.set_mode(mode)
    d = DeschedProcess(via_proxy, tmp_path, scene.policy, "--descheduling-interval", "1s")
    try:
        wait_for(lambda: d.cycles() >= 3, "three cycles", timeout=60)
        proxy.set_mode("pass")
        d.wait_cycles(1)
    finally:
        rc = stop(d)
    log = d.text()
    assert rc == 0, log
    outcome = measure(cp, scene, proxy, since, log, set())
    check(mode, "3+1 cycles", outcome, log, expected=len(scene.nodes))
    assert len(outcome.per_cycle) >= 3, outcome.per_cycle


def test_apiserver_crash_and_relist_mid_run(
    cluster: Cluster, proxy: FaultProxy, via_proxy: Path, tmp_path: Path
) -> None:
    """The apiserver killed and restarted while desched evicts every second: the watches break and
    re-list, cycles may run on a stale cache, yet no pod is sent a second eviction and every cycle
    keeps to the limits."""
    cp = cluster.cp
    scene = prepare(cp, tmp_path, "crash")
    since = len(proxy.records())
    d = DeschedProcess(via_proxy, tmp_path, scene.policy, "--descheduling-interval", "1s", name="crash")
    try:
        wait_for(lambda: d.cycles() >= 1, "the first cycle", timeout=60)
        cp.restart_apiserver(graceful=False)
        wait_for(lambda: len(evicted(cp, scene)) == len(scene.nodes), "every pod evicted", timeout=60)
        d.wait_cycles(1)
    finally:
        rc = stop(d)
    log = d.text()
    assert rc == 0, log
    outcome = measure(cp, scene, proxy, since, log, set())
    check("apiserver-crash", "cycles", outcome, log, expected=len(scene.nodes))


def stop(d: DeschedProcess) -> int:
    """SIGTERM, and fail with desched's log if it does not exit in time."""
    try:
        return d.stop(signal.SIGTERM)
    except subprocess.TimeoutExpired:
        d.proc.kill()
        d.proc.wait(10)
        raise AssertionError(f"desched did not exit within 60s of SIGTERM:\n{d.text()}") from None


@pytest.mark.parametrize("mode", ["hold", "blackhole"])
def test_requests_end_before_the_lease_could_pass(
    cluster: Cluster, proxy: FaultProxy, via_proxy: Path, tmp_path: Path, mode: str
) -> None:
    """Eviction requests held by the network (``hold``), or the whole apiserver unreachable
    (``blackhole``): desched abandons every eviction request before its lease (4 s, 1 s margin)
    could pass to another replica, so none reaches the apiserver late; then it recovers."""
    cp = cluster.cp
    scene = prepare(cp, tmp_path, mode, total=2, per_node=1)
    proxy.delay = 30.0
    since = len(proxy.records())
    if mode == "hold":  # evictions only: the lease is taken through the proxy all the same
        proxy.set_mode(mode)
    d = DeschedProcess(
        via_proxy,
        tmp_path,
        scene.policy,
        *lease_args("4s", "3s"),
        "--leader-elect-identity",
        f"fault-{mode}",
        name=mode,
    )
    try:
        wait_for(lambda: "became the leader" in d.text(), "the lease", timeout=60)
        proxy.set_mode(mode)
        if mode == "hold":
            wait_for(
                lambda: sum(1 for r in proxy.records()[since:] if r.abandoned_after is not None) >= 2,
                "two abandoned eviction requests",
                timeout=60,
            )
        else:
            wait_for(lambda: "lost the lease" in d.text(), "the leader to step down", timeout=60)
            assert any(r.abandoned_after is not None for r in proxy.records()[since:]), d.text()
        held = [r for r in proxy.records()[since:] if r.mode == mode]
        proxy.set_mode("pass")
        wait_for(lambda: len(evicted(cp, scene)) >= 4, "evictions after the fault", timeout=60)
    finally:
        rc = stop(d)
    log = d.text()
    assert rc == 0, log
    assert "Traceback" not in log, log
    # nothing sent under the fault reached the apiserver, and the client gave up in time
    assert not any(r.forwarded for r in held), held
    abandoned = [r.abandoned_after for r in held if r.abandoned_after is not None]
    assert abandoned, held
    forwarded = sum(r.forwarded for r in held)
    NOTES.append(
        f"{mode}: {len(held)} eviction requests under the fault, {len(abandoned)} abandoned by desched "
        f"after at most {max(abandoned):.2f}s (lease 4s, margin 1s), {forwarded} forwarded"
    )
    assert max(abandoned) <= 3.0 + 0.5, (held, log)  # 4 s lease - 1 s margin
    done = evicted(cp, scene)
    requests = [r for r in proxy.records()[since:] if r.namespace == scene.ns and r.forwarded]
    dup = _duplicated(requests, set())
    per_cycle = _per_cycle([r for r in requests if r.done], log)
    viol = [
        c for c in per_cycle if len(c) > 2 or max(Counter(scene.nodes[n] for n in c).values(), default=0) > 1
    ]
    reported = reported_evicted(scene, log)
    lost = (reported - done) | (done - reported - _unresolved(scene, log))
    ROWS.append((mode, "lease 4s", ">=4", len(done), len(dup), len(lost), len(viol)))
    assert not lost, (lost, log)
    assert not dup and not viol, (dup, per_cycle, log)
