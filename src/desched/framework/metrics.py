"""The metrics providers a plugin may reach through its handle (``handle.metrics``).

A live run connects them (``metrics.k8s.io`` and Prometheus, see the runtime's usage metrics) and
hands them to the framework (:meth:`desched.framework.framework.Framework.use_metrics`); a test or
a simulation hands static ones. A plugin asks its handle, and reports an error when the provider
its arguments need is missing. Nothing here talks to a server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from desched.k8s.resources import Resources

#: ``metricsProviders[].source`` and ``metricsUtilization.source`` values.
KUBERNETES_METRICS = "KubernetesMetrics"
PROMETHEUS = "Prometheus"


class UsageError(Exception):
    """The usage of the nodes could not be assessed; the plugin does nothing this cycle."""


class NodeMetricsProvider(Protocol):
    """``metrics.k8s.io``: what the nodes and pods use right now."""

    def node_usage(self) -> Mapping[str, Resources]:
        """Usage by node name (canonical amounts). Raises :class:`UsageError`."""
        ...

    def pod_usage(self, namespace: str, name: str) -> Resources | None:
        """A pod's usage summed over its containers, or ``None`` if there is no PodMetrics for it."""
        ...


@dataclass(frozen=True, slots=True)
class PrometheusSample:
    """One sample of an instant vector."""

    labels: Mapping[str, str]
    value: float


class PrometheusClient(Protocol):
    def query(self, query: str) -> Sequence[PrometheusSample]:
        """Run an instant query that returns a vector. Raises :class:`UsageError`."""
        ...


@dataclass(frozen=True, slots=True)
class MetricsProviders:
    """The providers a run has (``None``: the policy configures none of that source)."""

    node_metrics: NodeMetricsProvider | None = None
    prometheus: PrometheusClient | None = None
