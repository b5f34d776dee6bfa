"""The hard topology-spread filter of the node search over a key with few domains (zones): it
reads a per-node list memoised per set of domains over the limit, which must drop exactly the
nodes a check of each node's domain drops, as the counts move with each pod bound."""

from __future__ import annotations

import msgspec
from tests.unit.scheduling.objects import node, pod, snap

from desched.scheduling.placement import PlacementSimulator

ZONE = "topology.kubernetes.io/zone"
TSC = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "api"}},
        }
    ]
}


def test_the_zone_filter_drops_the_nodes_of_the_domains_over_the_limit_as_they_change() -> None:
    nodes = [node(f"{z}{k}", zone=z) for z in "abc" for k in range(4)]
    # zone a holds three matching pods, b and c one each: exactly one domain is over the limit
    pods = [pod(f"api-{k}", on, labels={"app": "api"}) for k, on in enumerate(["a0", "a1", "a2", "b0", "c0"])]
    sim = PlacementSimulator(snap(nodes, pods))
    zones = sim.cluster.values_of(ZONE)
    seen: set[frozenset[str]] = set()
    for k in range(12):
        p = pod(f"new-{k}", labels={"app": "api"}, spec=TSC)
        pre = sim.prefilter(p)
        ((con, limit),) = pre.hard
        over = frozenset(z for z in "abc" if con.counter.counts.get(z, 0) > limit)
        if k == 0:
            assert over == {"a"}
        seen.add(over)
        part = list(range(sim.cluster.n))
        for drop in pre.blockers:
            part = drop(part)
        assert part == [i for i in range(sim.cluster.n) if zones[i] not in over]
        d = sim.decide(p)
        assert d.node[0] not in over
        bound = msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, node_name=d.node))
        sim.bind(bound)
    # the counts moved through several sets of domains over the limit (one, two, none)
    assert len(seen) >= 3, seen
