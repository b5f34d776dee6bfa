"""The spread counters of the placement model: those made for a pod class (an owner's default
constraints share one pass over the owner's pods; each constraint keeps to its own eligible
nodes) and then kept in step by the bind and terminate walks must hold what counters made from
scratch over the same snapshot hold."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
from tests import builders

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import affinity as k8s_affinity
from desched.k8s import topologyspread as k8s_tsc
from desched.k8s.objects import Pod, TopologySpreadConstraint
from desched.k8s.topologyspread import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY
from desched.scheduling.placement import PlacementOptions, PlacementSimulator
from desched.scheduling.placement.state import ClusterState, DomainCounter, SpreadConstraint

HOST = k8s_tsc.LABEL_HOSTNAME
ZONE = "topology.kubernetes.io/zone"
NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
OWNER = ("ReplicaSet", "web-abc")
SPOT = {"key": "spot", "value": "true", "effect": "NoSchedule"}

#: two default constraints that differ in their eligible nodes: the zone one honours taints (a
#: node the pod does not tolerate is no domain of it, while another node of its zone may be),
#: the hostname one does not
DEFAULTS = k8s_tsc.DefaultConstraints(
    (
        TopologySpreadConstraint(max_skew=1, topology_key=HOST, when_unsatisfiable=SCHEDULE_ANYWAY),
        TopologySpreadConstraint(
            max_skew=1, topology_key=ZONE, when_unsatisfiable=SCHEDULE_ANYWAY, node_taints_policy="Honor"
        ),
    )
)


def nodes() -> list[object]:
    return [
        builders.node("n0", zone="a"),
        builders.node("n1", zone="a", taints=[SPOT]),
        builders.node("n2", zone="b", taints=[SPOT]),
        builders.node("n3", zone="b"),
        builders.node("n4"),  # no zone: a hostname domain only
    ]


def web(name: str, node: str | None = None, **kw: object) -> Pod:
    return builders.pod(name, node=node, owner=OWNER, labels={"app": "web"}, cpu="100m", **kw)


def snapshot(pods: list[Pod]) -> ClusterSnapshot:
    return ClusterSnapshot(nodes=nodes(), pods=pods)  # type: ignore[arg-type]


def view(con: SpreadConstraint) -> tuple[object, ...]:
    counter: DomainCounter = con.counter
    assert all(k > 0 for k in counter.hist.values())  # (a count no domain has is no entry)
    hist = dict(sorted(counter.hist.items()))
    return (con.key, dict(sorted(counter.counts.items())), hist, counter.min_count, len(counter.domains))


def counters(c: ClusterState, pod: Pod) -> list[tuple[object, ...]]:
    own = c.spread_constraints(pod, DO_NOT_SCHEDULE) + c.spread_constraints(pod, SCHEDULE_ANYWAY)
    defaults = c.default_spread_constraints(pod, DO_NOT_SCHEDULE) + c.default_spread_constraints(
        pod, SCHEDULE_ANYWAY
    )
    return [view(con) for con in own + defaults]


def test_an_owners_default_counters_keep_to_each_constraints_eligible_nodes() -> None:
    pods = [web(f"web-{i}", f"n{i}") for i in range(5)]
    c = ClusterState(snapshot(pods), defaults=DEFAULTS)
    host, zone = c.default_spread_constraints(web("new"), SCHEDULE_ANYWAY)
    # the pods on the tainted n1 and n2 count for the hostname constraint, not for the zone one
    # (though zones a and b are domains of it, by n0 and n3)
    assert dict(host.counter.counts) == {f"n{i}": 1 for i in range(5)}
    assert dict(zone.counter.counts) == {"a": 1, "b": 1}
    assert host.counter.min_count == 1 and zone.counter.min_count == 1
    # a pod tolerating the taint: the same hostname domains, its own count of the zones
    tolerating = web("new", tolerations=[builders.toleration("spot", "true")])
    host2, zone2 = c.default_spread_constraints(tolerating, SCHEDULE_ANYWAY)
    assert host2.counter is host.counter
    assert dict(zone2.counter.counts) == {"a": 2, "b": 2}


def test_counters_kept_in_step_by_binds_and_terminations_equal_fresh_ones() -> None:
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            },
            {
                "maxSkew": 2,
                "topologyKey": HOST,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
            },
        ]
    }
    existing = [web("web-0", "n0"), web("web-1", "n2"), web("web-2", "n4")]
    snap = snapshot(existing)
    sim = PlacementSimulator(snap, PlacementOptions(default_constraints=DEFAULTS))
    plain, spreading = web("probe"), web("probe-s", spec=spread)
    before = counters(sim.cluster, plain) + counters(sim.cluster, spreading)
    assert before == counters(ClusterState(snapshot(existing), defaults=DEFAULTS), plain) + counters(
        ClusterState(snapshot(existing), defaults=DEFAULTS), spreading
    )
    # binds, a termination and an unbind walk the counters made above
    for name, node in (("web-3", "n1"), ("web-4", "n3"), ("web-5", "n3")):
        sim.bind(web(name, node))
    gone = existing[1]
    terminating = msgspec.structs.replace(
        gone, metadata=msgspec.structs.replace(gone.metadata, deletion_timestamp=NOW)
    )
    sim.terminate(gone, terminating)
    sim.unbind(existing[2])
    fresh = ClusterState(snap.copy(), defaults=DEFAULTS)
    kept = counters(sim.cluster, plain) + counters(sim.cluster, spreading)
    assert kept == counters(fresh, plain) + counters(fresh, spreading)
    assert kept != before


def affinity(
    *terms: dict[str, object], preferred: list[dict[str, object]] | None = None
) -> dict[str, object]:
    node_affinity: dict[str, object] = {}
    if terms:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": list(terms)}
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return {"nodeAffinity": node_affinity}


def expr(key: str, operator: str, *values: str) -> dict[str, object]:
    return (
        {"key": key, "operator": operator, "values": list(values)}
        if values
        else {"key": key, "operator": operator}
    )


def test_node_affinity_judged_per_group_of_alike_nodes_is_judged_per_node() -> None:
    # nodes alike in the labels a pod's node affinity reads share its verdict; a term reading a
    # node's name (matchFields) is judged node by node
    cluster = [
        builders.node(
            f"n{i}", zone="ab"[i % 2], labels={"disk": "ssd" if i < 3 else "hdd", "gen": str(i % 3)}
        )
        for i in range(6)
    ] + [builders.node("bare", hostname_label=False, cpu="4")]
    pods = [
        web("selector", node_selector={"disk": "ssd"}),
        web("in", affinity=affinity({"matchExpressions": [expr(ZONE, "In", "a")]})),
        web(
            "gt", affinity=affinity({"matchExpressions": [expr("gen", "Gt", "0"), expr("disk", "In", "ssd")]})
        ),
        web("absent", affinity=affinity({"matchExpressions": [expr(ZONE, "DoesNotExist")]})),
        web("name", affinity=affinity({"matchFields": [expr("metadata.name", "In", "n4")]})),
        web(
            "either",
            node_selector={"disk": "hdd"},
            affinity=affinity(
                {"matchFields": [expr("metadata.name", "In", "n1")]},
                {"matchExpressions": [expr("gen", "In", "2")]},
            ),
        ),
        web(
            "preferred",
            affinity=affinity(
                preferred=[
                    {"weight": 7, "preference": {"matchExpressions": [expr("disk", "In", "ssd")]}},
                    {"weight": 5, "preference": {"matchFields": [expr("metadata.name", "NotIn", "n0")]}},
                ]
            ),
        ),
    ]
    c = ClusterState(ClusterSnapshot(nodes=cluster), defaults=DEFAULTS)
    for p in pods:
        per_node = [k8s_affinity.pod_matches_node_selector(p, n) for n in c.nodes]
        assert c.node_affinity_ok(p) == per_node, p.metadata.name
        assert c.preferred_node_affinity(p) == [
            k8s_affinity.preferred_node_affinity_score(p, n) for n in c.nodes
        ]
        reasons, passing = c.static_reasons(p)
        assert passing == [i for i, ok in enumerate(per_node) if ok], p.metadata.name
        assert all(bool(r) != ok for r, ok in zip(reasons, per_node, strict=True))
        tsc = TopologySpreadConstraint(max_skew=1, topology_key=ZONE, when_unsatisfiable=DO_NOT_SCHEDULE)
        eligible = c.eligible(p, (ZONE,), tsc)
        assert eligible == [
            ok and ZONE in (n.metadata.labels or {}) for ok, n in zip(per_node, c.nodes, strict=True)
        ]
    name_only = c.node_affinity_ok(pods[4])
    assert name_only == [n.metadata.name == "n4" for n in c.nodes]


def test_the_namespaces_a_namespace_selector_sees_are_those_of_the_pods_there_now() -> None:
    # taken from the snapshot's namespaces with pods, not a pass over the pods: a namespace
    # whose pods are all gone is not one (unless a Namespace object names it)
    pods = [
        web("a-0", "n0"),
        builders.pod("b-0", namespace="b", node="n1"),
        builders.pod("c-0", namespace="c"),
    ]
    snap = ClusterSnapshot(
        nodes=nodes(), pods=pods, namespaces=[builders.namespace("d", labels={"team": "x"})]
    )  # type: ignore[arg-type]
    assert snap.remove_pod(pods[1])
    c = ClusterState(snap)
    assert c.namespace_labels == k8s_affinity.namespace_labels(snap.iter_pods(), snap.namespaces)
    assert sorted(c.namespace_labels) == ["c", "d", "default"]
    assert c.namespace_labels["d"] == {"team": "x", k8s_affinity.NAMESPACE_NAME_LABEL: "d"}
