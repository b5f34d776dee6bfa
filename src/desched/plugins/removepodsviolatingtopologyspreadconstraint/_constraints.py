"""The constraints of RemovePodsViolatingTopologySpreadConstraint, as kube-scheduler applies them.

A pod's ``topologySpreadConstraints`` built with the pod that declares them (``matchLabelKeys``
merged into the selector, the node filter of ``nodeAffinityPolicy`` / ``nodeTaintsPolicy``), and
the per-cycle cache that builds each distinct constraint once.
"""

from __future__ import annotations

from dataclasses import dataclass

from desched.k8s import labels as k8s_labels
from desched.k8s import topologyspread as k8s_tsc
from desched.k8s.objects import Pod, TopologySpreadConstraint
from desched.plugins._shared import ContentKeys


@dataclass(slots=True, eq=False)
class SpreadConstraint:
    """One topology spread constraint as kube-scheduler applies it to the pod that declares it."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    #: 1 unless set; only meaningful for DoNotSchedule constraints.
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    #: The selector with ``matchLabelKeys`` merged; None when the constraint has no labelSelector
    #: (it then matches nothing, as upstream's LabelSelectorAsSelector(nil)).
    requirements: tuple[k8s_labels.Requirement, ...] | None
    matches: k8s_labels.Matcher
    #: The declaring pod: its node affinity and tolerations decide eligible nodes under Honor.
    source: Pod
    #: The constraint as declared (the first of the equal ones this was built from): its node
    #: inclusion policies decide eligible nodes.
    declared: TopologySpreadConstraint
    #: Which nodes are eligible: equal keys, equal node sets.
    node_filter_key: NodeFilterKey
    #: Identity for deduplication: equal keys, equal constraints.
    key: tuple[object, ...]

    def describe(self) -> str:
        return f"topologyKey={self.topology_key} maxSkew={self.max_skew} {self.when_unsatisfiable}"


@dataclass(frozen=True, slots=True)
class _SelectorParts:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    requirements: tuple[k8s_labels.Requirement, ...] | None
    matches: k8s_labels.Matcher
    selector_key: tuple[object, ...] | None


def _affinity_key(pod: Pod, content: ContentKeys) -> tuple[bytes, bytes] | None:
    """What decides the nodes ``nodeAffinityPolicy: Honor`` keeps: nodeSelector and required
    node affinity (None: neither)."""
    spec = pod.spec
    required = None
    if spec.affinity is not None and spec.affinity.node_affinity is not None:
        required = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    if not spec.node_selector and required is None:
        return None
    return (content(spec.node_selector or _NO_LABELS), content(required))


def _tolerations_key(pod: Pod, content: ContentKeys) -> bytes | None:
    return content(pod.spec.tolerations) if pod.spec.tolerations else None


_NO_LABELS: dict[str, str] = {}
#: What ConstraintCache.build reads of a pod besides the constraint: spread constraints, labels,
#: nodeSelector, affinity, tolerations.
_PodRecords = tuple[object, object, object, object, object]
#: (nodeAffinityPolicy, _affinity_key, nodeTaintsPolicy, _tolerations_key): equal keys, equal nodes
NodeFilterKey = tuple[str, tuple[bytes, bytes] | None, str, bytes | None]


class ConstraintCache:
    """Builds SpreadConstraints from (constraint, pod), sharing the work between the many replicas
    that declare the same constraint."""

    def __init__(self) -> None:
        self._parts: dict[tuple[bytes, tuple[tuple[str, str], ...]], tuple[_SelectorParts, int] | str] = {}
        #: the content of the parts' identity (see ``build``) -> a small number standing for it
        self._parts_ids: dict[tuple[object, ...], int] = {}
        self._built: dict[tuple[int, tuple[bytes, bytes] | None, bytes | None], SpreadConstraint] = {}
        self.content = ContentKeys()
        #: ids of what ``build`` reads of a pod -> (those objects, what ``build_all`` gave)
        self._by_records: dict[
            tuple[int, int, int, int, int], tuple[_PodRecords, list[SpreadConstraint | str]]
        ] = {}

    def build_all(
        self, pod: Pod, tscs: list[TopologySpreadConstraint] | None
    ) -> list[SpreadConstraint | str]:
        """``build`` for each of ``tscs``, the pod's constraints (its own, or the cluster's
        defaults), in order (a string says why one is invalid). The pods whose constraints,
        labels, nodeSelector, affinity and tolerations are the same objects (replicas decoded by
        the snapshot loader) share the answer."""
        spec = pod.spec
        labels = pod.metadata.labels
        node_selector = spec.node_selector
        affinity = spec.affinity
        tolerations = spec.tolerations
        key = (id(tscs), id(labels), id(node_selector), id(affinity), id(tolerations))
        hit = self._by_records.get(key)
        if hit is not None:
            r = hit[0]
            if (
                r[0] is tscs
                and r[1] is labels
                and r[2] is node_selector
                and r[3] is affinity
                and r[4] is tolerations
            ):
                return hit[1]
        out: list[SpreadConstraint | str] = []
        for tsc in tscs or ():
            try:
                out.append(self.build(tsc, pod))
            except k8s_labels.SelectorError as e:
                out.append(str(e))
        # (the entry holds the records, so their ids are not reused while cached)
        self._by_records[key] = ((tscs, labels, node_selector, affinity, tolerations), out)
        return out

    def build(self, constraint: TopologySpreadConstraint, pod: Pod) -> SpreadConstraint:
        """The constraint as it applies to ``pod``; raises SelectorError for an invalid selector."""
        pairs = k8s_tsc.match_label_pairs(constraint, pod.metadata.labels)
        content = self.content
        raw = (content(constraint), pairs)
        hit = self._parts.get(raw)
        if hit is None:
            found = self._selector_parts(constraint, pairs)
            if isinstance(found, str):
                hit = found
            else:
                # Equal parts may come from different raw constraints (e.g. requirements in
                # another order): they share one number, so they build one SpreadConstraint.
                same = (
                    found.max_skew,
                    found.topology_key,
                    found.when_unsatisfiable,
                    found.min_domains,
                    found.selector_key,
                    found.node_affinity_policy,
                    found.node_taints_policy,
                )
                hit = (found, self._parts_ids.setdefault(same, len(self._parts_ids)))
            self._parts[raw] = hit
        if isinstance(hit, str):
            raise k8s_labels.SelectorError(hit)
        parts, parts_id = hit
        aff = _affinity_key(pod, content) if parts.node_affinity_policy == k8s_tsc.HONOR else None
        tol = _tolerations_key(pod, content) if parts.node_taints_policy == k8s_tsc.HONOR else None
        built = self._built.get((parts_id, aff, tol))
        if built is None:
            key = (
                parts.max_skew,
                parts.topology_key,
                parts.when_unsatisfiable,
                parts.min_domains,
                parts.selector_key,
                parts.node_affinity_policy,
                parts.node_taints_policy,
                aff,
                tol,
            )
            built = SpreadConstraint(
                max_skew=parts.max_skew,
                topology_key=parts.topology_key,
                when_unsatisfiable=parts.when_unsatisfiable,
                min_domains=parts.min_domains,
                node_affinity_policy=parts.node_affinity_policy,
                node_taints_policy=parts.node_taints_policy,
                requirements=parts.requirements,
                matches=parts.matches,
                source=pod,
                declared=constraint,
                node_filter_key=(parts.node_affinity_policy, aff, parts.node_taints_policy, tol),
                key=key,
            )
            self._built[(parts_id, aff, tol)] = built
        return built

    @staticmethod
    def _selector_parts(
        c: TopologySpreadConstraint, pairs: tuple[tuple[str, str], ...]
    ) -> _SelectorParts | str:
        reqs: tuple[k8s_labels.Requirement, ...] | None = None
        matches: k8s_labels.Matcher = k8s_labels.match_nothing
        selector_key: tuple[object, ...] | None = None
        if c.label_selector is not None:
            try:
                base = k8s_labels.label_selector_requirements(c.label_selector)
                merged = [k8s_labels.new_requirement(k, k8s_labels.OP_EQUALS, (v,)) for k, v in pairs]
            except k8s_labels.SelectorError as e:
                return f"labelSelector: {e}"
            reqs = tuple(merged + base)
            matches = k8s_labels.requirements_matcher(reqs)
            selector_key = tuple(sorted({(r.key, r.operator, tuple(sorted(set(r.values)))) for r in reqs}))
        min_domains = c.min_domains if c.min_domains is not None and c.min_domains > 0 else 1
        return _SelectorParts(
            max_skew=c.max_skew,
            topology_key=c.topology_key,
            when_unsatisfiable=c.when_unsatisfiable,
            min_domains=min_domains if c.when_unsatisfiable == k8s_tsc.DO_NOT_SCHEDULE else 1,
            node_affinity_policy=k8s_tsc.node_affinity_policy(c),
            node_taints_policy=k8s_tsc.node_taints_policy(c),
            requirements=reqs,
            matches=matches,
            selector_key=selector_key,
        )
