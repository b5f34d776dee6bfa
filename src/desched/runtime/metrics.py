"""Prometheus metrics under upstream's names and labels, so existing dashboards keep working.

Upstream's deprecated aliases (``descheduler_pods_evicted``, ``descheduler_descheduler_*``) are not
exposed: prometheus_client appends ``_total`` to counters, so the old counter name cannot be
produced, and both were deprecated upstream in 0.34.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from desched import __version__
from desched.framework.evictor import EvictionRecord
from desched.framework.framework import PluginRun
from desched.framework.types import EvictResult


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.pods_evicted = Counter(
            "descheduler_pods_evicted",
            "Number of evicted pods, by the result, strategy, profile, namespace and node",
            ["result", "strategy", "profile", "namespace", "node"],
            registry=self.registry,
        )
        self.loop_duration = Histogram(
            "descheduler_loop_duration_seconds",
            "Time taken to complete a full descheduling cycle",
            buckets=(0.001, 0.01, 0.1, 1, 5, 10, 20, 30, 40, 50, 100, 200, 500),
            registry=self.registry,
        )
        self.strategy_duration = Histogram(
            "descheduler_strategy_duration_seconds",
            "Time taken to complete each strategy of the descheduling operation",
            ["strategy", "profile"],
            buckets=(0.001, 0.01, 0.1, 1, 2, 5, 10, 20, 30, 40, 50, 100),
            registry=self.registry,
        )
        self.build_info = Gauge(
            "descheduler_build_info",
            "Build info about the descheduler, including the runtime version",
            ["GoVersion", "AppVersion", "DeschedulerVersion", "GitBranch", "GitSha1"],
            registry=self.registry,
        )
        self.build_info.labels(f"python{platform.python_version()}", __version__, __version__, "", "").set(1)

        # desched's own: a plugin that raised (its cycle went on without it)
        self.plugin_failures = Counter(
            "descheduler_plugin_failures",
            "Plugin runs that raised an error, by strategy and profile (the cycle went on without them)",
            ["strategy", "profile"],
            registry=self.registry,
        )
        # RemoveAnomalyPods (the proposal's observability section)
        self.anomaly_pods_anomalous = Gauge(
            "descheduler_anomaly_pods_anomalous",
            "Pods judged anomalous by RemoveAnomalyPods and not yet gone, reset or expired",
            ["profile"],
            registry=self.registry,
        )
        self.anomaly_pods_suspected = Gauge(
            "descheduler_anomaly_pods_suspected",
            "Pods with abnormal observations that RemoveAnomalyPods has not (yet) judged anomalous",
            ["profile"],
            registry=self.registry,
        )
        self.anomalies = Counter(
            "descheduler_anomaly",
            "Pods judged anomalous by RemoveAnomalyPods, by their main reason",
            ["profile", "reason"],
            registry=self.registry,
        )
        self.anomaly_nodes_downgraded = Gauge(
            "descheduler_anomaly_nodes_downgraded",
            "Nodes that carry a downgrade (label or taint) of desched's that has not expired",
            registry=self.registry,
        )

    def observe_eviction(self, record: EvictionRecord, *, dry_run: bool = False) -> None:
        if record.result in (EvictResult.FILTERED, EvictResult.ALREADY_EVICTED):
            return
        result = record.result.value
        self.pods_evicted.labels(result, record.plugin, record.profile, record.namespace, record.node).inc()

    def observe_plugin(self, run: PluginRun) -> None:
        self.strategy_duration.labels(run.plugin, run.profile).observe(run.seconds)
        if run.crashed:
            self.plugin_failures.labels(run.plugin, run.profile).inc()

    def observe_cycle(self, seconds: float) -> None:
        self.loop_duration.observe(seconds)

    def observe_anomaly_plugins(self, profiles: Iterable[Any]) -> None:
        """Read the ``anomaly_stats`` of every RemoveAnomalyPods instance after a cycle."""
        from desched.plugins.removeanomalypods import AnomalyStats

        for profile in profiles:
            for inst in profile.instances.values():
                stats = getattr(inst, "anomaly_stats", None)
                if not isinstance(stats, AnomalyStats):
                    continue
                self.anomaly_pods_anomalous.labels(profile.name).set(stats.anomalous)
                self.anomaly_pods_suspected.labels(profile.name).set(stats.suspected)
                for reason, n in stats.judged_by_reason.items():
                    self.anomalies.labels(profile.name, reason).inc(n)

    def observe_downgraded_nodes(self, count: int) -> None:
        self.anomaly_nodes_downgraded.set(count)
