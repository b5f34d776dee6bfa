"""kube-scheduler's score plugins as modelled (see :mod:`desched.scheduling.placement`): the
resource scores' arithmetic, the normalisation, the winner among equal totals (:func:`heap_winner`),
:class:`ScorePlan` (how a pod class's other scores follow from a few facts about a node) and
:class:`NodeScorer` (the weighted total on each feasible node, computed only where it can win)."""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from itertools import compress, repeat
from operator import add, is_, sub
from typing import Any, Final

from desched.k8s import affinity as k8s_affinity
from desched.k8s.objects import Node, Pod
from desched.k8s.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from desched.scheduling.placement.classes import PodClass, PreFilter
from desched.scheduling.placement.nodes import NodeTable
from desched.scheduling.placement.options import GENERIC_PLUGIN, SCORE_GENERIC, PlacementOptions
from desched.scheduling.placement.order import scheduler_node_order
from desched.scheduling.placement.shapes import encode
from desched.scheduling.placement.state import LABEL_HOSTNAME, ClusterState, SpreadConstraint
from desched.scheduling.scorer import GenericScorer, requesting_of

MAX_NODE_SCORE: Final = 100
_HALF: Final = MAX_NODE_SCORE // 2
#: Request classes whose per-node resource scores are kept (replicas of a workload share one).
_RESOURCE_CACHE_CLASSES: Final = 256


def _balance(f_cpu: float, f_mem: float) -> int:
    """kube-scheduler's ``balancedResourceScore`` for two requested fractions: (1 - std) * 100,
    the fractions capped at 1, std = |f1 - f2| / 2, truncated as Go's int64() truncates."""
    diff = (f_cpu if f_cpu < 1.0 else 1.0) - (f_mem if f_mem < 1.0 else 1.0)
    return int((1 - abs(diff / 2)) * MAX_NODE_SCORE)


def balanced_change(with_pod: int, without_pod: int) -> int:
    """kube-scheduler 1.36's ``balancedResourceScorer``: the change in balance the pod causes,
    brought back into [50, 100] (75: no change; 100: the pod makes the node as balanced as it
    can be; 50: the other way round)."""
    return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without_pod) // 2


def balanced_allocation_score(
    cpu_with: int, mem_with: int, cpu_without: int, mem_without: int, alloc_cpu: int, alloc_mem: int
) -> int:
    """NodeResourcesBalancedAllocation as kube-scheduler 1.36 scores a node (kubernetes#135573):
    ``50 + (50 + balance(with the pod) - balance(without it)) / 2`` over the raw (not non-zero)
    cpu and memory requests; a resource the node has no allocatable of is left out (one fraction
    or none: balance 100). Best-effort pods are not scored at all (the caller skips them)."""
    if alloc_cpu > 0 and alloc_mem > 0:
        return balanced_change(
            _balance(cpu_with / alloc_cpu, mem_with / alloc_mem),
            _balance(cpu_without / alloc_cpu, mem_without / alloc_mem),
        )
    return balanced_change(MAX_NODE_SCORE, MAX_NODE_SCORE)


def _heap_order_key(position: int) -> str:
    """Where a position of kube-scheduler's score list sits in a pre-order walk of the binary
    heap laid over that list (root, left subtree, right subtree): the path from the root, ``0``
    left and ``1`` right; a prefix (an ancestor) sorts before its descendants."""
    return bin(position + 1)[3:]


def heap_winner(totals: Sequence[int]) -> int:
    """The position kube-scheduler 1.36 picks among its feasible nodes' ``totals`` (in the order
    of its feasible list), without extenders.

    ``schedulePod`` builds a ``container/heap`` over the scores (``heap.Init``; the order:
    higher total first, then a higher ``Randomizer``, which only extenders set, so it is 0 for
    every node) and pops its root. ``heap.Init`` sifts each inner position down, from the last
    one to the root, swapping a parent with its larger child only when the child is strictly
    greater (the left child on a tie). So the root of every subtree is its own root when that
    holds the subtree's maximum, else the root of the left subtree when the left one holds the
    maximum, else of the right one: the winner is the first node with the highest total in a
    pre-order walk of the heap (positions 0, 1, 3, 7, ..., 4, 9, 10, 2, 5, ...), not the
    first one in the list (the two differ only from four nodes on).
    """
    top = max(totals)
    at = [j for j, t in enumerate(totals) if t == top]
    return at[0] if len(at) == 1 else min(at, key=_heap_order_key)


def tie_preference(nodes: Iterable[Node]) -> dict[str, int]:
    """Which of ``nodes`` kube-scheduler binds a pod to when they score the same, as the placement
    model predicts it: each node's rank, 0 for the one it picks over all the others (the first in
    a pre-order walk of the heap over its feasible list, :func:`heap_winner`). Assumes every node
    given is feasible and the search starts at the first node of kube-scheduler's order, as it
    always does below 100 nodes (every node is searched, so the start comes back to where it was);
    above, where the start moves from pod to pod, it is an approximation."""
    order = scheduler_node_order(nodes)
    ranked = sorted(range(len(order)), key=_heap_order_key)
    return {order[position].metadata.name: rank for rank, position in enumerate(ranked)}


def best_node(
    feasible: list[int], totals: list[int], positions: Sequence[int] | None = None
) -> tuple[int, int]:
    """The node kube-scheduler picks (the highest total; ties: :func:`heap_winner`) and its
    total. ``positions``: each candidate's position in the feasible list (default: its index)."""
    top = max(totals)
    if totals.count(top) == 1:
        return feasible[totals.index(top)], top
    tied = [j for j, t in enumerate(totals) if t == top]
    if positions is None:
        return feasible[min(tied, key=_heap_order_key)], top
    return feasible[min(tied, key=lambda j: _heap_order_key(positions[j]))], top


def _default_normalize(scores: Sequence[int], *, reverse: bool, top: int) -> list[int]:
    """kube-scheduler's ``helper.DefaultNormalizeScore`` (``top``: the highest of the feasible
    nodes' scores)."""
    if top == 0:
        return [MAX_NODE_SCORE if reverse else 0] * len(scores)
    if reverse:
        return [MAX_NODE_SCORE - MAX_NODE_SCORE * s // top for s in scores]
    return [MAX_NODE_SCORE * s // top for s in scores]


class ScorePlan:
    """How a pod class's TaintToleration, NodeAffinity, InterPodAffinity and PodTopologySpread
    scores of a node follow from a few things about the node.

    ``sig[i]`` is node ``i``'s *signature*, an index into ``rows``: its untolerated
    PreferNoSchedule taints, the weight of its matching preferred node-affinity terms and its
    values of the topology keys the scores read by value (None where it lacks one), as a tuple.
    The counts of matching pods in hostname-like domains are kept per node instead (``maps``:
    node -> count, live). The scores of a node are then a function of its row and its counts:
    :meth:`evaluate`, with kube-scheduler's normalisation over the feasible nodes.
    """

    def __init__(self, c: ClusterState, cls: PodClass, weights: Mapping[str, int]) -> None:
        self.cluster = c
        self.weights = weights
        self.soft_defaulted = cls.soft_defaulted
        components: list[Sequence[object]] = []
        shape: list[object] = []
        #: where the row holds the taint count and the preferred weight (-1: not scored)
        self.taint_at = self.affinity_at = -1
        if c.prefer_no_schedule:
            self.taint_at = len(components)
            components.append(cls.prefer_no_schedule(c))
            shape.append(("taints", encode(cls.pod.spec.tolerations)))
        if k8s_affinity.has_preferred_node_affinity(cls.pod):
            self.affinity_at = len(components)
            components.append(cls.preferred_node_affinity(c))
            aff = cls.pod.spec.affinity
            assert aff is not None and aff.node_affinity is not None
            shape.append(
                ("affinity", encode(aff.node_affinity.preferred_during_scheduling_ignored_during_execution))
            )
        self._maps: list[Callable[[], dict[int, int]]] = []
        value_keys: dict[str, int] = {}

        def value_column(key: str) -> int:
            at = value_keys.get(key)
            if at is None:
                at = value_keys[key] = len(components)
                components.append(c.values_of(key))
                shape.append(("key", key))
            return at

        #: InterPodAffinity: (weight, in the row (else in the counts), where, domain counts)
        self.inter: list[tuple[int, bool, int, Mapping[str, int]]] = []
        for ti, key, weight in cls.preferred:
            if c.fine(key):
                self.inter.append((weight, False, len(self._maps), {}))
                self._maps.append(partial(ti.by_node_of, key, c.labels, c.nodes_by_value(key)))
            else:
                self.inter.append((weight, True, value_column(key), ti.domain_counts(key, c.labels)))
        #: PodTopologySpread: (constraint, by value in the row (else in the counts), where)
        self.spread: list[tuple[SpreadConstraint, bool, int]] = []
        for con in cls.soft:
            key = con.key
            if key == LABEL_HOSTNAME and c.all_have(key) and c.fine(key):
                self.spread.append((con, False, len(self._maps)))
                self._maps.append(partial(con.counter.by_node, c.nodes_by_value(key)))
            else:
                self.spread.append((con, True, value_column(key)))
        self.sig, self.rows = c.signatures(tuple(shape), components)
        #: whether the scores are the same on every node, whatever the pods bound later
        self.constant = len(self.rows) == 1 and not self._maps
        self._by_value = [at for _, by_value, at in self.spread if by_value]
        #: whether a node can be left out of PodTopologySpread's score (it lacks a key)
        self.may_ignore = not self.soft_defaulted and bool(self._by_value)

    def maps(self) -> list[dict[int, int]]:
        return [m() for m in self._maps]

    def ignored(self, row: tuple[object, ...]) -> bool:
        """Whether PodTopologySpread leaves a node with this row out (it lacks a key)."""
        return self.may_ignore and any(row[at] is None for at in self._by_value)

    def evaluate(
        self,
        entries: list[tuple[tuple[object, ...], tuple[int, ...]]],
        occurring: list[bool],
        n_feasible: int,
        n_ignored: int,
    ) -> list[int]:
        """The weighted sum of the scores for each (row, counts) entry; the normalisation runs
        over the ``occurring`` entries (those of the feasible nodes), ``n_ignored`` of the
        ``n_feasible`` nodes lacking a key PodTopologySpread needs."""
        w = self.weights
        totals = [0] * len(entries)
        if self.taint_at < 0:
            totals = [t + w["TaintToleration"] * MAX_NODE_SCORE for t in totals]
        else:
            at = self.taint_at
            raw: list[int] = [row[at] for row, _ in entries]  # type: ignore[misc]
            scores = _default_normalize(raw, reverse=True, top=max(compress(raw, occurring)))
            totals = [t + w["TaintToleration"] * s for t, s in zip(totals, scores, strict=True)]
        if self.affinity_at >= 0:
            at = self.affinity_at
            raw = [row[at] for row, _ in entries]  # type: ignore[misc]
            scores = _default_normalize(raw, reverse=False, top=max(compress(raw, occurring)))
            totals = [t + w["NodeAffinity"] * s for t, s in zip(totals, scores, strict=True)]
        if self.inter:
            raw_inter = [0] * len(entries)
            for weight, by_value, at, domains in self.inter:
                if by_value:
                    raw_inter = [
                        r + weight * domains.get(row[at], 0)  # type: ignore[call-overload]
                        for r, (row, _) in zip(raw_inter, entries, strict=True)
                    ]
                else:
                    raw_inter = [
                        r + weight * counts[at] for r, (_, counts) in zip(raw_inter, entries, strict=True)
                    ]
            present = list(compress(raw_inter, occurring))
            lo, hi = min(present), max(present)
            if hi != lo:
                w_inter = w["InterPodAffinity"]
                totals = [
                    t + w_inter * int(MAX_NODE_SCORE * ((s - lo) / (hi - lo)))
                    for t, s in zip(totals, raw_inter, strict=True)
                ]
        if self.spread:
            scores = self._spread_scores(entries, occurring, n_feasible, n_ignored)
            totals = [t + w["PodTopologySpread"] * s for t, s in zip(totals, scores, strict=True)]
        return totals

    def _spread_scores(
        self,
        entries: list[tuple[tuple[object, ...], tuple[int, ...]]],
        occurring: list[bool],
        n_feasible: int,
        n_ignored: int,
    ) -> list[int]:
        """PodTopologySpread's score: per constraint, the matching pods in the node's domain times
        log(domains + 2), plus maxSkew - 1; fewer is better after normalising. Nodes without
        every topology key score 0 (unless the constraints are the system defaults)."""
        ignored = [self.ignored(row) for row, _ in entries]
        weights: list[float] = []
        for con, by_value, at in self.spread:
            if con.key == LABEL_HOSTNAME:
                size = n_feasible - n_ignored
            else:
                assert by_value
                values = {
                    row[at]
                    for (row, _), ign, occ in zip(entries, ignored, occurring, strict=True)
                    if occ and not ign
                }
                values.discard(None)
                size = len(values)
            weights.append(math.log(size + 2))
        scores: list[int] = []
        for (row, counts), ign in zip(entries, ignored, strict=True):
            r = 0.0
            for (con, by_value, at), weight in zip(self.spread, weights, strict=True):
                if by_value:
                    v = row[at]
                    if v is None:
                        continue
                    count = con.counter.counts.get(v, 0)  # type: ignore[call-overload]
                else:
                    count = counts[at]
                r = r + count * weight + (con.max_skew - 1)
            scores.append(-1 if ign else math.floor(r + 0.5))
        valid = [v for v, occ in zip(scores, occurring, strict=True) if occ and v >= 0]
        lo = min(valid) if valid else 0
        hi = max(valid) if valid else 0
        if hi == 0:
            return [0 if v < 0 else MAX_NODE_SCORE for v in scores]
        return [0 if v < 0 else MAX_NODE_SCORE * (hi + lo - v) // hi for v in scores]


class NodeScorer:
    """The score plugins over the state they read (the cluster state, the node table): the
    weighted sum of their normalised scores on each feasible node, and the winner.

    Kept per node: an upper bound of the resource score any pod can get there (``bound``), and the
    resource scores computed per request class; :meth:`node_changed` drops them when a pod is
    bound to or leaves the node.
    """

    def __init__(self, c: ClusterState, table: NodeTable, options: PlacementOptions) -> None:
        self.cluster = c
        self.table = table
        self.weights = options.weights()
        self.generic = (
            GenericScorer(options.generic)
            if options.score == SCORE_GENERIC and options.generic is not None
            else None
        )
        n = c.n
        self._w_bal = self.weights.get("NodeResourcesBalancedAllocation", 0)
        #: per node, the balance of its requests without the pod (the second term of
        #: BalancedAllocation's change in balance; see :func:`balanced_allocation_score`)
        self._without = [self._balance_without(i) for i in range(n)]
        #: per node, an upper bound of its resource score for any best-effort pod (LeastAllocated
        #: only), and for any other pod (plus the most BalancedAllocation can give there: the
        #: balance with the pod is at most 100); see :meth:`best`
        self._bound = [self._least_allocated_bound(i) for i in range(n)]
        self._bound_balanced = [self._balanced_bound(i) for i in range(n)]
        #: resource scores per pod request class, per node (None: not known); a bind clears its
        #: node's entries
        self._resource_cache: dict[tuple[int, ...], list[int | None]] = {}
        self._cached_at: list[list[list[int | None]]] = [[] for _ in range(n)]
        #: the score plan of each pod class
        self._plans: dict[PodClass, ScorePlan] = {}

    def plan(self, cls: PodClass) -> ScorePlan:
        """How the pod class's non-resource scores follow from a node (memoised per class)."""
        plan = self._plans.get(cls)
        if plan is None:
            plan = self._plans[cls] = ScorePlan(self.cluster, cls, self.weights)
        return plan

    def node_changed(self, i: int) -> None:
        """A pod was bound to node ``i`` or left it: its bound and cached scores are stale."""
        self._without[i] = self._balance_without(i)
        self._bound[i] = self._least_allocated_bound(i)
        self._bound_balanced[i] = self._balanced_bound(i)
        for cache in self._cached_at[i]:
            cache[i] = None
        self._cached_at[i] = []

    def _balance_without(self, i: int) -> int:
        """Node ``i``'s balance of its raw cpu and memory requests (100 where it lacks either
        allocatable: BalancedAllocation then leaves the balance out)."""
        a_cpu = self.table.alloc_cpu[i]
        a_mem = self.table.alloc_mem[i]
        if a_cpu > 0 and a_mem > 0:
            return _balance(self.table.req_cpu[i] / a_cpu, self.table.req_mem[i] / a_mem)
        return MAX_NODE_SCORE

    def _balanced_bound(self, i: int) -> int:
        """:meth:`_least_allocated_bound` plus the weighted BalancedAllocation score of a pod
        that would leave node ``i`` perfectly balanced (no pod scores more there)."""
        return self._bound[i] + self._w_bal * balanced_change(MAX_NODE_SCORE, self._without[i])

    def _least_allocated_bound(self, i: int) -> int:
        """Node ``i``'s weighted LeastAllocated score for a pod requesting nothing: no pod scores
        more (requesting more only lowers the score)."""
        w_fit = self.weights.get("NodeResourcesFit", 0)
        a_cpu = self.table.alloc_cpu[i]
        a_mem = self.table.alloc_mem[i]
        u_cpu = self.table.nz_cpu[i]
        u_mem = self.table.nz_mem[i]
        if a_cpu > 0 and a_mem > 0:
            s_cpu = (a_cpu - u_cpu) * MAX_NODE_SCORE // a_cpu if u_cpu <= a_cpu else 0
            s_mem = (a_mem - u_mem) * MAX_NODE_SCORE // a_mem if u_mem <= a_mem else 0
            return w_fit * ((s_cpu + s_mem) // 2)
        fit = weight = 0
        for a, u in ((a_cpu, u_cpu), (a_mem, u_mem)):
            if a > 0:
                weight += 1
                fit += (a - u) * MAX_NODE_SCORE // a if u <= a else 0
        return w_fit * (fit // weight if weight else 0)

    def best(self, pod: Pod, pre: PreFilter, feasible: list[int], start: int) -> tuple[int, int]:
        """The feasible node with the highest weighted sum of the score plugins' normalised
        scores (ties: :func:`heap_winner`), and that sum. ``start``: where the search that
        found ``feasible`` started (``feasible`` is the nodes from there on, then those before).

        The resource score is computed only for the nodes that can still win: a node's resource
        score is at most its LeastAllocated score for an empty request (``self._bound``) plus
        the BalancedAllocation score of a pod that would balance it perfectly
        (``self._bound_balanced``; 1.36 scores the change in balance, so a node already near
        balance has less to gain), and a node whose bound falls short of the exact total of the
        node with the best bound can neither win nor tie.
        """
        keys, table, exceptions = self._other_scores(pre, feasible, start)
        if self.generic is not None:
            wg = self.weights[GENERIC_PLUGIN]
            others = list(map(table.__getitem__, keys)) if keys is not None else [table[()]] * len(feasible)
            for j, x in exceptions.items():
                others[j] = x
            totals = [wg * s + x for s, x in zip(self._generic_scores(pod, feasible), others, strict=True)]
            return best_node(feasible, totals)
        w = self.weights
        w_fit = w["NodeResourcesFit"]
        w_bal = w["NodeResourcesBalancedAllocation"] if not pre.best_effort else 0
        bound_of = (self._bound if not w_bal else self._bound_balanced).__getitem__
        if keys is None:
            constant = table[()]
            bounds = list(map(bound_of, feasible))
        else:
            constant = 0
            bounds = list(map(add, map(table.__getitem__, keys), map(bound_of, feasible)))
            for j, x in exceptions.items():
                bounds[j] += x - table[keys[j]]
        caches = self._resource_cache
        cache_key = (pre.nz_cpu, pre.nz_mem, pre.cpu, pre.mem, w_bal)
        cache = caches.get(cache_key)
        if cache is None:
            if len(caches) >= _RESOURCE_CACHE_CLASSES:
                del caches[next(iter(caches))]
            cache = caches[cache_key] = [None] * self.cluster.n
        # the node with the best bound: its exact total is a floor for the winner's
        j0 = bounds.index(max(bounds))
        i0 = feasible[j0]
        score = cache[i0]
        if score is None:
            (score,) = self._resource_scores(pre, [i0], w_fit, w_bal, cache)
        if pre.nz_cpu >= 0 and pre.nz_mem >= 0 and w_fit >= 0 and w_bal >= 0:
            # the exact total of that node; a node whose bound is below it can neither win nor tie
            threshold = bounds[j0] - bound_of(i0) + score
            at = list(compress(range(len(feasible)), map(threshold.__le__, bounds)))
        else:
            at = list(range(len(feasible)))
        nodes = list(map(feasible.__getitem__, at))
        scores = list(map(cache.__getitem__, nodes))
        if None in scores:
            missing = list(compress(range(len(scores)), map(is_, scores, repeat(None))))
            computed = self._resource_scores(pre, list(map(nodes.__getitem__, missing)), w_fit, w_bal, cache)
            for k, score in zip(missing, computed, strict=True):
                scores[k] = score
        # a candidate's other scores: what its bound holds beyond its resource bound
        beyond = map(sub, map(bounds.__getitem__, at), map(bound_of, nodes))
        best, total = best_node(nodes, list(map(add, beyond, scores)), at)
        return best, total + constant

    def _resource_scores(
        self, pre: PreFilter, nodes: list[int], w_fit: int, w_balanced: int, cache: list[int | None]
    ) -> list[int]:
        """NodeResourcesFit (LeastAllocated over NonZeroRequested, cpu and memory weight 1) and
        NodeResourcesBalancedAllocation (requested fractions of cpu and memory; weight 0 for a
        best-effort pod, which it skips), weighted and summed, for the pod on each of ``nodes``;
        kept in ``cache`` (the pod's request class's) until the node is bound to."""
        alloc_cpu, alloc_mem, nz_cpu, nz_mem = (
            self.table.alloc_cpu,
            self.table.alloc_mem,
            self.table.nz_cpu,
            self.table.nz_mem,
        )
        req_cpu, req_mem, cached_at = self.table.req_cpu, self.table.req_mem, self._cached_at
        without = self._without
        p_nz_cpu, p_nz_mem, p_cpu, p_mem = pre.nz_cpu, pre.nz_mem, pre.cpu, pre.mem
        out: list[int] = []
        for i in nodes:
            a_cpu = alloc_cpu[i]
            a_mem = alloc_mem[i]
            if a_cpu > 0 and a_mem > 0:
                used = nz_cpu[i] + p_nz_cpu
                s_cpu = (a_cpu - used) * 100 // a_cpu if used <= a_cpu else 0
                used = nz_mem[i] + p_nz_mem
                s_mem = (a_mem - used) * 100 // a_mem if used <= a_mem else 0
                score = w_fit * ((s_cpu + s_mem) // 2)
                if w_balanced:
                    # balanced_allocation_score, inlined (the same arithmetic), with the
                    # balance without the pod kept per node
                    f_cpu = (req_cpu[i] + p_cpu) / a_cpu
                    f_mem = (req_mem[i] + p_mem) / a_mem
                    diff = (f_cpu if f_cpu < 1.0 else 1.0) - (f_mem if f_mem < 1.0 else 1.0)
                    with_pod = int((1 - abs(diff / 2)) * MAX_NODE_SCORE)
                    score += w_balanced * (_HALF + (_HALF + with_pod - without[i]) // 2)
            else:
                # a node without cpu or memory allocatable: that resource is left out
                fit = weight = 0
                for a, u in ((a_cpu, nz_cpu[i] + p_nz_cpu), (a_mem, nz_mem[i] + p_nz_mem)):
                    if a > 0:
                        weight += 1
                        fit += (a - u) * MAX_NODE_SCORE // a if u <= a else 0
                score = w_fit * (fit // weight if weight else 0)
                if w_balanced:
                    # one fraction (or none): standard deviation 0 with and without the pod
                    score += w_balanced * balanced_change(MAX_NODE_SCORE, MAX_NODE_SCORE)
            out.append(score)
            cache[i] = score
            cached_at[i].append(cache)
        return out

    def _generic_scores(self, pod: Pod, feasible: list[int]) -> list[int]:
        assert self.generic is not None
        allocatable = []
        allocated = []
        for i in feasible:
            allocatable.append(self.table.alloc[i])
            allocated.append(
                {
                    **self.table.req_scalar[i],
                    CPU: self.table.nz_cpu[i],
                    MEMORY: self.table.nz_mem[i],
                    EPHEMERAL_STORAGE: self.table.req_eph[i],
                    PODS: self.table.pod_count[i],
                }
            )
        scores = self.generic.node_scores(requesting_of(pod), allocatable, allocated)
        return [int(s) for s in scores]

    def _other_scores(
        self, pre: PreFilter, feasible: list[int], start: int
    ) -> tuple[Sequence[Any] | None, Mapping[Any, int], dict[int, int]]:
        """TaintToleration, NodeAffinity, InterPodAffinity and PodTopologySpread, weighted and
        summed, per feasible node: ``table[keys[j]]`` for the ``j``-th node, unless
        ``exceptions`` has it (``keys`` None: ``table[()]`` for every node).

        A node's key is its signature (see :class:`ScorePlan`), with its counts of matching
        pods in its hostname-like domains when many nodes have some; when few do, those nodes
        are found by bisection (``feasible`` is two ascending runs: the nodes from the search's
        start on, then those before it) and are the exceptions."""
        plan = self.plan(pre.cls)
        n_feasible = len(feasible)
        maps = plan.maps()
        if plan.constant:
            (row,) = plan.rows
            totals = plan.evaluate([(row, ())], [True], n_feasible, n_feasible if plan.ignored(row) else 0)
            return None, {(): totals[0]}, {}
        sig = plan.sig
        keys: list[int] = list(map(sig.__getitem__, feasible))
        rows = plan.rows
        if maps and sum(map(len, maps)) * 4 > n_feasible:
            # many nodes with matching pods: a count per map in every key
            columns = [keys, *(list(map(m.get, feasible, repeat(0))) for m in maps)]
            rows_of: list[tuple[int, ...]] = list(zip(*columns, strict=True))
            distinct = list(set(rows_of))
            entries = [(rows[k[0]], k[1:]) for k in distinct]
            ignored = [plan.ignored(row) for row, _ in entries]
            n_ignored = 0
            if any(ignored):
                counts = Counter(rows_of)
                n_ignored = sum(counts[k] for k, ign in zip(distinct, ignored, strict=True) if ign)
            totals = plan.evaluate(entries, [True] * len(entries), n_feasible, n_ignored)
            return rows_of, dict(zip(distinct, totals, strict=True)), {}
        sigs = list(set(keys))
        zeros = (0,) * len(maps)
        entries = [(rows[s], zeros) for s in sigs]
        occurring = [True] * len(sigs)
        extra: dict[int, list[int]] = {}
        by_entry: dict[tuple[int, tuple[int, ...]], int] = {}
        if maps:
            split = bisect.bisect_left(feasible, True, key=start.__gt__)
            # the last node of each run (-1: the run is empty)
            last_from = feasible[split - 1] if split else -1
            last_before = feasible[-1] if split < n_feasible else -1
            for e, m in enumerate(maps):
                for i, count in m.items():
                    if i >= start:
                        if i > last_from:
                            continue
                        j = bisect.bisect_left(feasible, i, 0, split)
                    else:
                        if i > last_before:
                            continue
                        j = bisect.bisect_left(feasible, i, split, n_feasible)
                    if feasible[j] == i:
                        extra.setdefault(j, [0] * len(maps))[e] = count
            if extra:
                # a signature's row without counts occurs unless all its nodes are exceptions
                per_sig = Counter(keys[j] for j in extra)
                occurring = [s not in per_sig or keys.count(s) > per_sig[s] for s in sigs]
                for j, counts_j in extra.items():
                    entry_key = (keys[j], tuple(counts_j))
                    if entry_key not in by_entry:
                        by_entry[entry_key] = len(entries)
                        entries.append((rows[keys[j]], entry_key[1]))
                        occurring.append(True)
        n_ignored = 0
        if plan.may_ignore:
            n_ignored = sum(keys.count(s) for s in sigs if plan.ignored(rows[s]))
        totals = plan.evaluate(entries, occurring, n_feasible, n_ignored)
        exceptions = {j: totals[by_entry[(keys[j], tuple(c))]] for j, c in extra.items()}
        # (the entries after the signatures' are the exceptions')
        return keys, dict(zip(sigs, totals, strict=False)), exceptions
