"""RemovePodsViolatingInterPodAntiAffinityArgs: which pods the plugin considers."""

from __future__ import annotations

from desched.framework import ArgsModel, LabelSelectorArg, Namespaces


class RemovePodsViolatingInterPodAntiAffinityArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
