"""RemovePodsViolatingPodAffinity agrees with desched's model of kube-scheduler (the placement
simulator `simulate` uses): a pod is evicted exactly when the scheduler, asked to place it again
without it, would refuse its own node and accept another one. Hypothesis draws small clusters
(zones, nodes without the zone label, peers in two namespaces) and one candidate with one or two
required pod-affinity terms; nodes are large and untainted, so only pod affinity decides."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import builders
from tests.unit.plugins.harness import NOW, evicted, framework, run

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import Node, Pod
from desched.scheduling.placement import PlacementSimulator

PLUGIN = "RemovePodsViolatingPodAffinity"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
#: The plugin with its default args, DefaultEvictor on with its own.
POLICY: dict[str, Any] = {"configured": False, "evictor": True}
labels_st = st.fixed_dictionaries(
    {}, optional={"app": st.sampled_from(["db", "cache"]), "tier": st.sampled_from(["x", "y"])}
)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[Node], list[Pod], Pod]:
    n = draw(st.integers(2, 4))
    nodes = [builders.node(f"n{i}", zone=draw(st.sampled_from(["a", "b", None])), cpu="64") for i in range(n)]
    names = [f"n{i}" for i in range(n)]
    peers = [
        builders.pod(
            f"peer{j}",
            namespace=draw(st.sampled_from(["default", "other"])),
            node=draw(st.sampled_from(names)),
            uid=f"peer{j}",
            labels=draw(labels_st),
            owner=("ReplicaSet", f"rs{j}"),
        )
        for j in range(draw(st.integers(0, 4)))
    ]
    terms: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 2))):
        key, value = draw(st.sampled_from([("app", "db"), ("app", "cache"), ("tier", "x")]))
        term: dict[str, Any] = {
            "labelSelector": {"matchLabels": {key: value}},
            "topologyKey": draw(st.sampled_from([ZONE, HOST])),
        }
        if draw(st.booleans()):
            term["namespaces"] = ["default", "other"]
        terms.append(term)
    candidate = builders.pod(
        "web",
        node=draw(st.sampled_from(names)),
        uid="web",
        labels=draw(labels_st),
        owner=("ReplicaSet", "web"),
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}},
    )
    return nodes, peers, candidate


def schedulable(nodes: list[Node], others: list[Pod], pod: Pod, *, own_node: bool) -> bool:
    """Whether the placement simulator, over the whole cluster of ``nodes`` and ``others``, would
    bind ``pod`` (unbound again) to its own node (``own_node``) or else to another node: a
    required node affinity on the hostname confines it, leaving its pod affinity as it is."""
    snapshot = ClusterSnapshot(nodes=nodes, pods=others)
    doc = msgspec.to_builtins(pod)
    own = doc["spec"].pop("nodeName")
    doc["spec"]["affinity"]["nodeAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": HOST, "operator": "In" if own_node else "NotIn", "values": [own]}
                    ]
                }
            ]
        }
    }
    return PlacementSimulator(snapshot).decide(msgspec.convert(doc, Pod)).node != ""


@settings(max_examples=300, deadline=None)
@given(scenario=scenarios())
def test_evicted_exactly_when_the_scheduler_would_move_it(
    scenario: tuple[list[Node], list[Pod], Pod],
) -> None:
    nodes, peers, candidate = scenario
    result = run(PLUGIN, None, nodes, [*peers, candidate], **POLICY)
    expected = not schedulable(nodes, peers, candidate, own_node=True) and schedulable(
        nodes, peers, candidate, own_node=False
    )
    assert evicted(result) == (["web"] if expected else [])


def test_a_pair_in_two_zones_where_the_replacement_lands() -> None:
    """Two pods that only have each other, in zones a and b (the README's case): one is evicted.
    While it terminates kube-scheduler still counts it (InterPodAffinity, unlike PodTopologySpread,
    does not skip terminating pods), so its replacement's affinity holds in its old zone as in the
    other's, and on these equal nodes it lands back on its own node: flagged same-node, and
    evicted again in the next cycle. Placed once the evicted pod is gone (``--terminating-pods
    gone``) it can only join the other."""
    from desched.scheduling.placement import PlacementOptions
    from desched.simulation import EvictionRecorder, simulate

    def cluster() -> ClusterSnapshot:
        nodes = [builders.node(n, zone=z, cpu="4") for n, z in (("a1", "za"), ("b1", "zb"), ("c1", "zc"))]
        term = {"labelSelector": {"matchLabels": {"app": "g"}}, "topologyKey": ZONE}
        pods = [
            builders.pod(
                name,
                node=on,
                uid=name,
                labels={"app": "g"},
                owner=("ReplicaSet", "g"),
                cpu="100m",
                affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
            )
            for name, on in (("g0", "a1"), ("g1", "b1"))
        ]
        return ClusterSnapshot(nodes=nodes, pods=pods)

    def run_cycle(snap: ClusterSnapshot, backend: EvictionRecorder, k: int) -> Any:
        return framework(PLUGIN, None, **POLICY).run_cycle(snap, backend)

    held = simulate(cluster(), run_cycle, now=NOW, cycles=2)
    first = [p for p in held.placements if p.cycle == 1]
    assert [(p.name, p.evicted_from, p.node, p.same_node) for p in first] == [("g0", "a1", "a1", True)]
    assert [(t.cycle, t.kind) for t in held.thrashing] == [
        (1, "same-node"),
        (2, "re-evicted"),
        (2, "same-node"),
    ]
    gone = simulate(cluster(), run_cycle, now=NOW, options=PlacementOptions(terminating="gone"))
    assert [(p.name, p.node) for p in gone.placements] == [("g0", "b1")]
