"""desched.framework: the descheduling framework, and the plugin SDK.

A plugin imports everything it uses from here (``from desched.framework import Handle, Status,
...``): the extension-point and hook protocols it implements, the Handle it is given (a read-only
cluster view, the evictor, sorting, node fit, metrics providers, the clock, node actions,
findings, its own metrics registry and typed reports), the values they exchange, the args
building blocks and object types, and the few shared pieces of policy and scheduling a plugin's
args and decisions need (the node-action methods, kube-scheduler's default spread constraints
and its order among tied nodes). Beside these names, a plugin may use the Kubernetes helpers of
:mod:`desched.k8s` (pure functions over the object types). Only these are the SDK; the modules
behind them may move. Every in-tree plugin is built on this surface alone
(``tests/unit/test_architecture.py``), as an out-of-tree one is.
"""

from desched.api.schedulerconfig import DEFAULT_SCHEDULER_NAME, load_default_constraints
from desched.api.types import (
    ArgsModel,
    EvictionLimits,
    FieldValueError,
    LabelSelectorArg,
    Namespaces,
    PriorityThreshold,
    Seconds,
    parse_go_duration,
    policy_checks_enabled,
)
from desched.cluster.view import ClusterView
from desched.errors import PolicyError
from desched.framework.findings import PluginFindings, Verdict
from desched.framework.metrics import (
    KUBERNETES_METRICS,
    PROMETHEUS,
    MetricsProviders,
    NodeMetricsProvider,
    PrometheusClient,
    PrometheusSample,
    UsageError,
)
from desched.framework.nodeactions import (
    DOWNGRADE_ANNOTATION,
    METHOD_LABEL,
    METHOD_TAINT,
    ActionResult,
    NodeActions,
    active_entries,
    is_soft_taint,
)
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
from desched.scheduling.placement import tie_preference

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "DOWNGRADE_ANNOTATION",
    "KUBERNETES_METRICS",
    "METHOD_LABEL",
    "METHOD_TAINT",
    "PROMETHEUS",
    "ActionResult",
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
    "EvictionLimits",
    "EvictionOrder",
    "Evictor",
    "ExplainsFilter",
    "ExplainsPreEvictionFilter",
    "ExtensionPoint",
    "FieldValueError",
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
    "PolicyError",
    "PreEvictionFilterPlugin",
    "PreSortKeyPlugin",
    "PreSortPlugin",
    "PredictedMove",
    "PriorityThreshold",
    "PrometheusClient",
    "PrometheusSample",
    "ReportTable",
    "Seconds",
    "SortKeyPlugin",
    "SortPlugin",
    "Status",
    "UsageError",
    "Verdict",
    "active_entries",
    "is_soft_taint",
    "load_default_constraints",
    "parse_go_duration",
    "policy_checks_enabled",
    "tie_preference",
]
