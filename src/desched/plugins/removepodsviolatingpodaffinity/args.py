"""RemovePodsViolatingPodAffinityArgs: which pods the plugin considers for eviction."""

from __future__ import annotations

from desched.framework import ArgsModel, LabelSelectorArg, Namespaces


class RemovePodsViolatingPodAffinityArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
