"""PodLifeTimeArgs: the criteria (age, states, conditions, exit codes, owner kinds) and their validation."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from desched.framework import ArgsModel, FieldValueError, LabelSelectorArg, Namespaces
from desched.k8s.objects import PodCondition
from desched.plugins._shared import Int32

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


class OwnerKinds(ArgsModel):
    include: list[str] | None = None
    exclude: list[str] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> OwnerKinds:
        if self.include and self.exclude:
            raise FieldValueError(
                "exclude",
                f"cannot be set with include (got include={self.include!r}, exclude={self.exclude!r})",
            )
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
                "at least one of type, status, reason or minTimeSinceLastTransitionSeconds must be set "
                "(got an entry with none of them)"
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
    #: desched only (upstream #1183): also consider pods bound to no node (Pending, unscheduled).
    including_unscheduled_pods: bool = False

    @field_validator("states")
    @classmethod
    def _known_states(cls, states: list[str] | None) -> list[str] | None:
        for i, state in enumerate(states or ()):
            if state not in _ALLOWED_STATES:
                raise FieldValueError(
                    f"[{i}]", f"must be one of {', '.join(sorted(ALLOWED_STATES))}, got {state!r}"
                )
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
                "(maxPodLifeTimeSeconds, states, conditions or exitCodes; got none of them)"
            )
        return self
