"""desched.framework: the descheduling framework, and the plugin SDK.

An out-of-tree plugin imports everything it uses from here (``from desched.framework import
Handle, Status, ...``): the extension-point and hook protocols it implements, the Handle it is
given (a read-only cluster view, the evictor, sorting, node fit, metrics providers, the clock, node
actions, findings and reports), the values they exchange, and the args and object types. Only
these names are the SDK; the modules behind them may move.
"""

from desched.api.types import ArgsModel, LabelSelectorArg, Namespaces
from desched.cluster.view import ClusterView
from desched.framework.findings import PluginFindings, Verdict
from desched.framework.metrics import (
    MetricsProviders,
    NodeMetricsProvider,
    PrometheusClient,
    PrometheusSample,
    UsageError,
)
from desched.framework.nodeactions import NodeActions
from desched.framework.pluginmetrics import (
    CounterMetric,
    GaugeMetric,
    MetricsRegistry,
    MetricsRegistryError,
    NoMetricsRegistry,
)
from desched.framework.reports import CycleReport, NamespaceFilter, ReportTable
from desched.framework.types import (
    BalancePlugin,
    CycleEndHook,
    CycleStartHook,
    DeclaresLiveInputs,
    DeschedulePlugin,
    DrawsThresholds,
    EvictionOrder,
    Evictor,
    EvictResult,
    ExplainsFilter,
    ExplainsPreEvictionFilter,
    ExtensionPoint,
    FilterPlugin,
    Handle,
    HasPreSortStep,
    JudgesMoves,
    LiveInputs,
    NoGain,
    Plugin,
    PredictedMove,
    PreEvictionFilterPlugin,
    PreSortKeyPlugin,
    PreSortPlugin,
    SortKeyPlugin,
    SortPlugin,
    Status,
)
from desched.k8s.objects import Node, Pod

__all__ = [
    "ArgsModel",
    "BalancePlugin",
    "ClusterView",
    "CounterMetric",
    "CycleEndHook",
    "CycleReport",
    "CycleStartHook",
    "DeclaresLiveInputs",
    "DeschedulePlugin",
    "DrawsThresholds",
    "EvictResult",
    "EvictionOrder",
    "Evictor",
    "ExplainsFilter",
    "ExplainsPreEvictionFilter",
    "ExtensionPoint",
    "FilterPlugin",
    "GaugeMetric",
    "Handle",
    "HasPreSortStep",
    "JudgesMoves",
    "LabelSelectorArg",
    "LiveInputs",
    "MetricsProviders",
    "MetricsRegistry",
    "MetricsRegistryError",
    "NamespaceFilter",
    "Namespaces",
    "NoGain",
    "NoMetricsRegistry",
    "Node",
    "NodeActions",
    "NodeMetricsProvider",
    "Plugin",
    "PluginFindings",
    "Pod",
    "PreEvictionFilterPlugin",
    "PreSortKeyPlugin",
    "PreSortPlugin",
    "PredictedMove",
    "PrometheusClient",
    "PrometheusSample",
    "ReportTable",
    "SortKeyPlugin",
    "SortPlugin",
    "Status",
    "UsageError",
    "Verdict",
]
