"""Placement simulation: kube-scheduler's filters and their FitError message, its scores and its
node search (the cycle driver's tests: tests/unit/simulation/test_driver.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import builders
from tests.unit.scheduling.objects import anti, decide, node, pod, snap

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import Node
from desched.scheduling.placement import (
    SCORE_GENERIC,
    PlacementOptions,
    PlacementSimulator,
    balanced_allocation_score,
    fit_error_message,
    heap_winner,
    num_feasible_nodes_to_find,
    scheduler_node_order,
    tie_preference,
)
from desched.scheduling.scorer import GenericScorerArgs

# ----------------------------------------------------------------------------- filters


def test_fit_error_message_is_kube_schedulers() -> None:
    assert fit_error_message(7, {"Insufficient cpu": 3, "node(s) had untolerated taint {a: b}": 4}) == (
        "0/7 nodes are available: 3 Insufficient cpu, 4 node(s) had untolerated taint {a: b}."
    )
    assert fit_error_message(3, {}) == "0/3 nodes are available."
    assert fit_error_message(0, {}) == "no nodes available to schedule pods"
    assert decide(snap([]), pod("p")).reason == "no nodes available to schedule pods"


def test_each_filter_reports_its_reason() -> None:
    nodes = [
        node("cordoned", unschedulable=True),
        node("tainted", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        node("hdd", labels={"disk": "hdd"}),
        node("full", cpu="100m"),
        node("crowded", pods="1"),
    ]
    s = snap(nodes, [pod("other", "crowded", owner=None)])
    d = decide(s, pod("p", cpu="500m", spec={"nodeSelector": {"disk": "hdd"}}))
    # hdd matches the selector and fits: it is the only feasible node
    assert d.node == "hdd"
    d = decide(s, pod("p", cpu="500m", spec={"nodeSelector": {"disk": "ssd"}}))
    assert d.node == ""
    assert d.reason == (
        "0/5 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, "
        "1 node(s) were unschedulable, 3 node(s) didn't match Pod's node affinity/selector."
    )


def test_resources_report_every_insufficient_resource_of_a_node() -> None:
    s = snap([node("n1", cpu="1", memory="1Gi", pods="1")], [pod("x", "n1", cpu="900m", memory="900Mi")])
    d = decide(s, pod("p", cpu="200m", memory="200Mi"))
    assert d.reason == "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 1 Too many pods."


def test_extended_resources_must_fit() -> None:
    s = snap([node("gpu", extra={"nvidia.com/gpu": "1"}), node("plain")])
    gpu = {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}
    p = pod("p", spec=gpu)
    assert decide(s, p).node == "gpu"
    s2 = snap([node("gpu", extra={"nvidia.com/gpu": "1"}), node("plain")], [pod("busy", "gpu", spec=gpu)])
    assert decide(s2, p).reason == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def test_tolerations_and_unschedulable_toleration() -> None:
    s = snap([node("cordoned", unschedulable=True)])
    tolerating = pod(
        "p",
        spec={
            "tolerations": [
                {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
            ]
        },
    )
    assert decide(s, tolerating).node == "cordoned"
    assert decide(s, pod("q")).reason == "0/1 nodes are available: 1 node(s) were unschedulable."


def test_a_node_that_is_not_ready_gets_the_not_ready_taint() -> None:
    s = snap([node("down", ready="False"), node("gone", ready="Unknown")])
    assert decide(s, pod("p")).reason == (
        "0/2 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
        "1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }."
    )


def test_pod_anti_affinity_own_and_existing() -> None:
    nodes = [node("n1", zone="a"), node("n2", zone="a"), node("n3", zone="b")]
    s = snap(nodes, [pod("web-0", "n1", labels={"app": "web"})])
    # own anti-affinity by zone: zone a holds a web pod
    d = decide(s, pod("p", labels={"app": "web"}, spec=anti("web", "topology.kubernetes.io/zone")))
    assert d.node == "n3"
    # an existing pod's anti-affinity keeps a matching pod out of its zone
    s2 = snap(
        nodes, [pod("db-0", "n3", labels={"app": "db"}, spec=anti("web", "topology.kubernetes.io/zone"))]
    )
    d2 = decide(
        s2, pod("p", labels={"app": "web"}, spec={"nodeSelector": {"topology.kubernetes.io/zone": "b"}})
    )
    assert d2.reason == (
        "0/3 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    # both anti-affinities on one node
    s3 = snap([node("n1")], [pod("web-0", "n1", labels={"app": "web"})])
    assert decide(s3, pod("p", labels={"app": "x"}, spec=anti("web"))).reason == (
        "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."
    )


def test_required_pod_affinity_and_the_first_pod_of_a_group() -> None:
    aff = {
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "cache"}},
                        "topologyKey": "topology.kubernetes.io/zone",
                    }
                ]
            }
        }
    }
    nodes = [node("n1", zone="a"), node("n2", zone="b")]
    s = snap(nodes, [pod("cache-0", "n2", labels={"app": "cache"})])
    assert decide(s, pod("p", labels={"app": "web"}, spec=aff)).node == "n2"
    # no cache pod anywhere: a web pod cannot go, a cache pod affine to itself can
    s2 = snap(nodes)
    assert decide(s2, pod("p", labels={"app": "web"}, spec=aff)).reason == (
        "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."
    )
    assert decide(s2, pod("c", labels={"app": "cache"}, spec=aff)).node != ""


def test_topology_spread_do_not_schedule() -> None:
    tsc = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "api"}},
            }
        ]
    }
    nodes = [node("a1", zone="a"), node("a2", zone="a"), node("b1", zone="b"), node("nozone", zone="")]
    nodes[3] = msgspec.convert(
        {
            "metadata": {"name": "nozone", "labels": {"kubernetes.io/hostname": "nozone"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}},
        },
        Node,
        strict=False,
    )
    s = snap(nodes, [pod("api-0", "a1", labels={"app": "api"})])
    d = decide(s, pod("p", labels={"app": "api"}, spec=tsc))
    assert d.node == "b1"
    s2 = snap(
        nodes,
        [
            pod("api-0", "a1", labels={"app": "api"}),
            pod("api-1", "b1", labels={"app": "api"}),
            pod("api-2", "a2", labels={"app": "api"}),
        ],
    )
    d2 = decide(
        s2,
        pod("p", labels={"app": "api"}, spec={**tsc, "nodeSelector": {"topology.kubernetes.io/zone": "a"}}),
    )
    # the selector keeps the pod in zone a; with nodeAffinityPolicy Honor zone a is then the only
    # domain (its own minimum), so another pod there keeps the skew at 0
    assert d2.node in ("a1", "a2")
    d3 = decide(
        s2, pod("p", labels={"app": "api"}, spec={**tsc, "nodeSelector": {"kubernetes.io/hostname": "a1"}})
    )
    assert d3.node == "a1"
    s3 = snap(nodes, [pod("api-0", "a1", labels={"app": "api"}), pod("api-1", "a2", labels={"app": "api"})])
    d4 = decide(s3, pod("p", labels={"app": "api"}, spec={**tsc, "nodeSelector": {"disk": "none"}}))
    assert "node(s) didn't match Pod's node affinity/selector" in d4.reason
    # zone a: 2, zone b: 0, a pod in zone a would make skew 3
    d5 = decide(s3, pod("p", labels={"app": "api"}, spec=tsc))
    assert d5.node == "b1"
    s4 = snap([*nodes[:2], nodes[3]], [pod("api-0", "a1", labels={"app": "api"})])
    # a second zone-a pod is fine (only one domain); the node without the zone label is not
    d6 = decide(
        s4,
        pod("p", labels={"app": "api"}, spec={**tsc, "nodeSelector": {"kubernetes.io/hostname": "nozone"}}),
    )
    assert d6.reason == (
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required "
        "label), 2 node(s) didn't match Pod's node affinity/selector."
    )


def test_topology_spread_min_domains() -> None:
    tsc = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "minDomains": 3,
                "labelSelector": {"matchLabels": {"app": "api"}},
            }
        ]
    }
    s = snap(
        [node("a1", zone="a"), node("b1", zone="b")],
        [pod("api-0", "a1", labels={"app": "api"}), pod("api-1", "b1", labels={"app": "api"})],
    )
    # two domains < minDomains 3: the global minimum is 0, each domain already has 1
    assert decide(s, pod("p", labels={"app": "api"}, spec=tsc)).reason == (
        "0/2 nodes are available: 2 node(s) didn't match pod topology spread constraints."
    )


def test_invalid_selector_leaves_the_pod_pending() -> None:
    bad = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    }
    d = decide(snap([node("n1")]), pod("p", spec=bad))
    assert d.node == "" and d.reason.startswith("0/1 nodes are available: invalid selector:")


# ----------------------------------------------------------------------------- scores


def test_least_allocated_prefers_the_emptier_node() -> None:
    s = snap([node("busy"), node("idle")], [pod("x", "busy", cpu="3", memory="6Gi")])
    d = decide(s, pod("p"))
    assert d.node == "idle"
    # 2 feasible nodes: Fit (1) + Balanced (1) + TaintToleration (3 x 100) + the rest 0
    assert d.score is not None and d.score > 300


@pytest.mark.parametrize(
    ("with_pod", "without_pod", "alloc", "expected"),
    [
        # 50 + (50 + balance(with) - balance(without)) // 2, balance = int((1 - |f_cpu - f_mem| / 2) * 100)
        # the pod unbalances a balanced node: with .5/.25 -> 87, without .25/.25 -> 100: 50 + 37 // 2
        ((2000, 1024), (1000, 1024), (4000, 4096), 68),
        # the pod balances an unbalanced node: with .5/.25 -> 87, without .5/0 -> 75: 50 + 62 // 2
        ((2000, 1024), (2000, 0), (4000, 4096), 81),
        # an empty node, a balanced pod: 100 and 100: no change, 75
        ((1000, 1024), (0, 0), (4000, 4096), 75),
        # fractions capped at 1: with 1/.5 -> 75, without 1/0 -> 50: 50 + 75 // 2
        ((5000, 2048), (5000, 0), (4000, 4096), 87),
        # Go's int64() truncates: with .2525/.25244 -> 99.997 -> 99, without 100: 50 + 49 // 2
        ((1010, 1034), (1000, 1024), (4000, 4096), 74),
        # a node without memory allocatable: one fraction, std 0 with and without: 75
        ((1000, 1024), (0, 0), (4000, 0), 75),
    ],
)
def test_balanced_allocation_is_the_change_in_balance_as_in_1_36(
    with_pod: tuple[int, int], without_pod: tuple[int, int], alloc: tuple[int, int], expected: int
) -> None:
    assert balanced_allocation_score(*with_pod, *without_pod, *alloc) == expected


def test_balanced_allocation_favours_the_node_the_pod_balances() -> None:
    # LeastAllocated ties at 62 (n1: cpu 75, memory 50; n2: cpu 50, memory 75). After the pod
    # both nodes are equally (un)balanced (.25/.5 and .5/.25: 87), which the pre-1.36 score could
    # not tell apart; 1.36 scores the change: n1 was balanced (100 -> 87: 68), n2 was not (75 ->
    # 87: 81), so n2 wins.
    s = snap(
        [node("n1", cpu="4", memory="4Gi"), node("n2", cpu="4", memory="4Gi")],
        [pod("x", "n1", cpu="1", memory="1Gi"), pod("y", "n2", cpu="2", memory="0")],
    )
    d = decide(s, pod("p", cpu="0", memory="1Gi", owner=None))
    # 62 + 81 + TaintToleration 3 x 100 (no taints anywhere)
    assert (d.node, d.score) == ("n2", 62 + 81 + 300)
    # a best-effort pod skips BalancedAllocation (it scores 0): LeastAllocated ties at 75 and the
    # first node of the feasible list wins
    d = decide(s, pod("p", cpu="0", memory="0", owner=None))
    assert (d.node, d.score) == ("n1", 75 + 300)


def test_ties_go_to_the_first_name() -> None:
    s = snap([node("b"), node("a"), node("c")])
    assert decide(s, pod("p")).node == "a"


@pytest.mark.parametrize(
    ("totals", "winner"),
    [
        ([7], 0),
        ([5, 5], 0),
        ([5, 5, 5], 0),
        # pre-order walk of the heap: 0, 1, 3, 7, 8, 4, 9, 10, 2, 5, 11, 12, 6, 13, 14
        ([1, 1, 5, 5], 3),
        ([1, 5, 1, 5, 5], 1),
        ([1, 1, 5, 1, 5], 4),
        ([1, 1, 1, 1, 1, 1, 5, 5], 7),
        ([1, 1, 5, 1, 1, 5, 1, 1, 1, 1, 5], 10),
        ([2, 1, 9, 3, 9], 4),
    ],
)
def test_heap_winner_is_the_root_of_go_container_heap(totals: list[int], winner: int) -> None:
    assert heap_winner(totals) == winner
    assert heap_winner(totals) == _go_heap_root(totals)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 16), st.data())
def test_tie_preference_ranks_nodes_as_the_heap_picks_among_equal_totals(n: int, data: st.DataObject) -> None:
    """Of any nodes that tie (every node feasible, in kube-scheduler's order), the one ranked
    first by :func:`tie_preference` is the one Go's heap puts at its root."""
    nodes = [builders.node(f"n{i:02d}") for i in range(n)]
    rank = tie_preference(nodes)
    tied = data.draw(st.sets(st.integers(0, n - 1), min_size=1))
    totals = [5 if i in tied else 1 for i in range(n)]
    assert min(tied, key=lambda i: rank[f"n{i:02d}"]) == _go_heap_root(totals)


def _go_heap_root(totals: list[int]) -> int:
    """Go's container/heap Init over (position, total) with kube-scheduler's Less (higher total
    first, Randomizer 0), written from the algorithm: sift down each inner position, last first."""
    h = list(enumerate(totals))
    n = len(h)
    for i0 in range(n // 2 - 1, -1, -1):
        i = i0
        while True:
            j = 2 * i + 1
            if j >= n:
                break
            if j + 1 < n and h[j + 1][1] > h[j][1]:
                j += 1
            if not h[j][1] > h[i][1]:
                break
            h[i], h[j] = h[j], h[i]
            i = j
    return h[0][0]


def test_heap_winner_agrees_with_go_heap_on_random_lists() -> None:
    import random

    rng = random.Random(7)
    for _ in range(2000):
        totals = [rng.randint(0, 3) for _ in range(rng.randint(1, 40))]
        assert heap_winner(totals) == _go_heap_root(totals)


def test_ties_between_later_nodes_follow_the_heap_not_the_list() -> None:
    # feasible list a, b, c, d (one zone, by name); a and b are busier, c and d tie: the heap's
    # root is d (position 3 comes before position 2 in its pre-order), not c
    s = snap(
        [node("a"), node("b"), node("c"), node("d")],
        [pod("x", "a", cpu="1", memory="2Gi"), pod("y", "b", cpu="1", memory="2Gi")],
    )
    assert decide(s, pod("p", owner=None)).node == "d"
    # over zones the list is round-robin (a1, b1, a2, b2): a2 and b2 tie at positions 2 and 3
    s = snap(
        [node("a1", zone="a"), node("a2", zone="a"), node("b1", zone="b"), node("b2", zone="b")],
        [pod("x", "a1", cpu="1", memory="2Gi"), pod("y", "b1", cpu="1", memory="2Gi")],
    )
    assert decide(s, pod("p", owner=None)).node == "b2"


def test_prefer_no_schedule_taint_is_avoided() -> None:
    s = snap([node("a", taints=[{"key": "spot", "effect": "PreferNoSchedule"}]), node("b", cpu="2")])
    assert decide(s, pod("p")).node == "b"


def test_preferred_node_affinity_wins_over_resources() -> None:
    pref = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                        },
                    }
                ]
            }
        }
    }
    s = snap([node("a"), node("b", labels={"disk": "ssd"})], [pod("x", "b", cpu="2")])
    assert decide(s, pod("p", spec=pref)).node == "b"


def test_preferred_pod_affinity_pulls_towards_its_peers() -> None:
    pref = {
        "affinity": {
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "cache"}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        }
    }
    s = snap([node("a"), node("b")], [pod("cache", "b", labels={"app": "cache"}, cpu="1")])
    assert decide(s, pod("p", spec=pref)).node == "b"


def test_system_default_spreading_spreads_replicas() -> None:
    s = snap([node("a"), node("b")], [pod("web-0", "a", owner=("ReplicaSet", "web"), cpu="10m")])
    # b is slightly fuller but a already holds a replica of the same ReplicaSet
    s2 = snap(
        [node("a"), node("b")],
        [pod("web-0", "a", owner=("ReplicaSet", "web"), cpu="10m"), pod("other", "b", owner=None, cpu="50m")],
    )
    assert decide(s, pod("web-1", owner=("ReplicaSet", "web"))).node == "b"
    assert decide(s2, pod("web-1", owner=("ReplicaSet", "web"))).node == "b"


def test_generic_scorer_mode_packs_when_told_to() -> None:
    args = GenericScorerArgs.model_validate(
        {
            "allocated": {
                "values": "RatioToAllocatable",
                "prefer": "Most",
                "resources": {"cpu": 1, "memory": 1},
            }
        }
    )
    s = snap([node("busy"), node("idle")], [pod("x", "busy", cpu="2", memory="4Gi")])
    assert decide(s, pod("p")).node == "idle"
    packed = decide(s, pod("p"), PlacementOptions(score=SCORE_GENERIC, generic=args))
    assert packed.node == "busy"
    assert PlacementOptions(score=SCORE_GENERIC, generic=args).weights()["NodeResourcesGeneric"] == 2


def test_options_validation() -> None:
    with pytest.raises(ValueError, match="needs the scorer's args"):
        PlacementOptions(score=SCORE_GENERIC)
    with pytest.raises(ValueError, match="score must be"):
        PlacementOptions(score="fancy")
    with pytest.raises(ValueError, match=r"1\.\.100"):
        PlacementOptions(percentage_of_nodes_to_score=0)


# ----------------------------------------------------------------------------- the node search


@pytest.mark.parametrize(
    ("nodes", "percentage", "expected"),
    [
        (7, None, 7),
        (99, None, 99),
        (100, None, 100),
        (1000, None, 420),
        (5000, None, 500),
        (10000, None, 500),
        (5000, 100, 5000),
        (5000, 50, 2500),
        (1000, 1, 100),
    ],
)
def test_num_feasible_nodes_to_find(nodes: int, percentage: int | None, expected: int) -> None:
    assert num_feasible_nodes_to_find(nodes, percentage) == expected


def test_scheduler_node_order_interleaves_zones() -> None:
    nodes = [node("a1", zone="a"), node("a2", zone="a"), node("b1", zone="b"), node("c1", zone="c")]
    assert [n.metadata.name for n in scheduler_node_order(nodes)] == ["a1", "b1", "c1", "a2"]


def test_the_search_resumes_where_it_stopped() -> None:
    nodes = [node(f"n{i:03d}") for i in range(200)]
    sim = PlacementSimulator(snap(nodes))
    assert sim._to_find == 100
    first = sim.decide(pod("p1"))
    assert first.feasible == 100 and sim._start == 100
    sim.decide(pod("p2"))
    assert sim._start == 0


def test_bind_updates_what_later_pods_see() -> None:
    s = snap([node("n1", cpu="1")])
    sim = PlacementSimulator(s)
    p1 = pod("p1", cpu="600m")
    assert sim.decide(p1).node == "n1"
    sim.bind(msgspec.structs.replace(p1, spec=msgspec.structs.replace(p1.spec, node_name="n1")))
    assert s.pod("default", "p1") is not None
    assert sim.decide(pod("p2", cpu="600m")).reason == "0/1 nodes are available: 1 Insufficient cpu."
    with pytest.raises(ValueError, match="not one of the simulated nodes"):
        sim.bind(msgspec.structs.replace(p1, spec=msgspec.structs.replace(p1.spec, node_name="nope")))


def test_kube_scheduler_default_constraints_from_its_configuration() -> None:
    from desched.k8s.objects import TopologySpreadConstraint
    from desched.k8s.topologyspread import NO_DEFAULTS, DefaultConstraints

    zone = TopologySpreadConstraint(
        max_skew=1, topology_key="topology.kubernetes.io/zone", when_unsatisfiable="DoNotSchedule"
    )
    hard = PlacementOptions(default_constraints=DefaultConstraints((zone,)))
    nodes = [node("a1", zone="a", cpu="16"), node("b1", zone="b", cpu="1")]
    web = [pod(f"web-{i}", "a1", owner=("ReplicaSet", "web"), labels={"app": "web"}) for i in range(2)]
    s = snap(nodes, [*web, pod("filler", "b1", owner=None, cpu="800m", memory="6Gi")])
    new = pod("web-2", owner=("ReplicaSet", "web"), labels={"app": "web"})
    # without default constraints the emptier a1 wins
    assert decide(s, new, PlacementOptions(default_constraints=NO_DEFAULTS)).node == "a1"
    # a DoNotSchedule zone default: 3 in a and 0 in b would be skewed by 3
    assert decide(s, new, hard).node == "b1"
    # a pod with constraints of its own is not defaulted
    own = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 5,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }
    mine = pod("web-3", owner=("ReplicaSet", "web"), labels={"app": "web"}, spec=own)
    assert decide(s, mine, hard).node == "a1"


def test_default_constraints_use_the_snapshots_services_and_controllers_when_it_has_them() -> None:
    from desched.k8s.objects import TopologySpreadConstraint
    from desched.k8s.topologyspread import DefaultConstraints

    zone = TopologySpreadConstraint(
        max_skew=1, topology_key="topology.kubernetes.io/zone", when_unsatisfiable="DoNotSchedule"
    )
    hard = PlacementOptions(default_constraints=DefaultConstraints((zone,)))
    nodes = [node("a1", zone="a", cpu="16"), node("b1", zone="b", cpu="1")]
    # the pods of two ReplicaSets, one Service selecting them all: kube-scheduler counts all four
    pods = [
        pod("old-0", "a1", owner=("ReplicaSet", "old"), labels={"app": "web"}),
        pod("old-1", "a1", owner=("ReplicaSet", "old"), labels={"app": "web"}),
        pod("new-0", "b1", owner=("ReplicaSet", "new"), labels={"app": "web"}),
    ]
    new = pod("new-1", owner=("ReplicaSet", "new"), labels={"app": "web"})
    # without workload objects, the pods of its owner stand in: 0 in a, 1 in b -> a1
    assert decide(snap(nodes, pods), new, hard).node == "a1"
    s = ClusterSnapshot(nodes=nodes, pods=pods, workloads=[builders.service("web", {"app": "web"})])
    # with the Service: 2 in a, 1 in b -> a1 would make it 3-1
    assert decide(s, new, hard).node == "b1"


def test_bound_replacements_share_what_every_pod_started_then_shows() -> None:
    """A simulation binds thousands of replacements: those started at one ``now`` share their
    conditions and, per list of container names, their containers' statuses (equal values, one
    copy); another ``now`` (even an equal time) gets its own."""
    from datetime import timedelta, timezone

    from desched.k8s.replacements import bound_replacement

    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    a = builders.pod("a", node="", containers=[{"name": "app"}, {"name": "side"}])
    b = builders.pod("b", node="", containers=[{"name": "app"}, {"name": "side"}])
    c = builders.pod("c", node="", containers=[{"name": "other"}])
    ra, rb, rc = (bound_replacement(p, "n1", now) for p in (a, b, c))
    assert ra.spec.node_name == "n1" and ra.status.phase == "Running"
    assert ra.status.conditions is rb.status.conditions is rc.status.conditions
    assert [x.type for x in ra.status.conditions or ()] == [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
    ]
    assert ra.status.container_statuses is rb.status.container_statuses
    assert [s.name for s in rc.status.container_statuses or ()] == ["other"]
    same_time = now.astimezone(timezone(timedelta(hours=1)))
    later = bound_replacement(a, "n1", same_time)
    assert later.status.conditions is not ra.status.conditions
    assert (later.status.conditions or [])[0].last_transition_time is same_time
