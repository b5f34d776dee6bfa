"""Taints and tolerations (``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``).

A toleration tolerates a taint when:

1. its effect is empty (any effect) or equals the taint's;
2. its key is empty (any key) or equals the taint's;
3. its operator is ``Exists`` (any value), or ``Equal``/empty and the values are equal, or
   ``Gt``/``Lt`` and the taint's value, as an int64, is greater/less than the toleration's (both
   must parse; KEP-5471 comparison operators, which the API only admits with their feature gate).

Any other operator tolerates nothing. API validation forbids an empty key with ``Equal``; the
function itself does not care, and neither does this one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from desched.k8s.labels import parse_int64
from desched.k8s.objects import Node, Pod, Taint, Toleration

__all__ = [
    "TAINT_NO_EXECUTE",
    "TAINT_NO_SCHEDULE",
    "TAINT_PREFER_NO_SCHEDULE",
    "TOLERATION_OP_EQUAL",
    "TOLERATION_OP_EXISTS",
    "TOLERATION_OP_GT",
    "TOLERATION_OP_LT",
    "pod_tolerates_node_taints",
    "tolerates_taint",
    "toleration_tolerates_taint",
    "untolerated_taint",
]

TAINT_NO_SCHEDULE = "NoSchedule"
TAINT_PREFER_NO_SCHEDULE = "PreferNoSchedule"
TAINT_NO_EXECUTE = "NoExecute"

TOLERATION_OP_EXISTS = "Exists"
TOLERATION_OP_EQUAL = "Equal"
TOLERATION_OP_GT = "Gt"
TOLERATION_OP_LT = "Lt"

_SCHEDULING_EFFECTS = (TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE)


def toleration_tolerates_taint(t: Toleration, taint: Taint) -> bool:
    """Whether toleration ``t`` tolerates ``taint``."""
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    op = t.operator
    if op == "" or op == TOLERATION_OP_EQUAL:
        return t.value == taint.value
    if op == TOLERATION_OP_EXISTS:
        return True
    if op in (TOLERATION_OP_GT, TOLERATION_OP_LT):
        bound = parse_int64(t.value)
        actual = parse_int64(taint.value)
        if bound is None or actual is None:
            return False
        return actual > bound if op == TOLERATION_OP_GT else actual < bound
    return False


def tolerates_taint(tolerations: Sequence[Toleration] | None, taint: Taint) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint``."""
    if not tolerations:
        return False
    for t in tolerations:  # noqa: SIM110 -- hot path
        if toleration_tolerates_taint(t, taint):
            return True
    return False


def untolerated_taint(
    taints: Sequence[Taint] | None,
    tolerations: Sequence[Toleration] | None,
    effects: Collection[str],
) -> Taint | None:
    """The first taint whose effect is in ``effects`` that no toleration tolerates, or None."""
    if not taints:
        return None
    for taint in taints:
        if taint.effect in effects and not tolerates_taint(tolerations, taint):
            return taint
    return None


def pod_tolerates_node_taints(pod: Pod, node: Node, effects: Collection[str] = _SCHEDULING_EFFECTS) -> bool:
    """Whether the pod tolerates every taint of the node with one of ``effects``
    (default NoSchedule and NoExecute, as descheduler's NodeFit)."""
    taints = node.spec.taints
    if not taints:
        return True
    return untolerated_taint(taints, pod.spec.tolerations, effects) is None
