"""PodDisruptionBudgets: the budget as the disruption controller computes it, and the eviction
API's answer to one eviction (``pkg/controller/disruption`` and
``pkg/registry/core/pod/storage/eviction.go`` of Kubernetes).

Pure functions over the slim records; :class:`desched.backends.simulated_eviction.SimulatedEvictionApi`
keeps the per-cycle state (budgets decremented eviction by eviction).

The budget of a PDB (:func:`compute_budget`):

- with ``status.disruptionsAllowed`` in the snapshot (a live cluster's PDB), the controller's
  figures are taken as they are: ``disruptionsAllowed``, ``currentHealthy``, ``desiredHealthy``;
  a status older than the spec (``observedGeneration < metadata.generation``) makes the API
  refuse every eviction until the controller catches up;
- otherwise computed as the controller does: the matching pods are the PDB's namespace's pods its
  selector matches; *healthy* pods are those that are Ready and not terminating;
  ``minAvailable`` as an integer wants that many healthy pods, out of an expected count equal to
  the number of matching pods; ``minAvailable`` as a percentage and ``maxUnavailable`` (integer or
  percentage) are taken of the expected count, the sum of the scales of the pods' controllers
  (percentages rounded up, as ``intstr.GetScaledValueFromIntOrPercent(..., true)``);
  ``maxUnavailable`` wants ``expected - maxUnavailable`` healthy pods (not below 0). The snapshot
  holds no workload objects, so a controller's scale is the number of its matching pods that have
  not finished, unless the caller knows better (``scale_of``); pods with no controller do not add
  to the expected count. ``disruptionsAllowed = currentHealthy - desiredHealthy``, 0 when negative
  or when the expected count is 0; an unreadable percentage gives 0 (the controller's fail-safe).

The eviction API's answer (:func:`answer_eviction`), in its order: a pod that is Succeeded,
Failed, Pending or terminating is deleted without looking at budgets; a pod matched by more than
one PDB is refused with 500; by none, evicted; a pod that is not Ready is evicted without
spending the budget when the PDB's ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or when the
budget is healthy (``currentHealthy >= desiredHealthy > 0``); otherwise a stale status is a 429, a
negative budget a 403, a spent one (0) a 429, and anything else is evicted and spends one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from desched.k8s.objects import OwnerReference, Pod, PodDisruptionBudget
from desched.k8s.pods import FINISHED_PHASES, controller_ref, is_pod_ready, is_terminating

__all__ = [
    "ALWAYS_ALLOW",
    "IF_HEALTHY_BUDGET",
    "Budget",
    "EvictionAnswer",
    "answer_eviction",
    "can_ignore_pdb",
    "compute_budget",
    "is_healthy",
    "scaled_value",
    "status_behind_pods",
]

ALWAYS_ALLOW = "AlwaysAllow"
IF_HEALTHY_BUDGET = "IfHealthyBudget"

TOO_MANY_REQUESTS = 429
FORBIDDEN = 403
INTERNAL_ERROR = 500

_VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."
_SEVERAL = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
_PERCENT = re.compile(r"^(\d+)%$")

ScaleOf = Callable[[OwnerReference, str], int | None]
"""(controller reference, namespace) -> the controller's scale, or None when unknown."""


def scaled_value(value: int | str, total: int, *, round_up: bool) -> int:
    """An int-or-percent against ``total`` (``intstr.GetScaledValueFromIntOrPercent``).

    Raises ValueError for a string that is not ``<digits>%``.
    """
    if isinstance(value, int):
        return value
    m = _PERCENT.match(value)
    if m is None:
        raise ValueError(f"invalid value for IntOrString: invalid value {value!r}")
    percent = int(m.group(1))
    exact = percent * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def is_healthy(pod: Pod) -> bool:
    """What the disruption controller counts as healthy: Ready and not terminating."""
    return not is_terminating(pod) and is_pod_ready(pod)


def can_ignore_pdb(pod: Pod) -> bool:
    """The eviction API deletes such a pod without looking at budgets (``canIgnorePDB``)."""
    return pod.status.phase in (*FINISHED_PHASES, "Pending") or is_terminating(pod)


@dataclass(frozen=True, slots=True)
class Budget:
    """One PDB's figures, as its status would show them."""

    namespace: str
    name: str
    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int
    #: The status lags the spec: the API refuses every eviction under this PDB.
    stale: bool = False
    #: Taken from the object's status (True) or computed from the pods (False).
    from_status: bool = False
    policy: str = IF_HEALTHY_BUDGET

    def spend(self) -> Budget:
        return replace(self, disruptions_allowed=self.disruptions_allowed - 1)


def _expected_scale(pods: Sequence[Pod], scale_of: ScaleOf | None) -> int:
    """The sum of the scales of the pods' controllers (each controller once)."""
    known: dict[tuple[str, str, str], int] = {}
    asked: set[tuple[str, str, str]] = set()
    counted: dict[tuple[str, str, str], int] = {}
    for pod in pods:
        ref = controller_ref(pod)
        if ref is None:
            continue  # an unmanaged pod: the controller leaves it out (and warns)
        key = (ref.kind, ref.name, ref.uid)
        if key in known:
            continue
        if scale_of is not None and key not in asked:
            asked.add(key)
            scale = scale_of(ref, pod.metadata.namespace)
            if scale is not None:
                known[key] = scale
                continue
        running = 0 if pod.status.phase in FINISHED_PHASES else 1
        counted[key] = counted.get(key, 0) + running
    return sum(known.values()) + sum(counted.values())


def compute_budget(
    pdb: PodDisruptionBudget, pods: Sequence[Pod], *, scale_of: ScaleOf | None = None
) -> Budget:
    """The PDB's budget: from its status when it has one, else computed from ``pods`` (the pods
    of its namespace that its selector matches) as the disruption controller computes it."""
    meta, spec, status = pdb.metadata, pdb.spec, pdb.status
    policy = spec.unhealthy_pod_eviction_policy or IF_HEALTHY_BUDGET
    if status.disruptions_allowed is not None:
        return Budget(
            meta.namespace,
            meta.name,
            status.expected_pods,
            status.desired_healthy,
            status.current_healthy,
            status.disruptions_allowed,
            stale=status.observed_generation < meta.generation,
            from_status=True,
            policy=policy,
        )
    current = sum(1 for p in pods if is_healthy(p))
    expected = 0
    desired = 0
    try:
        if spec.max_unavailable is not None:
            expected = _expected_scale(pods, scale_of)
            desired = max(expected - scaled_value(spec.max_unavailable, expected, round_up=True), 0)
        elif spec.min_available is not None:
            if isinstance(spec.min_available, int):
                desired = spec.min_available
                expected = len(pods)
            else:
                expected = _expected_scale(pods, scale_of)
                desired = scaled_value(spec.min_available, expected, round_up=True)
    except ValueError:
        # the controller cannot compute it and sets the fail-safe status: no disruption allowed
        return Budget(meta.namespace, meta.name, 0, 0, current, 0, policy=policy)
    allowed = current - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return Budget(meta.namespace, meta.name, expected, desired, current, allowed, policy=policy)


def status_behind_pods(budget: Budget, healthy_seen: int) -> bool:
    """The budget's status lets an unhealthy pod go (``IfHealthyBudget``: ``currentHealthy >=
    desiredHealthy > 0``) while its pods, as seen now, have fewer healthy than desired: a recount
    would refuse that eviction. The status is behind its pods (the disruption controller has not
    recounted since they turned unhealthy, as after a control-plane outage)."""
    return (
        budget.from_status
        and budget.policy == IF_HEALTHY_BUDGET
        and budget.current_healthy >= budget.desired_healthy > 0
        and healthy_seen < budget.desired_healthy
    )


@dataclass(frozen=True, slots=True)
class EvictionAnswer:
    """What the eviction API answers: evicted (``code`` 0), or refused with an HTTP code."""

    code: int = 0
    message: str = ""
    #: The PDB whose budget the eviction spends (None when it spends none).
    spends: tuple[str, str] | None = None

    @property
    def evicted(self) -> bool:
        return self.code == 0

    def error(self) -> str:
        """As desched's API backend reports a refusal: the HTTP code and the message."""
        return f"{self.code} {self.message}"


def answer_eviction(
    pod: Pod,
    pdbs: Sequence[PodDisruptionBudget],
    budget_of: Callable[[PodDisruptionBudget], Budget],
) -> EvictionAnswer:
    """The eviction API's answer for ``pod``, matched by ``pdbs``; ``budget_of`` gives a PDB's
    budget as it stands now (after the evictions it already allowed)."""
    if can_ignore_pdb(pod):
        return EvictionAnswer()
    if len(pdbs) > 1:
        names = ", ".join(sorted(p.metadata.name for p in pdbs))
        return EvictionAnswer(INTERNAL_ERROR, f"{_SEVERAL} ({names})")
    if not pdbs:
        return EvictionAnswer()
    budget = budget_of(pdbs[0])
    if not is_pod_ready(pod):
        if budget.policy == ALWAYS_ALLOW:
            return EvictionAnswer()
        if budget.current_healthy >= budget.desired_healthy > 0:
            return EvictionAnswer()
    if budget.stale:
        return EvictionAnswer(
            TOO_MANY_REQUESTS,
            f"{_VIOLATES} (The disruption budget {budget.name} is still being processed by the server.)",
        )
    if budget.disruptions_allowed < 0:
        return EvictionAnswer(
            FORBIDDEN,
            f'poddisruptionbudgets.policy "{budget.name}" is forbidden: pdb disruptions allowed is negative',
        )
    if budget.disruptions_allowed == 0:
        return EvictionAnswer(
            TOO_MANY_REQUESTS,
            f"{_VIOLATES} (The disruption budget {budget.name} needs {budget.desired_healthy} healthy "
            f"pods and has {budget.current_healthy} currently)",
        )
    return EvictionAnswer(spends=(budget.namespace, budget.name))
