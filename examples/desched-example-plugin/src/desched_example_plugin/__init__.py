"""AnnotatedExpiry: an example out-of-tree desched plugin (a Deschedule extension point)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from pydantic import field_validator

from desched.api.types import ArgsModel, Namespaces
from desched.framework.framework import PluginHandle
from desched.framework.types import EvictResult, Status
from desched.k8s.objects import Node


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

    def __init__(self, args: AnnotatedExpiryArgs, handle: PluginHandle) -> None:
        self.args = args
        self.handle = handle

    def _expired(self, value: str) -> bool:
        try:
            expires = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return False  # a malformed annotation never causes an eviction
        return expires.tzinfo is not None and expires <= self.handle.now()

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        evictor = self.handle.evictor
        for node in nodes:
            for pod in self.handle.snapshot.pods_on_node(node.metadata.name):
                if self.args.namespaces and not self.args.namespaces.allows(pod.metadata.namespace):
                    continue
                value = (pod.metadata.annotations or {}).get(self.args.annotation)
                if value is None or not self._expired(value) or not evictor.filter(pod):
                    continue
                result = evictor.evict(pod, reason=f"{self.args.annotation} {value} has passed")
                if result is EvictResult.NODE_LIMIT:
                    break
                if result is EvictResult.TOTAL_LIMIT:
                    return None
        return None
