"""kube-scheduler's score plugins as modelled (see :mod:`desched.scheduling.placement`): the
resource scores' arithmetic, the normalisation, the winner among equal totals (:func:`heap_winner`)
and :class:`ScorePlan`, how a pod class's other scores follow from a few facts about a node."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from itertools import compress
from typing import TYPE_CHECKING, Final

from desched.k8s import affinity as k8s_affinity
from desched.scheduling.placement.shapes import encode
from desched.scheduling.placement.state import LABEL_HOSTNAME, ClusterState, SpreadConstraint

if TYPE_CHECKING:
    from desched.scheduling.placement.simulator import PodClass

MAX_NODE_SCORE: Final = 100


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
