"""Actual usage of nodes and pods in live runs: metrics.k8s.io and Prometheus.

A policy's ``metricsProviders`` name where actual usage comes from; they are handed to the
framework (``Framework.use_metrics``) and a plugin whose args ask for one reaches it through its
handle (``handle.metrics``), by the protocols of :mod:`desched.framework.metrics`. Those are
synchronous and called from the cycle's worker thread, so the data is fetched on the event loop
(which owns the connections) before the cycle:

- :class:`NodeMetricsCollector` (``source: KubernetesMetrics``), as upstream's MetricsCollector:
  polls NodeMetrics every 5 s and smooths each node's cpu (millicores) and memory (bytes) with an
  exponentially weighted moving average, ``round(0.9 * previous + 0.1 * sample)`` (the first sample
  is taken as is; a node missing from a poll keeps its value). Each cycle reads the averages as
  they stand when it starts. A pod's usage is read when the plugin is about to evict it, from its
  PodMetrics, not smoothed (the worker thread waits for the event loop to fetch it). Unlike
  upstream, stale averages are not used: when no poll has succeeded for
  :data:`STALE_AFTER_SECONDS` (metrics.k8s.io not served, metrics-server down), the plugin reports
  an error for the cycle and evicts nothing.
- :class:`PrometheusQueries` (``source: Prometheus``): one instant query per cycle and per distinct
  query at ``metricsProviders[].prometheus.url``, with a bearer token read at every cycle from the
  Secret named by ``authToken.secretReference`` (key ``prometheusAuthToken``), or, without one,
  from the in-cluster ServiceAccount token file. A failed query (Prometheus down, a bad answer, a
  missing Secret) is that cycle's error for the plugins asking it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import ssl
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
from kubernetes_asyncio import client

from desched.api.policy import MetricsProvider, Policy, PrometheusProvider, PrometheusTLSConfig
from desched.errors import PolicyError
from desched.framework.framework import Framework
from desched.framework.metrics import (
    KUBERNETES_METRICS,
    PROMETHEUS,
    MetricsProviders,
    PrometheusSample,
    UsageError,
)
from desched.k8s import resources as k8s_resources
from desched.k8s.quantity import QuantityError
from desched.k8s.resources import CPU, MEMORY, Resources
from desched.kube import client as kube
from desched.kube.client import ApiError, RateLimiter

log = logging.getLogger(__name__)

_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}


def _private_file(path: Path, text: str) -> str:
    path.touch(mode=0o600)
    path.write_text(text, encoding="utf-8")
    return str(path)


__all__ = [
    "BETA",
    "KUBERNETES_METRICS",
    "METRICS_API",
    "POLL_INTERVAL_SECONDS",
    "PROMETHEUS",
    "PROMETHEUS_TOKEN_KEY",
    "NodeMetricsCollector",
    "PrometheusQueries",
    "UsageMetrics",
    "weighted_average",
]

METRICS_API = "/apis/metrics.k8s.io/v1beta1"
#: upstream's MetricsCollector: a poll every 5 s, smoothing factor 0.9.
POLL_INTERVAL_SECONDS = 5.0
BETA = 0.9
#: No successful poll for this long: the node metrics are unavailable (3 missed polls).
STALE_AFTER_SECONDS = 3 * POLL_INTERVAL_SECONDS
#: How long ``desched run`` waits at startup for the first successful poll (upstream: 1 minute).
SYNC_TIMEOUT_SECONDS = 60.0
#: A node not seen in any poll for this long is forgotten.
FORGET_AFTER_SECONDS = 600.0
REQUEST_TIMEOUT_SECONDS = 10.0
PROMETHEUS_TIMEOUT_SECONDS = 30.0
#: The Secret key holding the Prometheus bearer token (upstream's ``prometheusAuthToken``).
PROMETHEUS_TOKEN_KEY = "prometheusAuthToken"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def weighted_average(previous: int, sample: int) -> int:
    """upstream ``weightedAverage``: ``math.Round(beta*previous + (1-beta)*sample)`` (half away
    from zero)."""
    value = BETA * float(previous) + (1 - BETA) * float(sample)
    whole = math.trunc(value)
    if abs(value - whole) >= 0.5:
        whole += 1 if value > 0 else -1
    return int(whole)


def _usage(raw: Mapping[str, Any] | None, what: str) -> Resources:
    try:
        return k8s_resources.resource_list(dict(raw) if raw else None)
    except QuantityError as e:
        raise UsageError(f"{what}: {e}") from None


def _describe(e: BaseException) -> str:
    if isinstance(e, ApiError):
        message = e.message.strip()
        return message if message.startswith(str(e.status)) else f"{e.status} {message}".strip()
    if isinstance(e, TimeoutError):
        return "request timed out"
    return f"{type(e).__name__}: {e}"


# ------------------------------------------------------------------------------ metrics.k8s.io


class NodeMetricsCollector:
    """metrics.k8s.io for the cycle: smoothed node usage, pod usage on demand.

    Implements :class:`desched.framework.metrics.NodeMetricsProvider` for the worker thread; the
    polling (:meth:`run`) and :meth:`begin_cycle` run on the event loop.
    """

    def __init__(
        self,
        api: client.ApiClient,
        loop: asyncio.AbstractEventLoop,
        *,
        limiter: RateLimiter | None = None,
        interval: float = POLL_INTERVAL_SECONDS,
        stale_after: float = STALE_AFTER_SECONDS,
        timeout: float = REQUEST_TIMEOUT_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.loop = loop
        self.limiter = limiter
        self.interval = interval
        self.stale_after = stale_after
        self.timeout = timeout
        self.clock = clock
        #: Smoothed usage (cpu, memory) by node name, and when each node was last seen.
        self.averages: dict[str, dict[str, int]] = {}
        self._seen: dict[str, float] = {}
        self.last_success: float | None = None
        self.last_error: str | None = None
        self.polls = 0
        #: The last poll was answered 404: no APIService serves metrics.k8s.io (no point waiting).
        self.not_served = False
        # this cycle's picture
        self._cycle_nodes: dict[str, Resources] = {}
        self._cycle_error: str | None = "no cycle has started"
        self._pods: dict[tuple[str, str], Resources | None] = {}

    # -- event loop side

    async def collect(self) -> bool:
        """One poll: list NodeMetrics and fold each node's sample into its average."""
        self.polls += 1
        try:
            if self.limiter is not None:
                await self.limiter.acquire()
            body = await kube.request(self.api, "GET", f"{METRICS_API}/nodes", timeout=self.timeout)
            items = json.loads(body).get("items") or []
            samples = {}
            for item in items:
                name = str((item.get("metadata") or {}).get("name", ""))
                samples[name] = _usage(item.get("usage"), f"NodeMetrics {name}")
        except Exception as e:  # every failure is the same to the cycle: no fresh metrics
            self.last_error = _describe(e)
            if isinstance(e, ApiError) and e.status == 404:
                self.not_served = True
                self.last_error = f"metrics.k8s.io is not served ({self.last_error})"
            log.warning("collecting node metrics failed: %s", self.last_error)
            return False
        now = self.clock()
        for name, usage in samples.items():
            cpu, memory = usage.get(CPU, 0), usage.get(MEMORY, 0)
            previous = self.averages.get(name)
            if previous is None:
                self.averages[name] = {CPU: cpu, MEMORY: memory}
            else:
                previous[CPU] = weighted_average(previous[CPU], cpu)
                previous[MEMORY] = weighted_average(previous[MEMORY], memory)
            self._seen[name] = now
        for name in [n for n, seen in self._seen.items() if now - seen > FORGET_AFTER_SECONDS]:
            del self._seen[name]
            self.averages.pop(name, None)
        self.last_success = now
        self.last_error = None
        self.not_served = False
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Poll every ``interval`` seconds (from the start of one poll to the next) until ``stop``."""
        while not stop.is_set():
            started = self.clock()
            await self.collect()
            delay = max(0.0, self.interval - (self.clock() - started))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)

    async def wait_synced(self, timeout: float = SYNC_TIMEOUT_SECONDS) -> bool:
        """Wait for the first successful poll (at most ``timeout``, or until metrics.k8s.io turns
        out not to be served); False if there was none."""
        deadline = self.clock() + timeout
        while self.last_success is None and not self.not_served and self.clock() < deadline:
            await asyncio.sleep(0.1)
        return self.last_success is not None

    def begin_cycle(self) -> None:
        """Freeze the averages for the cycle about to run (and forget the last cycle's pods)."""
        self._pods = {}
        now = self.clock()
        if self.last_success is None:
            self._cycle_error = f"no node metrics collected yet ({self.last_error or 'no poll yet'})"
            self._cycle_nodes = {}
        elif now - self.last_success > self.stale_after:
            self._cycle_error = (
                f"node metrics are stale: no successful poll for {now - self.last_success:.0f}s "
                f"({self.last_error or 'no answer'})"
            )
            self._cycle_nodes = {}
        else:
            self._cycle_error = None
            self._cycle_nodes = {name: dict(usage) for name, usage in self.averages.items()}

    async def fetch_pod(self, namespace: str, name: str) -> Resources | None:
        """A pod's usage summed over its containers; None without PodMetrics (or on any error)."""
        path = f"{METRICS_API}/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
        try:
            if self.limiter is not None:
                await self.limiter.acquire()
            body = await kube.request(self.api, "GET", path, timeout=self.timeout)
            obj = json.loads(body)
            return k8s_resources.sum_resources(
                _usage(c.get("usage"), f"PodMetrics {namespace}/{name}") for c in obj.get("containers") or ()
            )
        except Exception as e:
            log.info("no pod metrics for %s/%s: %s", namespace, name, _describe(e))
            return None

    # -- worker thread side (NodeMetricsProvider)

    def node_usage(self) -> Mapping[str, Resources]:
        if self._cycle_error is not None:
            raise UsageError(self._cycle_error)
        return self._cycle_nodes

    def pod_usage(self, namespace: str, name: str) -> Resources | None:
        key = (namespace, name)
        if key in self._pods:
            return self._pods[key]
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            # called on the event loop itself: waiting for it would deadlock
            log.warning("pod metrics for %s/%s cannot be fetched from the event loop", namespace, name)
            return None
        future = asyncio.run_coroutine_threadsafe(self.fetch_pod(namespace, name), self.loop)
        try:
            used = future.result(self.timeout + 5)
        except FutureTimeout:
            future.cancel()
            used = None
        self._pods[key] = used
        return used


# ---------------------------------------------------------------------------------- Prometheus


class PrometheusQueries:
    """Prometheus for the cycle: each query run once before it, answered from memory during it.

    Implements :class:`desched.framework.metrics.PrometheusClient` for the worker thread.
    """

    def __init__(
        self,
        api: client.ApiClient,
        provider: PrometheusProvider,
        queries: Iterable[str],
        *,
        timeout: float = PROMETHEUS_TIMEOUT_SECONDS,
        service_account_dir: Path = SERVICE_ACCOUNT_DIR,
        ssl_context: ssl.SSLContext | None = None,
        field_path: str = "metricsProviders[0].prometheus",
    ) -> None:
        self.api = api
        self.url = provider.url.rstrip("/")
        self.field_path = field_path
        ref = provider.auth_token.secret_reference if provider.auth_token is not None else None
        self.secret = (ref.namespace, ref.name) if ref is not None else None
        self.queries = tuple(dict.fromkeys(queries))
        self.timeout = timeout
        self.service_account_dir = service_account_dir
        tls = provider.tls_config
        self._server_name = tls.server_name if tls is not None and tls.server_name else None
        self._ssl = ssl_context if ssl_context is not None else self._ssl_context(tls)
        self._session: aiohttp.ClientSession | None = None
        self._token: str | None = None
        self._results: dict[str, Sequence[PrometheusSample] | str] = {}

    def _ssl_context(self, tls: PrometheusTLSConfig | None) -> ssl.SSLContext:
        """How the server is checked: by default against the system's CAs and, in a pod, the
        cluster's CA (upstream trusts the pod's CA file); ``tlsConfig`` may name the CAs to trust
        instead (``ca`` / ``ca_file``), a client certificate (``cert``/``cert_file`` with
        ``key``/``key_file``), TLS versions, or turn verification off. A file or PEM text that
        cannot be loaded is the user's error, named by its field (raised when ``desched run``
        starts)."""
        if tls is not None and tls.insecure_skip_verify:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            log.warning(
                "prometheus at %s: TLS certificate verification is off (insecure_skip_verify)", self.url
            )
        elif tls is not None and (tls.ca or tls.ca_file):
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, trusts nothing yet
            if tls.ca_file:
                ca_file = tls.ca_file
                self._load(lambda: context.load_verify_locations(cafile=ca_file), "ca_file", ca_file)
            else:
                ca = tls.ca or ""
                self._load(lambda: context.load_verify_locations(cadata=ca), "ca", "(PEM text)")
        else:
            context = ssl.create_default_context()
            sa_ca = self.service_account_dir / "ca.crt"
            if sa_ca.is_file():
                try:
                    context.load_verify_locations(cafile=str(sa_ca))
                except (OSError, ssl.SSLError) as e:
                    log.warning("cannot load %s: %s", sa_ca, e)
        if tls is not None and (tls.cert or tls.cert_file):
            self._load_client_certificate(context, tls)
        if tls is not None and tls.min_version:
            context.minimum_version = _TLS_VERSIONS[tls.min_version]
        if tls is not None and tls.max_version:
            context.maximum_version = _TLS_VERSIONS[tls.max_version]
        return context

    def _load_client_certificate(self, context: ssl.SSLContext, tls: PrometheusTLSConfig) -> None:
        # Python's ssl loads a certificate chain only from files: PEM text given inline (cert / key)
        # is written to a private temporary directory for the load and removed right after.
        field = "cert_file" if tls.cert_file else "cert"
        shown = tls.cert_file if tls.cert_file else "(PEM text)"
        with tempfile.TemporaryDirectory(prefix="desched-tls-") as tmp:
            cert = tls.cert_file or _private_file(Path(tmp) / "cert.pem", tls.cert or "")
            key = tls.key_file or _private_file(Path(tmp) / "key.pem", tls.key or "")
            self._load(lambda: context.load_cert_chain(cert, key), field, shown)

    def _load(self, load: Callable[[], None], field: str, shown: str) -> None:
        try:
            load()
        except (OSError, ssl.SSLError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e) or type(e).__name__
            value = shown if shown.startswith("(") else repr(shown)
            raise PolicyError(f"{self.field_path}.tlsConfig.{field}", f"cannot load {value}: {why}") from None

    async def _read_token(self) -> str | None:
        """The bearer token for this cycle (raises UsageError if the Secret cannot give one)."""
        if self.secret is None:
            path = self.service_account_dir / "token"
            try:
                return path.read_text(encoding="utf-8").strip() or None
            except OSError:
                return None  # not in a cluster: no token
        namespace, name = self.secret
        try:
            body = await kube.request(self.api, "GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
        except Exception as e:
            raise UsageError(f"unable to get {namespace}/{name} secret: {_describe(e)}") from None
        data = json.loads(body).get("data") or {}
        encoded = data.get(PROMETHEUS_TOKEN_KEY)
        token = base64.b64decode(encoded).decode("utf-8", errors="replace") if encoded else ""
        if not token:
            raise UsageError(
                f"prometheus authentication token secret missing {PROMETHEUS_TOKEN_KEY!r} data or empty"
            )
        return token

    async def begin_cycle(self) -> None:
        """Run every query once (the answers or errors serve the cycle)."""
        self._results = {}
        try:
            token = await self._read_token()
        except UsageError as e:
            self._results = dict.fromkeys(self.queries, str(e))
            return
        if token != self._token:
            if self._token is not None or token is not None:
                log.info("prometheus authentication token changed: reconnecting")
            self._token = token
            await self._close_session()
        for query in self.queries:
            try:
                self._results[query] = await self._query(query)
            except Exception as e:
                why = str(e) if isinstance(e, UsageError) else _describe(e)
                self._results[query] = f"unable to capture prometheus metrics: {why}"
                log.warning("prometheus query %r failed: %s", query, why)

    async def _query(self, query: str) -> list[PrometheusSample]:
        if self._session is None:
            headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
            self._session = aiohttp.ClientSession(
                headers=headers, timeout=aiohttp.ClientTimeout(total=self.timeout)
            )
        async with self._session.get(
            f"{self.url}/api/v1/query",
            params={"query": query},
            ssl=self._ssl,
            server_hostname=self._server_name,
        ) as resp:
            text = await resp.text()
            try:
                doc = json.loads(text)
            except ValueError:
                doc = None
            if resp.status != 200 or not isinstance(doc, dict) or doc.get("status") != "success":
                error = doc.get("error") if isinstance(doc, dict) else None
                raise UsageError(f"{resp.status} {error or text[:200]}".strip())
        data = doc.get("data") or {}
        if data.get("resultType") != "vector":
            raise UsageError(f"expected the query to return a vector, got {data.get('resultType')!r}")
        samples = []
        for item in data.get("result") or ():
            value = item.get("value") or (0, "NaN")
            samples.append(PrometheusSample(dict(item.get("metric") or {}), float(value[1])))
        return samples

    async def _close_session(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def close(self) -> None:
        await self._close_session()

    # -- worker thread side (PrometheusClient)

    def query(self, query: str) -> Sequence[PrometheusSample]:
        result = self._results.get(query)
        if result is None:
            raise UsageError(f"unable to capture prometheus metrics: query {query!r} was not run")
        if isinstance(result, str):
            raise UsageError(result)
        return result


# --------------------------------------------------------------------------------- the wiring


def configured_sources(policy: Policy) -> dict[str, MetricsProvider | None]:
    """The metrics sources the policy configures (deprecated ``metricsCollector.enabled`` means
    KubernetesMetrics, as upstream)."""
    sources: dict[str, MetricsProvider | None] = {p.source: p for p in policy.metrics_providers}
    wire = policy.wire
    if wire is not None and wire.metrics_collector is not None and wire.metrics_collector.enabled:
        sources.setdefault(KUBERNETES_METRICS, None)
    return sources


class UsageMetrics:
    """The live metrics providers a policy configures, attached to its plugins."""

    def __init__(
        self,
        node_metrics: NodeMetricsCollector | None = None,
        prometheus: PrometheusQueries | None = None,
    ) -> None:
        self.node_metrics = node_metrics
        self.prometheus = prometheus
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def for_policy(
        cls,
        policy: Policy,
        framework: Framework,
        api: client.ApiClient,
        loop: asyncio.AbstractEventLoop,
        *,
        limiter: RateLimiter | None = None,
    ) -> UsageMetrics | None:
        """The providers of the policy's ``metricsProviders`` (None if it configures none), handed
        to the framework (plugins reach them through ``handle.metrics``)."""
        sources = configured_sources(policy)
        if not sources:
            return None
        node_metrics = None
        if KUBERNETES_METRICS in sources:
            node_metrics = NodeMetricsCollector(api, loop, limiter=limiter)
        prometheus = None
        provider = sources.get(PROMETHEUS)
        if provider is not None and provider.prometheus is not None:
            index = next(i for i, p in enumerate(policy.metrics_providers) if p.source == PROMETHEUS)
            prometheus = PrometheusQueries(
                api,
                provider.prometheus,
                framework.live_inputs().prometheus_queries,
                field_path=f"metricsProviders[{index}].prometheus",
            )
        framework.use_metrics(MetricsProviders(node_metrics, prometheus))
        return cls(node_metrics, prometheus)

    async def start(self, stop: asyncio.Event, sync_timeout: float = SYNC_TIMEOUT_SECONDS) -> None:
        """Start polling node metrics and wait for the first answer (a warning if none comes)."""
        collector = self.node_metrics
        if collector is None:
            return
        self._task = asyncio.create_task(collector.run(stop))
        if not await collector.wait_synced(sync_timeout):
            log.warning(
                "no node metrics from metrics.k8s.io%s (%s): LowNodeUtilization with source "
                "KubernetesMetrics reports an error and evicts nothing until they come",
                "" if collector.not_served else f" after {sync_timeout:.0f}s",
                collector.last_error,
            )

    async def begin_cycle(self) -> None:
        """Fetch what the coming cycle reads (on the event loop, before the worker thread starts)."""
        if self.node_metrics is not None:
            self.node_metrics.begin_cycle()
        if self.prometheus is not None:
            await self.prometheus.begin_cycle()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.prometheus is not None:
            await self.prometheus.close()
