"""Tracing: a cycle span, a child per plugin run, an eviction span under the plugin that asked."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.otlp import OtlpReceiver

from desched.api.policy import load_policy_file
from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.file_source import load_snapshot_file
from desched.errors import UserError
from desched.framework.evictor import EvictionRequest
from desched.framework.framework import Framework
from desched.framework.types import EvictResult
from desched.k8s.objects import Pod
from desched.plugins import default_registry
from desched.runtime.tracing import CYCLE_SPAN, EVICT_SPAN, TracingOptions, setup

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)


def test_no_endpoint_is_no_tracing() -> None:
    assert setup(TracingOptions()) is None


def test_a_cycle_is_one_span_with_a_child_per_plugin_and_evictions_under_them() -> None:
    registry = default_registry()
    policy = load_policy_file(str(ROOT / "examples" / "policy.yaml"), registry)
    snapshot = load_snapshot_file(str(ROOT / "examples" / "cluster.yaml"))
    framework = Framework(policy, registry, clock=lambda: NOW)
    with OtlpReceiver() as receiver:
        tracing = setup(
            TracingOptions(endpoint=receiver.url, service_name="desched-test", service_namespace="ns")
        )
        assert tracing is not None
        result = tracing.run_cycle(framework)(snapshot, SimulatedBackend(snapshot))
        tracing.shutdown()
        (cycle,) = receiver.wait_for(CYCLE_SPAN)
        assert cycle.parent_id == ""
        assert (
            cycle.resource["service.name"] == "desched-test" and cycle.resource["service.namespace"] == "ns"
        )
        assert cycle.attributes["evicted"] == len(result.evictions) > 0
        assert cycle.attributes["evictionsSkipped"] == len(result.skips) == 0
        plugins = receiver.children(cycle)
        assert [(s.attributes["profile"], s.name) for s in plugins] == [
            (r.profile, r.plugin) for r in result.plugin_runs
        ]
        assert {s.attributes["operation"] for s in plugins} == {"deschedule", "balance"}
        assert all(cycle.start_ns <= s.start_ns <= s.end_ns <= cycle.end_ns for s in plugins)
        evictions = [e for p in plugins for e in receiver.children(p)]
        # upstream's span (pkg/descheduler/evictions/evictions.go): EvictPod, podName,
        # podNamespace, reason, operation=evict; then desched's node, profile, plugin, result
        assert {e.name for e in evictions} == {EVICT_SPAN} == {"EvictPod"}
        assert sorted((e.attributes["podNamespace"], e.attributes["podName"]) for e in evictions) == sorted(
            (r.namespace, r.name) for r in result.evictions
        )
        by_pod = {(r.namespace, r.name): r for r in result.evictions}
        for e in evictions:
            r = by_pod[(e.attributes["podNamespace"], e.attributes["podName"])]
            assert e.attributes == {
                "podName": r.name,
                "podNamespace": r.namespace,
                "reason": r.reason,
                "operation": "evict",
                "node": r.node,
                "profile": r.profile,
                "plugin": r.plugin,
                "result": "success",
            }
            assert e.events == []
        for p in plugins:
            assert all(e.attributes["plugin"] == p.name for e in receiver.children(p))
    assert framework.plugin_span is None  # untraced again after the cycle


def test_an_eviction_over_a_limit_or_refused_is_a_failed_evictpod_span(tmp_path: Path) -> None:
    """As upstream's EvictPod span: an eviction refused by a limit (it never reaches the backend)
    or by the API has an ``Eviction Failed`` event with ``node`` and ``err``."""
    registry = default_registry()
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text((ROOT / "examples" / "policy.yaml").read_text() + "maxNoOfPodsToEvictPerNode: 1\n")
    policy = load_policy_file(str(policy_file), registry)
    snapshot = load_snapshot_file(str(ROOT / "examples" / "cluster.yaml"))
    framework = Framework(policy, registry, clock=lambda: NOW)
    refused_by_api: list[str] = []

    class Refusing(SimulatedBackend):
        """Refuses the first request, as the eviction API refuses a pod its PDB protects."""

        def evict(self, pod: Pod, request: EvictionRequest) -> str | None:
            if not refused_by_api:
                refused_by_api.append(pod.metadata.name)
                return "Cannot evict pod as it would violate the pod's disruption budget."
            return super().evict(pod, request)

    with OtlpReceiver() as receiver:
        tracing = setup(TracingOptions(endpoint=receiver.url))
        assert tracing is not None
        result = tracing.run_cycle(framework)(snapshot, Refusing(snapshot))
        tracing.shutdown()
        receiver.wait_for(CYCLE_SPAN)
        spans = [s for s in receiver.spans if s.name == EVICT_SPAN]
    limited = [r for r in result.failures if r.result is EvictResult.NODE_LIMIT]
    api = [r for r in result.failures if r.result is EvictResult.FAILED]
    assert limited and [r.name for r in api] == refused_by_api
    failed = {s.attributes["podName"]: s for s in spans if s.events}
    assert set(failed) == {r.name for r in limited + api}
    assert len(spans) == len(result.evictions) + len(limited) + len(api)
    for r in limited:
        assert failed[r.name].events == [
            ("Eviction Failed", {"node": r.node, "err": EvictResult.NODE_LIMIT.value})
        ]
        assert failed[r.name].attributes["operation"] == "evict"
        assert failed[r.name].parent_id  # under the plugin run that asked
    assert failed[refused_by_api[0]].events == [
        ("Eviction Failed", {"node": api[0].node, "err": api[0].error})
    ]


def test_bad_setup_is_a_user_error_or_no_op_when_asked(tmp_path: Path) -> None:
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    opts = TracingOptions(endpoint="collector:4317", ca_cert=str(bad))
    with pytest.raises(UserError, match="--otel-transport-ca-cert"):
        setup(opts)
    assert (
        setup(TracingOptions(endpoint="collector:4317", ca_cert=str(bad), fallback_no_op_on_error=True))
        is None
    )
    with pytest.raises(UserError, match="--otel-collector-endpoint"):
        setup(TracingOptions(endpoint="collector"))
    with pytest.raises(UserError, match="--otel-sample-rate"):
        setup(TracingOptions(endpoint="collector:4317", sample_rate=2))


def test_grpc_endpoint_as_upstream_writes_it_delivers_the_spans() -> None:
    """host:port, no scheme: OTLP over gRPC in plain text, as upstream's exporter sends it."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    received: list[str] = []

    class Collector(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(self, request: Any, context: Any) -> Any:
            for rs in request.resource_spans:
                for ss in rs.scope_spans:
                    received.extend(s.name for s in ss.spans)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Collector(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        registry = default_registry()
        policy = load_policy_file(str(ROOT / "examples" / "policy.yaml"), registry)
        snapshot = load_snapshot_file(str(ROOT / "examples" / "cluster.yaml"))
        framework = Framework(policy, registry, clock=lambda: NOW)
        tracing = setup(TracingOptions(endpoint=f"127.0.0.1:{port}"))
        assert tracing is not None
        result = tracing.run_cycle(framework)(snapshot, SimulatedBackend(snapshot))
        tracing.shutdown()
    finally:
        server.stop(grace=None)
    assert received.count(CYCLE_SPAN) == 1
    assert received.count(EVICT_SPAN) == len(result.evictions)
    assert {r.plugin for r in result.plugin_runs} <= set(received)
