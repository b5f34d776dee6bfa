"""HighNodeUtilization's ``compactWhenAllUnderutilized`` (upstream #725): off by default (upstream
does nothing when every node is under-utilised); on, it empties the least-utilised nodes whose
pods all fit on the nodes it keeps. Examples, then hypothesis properties: no evicted pod is left
without a place (each fits on the kept nodes, in one assignment, under the node-fit checks), and
never more nodes are emptied than the others can absorb."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests import builders
from tests.unit.plugins.harness import NOW, evicted, framework, load, run

from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.findings import Finding
from desched.k8s.objects import Node, Pod
from desched.plugins.nodeutilization.args import HighNodeUtilizationArgs

HNU = "HighNodeUtilization"
COMPACT = {"thresholds": {"cpu": 50, "memory": 50}, "compactWhenAllUnderutilized": True}


def node(name: str, cpu: str = "4", pods: str = "10", **kw: Any) -> Node:
    return builders.node(name, cpu=cpu, memory="8Gi", pods=pods, **kw)


def pod(name: str, node_name: str, cpu: str = "500m", **kw: Any) -> Pod:
    kw.setdefault("owner", ("ReplicaSet", "rs"))
    return builders.pod(name, node=node_name, uid=f"uid-{name}", cpu=cpu, **kw)


def spread_out() -> tuple[list[Node], list[Pod]]:
    """Four nodes of 4 cpu, each at 12.5-37.5%: every node under the 50% thresholds."""
    nodes = [node(f"n{i}") for i in range(1, 5)]
    pods = [pod("a1", "n1"), pod("b1", "n2"), pod("b2", "n2"), pod("c1", "n3", "1"), pod("d1", "n4", "1500m")]
    return nodes, pods


# ----------------------------------------------------------------------------- args


def test_off_by_default_and_named_in_the_policy() -> None:
    loaded = load(HNU, {"thresholds": {"cpu": 50}}, evictor=True).profiles[0].args[HNU]
    assert isinstance(loaded, HighNodeUtilizationArgs)
    assert loaded.compact_when_all_underutilized is False
    loaded = load(HNU, COMPACT, evictor=True).profiles[0].args[HNU]
    assert isinstance(loaded, HighNodeUtilizationArgs)
    assert loaded.compact_when_all_underutilized is True


def test_without_the_arg_all_under_utilised_does_nothing_as_upstream() -> None:
    nodes, pods = spread_out()
    assert evicted(run(HNU, {"thresholds": {"cpu": 50, "memory": 50}}, nodes, pods, evictor=True)) == []


# ----------------------------------------------------------------------------- compaction


def test_empties_the_least_used_nodes_while_their_pods_fit() -> None:
    nodes, pods = spread_out()
    result = run(HNU, COMPACT, nodes, pods, evictor=True)
    # least used first (by the sum of raw amounts: n1 501, n3 1001, n2 1002, n4 1501), each pod
    # planned on the fullest kept node: n1's a1 -> n4, n3's c1 -> n4, n2's b1 and b2 -> n4, which
    # then holds 4 of its 4 cpu; n4 received pods, so it stays
    assert evicted(result) == ["a1", "c1", "b1", "b2"]
    assert {r.node for r in result.evictions} == {"n1", "n2", "n3"}
    assert all(
        re.fullmatch(
            r"all nodes are under-utilized \(this one: cpu [0-9.]+% <= [0-9.]+%.*\); emptying node n[1-3], "
            r"whose pods fit on the others",
            r.reason,
        )
        for r in result.evictions
    ), [r.reason for r in result.evictions]


def test_of_nodes_that_tie_the_one_kube_scheduler_picks_is_kept() -> None:
    """n0 and n1 hold as much (1 cpu): kube-scheduler with MostAllocated binds the first
    replacement to the one it picks among equals (n0: the root of its heap), and then every other
    one follows there. So n1 is emptied, not n0: the other way round two of the four replacements
    land back on the node being emptied (issue 24, n20-compaction). Likewise n3 is kept over n2
    (the heap's pre-order: position 3 before position 2), so n2 is emptied first."""
    from desched.app.simulate import simulate_cycles
    from desched.scheduling.placement import SCORE_GENERIC, PlacementOptions, tie_preference
    from desched.scheduling.scorer import GenericScorerArgs

    nodes = [node(f"n{i}") for i in range(4)]
    where = {"p0": "n0", "p1": "n1", "p2": "n2", "p3": "n3", "p4": "n0", "p5": "n1"}
    pods = [pod(name, at, owner=("ReplicaSet", f"r{name}")) for name, at in where.items()]
    assert tie_preference(nodes) == {"n0": 0, "n1": 1, "n3": 2, "n2": 3}
    most = GenericScorerArgs.model_validate(
        {
            "allocated": {
                "values": "RatioToAllocatable",
                "prefer": "Most",
                "resources": {"cpu": 1, "memory": 1},
            }
        }
    )
    fw = framework(HNU, COMPACT, evictor=True)
    sim, _, _ = simulate_cycles(
        fw,
        ClusterSnapshot(nodes=nodes, pods=pods),
        NOW,
        options=PlacementOptions(score=SCORE_GENERIC, generic=most),
    )
    first = sim.cycles[0]
    assert [(r.name, r.node) for r in first.result.evictions] == [
        ("p2", "n2"),
        ("p3", "n3"),
        ("p1", "n1"),
        ("p5", "n1"),
    ]
    assert [(p.name, p.node, p.same_node) for p in first.placements] == [
        ("p2", "n0", False),
        ("p3", "n0", False),
        ("p1", "n0", False),
        ("p5", "n0", False),
    ]


def test_stops_when_the_pods_no_longer_fit() -> None:
    # 3 nodes of 2 cpu, 0.9 cpu each (45%): one node's pods fit on another, the second's do not;
    # of the three tied nodes kube-scheduler picks n1 first and n3 last, so n3 is emptied (to n1)
    nodes = [node(f"n{i}", cpu="2") for i in range(1, 4)]
    pods = [pod(f"p{i}", f"n{i}", "900m") for i in range(1, 4)]
    result = run(HNU, COMPACT, nodes, pods, evictor=True)
    assert evicted(result) == ["p3"]


def test_a_node_with_a_pod_that_may_not_go_is_left_whole() -> None:
    nodes, pods = spread_out()
    pods[0] = pod("a1", "n1", owner=None)  # bare: DefaultEvictor protects it
    pods.append(pod("ds", "n2", "100m", owner=("DaemonSet", "agent")))  # ignored by the autoscaler
    found: list[Finding] = []
    result = run(HNU, COMPACT, nodes, pods, evictor=True, found=found)
    # n1 stays whole; n3's c1 and n2's b1, b2 go to n4; the DaemonSet pod stays on n2
    assert evicted(result) == ["c1", "b1", "b2"]
    assert any(
        f.node == "n1" and f.reason == "not compacted: pod default/a1 may not be evicted, so the node stays"
        for f in found
    )


def test_pods_must_pass_node_fit_on_the_kept_nodes() -> None:
    nodes, pods = spread_out()
    pods[0] = pod("a1", "n1", node_selector={"kubernetes.io/hostname": "n1"})
    found: list[Finding] = []
    result = run(HNU, COMPACT, nodes, pods, evictor=True, found=found)
    assert evicted(result) == ["c1", "b1", "b2"]
    assert any(f.node == "n1" and "do not all fit on the nodes kept" in f.reason for f in found)


def test_cordoned_nodes_are_emptied_but_receive_nothing() -> None:
    nodes = [node("n1", unschedulable=True), node("n2"), node("n3", cpu="1")]
    pods = [pod("a", "n1", "1"), pod("b", "n2", "1500m"), pod("c", "n3", "400m")]
    result = run(HNU, COMPACT, nodes, pods, evictor=True)
    # by raw amounts n3 (401) < n1 (1001) < n2 (1501): n3's c goes to n2, the fullest schedulable
    # node; n1 (cordoned) is emptied too, its a onto n2 (2.1 cpu free); n1 never receives
    assert evicted(result) == ["c", "a"]


def test_number_of_nodes_still_gates() -> None:
    nodes, pods = spread_out()
    assert evicted(run(HNU, {**COMPACT, "numberOfNodes": 4}, nodes, pods, evictor=True)) == []


def test_limits_hold() -> None:
    nodes, pods = spread_out()
    assert evicted(run(HNU, COMPACT, nodes, pods, evictor=True, maxNoOfPodsToEvictTotal=2)) == ["a1", "c1"]
    # n2's b2 stays (and the room planned for it on n4 stays reserved)
    assert evicted(run(HNU, COMPACT, nodes, pods, evictor=True, maxNoOfPodsToEvictPerNode=1)) == [
        "a1",
        "c1",
        "b1",
    ]


def test_evictable_namespaces_and_node_fit_evictor() -> None:
    nodes, pods = spread_out()
    pods[0] = pod("a1", "n1", namespace="kube-system")
    excluded = {**COMPACT, "evictableNamespaces": {"exclude": ["kube-system"]}}
    assert evicted(run(HNU, excluded, nodes, pods, evictor=True)) == ["c1", "b1", "b2"]  # n1 stays whole
    assert evicted(run(HNU, COMPACT, *spread_out(), evictor={"nodeFit": True})) == [
        "a1",
        "c1",
        "b1",
        "b2",
    ]


# ----------------------------------------------------------------------------- properties


@dataclass(frozen=True)
class P:
    name: str
    node: str
    cpu: int  # millicores
    pinned: bool  # nodeSelector on its own node: fits nowhere else


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[tuple[str, int, bool]], list[P]]:
    n = draw(st.integers(2, 5))
    nodes = [(f"n{i}", draw(st.sampled_from([1000, 2000, 4000])), draw(st.booleans())) for i in range(n)]
    nodes = [(name, cpu, cordoned and i > 0) for i, (name, cpu, cordoned) in enumerate(nodes)]
    pods: list[P] = []
    for name, cpu, _ in nodes:
        # at most 50% of the node, so that every node is under the thresholds
        budget = cpu // 2
        for j in range(draw(st.integers(0, 3))):
            size = draw(st.integers(1, 10)) * 50
            if size > budget:
                break
            budget -= size
            pods.append(P(f"{name}-p{j}", name, size, draw(st.booleans()) and draw(st.booleans())))
    return nodes, pods


def build(cluster: tuple[list[tuple[str, int, bool]], list[P]]) -> tuple[list[Node], list[Pod]]:
    node_specs, pod_specs = cluster
    nodes = [
        builders.node(name, cpu=f"{cpu}m", memory="8Gi", pods="4", unschedulable=cordoned or None)
        for name, cpu, cordoned in node_specs
    ]
    pods = [
        builders.pod(
            p.name,
            node=p.node,
            uid=p.name,
            cpu=f"{p.cpu}m",
            memory="0",
            owner=("ReplicaSet", "rs"),
            node_selector={"kubernetes.io/hostname": p.node} if p.pinned else None,
        )
        for p in pod_specs
    ]
    return nodes, pods


def assignable(moved: list[P], kept: dict[str, tuple[int, int]]) -> bool:
    """Whether the moved pods can all be placed on the kept nodes (free cpu, free pod slots) at once:
    an exhaustive search (the clusters are small). Pinned pods fit no other node."""
    if any(p.pinned for p in moved):
        return False
    names = list(kept)
    for choice in itertools.product(names, repeat=len(moved)):
        cpu = {n: kept[n][0] for n in names}
        slots = {n: kept[n][1] for n in names}
        for p, n in zip(moved, choice, strict=True):
            cpu[n] -= p.cpu
            slots[n] -= 1
        if all(v >= 0 for v in cpu.values()) and all(v >= 0 for v in slots.values()):
            return True
    return False


@settings(max_examples=150, deadline=None)
@given(cluster=clusters(), node_fit=st.booleans())
def test_property_evicted_pods_have_somewhere_to_go(
    cluster: tuple[list[tuple[str, int, bool]], list[P]], node_fit: bool
) -> None:
    node_specs, pod_specs = cluster
    nodes, pods = build(cluster)
    result = run(
        HNU,
        {"thresholds": {"cpu": 50, "pods": 100}, "compactWhenAllUnderutilized": True},
        nodes,
        pods,
        evictor={"nodeFit": node_fit},
    )
    gone = {r.name for r in result.evictions}
    by_name = {p.name: p for p in pod_specs}
    moved = [by_name[name] for name in sorted(gone)]
    # a pod that has nowhere else to go (pinned to its node) is never evicted
    assert not any(p.pinned for p in moved)
    emptied = {p.node for p in moved}
    # whole nodes are emptied: every pod of an emptied node went
    assert all(p.name in gone for p in pod_specs if p.node in emptied)
    # the cluster keeps a schedulable node, and the kept ones absorb every moved pod at once
    kept = {
        name: (
            cpu - sum(p.cpu for p in pod_specs if p.node == name),
            4 - sum(p.node == name for p in pod_specs),
        )
        for name, cpu, cordoned in node_specs
        if name not in emptied and not cordoned
    }
    if moved:
        assert kept
        assert assignable(moved, kept)
    assert len(emptied) < len(node_specs)
