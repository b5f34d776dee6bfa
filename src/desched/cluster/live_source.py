"""The live source: an informer-style cache of the objects desched decides on.

For each kind: LIST (paginated) then WATCH from the list's resourceVersion with bookmarks; a
``410 Gone`` (or an ERROR event) re-lists; a dropped connection re-watches from the last seen
resourceVersion; API errors back off exponentially (0.5 s doubling to 30 s, like client-go's
reflector). With a :class:`~desched.kube.connect.ConnectionMonitor`, every good answer is
reported as progress (it bounds the start) and every failure is classified and logged at most
once per failure class per interval. An informer whose list or watch is failing, or that must
re-list after ``410 Gone``, is not :attr:`Informer.healthy`: a cycle does not decide on it.
Objects are decoded from raw bytes straight into the slim records (never the client library's
models), and the cache keeps only those. Each cycle takes a consistent snapshot of the cache
(:meth:`LiveCache.snapshot`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from kubernetes_asyncio import client

from desched.cluster.compact import CompactDecoder
from desched.cluster.snapshot import ClusterSnapshot
from desched.gcpause import gc_paused
from desched.k8s.objects import (
    Event,
    Namespace,
    Node,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
)
from desched.kube.client import RateLimiter, request, status_message

if TYPE_CHECKING:
    from desched.kube.connect import ConnectionMonitor

log = logging.getLogger(__name__)

PAGE_SIZE = 500
WATCH_TIMEOUT_SECONDS = 300
#: Bound of the tables a pod informer keeps to share what pods repeat (see cluster.compact).
SHARING_MAX_BYTES = 128 << 20


@dataclass(frozen=True)
class Resource:
    kind: str
    path: str
    record: type[msgspec.Struct]


RESOURCES: dict[str, Resource] = {
    "Node": Resource("Node", "/api/v1/nodes", Node),
    "Pod": Resource("Pod", "/api/v1/pods", Pod),
    "Namespace": Resource("Namespace", "/api/v1/namespaces", Namespace),
    "PodDisruptionBudget": Resource(
        "PodDisruptionBudget", "/apis/policy/v1/poddisruptionbudgets", PodDisruptionBudget
    ),
    "PriorityClass": Resource("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses", PriorityClass),
    "PersistentVolumeClaim": Resource(
        "PersistentVolumeClaim", "/api/v1/persistentvolumeclaims", PersistentVolumeClaim
    ),
    "Event": Resource("Event", "/api/v1/events", Event),
    "Service": Resource("Service", "/api/v1/services", Service),
    "ReplicationController": Resource(
        "ReplicationController", "/api/v1/replicationcontrollers", ReplicationController
    ),
    "ReplicaSet": Resource("ReplicaSet", "/apis/apps/v1/replicasets", ReplicaSet),
    "StatefulSet": Resource("StatefulSet", "/apis/apps/v1/statefulsets", StatefulSet),
}
#: The kinds kube-scheduler's default spread selector is made of (``LiveInputs.workloads``).
WORKLOAD_KINDS = ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")
DEFAULT_KINDS = ("Node", "Pod", "Namespace", "PodDisruptionBudget", "PriorityClass", "PersistentVolumeClaim")


class _ListMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""
    # "continue" is a keyword; rename to the wire name explicitly
    continue_: str = msgspec.field(default="", name="continue")


class _ListHead(msgspec.Struct):
    metadata: _ListMeta = msgspec.field(default_factory=_ListMeta)
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)


class _Meta(msgspec.Struct, rename="camel"):
    name: str = ""
    namespace: str = ""
    resource_version: str = ""


class _MetaOnly(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


class _WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _Status(msgspec.Struct):
    code: int = 0
    message: str = ""
    reason: str = ""


class GoneError(Exception):
    """The watch's resourceVersion is too old: re-list."""


ChangeCallback = Callable[[str, str, Any, Any], None]
"""(kind, event type, old object or None, new object or None)."""


class Informer:
    """List+watch of one kind into a dict keyed by ``namespace/name``."""

    def __init__(
        self,
        api: client.ApiClient,
        resource: Resource,
        *,
        limiter: RateLimiter | None = None,
        on_change: ChangeCallback | None = None,
        monitor: ConnectionMonitor | None = None,
        list_timeout: float = 120,
    ) -> None:
        self.api = api
        self.resource = resource
        self.limiter = limiter
        self.on_change = on_change
        self.monitor = monitor
        self.list_timeout = list_timeout
        self.objects: dict[str, Any] = {}
        self.resource_version = ""
        self.synced = asyncio.Event()
        self.relists = 0
        #: the cache reflects the server: listed, and the watch is connected (or being re-opened
        #: after a clean end); False from a failure or a 410 until the next good list/watch
        self.healthy = False
        self.failing_since: float | None = None
        self.last_failure = ""
        # pods share the sub-structures they repeat (containers, affinity, labels, ...)
        self._decode: Callable[[bytes], Any] = (
            CompactDecoder(max_bytes=SHARING_MAX_BYTES).decode_pod
            if resource.record is Pod
            else msgspec.json.Decoder(resource.record).decode
        )

    async def _get(self, params: list[tuple[str, str]], *, timeout: float | None) -> Any:
        if self.limiter is not None:
            await self.limiter.acquire()
        return await self.api.call_api(
            self.resource.path,
            "GET",
            query_params=params,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )

    async def list(self) -> None:
        objects: dict[str, Any] = {}
        cont = ""
        rv = ""
        while True:
            params = [("limit", str(PAGE_SIZE))]
            if cont:
                params.append(("continue", cont))
            if self.limiter is not None:
                await self.limiter.acquire()
            data = await request(
                self.api, "GET", self.resource.path, params=params, timeout=self.list_timeout
            )
            if self.monitor is not None:
                self.monitor.progress()
            with gc_paused():
                head = msgspec.json.decode(data, type=_ListHead)
                for raw in head.items:
                    obj = self._decode(raw)
                    objects[_key(obj)] = obj
            rv = head.metadata.resource_version
            cont = head.metadata.continue_
            if not cont:
                break
        old = self.objects
        self.objects = objects
        self.resource_version = rv
        self._healthy()
        if self.on_change is not None and old is not objects:
            for key, obj in objects.items():
                prev = old.get(key)
                if prev is None:
                    self.on_change(self.resource.kind, "ADDED", None, obj)
                elif prev != obj:
                    self.on_change(self.resource.kind, "MODIFIED", prev, obj)
            for key, prev in old.items():
                if key not in objects:
                    self.on_change(self.resource.kind, "DELETED", prev, None)
        self.synced.set()

    async def watch_once(self) -> None:
        params = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(WATCH_TIMEOUT_SECONDS)),
        ]
        resp = await self._get(params, timeout=WATCH_TIMEOUT_SECONDS + 30)
        try:
            if resp.status == 410:
                raise GoneError()
            if resp.status >= 400:
                body = await resp.read()
                raise client.ApiException(status=resp.status, reason=status_message(body))
            self._healthy()
            if self.monitor is not None:
                self.monitor.progress()
            buf = b""
            async for chunk in resp.content.iter_any():
                buf += chunk
                while True:
                    nl = buf.find(b"\n")
                    if nl < 0:
                        break
                    line, buf = buf[:nl], buf[nl + 1 :]
                    if line.strip():
                        self._apply(line)
        finally:
            resp.release()

    def _healthy(self) -> None:
        self.healthy = True
        self.failing_since = None
        self.last_failure = ""

    def _failed(self, why: str) -> None:
        self.healthy = False
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        self.last_failure = why

    def _apply(self, line: bytes) -> None:
        event = msgspec.json.decode(line, type=_WatchEvent)
        if event.type == "ERROR":
            status = msgspec.json.decode(event.object, type=_Status)
            if status.code == 410:
                raise GoneError()
            raise client.ApiException(status=status.code, reason=status.message)
        if event.type == "BOOKMARK":
            self.resource_version = msgspec.json.decode(
                event.object, type=_MetaOnly
            ).metadata.resource_version
            return
        obj: Any = self._decode(event.object)
        key = _key(obj)
        prev = self.objects.get(key)
        if event.type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        self.resource_version = obj.metadata.resource_version or self.resource_version
        if self.on_change is not None:
            self.on_change(self.resource.kind, event.type, prev, None if event.type == "DELETED" else obj)

    async def run(self, stop: asyncio.Event) -> None:
        """List, then watch until ``stop``; recover from every failure with backoff."""
        backoff = 0.5
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    await self.list()
                    need_list = False
                    if self.relists:
                        log.info("re-listed %s (%d objects)", self.resource.kind, len(self.objects))
                    self.relists += 1
                await self.watch_once()
                backoff = 0.5
            except GoneError:
                log.info("%s watch expired (410 Gone): re-listing", self.resource.kind)
                self._failed("watch expired (410 Gone), re-listing")
                need_list = True
            except asyncio.CancelledError:
                raise
            except Exception as e:
                what = f"{self.resource.kind} {'list' if need_list else 'watch'}"
                if self.monitor is not None:
                    self._failed(self.monitor.failure(what, e).message)
                else:
                    self._failed(f"{type(e).__name__}: {e}")
                    log.warning("%s failed: %s; retrying in %.1fs", what, e, backoff)
                # back off, but retry at once when another request got an answer: the server is back
                # (after an apiserver restart, every informer recovers with the first one)
                waiters = [asyncio.ensure_future(stop.wait())]
                if self.monitor is not None:
                    waiters.append(asyncio.ensure_future(self.monitor.answered().wait()))
                try:
                    await asyncio.wait(
                        waiters,
                        timeout=backoff * (1 + random.random() / 4),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    for w in waiters:
                        w.cancel()
                backoff = min(backoff * 2, 30.0)


def _key(obj: Any) -> str:
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


class LiveCache:
    """The informers of every kind desched needs, and consistent snapshots of them."""

    def __init__(
        self,
        api: client.ApiClient,
        kinds: tuple[str, ...] = DEFAULT_KINDS,
        *,
        limiter: RateLimiter | None = None,
        on_change: ChangeCallback | None = None,
        monitor: ConnectionMonitor | None = None,
    ) -> None:
        self.informers = {
            k: Informer(api, RESOURCES[k], limiter=limiter, on_change=on_change, monitor=monitor)
            for k in kinds
        }
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()

    def start(self) -> None:
        for inf in self.informers.values():
            self._tasks.append(asyncio.create_task(inf.run(self._stop), name=f"informer-{inf.resource.kind}"))

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(asyncio.gather(*(i.synced.wait() for i in self.informers.values())), timeout)
        gc.freeze()  # the initial cache is long-lived: keep it out of every future collection

    def unsynced(self) -> list[str]:
        """Why the cache may not reflect the server now: one entry per cause, naming its kinds."""
        now = time.monotonic()
        causes: dict[str, tuple[list[str], float]] = {}
        for inf in self.informers.values():
            if not inf.healthy:
                cause = inf.last_failure or "not listed yet"
                kinds, since = causes.get(cause, ([], now))
                kinds.append(inf.resource.kind)
                causes[cause] = (kinds, min(since, inf.failing_since or now))
        return [
            f"{', '.join(kinds)}: {cause} (for {now - since:.0f}s)"
            for cause, (kinds, since) in causes.items()
        ]

    async def stop(self) -> None:
        self._stop.set()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def snapshot(self) -> ClusterSnapshot:
        """A consistent view: taken between two event-loop steps, so no watch event lands half-way."""

        def values(kind: str) -> list[Any]:
            inf = self.informers.get(kind)
            return list(inf.objects.values()) if inf is not None else []

        return ClusterSnapshot(
            nodes=values("Node"),
            pods=values("Pod"),
            namespaces=values("Namespace"),
            pdbs=values("PodDisruptionBudget"),
            priority_classes=values("PriorityClass"),
            pvcs=values("PersistentVolumeClaim"),
            events=values("Event"),
            workloads=[w for kind in WORKLOAD_KINDS for w in values(kind)],
        )
