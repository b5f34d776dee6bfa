"""The extension points of KEP-753, one small protocol each, and the values they exchange.

A plugin implements only the extension points it needs. The framework finds out which by
``isinstance`` against these runtime-checkable protocols.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from desched.api.policy import ExtensionPoint as ExtensionPoint  # the policy's vocabulary
from desched.k8s.objects import Node, Pod

if TYPE_CHECKING:
    from desched.cluster.snapshot import ClusterSnapshot
    from desched.framework.findings import PluginFindings
    from desched.framework.nodeactions import NodeActions


@dataclass(frozen=True, slots=True)
class Status:
    """What an extension point returns when it could not do its job (``None`` means success)."""

    error: str


class Plugin(Protocol):
    """Every plugin has a name: the registered name the policy uses."""

    name: ClassVar[str]


@runtime_checkable
class DeschedulePlugin(Protocol):
    name: ClassVar[str]

    def deschedule(self, nodes: Sequence[Node]) -> Status | None: ...


@runtime_checkable
class BalancePlugin(Protocol):
    name: ClassVar[str]

    def balance(self, nodes: Sequence[Node]) -> Status | None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    """Decides whether a pod may be considered for eviction at all (upstream's ``Filter``)."""

    name: ClassVar[str]

    def filter(self, pod: Pod) -> bool: ...


@runtime_checkable
class PreEvictionFilterPlugin(Protocol):
    """The last, possibly expensive check right before an eviction (e.g. nodeFit)."""

    name: ClassVar[str]

    def pre_eviction_filter(self, pod: Pod) -> bool: ...


@runtime_checkable
class SortPlugin(Protocol):
    """Orders candidate pods right before eviction: ``less(a, b)`` means evict ``a`` first."""

    name: ClassVar[str]

    def less(self, a: Pod, b: Pod) -> bool: ...


@runtime_checkable
class PreSortPlugin(Protocol):
    """Orders pods before a strategy processes them: ``pre_less(a, b)`` means look at ``a`` first."""

    name: ClassVar[str]

    def pre_less(self, a: Pod, b: Pod) -> bool: ...


#: The method that marks a plugin class as serving an extension point.
EXTENSION_METHODS: dict[ExtensionPoint, str] = {
    ExtensionPoint.PRESORT: "pre_less",
    ExtensionPoint.SORT: "less",
    ExtensionPoint.DESCHEDULE: "deschedule",
    ExtensionPoint.BALANCE: "balance",
    ExtensionPoint.FILTER: "filter",
    ExtensionPoint.PRE_EVICTION_FILTER: "pre_eviction_filter",
}

EXTENSION_PROTOCOLS: dict[ExtensionPoint, type] = {
    ExtensionPoint.PRESORT: PreSortPlugin,
    ExtensionPoint.SORT: SortPlugin,
    ExtensionPoint.DESCHEDULE: DeschedulePlugin,
    ExtensionPoint.BALANCE: BalancePlugin,
    ExtensionPoint.FILTER: FilterPlugin,
    ExtensionPoint.PRE_EVICTION_FILTER: PreEvictionFilterPlugin,
}


class EvictResult(enum.Enum):
    """The outcome of one eviction request, as a plugin needs to react to it."""

    EVICTED = "success"
    #: The profile's Filter or PreEvictionFilter refused the pod; try another one.
    FILTERED = "filtered"
    #: The per-node limit is reached: skip the rest of this node.
    NODE_LIMIT = "maximum number of evicted pods per node reached"
    #: The per-namespace limit is reached: skip pods of this namespace.
    NAMESPACE_LIMIT = "maximum number of evicted pods per namespace reached"
    #: The per-cycle total is reached: the plugin should stop.
    TOTAL_LIMIT = "maximum number of evicted pods per a descheduling cycle reached"
    #: The eviction was refused and did not happen (PDB 429, 404, 409, not sent ...): try the next pod.
    FAILED = "error"
    #: The request may have reached the apiserver but its answer was lost (5xx, connection reset,
    #: timeout after sending): it may or may not have happened. Counts against every limit, as an
    #: eviction; a plugin treats it as one (it does not try to evict more to make up for it).
    UNKNOWN = "outcome unknown"
    #: Already evicted in this cycle (by this or another plugin).
    ALREADY_EVICTED = "already evicted"

    @property
    def ok(self) -> bool:
        """Evicted, or possibly evicted (outcome unknown): the pod counts as gone for the plugin."""
        return self is EvictResult.EVICTED or self is EvictResult.UNKNOWN

    @property
    def limit(self) -> bool:
        return self in (EvictResult.NODE_LIMIT, EvictResult.NAMESPACE_LIMIT, EvictResult.TOTAL_LIMIT)


class Evictor(Protocol):
    """What a plugin sees of the evictor: its profile's filters and the eviction itself."""

    def filter(self, pod: Pod) -> bool: ...

    def pre_eviction_filter(self, pod: Pod) -> bool: ...

    def evict(self, pod: Pod, reason: str = "") -> EvictResult: ...

    def node_limit_reached(self, node_name: str) -> bool: ...

    def total_limit_reached(self) -> bool: ...


class Handle(Protocol):
    """Everything a plugin may use. Plugins never talk to the API server."""

    @property
    def snapshot(self) -> ClusterSnapshot: ...

    @property
    def evictor(self) -> Evictor: ...

    @property
    def profile_name(self) -> str: ...

    @property
    def node_actions(self) -> NodeActions:
        """Timed node downgrades (label or taint), carried out by the cycle's node-action backend."""
        ...

    @property
    def findings(self) -> PluginFindings:
        """Report candidates considered and left, with the reason (test ``findings.enabled`` first)."""
        ...

    def now(self) -> datetime: ...

    def sort_pods(self, pods: Sequence[Pod], key: Callable[[Pod], Any] | None = None) -> list[Pod]:
        """Order pods for eviction: the profile's Sort plugins first, then the plugin's own ``key``."""
        ...

    def presort_pods(self, pods: Sequence[Pod], key: Callable[[Pod], Any] | None = None) -> list[Pod]:
        """Order pods for processing: the profile's PreSort plugins first, then ``key``."""
        ...
