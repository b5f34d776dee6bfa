"""Topology spread constraints as kube-scheduler reads them: which nodes are domains of a
constraint, and which pods it counts.

- ``whenUnsatisfiable``: :data:`DO_NOT_SCHEDULE` (a filter) or :data:`SCHEDULE_ANYWAY` (a score).
- Eligible nodes: ``nodeAffinityPolicy`` (default :data:`HONOR`) keeps only the nodes matching
  the declaring pod's ``nodeSelector`` and required node affinity; ``nodeTaintsPolicy`` (default
  :data:`IGNORE`) with :data:`HONOR` keeps only the nodes whose ``NoSchedule``/``NoExecute``
  taints the pod tolerates. A node must also carry the constraint's topology key (kube-scheduler
  asks for every key of the pod's constraints of the same kind: ``required_keys``).
- Counted pods: those of the pod's namespace matching the ``labelSelector`` with
  ``matchLabelKeys`` merged in: for each listed key the declaring pod carries, ``key=<its value>``
  (a key the pod lacks adds nothing).

- Cluster-level default constraints (kube-scheduler's PodTopologySpread ``defaultConstraints``,
  or its built-in system defaults, :data:`SYSTEM_DEFAULTS`): they apply only to a pod that
  declares no ``topologySpreadConstraints`` of its own, each with the selector
  :func:`default_selector` builds from the Services, ReplicationController, ReplicaSet or
  StatefulSet that select or own the pod (their own ``labelSelector`` and ``matchLabelKeys`` are
  replaced by it); an empty selector means no default constraint (:func:`default_constraints`).

Pure functions over :mod:`desched.k8s.objects`; used by the placement simulator and by the
RemovePodsViolatingTopologySpreadConstraint plugin (one home for these rules).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s import taints as k8s_taints
from desched.k8s.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
    Taint,
    TopologySpreadConstraint,
    Workload,
)
from desched.k8s.pods import controller_ref

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"
#: The taint effects ``nodeTaintsPolicy: Honor`` checks (those of kube-scheduler's filter).
TAINT_EFFECTS: Final = (k8s_taints.TAINT_NO_SCHEDULE, k8s_taints.TAINT_NO_EXECUTE)

LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_ZONE: Final = "topology.kubernetes.io/zone"


@dataclass(frozen=True, slots=True)
class DefaultConstraints:
    """The cluster-level default constraints kube-scheduler applies to pods without their own."""

    constraints: tuple[TopologySpreadConstraint, ...]
    #: kube-scheduler's ``defaultingType: System`` (its scoring then keeps the nodes that lack a
    #: topology key of the defaults, instead of ignoring them).
    system: bool = False


#: kube-scheduler's built-in defaults (``defaultingType: System``, its default).
SYSTEM_DEFAULTS: Final = DefaultConstraints(
    (
        TopologySpreadConstraint(max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY),
        TopologySpreadConstraint(max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY),
    ),
    system=True,
)
#: ``defaultingType: List`` with no constraints: no defaults at all.
NO_DEFAULTS: Final = DefaultConstraints(())

#: The controller kinds whose selector the default selector takes, with the apiVersion the pod's
#: controller reference must name (kube-scheduler compares the group/version/kind).
_SELECTOR_OWNERS: Final = {
    "ReplicationController": "v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
}

#: Finds a pod's controller by (kind, name) in the pod's namespace.
WorkloadLookup = Callable[[str, str], Workload | None]

#: A pod predicate (the merged selector of a constraint).
PodMatcher = Callable[[Pod], bool]
#: A label-set predicate (a compiled label selector).
LabelMatcher = Callable[[Mapping[str, str]], bool]


def node_affinity_policy(c: TopologySpreadConstraint | None) -> str:
    """The constraint's ``nodeAffinityPolicy`` (default Honor; None, kube-scheduler's system
    default constraints: Honor)."""
    return (c.node_affinity_policy if c is not None else None) or HONOR


def node_taints_policy(c: TopologySpreadConstraint | None) -> str:
    """The constraint's ``nodeTaintsPolicy`` (default Ignore; None: system defaults, Ignore)."""
    return (c.node_taints_policy if c is not None else None) or IGNORE


def honors_node_affinity(c: TopologySpreadConstraint | None) -> bool:
    return node_affinity_policy(c) == HONOR


def honors_node_taints(c: TopologySpreadConstraint | None) -> bool:
    return node_taints_policy(c) == HONOR


def tolerates_node(pod: Pod, taints: Sequence[Taint] | None) -> bool:
    """Whether the pod tolerates every NoSchedule/NoExecute taint (``nodeTaintsPolicy: Honor``)."""
    return k8s_taints.untolerated_taint(taints, pod.spec.tolerations, TAINT_EFFECTS) is None


def node_eligible(
    pod: Pod,
    c: TopologySpreadConstraint | None,
    node: Node,
    *,
    required_keys: Iterable[str] = (),
    taints: Sequence[Taint] | None = None,
) -> bool:
    """Whether ``node`` is a domain of ``pod``'s constraint ``c``: it carries every key of
    ``required_keys`` and passes the node inclusion policies (``taints``: the node's taints as
    the check should see them, default its ``spec.taints``)."""
    labels = node.metadata.labels or {}
    if not all(k in labels for k in required_keys):
        return False
    if honors_node_affinity(c) and not k8s_affinity.pod_matches_node_selector(pod, node):
        return False
    return not honors_node_taints(c) or tolerates_node(pod, node.spec.taints if taints is None else taints)


def match_label_pairs(
    c: TopologySpreadConstraint, labels: Mapping[str, str] | None
) -> tuple[tuple[str, str], ...]:
    """What ``matchLabelKeys`` adds to the constraint's selector for a pod with ``labels``: the
    (key, value) of each listed key the pod carries, in the constraint's order."""
    if not c.match_label_keys:
        return ()
    labels = labels or {}
    return tuple((k, labels[k]) for k in c.match_label_keys if k in labels)


def merged_pod_matcher(selector: LabelMatcher, pairs: tuple[tuple[str, str], ...]) -> PodMatcher:
    """A pod predicate for a compiled ``labelSelector`` with :func:`match_label_pairs` merged in."""
    if not pairs:
        return lambda p: selector(p.metadata.labels or {})

    def match(p: Pod) -> bool:
        labels = p.metadata.labels or {}
        for k, v in pairs:
            if labels.get(k) != v:
                return False
        return selector(labels)

    return match


def counts_pod(pod: Pod) -> bool:
    """Whether a pod bound to an eligible node counts in its domain: not finished, not
    terminating (kube-scheduler skips pods with a deletionTimestamp)."""
    return pod.status.phase not in k8s_pods.FINISHED_PHASES and pod.metadata.deletion_timestamp is None


def selector_owner(pod: Pod) -> tuple[str, str] | None:
    """(kind, name) of the pod's controller if it is one whose selector the default selector
    takes (a ReplicationController of ``v1``, a ReplicaSet or StatefulSet of ``apps/v1``)."""
    ref = controller_ref(pod)
    if ref is None or _SELECTOR_OWNERS.get(ref.kind) != ref.api_version:
        return None
    return ref.kind, ref.name


def default_selector(
    pod: Pod, services: Iterable[Service], controller: WorkloadLookup
) -> LabelSelector | None:
    """kube-scheduler's default spread selector for ``pod`` (its ``DefaultSelector``): the
    selectors of the ``services`` of the pod's namespace that select it (a Service without a
    selector selects nothing), merged, and the selector of its controller (a
    ReplicationController's is merged with them, a ReplicaSet's or StatefulSet's requirements are
    added; an invalid one is left out). None when that selects everything (no default
    constraints then)."""
    labels = pod.metadata.labels or {}
    merged: dict[str, str] = {}
    for svc in services:
        svc_sel = svc.spec.selector
        if svc_sel is not None and k8s_labels.labels_match(svc_sel, labels):
            merged.update(svc_sel)
    expressions: list[LabelSelectorRequirement] = []
    owner = selector_owner(pod)
    found = controller(*owner) if owner is not None else None
    if isinstance(found, ReplicationController):
        merged.update(found.spec.selector or {})
    elif isinstance(found, ReplicaSet | StatefulSet) and found.spec.selector is not None:
        sel = found.spec.selector
        try:
            k8s_labels.label_selector_requirements(sel)
        except k8s_labels.SelectorError:
            sel = LabelSelector()
        expressions.extend(
            LabelSelectorRequirement(key=k, operator="In", values=[v])
            for k, v in (sel.match_labels or {}).items()
        )
        expressions.extend(sel.match_expressions or ())
    if not merged and not expressions:
        return None
    return LabelSelector(match_labels=merged or None, match_expressions=expressions or None)


def default_constraints(
    defaults: DefaultConstraints, selector: LabelSelector | None
) -> list[TopologySpreadConstraint]:
    """The defaults as they apply to a pod without constraints whose default selector is
    ``selector`` (:func:`default_selector`): each with that selector and no ``matchLabelKeys``;
    none when the selector is None."""
    if selector is None or not defaults.constraints:
        return []
    return [
        msgspec.structs.replace(c, label_selector=selector, match_label_keys=None)
        for c in defaults.constraints
    ]
