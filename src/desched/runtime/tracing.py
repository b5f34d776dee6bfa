"""OpenTelemetry traces of ``desched run``, as upstream's ``--otel-*`` flags set them up.

One span per cycle (``runDeschedulerLoop``), a child per plugin run (named after the plugin, with
``profile``, ``plugin`` and ``operation`` = deschedule|balance) and, under it, one per eviction
(``EvictPod``, as upstream's PodEvictor.EvictPod names it, with upstream's ``podName``,
``podNamespace``, ``reason`` and ``operation`` = evict, then desched's ``node``, ``profile``,
``plugin`` and ``result``; a refusal, a failed request or an eviction over a limit adds upstream's
``Eviction Failed`` event with ``node`` and ``err``). Without ``--otel-collector-endpoint`` nothing
here is imported or called: the cycle runs exactly as without tracing.

The endpoint is written as upstream's users write it: ``host:port`` is OTLP over gRPC (upstream's
only transport), plain text unless ``--otel-transport-ca-cert`` gives a CA. desched also takes an
``http://`` or ``https://`` URL for OTLP over HTTP (protobuf), posted to ``<URL>/v1/traces``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from desched.errors import UserError
from desched.framework.evictor import (
    EvictAnswer,
    EvictionBackend,
    EvictionRecord,
    EvictionRequest,
    InBackground,
    OutcomeUnknown,
    Surged,
)
from desched.framework.framework import CycleResult, Framework
from desched.framework.safety import Skip
from desched.framework.types import EvictResult
from desched.k8s.objects import Pod

log = logging.getLogger(__name__)

#: The tracer's (instrumentation scope's) name, as upstream's.
TRACER_NAME = "sigs.k8s.io/descheduler"
CYCLE_SPAN = "runDeschedulerLoop"
#: upstream's eviction span (pkg/descheduler/evictions/evictions.go) and its ``operation``
EVICT_SPAN = "EvictPod"
EVICT_OPERATION = "evict"
FAILED_EVENT = "Eviction Failed"
#: the evictions that never reach the backend, refused by a limit: upstream's EvictPod span
#: covers them too (its limit checks are inside the span)
_LIMITS = frozenset({EvictResult.NODE_LIMIT, EvictResult.NAMESPACE_LIMIT, EvictResult.TOTAL_LIMIT})


@dataclass(frozen=True)
class TracingOptions:
    endpoint: str = ""
    ca_cert: str = ""
    service_name: str = "descheduler"
    service_namespace: str = ""
    sample_rate: float = 1.0
    fallback_no_op_on_error: bool = False


class Tracing:
    """A tracer provider exporting to the collector, and the tracer desched's spans come from."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer(TRACER_NAME)

    def shutdown(self) -> None:
        """Export what is left (bounded: the exporter's own timeout) and stop."""
        try:
            self.provider.shutdown()
        except Exception as e:  # a collector gone at exit must not turn a clean exit into a crash
            log.warning("tracing: could not flush the last spans: %s", e)

    # ---------------------------------------------------------------- spans

    def run_cycle(self, framework: Framework) -> Callable[..., CycleResult]:
        """``framework.run_cycle``, traced: call it as you would call that."""

        def traced(snapshot: Any, backend: EvictionBackend, **kwargs: Any) -> CycleResult:
            with self.tracer.start_as_current_span(CYCLE_SPAN) as span:
                framework.plugin_span = self.plugin_span
                kwargs["observers"] = [*kwargs.get("observers", ()), self._limit_span]
                try:
                    result = framework.run_cycle(snapshot, _TracedBackend(backend, self.tracer), **kwargs)
                finally:
                    framework.plugin_span = None
                span.set_attribute("nodes", result.nodes)
                span.set_attribute("evicted", len(result.evictions))
                span.set_attribute("refused", len(result.failures))
                span.set_attribute("evictionsSkipped", len(result.skips))
                if result.skipped:
                    span.set_attribute("skipped", result.skipped)
                return result

        return traced

    def _limit_span(self, record: EvictionRecord) -> None:
        """An eviction a limit refused (it never reaches the backend): its EvictPod span, failed."""
        if record.result not in _LIMITS:
            return
        from opentelemetry.trace import Status, StatusCode

        attributes = _evict_attributes(
            record.namespace, record.name, record.node, record.profile, record.plugin, record.reason
        )
        with self.tracer.start_as_current_span(EVICT_SPAN, attributes=attributes) as span:
            span.set_attribute("result", record.result.value)
            span.add_event(FAILED_EVENT, {"node": record.node, "err": record.result.value})
            span.set_status(Status(StatusCode.ERROR, record.result.value))

    @contextlib.contextmanager
    def plugin_span(self, profile: str, plugin: str, operation: str) -> Iterator[None]:
        attributes = {"profile": profile, "plugin": plugin, "operation": operation}
        with self.tracer.start_as_current_span(plugin, attributes=attributes):
            yield


class _TracedBackend:
    """Wraps the cycle's eviction backend: one span per eviction request that reaches it."""

    def __init__(self, backend: EvictionBackend, tracer: Any) -> None:
        self._backend = backend
        self._tracer = tracer

    def evict(self, pod: Pod, request: EvictionRequest) -> EvictAnswer:
        from opentelemetry.trace import Status, StatusCode

        meta = pod.metadata
        attributes = _evict_attributes(
            meta.namespace, meta.name, pod.spec.node_name, request.profile, request.plugin, request.reason
        )
        with self._tracer.start_as_current_span(EVICT_SPAN, attributes=attributes) as span:
            failure = self._backend.evict(pod, request)
            if isinstance(failure, Surged):
                span.set_attribute("result", "success")
                span.set_attribute("method", "surge")
                return failure
            if isinstance(failure, InBackground | Skip):
                span.set_attribute("result", "background" if isinstance(failure, InBackground) else "skipped")
                return failure
            unknown = isinstance(failure, OutcomeUnknown)
            span.set_attribute("result", "success" if failure is None else "unknown" if unknown else "error")
            if failure is not None:
                why = failure.error if isinstance(failure, OutcomeUnknown) else failure
                span.add_event(FAILED_EVENT, {"node": pod.spec.node_name, "err": why})
                span.set_status(Status(StatusCode.ERROR, why))
            return failure

    def __getattr__(self, name: str) -> Any:  # e.g. the live backend's async path, dry_run
        return getattr(self._backend, name)


def _evict_attributes(
    namespace: str, name: str, node: str, profile: str, plugin: str, reason: str
) -> dict[str, str]:
    """An EvictPod span's attributes: upstream's keys first, then desched's."""
    return {
        "podName": name,
        "podNamespace": namespace,
        "reason": reason,
        "operation": EVICT_OPERATION,
        "node": node,
        "profile": profile,
        "plugin": plugin,
    }


def setup(options: TracingOptions) -> Tracing | None:
    """A provider exporting to ``options.endpoint``; None without an endpoint.

    A bad setup (CA file unreadable, endpoint malformed) is a UserError naming the flag, unless
    ``--otel-fallback-no-op-on-error``, which logs it and runs without tracing, as upstream.
    """
    if not options.endpoint:
        return None
    if not 0.0 <= options.sample_rate <= 1.0:
        raise UserError("--otel-sample-rate", f"must be between 0 and 1, got {options.sample_rate}")
    try:
        return Tracing(_provider(options))
    except UserError as e:
        if not options.fallback_no_op_on_error:
            raise
        log.error("tracing disabled (--otel-fallback-no-op-on-error): %s", e)
        return None


def _provider(options: TracingOptions) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    attributes: dict[str, Any] = {
        "service.name": options.service_name or "descheduler",
        "process.pid": os.getpid(),
        "process.executable.name": os.path.basename(sys.argv[0] or "desched"),
        "process.runtime.name": sys.implementation.name,
    }
    if options.service_namespace:
        attributes["service.namespace"] = options.service_namespace
    exporter = _exporter(options)
    provider = TracerProvider(
        resource=Resource.create(attributes),
        sampler=ParentBased(TraceIdRatioBased(options.sample_rate)),
    )
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=1000))
    log.info("tracing: exporting spans to %s", options.endpoint)
    return provider


def _read_ca(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise UserError("--otel-transport-ca-cert", f"cannot read {path}: {e.strerror or e}") from None
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise UserError("--otel-transport-ca-cert", f"{path} holds no PEM certificate")
    return data


def _exporter(options: TracingOptions) -> Any:
    endpoint = options.endpoint.strip()
    if endpoint.startswith(("http://", "https://")):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        if options.ca_cert:
            _read_ca(options.ca_cert)
        url = endpoint.rstrip("/")
        if not url.endswith("/v1/traces"):
            url += "/v1/traces"
        return HttpExporter(endpoint=url, certificate_file=options.ca_cert or None, timeout=10)
    if "/" in endpoint or ":" not in endpoint:
        raise UserError(
            "--otel-collector-endpoint",
            f"expected host:port (OTLP/gRPC) or an http(s):// URL (OTLP/HTTP), got {endpoint!r}",
        )
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    if options.ca_cert:
        import grpc

        credentials = grpc.ssl_channel_credentials(root_certificates=_read_ca(options.ca_cert))
        return GrpcExporter(endpoint=endpoint, credentials=credentials, timeout=10)
    return GrpcExporter(endpoint=endpoint, insecure=True, timeout=10)
