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

Pure functions over :mod:`desched.k8s.objects`; used by the placement simulator and by the
RemovePodsViolatingTopologySpreadConstraint plugin (one home for these rules).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from desched.k8s import affinity as k8s_affinity
from desched.k8s import pods as k8s_pods
from desched.k8s import taints as k8s_taints
from desched.k8s.objects import Node, Pod, Taint, TopologySpreadConstraint

DO_NOT_SCHEDULE: Final = "DoNotSchedule"
SCHEDULE_ANYWAY: Final = "ScheduleAnyway"
HONOR: Final = "Honor"
IGNORE: Final = "Ignore"
#: The taint effects ``nodeTaintsPolicy: Honor`` checks (those of kube-scheduler's filter).
TAINT_EFFECTS: Final = (k8s_taints.TAINT_NO_SCHEDULE, k8s_taints.TAINT_NO_EXECUTE)

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
