"""The settling guard (issue 30): while the cluster comes back from an outage (the cache resumed
after a gap, or more than a tenth of the nodes just changed readiness), a pod whose readiness
changed within the settling window is not evicted; and a skipped cycle runs as soon as the cache
is back in sync, not an interval later.

tests/e2e/test_recovery.py runs the same against a real kube-apiserver restarted under faults.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from tests import builders

from desched.api.policy import EvictionLimits, load_policy
from desched.app import run as live
from desched.backends.api_eviction import ApiEvictionBackend
from desched.backends.settling import DEFAULT_SETTLING_WINDOW, SettlingGuard
from desched.cluster.live_source import RESOURCES, Informer
from desched.framework.evictor import PodEvictor
from desched.framework.safety import Skip
from desched.framework.types import EvictResult
from desched.k8s.objects import Node, Pod
from desched.plugins import default_registry
from desched.runtime.metrics import Metrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pod(name: str, *, ready: bool, node: str = "n1") -> Pod:
    return builders.pod(name, node=node, namespace="ns", uid=f"uid-{name}", ready=ready)


def node(name: str, *, ready: bool) -> Node:
    return builders.node(name, ready=ready)


def guard_with_nodes(clock: Clock, count: int = 10, window: float = 40.0) -> SettlingGuard:
    g = SettlingGuard(window, clock=clock)
    for i in range(count):
        g.observe("Node", "ADDED", None, node(f"n{i}", ready=True))
    return g


def test_the_default_window_is_a_node_lease() -> None:
    assert DEFAULT_SETTLING_WINDOW == 40.0
    assert live.RunOptions(policy_file="-").settling_window == 40.0


def test_after_a_re_list_a_pod_whose_readiness_changed_is_held_back_for_the_window() -> None:
    clock = Clock()
    g = guard_with_nodes(clock)
    g.resumed("Pod", "re-listed")  # the apiserver restarted: the cache re-listed
    clock.now += 2
    g.observe("Pod", "MODIFIED", pod("a", ready=True), pod("a", ready=False))  # its node's heartbeat lapsed
    g.observe("Pod", "MODIFIED", pod("b", ready=True), pod("b", ready=True))  # nothing of readiness
    clock.now += 10
    skip = g.check(pod("a", ready=False))
    assert isinstance(skip, Skip) and skip.reason == "settling"
    assert "readiness changed 10s ago" in skip.detail and "Pod re-listed" in skip.detail
    assert g.check(pod("b", ready=True)) is None  # its readiness did not change: evicted as usual
    clock.now += 30  # 40 s after the change: the window is over
    assert g.check(pod("a", ready=False)) is None


def test_without_a_gap_nor_many_nodes_changing_nothing_is_held_back() -> None:
    clock = Clock()
    g = guard_with_nodes(clock)
    g.observe("Pod", "MODIFIED", pod("a", ready=True), pod("a", ready=False))
    clock.now += 5
    assert g.settling() == ""
    assert g.check(pod("a", ready=False)) is None  # a pod failing its probe in a healthy cluster
    # one node of ten changing readiness is a node's life, not an outage
    g.observe("Node", "MODIFIED", node("n1", ready=True), node("n1", ready=False))
    assert g.check(pod("a", ready=False)) is None


def test_more_than_a_tenth_of_the_nodes_changing_readiness_is_settling() -> None:
    """The control plane's outage seen without a gap of desched's own (its watches held): the
    kubelets' heartbeats lapsed, and their nodes go NotReady and Ready again."""
    clock = Clock()
    g = guard_with_nodes(clock)
    g.observe("Pod", "MODIFIED", pod("a", ready=True), pod("a", ready=False))
    for name in ("n1", "n2"):
        g.observe("Node", "MODIFIED", node(name, ready=True), node(name, ready=False))
    assert g.settling() == "2 of 10 nodes changed readiness within 40s"
    assert isinstance(g.check(pod("a", ready=False)), Skip)
    clock.now += 40  # the nodes and the pod settled: nothing held any more
    assert g.check(pod("a", ready=False)) is None
    assert g.settling() == ""


def test_a_window_of_zero_turns_the_guard_off() -> None:
    g = SettlingGuard(0)
    g.resumed("Pod", "re-listed")
    g.observe("Pod", "MODIFIED", pod("a", ready=True), pod("a", ready=False))
    assert not g.enabled and g.check(pod("a", ready=False)) is None


def test_a_held_back_eviction_is_skipped_counted_and_not_charged(caplog: pytest.LogCaptureFixture) -> None:
    """Through the live backend and the evictor: the held pod is recorded skipped (reason
    settling), counted in descheduler_evictions_skipped_total, logged once, and not charged
    against the limits: the next pod is evicted within a limit of one."""
    clock = Clock()
    g = guard_with_nodes(clock)
    g.resumed("Node", "watch re-opened")
    g.observe("Pod", "MODIFIED", pod("a", ready=True), pod("a", ready=False))
    sent: list[str] = []

    class Backend(ApiEvictionBackend):
        def evict(self, pod: Pod, request: Any) -> Any:
            answer = super().evict(pod, request)
            sent.append(pod.metadata.name)
            return answer

    backend = Backend(None, None, hold=g.check, dry_run=True)  # type: ignore[arg-type]
    metrics = Metrics()
    evictor = PodEvictor(backend, EvictionLimits(total=1), observers=[metrics.observe_eviction])
    caplog.set_level("INFO", logger="desched.backends.settling")
    assert evictor.evict(pod("a", ready=False), "prof", "PodLifeTime", "old") is EvictResult.SKIPPED
    assert evictor.evict(pod("a", ready=False), "prof", "PodLifeTime", "old") is EvictResult.SKIPPED
    assert evictor.evict(pod("b", ready=True), "prof", "PodLifeTime", "old") is EvictResult.EVICTED
    assert evictor.total == 1
    held = evictor.records[0]
    assert held.skip_reason == "settling" and "settling window" in held.error
    labels = {"reason": "settling", "strategy": "PodLifeTime", "profile": "prof", "namespace": "ns"}
    assert metrics.registry.get_sample_value("descheduler_evictions_skipped_total", labels) == 2
    lines = [r.getMessage() for r in caplog.records if r.name == "desched.backends.settling"]
    assert len(lines) == 1 and lines[0].startswith("settling: not evicting pod ns/a: its readiness changed")


# ---------------------------------------------------------------------- through the informer


class Answer:
    def __init__(self, body: bytes, *, hang: bool = False) -> None:
        self.status = 200
        self.body = body
        self.hang = hang
        self.content = self

    async def read(self) -> bytes:
        return self.body

    async def iter_any(self) -> Any:
        if self.body:
            yield self.body
        if self.hang:
            await asyncio.Event().wait()

    def release(self) -> None:
        pass


def pod_doc(ready: bool, rv: str) -> dict[str, Any]:
    doc = builders.pod_doc("g0", node="n1", namespace="ns", uid="uid-g0", ready=ready)
    doc["metadata"]["resourceVersion"] = rv
    return doc


def test_a_readiness_change_seen_in_the_re_list_after_an_apiserver_restart_is_held() -> None:
    """The pod was Ready when listed; the apiserver goes away (the watch fails), comes back with a
    new watch cache (410 for the old resourceVersion), and the re-list shows the pod NotReady: the
    informer tells the guard both the change (in the re-list's diff) and the gap."""
    clock = Clock()
    d = live.Descheduler(live.RunOptions(policy_file="-", interval=60), policy())
    d.settling = g = SettlingGuard(40.0, clock=clock)
    lists = 0
    watches = 0

    class Api:
        async def call_api(self, path: str, method: str, **kw: Any) -> Answer:
            nonlocal lists, watches
            params = dict(kw.get("query_params", []))
            if not params.get("watch"):
                lists += 1
                body = {"metadata": {"resourceVersion": "9"}, "items": [pod_doc(lists == 1, str(lists))]}
                return Answer(json.dumps(body).encode())
            watches += 1
            if watches == 1:
                raise ConnectionResetError("the apiserver went away")
            if watches == 2:
                return Answer(b'{"type": "ERROR", "object": {"code": 410}}\n')
            return Answer(b"", hang=True)

    async def main() -> None:
        inf = Informer(Api(), RESOURCES["Pod"], on_change=d._on_change, on_resume=g.resumed)  # type: ignore[arg-type]
        inf.use_watch_list = False
        stop = asyncio.Event()
        task = asyncio.create_task(inf.run(stop))
        async with asyncio.timeout(10):
            while not (lists >= 2 and inf.healthy):
                await asyncio.sleep(0.01)
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    assert "Pod re-listed" in g.settling()
    assert isinstance(g.check(pod("g0", ready=False)), Skip)


# ---------------------------------------------------------------------- the skipped cycle


def policy() -> Any:
    return load_policy(
        {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy"}, default_registry()
    )


def test_a_skipped_cycle_runs_as_soon_as_the_cache_is_back_not_an_interval_later() -> None:
    """The cycle was skipped (the apiserver down longer than --client-connection-timeout); the
    next one waited the whole interval even when the cache came back a second later."""
    d = live.Descheduler(live.RunOptions(policy_file="-", interval=3600), policy())

    class Cache:
        problems = ["Pod: cannot reach the API server (for 31s)"]

        def unsynced(self) -> list[str]:
            return self.problems

    cache: Any = Cache()

    async def main() -> float:
        waiting = asyncio.create_task(d._wait_next(resync=cache))
        await asyncio.sleep(0.5)
        assert not waiting.done()  # still out of sync: it waits
        cache.problems = []
        t0 = time.monotonic()
        await asyncio.wait_for(waiting, 5)
        return time.monotonic() - t0

    assert asyncio.run(main()) < 0.5


# ---------------------------------------------------------------------- a budget's status behind its pods


def guarded_scene(*, status_healthy: int, ready: bool, policy: str | None = None) -> tuple[list[Pod], Any]:
    """Three pods under a PDB ``minAvailable: 3`` whose status says ``status_healthy`` healthy."""
    pods = [
        builders.pod(f"g{i}", node="n1", namespace="ns", uid=f"uid-g{i}", labels={"app": "g"}, ready=ready)
        for i in range(3)
    ]
    spec = {"unhealthyPodEvictionPolicy": policy} if policy else None
    pdb = builders.pdb(
        "guarded",
        namespace="ns",
        selector={"app": "g"},
        min_available=3,
        spec=spec,
        status={
            "observedGeneration": 1,
            "disruptionsAllowed": max(0, status_healthy - 3),
            "currentHealthy": status_healthy,
            "desiredHealthy": 3,
            "expectedPods": 3,
        },
    )
    return pods, builders.snapshot(pods=pods, pdbs=[pdb])


def test_an_unhealthy_pod_whose_budget_status_is_behind_its_pods_is_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The PDB's status still counts 3 healthy (from before the outage), the pods are NotReady: the
    eviction API would let them go (IfHealthyBudget); a recount would not. Held, in or out of a
    settling period, and again at every cycle until the status agrees with the pods."""
    clock = Clock()
    g = guard_with_nodes(clock)
    pods, snap = guarded_scene(status_healthy=3, ready=False)
    g.begin_cycle(snap)
    assert g.settling() == ""  # no gap, no node changes: not a settling period
    with caplog.at_level("INFO", logger="desched.backends.settling"):
        held = [g.check(p) for p in pods]
    assert all(isinstance(h, Skip) for h in held), held
    first = held[0]
    assert isinstance(first, Skip)
    assert "PodDisruptionBudget ns/guarded counts 3 healthy of 3 desired, its pods show 0" in first.detail
    assert sum("settling: not evicting pod ns/g0" in r.getMessage() for r in caplog.records) == 1
    clock.now += 600  # long after any window: still behind, still held
    g.begin_cycle(snap)
    assert isinstance(g.check(pods[0]), Skip)
    # the disruption controller recounted: the API refuses these now, the guard has nothing to add
    _, recounted = guarded_scene(status_healthy=0, ready=False)
    g.begin_cycle(recounted)
    assert [g.check(p) for p in pods] == [None, None, None]


def test_a_budget_status_that_agrees_with_its_pods_holds_nothing() -> None:
    g = guard_with_nodes(Clock())
    pods, snap = guarded_scene(status_healthy=3, ready=True)  # Ready pods, an honest status
    g.begin_cycle(snap)
    assert [g.check(p) for p in pods] == [None, None, None]
    # AlwaysAllow: the API lets unhealthy pods go whatever the status says: not the guard's case
    pods, snap = guarded_scene(status_healthy=3, ready=False, policy="AlwaysAllow")
    g.begin_cycle(snap)
    assert [g.check(p) for p in pods] == [None, None, None]


def test_a_pending_pod_under_a_budget_behind_its_pods_is_not_held() -> None:
    """The eviction API deletes a Pending pod without a look at budgets: nothing to guard."""
    g = guard_with_nodes(Clock())
    pods, snap = guarded_scene(status_healthy=3, ready=False)
    pending = builders.pod(
        "g-pending", namespace="ns", uid="uid-pending", labels={"app": "g"}, phase="Pending", ready=False
    )
    snap.add_pod(pending)
    g.begin_cycle(snap)
    assert isinstance(g.check(pods[0]), Skip)  # the Running, NotReady ones are still held
    assert g.check(pending) is None


def test_the_budget_check_is_off_with_the_guard() -> None:
    g = SettlingGuard(0.0, clock=Clock())
    pods, snap = guarded_scene(status_healthy=3, ready=False)
    g.begin_cycle(snap)
    assert g.check(pods[0]) is None
