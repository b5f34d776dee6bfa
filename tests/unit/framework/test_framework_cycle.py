"""The cycle (KEP-753): order of extension points, limits across profiles, filters, sort, errors."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import msgspec
import pytest
from tests import builders

from desched.api.policy import load_policy
from desched.api.types import ArgsModel
from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import Framework, PluginHandle
from desched.framework.registry import Registry
from desched.framework.types import EvictResult, Status
from desched.k8s.objects import Node, Pod

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CALLS: list[str] = []


def node(name: str, ready: bool = True) -> Node:
    return builders.node(name, hostname_label=False, ready=ready)


def pod(
    name: str, node_name: str, ns: str = "default", labels: dict[str, str] | None = None, priority: int = 0
) -> Pod:
    return builders.pod(
        name,
        node=node_name,
        namespace=ns,
        uid=name,
        labels=labels or {},
        owner=("ReplicaSet", "rs"),
        controller=None,
        priority=priority,
        cpu="100m",
    )


class EvictAllArgs(ArgsModel):
    only_label: str | None = None


class EvictAll:
    """Deschedule: evicts every pod on the given nodes, in the profile's sort order."""

    name: ClassVar[str] = "EvictAll"
    Args: ClassVar[type[EvictAllArgs]] = EvictAllArgs

    def __init__(self, args: EvictAllArgs, handle: PluginHandle) -> None:
        self.args, self.handle = args, handle

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        CALLS.append(f"deschedule:{self.handle.profile_name}")
        ev = self.handle.evictor
        for n in nodes:
            pods = [
                p
                for p in self.handle.snapshot.pods_on_node(n.metadata.name)
                if self.args.only_label is None or self.args.only_label in p.labels
            ]
            for p in self.handle.sort_pods(pods, key=lambda p: p.metadata.name):
                result = ev.evict(p, reason="test")
                if result is EvictResult.NODE_LIMIT:
                    break
                if result is EvictResult.TOTAL_LIMIT:
                    return None
        return None


class CountRemaining:
    """Balance: records how many pods it still sees."""

    name: ClassVar[str] = "CountRemaining"
    seen: ClassVar[list[int]] = []

    def __init__(self, args: Any, handle: PluginHandle) -> None:
        self.handle = handle

    def balance(self, nodes: Sequence[Node]) -> Status | None:
        CALLS.append(f"balance:{self.handle.profile_name}")
        CountRemaining.seen.append(len(self.handle.snapshot.pods))
        return None


class Broken:
    name: ClassVar[str] = "Broken"

    def __init__(self, args: Any, handle: PluginHandle) -> None:
        pass

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        raise RuntimeError("boom")


class ProtectLabel:
    """Filter: pods labelled protected=true are never evicted."""

    name: ClassVar[str] = "ProtectLabel"

    def __init__(self, args: Any, handle: PluginHandle) -> None:
        pass

    def filter(self, pod: Pod) -> bool:
        return pod.labels.get("protected") != "true"


class ReverseName:
    """Sort: reverse alphabetical."""

    name: ClassVar[str] = "ReverseName"

    def __init__(self, args: Any, handle: PluginHandle) -> None:
        pass

    def less(self, a: Pod, b: Pod) -> bool:
        return a.metadata.name > b.metadata.name


def registry() -> Registry:
    reg = Registry()
    reg.register_all([EvictAll, CountRemaining, Broken, ProtectLabel, ReverseName])
    return reg


def profile(
    name: str,
    deschedule: list[str] = (),
    balance: list[str] = (),
    filters: list[str] = (),  # type: ignore[assignment]
    sort: list[str] = (),
    config: list[dict[str, Any]] = (),
) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        "name": name,
        "pluginConfig": list(config),
        "allowDisablingDefaultEvictor": True,
        "plugins": {
            "deschedule": {"enabled": list(deschedule)},
            "balance": {"enabled": list(balance)},
            "filter": {"enabled": list(filters), "disabled": ["DefaultEvictor"]},
            "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
            "sort": {"enabled": list(sort)},
        },
    }


def run(profiles: list[dict[str, Any]], snapshot: ClusterSnapshot, **top: Any) -> Any:
    reg = registry()
    policy = load_policy(
        {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": profiles, **top}, reg
    )
    fw = Framework(policy, reg, clock=lambda: NOW)
    return fw.run_cycle(snapshot, SimulatedBackend(snapshot))


def cluster() -> ClusterSnapshot:
    return ClusterSnapshot(
        nodes=[node("n1"), node("n2"), node("n3")],
        pods=[
            pod("a", "n1"),
            pod("b", "n1"),
            pod("c", "n2", ns="other"),
            pod("d", "n2"),
            pod("e", "n3", labels={"protected": "true"}),
        ],
    )


def test_all_deschedule_before_any_balance_across_profiles() -> None:
    CALLS.clear()
    run(
        [
            profile("p1", deschedule=["EvictAll"], balance=["CountRemaining"]),
            profile("p2", deschedule=["EvictAll"], balance=["CountRemaining"]),
        ],
        cluster(),
    )
    assert CALLS == ["deschedule:p1", "deschedule:p2", "balance:p1", "balance:p2"]


def test_evicted_pods_are_gone_for_later_plugins() -> None:
    CountRemaining.seen.clear()
    snap = cluster()
    result = run(
        [
            profile(
                "p",
                deschedule=["EvictAll"],
                balance=["CountRemaining"],
                config=[{"name": "EvictAll", "args": {"onlyLabel": "missing"}}],
            )
        ],
        snap,
    )
    assert result.evictions == [] and CountRemaining.seen == [5]
    CountRemaining.seen.clear()
    result = run([profile("p", deschedule=["EvictAll"], balance=["CountRemaining"])], snap)
    assert len(result.evictions) == 5 and CountRemaining.seen == [0]


def test_filter_plugin_protects_and_refusals_are_not_counted() -> None:
    result = run(
        [profile("p", deschedule=["EvictAll"], filters=["ProtectLabel"])],
        cluster(),
        maxNoOfPodsToEvictTotal=10,
    )
    assert {r.name for r in result.evictions} == {"a", "b", "c", "d"}
    assert all(r.name != "e" for r in result.records)


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"maxNoOfPodsToEvictPerNode": 1}, ["a", "c", "e"]),
        ({"maxNoOfPodsToEvictPerNamespace": 2}, ["a", "b", "c"]),
        ({"maxNoOfPodsToEvictTotal": 3}, ["a", "b", "c"]),
    ],
)
def test_limits_hold_across_profiles(limits: dict[str, int], expected: list[str]) -> None:
    profiles = [profile("p1", deschedule=["EvictAll"]), profile("p2", deschedule=["EvictAll"])]
    result = run(profiles, cluster(), **limits)
    assert [r.name for r in result.evictions] == expected


def test_sort_plugin_orders_evictions() -> None:
    result = run(
        [profile("p", deschedule=["EvictAll"], sort=["ReverseName"])], cluster(), maxNoOfPodsToEvictPerNode=1
    )
    assert [r.name for r in result.evictions] == ["b", "d", "e"]


def test_fewer_than_two_ready_nodes_skips_the_cycle() -> None:
    snap = ClusterSnapshot(nodes=[node("n1"), node("n2", ready=False)], pods=[pod("a", "n1")])
    result = run([profile("p", deschedule=["EvictAll"])], snap)
    assert result.skipped and result.evictions == [] and len(snap.pods) == 1


def test_node_selector_limits_the_nodes_plugins_see() -> None:
    nodes = [node("n1"), node("n2"), node("n3")]
    labelled = [
        msgspec.structs.replace(n, metadata=msgspec.structs.replace(n.metadata, labels={"pool": "x"}))
        for n in nodes[:2]
    ]
    snap = ClusterSnapshot(nodes=[*labelled, nodes[2]], pods=[pod("a", "n1"), pod("b", "n3")])
    result = run([profile("p", deschedule=["EvictAll"])], snap, nodeSelector="pool=x")
    assert [r.name for r in result.evictions] == ["a"]


def test_a_failing_plugin_does_not_stop_the_cycle() -> None:
    result = run([profile("p", deschedule=["Broken", "EvictAll"])], cluster())
    assert result.plugin_runs[0].error == "RuntimeError: boom"
    assert len(result.evictions) == 5


def test_same_input_same_decisions() -> None:
    a = run([profile("p", deschedule=["EvictAll"])], cluster(), maxNoOfPodsToEvictTotal=2)
    b = run([profile("p", deschedule=["EvictAll"])], cluster(), maxNoOfPodsToEvictTotal=2)
    assert a.evictions == b.evictions
