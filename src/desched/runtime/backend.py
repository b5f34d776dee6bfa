"""Evicting for real: the ``policy/v1`` Eviction subresource, and events.k8s.io Events.

The decision code runs synchronously in a worker thread; each eviction is handed to the event loop
that owns the API client and waited for. A refusal (PDB 429, 404, 409, 5xx, timeout) is returned
as that pod's failure, and the plugin goes on with the next pod. Before every request the backend
asks ``may_evict`` (leader lease still held, not shutting down): a replica that lost its lease
stops evicting at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import time
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from desched.framework.evictor import EvictionRecord, EvictionRequest
from desched.framework.types import EvictResult
from desched.k8s.objects import Pod
from desched.runtime import kube
from desched.runtime.kube import ApiError, RateLimiter

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "sigs.k8s.io.descheduler"
REQUESTED_BY = "sigs.k8s.io/descheduler"
EVICTION_TIMEOUT_SECONDS = 60.0


class ApiEvictionBackend:
    def __init__(
        self,
        api: client.ApiClient,
        loop: asyncio.AbstractEventLoop,
        *,
        dry_run: bool = False,
        may_evict: Callable[[], bool] = lambda: True,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.api = api
        self.loop = loop
        self.dry_run = dry_run
        self.may_evict = may_evict
        self.limiter = limiter

    def evict(self, pod: Pod, request: EvictionRequest) -> str | None:
        if not self.may_evict():
            return "not evicting: this replica is not the leader or is shutting down"
        if self.dry_run:
            return None
        future = asyncio.run_coroutine_threadsafe(self.evict_async(pod, request), self.loop)
        try:
            return future.result(EVICTION_TIMEOUT_SECONDS)
        except FutureTimeout:
            future.cancel()
            return f"timed out after {EVICTION_TIMEOUT_SECONDS:.0f}s"
        except Exception as e:  # whatever went wrong, it concerns this pod only
            log.exception("eviction of %s/%s failed", pod.metadata.namespace, pod.metadata.name)
            return f"request failed: {type(e).__name__}: {e}"

    async def evict_async(self, pod: Pod, request: EvictionRequest) -> str | None:
        ns, name = pod.metadata.namespace, pod.metadata.name
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {
                "name": name,
                "namespace": ns,
                "annotations": {
                    "reason": f"triggered by {request.profile}/{request.plugin}: {request.reason}",
                    "requested-by": REQUESTED_BY,
                },
            },
        }
        if request.grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": request.grace_period_seconds}
        if self.limiter is not None:
            await self.limiter.acquire()
        try:
            await kube.request(
                self.api,
                "POST",
                f"/api/v1/namespaces/{ns}/pods/{name}/eviction",
                body=body,
                timeout=EVICTION_TIMEOUT_SECONDS - 5,
            )
        except ApiError as e:
            return str(e)
        except (TimeoutError, OSError, client.ApiException) as e:
            return f"request failed: {e}"
        return None


class EventRecorder:
    """events.k8s.io/v1 Events on evicted pods, as upstream: reason = plugin, action Descheduled."""

    def __init__(self, api: client.ApiClient, loop: asyncio.AbstractEventLoop, *, failures: bool) -> None:
        self.api = api
        self.loop = loop
        self.failures = failures
        self.instance = socket.gethostname()
        self._tasks: set[concurrent.futures.Future[None]] = set()

    def observe(self, record: EvictionRecord) -> None:
        if record.result is EvictResult.EVICTED:
            self._emit(
                record, "Normal", record.plugin, f"pod eviction from {record.node} node by {REQUESTED_BY}"
            )
        elif self.failures and record.result not in (EvictResult.FILTERED, EvictResult.ALREADY_EVICTED):
            why = record.error or record.result.value
            self._emit(
                record,
                "Warning",
                "EvictionFailed",
                f"pod eviction from {record.node} node by {REQUESTED_BY} failed: {why}",
            )

    def _emit(self, record: EvictionRecord, type_: str, reason: str, note: str) -> None:
        now = datetime.now(UTC)
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # named as client-go's recorder names events: <object>.<unix nanos in hex>
            "metadata": {"name": f"{record.name}.{time.time_ns():x}", "namespace": record.namespace},
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": f"{REPORTING_CONTROLLER}-{self.instance}"[:128],
            "action": "Descheduled",
            "reason": reason,
            "note": note[:1024],
            "type": type_,
            "regarding": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": record.namespace,
                "name": record.name,
            },
        }
        future = asyncio.run_coroutine_threadsafe(self._post(record.namespace, body), self.loop)
        self._tasks.add(future)
        future.add_done_callback(self._tasks.discard)

    async def _post(self, namespace: str, body: dict[str, Any]) -> None:
        try:
            await kube.request(
                self.api, "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=body
            )
        except Exception as e:  # events are best effort, never a reason to stop evicting
            log.warning(
                "could not record event %s for %s/%s: %s",
                body["reason"],
                namespace,
                body["regarding"]["name"],
                e,
            )
