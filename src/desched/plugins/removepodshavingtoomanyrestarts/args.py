"""RemovePodsHavingTooManyRestartsArgs: the restart threshold and states, and their validation."""

from __future__ import annotations

from pydantic import Field, field_validator

from desched.framework import ArgsModel, FieldValueError, LabelSelectorArg, Namespaces

#: What ``states`` may name: a pod phase and a container waiting reason.
ALLOWED_STATES: tuple[str, ...] = ("Running", "CrashLoopBackOff")


class RemovePodsHavingTooManyRestartsArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
    pod_restart_threshold: int = Field(ge=1, le=2**31 - 1)
    including_init_containers: bool = False
    states: list[str] | None = None

    @field_validator("states")
    @classmethod
    def _known_states(cls, states: list[str] | None) -> list[str] | None:
        for i, state in enumerate(states or ()):
            if state not in ALLOWED_STATES:
                raise FieldValueError(f"[{i}]", f"must be one of {', '.join(ALLOWED_STATES)}, got {state!r}")
        return states
