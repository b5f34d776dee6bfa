"""The extension points of KEP-753, one small protocol each, the optional hooks, and the values
they exchange.

A plugin implements only the extension points and hooks it needs. Which ones it serves is found
once, by ``isinstance`` against these runtime-checkable protocols: the extension points when its
class is registered (:data:`EXTENSION_PROTOCOLS`), the hooks when its profile is built. Nothing
is looked up by name when the framework calls it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel

from desched.api.policy import ExtensionPoint as ExtensionPoint  # the policy's vocabulary
from desched.k8s.objects import Node, Pod

if TYPE_CHECKING:
    from desched.cluster.view import ClusterView
    from desched.framework.findings import PluginFindings
    from desched.framework.metrics import MetricsProviders
    from desched.framework.nodeactions import NodeActions
    from desched.framework.pluginmetrics import MetricsRegistry
    from desched.framework.reports import CycleReport


@dataclass(frozen=True, slots=True)
class Status:
    """What an extension point returns when it could not do its job (``None`` means success)."""

    error: str


@runtime_checkable
class Plugin(Protocol):
    """Every plugin has a name: the registered name the policy uses."""

    name: ClassVar[str]


@runtime_checkable
class PluginWithArgs(Protocol):
    """A plugin class with arguments declares their pydantic model as ``Args``
    (see :class:`desched.api.types.ArgsModel`)."""

    Args: ClassVar[type[BaseModel]]


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


#: The protocol a plugin class implements to serve an extension point.
EXTENSION_PROTOCOLS: dict[ExtensionPoint, type] = {
    ExtensionPoint.PRESORT: PreSortPlugin,
    ExtensionPoint.SORT: SortPlugin,
    ExtensionPoint.DESCHEDULE: DeschedulePlugin,
    ExtensionPoint.BALANCE: BalancePlugin,
    ExtensionPoint.FILTER: FilterPlugin,
    ExtensionPoint.PRE_EVICTION_FILTER: PreEvictionFilterPlugin,
}


# ---------------------------------------------------------------------------- optional hooks


@runtime_checkable
class CycleStartHook(Protocol):
    """Called at the start of every cycle, once the handle reaches the cycle's snapshot (e.g. to
    drop per-cycle caches)."""

    def on_cycle_start(self) -> None: ...


@runtime_checkable
class CycleEndHook(Protocol):
    """Called at the end of every cycle, once its result is made: let go of what only the cycle
    needed (indexes, plans, verdicts), which would otherwise stay in memory until the next cycle
    starts (in ``simulate``, through the placement of every replacement)."""

    def on_cycle_end(self) -> None: ...


@runtime_checkable
class SortKeyPlugin(Protocol):
    """A Sort plugin that also offers a key consistent with its ``less``: ``less(a, b)`` exactly
    when ``sort_key(a) < sort_key(b)``. When every Sort plugin of a profile offers one, pods are
    sorted by the tuple of the keys (the same order as pairwise ``less``, several times faster)."""

    def sort_key(self, pod: Pod) -> Any: ...


@runtime_checkable
class PreSortKeyPlugin(Protocol):
    """The same for a PreSort plugin: ``pre_less(a, b)`` exactly when
    ``presort_key(a) < presort_key(b)``."""

    def presort_key(self, pod: Pod) -> Any: ...


@runtime_checkable
class HasPreSortStep(Protocol):
    """A Deschedule/Balance plugin whose candidates are considered in the profile's PreSort order
    (``handle.presort_pods``) declares ``presorts = True``; the policy loader warns about a
    ``presort`` next to a plugin without that step, since it would change nothing."""

    presorts: ClassVar[bool]


@runtime_checkable
class ExplainsFilter(Protocol):
    """A Filter plugin that can tell why it refuses a pod (for ``--explain`` and ``--v=4``)."""

    def filter_reasons(self, pod: Pod) -> list[str]:
        """Every reason ``filter`` refuses ``pod`` ([] if it accepts it)."""
        ...


@runtime_checkable
class ExplainsPreEvictionFilter(Protocol):
    """A PreEvictionFilter plugin that can tell why it refuses a pod."""

    def pre_eviction_filter_reasons(self, pod: Pod) -> list[str]:
        """Every reason ``pre_eviction_filter`` refuses ``pod`` ([] if it accepts it)."""
        ...


@runtime_checkable
class DrawsThresholds(Protocol):
    """Plugin args whose utilisation thresholds apply to requests as % of allocatable, so that
    reports draw them across their resource's utilisation chart (report/ knows no plugin by name:
    a plugin's args say what to draw). ``chart_thresholds`` gives ``(resource, percent, word)``
    triples, ``word`` naming which threshold it is (e.g. ``low``, ``target``); nothing where
    the thresholds are not on requests (deviation thresholds, measured usage)."""

    def chart_thresholds(self) -> list[tuple[str, float, str]]: ...


@dataclass(frozen=True, slots=True)
class PredictedMove:
    """Where the placement model (``evictionPolicy.predictive``) puts the replacement of a pod a
    plugin asked to evict: another node than the pod's own, where it fits."""

    #: the pod the plugin asked to evict (still bound to ``source``)
    pod: Pod
    #: the node the pod leaves
    source: Node
    #: the node its replacement would land on (never ``source``)
    destination: Node
    #: the cluster as the model has it right before the move: the cycle's earlier evictions
    #: terminating or gone, their replacements bound where the model put them, ``pod`` terminating
    #: (a pod with a deletionTimestamp) on ``source``, its replacement not bound yet
    cluster: ClusterView


_LABEL = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True, slots=True)
class NoGain:
    """A plugin's judgement that a predicted move would not reduce the violation it acts on."""

    #: the skip's ``reason`` label (metric, Event, simulate): snake_case, one per kind of
    #: judgement (a label, not a sentence: it must not hold names or numbers)
    reason: str
    #: why, for people (names and numbers welcome)
    detail: str

    def __post_init__(self) -> None:
        # a label of descheduler_evictions_skipped_total: one series per kind of judgement, never
        # one per pod (an out-of-tree plugin putting a name here would grow the metric without end)
        if not _LABEL.fullmatch(self.reason):
            raise ValueError(f"NoGain.reason must be snake_case (a metric label), got {self.reason!r}")


@runtime_checkable
class JudgesMoves(Protocol):
    """A Deschedule/Balance plugin that can tell whether the predicted move of a pod it asked to
    evict reduces the violation it acts on (``evictionPolicy.predictive``). Without it, any other
    node the replacement fits is a move that helps."""

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        """``None``: the move helps; else why it would not (the eviction is then skipped)."""
        ...


@dataclass(frozen=True, slots=True)
class LiveInputs:
    """What a plugin needs from a live run beyond the snapshot: a run reads the declarations of
    its plugins (:class:`DeclaresLiveInputs`) to decide what to watch and fetch."""

    #: Warning Events about pods, their claims and the claims' volumes (a run then watches Events).
    warning_events: bool = False
    #: The Prometheus queries the plugin runs (a run checks them when it connects).
    prometheus_queries: tuple[str, ...] = ()
    #: Services, ReplicaSets, StatefulSets and ReplicationControllers (the default spread
    #: selector of kube-scheduler's cluster-level default constraints is made of them).
    workloads: bool = False

    def __or__(self, other: LiveInputs) -> LiveInputs:
        return LiveInputs(
            self.warning_events or other.warning_events,
            tuple(dict.fromkeys((*self.prometheus_queries, *other.prometheus_queries))),
            self.workloads or other.workloads,
        )


@runtime_checkable
class DeclaresLiveInputs(Protocol):
    """A plugin that needs live inputs (see :class:`LiveInputs`) declares them."""

    def live_inputs(self) -> LiveInputs: ...


#: The optional hooks a plugin class may implement (found by ``isinstance`` when its profile is
#: built); each in-tree plugin checks its class against the ones it implements statically.
HOOK_PROTOCOLS: tuple[type, ...] = (
    CycleStartHook,
    CycleEndHook,
    SortKeyPlugin,
    PreSortKeyPlugin,
    HasPreSortStep,
    ExplainsFilter,
    ExplainsPreEvictionFilter,
    JudgesMoves,
    DeclaresLiveInputs,
)


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
    #: The profile's ``evictionPolicy`` skipped it (the record's ``error`` says why): try the next pod.
    SKIPPED = "skipped"
    #: ``evictionPolicy.predictive`` skipped it: the placement model predicts its move would not
    #: help (its replacement would stay Pending, land back on its node, or, as the plugin judges
    #: it, not reduce the violation; the record's ``skip_reason`` and ``error`` say which). The
    #: pod stays; a plugin that keeps a tally of what it moves counts it as moved (:attr:`planned`)
    #: and evicts no other in its stead, so predictive evicts a part of what the plain policy
    #: would, never more.
    NO_GAIN = "skipped: its move would not help"
    #: The eviction was answered "Eviction triggered evacuation" for a pod that asks for eviction
    #: in background (``EvictionsInBackground``: a KubeVirt VM live-migrating away): the pod
    #: leaves later. Counts against every limit, as an eviction, until the pod has left.
    BACKGROUND = "background"

    @property
    def ok(self) -> bool:
        """Evicted, possibly evicted (outcome unknown) or leaving in background: the pod counts as
        gone for the plugin."""
        return self is EvictResult.EVICTED or self is EvictResult.UNKNOWN or self is EvictResult.BACKGROUND

    @property
    def skipped(self) -> bool:
        """The profile's ``evictionPolicy`` skipped it (:attr:`SKIPPED` or :attr:`NO_GAIN`)."""
        return self is EvictResult.SKIPPED or self is EvictResult.NO_GAIN

    @property
    def gone(self) -> bool:
        """The pod no longer counts where it was for the plugin's next decisions: :attr:`ok`, or
        evicted before in this cycle (:attr:`ALREADY_EVICTED`)."""
        return self.ok or self is EvictResult.ALREADY_EVICTED

    @property
    def planned(self) -> bool:
        """The pod counts as dealt with in the plugin's plan: gone (:attr:`ok`) or left where it
        is because its move would not help (:attr:`NO_GAIN`). A plugin that keeps a tally (how
        much it moved off a node, which violations remain) counts it as moved."""
        return self.ok or self is EvictResult.NO_GAIN

    @property
    def limit(self) -> bool:
        return self in (EvictResult.NODE_LIMIT, EvictResult.NAMESPACE_LIMIT, EvictResult.TOTAL_LIMIT)


class EvictionOrder(Protocol):
    """Pods in the order a plugin evicts them, as upstream's strategies loop over their pods::

        order = handle.evictor.in_order(pods)
        for pod in order:  # in order; the pods of a node at its limit, and all after the total, left out
            if still_worth_evicting(pod):  # asked right before the eviction, after those before it
                if order.evict(pod, reason).gone:
                    forget(pod)  # it no longer counts for the pods after it
        if order.stopped: ...  # the per-cycle total ended it: the plugin should stop too

    Once the per-node limit refuses a pod, the rest of that node's pods are left out (reported
    as left with the reason when ``in_order(..., explain_node_limit=True)``); a pod the
    per-namespace limit refuses is passed over (a later pod may be of another namespace); the
    total limit ends the iteration.
    """

    @property
    def stopped(self) -> bool:
        """The per-cycle total refused an eviction: the iteration is over."""
        ...

    def __iter__(self) -> Iterator[Pod]: ...

    def evict(self, pod: Pod, reason: str) -> EvictResult:
        """Evict ``pod`` (the one the loop is at) through the profile's filters and the limits."""
        ...


class Evictor(Protocol):
    """What a plugin sees of the evictor: its profile's filters and the eviction itself."""

    def filter(self, pod: Pod) -> bool: ...

    def pre_eviction_filter(self, pod: Pod) -> bool: ...

    def evict(self, pod: Pod, reason: str = "") -> EvictResult: ...

    def in_order(self, pods: Iterable[Pod], *, explain_node_limit: bool = False) -> EvictionOrder:
        """``pods`` to evict in their order, as far as the node, namespace and total limits allow:
        the plugin loops over it and evicts through it (see :class:`EvictionOrder`)."""
        ...

    def evict_in_order(self, pods: Iterable[Pod], reason: str | Callable[[Pod], str]) -> bool:
        """Evict every pod of ``pods`` in order up to the limits (True: the total stopped it); the
        loop over :meth:`in_order` of a plugin that decides nothing between two evictions."""
        ...

    def node_limit_reached(self, node_name: str) -> bool: ...

    def total_limit_reached(self) -> bool: ...


class Handle(Protocol):
    """Everything a plugin may use. Plugins never talk to the API server."""

    @property
    def snapshot(self) -> ClusterView:
        """The cycle's cluster, read-only (an evicted pod leaves it at once)."""
        ...

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

    @property
    def metrics(self) -> MetricsProviders:
        """The run's metrics providers (``metrics.k8s.io``, Prometheus), each ``None`` if absent."""
        ...

    @property
    def metrics_registry(self) -> MetricsRegistry:
        """Where the plugin registers the metrics it exports (a live run's ``/metrics``)."""
        ...

    def now(self) -> datetime: ...

    def attach_report(self, report: CycleReport) -> None:
        """Attach this cycle's report to the cycle result (``simulate`` shows it)."""
        ...

    def fits_other_node(self, pod: Pod, nodes: Sequence[Node]) -> bool:
        """The pod fits one of ``nodes`` other than its own (descheduler's NodeFit)."""
        ...

    def fits_node(self, pod: Pod, node: Node) -> bool:
        """The pod fits ``node`` (its own node's resources are not checked)."""
        ...

    def node_fit_failures(self, pod: Pod, node: Node) -> list[str]:
        """Why the pod would not fit ``node`` ([]: it fits)."""
        ...

    def sort_pods(self, pods: Sequence[Pod], key: Callable[[Pod], Any] | None = None) -> list[Pod]:
        """Order pods for eviction: the profile's Sort plugins first, then the plugin's own ``key``."""
        ...

    def presort_pods(self, pods: Sequence[Pod], key: Callable[[Pod], Any] | None = None) -> list[Pod]:
        """Order pods for processing: the profile's PreSort plugins first, then ``key``."""
        ...
