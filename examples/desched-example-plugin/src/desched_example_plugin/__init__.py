"""AnnotatedExpiry: an example out-of-tree desched plugin (a Deschedule extension point).

It imports only the plugin SDK, ``desched.framework``, and reaches the cluster only through its
Handle: the read-only cluster view, the clock and the evictor.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from pydantic import field_validator

from desched.framework import ArgsModel, Handle, Namespaces, Node, Pod, Status


class AnnotatedExpiryArgs(ArgsModel):
    annotation: str = "example.desched.io/expires-at"
    namespaces: Namespaces | None = None

    @field_validator("annotation")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value:
            raise ValueError("must not be empty")
        return value


class AnnotatedExpiry:
    name: ClassVar[str] = "AnnotatedExpiry"
    Args: ClassVar[type[AnnotatedExpiryArgs]] = AnnotatedExpiryArgs

    def __init__(self, args: AnnotatedExpiryArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def _expired(self, value: str) -> bool:
        try:
            expires = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return False  # a malformed annotation never causes an eviction
        return expires.tzinfo is not None and expires <= self.handle.now()

    def _reason(self, pod: Pod) -> str:
        value = (pod.metadata.annotations or {}).get(self.args.annotation)
        return f"{self.args.annotation} {value} has passed"

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        evictor = self.handle.evictor
        for node in nodes:
            expired = []
            for pod in self.handle.snapshot.pods_on_node(node.metadata.name):
                if self.args.namespaces and not self.args.namespaces.allows(pod.metadata.namespace):
                    continue
                value = (pod.metadata.annotations or {}).get(self.args.annotation)
                if value is not None and self._expired(value) and evictor.filter(pod):
                    expired.append(pod)
            # in order, up to the policy's limits (the rest of a node at its limit is skipped)
            if evictor.evict_in_order(expired, self._reason):
                return None  # the per-cycle total is reached
        return None


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeschedulePlugin

    _deschedule_plugin: type[DeschedulePlugin] = AnnotatedExpiry
