"""The scorer expresses kube-scheduler's scoring strategies: on random clusters, the expression of
each (docs/scorer.md) scores nodes as small reference versions of those strategies, written here
from kube-scheduler's formulas (``pkg/scheduler/framework/plugins/noderesources``:
``least_allocated.go``, ``most_allocated.go``, ``balanced_allocation.go``,
``resource_allocation.go``; scheduler-plugins ``pkg/noderesources/allocatable.go``).

Each reference comes in two forms: *exact* (the formula in rational arithmetic, before
kube-scheduler's integer truncation), which the scorer's 0..100 score must equal; and *as Go
computes it* (int64 divisions, truncation), whose ranking the scorer's may differ from only
where the truncation blurs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests import builders

from desched.k8s.objects import Pod
from desched.scheduling.placement import balanced_allocation_score
from desched.scheduling.scorer import GenericScorer, GenericScorerArgs, allocated_of, requesting_of

MI = 1024**2
GI = 1024**3
GPU = "nvidia.com/gpu"
EPH = "ephemeral-storage"
DEFAULT_CPU = 100  # schedutil.DefaultMilliCPURequest
DEFAULT_MEMORY = 200 * MI  # schedutil.DefaultMemoryRequest
MAX_SCORE = 100

# --------------------------------------------------------------------------- random clusters

Container = dict[str, int | None]  # resource -> canonical amount; None: no request set


@dataclass
class RefPod:
    containers: list[Container]

    def to_pod(self, name: str, node: str = "") -> Pod:
        containers = []
        for i, c in enumerate(self.containers):
            requests: dict[str, str] = {}
            for res, value in c.items():
                if value is not None:
                    requests[res] = f"{value}m" if res == "cpu" else str(value)
            containers.append({"name": f"c{i}", "resources": {"requests": requests}})
        return builders.pod(name, namespace="ns", node=node, containers=containers, phase=None)

    def request(self, res: str, *, non_zero: bool) -> int:
        """calculatePodResourceRequest: containers summed; the 100m / 200Mi stand-ins for a
        container setting no cpu / memory request when non_zero (useRequested false)."""
        total = 0
        for c in self.containers:
            value = c.get(res)
            if value is None and non_zero and res == "cpu":
                value = DEFAULT_CPU
            if value is None and non_zero and res == "memory":
                value = DEFAULT_MEMORY
            total += value or 0
        return total


@dataclass
class RefNode:
    name: str
    allocatable: dict[str, int]
    pods: list[RefPod]

    def requested(self, res: str, *, non_zero: bool) -> int:
        """NodeInfo.NonZeroRequested (non_zero) or NodeInfo.Requested."""
        return sum(p.request(res, non_zero=non_zero) for p in self.pods)


def containers(explicit: bool) -> st.SearchStrategy[Container]:
    """A container's requests; with explicit, cpu and memory are always set and positive."""
    cpu = st.integers(1, 4000) if explicit else st.one_of(st.none(), st.integers(0, 4000))
    mem = st.integers(1, 8 * GI) if explicit else st.one_of(st.none(), st.integers(0, 8 * GI))
    return st.fixed_dictionaries(
        {
            "cpu": cpu,
            "memory": mem,
            EPH: st.one_of(st.none(), st.integers(0, 20 * GI)),
            GPU: st.one_of(st.none(), st.integers(0, 2)),
        }
    )


def ref_pods(explicit: bool) -> st.SearchStrategy[RefPod]:
    return st.builds(RefPod, st.lists(containers(explicit), min_size=1, max_size=3))


@st.composite
def clusters(draw: st.DrawFn, explicit: bool = False) -> tuple[list[RefNode], RefPod]:
    n = draw(st.integers(2, 7))
    nodes = []
    for i in range(n):
        alloc = {
            "cpu": draw(st.integers(500, 64000)),
            "memory": draw(st.integers(1, 256)) * GI + draw(st.integers(0, 1023)) * MI,
            "pods": 110,
        }
        if draw(st.booleans()):
            alloc[EPH] = draw(st.integers(10, 200)) * GI
        if draw(st.booleans()):
            alloc[GPU] = draw(st.integers(1, 8))
        pods = draw(st.lists(ref_pods(explicit), max_size=6))
        nodes.append(RefNode(f"node-{i}", alloc, pods))
    return nodes, draw(ref_pods(explicit))


resource_weights = st.dictionaries(
    st.sampled_from(["cpu", "memory", EPH, GPU]), st.integers(1, 100), min_size=1, max_size=4
)


# --------------------------------------------------------------------------- kube-scheduler, in miniature


def is_scalar(res: str) -> bool:
    """IsScalarResourceName, for the names generated here."""
    return res not in ("cpu", "memory", EPH)


def allocatable_requested(node: RefNode, pod: RefPod, res: str, *, use_requested: bool) -> tuple[int, int]:
    """resourceAllocationScorer.calculateResourceAllocatableRequest."""
    pod_request = pod.request(res, non_zero=not use_requested)
    if pod_request == 0 and is_scalar(res):
        return 0, 0
    if res in ("cpu", "memory"):
        return node.allocatable.get(res, 0), node.requested(res, non_zero=not use_requested) + pod_request
    if res == EPH:
        return node.allocatable.get(res, 0), node.requested(res, non_zero=False) + pod_request
    if res in node.allocatable:
        return node.allocatable[res], node.requested(res, non_zero=False) + pod_request
    return 0, 0


def least_or_most(
    node: RefNode, pod: RefPod, weights: dict[str, int], *, most: bool, exact: bool
) -> Fraction | int:
    """leastResourceScorer / mostResourceScorer."""
    total: Fraction | int = 0
    weight_sum = 0
    for res, weight in weights.items():
        alloc, req = allocatable_requested(node, pod, res, use_requested=False)
        if alloc == 0:
            continue
        if most:
            req = min(req, alloc)
            score = Fraction(req * MAX_SCORE, alloc) if exact else req * MAX_SCORE // alloc
        elif req > alloc:
            score = 0
        else:
            score = (
                Fraction((alloc - req) * MAX_SCORE, alloc) if exact else (alloc - req) * MAX_SCORE // alloc
            )
        total += score * weight
        weight_sum += weight
    if weight_sum == 0:
        return 0
    return Fraction(total, weight_sum) if exact else int(total) // weight_sum


def balanced(node: RefNode, pod: RefPod, resources: list[str], *, exact: bool) -> float | int:
    """balancedResourceScorer up to kube-scheduler 1.35 (the balance with the pod), useRequested;
    a pod requesting none of the resources is skipped."""
    if all(pod.request(res, non_zero=False) == 0 for res in resources):
        return 0
    fractions = []
    for res in resources:
        alloc, req = allocatable_requested(node, pod, res, use_requested=True)
        if alloc == 0:
            continue
        fractions.append(min(req / alloc, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    value = (1 - std) * MAX_SCORE
    return value if exact else int(value)


def allocatable_plugin(
    nodes: list[RefNode], weights: dict[str, int], *, most: bool, exact: bool
) -> list[Any]:
    """NodeResourcesAllocatable: Score (sum of +-allocatable * weight / weight sum, Go's
    truncating division) then NormalizeScore (min..max to 0..100, integer)."""
    weight_sum = sum(weights.values())
    raw: list[Any] = []
    for node in nodes:
        s = sum((1 if most else -1) * node.allocatable.get(res, 0) * w for res, w in weights.items())
        if exact:
            raw.append(Fraction(s, weight_sum))
        else:
            raw.append(s // weight_sum if s >= 0 else -((-s) // weight_sum))
    lo, hi = min(raw), max(raw)
    if hi == lo:
        return [0 for _ in raw]
    if exact:
        return [Fraction((s - lo) * MAX_SCORE, hi - lo) for s in raw]
    return [(s - lo) * MAX_SCORE // (hi - lo) for s in raw]


# --------------------------------------------------------------------------- the scorer's side


def ours(nodes: list[RefNode], pod: RefPod, args: dict[str, Any]) -> list[float]:
    scorer = GenericScorer(GenericScorerArgs.model_validate(args))
    incoming = pod.to_pod("incoming")
    on_node = [allocated_of([p.to_pod(f"{n.name}-{i}", n.name) for i, p in enumerate(n.pods)]) for n in nodes]
    return scorer.node_scores(requesting_of(incoming), [n.allocatable for n in nodes], on_node)


def assert_same_scores(got: list[float], exact: list[Any]) -> None:
    for g, e in zip(got, exact, strict=True):
        assert math.isclose(g, float(e), rel_tol=1e-9, abs_tol=1e-7), (got, [float(x) for x in exact])


def assert_consistent_ranking(got: list[float], go: list[int], slack: int) -> None:
    """Where the scorer ranks a node strictly above another, Go's truncated scores rank it at
    most ``slack`` below; where Go's rank them more than ``slack`` apart, the scorer agrees."""
    for i, gi in enumerate(got):
        for j, gj in enumerate(got):
            if gi > gj + 1e-6:
                assert go[i] >= go[j] - slack, (i, j, got, go)
            if go[i] > go[j] + slack:
                assert gi > gj, (i, j, got, go)


# --------------------------------------------------------------------------- the properties

SETTINGS = settings(max_examples=100, deadline=None)


@SETTINGS
@given(clusters(), resource_weights)
def test_least_allocated(cluster: tuple[list[RefNode], RefPod], weights: dict[str, int]) -> None:
    """LeastAllocated = left, RatioToAllocatable, Most."""
    nodes, pod = cluster
    got = ours(nodes, pod, {"left": {"values": "RatioToAllocatable", "prefer": "Most", "resources": weights}})
    assert_same_scores(got, [least_or_most(n, pod, weights, most=False, exact=True) for n in nodes])
    # per-resource and final int64 divisions: each loses less than 1
    go = [int(least_or_most(n, pod, weights, most=False, exact=False)) for n in nodes]
    assert_consistent_ranking(got, go, slack=1)


@SETTINGS
@given(clusters(), resource_weights)
def test_most_allocated(cluster: tuple[list[RefNode], RefPod], weights: dict[str, int]) -> None:
    """MostAllocated = allocated, RatioToAllocatable, Most."""
    nodes, pod = cluster
    got = ours(
        nodes, pod, {"allocated": {"values": "RatioToAllocatable", "prefer": "Most", "resources": weights}}
    )
    assert_same_scores(got, [least_or_most(n, pod, weights, most=True, exact=True) for n in nodes])
    go = [int(least_or_most(n, pod, weights, most=True, exact=False)) for n in nodes]
    assert_consistent_ranking(got, go, slack=1)


@SETTINGS
@given(
    clusters(explicit=True), st.lists(st.sampled_from(["cpu", "memory", EPH, GPU]), min_size=1, unique=True)
)
def test_balanced_allocation(cluster: tuple[list[RefNode], RefPod], resources: list[str]) -> None:
    """BalancedAllocation up to kube-scheduler 1.35 = allocated, RatioToAllocatable, MostBalanced,
    every weight 1 (it ignores weights; 1.36's: below). Pods set cpu and memory requests on every
    container: kube-scheduler's BalancedAllocation reads plain requests, the KEP's Allocated
    non-zero ones (docs/scorer.md)."""
    nodes, pod = cluster
    args = {
        "allocated": {
            "values": "RatioToAllocatable",
            "prefer": "MostBalanced",
            "resources": dict.fromkeys(resources, 1),
        }
    }
    got = ours(nodes, pod, args)
    if all(pod.request(res, non_zero=False) == 0 for res in resources):
        # kube-scheduler skips such a pod (every node 0); the scorer finds every node equally
        # balanced: no preference either way
        assert len(set(got)) == 1
        return
    assert_same_scores(got, [balanced(n, pod, resources, exact=True) for n in nodes])
    go = [int(balanced(n, pod, resources, exact=False)) for n in nodes]
    assert_consistent_ranking(got, go, slack=0)


def test_balanced_allocation_of_kube_scheduler_1_36_is_not_the_expression() -> None:
    """kube-scheduler 1.36 scores the change in balance the pod causes (kubernetes#135573;
    desched's placement model: ``balanced_allocation_score``), which no part of the generic scorer
    holds (it has no "the node without the pod"): the expression above is BalancedAllocation up to
    1.35, and on these two nodes it prefers the other one than 1.36 does (docs/scorer.md)."""
    cpu, mem = 10_000, 10 * GI  # millicores, bytes
    pod = RefPod([{"cpu": 1000, "memory": MI}])  # 10% cpu, next to no memory
    balanced_now = RefNode("a", {"cpu": cpu, "memory": mem}, [RefPod([{"cpu": 5000, "memory": 5 * GI}])])
    lopsided = RefNode("b", {"cpu": cpu, "memory": mem}, [RefPod([{"cpu": 2000, "memory": 5 * GI}])])
    nodes = [balanced_now, lopsided]
    args = {
        "allocated": {
            "values": "RatioToAllocatable",
            "prefer": "MostBalanced",
            "resources": {"cpu": 1, "memory": 1},
        }
    }
    got = ours(nodes, pod, args)
    assert got[0] > got[1]  # the expression (and kube-scheduler up to 1.35): node a, balanced after
    assert [int(balanced(n, pod, ["cpu", "memory"], exact=False)) for n in nodes] == [95, 89]
    v136 = [
        balanced_allocation_score(
            n.requested("cpu", non_zero=False) + 1000,
            n.requested("memory", non_zero=False) + MI,
            n.requested("cpu", non_zero=False),
            n.requested("memory", non_zero=False),
            cpu,
            mem,
        )
        for n in nodes
    ]
    assert v136[1] > v136[0]  # 1.36: node b, whose balance the pod improves
    assert v136 == [72, 77]


@SETTINGS
@given(
    clusters(),
    st.sampled_from(["Least", "Most"]),
    st.one_of(
        st.just({"cpu": 1 << 20, "memory": 1}),  # the plugin's defaults: 1 millicore ~ 1 MiB
        st.dictionaries(st.sampled_from(["cpu", "memory", EPH, GPU]), st.integers(1, 1 << 30), min_size=1),
    ),
)
def test_node_resources_allocatable(
    cluster: tuple[list[RefNode], RefPod], mode: str, weights: dict[str, int]
) -> None:
    """NodeResourcesAllocatable{mode, resources} = allocatable, AbsoluteValue, mode, same weights."""
    nodes, pod = cluster
    got = ours(nodes, pod, {"allocatable": {"values": "AbsoluteValue", "prefer": mode, "resources": weights}})
    assert_same_scores(got, allocatable_plugin(nodes, weights, most=mode == "Most", exact=True))
    go = allocatable_plugin(nodes, weights, most=mode == "Most", exact=False)
    assert_consistent_ranking(got, go, slack=0)


# --------------------------------------------------------------------------- properties of the scorer itself

part_strategy = st.fixed_dictionaries(
    {
        "values": st.sampled_from(["AbsoluteValue", "RatioToAllocatable"]),
        "prefer": st.sampled_from(["Most", "Least", "MostBalanced", "LeastBalanced"]),
        "resources": resource_weights,
    }
)
args_strategy = st.dictionaries(
    st.sampled_from(["allocatable", "allocated", "left", "requesting"]), part_strategy, min_size=1
)


@SETTINGS
@given(clusters(), args_strategy, st.randoms(use_true_random=False))
def test_scores_are_0_to_100_and_do_not_depend_on_node_order(
    cluster: tuple[list[RefNode], RefPod], args: dict[str, Any], rnd: Any
) -> None:
    nodes, pod = cluster
    got = ours(nodes, pod, args)
    assert all(0.0 <= s <= 100.0 for s in got)
    shuffled = list(range(len(nodes)))
    rnd.shuffle(shuffled)
    again = ours([nodes[i] for i in shuffled], pod, args)
    for k, i in enumerate(shuffled):
        assert math.isclose(again[k], got[i], rel_tol=1e-9, abs_tol=1e-9)


@SETTINGS
@given(clusters(), args_strategy)
def test_a_node_with_more_of_what_is_preferred_never_ranks_lower(
    cluster: tuple[list[RefNode], RefPod], args: dict[str, Any]
) -> None:
    """Raw scores are the sum of the parts: each part's contribution alone ranks nodes as the
    whole does when it is the only part."""
    nodes, pod = cluster
    whole = ours(nodes, pod, args)
    if len(args) == 1:
        return
    scorer = GenericScorer(GenericScorerArgs.model_validate(args))
    incoming = pod.to_pod("incoming")
    on_node = [allocated_of([p.to_pod(f"{n.name}-{i}", n.name) for i, p in enumerate(n.pods)]) for n in nodes]
    raw = scorer.score_nodes(requesting_of(incoming), [n.allocatable for n in nodes], on_node)
    parts = [
        GenericScorer(GenericScorerArgs.model_validate({k: v})).score_nodes(
            requesting_of(incoming), [n.allocatable for n in nodes], on_node
        )
        for k, v in args.items()
    ]
    for i in range(len(nodes)):
        assert math.isclose(raw[i], sum(p[i] for p in parts), rel_tol=1e-9, abs_tol=1e-6)
    assert len(whole) == len(nodes)
