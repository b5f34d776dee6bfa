"""RemoveDuplicates: args validation through the policy loader, and edge cases the upstream
fixtures leave out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tests import builders
from tests.unit.plugins.harness import NOW, evicted, framework, load, run

from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.findings import Finding, Verdict
from desched.k8s.objects import Node, Pod
from desched.plugins.removeduplicates.args import RemoveDuplicatesArgs

PLUGIN = "RemoveDuplicates"


def node(
    name: str, *, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None
) -> Node:
    return builders.node(name, hostname_label=False, labels=labels or {}, taints=taints or [])


def pod(
    name: str,
    node_name: str,
    *,
    ns: str = "default",
    owners: list[tuple[str, str]] | None = None,
    images: tuple[str, ...] = ("nginx",),
    age_minutes: int = 60,
    node_selector: dict[str, str] | None = None,
    phase: str = "Running",
) -> Pod:
    refs = [
        builders.owner_ref(owner, controller=None)
        for owner in (owners if owners is not None else [("ReplicaSet", "rs")])
    ]
    return builders.pod(
        name,
        namespace=ns,
        node=node_name,
        uid=f"{ns}-{name}",
        created=(NOW - timedelta(minutes=age_minutes)).isoformat(),
        node_selector=node_selector or {},
        containers=[{"name": f"c{i}", "image": image} for i, image in enumerate(images)],
        phase=phase,
        metadata={"ownerReferences": refs},
    )


def three_nodes() -> list[Node]:
    return [node("n1"), node("n2"), node("n3")]


def test_args() -> None:
    loaded = load(PLUGIN, {"excludeOwnerKinds": ["Job"], "namespaces": {"exclude": ["x"]}})
    args = loaded.profiles[0].args[PLUGIN]
    assert isinstance(args, RemoveDuplicatesArgs) and args.exclude_owner_kinds == ["Job"]
    with pytest.raises(
        PolicyError,
        match=r"args\.namespaces\.exclude: cannot be set with include "
        r"\(got include=\['a'\], exclude=\['b'\]\)",
    ):
        load(PLUGIN, {"namespaces": {"include": ["a"], "exclude": ["b"]}})
    with pytest.raises(PolicyError, match="unknown field"):
        load(PLUGIN, {"excludeOwnerKind": ["Job"]})
    # no args needed
    assert load(PLUGIN, None).profiles[0].args[PLUGIN] == RemoveDuplicatesArgs()


def test_spreads_down_to_an_even_share_evicting_the_youngest() -> None:
    pods = [pod(f"p{i}", "n1", age_minutes=10 * (i + 1)) for i in range(4)]  # p0 youngest
    pods.append(pod("q", "n2"))
    result = run(PLUGIN, {}, three_nodes(), pods)
    # 5 pods over 3 nodes: at most ceil(5/3) = 2 per node, so n1 keeps 2 of its 4
    assert evicted(result) == ["p0", "p1"]
    assert "at most 2 per node" in result.evictions[0].reason


def test_different_images_or_owners_are_not_duplicates() -> None:
    pods = [
        pod("a", "n1"),
        pod("b", "n1", images=("nginx", "sidecar")),
        pod("c", "n1", owners=[("ReplicaSet", "x")]),
    ]
    pods.append(pod("d", "n1", owners=[("ReplicaSet", "rs"), ("ReplicaSet", "other")]))
    assert evicted(run(PLUGIN, {}, three_nodes(), pods)) == []


def test_image_order_does_not_matter() -> None:
    pods = [pod("a", "n1", images=("x", "y")), pod("b", "n1", images=("y", "x"))]
    assert evicted(run(PLUGIN, {}, three_nodes(), pods)) == ["a"]  # as old as b: the name decides


def test_bare_finished_and_excluded_pods_are_left_alone() -> None:
    pods = [pod("a", "n1", owners=[]), pod("b", "n1", owners=[])]
    pods += [pod("c", "n1", phase="Succeeded"), pod("d", "n1", phase="Failed"), pod("e", "n1")]
    assert evicted(run(PLUGIN, {}, three_nodes(), pods)) == []
    jobs = [pod(f"j{i}", "n1", owners=[("Job", "j")]) for i in range(3)]
    assert evicted(run(PLUGIN, {"excludeOwnerKinds": ["Job"]}, three_nodes(), jobs)) == []
    assert len(evicted(run(PLUGIN, {}, three_nodes(), jobs))) == 2


def test_namespaces() -> None:
    pods = [pod(f"a{i}", "n1", ns="a") for i in range(3)] + [pod(f"b{i}", "n1", ns="b") for i in range(3)]
    assert evicted(run(PLUGIN, {"namespaces": {"include": ["b"]}}, three_nodes(), pods)) == ["b0", "b1"]
    assert evicted(run(PLUGIN, {"namespaces": {"exclude": ["b"]}}, three_nodes(), pods)) == ["a0", "a1"]


def test_feasible_nodes_follow_node_selector_and_taints() -> None:
    nodes = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "a"}), node("n3")]
    pods = [pod(f"p{i}", "n1", node_selector={"zone": "a"}, age_minutes=i + 1) for i in range(4)]
    # only n1 and n2 fit: keep ceil(4/2) = 2
    assert evicted(run(PLUGIN, {}, nodes, pods)) == ["p0", "p1"]
    taint = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    nodes = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "a"}, taints=taint), node("n3")]
    # only n1 fits: fewer than two feasible nodes, nothing to gain
    assert evicted(run(PLUGIN, {}, nodes, pods)) == []
    prefer = [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]
    nodes = [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "a"}, taints=prefer), node("n3")]
    assert len(evicted(run(PLUGIN, {}, nodes, pods))) == 2


def test_per_node_and_total_limits() -> None:
    pods = [pod(f"a{i}", "n1") for i in range(5)] + [
        pod(f"b{i}", "n2", owners=[("ReplicaSet", "b")]) for i in range(5)
    ]
    assert len(evicted(run(PLUGIN, {}, three_nodes(), pods))) == 6
    per_node = evicted(run(PLUGIN, {}, three_nodes(), pods, maxNoOfPodsToEvictPerNode=1))
    assert len(per_node) == 2 and {p[0] for p in per_node} == {"a", "b"}
    assert len(evicted(run(PLUGIN, {}, three_nodes(), pods, maxNoOfPodsToEvictTotal=4))) == 4


def test_a_pod_of_two_owners_is_evicted_once() -> None:
    owners = [("ReplicaSet", "one"), ("ReplicaSet", "two")]
    pods = [pod(f"p{i}", "n1", owners=owners) for i in range(4)]
    result = run(PLUGIN, {}, three_nodes(), pods)
    names = evicted(result)
    assert len(names) == len(set(names)) == 2


def test_already_even_spread_evicts_nothing() -> None:
    pods = [pod("a", "n1"), pod("b", "n1"), pod("c", "n2"), pod("d", "n2"), pod("e", "n3")]
    # 5 pods, 3 nodes: at most 2 per node, which every node already respects
    assert evicted(run(PLUGIN, {}, three_nodes(), pods)) == []


# ----------------------------------------------------------------------------- findings


def left_reasons(args: dict[str, Any], nodes: list[Node], pods: list[Pod]) -> dict[str, list[str]]:
    """Runs one cycle with findings on: the reasons given for each pod left, by pod name."""
    snapshot = ClusterSnapshot(nodes=nodes, pods=pods)
    fw = framework(PLUGIN, args)
    found: list[Finding] = []
    fw.findings.attach(found.append)
    fw.run_cycle(snapshot, SimulatedBackend(snapshot))
    out: dict[str, list[str]] = {}
    for f in found:
        assert f.plugin == PLUGIN
        if f.verdict is Verdict.LEFT:
            out.setdefault(f.name, []).append(f.reason)
    return out


def test_findings_name_the_pods_kept_with_the_share() -> None:
    pods = [pod(f"p{i}", "n1", age_minutes=10 * (i + 1)) for i in range(4)]  # p0 youngest
    pods.append(pod("q", "n2"))
    left = left_reasons({}, three_nodes(), pods)
    # n1 keeps 2 of its 4 (p3 oldest, first; p2 within the share); p0 and p1 are evicted
    share = (
        "node n1 holds 4 pods of owner ReplicaSet/rs (3 duplicates), 2 above the per-node share 2 "
        "(its 5 pods over 3 feasible nodes: average 1.67, rounded up)"
    )
    assert left == {
        "p3": [f"the first pod of its owner on the node stays; {share}"],
        "p2": [f"within the per-node share; {share}"],
    }


def test_findings_when_the_duplicates_are_within_the_share() -> None:
    # 2 on n1, 2 on n2, 0 on n3... 4 pods over 3 nodes: share ceil(4/3) = 2, nothing above it
    pods = [
        pod("a1", "n1"),
        pod("a2", "n1", age_minutes=30),
        pod("b1", "n2"),
        pod("b2", "n2", age_minutes=30),
    ]
    left = left_reasons({}, three_nodes(), pods)
    assert left["a2"] == [
        "within the per-node share; node n1 holds 2 pods of owner ReplicaSet/rs (1 duplicates), 0 above "
        "the per-node share 2 (its 4 pods over 3 feasible nodes: average 1.33, rounded up)"
    ]
    assert set(left) == {"a1", "a2", "b1", "b2"}


def test_findings_when_the_owner_fits_one_node() -> None:
    pods = [pod(f"p{i}", "n1", node_selector={"pool": "x"}) for i in range(3)]
    nodes = [node("n1", labels={"pool": "x"}), node("n2"), node("n3")]
    left = left_reasons({}, nodes, pods)
    why = (
        "2 duplicates of owner ReplicaSet/rs on node n1, but its pods fit fewer than 2 nodes "
        "(taints, node selector, node affinity): nothing to spread them over"
    )
    assert left == {name: [why] for name in ("p0", "p1", "p2")}


def test_findings_do_not_change_the_decisions() -> None:
    pods = [pod(f"p{i}", "n1", age_minutes=10 * (i + 1)) for i in range(4)]
    pods += [
        pod("q", "n2"),
        pod("r1", "n3", owners=[("ReplicaSet", "x")]),
        pod("r2", "n3", owners=[("ReplicaSet", "x")]),
    ]
    decided = []
    for listening in (False, True):
        snapshot = ClusterSnapshot(nodes=three_nodes(), pods=pods)
        fw = framework(PLUGIN, {})
        if listening:
            fw.findings.attach(lambda f: None)
        assert fw.findings.enabled is listening
        decided.append(
            [(r.name, r.reason) for r in fw.run_cycle(snapshot, SimulatedBackend(snapshot)).evictions]
        )
    assert decided[0] == decided[1] and [name for name, _ in decided[0]] == ["p0", "p1", "r1"]
