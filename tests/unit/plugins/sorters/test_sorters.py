"""Sort / PreSort plugins: a profile's sorters change which pods a strategy evicts first."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

import pytest
from pydantic import BaseModel
from tests import builders

from desched.api.policy import EvictionLimits, Policy, ProfileConfig, load_policy
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.evictor import EvictionRequest
from desched.framework.framework import Framework
from desched.framework.registry import Registry
from desched.framework.types import EvictResult, ExtensionPoint, Handle, Status
from desched.k8s.objects import Node, Pod
from desched.plugins import default_registry
from desched.plugins.defaultevictor.args import DefaultEvictorArgs
from desched.plugins.sorters.args import PodAgeSortArgs
from desched.plugins.sorters.plugin import PodAgeSort, PrioritySort

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class RecordingBackend:
    def __init__(self) -> None:
        self.evicted: list[str] = []

    def evict(self, pod: Pod, request: EvictionRequest) -> str | None:
        self.evicted.append(pod.name)
        return None


class EvictInOrder:
    """A test strategy: evicts every pod of its nodes in ``handle.sort_pods`` order (by name)."""

    name: ClassVar[str] = "EvictInOrder"

    def __init__(self, args: object, handle: Handle) -> None:
        self.handle = handle

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        ev = self.handle.evictor
        pods = [p for n in nodes for p in self.handle.snapshot.pods_on_node(n.name) if ev.filter(p)]
        for pod in self.handle.sort_pods(pods, key=lambda p: p.name):
            if ev.evict(pod, reason="test") is EvictResult.TOTAL_LIMIT:
                break
        return None


class VisitInPreSortOrder:
    """A test strategy: records ``handle.presort_pods`` order, evicts nothing."""

    name: ClassVar[str] = "VisitInPreSortOrder"
    seen: ClassVar[list[str]] = []

    def __init__(self, args: object, handle: Handle) -> None:
        self.handle = handle

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        pods = [p for n in nodes for p in self.handle.snapshot.pods_on_node(n.name)]
        VisitInPreSortOrder.seen[:] = [p.name for p in self.handle.presort_pods(pods, key=lambda p: p.name)]
        return None


def make_node(name: str) -> Node:
    return builders.bare_node(name, cpu="4", memory="8Gi", pods="110")


def make_pod(name: str, created: str, priority: int | None = None, *, guaranteed: bool = False) -> Pod:
    return builders.pod(
        name,
        node="n1",
        created=created,
        owner=("ReplicaSet", "rs", "rs"),
        controller=None,
        cpu="100m",
        memory="100Mi",
        limits={"cpu": "100m", "memory": "100Mi"} if guaranteed else None,
        priority=priority,
        status={"startTime": created},
    )


#: three old pods: the oldest has the highest priority, the newest the lowest
PODS = [
    make_pod("oldest", "2025-01-01T00:00:00Z", 300),
    make_pod("middle", "2025-02-01T00:00:00Z", 200),
    make_pod("newest", "2025-03-01T00:00:00Z", 100),
]


def registry() -> Registry:
    reg = default_registry(entry_points=False)
    reg.register(EvictInOrder, origin="test")
    reg.register(VisitInPreSortOrder, origin="test")
    return reg


def run(
    strategy: str,
    strategy_args: BaseModel | None,
    *,
    sort: Sequence[tuple[str, BaseModel | None]] = (),
    presort: Sequence[tuple[str, BaseModel | None]] = (),
    pods: Sequence[Pod] = PODS,
    total: int | None = 1,
) -> list[str]:
    args: dict[str, BaseModel | None] = {"DefaultEvictor": DefaultEvictorArgs(), strategy: strategy_args}
    args.update(dict(sort))
    args.update(dict(presort))
    profile = ProfileConfig(
        name="p",
        plugins={
            ExtensionPoint.DESCHEDULE: (strategy,),
            ExtensionPoint.SORT: tuple(name for name, _ in sort),
            ExtensionPoint.PRESORT: tuple(name for name, _ in presort),
            ExtensionPoint.FILTER: ("DefaultEvictor",),
            ExtensionPoint.PRE_EVICTION_FILTER: ("DefaultEvictor",),
        },
        args=args,
    )
    policy = Policy(profiles=(profile,), limits=EvictionLimits(total=total))
    fw = Framework(policy, registry(), clock=lambda: NOW)
    snapshot = ClusterSnapshot(nodes=[make_node("n1"), make_node("n2")], pods=pods)
    backend = RecordingBackend()
    result = fw.run_cycle(snapshot, backend)
    assert all(r.error is None for r in result.plugin_runs)
    return backend.evicted


def podlifetime_args() -> BaseModel:
    spec = registry().get("PodLifeTime")
    assert spec is not None and spec.args_model is not None
    return spec.args_model.model_validate({"maxPodLifeTimeSeconds": 3600})


# ---------------------------------------------------------------------------- with PodLifeTime


def test_podlifetime_evicts_the_oldest_pod_without_sorters() -> None:
    assert run("PodLifeTime", podlifetime_args()) == ["oldest"]


def test_priority_sort_makes_podlifetime_evict_the_lowest_priority_pod() -> None:
    assert run("PodLifeTime", podlifetime_args(), sort=[("PrioritySort", None)]) == ["newest"]


def test_pod_age_sort_newest_first_overrides_podlifetimes_order() -> None:
    newest_first = PodAgeSortArgs(order="NewestFirst")
    assert run("PodLifeTime", podlifetime_args(), sort=[("PodAgeSort", newest_first)]) == ["newest"]
    oldest_first = PodAgeSortArgs()
    assert run("PodLifeTime", podlifetime_args(), sort=[("PodAgeSort", oldest_first)]) == ["oldest"]


# ---------------------------------------------------------------------------- with a test strategy


def test_without_sorters_the_strategy_key_decides() -> None:
    assert run("EvictInOrder", None, total=None) == ["middle", "newest", "oldest"]


def test_priority_sort_order() -> None:
    pods = [
        make_pod("a-guaranteed", "2025-01-01T00:00:00Z", 100, guaranteed=True),
        make_pod("b-burstable", "2025-01-01T00:00:00Z", 100),
        make_pod("c-no-priority", "2025-01-01T00:00:00Z", None),
        make_pod("d-high", "2025-01-01T00:00:00Z", 500),
    ]
    evicted = run("EvictInOrder", None, sort=[("PrioritySort", None)], pods=pods, total=None)
    assert evicted == ["c-no-priority", "b-burstable", "a-guaranteed", "d-high"]


def test_sorters_apply_in_order_and_the_strategy_key_breaks_their_ties() -> None:
    pods = [
        make_pod("z-old-low", "2025-01-01T00:00:00Z", 100),
        make_pod("a-old-low", "2025-01-01T00:00:00Z", 100),
        make_pod("m-new-low", "2025-06-01T00:00:00Z", 100),
        make_pod("b-old-high", "2025-01-01T00:00:00Z", 900),
    ]
    by_priority_then_age = run(
        "EvictInOrder",
        None,
        sort=[("PrioritySort", None), ("PodAgeSort", PodAgeSortArgs(order="NewestFirst"))],
        pods=pods,
        total=None,
    )
    assert by_priority_then_age == ["m-new-low", "a-old-low", "z-old-low", "b-old-high"]
    by_age_then_priority = run(
        "EvictInOrder",
        None,
        sort=[("PodAgeSort", PodAgeSortArgs()), ("PrioritySort", None)],
        pods=pods,
        total=None,
    )
    assert by_age_then_priority == ["a-old-low", "z-old-low", "b-old-high", "m-new-low"]


def test_presort_orders_what_the_strategy_looks_at() -> None:
    run("VisitInPreSortOrder", None, presort=[("PrioritySort", None)], total=None)
    assert VisitInPreSortOrder.seen == ["newest", "middle", "oldest"]
    run("VisitInPreSortOrder", None, presort=[("PodAgeSort", PodAgeSortArgs())], total=None)
    assert VisitInPreSortOrder.seen == ["oldest", "middle", "newest"]
    run("VisitInPreSortOrder", None, total=None)
    assert VisitInPreSortOrder.seen == ["middle", "newest", "oldest"]


# ---------------------------------------------------------------------------- policy


def test_sorters_in_a_policy() -> None:
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [
                    {"name": "PodAgeSort", "args": {"order": "NewestFirst"}},
                    {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}},
                ],
                "plugins": {
                    "sort": {"enabled": ["PrioritySort", "PodAgeSort"]},
                    "presort": {"enabled": ["PodAgeSort"]},
                    "deschedule": {"enabled": ["PodLifeTime"]},
                },
            }
        ],
    }
    policy = load_policy(doc, default_registry(entry_points=False))
    prof = policy.profiles[0]
    assert prof.enabled(ExtensionPoint.SORT) == ("PrioritySort", "PodAgeSort")
    assert prof.enabled(ExtensionPoint.PRESORT) == ("PodAgeSort",)
    args = prof.args["PodAgeSort"]
    assert isinstance(args, PodAgeSortArgs) and args.order == "NewestFirst"
    assert PodAgeSort.name == "PodAgeSort" and PrioritySort.name == "PrioritySort"


def test_pod_age_sort_order_is_validated() -> None:
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": "PodAgeSort", "args": {"order": "Random"}}],
                "plugins": {"sort": {"enabled": ["PodAgeSort"]}},
            }
        ],
    }
    with pytest.raises(PolicyError) as err:
        load_policy(doc, default_registry(entry_points=False))
    assert str(err.value).startswith("profiles[0].pluginConfig[0].args.order: input should be")
