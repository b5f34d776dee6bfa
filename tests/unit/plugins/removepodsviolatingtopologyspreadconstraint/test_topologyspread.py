"""RemovePodsViolatingTopologySpreadConstraint: args validation through the policy loader, and the
behaviour the upstream fixtures leave out (minDomains, priorities, kept pods, labelSelector,
inclusion policies, other constraints, limits, Sort plugins)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tests import builders
from tests.unit.plugins.harness import NOW, Bound

from desched.framework.findings import Finding, Verdict
from desched.k8s.objects import Node, Pod
from desched.plugins.removepodsviolatingtopologyspreadconstraint._constraints import ConstraintCache
from desched.plugins.removepodsviolatingtopologyspreadconstraint._domains import NamespacePods
from desched.plugins.removepodsviolatingtopologyspreadconstraint.args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
)

PLUGIN = "RemovePodsViolatingTopologySpreadConstraint"
#: The plugin with DefaultEvictor on; evicted pods named namespace/name outside 'default'.
TSC = Bound(PLUGIN, {"evictor": True}, namespaced=True)


# ----------------------------------------------------------------------------- helpers


def node(
    name: str,
    zone: str | None = "a",
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    cpu: str = "4",
    pods: str = "110",
) -> Node:
    all_labels = dict(labels or {})
    if zone is not None:
        all_labels["zone"] = zone
    return builders.node(name, labels=all_labels, taints=taints or [], cpu=cpu, memory="8Gi", pods=pods)


def spread(
    key: str = "zone", *, skew: int = 1, when: str = "DoNotSchedule", app: str | None = "a", **extra: Any
) -> dict[str, Any]:
    tsc: dict[str, Any] = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if app is not None:
        tsc["labelSelector"] = {"matchLabels": {"app": app}}
    return tsc


def pod(
    name: str,
    node_name: str,
    *,
    ns: str = "default",
    labels: dict[str, str] | None = None,
    tsc: list[dict[str, Any]] | None = None,
    owned: bool = True,
    priority: int | None = None,
    phase: str = "Running",
    age: float = 3600,
    cpu: str = "100m",
    **spec: Any,
) -> Pod:
    return builders.pod(
        name,
        namespace=ns,
        node=node_name,
        uid=f"{ns}-{name}",
        labels={"app": "a"} if labels is None else labels,
        created=(NOW - timedelta(seconds=age)).isoformat().replace("+00:00", "Z"),
        owner=("ReplicaSet", "rs") if owned else None,
        cpu=cpu,
        priority=priority,
        phase=phase,
        spec={"topologySpreadConstraints": [spread()] if tsc is None else tsc, **spec},
    )


def zones(*sizes: int, app: str = "a", prefix: str = "p", **kw: Any) -> tuple[list[Node], list[Pod]]:
    """One node per zone (z0, z1, ...) holding ``sizes[i]`` pods of ``app``."""
    nodes = [node(f"n{i}", f"z{i}") for i in range(len(sizes))]
    pods = [
        pod(f"{prefix}{i}-{k}", f"n{i}", labels={"app": app}, **kw)
        for i, n in enumerate(sizes)
        for k in range(n)
    ]
    return nodes, pods


# ----------------------------------------------------------------------------- args


def test_defaults() -> None:
    args = RemovePodsViolatingTopologySpreadConstraintArgs()
    assert args.constraints == ["DoNotSchedule"]
    assert args.topology_balance_node_fit is True
    assert args.namespaces is None and args.label_selector is None
    loaded = TSC.load_args(None)
    assert loaded.constraints == ["DoNotSchedule"] and loaded.topology_balance_node_fit is True


def test_null_means_default() -> None:
    args = TSC.load_args({"constraints": None, "topologyBalanceNodeFit": None})
    assert args.constraints == ["DoNotSchedule"]
    assert args.topology_balance_node_fit is True


def test_wire_names() -> None:
    args = TSC.load_args(
        {
            "constraints": ["ScheduleAnyway", "DoNotSchedule"],
            "topologyBalanceNodeFit": False,
            "namespaces": {"exclude": ["kube-system"]},
            "labelSelector": {"matchLabels": {"team": "x"}},
        }
    )
    assert args.constraints == ["ScheduleAnyway", "DoNotSchedule"]
    assert args.topology_balance_node_fit is False
    assert args.namespaces is not None and args.namespaces.exclude == ["kube-system"]


def test_unknown_constraint_kind() -> None:
    msg = TSC.load_error({"constraints": ["DoNotSchedule", "Sometimes"]})
    assert "pluginConfig[0].args.constraints[1]: " in msg
    assert "must be one of DoNotSchedule, ScheduleAnyway, got 'Sometimes'" in msg


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        (
            {"namespaces": {"include": ["a"], "exclude": ["b"]}},
            "args.namespaces.exclude",
            "cannot be set with include (got include=['a'], exclude=['b'])",
        ),
        (
            {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]}},
            "args.labelSelector",
            "Bad",
        ),
        ({"topologyBalanceNodeFit": "maybe"}, "args.topologyBalanceNodeFit", "bool"),
        ({"includeSoftConstraints": True}, "args.includeSoftConstraints", "unknown field"),
    ],
)
def test_invalid_args(args: dict[str, Any], field: str, words: str) -> None:
    msg = TSC.load_error(args)
    assert field in msg and words in msg


def test_empty_constraint_list_balances_nothing() -> None:
    nodes, pods = zones(4, 0)
    assert TSC.evicted(nodes, pods, {"constraints": []}) == []
    assert len(TSC.evicted(nodes, pods)) == 2


# ----------------------------------------------------------------------------- which pods leave


def test_lowest_priority_leaves_first() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [
        pod("a-high", "n0", priority=1000),
        pod("b-low", "n0", priority=10),
        pod("c-mid", "n0", priority=100),
    ]
    assert TSC.evicted(nodes, pods) == ["b-low"]


def test_pods_without_node_selector_leave_before_pinned_ones() -> None:
    linux = {"kubernetes.io/os": "linux"}
    nodes = [node("n0", "z0", labels=linux), node("n1", "z1", labels=linux)]
    pods = [pod("a", "n0"), pod("b", "n0"), pod("z-pinned", "n0", nodeSelector=linux)]
    # z-pinned is last by name, but a pod with a nodeSelector is kept before a free one.
    assert TSC.evicted(nodes, pods) == ["b"]


def test_ties_leave_last_name_first() -> None:
    nodes, pods = zones(5, 1)
    assert TSC.evicted(nodes, pods) == ["p0-4", "p0-3"]


def test_non_evictable_pods_count_but_stay() -> None:
    # Bare pods are protected by DefaultEvictor. They still make zone z0 the crowded one
    # (upstream would not count them and would see [1, 0], balanced).
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [pod("bare-1", "n0", owned=False), pod("bare-2", "n0", owned=False), pod("a", "n0")]
    assert TSC.evicted(nodes, pods) == ["a"]


def test_nothing_evictable_nothing_evicted() -> None:
    nodes, pods = zones(4, 0, owned=False)
    assert TSC.evicted(nodes, pods) == []


def test_label_selector_only_limits_who_may_leave() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [
        pod("a", "n0", labels={"app": "a", "opt-in": "yes"}),
        pod("b", "n0", labels={"app": "a"}),
        pod("c", "n0", labels={"app": "a"}),
    ]
    # All three count: [3, 0] needs one move. c would leave first, but only a is selected.
    assert TSC.evicted(nodes, pods, {"labelSelector": {"matchLabels": {"opt-in": "yes"}}}) == ["a"]
    assert TSC.evicted(nodes, pods, {"labelSelector": {"matchLabels": {"opt-in": "no"}}}) == []


def test_sort_plugins_order_pods_of_equal_standing() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [pod("a-old", "n0", age=9000), pod("b-new", "n0", age=60), pod("c-mid", "n0", age=600)]
    assert TSC.evicted(nodes, pods) == ["c-mid"]
    assert TSC.evicted(nodes, pods, sort=["PodAgeSort"]) == ["a-old"]


# ----------------------------------------------------------------------------- counting


def test_finished_and_terminating_pods_do_not_count() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [pod("a", "n0"), pod("b", "n0", phase="Succeeded"), pod("c", "n0", phase="Failed")]
    assert TSC.evicted(nodes, pods) == []


def test_pods_on_other_nodes_do_not_count() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [pod("a", "n0"), pod("b", "gone"), pod("c", "gone")]
    assert TSC.evicted(nodes, pods) == []


def test_only_pods_matching_the_selector_count() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [pod("a", "n0"), pod("b", "n0", labels={"app": "other"}), pod("c", "n1")]
    assert TSC.evicted(nodes, pods) == []


def test_constraint_without_label_selector_matches_nothing() -> None:
    nodes, pods = zones(4, 0, tsc=[spread(app=None)])
    assert TSC.evicted(nodes, pods) == []


def test_match_label_keys_split_constraints() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1")]
    tsc = [spread(matchLabelKeys=["rev"])]
    mixed = [pod(f"p{i}", "n0", labels={"app": "a", "rev": str(i)}, tsc=tsc) for i in range(2)]
    assert TSC.evicted(nodes, mixed) == []  # two revisions of [1, 0] each, not one of [2, 0]
    same = [pod(f"p{i}", "n0", labels={"app": "a", "rev": "1"}, tsc=tsc) for i in range(4)]
    assert len(TSC.evicted(nodes, same)) == 2


def test_namespaces_do_not_mix_and_can_be_excluded() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [pod("p0", "n0", ns="x"), pod("p0", "n1", ns="y")]
    assert TSC.evicted(nodes, pods) == []  # [1, 0] and [0, 1], not [1, 1]
    pods += [pod(f"p{i}", "n0", ns="x") for i in (1, 2)] + [pod(f"p{i}", "n1", ns="y") for i in (1, 2)]
    assert sorted(TSC.evicted(nodes, pods)) == ["x/p2", "y/p2"]
    assert TSC.evicted(nodes, pods, {"namespaces": {"include": ["y"]}}) == ["y/p2"]
    assert TSC.evicted(nodes, pods, {"namespaces": {"exclude": ["y"]}}) == ["x/p2"]


def test_invalid_selector_in_a_pod_is_skipped() -> None:
    bad = spread()
    bad["labelSelector"] = {"matchExpressions": [{"key": "app", "operator": "Near"}]}
    nodes = [node("n0", "z0"), node("n1", "z1")]
    pods = [pod("bad", "n0", tsc=[bad])] + [pod(f"p{i}", "n0") for i in range(3)]
    assert TSC.evicted(nodes, pods) == ["p2", "p1"]  # [4, 0]: the bad pod still counts


def test_identical_constraints_are_balanced_once() -> None:
    cache = ConstraintCache()
    a, b = pod("a", "n0"), pod("b", "n1")
    tsc = a.spec.topology_spread_constraints
    assert tsc is not None
    assert cache.build(tsc[0], a) is cache.build(tsc[0], b)
    pinned = pod("c", "n0", nodeSelector={"disk": "ssd"})
    assert cache.build(tsc[0], pinned).key != cache.build(tsc[0], a).key
    ignore = spread(nodeAffinityPolicy="Ignore")
    a2 = pod("a", "n0", tsc=[ignore])
    pinned2 = pod("c", "n0", tsc=[ignore], nodeSelector={"disk": "ssd"})
    assert a2.spec.topology_spread_constraints and pinned2.spec.topology_spread_constraints
    assert (
        cache.build(a2.spec.topology_spread_constraints[0], a2).key
        == cache.build(pinned2.spec.topology_spread_constraints[0], pinned2).key
    )


# ----------------------------------------------------------------------------- inclusion policies


def test_node_taints_policy_honor_leaves_tainted_domains_out() -> None:
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    nodes = [node("n0", "z0"), node("n1", "z1", taints=taint)]
    honor = [spread(nodeTaintsPolicy="Honor")]
    pods = [pod(f"p{i}", "n0", tsc=honor) for i in range(3)]
    assert TSC.evicted(nodes, pods, {"topologyBalanceNodeFit": False}) == []
    ignore = [pod(f"p{i}", "n0") for i in range(3)]
    assert TSC.evicted(nodes, ignore, {"topologyBalanceNodeFit": False}) == ["p2"]


def test_inclusion_policies_do_not_share_domains() -> None:
    # Two constraints on the same key, one honouring taints and one not: each has its own domains.
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    nodes = [node("n0", "z0"), node("n1", "z1", taints=taint)]
    honor = spread(nodeTaintsPolicy="Honor", app="h")
    ignore = spread(when="ScheduleAnyway", app="i")
    pods = [pod("a", "n0", labels={"app": "i"}, tsc=[ignore])]
    pods += [pod(f"h{k}", "n0", labels={"app": "h"}, tsc=[honor]) for k in range(3)]
    pods += [pod(f"i{k}", "n0", labels={"app": "i"}, tsc=[ignore]) for k in range(2)]
    args = {"constraints": ["DoNotSchedule", "ScheduleAnyway"], "topologyBalanceNodeFit": False}
    # app=i: [3, 0] over z0 and the tainted z1; app=h: z0 only, nothing to balance.
    assert TSC.evicted(nodes, pods, args) == ["i1"]


def test_constraints_differing_only_in_node_filter_do_not_double_evict() -> None:
    # Both pods' constraints count the same pods over the same nodes, but one pod has a
    # nodeSelector, so they are two constraints. The second sees the first one's eviction
    # as a pod kube-scheduler will place in z1, and evicts nothing more.
    linux = {"kubernetes.io/os": "linux"}
    nodes = [node("n0", "z0", labels=linux), node("n1", "z1", labels=linux)]
    pods = [pod("a", "n0", nodeSelector=linux), pod("b", "n0"), pod("c", "n0")]
    assert TSC.evicted(nodes, pods) == ["c"]


def test_node_affinity_policy() -> None:
    nodes = [node("n0", "z0", labels={"pool": "x"}), node("n1", "z1", labels={"pool": "y"})]
    pods = [pod(f"p{i}", "n0", nodeSelector={"pool": "x"}) for i in range(3)]
    assert TSC.evicted(nodes, pods, {"topologyBalanceNodeFit": False}) == []  # z1 is no domain of theirs
    ignore = [
        pod(f"p{i}", "n0", nodeSelector={"pool": "x"}, tsc=[spread(nodeAffinityPolicy="Ignore")])
        for i in range(3)
    ]
    # z1 counts now, but no pod fits there; without node fit one leaves to force a scale-up.
    assert TSC.evicted(nodes, ignore) == []
    assert TSC.evicted(nodes, ignore, {"topologyBalanceNodeFit": False}) == ["p2"]


# ----------------------------------------------------------------------------- minDomains


def test_min_domains_never_evicts_a_pod_no_node_can_take() -> None:
    nodes, pods = zones(2, 2, tsc=[spread(minDomains=3)])
    # [2, 2] has skew 0, but with 2 < minDomains=3 domains kube-scheduler's minimum is 0: only a
    # third domain would take a pod, and there is none. With node fit on, no existing node would
    # take it; with node fit off, upstream (no minDomains) sees [2, 2] balanced: nothing either.
    assert TSC.evicted(nodes, pods) == []
    assert TSC.evicted(nodes, pods, {"topologyBalanceNodeFit": False}) == []


def test_min_domains_without_node_fit_balances_the_existing_domains_as_upstream() -> None:
    nodes, pods = zones(5, 0, tsc=[spread(minDomains=3)])
    # upstream ignores minDomains: [5, 0] -> [3, 2]
    assert TSC.evicted(nodes, pods, {"topologyBalanceNodeFit": False}) == ["p0-4", "p0-3"]


def test_min_domains_met_changes_nothing() -> None:
    nodes, pods = zones(2, 2, 1, tsc=[spread(minDomains=3)])
    assert TSC.evicted(nodes, pods, {"topologyBalanceNodeFit": False}) == []


def test_min_domains_counts_missing_domains_in_the_average() -> None:
    nodes, pods = zones(5, 0)
    assert len(TSC.evicted(nodes, pods)) == 2  # [5, 0] -> [3, 2]
    nodes, pods = zones(5, 0, tsc=[spread(minDomains=3)])
    # [5, 0] and a missing domain: ideal 5/3, so z0 keeps 2.
    assert TSC.evicted(nodes, pods) == ["p0-4", "p0-3", "p0-2"]


def test_min_domains_is_ignored_for_schedule_anyway() -> None:
    nodes, pods = zones(2, 2, tsc=[spread(when="ScheduleAnyway", minDomains=3)])
    assert (
        TSC.evicted(nodes, pods, {"constraints": ["ScheduleAnyway"], "topologyBalanceNodeFit": False}) == []
    )


# ----------------------------------------------------------------------------- node fit


def test_node_fit_only_counts_nodes_below_the_average() -> None:
    nodes = [node("n0", "z0"), node("n1", "z1", cpu="150m"), node("n2", "z2")]
    pods = [pod(f"a{i}", "n0") for i in range(3)] + [pod("b0", "n1"), pod("c0", "n2"), pod("c1", "n2")]
    # [3, 1, 2]: ideal 2, only z1 is below it and its node is full.
    assert TSC.evicted(nodes, pods) == []
    assert TSC.evicted(nodes, pods, {"topologyBalanceNodeFit": False}) == ["a2"]


def test_node_fit_looks_through_every_domain_below_the_average() -> None:
    # [4, 0, 0, 0]: ideal 1, zones z1-z3 below it. z1's nodes (the first domains in size order:
    # z1 < z2 < z3 by name) and z2's are full: only z3's second node takes a pod. The nodes of
    # the domains below the average are listed as far as the fit scan asks: it must reach them.
    nodes = [node("n0", "z0")]
    for zone in ("z1", "z2"):
        nodes += [node(f"{zone}-n{k}", zone, cpu="150m") for k in range(3)]
    nodes += [node("z3-n0", "z3", cpu="150m"), node("z3-n1", "z3")]
    pods = [pod(f"a{i}", "n0") for i in range(4)]
    pods += [pod(f"f-{n.metadata.name}", n.metadata.name, labels={"app": "fill"}) for n in nodes[1:-1]]
    # each of the 3 domains below the ideal is owed one pod; only one node of them fits
    assert TSC.evicted(nodes, pods) == ["a3", "a2", "a1"]
    nodes[-1] = node("z3-n1", "z3", cpu="50m")  # now too small as well
    assert TSC.evicted(nodes, pods) == []


def test_fitting_pods_are_preferred() -> None:
    nodes = [node("n0", "z0", cpu="16"), node("n1", "z1")]
    pods = [pod("a", "n0"), pod("b", "n0"), pod("z-big", "n0", cpu="8")]
    # z-big would leave first but fits no node of z1; b goes instead.
    assert TSC.evicted(nodes, pods) == ["b"]
    assert TSC.evicted(nodes, pods, {"topologyBalanceNodeFit": False}) == ["b"]


def test_a_move_that_would_break_another_hard_constraint_is_not_made() -> None:
    # One pod per host; zones z0 = {h0, h1, h3}, z1 = {h2}: zone counts [3, 1] want one pod in
    # z1. But its only host already holds one: with a z0 host emptied, h2 would be 2 - 0 > 1
    # over its hostname constraint, and kube-scheduler would put the pod right back.
    nodes = [node("h0", "z0"), node("h1", "z0"), node("h2", "z1"), node("h3", "z0")]
    both = [spread(when="ScheduleAnyway"), spread("kubernetes.io/hostname")]
    pods = [pod(name, host, tsc=both) for name, host in (("a", "h0"), ("b", "h1"), ("c", "h2"), ("d", "h3"))]
    args = {"constraints": ["DoNotSchedule", "ScheduleAnyway"]}
    assert TSC.evicted(nodes, pods, args) == []
    # An empty second host in z1 can take it.
    assert TSC.evicted([*nodes, node("h4", "z1")], pods, args) == ["d"]


def test_removal_never_worsens_another_constraint_past_its_max_skew() -> None:
    # Zones [5, 2] want one pod out of z0; hosts are h0: 1, h1: 2, h2: 2 in z0 and h3: 2 in z1.
    # z on h0 leaves first by name, but that would make the hosts [0, 2, 2, 2], skew 2 over the
    # hostname constraint's maxSkew 1: d on h2 goes instead.
    nodes = [node("h0", "z0"), node("h1", "z0"), node("h2", "z0"), node("h3", "z1")]
    both = [spread(when="ScheduleAnyway"), spread("kubernetes.io/hostname", when="ScheduleAnyway")]
    placed = {"z": "h0", "a": "h1", "b": "h1", "c": "h2", "d": "h2", "e": "h3", "f": "h3"}
    pods = [pod(name, host, tsc=both) for name, host in placed.items()]
    assert TSC.evicted(nodes, pods, {"constraints": ["ScheduleAnyway"]}) == ["d"]


# ----------------------------------------------------------------------------- limits


def test_per_node_limit_skips_the_rest_of_that_node() -> None:
    nodes = [node("n0", "z0"), node("n1", "z0"), node("n2", "z1"), node("n3", "z2")]
    pods = [pod(f"a{i}", "n0") for i in range(4)] + [pod(f"b{i}", "n1") for i in range(4)]
    # [8, 0, 0]: ideal 8/3, up to 5 leave; one per node at most.
    evicted = TSC.evicted(nodes, pods, maxNoOfPodsToEvictPerNode=1)
    assert len(evicted) == 2
    assert {e[0] for e in evicted} == {"a", "b"}


def test_total_limit_stops_the_plugin() -> None:
    nodes, pods = zones(9, 0, 0)
    assert len(TSC.evicted(nodes, pods)) == 6
    assert len(TSC.evicted(nodes, pods, maxNoOfPodsToEvictTotal=2)) == 2
    assert len(TSC.evicted(nodes, pods, maxNoOfPodsToEvictPerNamespace=4)) == 4


def test_plan_is_deterministic() -> None:
    nodes, pods = zones(7, 3, 0, 1)
    first = TSC.evicted(nodes, pods)
    assert first == TSC.evicted(nodes, list(reversed(pods)))
    assert len(first) == 4


@pytest.mark.parametrize(
    "selector",
    [
        {"matchLabels": {"app": "a"}},
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
        {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["b"]}]},
        {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
        {"matchLabels": {"app": "a"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        {},
    ],
)
def test_selector_candidates_match_a_full_scan(selector: dict[str, Any]) -> None:
    labels = [{"app": "a"}, {"app": "b"}, {"app": "a", "tier": "web"}, {"tier": "web"}, {}]
    pods = [pod(f"p{i}", "n0", labels=labels[i % len(labels)]) for i in range(15)]
    ns = NamespacePods(sorted(pods, key=lambda p: p.metadata.name))
    tsc = pod("x", "n0", tsc=[{"maxSkew": 1, "topologyKey": "zone", "labelSelector": selector}])
    assert tsc.spec.topology_spread_constraints is not None
    c = ConstraintCache().build(tsc.spec.topology_spread_constraints[0], tsc)
    assert ns.matching(c) == [p for p in ns.pods if c.matches(p.metadata.labels or {})]


# ----------------------------------------------------------------------------- findings


def left_reasons(
    nodes: list[Node], pods: list[Pod], args: dict[str, Any] | None = None
) -> dict[str, list[str]]:
    """One cycle with findings on: the reasons given for each pod left, by pod name."""
    found: list[Finding] = []
    TSC.run(nodes, pods, args, found=found)
    out: dict[str, list[str]] = {}
    for f in found:
        if f.verdict is Verdict.LEFT:
            assert f.plugin == PLUGIN
            out.setdefault(f.name, []).append(f.reason)
    return out


C = "(topologyKey=zone maxSkew=1 DoNotSchedule)"


def test_findings_for_a_constraint_within_max_skew() -> None:
    left = left_reasons(*zones(2, 1))
    assert left == {
        "p0-0": [f"topology zone=z0 has 2 pods, skew 1 <= maxSkew 1 {C}"],
        "p0-1": [f"topology zone=z0 has 2 pods, skew 1 <= maxSkew 1 {C}"],
        "p1-0": [f"topology zone=z1 has 1 pods, skew 1 <= maxSkew 1 {C}"],
    }


def test_findings_for_a_single_domain() -> None:
    nodes, pods = zones(3)
    left = left_reasons([*nodes, node("other", None)], pods)  # (a node without the key: no domain)
    assert left == {f"p0-{k}": [f"topology zone=z0 has 3 pods, skew 0 <= maxSkew 1 {C}"] for k in range(3)}
    # minDomains 3 makes the skew 3, but without node fit nothing is planned towards missing domains
    nodes, pods = zones(3, tsc=[spread(minDomains=3)])
    left = left_reasons([*nodes, node("other", None)], pods, {"topologyBalanceNodeFit": False})
    only = (
        "topology zone=z0 is the only eligible domain of constraint topologyKey=zone maxSkew=1 DoNotSchedule"
    )
    assert left == {f"p0-{k}": [f"{only}: nothing to spread"] for k in range(3)}


def test_findings_for_a_skewed_constraint_name_the_pods_kept() -> None:
    nodes, pods = zones(4, 1, 1)
    left = left_reasons(nodes, pods)
    # 6 pods over 3 zones: ideal 2; z0 gives 2 of its 4 (the last names leave first)
    kept = "topology zone=z0 has 4 pods, ideal average 2.00: it gives 2, this pod is kept by the keep order "
    below = "not above the ideal average 2.00"
    assert left == {
        "p0-0": [f"{kept}(priority, node selector, evictability; {C[1:-1]})"],
        "p0-1": [f"{kept}(priority, node selector, evictability; {C[1:-1]})"],
        "p1-0": [f"topology zone=z1 has 1 pods, {below} {C}"],
        "p2-0": [f"topology zone=z2 has 1 pods, {below} {C}"],
    }


def test_findings_for_pods_that_may_not_leave() -> None:
    nodes, pods = zones(3, 0)
    # the labelSelector lets no pod go; nothing fits the empty zone's node for the second case
    left = left_reasons(nodes, pods, {"labelSelector": {"matchLabels": {"app": "other"}}})
    assert set(left) == {"p0-0", "p0-1", "p0-2"}
    gives = f"topology zone=z0 gives pods ({C[1:-1]}), but this one"
    assert all(r == [f"{gives} is not selected by the plugin's labelSelector"] for r in left.values())
    nodes = [node("n0", "z0"), node("n1", "z1", cpu="100m")]
    pods = [pod(f"p{k}", "n0", cpu="500m") for k in range(3)]
    left = left_reasons(nodes, pods)
    assert left["p0"] == [
        f"topology zone=z0 gives pods ({C[1:-1]}), but this one fits none of the 1 eligible nodes of the "
        "domains below the ideal average (topologyBalanceNodeFit)"
    ]


def test_findings_for_a_domain_above_the_average_that_gives_nothing() -> None:
    # 7 pods over 3 zones: ideal 2.33; z1 gives 1 to z2, then z0 (3) is within maxSkew of both (2)
    left = left_reasons(*zones(3, 3, 1))
    assert left["p0-0"] == [
        f"topology zone=z0 has 3 pods, above the ideal average 2.33 but within maxSkew 1 of the domains "
        f"below it {C}"
    ]
    assert left["p2-0"] == [f"topology zone=z2 has 1 pods, not above the ideal average 2.33 {C}"]
    assert len(left["p1-0"]) == 1 and "it gives 1" in left["p1-0"][0]
