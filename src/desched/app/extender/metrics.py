"""The extender's own Prometheus metrics (requests, latency, candidate nodes, budget, cache size)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from desched.app.extender.usage import NodeUsageIndex


class ExtenderMetrics:
    LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
    NODE_BUCKETS = (1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "desched_extender_requests",
            "Extender requests served, by verb and HTTP status code",
            ["verb", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "desched_extender_request_duration_seconds",
            "Time from a request's arrival to its answer, by verb",
            ["verb"],
            buckets=self.LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.nodes = Histogram(
            "desched_extender_request_nodes",
            "Candidate nodes per request, by verb",
            ["verb"],
            buckets=self.NODE_BUCKETS,
            registry=self.registry,
        )
        self.over_budget = Counter(
            "desched_extender_over_budget",
            "Requests answered early because the time budget ran out, by verb",
            ["verb"],
            registry=self.registry,
        )
        self.cache_objects = Gauge(
            "desched_extender_cache_objects",
            "Objects in the extender's cache, by kind",
            ["kind"],
            registry=self.registry,
        )

    def watch_state(self, state: NodeUsageIndex) -> None:
        self.cache_objects.labels("Node").set_function(lambda: len(state.nodes))
        self.cache_objects.labels("Pod").set_function(lambda: state.pod_count)
