"""Tracing: a cycle span, a child per plugin run, an eviction span under the plugin that asked."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.otlp import OtlpReceiver

from desched.api.policy import load_policy_file
from desched.cluster.file_source import load_snapshot_file
from desched.errors import UserError
from desched.framework.evictor import SimulatedBackend
from desched.framework.framework import Framework
from desched.plugins import default_registry
from desched.runtime.tracing import CYCLE_SPAN, TracingOptions, setup

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
        assert sorted(e.attributes["pod"] for e in evictions) == sorted(
            f"{r.namespace}/{r.name}" for r in result.evictions
        )
        for p in plugins:
            assert all(e.attributes["plugin"] == p.name for e in receiver.children(p))
        assert all(e.attributes["result"] == "success" for e in evictions)
    assert framework.plugin_span is None  # untraced again after the cycle


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
    assert received.count("evict") == len(result.evictions)
    assert {r.plugin for r in result.plugin_runs} <= set(received)
