"""RemovePodsViolatingTopologySpreadConstraintArgs: the constraint kinds to balance, node fit, validation."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from desched.api.types import ArgsModel, FieldValueError, LabelSelectorArg, Namespaces
from desched.k8s.topologyspread import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY

ALLOWED_CONSTRAINTS = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)


class RemovePodsViolatingTopologySpreadConstraintArgs(ArgsModel):
    namespaces: Namespaces | None = None
    #: Only decides which of the chosen pods may be evicted; every pod counts in the domains.
    label_selector: LabelSelectorArg | None = None
    #: Which ``whenUnsatisfiable`` kinds to balance. ``null`` means the default.
    constraints: list[str] = Field(default_factory=lambda: [DO_NOT_SCHEDULE])
    #: Only evict a pod that fits a node of a domain below the ideal average. ``null``: true.
    topology_balance_node_fit: bool = True

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
