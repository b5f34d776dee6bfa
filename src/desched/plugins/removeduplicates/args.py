"""RemoveDuplicatesArgs: which pods the plugin considers."""

from __future__ import annotations

from desched.framework import ArgsModel, Namespaces


class RemoveDuplicatesArgs(ArgsModel):
    namespaces: Namespaces | None = None
    #: Pods with an owner reference of one of these kinds are left alone.
    exclude_owner_kinds: list[str] | None = None
