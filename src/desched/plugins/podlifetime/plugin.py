"""PodLifeTime: evict pods that match age, state, condition, exit-code and owner-kind criteria.

Upstream (``pkg/framework/plugins/podlifetime``) ANDs every criterion that is set; within one
criterion the listed values are ORed:

- ``maxPodLifeTimeSeconds``: whole seconds since ``metadata.creationTimestamp`` strictly above
  the limit (a pod without a creation timestamp is as old as Go's zero time);
- ``states``: the pod's phase, its ``status.reason``, or the waiting or terminated reason of a
  container (init and ephemeral containers only with their ``including*`` flag);
- ``conditions``: some ``status.conditions`` entry matches a filter's type, status and reason (the
  fields set); with ``minTimeSinceLastTransitionSeconds`` the entry must also have a
  ``lastTransitionTime`` at least that many whole seconds ago;
- ``exitCodes``: the exit code of a terminated container (init containers with the flag);
- ``ownerKinds``: include (some owner has one of the kinds) or exclude (no owner has one).

Matching pods of all the given nodes are evicted together, oldest first. "Oldest" is by the most
recent ``lastTransitionTime`` among the conditions matching a filter that carries a transition
threshold, if there is one, else by creation time (upstream's README); desched breaks ties by
namespace and name.

RemoveFailedPods is this plugin with the phase fixed to Failed (upstream delegates the same way):
:class:`LifetimeCriteria` and :func:`evict_oldest_first` are shared with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, ClassVar

from pydantic import Field, field_validator, model_validator

from desched.api.types import ArgsModel, LabelSelectorArg, Namespaces
from desched.framework.types import Handle, Status
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import ZERO_TIME, ContainerStatus, Node, Pod, PodCondition
from desched.plugins._shared import PodPredicate, pod_selector, select_all

#: What ``states`` may name (upstream's podLifeTimeAllowedStates).
ALLOWED_STATES: tuple[str, ...] = (
    # pod phases
    "Running",
    "Pending",
    "Succeeded",
    "Failed",
    "Unknown",
    # pod status reasons
    "NodeAffinity",
    "NodeLost",
    "Shutdown",
    "UnexpectedAdmissionError",
    # container waiting reasons
    "PodInitializing",
    "ContainerCreating",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "CreateContainerConfigError",
    "ErrImagePull",
    "CreateContainerError",
    "InvalidImageName",
    # container terminated reasons
    "OOMKilled",
    "Error",
    "Completed",
    "DeadlineExceeded",
    "Evicted",
    "ContainerCannotRun",
    "StartError",
)
_ALLOWED_STATES = frozenset(ALLOWED_STATES)

Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
#: Go's time.Duration saturates here: a pod created at the zero time is "only" this old.
_MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


class OwnerKinds(ArgsModel):
    include: list[str] | None = None
    exclude: list[str] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> OwnerKinds:
        if self.include and self.exclude:
            raise ValueError("only one of include and exclude may be set")
        return self


class PodConditionFilter(ArgsModel):
    """Matches one ``status.conditions`` entry; the fields that are set must all match."""

    type: str = ""
    status: str = ""
    reason: str = ""
    min_time_since_last_transition_seconds: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _not_empty(self) -> PodConditionFilter:
        if (
            not self.type
            and not self.status
            and not self.reason
            and self.min_time_since_last_transition_seconds is None
        ):
            raise ValueError(
                "at least one of type, status, reason or minTimeSinceLastTransitionSeconds must be set"
            )
        return self

    def matches_fields(self, cond: PodCondition) -> bool:
        return (
            (not self.type or cond.type == self.type)
            and (not self.status or cond.status == self.status)
            and (not self.reason or cond.reason == self.reason)
        )


class PodLifeTimeArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
    owner_kinds: OwnerKinds | None = None
    max_pod_life_time_seconds: int | None = Field(default=None, ge=0)
    states: list[str] | None = None
    conditions: list[PodConditionFilter] | None = None
    exit_codes: list[Int32] | None = None
    including_init_containers: bool = False
    including_ephemeral_containers: bool = False

    @field_validator("states")
    @classmethod
    def _known_states(cls, states: list[str] | None) -> list[str] | None:
        for state in states or ():
            if state not in _ALLOWED_STATES:
                raise ValueError(f"must be one of {', '.join(sorted(ALLOWED_STATES))}, got {state!r}")
        return states

    @model_validator(mode="after")
    def _some_criterion(self) -> PodLifeTimeArgs:
        if (
            self.max_pod_life_time_seconds is None
            and not self.states
            and not self.conditions
            and not self.exit_codes
        ):
            raise ValueError(
                "at least one filtering criterion must be set "
                "(maxPodLifeTimeSeconds, states, conditions or exitCodes)"
            )
        return self


def _go_seconds_since(now: datetime, then: datetime) -> float:
    """``now.Sub(then).Seconds()`` as Go computes it, saturating at time.Duration's range."""
    seconds = (now - then).total_seconds()
    return max(-_MAX_DURATION_SECONDS, min(_MAX_DURATION_SECONDS, seconds))


def _has_state(statuses: Iterable[ContainerStatus], states: frozenset[str]) -> bool:
    for cs in statuses:
        state = cs.state
        if state is None:
            continue
        if state.waiting is not None and state.waiting.reason in states:
            return True
        if state.terminated is not None and state.terminated.reason in states:
            return True
    return False


def _has_exit_code(statuses: Iterable[ContainerStatus], codes: frozenset[int]) -> bool:
    for cs in statuses:
        state = cs.state
        if state is not None and state.terminated is not None and state.terminated.exit_code in codes:
            return True
    return False


@dataclass(frozen=True, slots=True)
class LifetimeCriteria:
    """Compiled PodLifeTime criteria; ``None`` / empty means the criterion is not set."""

    max_age_seconds: int | None = None
    states: frozenset[str] = frozenset()
    conditions: tuple[PodConditionFilter, ...] = ()
    exit_codes: frozenset[int] = frozenset()
    include_owner_kinds: frozenset[str] = frozenset()
    exclude_owner_kinds: frozenset[str] = frozenset()
    including_init: bool = False
    including_ephemeral: bool = False
    #: RemoveFailedPods: only pods in phase Failed.
    failed_only: bool = False

    @classmethod
    def from_args(cls, args: PodLifeTimeArgs) -> LifetimeCriteria:
        owners = args.owner_kinds
        return cls(
            max_age_seconds=args.max_pod_life_time_seconds,
            states=frozenset(args.states or ()),
            conditions=tuple(args.conditions or ()),
            exit_codes=frozenset(args.exit_codes or ()),
            include_owner_kinds=frozenset(owners.include or ()) if owners else frozenset(),
            exclude_owner_kinds=frozenset(owners.exclude or ()) if owners else frozenset(),
            including_init=args.including_init_containers,
            including_ephemeral=args.including_ephemeral_containers,
        )

    def why_not(self, pod: Pod, now: datetime) -> str:
        """Why ``matches`` refuses the pod, with the numbers (for explanations, off the hot path)."""
        if self.failed_only and pod.status.phase != "Failed":
            return f"phase {pod.status.phase or 'unknown'}, not Failed"
        if self.max_age_seconds is not None:
            age = _go_seconds_since(now, k8s_pods.pod_creation_time(pod))
            if age < 0 or int(age) <= self.max_age_seconds:
                return f"age {int(age)}s, not above {self.max_age_seconds}s"
        if self.states and not self._matches_states(pod):
            return f"not in states {sorted(self.states)}"
        return "does not match the plugin's conditions, exitCodes or ownerKinds"

    def matches(self, pod: Pod, now: datetime) -> bool:
        status = pod.status
        if self.failed_only and status.phase != "Failed":
            return False
        if self.max_age_seconds is not None:
            age = _go_seconds_since(now, k8s_pods.pod_creation_time(pod))
            if age < 0 or int(age) <= self.max_age_seconds:
                return False
        if self.states and not self._matches_states(pod):
            return False
        if self.include_owner_kinds and not any(
            ref.kind in self.include_owner_kinds for ref in k8s_pods.owner_refs(pod)
        ):
            return False
        if self.exclude_owner_kinds and any(
            ref.kind in self.exclude_owner_kinds for ref in k8s_pods.owner_refs(pod)
        ):
            return False
        if self.conditions and not self._matches_conditions(pod, now):
            return False
        return not self.exit_codes or self._matches_exit_codes(pod)

    def _matches_exit_codes(self, pod: Pod) -> bool:
        status = pod.status
        if _has_exit_code(status.container_statuses or (), self.exit_codes):
            return True
        return self.including_init and _has_exit_code(status.init_container_statuses or (), self.exit_codes)

    def _matches_states(self, pod: Pod) -> bool:
        status = pod.status
        states = self.states
        if status.phase in states or status.reason in states:
            return True
        if _has_state(status.container_statuses or (), states):
            return True
        if self.including_init and _has_state(status.init_container_statuses or (), states):
            return True
        return self.including_ephemeral and _has_state(status.ephemeral_container_statuses or (), states)

    def _matches_conditions(self, pod: Pod, now: datetime) -> bool:
        conditions = pod.status.conditions or ()
        for flt in self.conditions:
            for cond in conditions:
                if not flt.matches_fields(cond):
                    continue
                min_idle = flt.min_time_since_last_transition_seconds
                if min_idle is not None:
                    changed = cond.last_transition_time
                    if changed is None or changed == ZERO_TIME:
                        continue
                    idle = _go_seconds_since(now, changed)
                    if idle < 0 or int(idle) < min_idle:
                        continue
                return True
        return False

    def relevant_time(self, pod: Pod) -> datetime:
        """The time a pod is "old" from: its latest matching transition, or its creation."""
        latest: datetime | None = None
        for flt in self.conditions:
            if flt.min_time_since_last_transition_seconds is None:
                continue
            for cond in pod.status.conditions or ():
                if cond.last_transition_time is None or not flt.matches_fields(cond):
                    continue
                changed = cond.last_transition_time
                if changed != ZERO_TIME and (latest is None or changed > latest):
                    latest = changed
        return latest if latest is not None else k8s_pods.pod_creation_time(pod)

    def oldest_first_key(self, pod: Pod) -> tuple[datetime, str, str]:
        return (self.relevant_time(pod), pod.metadata.namespace, pod.metadata.name)


def evict_oldest_first(
    handle: Handle,
    nodes: Sequence[Node],
    selected: PodPredicate,
    criteria: LifetimeCriteria,
    reason: str,
    *,
    namespaces: frozenset[str] | None = None,
) -> Status | None:
    """Evict the matching pods of ``nodes``, oldest first (PodLifeTime's and RemoveFailedPods' loop).

    ``namespaces``, when ``selected`` only takes pods of those namespaces, lets the loop read only
    their pods. A node whose per-node limit is reached is skipped from then on; the total limit
    ends the run.
    """
    ev = handle.evictor
    snapshot = handle.snapshot
    now = handle.now()
    check = None if selected is select_all else selected
    failed_only = criteria.failed_only
    candidates: list[Pod] = []
    pods: Iterable[Pod]
    if namespaces is not None:
        names = {n.metadata.name for n in nodes}
        # (any order will do: the candidates are sorted by a key that tells every pod apart)
        pods = [
            p
            for ns in sorted(namespaces)
            for p in snapshot.pods_in_namespace(ns)
            if p.spec.node_name in names
        ]
    else:
        pods = (p for node in nodes for p in snapshot.pods_on_node(node.metadata.name))
    findings = handle.findings
    left = findings.left if findings.enabled else None  # reasons only when someone listens
    for pod in pods:
        if failed_only and pod.status.phase != "Failed":
            continue
        if check is not None and not check(pod):
            if left is not None:
                left(pod, "not selected by the plugin's namespaces/labelSelector")
            continue
        if not criteria.matches(pod, now):
            if left is not None:
                left(pod, criteria.why_not(pod, now))
            continue
        if ev.filter(pod):
            candidates.append(pod)
    ev.evict_in_order(handle.sort_pods(candidates, key=criteria.oldest_first_key), reason)
    return None


class PodLifeTime:
    """Deschedule: evict pods matching the configured lifetime and state criteria, oldest first."""

    name: ClassVar[str] = "PodLifeTime"
    Args: ClassVar[type[PodLifeTimeArgs]] = PodLifeTimeArgs

    def __init__(self, args: PodLifeTimeArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)
        include = args.namespaces.include if args.namespaces is not None else None
        self._namespaces = frozenset(include) if include else None
        self._criteria = LifetimeCriteria.from_args(args)
        self._reason = _describe(args)

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        return evict_oldest_first(
            self.handle, nodes, self._selected, self._criteria, self._reason, namespaces=self._namespaces
        )


def _describe(args: PodLifeTimeArgs) -> str:
    parts: list[str] = []
    if args.max_pod_life_time_seconds is not None:
        parts.append(f"older than {args.max_pod_life_time_seconds}s")
    if args.states:
        parts.append(f"in state {'/'.join(args.states)}")
    if args.conditions:
        parts.append("matching a condition filter")
    if args.exit_codes:
        parts.append(f"exit code {'/'.join(str(c) for c in args.exit_codes)}")
    return "PodLifeTime: pod " + ", ".join(parts)
