"""RemovePodsViolatingNodeTaintsArgs: which taints count, and their validation."""

from __future__ import annotations

from pydantic import model_validator

from desched.framework import ArgsModel, FieldValueError, LabelSelectorArg, Namespaces


class RemovePodsViolatingNodeTaintsArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
    include_prefer_no_schedule: bool = False
    excluded_taints: list[str] | None = None
    included_taints: list[str] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> RemovePodsViolatingNodeTaintsArgs:
        if self.excluded_taints and self.included_taints:
            raise FieldValueError(
                "includedTaints",
                f"cannot be set with excludedTaints (got excludedTaints={self.excluded_taints!r}, "
                f"includedTaints={self.included_taints!r})",
            )
        return self
