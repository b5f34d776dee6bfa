"""RemoveFailedPodsArgs: reasons, exit codes, minimum age and owner kinds of the failed pods to evict."""

from __future__ import annotations

from pydantic import Field

from desched.framework import ArgsModel, LabelSelectorArg, Namespaces
from desched.plugins._shared import Int32

DEFAULT_MIN_POD_LIFETIME_SECONDS = 3600


class RemoveFailedPodsArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
    exclude_owner_kinds: list[str] | None = None
    reasons: list[str] | None = None
    exit_codes: list[Int32] | None = None
    including_init_containers: bool = False
    min_pod_lifetime_seconds: int = Field(default=DEFAULT_MIN_POD_LIFETIME_SECONDS, ge=0)
