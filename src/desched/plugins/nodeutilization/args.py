"""The args of LowNodeUtilization and HighNodeUtilization and their validation.

Thresholds, the metrics source (requests, KubernetesMetrics, Prometheus), eviction modes.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from desched.framework import (
    KUBERNETES_METRICS,
    PROMETHEUS,
    ArgsModel,
    EvictionLimits,
    FieldValueError,
    Namespaces,
    parse_go_duration,
    policy_checks_enabled,
)
from desched.k8s import labels as k8s_labels
from desched.plugins.nodeutilization.usage import METRIC_RESOURCE

MIN_PERCENTAGE = 0.0
MAX_PERCENTAGE = 100.0


#: ``evictionModes`` value: evict only pods that request one of the threshold resources.
ONLY_THRESHOLDING_RESOURCES = "OnlyThresholdingResources"
EVICTION_MODES = (ONLY_THRESHOLDING_RESOURCES,)

ResourceThresholds = dict[str, float]

#: ``softTaint.key`` defaults: the nodes LowNodeUtilization finds over-utilised, and the nodes
#: HighNodeUtilization empties.
OVERUTILIZED_TAINT = "desched.io/overutilized"
UNDERUTILIZED_TAINT = "desched.io/underutilized"
SOFT_TAINT_EFFECTS = ("PreferNoSchedule", "NoSchedule")
DEFAULT_SOFT_TAINT_TTL = "1h"


class SoftTaintArgs(ArgsModel):
    """``softTaint``: taint the nodes the plugin acts on, so kube-scheduler places new pods elsewhere.

    The taint is recorded as one of desched's node downgrades (annotation ``desched.io/downgrade``):
    desched removes only a taint it recorded there, as soon as the node no longer qualifies, and
    at the latest ``ttl`` after the last cycle that found it qualifying (desched stopped)."""

    #: Empty: the plugin's default (OVERUTILIZED_TAINT or UNDERUTILIZED_TAINT).
    key: str = ""
    effect: str = "PreferNoSchedule"
    #: How long a taint outlives the last cycle that set it (it is refreshed every cycle).
    ttl: str = DEFAULT_SOFT_TAINT_TTL
    #: Taint only: evict nothing (the plugin only steers kube-scheduler).
    taint_only: bool = False

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        if v:
            why = k8s_labels.validate_label_key(v)
            if why:
                raise ValueError(f"must be a valid taint key ({why}), got {v!r}")
        return v

    @field_validator("effect")
    @classmethod
    def _effect(cls, v: str) -> str:
        if v not in SOFT_TAINT_EFFECTS:
            raise ValueError(f"must be one of {', '.join(SOFT_TAINT_EFFECTS)}, got {v!r}")
        return v

    @field_validator("ttl")
    @classmethod
    def _ttl(cls, v: str) -> str:
        try:
            ok = parse_go_duration(v) > timedelta(0)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"must be a positive duration such as '1h' or '30m', got {v!r}")
        return v

    @property
    def ttl_duration(self) -> timedelta:
        return parse_go_duration(self.ttl)


def check_thresholds(thresholds: ResourceThresholds, field: str = "thresholds") -> None:
    """upstream ``validateThresholds``: at least one resource, each percentage in [0, 100]. The
    error names the leaf field and the value (upstream: "cpu threshold not in [0, 100] range")."""
    if not thresholds:
        raise FieldValueError(field, "no resource threshold is configured (got {})")
    for name, percent in thresholds.items():
        if not MIN_PERCENTAGE <= percent <= MAX_PERCENTAGE:
            raise FieldValueError(
                f"{field}.{name}",
                f"must be between {MIN_PERCENTAGE:g} and {MAX_PERCENTAGE:g}, got {percent:g}",
            )


def _known_eviction_modes(modes: list[str] | None) -> list[str] | None:
    for i, mode in enumerate(modes or ()):
        if mode not in EVICTION_MODES:
            raise FieldValueError(f"[{i}]", f"must be one of {', '.join(EVICTION_MODES)}, got {mode!r}")
    return modes


def _names(thresholds: ResourceThresholds) -> str:
    return ", ".join(thresholds) or "none"


def _only_exclude(namespaces: Namespaces | None) -> None:
    if namespaces is not None and namespaces.include:
        raise FieldValueError(
            "evictableNamespaces.include",
            f"not supported, only exclude may be set (got include={namespaces.include!r})",
        )


class PrometheusQueryArgs(ArgsModel):
    #: An instant query returning one sample per node (label ``instance``), each in [0, 1].
    query: str = ""
    #: desched only (upstream #1833): one instant query per resource (``cpu``, ``memory`` or any
    #: name), each returning one sample per node (label ``instance``): the fraction of the node
    #: in use (0.57 is 57%; may exceed 1). Exclusive with ``query``.
    queries: dict[str, str] | None = None

    @model_validator(mode="after")
    def _check_queries(self) -> PrometheusQueryArgs:
        if self.queries is not None:
            if self.query:
                raise FieldValueError("queries", "query and queries are exclusive: set one of them")
            if not self.queries:
                raise FieldValueError("queries", "must name at least one resource")
            for name, text in self.queries.items():
                if not name:
                    raise FieldValueError("queries", "a resource name must not be empty")
                if not text.strip():
                    raise FieldValueError(f"queries.{name}", "the query must not be empty")
        return self

    @model_serializer(mode="wrap")
    def _one_form(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # the normalised policy shows the form the user wrote: no empty `query` next to `queries`
        out: dict[str, Any] = handler(self)
        if self.queries is not None:
            out.pop("query", None)
        return out


class MetricsUtilizationArgs(ArgsModel):
    #: Deprecated: the same as ``source: KubernetesMetrics``.
    metrics_server: bool = False
    source: str = ""
    prometheus: PrometheusQueryArgs | None = None

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> MetricsUtilizationArgs:
        source = self.source
        if policy_checks_enabled(info):
            if source == KUBERNETES_METRICS and self.metrics_server:
                raise FieldValueError(
                    "metricsServer",
                    f"cannot be true with source: {KUBERNETES_METRICS} (got metricsServer: true, "
                    f"source: {KUBERNETES_METRICS}); it is the deprecated spelling of that source",
                )
            if source == KUBERNETES_METRICS and self.prometheus is not None:
                raise FieldValueError(
                    "prometheus",
                    f"must not be set with source: {KUBERNETES_METRICS} (got a prometheus block, "
                    f"source: {KUBERNETES_METRICS}); it configures source: {PROMETHEUS}",
                )
            if source == PROMETHEUS and (
                self.prometheus is None or not (self.prometheus.query or self.prometheus.queries)
            ):
                raise FieldValueError(
                    "prometheus.query",
                    f"required with source: {PROMETHEUS} (or prometheus.queries, one per resource); got none",
                )
        # What upstream's constructor refuses.
        if source not in ("", KUBERNETES_METRICS, PROMETHEUS):
            raise FieldValueError("source", f"must be {KUBERNETES_METRICS} or {PROMETHEUS}, got {source!r}")
        if not source and not self.metrics_server:
            raise FieldValueError(
                "source",
                f"required: {KUBERNETES_METRICS} or {PROMETHEUS} (or the deprecated metricsServer: true), "
                "got none",
            )
        if source == PROMETHEUS and self.metrics_server:
            raise FieldValueError(
                "metricsServer",
                f"cannot be true with source: {PROMETHEUS} (metricsServer means source: "
                f"{KUBERNETES_METRICS}; got metricsServer: true, source: {PROMETHEUS})",
            )
        return self

    @property
    def effective_source(self) -> str:
        """KubernetesMetrics or Prometheus (metricsServer means KubernetesMetrics)."""
        return PROMETHEUS if self.source == PROMETHEUS else KUBERNETES_METRICS

    @property
    def query(self) -> str:
        return self.prometheus.query if self.prometheus is not None else ""

    @property
    def queries_by_resource(self) -> dict[str, str]:
        """Resource name -> its query: ``prometheus.queries``, or ``MetricResource`` -> ``query``."""
        if self.prometheus is not None and self.prometheus.queries:
            return dict(self.prometheus.queries)
        return {METRIC_RESOURCE: self.query}

    @property
    def per_resource(self) -> bool:
        """``prometheus.queries`` (one query per resource) rather than upstream's single query."""
        return self.prometheus is not None and bool(self.prometheus.queries)


class LowNodeUtilizationArgs(ArgsModel):
    use_deviation_thresholds: bool = False
    thresholds: ResourceThresholds = Field(default_factory=dict)
    target_thresholds: ResourceThresholds = Field(default_factory=dict)
    number_of_nodes: int = 0
    metrics_utilization: MetricsUtilizationArgs | None = None
    #: ``OnlyThresholdingResources``: evict only pods that request a threshold resource.
    eviction_modes: list[str] | None = None
    #: Only ``exclude``: pods of these namespaces count towards usage but are not evicted.
    evictable_namespaces: Namespaces | None = None
    eviction_limits: EvictionLimits | None = None
    #: desched only (issue 26): taint the over-utilised nodes (default key desched.io/overutilized).
    soft_taint: SoftTaintArgs | None = None

    @field_validator("eviction_modes")
    @classmethod
    def _known_modes(cls, modes: list[str] | None) -> list[str] | None:
        return _known_eviction_modes(modes)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> LowNodeUtilizationArgs:
        if policy_checks_enabled(info):
            _only_exclude(self.evictable_namespaces)
            check_thresholds(self.thresholds)
            check_thresholds(self.target_thresholds, "targetThresholds")
            for name, value in self.thresholds.items():
                target = self.target_thresholds.get(name)
                if target is None:
                    raise FieldValueError(
                        f"targetThresholds.{name}",
                        f"missing: thresholds and targetThresholds must name the same resources "
                        f"(got thresholds: {_names(self.thresholds)}, targetThresholds: "
                        f"{_names(self.target_thresholds)})",
                    )
                if value > target and not self.use_deviation_thresholds:
                    raise FieldValueError(
                        f"thresholds.{name}",
                        f"must not be above targetThresholds.{name} (got {value:g} > {target:g})",
                    )
            for name in self.target_thresholds:
                if name not in self.thresholds:
                    raise FieldValueError(
                        f"thresholds.{name}",
                        f"missing: thresholds and targetThresholds must name the same resources "
                        f"(got thresholds: {_names(self.thresholds)}, targetThresholds: "
                        f"{_names(self.target_thresholds)})",
                    )
        metrics = self.metrics_utilization
        if metrics is not None and metrics.effective_source == PROMETHEUS and metrics.per_resource:
            queried = sorted(metrics.queries_by_resource)
            for field, thresholds in (
                ("thresholds", self.thresholds),
                ("targetThresholds", self.target_thresholds),
            ):
                if sorted(thresholds) != queried:
                    raise FieldValueError(
                        field,
                        f"must name exactly the resources of metricsUtilization.prometheus.queries "
                        f"{queried}, got {sorted(thresholds)}",
                    )
        elif metrics is not None and metrics.effective_source == PROMETHEUS:
            for field, thresholds in (
                ("thresholds", self.thresholds),
                ("targetThresholds", self.target_thresholds),
            ):
                if list(thresholds) != [METRIC_RESOURCE]:
                    raise FieldValueError(
                        field,
                        f"must name only {METRIC_RESOURCE} with a Prometheus query, got "
                        f"{', '.join(sorted(thresholds)) or 'none'}",
                    )
        return self

    @property
    def metrics_source(self) -> str | None:
        """The ``metricsProviders`` source this plugin reads usage from (None: resource requests)."""
        metrics = self.metrics_utilization
        return metrics.effective_source if metrics is not None else None

    def chart_thresholds(self) -> list[tuple[str, float, str]]:
        """``thresholds`` (``low``) and ``targetThresholds`` (``target``) as reports draw them
        (:class:`desched.framework.DrawsThresholds`); none with deviation thresholds (relative
        to the mean) or on measured usage (metricsUtilization): the charts draw requests."""
        if self.use_deviation_thresholds or self.metrics_utilization is not None:
            return []
        return _drawn((self.thresholds, "low"), (self.target_thresholds, "target"))


class HighNodeUtilizationArgs(ArgsModel):
    thresholds: ResourceThresholds = Field(default_factory=dict)
    number_of_nodes: int = 0
    #: Only ``exclude``: pods of these namespaces count towards usage but are not evicted.
    evictable_namespaces: Namespaces | None = None
    #: ``OnlyThresholdingResources``: evict only pods that request a threshold resource.
    eviction_modes: list[str] | None = None
    #: desched only (upstream #725): when every schedulable node is under-utilised, empty the
    #: least-utilised ones whose pods all fit on the others, instead of doing nothing.
    compact_when_all_underutilized: bool = False
    #: desched only (issue 26): taint the nodes being emptied (default key desched.io/underutilized).
    soft_taint: SoftTaintArgs | None = None

    @field_validator("eviction_modes")
    @classmethod
    def _known_modes(cls, modes: list[str] | None) -> list[str] | None:
        return _known_eviction_modes(modes)

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo) -> HighNodeUtilizationArgs:
        if policy_checks_enabled(info):
            _only_exclude(self.evictable_namespaces)
            check_thresholds(self.thresholds)
            if (
                self.soft_taint is not None
                and self.soft_taint.taint_only
                and self.compact_when_all_underutilized
            ):
                raise FieldValueError(
                    "softTaint.taintOnly",
                    "cannot be combined with compactWhenAllUnderutilized: which nodes compaction "
                    "empties is only known by evicting",
                )
        return self

    def chart_thresholds(self) -> list[tuple[str, float, str]]:
        """``thresholds`` (``low``) as reports draw them (:class:`desched.framework.DrawsThresholds`)."""
        return _drawn((self.thresholds, "low"))


def _drawn(*named: tuple[dict[str, float], str]) -> list[tuple[str, float, str]]:
    return [
        (resource, float(value), word) for values, word in named for resource, value in sorted(values.items())
    ]
