"""Sort / PreSort plugins: a profile's sorters change which pods a strategy evicts first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import pytest
from tests import builders
from tests.unit.plugins.harness import REGISTRY, Bound

from desched.api.policy import load_policy
from desched.errors import PolicyError
from desched.framework.types import EvictResult, ExtensionPoint, Handle, Status
from desched.k8s.objects import Node, Pod
from desched.plugins.sorters.args import PodAgeSortArgs
from desched.plugins.sorters.plugin import PodAgeSort, PrioritySort


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


NODES = [make_node("n1"), make_node("n2")]
#: PodLifeTime's args: every pod here is older than an hour
PODLIFETIME = {"maxPodLifeTimeSeconds": 3600}
#: the strategies, with DefaultEvictor on; PodLifeTime may evict one pod in all
PLT = Bound("PodLifeTime", {"evictor": True, "maxNoOfPodsToEvictTotal": 1})
IN_ORDER = Bound(EvictInOrder, {"evictor": True})
VISIT = Bound(VisitInPreSortOrder, {"evictor": True})

#: three old pods: the oldest has the highest priority, the newest the lowest
PODS = [
    make_pod("oldest", "2025-01-01T00:00:00Z", 300),
    make_pod("middle", "2025-02-01T00:00:00Z", 200),
    make_pod("newest", "2025-03-01T00:00:00Z", 100),
]


# ---------------------------------------------------------------------------- with PodLifeTime


def test_podlifetime_evicts_the_oldest_pod_without_sorters() -> None:
    assert PLT.evicted(NODES, PODS, PODLIFETIME) == ["oldest"]


def test_priority_sort_makes_podlifetime_evict_the_lowest_priority_pod() -> None:
    assert PLT.evicted(NODES, PODS, PODLIFETIME, sort=["PrioritySort"]) == ["newest"]


def test_pod_age_sort_newest_first_overrides_podlifetimes_order() -> None:
    newest_first = {"order": "NewestFirst"}
    assert PLT.evicted(NODES, PODS, PODLIFETIME, sort=[("PodAgeSort", newest_first)]) == ["newest"]
    oldest_first: dict[str, str] = {}
    assert PLT.evicted(NODES, PODS, PODLIFETIME, sort=[("PodAgeSort", oldest_first)]) == ["oldest"]


# ---------------------------------------------------------------------------- with a test strategy


def test_without_sorters_the_strategy_key_decides() -> None:
    assert IN_ORDER.evicted(NODES, PODS) == ["middle", "newest", "oldest"]


def test_priority_sort_order() -> None:
    pods = [
        make_pod("a-guaranteed", "2025-01-01T00:00:00Z", 100, guaranteed=True),
        make_pod("b-burstable", "2025-01-01T00:00:00Z", 100),
        make_pod("c-no-priority", "2025-01-01T00:00:00Z", None),
        make_pod("d-high", "2025-01-01T00:00:00Z", 500),
    ]
    order = IN_ORDER.evicted(NODES, pods, sort=["PrioritySort"])
    assert order == ["c-no-priority", "b-burstable", "a-guaranteed", "d-high"]


def test_sorters_apply_in_order_and_the_strategy_key_breaks_their_ties() -> None:
    pods = [
        make_pod("z-old-low", "2025-01-01T00:00:00Z", 100),
        make_pod("a-old-low", "2025-01-01T00:00:00Z", 100),
        make_pod("m-new-low", "2025-06-01T00:00:00Z", 100),
        make_pod("b-old-high", "2025-01-01T00:00:00Z", 900),
    ]
    by_priority_then_age = IN_ORDER.evicted(
        NODES, pods, sort=["PrioritySort", ("PodAgeSort", {"order": "NewestFirst"})]
    )
    assert by_priority_then_age == ["m-new-low", "a-old-low", "z-old-low", "b-old-high"]
    by_age_then_priority = IN_ORDER.evicted(NODES, pods, sort=[("PodAgeSort", {}), "PrioritySort"])
    assert by_age_then_priority == ["a-old-low", "z-old-low", "b-old-high", "m-new-low"]


def test_presort_orders_what_the_strategy_looks_at() -> None:
    VISIT.evicted(NODES, PODS, presort=["PrioritySort"])
    assert VisitInPreSortOrder.seen == ["newest", "middle", "oldest"]
    VISIT.evicted(NODES, PODS, presort=[("PodAgeSort", {})])
    assert VisitInPreSortOrder.seen == ["oldest", "middle", "newest"]
    VISIT.evicted(NODES, PODS)
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
    policy = load_policy(doc, REGISTRY)
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
        load_policy(doc, REGISTRY)
    assert str(err.value).startswith("profiles[0].pluginConfig[0].args.order: input should be")
