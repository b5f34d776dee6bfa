"""RemovePodsViolatingNodeAffinityArgs: which node affinity types to check, and their validation."""

from __future__ import annotations

from pydantic import field_validator

from desched.framework import ArgsModel, LabelSelectorArg, Namespaces

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
NODE_AFFINITY_TYPES = (REQUIRED, PREFERRED)


class RemovePodsViolatingNodeAffinityArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
    #: Required, as upstream ("nodeAffinityType needs to be set"). Values other than the two
    #: known types are accepted, as upstream, and ignored with a warning.
    node_affinity_type: list[str]

    @field_validator("node_affinity_type", mode="after")
    @classmethod
    def _not_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError(f"must not be empty: list {' and/or '.join(NODE_AFFINITY_TYPES)} (got [])")
        return value
