"""Prometheus metrics under upstream's names, labels and bucket boundaries, so dashboards carry over.

Upstream (``metrics/metrics.go``, v0.36) exposes ``descheduler_pods_evicted_total``,
``descheduler_loop_duration_seconds``, ``descheduler_strategy_duration_seconds`` and
``descheduler_build_info``; the histograms use the bucket boundaries below, which are upstream's.
Upstream's deprecated aliases (``descheduler_pods_evicted``, ``descheduler_descheduler_*``) are not
exposed: prometheus_client appends ``_total`` to counters, so the old counter name cannot be
produced, and both were deprecated upstream in 0.34.

Two things differ from prometheus_client's defaults, to look like a Go component to Prometheus:
no ``*_created`` series (client_golang has none; they would double every per-node and
per-namespace series), and ``process_*`` metrics (RSS, CPU, open fds: what operators alert on when
a descheduler runs out of memory) from prometheus_client's ProcessCollector, which reads /proc and
so exports them on Linux only.
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Generic, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)

from desched import __version__
from desched.framework.evictor import EvictionRecord
from desched.framework.framework import PluginRun
from desched.framework.pluginmetrics import (
    CounterMetric,
    GaugeMetric,
    MetricsRegistryError,
    check_metric,
)
from desched.framework.types import EvictResult

#: ``descheduler_loop_duration_seconds``: upstream's 15 boundaries, 10 ms to 500 s.
LOOP_DURATION_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
)
#: ``descheduler_strategy_duration_seconds``: upstream's 13 boundaries, 10 ms to 100 s.
STRATEGY_DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0)

# A process-wide switch in prometheus_client: every registry of this process (the extender's too)
# exposes no ``*_created`` samples.
disable_created_metrics()  # type: ignore[no-untyped-call]


@cache
def git_revision() -> tuple[str, str]:
    """(sha, branch) of the build, or ("", "") when unknown.

    The container image bakes them in as ``DESCHED_GIT_SHA``/``DESCHED_GIT_BRANCH`` (build args of
    deploy/Dockerfile). Run from a git checkout (an editable install), ``git`` is asked, with a
    short timeout; an installed wheel without those variables reports none.
    """
    sha = os.environ.get("DESCHED_GIT_SHA", "")
    branch = os.environ.get("DESCHED_GIT_BRANCH", "")
    if sha:
        return sha, branch
    source = Path(__file__).resolve().parents[3]
    if not (source / ".git").exists():
        return "", ""
    try:
        out = subprocess.run(
            ["git", "-C", str(source), "rev-parse", "HEAD", "--abbrev-ref", "HEAD"],
            capture_output=True,
            text=True,
            timeout=2,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return "", ""
    if len(out) != 2:
        return "", ""
    return out[0], branch or (out[1] if out[1] != "HEAD" else "")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry or CollectorRegistry()
        if process:
            ProcessCollector(registry=self.registry)
        self.pods_evicted = Counter(
            "descheduler_pods_evicted",
            "Number of pods desched tried to evict, by result, strategy, profile, namespace and node; "
            "'error' means the eviction was refused or failed",
            ["result", "strategy", "profile", "namespace", "node"],
            registry=self.registry,
        )
        #: ``pods_evicted``'s children by their label values: ``labels()`` validated and looked them
        #: up again for every eviction (a sixth of a dry-run cycle evicting 25,000 pods); no child
        #: is ever removed, so the one a tuple names stays the metric's
        self._pods_evicted_children: dict[tuple[str, ...], Counter] = {}
        self.outcome_unknown = Counter(
            "descheduler_eviction_outcome_unknown",
            "Evictions whose answer was lost (5xx, reset, timeout), by what reconciliation found: "
            "evicted, not_evicted, unknown",
            ["outcome", "strategy", "profile", "namespace"],
            registry=self.registry,
        )
        self.loop_duration = Histogram(
            "descheduler_loop_duration_seconds",
            "Time taken to complete a full descheduling cycle",
            buckets=LOOP_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.strategy_duration = Histogram(
            "descheduler_strategy_duration_seconds",
            "Time taken by each strategy (plugin) of a profile in a descheduling cycle",
            ["strategy", "profile"],
            buckets=STRATEGY_DURATION_BUCKETS,
            registry=self.registry,
        )
        self.build_info = Gauge(
            "descheduler_build_info",
            "Build info about desched: runtime, version, git SHA and branch (upstream's labels)",
            ["GoVersion", "AppVersion", "DeschedulerVersion", "GitBranch", "GitSha1"],
            registry=self.registry,
        )
        sha, branch = git_revision()
        app_version = ".".join(__version__.split(".")[:2])
        self.build_info.labels(
            f"python{platform.python_version()}", app_version, f"v{__version__}", branch, sha
        ).set(1)

        # desched's own: evictions the evictionPolicy skipped, by reason (desched.framework.safety)
        self.evictions_skipped = Counter(
            "descheduler_evictions_skipped",
            "Evictions the evictionPolicy skipped, by reason (opt_out, disruption_window, cooldown, "
            "max_evictions_per_workload, max_unavailable_per_workload; settling: held back by the "
            "settling guard after an outage), strategy, profile and namespace",
            ["reason", "strategy", "profile", "namespace"],
            registry=self.registry,
        )
        # desched's own: evictionPolicy.surge's rollout restarts (each also counted once in
        # descheduler_pods_evicted_total, result "success", whose upstream labels stay as they are)
        self.surges = Counter(
            "descheduler_surges",
            "Pods moved by a rollout restart of their Deployment instead of an eviction "
            "(evictionPolicy.surge), by result (started; then succeeded or failed), strategy, "
            "profile and namespace",
            ["result", "strategy", "profile", "namespace"],
            registry=self.registry,
        )
        # desched's own: evictionPolicy.webhook requests without a usable answer (either policy)
        self.eviction_webhook_errors = Counter(
            "descheduler_eviction_webhook_errors",
            "Requests to an evictionPolicy.webhook without a usable answer (timeout, connection or "
            "TLS error, non-2xx, malformed answer, wrong uid), by profile and failurePolicy",
            ["profile", "failure_policy"],
            registry=self.registry,
        )
        # desched's own: a plugin that raised (its cycle went on without it)
        self.plugin_failures = Counter(
            "descheduler_plugin_failures",
            "Plugin runs that raised an error, by strategy and profile (the cycle went on without them)",
            ["strategy", "profile"],
            registry=self.registry,
        )
        # desched's own: saves of the evictionPolicy's memory (desched.runtime.statestore)
        self.safety_state_saves = Counter(
            "descheduler_safety_state_saves",
            "Saves of the evictionPolicy's cooldowns, rate limits and awaited replacements to their "
            "ConfigMap, by result (saved, failed: tried again after the next cycle)",
            ["result"],
            registry=self.registry,
        )
        # desched's own: live policy reloads (desched.app.reload) and which policy runs
        self.policy_reloads = Counter(
            "desched_policy_reloads",
            "Policy reloads of desched run (a changed policy file or SIGHUP), by result (success; "
            "error: the new policy did not load and the running one stays)",
            ["result"],
            registry=self.registry,
        )
        self.policy_info = Gauge(
            "desched_policy_info",
            "The policy desched runs: 1 for the hash (sha256, first 16 hex digits) of its file's content",
            ["hash"],
            registry=self.registry,
        )
        #: the metrics plugins register themselves (``handle.metrics_registry``), in this registry
        self.plugins = PluginMetricsRegistry(self.registry)
        # the node actions' backend (not a plugin): downgrades of desched's that have not expired
        self.anomaly_nodes_downgraded = Gauge(
            "descheduler_anomaly_nodes_downgraded",
            "Nodes that carry a downgrade (label or taint) of desched's that has not expired",
            registry=self.registry,
        )

    def observe_eviction(self, record: EvictionRecord, *, dry_run: bool = False) -> None:
        # an outcome-unknown eviction is counted once reconciled (observe_reconciled)
        if record.result.skipped:
            labels = (record.skip_reason, record.plugin, record.profile, record.namespace)
            self.evictions_skipped.labels(*labels).inc()
            return
        if record.result in (EvictResult.FILTERED, EvictResult.ALREADY_EVICTED, EvictResult.UNKNOWN):
            return
        result = record.result.value
        self._pods_evicted(result, record.plugin, record.profile, record.namespace, record.node).inc()
        if record.method == "surge":
            self.surges.labels("started", record.plugin, record.profile, record.namespace).inc()

    def observe_webhook_error(self, profile: str, failure_policy: str) -> None:
        self.eviction_webhook_errors.labels(profile, failure_policy).inc()

    def observe_surge(self, succeeded: bool, strategy: str, profile: str, namespace: str) -> None:
        """A surge's rollout ended (:func:`desched.backends.surge.follow_surge`)."""
        self.surges.labels("succeeded" if succeeded else "failed", strategy, profile, namespace).inc()

    def _pods_evicted(self, *labels: str) -> Counter:
        child = self._pods_evicted_children.get(labels)
        if child is None:
            child = self._pods_evicted_children[labels] = self.pods_evicted.labels(*labels)
        return child

    def observe_reconciled(self, record: EvictionRecord, outcome: str) -> None:
        """An outcome-unknown eviction, reconciled: ``evicted``, ``not evicted`` or ``unknown``.

        ``descheduler_pods_evicted_total`` counts it under upstream's result values once known
        (``success`` or ``error``), or ``unknown`` while reconciliation could not tell.
        """
        result = {"evicted": EvictResult.EVICTED.value, "not evicted": EvictResult.FAILED.value}.get(
            outcome, "unknown"
        )
        labels = (record.plugin, record.profile, record.namespace)
        self._pods_evicted(result, *labels, record.node).inc()
        self.outcome_unknown.labels(outcome.replace(" ", "_"), *labels).inc()

    def observe_plugin(self, run: PluginRun) -> None:
        self.strategy_duration.labels(run.plugin, run.profile).observe(run.seconds)
        if run.crashed:
            self.plugin_failures.labels(run.plugin, run.profile).inc()

    def observe_state_save(self, result: str) -> None:
        self.safety_state_saves.labels(result).inc()

    def observe_cycle(self, seconds: float) -> None:
        self.loop_duration.observe(seconds)

    def observe_downgraded_nodes(self, count: int) -> None:
        self.anomaly_nodes_downgraded.set(count)

    def observe_policy(self, digest: str) -> None:
        """The policy whose content hashes to ``digest`` runs now (the only series of the gauge)."""
        self.policy_info.clear()
        self.policy_info.labels(digest).set(1)

    def observe_policy_reload(self, result: str) -> None:
        self.policy_reloads.labels(result).inc()


_M = TypeVar("_M", Counter, Gauge)


class PluginMetricsRegistry:
    """The :class:`desched.framework.MetricsRegistry` of a live run: plugins' metrics in the
    process's Prometheus registry, beside desched's own. A name asked for again (another
    profile's instance, a reloaded policy) gives the metric registered first, if its kind, help
    and labels are the same; a clash with any other metric of the registry is refused."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._metrics: dict[str, tuple[tuple[str, str, tuple[str, ...]], Counter | Gauge]] = {}

    def _known(self, spec: tuple[str, str, tuple[str, ...]], name: str) -> Counter | Gauge | None:
        kind, _, labelnames = spec
        check_metric(kind, name, labelnames)
        found = self._metrics.get(name)
        if found is None:
            return None
        if found[0] != spec:
            raise MetricsRegistryError(f"metric {name!r} is already registered differently")
        return found[1]

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> CounterMetric:
        spec = ("counter", documentation, tuple(labelnames))
        metric = self._known(spec, name)
        if metric is None:
            # prometheus_client takes the name without ``_total`` and exposes it with it
            metric = Counter(name, documentation, labelnames, registry=self.registry)
            self._metrics[name] = (spec, metric)
        assert isinstance(metric, Counter)
        return _Unlabelled(metric) if not labelnames else metric

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> GaugeMetric:
        spec = ("gauge", documentation, tuple(labelnames))
        metric = self._known(spec, name)
        if metric is None:
            metric = Gauge(name, documentation, labelnames, registry=self.registry)
            self._metrics[name] = (spec, metric)
        assert isinstance(metric, Gauge)
        return _Unlabelled(metric) if not labelnames else metric


class _Unlabelled(Generic[_M]):
    """A metric without labels: ``labels()`` (no values) is the metric itself, as the SDK says."""

    __slots__ = ("_metric",)
    _metric: _M

    def __init__(self, metric: _M) -> None:
        self._metric = metric

    def labels(self, *values: str) -> _M:
        if values:
            raise MetricsRegistryError(f"{len(values)} label values for a metric without labels")
        return self._metric
