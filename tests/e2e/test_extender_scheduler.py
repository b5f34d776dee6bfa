"""A real kube-scheduler calling ``desched extender``: pods land where the scorer ranks nodes.

Two kwok nodes of different sizes, reserved for this module by a label and a taint. For each case,
``desched extender`` runs as its own process (node and pod cache from the apiserver) and a
kube-scheduler of its own (a profile with this module's schedulerName, so the session's default
scheduler, if any, is not touched) is configured with it as an extender, in both
``nodeCacheCapable`` settings:

- the KEP's "small nodes fill first" scorer (deploy/extender/scorer.yaml): pods go to the small
  node until it is full, then to the big one;
- the opposite preference (the most capacity left, absolute): pods go to the big node;
- "the most pods" (``allocated``, ``pods``): a pod joins the node where the extender's own cache
  knows pods to be, although kube-scheduler's own scoring prefers the other.

kube-scheduler's own scoring (NodeResourcesFit LeastAllocated) prefers the big node, as the
control case (the same scheduler without the extender) shows, so the small-first placements are
the extender's doing; its metrics show it was asked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from tests.e2e.controlplane import ApiError, ControlPlane, free_port, log_tail

REPO = Path(__file__).resolve().parents[2]
SMALL_FIRST = REPO / "deploy" / "extender" / "scorer.yaml"
BIG_FIRST = {
    "left": {"values": "AbsoluteValue", "prefer": "Most", "resources": {"cpu": 1 << 20, "memory": 1}}
}
NAMESPACE = "desched-e2e-extender"
LABEL = "desched-e2e/extender"
SCHEDULER = "desched-extender-e2e"
NODES = {"ext-small": ("4", "16Gi"), "ext-big": ("16", "64Gi")}


@pytest.fixture(scope="module")
def cp(control_plane: Any) -> Iterator[ControlPlane]:
    if getattr(control_plane, "external", False):
        pytest.skip("needs the local control plane's binaries and scheduler credentials")
    control_plane.start_kwok()
    control_plane.request(
        "POST",
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
    )
    # the ServiceAccount admission plugin wants it; without kube-controller-manager nobody makes it
    status, body = control_plane.raw_request(
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
    )
    assert status in (201, 409), body
    taint = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
    for name, (cpu, memory) in NODES.items():
        control_plane.request(
            "POST",
            "/api/v1/nodes",
            control_plane.fake_node(name, cpu=cpu, memory=memory, labels={LABEL: "true"}, taints=[taint]),
        )
    _lift_not_ready_taints(control_plane)
    try:
        yield control_plane
    finally:
        for name in NODES:
            control_plane.raw_request("DELETE", f"/api/v1/nodes/{name}")
        control_plane.raw_request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")


def _lift_not_ready_taints(cp: ControlPlane) -> None:
    """Node admission taints new nodes not-ready; without a node-lifecycle controller nothing lifts
    it: do it, as that controller would, once kwok has made the nodes Ready."""

    def ready(name: str) -> bool:
        node = cp.request("GET", f"/api/v1/nodes/{name}")
        return any(
            c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", [])
        )

    for name in NODES:
        _wait(f"node {name} to be Ready", lambda n=name: ready(n))
        for _ in range(20):
            node = cp.request("GET", f"/api/v1/nodes/{name}")
            taints = node["spec"].get("taints") or []
            kept = [t for t in taints if not t["key"].startswith("node.kubernetes.io/")]
            if kept == taints:
                break
            node["spec"]["taints"] = kept
            status, _ = cp.raw_request("PUT", f"/api/v1/nodes/{name}", node)
            if status == 200:
                break
            assert status == 409, status  # changed meanwhile (kwok, a controller): read it again


def _wait(what: str, probe: Any, timeout: float = 60.0, logs: Any = None) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{logs() if logs else ''}")
        time.sleep(0.1)


def _get(url: str) -> tuple[int, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0, b""


class Stack:
    """desched extender + a kube-scheduler using it; both processes are ours to stop."""

    def __init__(
        self, cp: ControlPlane, workdir: Path, scorer: Path, cache: bool, *, use: bool = True
    ) -> None:
        self.cp = cp
        self.workdir = workdir
        self.port = free_port()
        self.extender_log = workdir / "extender.log"
        self.scheduler_log = workdir / "kube-scheduler.log"
        env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
        env["NO_PROXY"] = "127.0.0.1,localhost"
        self.extender = subprocess.Popen(
            [
                sys.executable, "-m", "desched.cli", "-v", "2", "extender",
                "--config", str(scorer),
                "--kubeconfig", str(cp.kubeconfig),
                "--bind-address", "127.0.0.1",
                "--port", str(self.port),
            ],
            stdout=self.extender_log.open("w"),
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )  # fmt: skip
        self.scheduler: subprocess.Popen[bytes] | None = None
        try:
            _wait("the extender's cache to sync", self._extender_ready, logs=self.logs)
            self._start_scheduler(cache, env, use)
        except BaseException:
            self.stop()
            raise

    def _extender_ready(self) -> bool:
        assert self.extender.poll() is None, f"extender exited: {log_tail(self.extender_log)}"
        return _get(f"http://127.0.0.1:{self.port}/readyz")[0] == 200

    def _start_scheduler(self, cache: bool, env: dict[str, str], use: bool) -> None:
        cp = self.cp
        assert cp.bin_dir is not None
        config = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {
                "kubeconfig": str(cp.kubeconfig_for_token(cp.scheduler_token, name="kube-scheduler"))
            },
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": SCHEDULER}],
            "extenders": [
                {
                    "urlPrefix": f"http://127.0.0.1:{self.port}/",
                    "filterVerb": "filter",
                    "prioritizeVerb": "prioritize",
                    "weight": 5,
                    "nodeCacheCapable": cache,
                    "httpTimeout": "5s",
                }
            ],
        }
        if not use:
            del config["extenders"]
        path = self.workdir / "kube-scheduler-config.yaml"
        path.write_text(yaml.safe_dump(config))
        health = free_port()
        self.scheduler = subprocess.Popen(
            [
                str(cp.bin_dir / "kube-scheduler"),
                f"--config={path}",
                f"--secure-port={health}",
                "--bind-address=127.0.0.1",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                "--v=4",
            ],
            stdout=self.scheduler_log.open("w"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

        def healthy() -> bool:
            assert self.scheduler is not None and self.scheduler.poll() is None, log_tail(self.scheduler_log)
            import ssl

            ctx = ssl._create_unverified_context()
            opener = urllib.request.build_opener(
                urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=ctx)
            )
            try:
                with opener.open(f"https://127.0.0.1:{health}/healthz", timeout=5) as resp:
                    return bool(resp.status == 200)
            except (urllib.error.URLError, ConnectionError, OSError):
                return False

        _wait("kube-scheduler to be healthy", healthy, logs=self.logs)

    def logs(self) -> str:
        return (
            f"--- extender:\n{log_tail(self.extender_log, 30)}\n"
            f"--- kube-scheduler:\n{log_tail(self.scheduler_log, 40)}"
        )

    def metric(self, verb: str) -> float:
        return self._sample(f'desched_extender_requests_total{{code="200",verb="{verb}"}}')

    def cached_pods(self) -> float:
        """Pods the extender counts on some node."""
        return self._sample('desched_extender_cache_objects{kind="Pod"}')

    def _sample(self, series: str) -> float:
        _, body = _get(f"http://127.0.0.1:{self.port}/metrics")
        for line in body.decode().splitlines():
            if line.startswith(series + " "):
                return float(line[len(series) + 1 :])
        return 0.0

    def stop(self) -> None:
        for proc in (self.scheduler, self.extender):
            if proc is None or proc.poll() is not None:
                continue
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)


def _pod(name: str, node: str = "") -> dict[str, Any]:
    return builders.pod_doc(
        name,
        namespace=NAMESPACE,
        node=node or None,
        node_selector={LABEL: "true"},
        tolerations=[builders.toleration(LABEL)],
        containers=[
            {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
        ],
        phase=None,
        spec={
            "schedulerName": SCHEDULER,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
        },
    )


def _schedule(stack: Stack, name: str) -> str:
    """Create a pod, wait until kube-scheduler binds it, and until the extender's cache has had time
    to see the binding; return its node."""
    cp = stack.cp
    cp.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", _pod(name))

    def bound() -> str:
        return str(
            cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")["spec"].get("nodeName", "")
        )

    node = str(_wait(f"pod {name} to be scheduled", bound, logs=stack.logs))
    time.sleep(0.3)  # watch latency: the next pod's scoring should see this one
    return node


def _delete_pods(cp: ControlPlane) -> None:
    pods = cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    for pod in pods:
        try:
            cp.request(
                "DELETE",
                f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}",
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )
        except ApiError as e:
            if e.status != 404:
                raise

    def gone() -> bool:
        return not cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]

    _wait("the test pods to be deleted", gone)


@pytest.fixture
def stacks(cp: ControlPlane, tmp_path: Path) -> Iterator[list[Stack]]:
    started: list[Stack] = []
    try:
        yield started
    finally:
        for s in started:
            s.stop()
        _delete_pods(cp)


@pytest.mark.parametrize("cache", [True, False], ids=["nodeCacheCapable", "nodeList"])
def test_small_nodes_fill_first(cp: ControlPlane, tmp_path: Path, stacks: list[Stack], cache: bool) -> None:
    stack = Stack(cp, tmp_path, SMALL_FIRST, cache)
    stacks.append(stack)
    placed = [_schedule(stack, f"small-first-{i}") for i in range(5)]
    # 4 cpus on the small node: four 1-cpu pods, then the big node
    assert placed == ["ext-small"] * 4 + ["ext-big"], stack.logs()
    assert stack.metric("prioritize") >= 4
    assert stack.metric("filter") >= 5


@pytest.mark.parametrize("cache", [True, False], ids=["nodeCacheCapable", "nodeList"])
def test_most_left_first_goes_to_the_big_node(
    cp: ControlPlane, tmp_path: Path, stacks: list[Stack], cache: bool
) -> None:
    scorer = tmp_path / "scorer.yaml"
    scorer.write_text(json.dumps(BIG_FIRST))
    stack = Stack(cp, tmp_path, scorer, cache)
    stacks.append(stack)
    placed = [_schedule(stack, f"big-first-{i}") for i in range(3)]
    assert placed == ["ext-big"] * 3, stack.logs()
    assert stack.metric("prioritize") >= 3


def test_without_the_extender_kube_scheduler_prefers_the_big_node(
    cp: ControlPlane, tmp_path: Path, stacks: list[Stack]
) -> None:
    """The control: the same scheduler profile without the extender spreads (LeastAllocated)."""
    stack = Stack(cp, tmp_path, SMALL_FIRST, True, use=False)
    stacks.append(stack)
    assert _schedule(stack, "control-0") == "ext-big", stack.logs()
    assert stack.metric("prioritize") == 0


MOST_PODS = {"allocated": {"values": "AbsoluteValue", "prefer": "Most", "resources": {"pods": 1}}}


@pytest.mark.parametrize("cache", [True, False], ids=["nodeCacheCapable", "nodeList"])
def test_pods_already_on_a_node_come_from_the_extenders_cache(
    cp: ControlPlane, tmp_path: Path, stacks: list[Stack], cache: bool
) -> None:
    """With "the most pods" preferred, a pod joins the node the extender's cache knows pods on,
    against kube-scheduler's LeastAllocated (the small node is half full, the big one empty)."""
    scorer = tmp_path / "scorer.yaml"
    scorer.write_text(json.dumps(MOST_PODS))
    stack = Stack(cp, tmp_path, scorer, cache)
    stacks.append(stack)
    before = stack.cached_pods()
    for i in range(2):
        cp.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", _pod(f"resident-{i}", "ext-small"))
    _wait("the extender to see the resident pods", lambda: stack.cached_pods() >= before + 2, logs=stack.logs)
    assert _schedule(stack, "joiner") == "ext-small", stack.logs()
    assert stack.metric("prioritize") >= 1
