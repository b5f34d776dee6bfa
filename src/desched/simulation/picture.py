"""The cluster before and after: node utilisation, the skew of every topology spread constraint and
the pods still violating taints, node affinity, required anti-affinity and DoNotSchedule spread
constraints (:func:`cluster_picture`); a later picture of the same snapshot is brought up to date
from the pods that came and went rather than counted again."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s import taints as k8s_taints
from desched.k8s import topologyspread as k8s_topologyspread
from desched.k8s.objects import LabelSelector, Pod, PodAffinityTerm, TopologySpreadConstraint
from desched.k8s.resources import CPU, MEMORY, PODS
from desched.k8s.topologyspread import DO_NOT_SCHEDULE
from desched.scheduling.placement.filters import FILTER_EFFECTS
from desched.scheduling.placement.shapes import affinity_shape, encode
from desched.scheduling.placement.state import ClusterState, TermIndex, selector_bucket


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """A node's requests as a percentage of its allocatable."""

    name: str
    cpu: float
    memory: float
    pods: float


@dataclass(frozen=True, slots=True)
class Stats:
    mean: float
    stddev: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Stats:
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0)
        mean = sum(values) / len(values)
        var = sum((v - mean) ** 2 for v in values) / len(values)
        return cls(mean, math.sqrt(var), min(values), max(values))


@dataclass(frozen=True, slots=True)
class ConstraintSkew:
    """One distinct topology spread constraint and how skewed its domains are."""

    #: Identifies the constraint across pictures.
    id: str
    namespace: str
    topology_key: str
    max_skew: int
    when_unsatisfiable: str
    selector: str
    min_domains: int | None
    #: The declaring workload (owner kind/name) or pod.
    declared_by: str
    domains: int
    pods: int
    skew: int
    #: Pods above ``global minimum + maxSkew`` in their domain.
    excess: int


@dataclass(frozen=True, slots=True)
class _SpreadSpec:
    pod: Pod
    constraint: TopologySpreadConstraint
    required_keys: tuple[str, ...]


VIOLATION_KINDS: Final = ("taints", "nodeAffinity", "podAntiAffinity", "topologySpread")


@dataclass
class ClusterPicture:
    """Node utilisation, topology skew and remaining violations at one moment."""

    nodes: list[NodeUsage]
    skew: list[ConstraintSkew]
    #: Pods violating, by kind (see :data:`VIOLATION_KINDS`); topologySpread counts the pods in
    #: excess of their DoNotSchedule constraints.
    violations: dict[str, int]
    specs: dict[str, _SpreadSpec] = field(default_factory=dict, repr=False)
    #: What a later picture of the same snapshot can start from (see :func:`cluster_picture`).
    state: _Picture | None = field(default=None, repr=False, compare=False)

    def stats(self, resource: str) -> Stats:
        return Stats.of([getattr(u, resource) for u in self.nodes])


def _spec_id(pod: Pod, c: TopologySpreadConstraint) -> str:
    labels = pod.metadata.labels or {}
    extra = k8s_topologyspread.match_label_pairs(c, labels)
    aff = affinity_shape(pod) if k8s_topologyspread.honors_node_affinity(c) else b""
    taints = encode(pod.spec.tolerations) if k8s_topologyspread.honors_node_taints(c) else b""
    raw = encode((pod.metadata.namespace, c, extra, aff, taints))
    return hashlib.sha1(raw).hexdigest()[:12]


def _declared_by(pod: Pod) -> str:
    ref = k8s_pods.controller_ref(pod)
    return f"{ref.kind}/{ref.name}" if ref is not None else f"Pod/{pod.metadata.name}"


def cluster_picture(
    snapshot: ClusterSnapshot,
    extra_specs: Mapping[str, _SpreadSpec] | None = None,
    *,
    since: ClusterPicture | None = None,
) -> ClusterPicture:
    """Utilisation per node, the skew of every topology spread constraint the pods declare (and
    of ``extra_specs``, e.g. those of an earlier picture), and the pods still violating taints,
    node affinity, required anti-affinity and DoNotSchedule spread constraints.

    ``since``, an earlier picture of the same snapshot, is brought up to date from the pods
    that came and went since (it can be used once: its state moves to the new picture)."""
    state = since.state if since is not None else None
    if state is not None and state.snapshot is snapshot:
        since.state = None  # type: ignore[union-attr]
        if state.catch_up():
            return _kept(state.picture(extra_specs))
    state = _Picture(snapshot)
    return _kept(state.picture(extra_specs))


def _kept(picture: ClusterPicture) -> ClusterPicture:
    """The picture, its state without the pods by namespace and label that the counts were made
    from: a catch-up drops them first anyway, and they would stay in memory in the meantime
    (through a simulation's cycles and placements)."""
    if picture.state is not None:
        picture.state.c.forget_pods()
    return picture


class _Picture:
    """What a picture counts, kept so that a later picture of the same snapshot only has to
    count the pods that came and went: the pods in snapshot order, the violations of taints and
    node affinity so far, the pods with required anti-affinity, the pods declaring each spread
    constraint (in order: the first one stands for it), and the spread counters and term
    indexes of :class:`ClusterState`."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.c = c = ClusterState(snapshot)
        self.alloc = [snapshot.allocatable(node) for node in c.nodes]
        self.tainted = [any(t.effect in FILTER_EFFECTS for t in node.spec.taints or ()) for node in c.nodes]
        self.n_taints = 0
        self.n_affinity = 0
        #: pods with required anti-affinity: id -> (pod, node, its terms' indexes)
        self.anti: dict[int, tuple[Pod, int, list[tuple[str, TermIndex]]]] = {}
        #: spread constraint id -> the pods declaring it, in snapshot order (pod, position of
        #: the constraint, the topology keys of the pod's constraints of the same kind)
        self.declared: dict[str, list[tuple[Pod, int, tuple[str, ...]]]] = {}
        # memos by what the checks read of a pod: node affinity per node, the anti-affinity
        # terms' indexes, the spread constraints' ids
        self._affinity: dict[tuple[bytes, int], bool] = {}
        self._anti_terms: dict[bytes, list[tuple[str, TermIndex]]] = {}
        self._spread_ids: dict[bytes, list[tuple[str, int, tuple[str, ...]]]] = {}
        self.pods = snapshot.pods
        for pod in self.pods:
            self._visit(pod, True)

    def catch_up(self) -> bool:
        """Count the pods that came and went since; False if the snapshot's order does not
        allow it (a pod that stayed moved): then only a fresh picture will do."""
        before = self.pods
        after = self.snapshot.pods
        # one walk of both lists, no set of every pod (150,000 ids at 5,000 nodes would be the
        # peak of a simulation): a pod of ``before`` that is next in ``after`` stayed, any other
        # went; ``after``'s rest came. A pod that stayed but moved is taken for one that went
        # and came back: then only a fresh picture will do.
        went: list[Pod] = []
        j = 0
        n_after = len(after)
        for pod in before:
            if j < n_after and after[j] is pod:
                j += 1
            else:
                went.append(pod)
        came = after[j:]
        if not set(map(id, went)).isdisjoint(map(id, came)):
            return False
        c = self.c
        c.forget_pods()
        index_get = c.index.get
        # the counters and term indexes first: those the visits make are made from the snapshot
        # as it is now
        for pods, added in ((went, False), (came, True)):
            for pod in pods:
                i = index_get(pod.spec.node_name)
                if i is not None:
                    c.pod_changed(pod, i, added)
        for pod in went:
            self._visit(pod, False)
        for pod in came:
            self._visit(pod, True)
        self.pods = after
        return True

    def _visit(self, pod: Pod, added: bool) -> None:
        """Count (or, not ``added``, take back) what one pod adds to the picture."""
        c = self.c
        spec = pod.spec
        i = c.index.get(spec.node_name)
        if i is None or pod.status.phase in k8s_pods.FINISHED_PHASES:
            return
        annotations = pod.metadata.annotations
        if annotations is not None and k8s_pods.MIRROR_POD_ANNOTATION in annotations:
            return
        sign = 1 if added else -1
        node = c.nodes[i]
        if self.tainted[i] and k8s_taints.untolerated_taint(
            node.spec.taints, spec.tolerations, FILTER_EFFECTS
        ):
            self.n_taints += sign
        aff = spec.affinity
        node_affinity = aff.node_affinity if aff is not None else None
        required = (
            node_affinity.required_during_scheduling_ignored_during_execution
            if node_affinity is not None
            else None
        )
        if spec.node_selector or required is not None:
            key = (encode((spec.node_selector, required)), i)  # (affinity_shape)
            ok = self._affinity.get(key)
            if ok is None:
                ok = self._affinity[key] = k8s_affinity.pod_matches_node_selector(pod, node)
            if not ok:
                self.n_affinity += sign
        if aff is not None:
            anti = aff.pod_anti_affinity
            terms = anti.required_during_scheduling_ignored_during_execution if anti is not None else None
            if terms:
                if added:
                    memo_key = encode((pod.metadata.namespace, terms))
                    indexes = self._anti_terms.get(memo_key)
                    if indexes is None:
                        indexes = self._anti_terms[memo_key] = _anti_term_indexes(c, pod, terms)
                    self.anti[id(pod)] = (pod, i, indexes)
                else:
                    del self.anti[id(pod)]
        tscs = spec.topology_spread_constraints
        if tscs:
            memo_key = _spread_key(pod, tscs, required)
            ids = self._spread_ids.get(memo_key)
            if ids is None:
                ids = self._spread_ids[memo_key] = _spread_ids(pod, tscs)
            for sid, at, required_keys in ids:
                declared = self.declared.setdefault(sid, [])
                if added:
                    declared.append((pod, at, required_keys))
                else:
                    for k, entry in enumerate(declared):
                        if entry[0] is pod:
                            del declared[k]
                            break
                    if not declared:
                        del self.declared[sid]

    def picture(self, extra_specs: Mapping[str, _SpreadSpec] | None) -> ClusterPicture:
        c = self.c
        snapshot = self.snapshot
        usage: list[NodeUsage] = []
        for i in sorted(range(c.n), key=c.names.__getitem__):
            name = c.names[i]
            alloc = self.alloc[i]
            used = snapshot.requested_on(name)
            usage.append(
                NodeUsage(
                    name,
                    _percent(used.get(CPU, 0), alloc.get(CPU, 0)),
                    _percent(used.get(MEMORY, 0), alloc.get(MEMORY, 0)),
                    _percent(snapshot.pod_count_on(name), alloc.get(PODS, 0)),
                )
            )
        labels = c.labels
        n_anti = sum(
            1 for pod, i, indexes in self.anti.values() if _violates_anti_affinity(c, pod, labels[i], indexes)
        )
        violations = dict(zip(VIOLATION_KINDS, (self.n_taints, self.n_affinity, n_anti, 0), strict=True))
        specs: dict[str, _SpreadSpec] = {}
        for sid, declared in self.declared.items():
            pod, at, required_keys = declared[0]
            tscs = pod.spec.topology_spread_constraints
            assert tscs is not None
            specs[sid] = _SpreadSpec(pod, tscs[at], required_keys)
        for sid, extra in (extra_specs or {}).items():
            specs.setdefault(sid, extra)
        skews: list[ConstraintSkew] = []
        for sid in sorted(
            specs, key=lambda s: (specs[s].pod.metadata.namespace, specs[s].constraint.topology_key, s)
        ):
            entry = _constraint_skew(c, sid, specs[sid])
            if entry is None:
                continue
            skews.append(entry)
            if entry.when_unsatisfiable == DO_NOT_SCHEDULE:
                violations["topologySpread"] += entry.excess
        return ClusterPicture(usage, skews, violations, specs, self)


def _percent(used: int, allocatable: int) -> float:
    return 100.0 * used / allocatable if allocatable > 0 else 0.0


def _anti_term_indexes(
    c: ClusterState, pod: Pod, terms: list[PodAffinityTerm]
) -> list[tuple[str, TermIndex]]:
    """The pod's required anti-affinity terms' indexes (terms with an invalid selector left out)."""
    out: list[tuple[str, TermIndex]] = []
    for term in terms:
        try:
            out.append((term.topology_key, c.term_index(pod, term)))
        except k8s_labels.SelectorError:
            continue
    return out


def _violates_anti_affinity(
    c: ClusterState, pod: Pod, labels: Mapping[str, str], indexes: list[tuple[str, TermIndex]]
) -> bool:
    """Whether another pod in the domain of the pod's node matches one of its anti-affinity
    terms."""
    for key, ti in indexes:
        value = labels.get(key)
        if value is None:
            continue
        if ti.domain_counts(key, c.labels).get(value, 0) - (1 if ti.matches(pod) else 0) > 0:
            return True
    return False


def _spread_key(pod: Pod, tscs: list[TopologySpreadConstraint], required: object) -> bytes:
    """What the ids of a pod's spread constraints depend on (``required``: its required node
    affinity)."""
    extra: list[tuple[str, str]] = []
    if any(t.match_label_keys for t in tscs):
        labels = pod.metadata.labels
        extra = sorted({pair for t in tscs for pair in k8s_topologyspread.match_label_pairs(t, labels)})
    spec = pod.spec
    return encode((pod.metadata.namespace, tscs, extra, spec.node_selector, required, spec.tolerations))


def _spread_ids(pod: Pod, tscs: list[TopologySpreadConstraint]) -> list[tuple[str, int, tuple[str, ...]]]:
    """Per spread constraint of the pod: its id, position and the topology keys of the pod's
    constraints of the same kind."""
    out: list[tuple[str, int, tuple[str, ...]]] = []
    for at, tsc in enumerate(tscs):
        same_kind = [t.topology_key for t in tscs if t.when_unsatisfiable == tsc.when_unsatisfiable]
        out.append((_spec_id(pod, tsc), at, tuple(sorted(set(same_kind)))))
    return out


def _constraint_skew(c: ClusterState, sid: str, spec: _SpreadSpec) -> ConstraintSkew | None:
    pod, tsc = spec.pod, spec.constraint
    labels = pod.metadata.labels or {}
    try:
        selector = k8s_labels.compile_label_selector(tsc.label_selector, none_matches=False)
    except k8s_labels.SelectorError:
        return None
    extra = k8s_topologyspread.match_label_pairs(tsc, labels)
    match = k8s_topologyspread.merged_pod_matcher(selector, extra)
    eligible = c.eligible(pod, spec.required_keys, tsc)
    ns = pod.metadata.namespace
    sel = tsc.label_selector
    counter = c.counter(
        ("sel", ns, encode(sel), extra, tsc.topology_key, id(eligible)),
        ns,
        tsc.topology_key,
        match,
        eligible,
        lambda: c.candidates(ns, sel),
        selector_bucket(ns, sel),
    )
    counts = counter.counts
    return ConstraintSkew(
        sid,
        ns,
        tsc.topology_key,
        tsc.max_skew,
        tsc.when_unsatisfiable,
        selector_text(sel, extra),
        tsc.min_domains,
        _declared_by(pod),
        len(counter.domains),
        sum(counts.values()),
        counter.skew(tsc.min_domains),
        counter.excess(tsc.min_domains, tsc.max_skew),
    )


def selector_text(sel: LabelSelector | None, extra: Sequence[tuple[str, str]] = ()) -> str:
    """A label selector as ``kubectl`` would write it."""
    if sel is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sorted((sel.match_labels or {}).items())]
    for e in sel.match_expressions or ():
        values = ",".join(e.values or ())
        if e.operator == "In":
            parts.append(f"{e.key} in ({values})")
        elif e.operator == "NotIn":
            parts.append(f"{e.key} notin ({values})")
        elif e.operator == "Exists":
            parts.append(e.key)
        elif e.operator == "DoesNotExist":
            parts.append(f"!{e.key}")
        else:
            parts.append(f"{e.key} {e.operator} ({values})")
    parts.extend(f"{k}={v}" for k, v in extra)
    return ",".join(parts) or "<all>"


# =============================================================================== the cluster index
