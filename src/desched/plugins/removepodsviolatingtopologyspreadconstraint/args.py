"""RemovePodsViolatingTopologySpreadConstraintArgs: the constraint kinds to balance, node fit, validation."""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr, field_validator, model_validator

from desched.framework import (
    DEFAULT_SCHEDULER_NAME,
    ArgsModel,
    FieldValueError,
    LabelSelectorArg,
    Namespaces,
    PolicyError,
    load_default_constraints,
)
from desched.k8s.topologyspread import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY, SYSTEM_DEFAULTS, DefaultConstraints

ALLOWED_CONSTRAINTS = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)


class DefaultConstraintsArg(ArgsModel):
    """desched only (upstream #1502): apply kube-scheduler's cluster-level default constraints
    to the pods that declare none, as kube-scheduler does. Without ``kubeSchedulerConfigFile``,
    its built-in system defaults; with it, what the profile ``schedulerName`` of that
    KubeSchedulerConfiguration configures for PodTopologySpread (read when the policy loads)."""

    kube_scheduler_config_file: str | None = None
    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    _resolved: DefaultConstraints = PrivateAttr(default=SYSTEM_DEFAULTS)

    @model_validator(mode="after")
    def _load(self) -> DefaultConstraintsArg:
        if self.kube_scheduler_config_file is not None:
            try:
                self._resolved = load_default_constraints(
                    self.kube_scheduler_config_file, self.scheduler_name
                )
            except PolicyError as e:
                raise ValueError(str(e)) from None
        return self

    @property
    def resolved(self) -> DefaultConstraints:
        """The default constraints this configures."""
        return self._resolved


class RemovePodsViolatingTopologySpreadConstraintArgs(ArgsModel):
    namespaces: Namespaces | None = None
    #: Only decides which of the chosen pods may be evicted; every pod counts in the domains.
    label_selector: LabelSelectorArg | None = None
    #: Which ``whenUnsatisfiable`` kinds to balance. ``null`` means the default.
    constraints: list[str] = Field(default_factory=lambda: [DO_NOT_SCHEDULE])
    #: Only evict a pod that fits a node of a domain below the ideal average. ``null``: true.
    topology_balance_node_fit: bool = True
    #: Cluster-level default constraints for pods without their own (None: off, as upstream).
    default_constraints: DefaultConstraintsArg | None = None

    @field_validator("constraints", mode="before")
    @classmethod
    def _default_constraints(cls, value: Any) -> Any:
        return [DO_NOT_SCHEDULE] if value is None else value

    @field_validator("constraints")
    @classmethod
    def _known_constraints(cls, value: list[str]) -> list[str]:
        for i, c in enumerate(value):
            if c not in ALLOWED_CONSTRAINTS:
                raise FieldValueError(f"[{i}]", f"must be one of {', '.join(ALLOWED_CONSTRAINTS)}, got {c!r}")
        return value

    @field_validator("topology_balance_node_fit", mode="before")
    @classmethod
    def _default_node_fit(cls, value: Any) -> Any:
        return True if value is None else value
