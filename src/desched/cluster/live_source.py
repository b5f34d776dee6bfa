"""The live source: an informer-style cache of the objects desched decides on.

For each kind, as client-go's reflector: a *watch-list* first (one WATCH with
``sendInitialEvents=true``, ``resourceVersionMatch=NotOlderThan`` and bookmarks: the server streams
every object as an ADDED event, then a BOOKMARK annotated ``k8s.io/initial-events-end``; the objects
gathered up to it replace the cache at once, and the same stream goes on as the watch). Where the
server does not offer it (it refuses the parameters, 400/422, or never ends the initial events: an
older or WatchList-disabled apiserver, a proxy that stalls streams) the informer falls back, for
the rest of the process, to LIST (paginated) then WATCH from the list's resourceVersion; a stream
that fails before the bookmark (an ERROR event, a cut) falls back to a LIST for that attempt
("progress over deadlock", as client-go); an error answer or no answer is a failure like a LIST's
(backoff, reported by the monitor). ``DESCHED_WATCH_LIST=false`` in the environment makes every
informer LIST+WATCH. Streaming spares the server a paginated LIST of every object and this process
a whole page in memory, and it is one request (the client-side rate limit applies per page to a
LIST). A ``410 Gone`` (or an ERROR event) on the watch re-lists: at once the first time, and
after a wait when it comes again within ``GONE_WINDOW`` of the last one (0.8 s doubling to 4 s; client-go's
reflector waits up to 30 s before every re-list), so a watch that keeps expiring cannot make the
informer re-list every object in a loop; a dropped connection re-watches from the last seen
resourceVersion (at once when the watch had been open a second, so the cache stays in sync);
failures back off exponentially from 0.5 s, doubling to 4 s
(:data:`RECONNECT_MAX_BACKOFF`) while the server may be down or coming back (no answer, 5xx, 429)
and to 30 s (client-go's reflector's cap) only for answers that retrying soon cannot change (401,
403, 404, ...): after an outage longer than half a minute, client-go's 30 s would keep every
informer asleep for up to half a minute more (nothing else asks the server meanwhile, so no other
answer cuts the wait short). A ``410 Gone`` right after a failed list or watch (an apiserver
restart: its new watch cache does not know the old resourceVersions) re-lists at once, whatever
410s came before. With a :class:`~desched.kube.connect.ConnectionMonitor`, every good answer is
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
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from kubernetes_asyncio import client

from desched.cluster.compact import CompactDecoder
from desched.cluster.snapshot import ClusterSnapshot, RequestsMemo
from desched.gcpause import gc_paused
from desched.k8s.objects import (
    Deployment,
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
from desched.kube.client import ApiError, RateLimiter, request, status_message

if TYPE_CHECKING:
    from desched.kube.connect import ConnectionMonitor

log = logging.getLogger(__name__)

PAGE_SIZE = 500
WATCH_TIMEOUT_SECONDS = 300
#: The annotation of the bookmark that ends a watch-list's initial events (metav1.InitialEventsAnnotationKey).
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
#: A watch-list silent this long before its initial-events-end bookmark is given up for a LIST: the
#: server (or a proxy) does not stream the initial events. The apiserver starts at once; a
#: consistent read waits for its watch cache, at most ~3 s.
INITIAL_EVENTS_SILENCE_SECONDS = 10.0
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
    # (``desched snapshot --workloads`` only: simulate's prediction of evictionPolicy.surge)
    "Deployment": Resource("Deployment", "/apis/apps/v1/deployments", Deployment),
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
    annotations: dict[str, str] = msgspec.field(default_factory=dict)


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


class WatchListUnsupported(Exception):
    """The server does not stream initial events: use LIST+WATCH from now on."""


class _StreamBroke(Exception):
    """A watch-list's stream failed before its initial-events-end bookmark: LIST this once."""


ChangeCallback = Callable[[str, str, Any, Any], None]
"""(kind, event type, old object or None, new object or None)."""
ResumeCallback = Callable[[str, str], None]
"""(kind, how): the cache of ``kind`` resumed after a gap ("re-listed", "watch re-opened")."""


#: A ``410 Gone`` within this many seconds of the last one waits before re-listing, starting at
#: ``GONE_BACKOFF`` seconds and doubling (client-go's reflector: 800 ms doubling to 30 s, reset
#: after two minutes).
GONE_WINDOW = 120.0
GONE_BACKOFF = 0.8
#: The longest of those waits. client-go's reflector waits up to 30 s; desched decides nothing
#: while a kind waits to re-list (the cache is not in sync), and its client-side rate limit
#: (``--client-connection-qps``) already paces the pages of the re-lists, so this wait is bounded
#: as the reconnect wait is: a watch fault that repeats (issue 30's mixed faults) kept the cache
#: out of sync up to 37 s at a time.
GONE_MAX_BACKOFF = 4.0
#: A watch cut after it was open this long is re-opened at once from its resourceVersion (no event
#: is lost, the cache stays in sync); one cut sooner is a failure, with backoff (no tight loop).
WATCH_CUT_GRACE = 1.0
#: The longest wait between tries of a list or watch that got no answer, a 5xx or a 429: the
#: server is down or coming back, and after an apiserver restart the first informer to get an
#: answer ends every other's wait (``ConnectionMonitor.answered``), so this bounds how long the
#: cache stays stale after the server is back (4 s, plus up to a quarter of jitter). Six kinds
#: knocking every 4 s on a server that is down is ~1.5 requests a second: nothing to an apiserver.
RECONNECT_MAX_BACKOFF = 4.0
#: The longest wait after an answer that retrying soon cannot change (401, 403, 404, 400, ...):
#: client-go's reflector's cap.
REFUSED_MAX_BACKOFF = 30.0


def retry_cap(exc: BaseException) -> float:
    """The longest backoff for a list or watch that failed with ``exc``."""
    status = exc.status if isinstance(exc, ApiError) else getattr(exc, "status", None)
    if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
        return REFUSED_MAX_BACKOFF
    return RECONNECT_MAX_BACKOFF


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
        on_resume: ResumeCallback | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.limiter = limiter
        self.on_change = on_change
        #: told when the cache resumes after a gap: a re-list, a watch re-opened after a failure
        self.on_resume = on_resume
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
        #: try watch-list streaming; False once the server showed it does not offer it, or when
        #: $DESCHED_WATCH_LIST is false (the escape hatch, as client-go's KUBE_FEATURE_WatchListClient)
        self.use_watch_list = os.environ.get("DESCHED_WATCH_LIST", "true").lower() not in ("0", "false")
        #: how the last (re-)list was made: "watch-list" or "list"
        self.listed_by = ""
        #: when the watch being followed opened (None while none is)
        self._watching_since: float | None = None
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
        self.listed_by = "list"
        self._replace(objects, rv)

    def _replace(self, objects: dict[str, Any], rv: str) -> None:
        """The cache becomes ``objects`` (a full listing at ``rv``); changes are reported as a diff."""
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
        if self.relists and self.on_resume is not None:  # not the first list: a re-list
            self.on_resume(self.resource.kind, "re-listed")
        self.synced.set()

    async def watch_once(self) -> None:
        """WATCH from the cache's resourceVersion until the server ends the stream."""
        params = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", self.resource_version),
            ("timeoutSeconds", str(WATCH_TIMEOUT_SECONDS)),
        ]
        self._watching_since = None
        resp = await self._get(params, timeout=WATCH_TIMEOUT_SECONDS + 30)
        try:
            if resp.status == 410:
                raise GoneError()
            if resp.status >= 400:
                body = await resp.read()
                raise client.ApiException(status=resp.status, reason=status_message(body))
            gap = self.failing_since is not None
            self._healthy()
            if gap and self.on_resume is not None:
                self.on_resume(self.resource.kind, "watch re-opened")
            self._watching_since = time.monotonic()
            if self.monitor is not None:
                self.monitor.progress()
        except BaseException:
            resp.release()
            raise
        await self._follow(resp, _Lines(resp))

    async def _follow(self, resp: Any, lines: _Lines) -> None:
        """Apply a watch's events until the server ends the stream."""
        try:
            async for line in lines:
                self._apply(line)
        finally:
            resp.release()

    async def watch_list(self) -> tuple[Any, _Lines]:
        """Fill the cache by a watch-list (see the module docstring); return its open stream, to be
        followed as the watch. :class:`WatchListUnsupported` when the server does not offer it."""
        params = [
            ("watch", "true"),
            ("sendInitialEvents", "true"),
            ("resourceVersionMatch", "NotOlderThan"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", ""),
            ("timeoutSeconds", str(WATCH_TIMEOUT_SECONDS)),
        ]
        resp = await self._get(params, timeout=WATCH_TIMEOUT_SECONDS + 30)
        try:
            if resp.status >= 400:
                body = await resp.read()
                if resp.status in (400, 422):
                    raise WatchListUnsupported(f"the server refused it: {resp.status} {status_message(body)}")
                raise client.ApiException(status=resp.status, reason=status_message(body))
            if self.monitor is not None:
                self.monitor.progress()
            lines = _Lines(resp, silence=INITIAL_EVENTS_SILENCE_SECONDS)
            objects: dict[str, Any] = {}
            rv = ""
            try:
                with gc_paused():
                    reported = time.monotonic()
                    async for line in lines:
                        rv = self._initial_event(line, objects)
                        if rv:
                            break
                        if self.monitor is not None and time.monotonic() - reported >= 1.0:
                            # the stream's events are answers, as a LIST's pages are: a long
                            # initial stream is not cut by --client-connection-timeout
                            self.monitor.progress()
                            reported = time.monotonic()
            except WatchListUnsupported:
                raise
            except GoneError:
                raise _StreamBroke("410 Gone before its initial-events-end bookmark") from None
            except Exception as e:
                raise _StreamBroke(f"{type(e).__name__}: {e}") from e
            if not rv:
                raise _StreamBroke("the stream ended before its initial-events-end bookmark")
            lines.silence = None
        except BaseException:
            resp.release()
            raise
        self.listed_by = "watch-list"
        self._replace(objects, rv)
        self._watching_since = time.monotonic()
        if self.monitor is not None:
            self.monitor.progress()
        return resp, lines

    def _initial_event(self, line: bytes, objects: dict[str, Any]) -> str:
        """One event of a watch-list's initial phase into ``objects``; the resourceVersion of the
        initial-events-end bookmark when ``line`` is it, else ""."""
        event = msgspec.json.decode(line, type=_WatchEvent)
        if event.type == "BOOKMARK":
            meta = msgspec.json.decode(event.object, type=_MetaOnly).metadata
            return meta.resource_version if meta.annotations.get(INITIAL_EVENTS_END) == "true" else ""
        if event.type == "ERROR":
            self._apply(line)  # raises GoneError or ApiException
        obj: Any = self._decode(event.object)
        if event.type == "DELETED":
            objects.pop(_key(obj), None)
        else:
            objects[_key(obj)] = obj
        return ""

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

    async def _pause(self, stop: asyncio.Event, seconds: float, *, until_answered: bool) -> None:
        """Wait ``seconds`` (plus up to a quarter, jitter), or until ``stop``; with
        ``until_answered`` also until another request got an answer: the server is back (after an
        apiserver restart, every informer recovers with the first one)."""
        waiters = [asyncio.ensure_future(stop.wait())]
        if until_answered and self.monitor is not None:
            waiters.append(asyncio.ensure_future(self.monitor.answered().wait()))
        try:
            await asyncio.wait(
                waiters, timeout=seconds * (1 + random.random() / 4), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for w in waiters:
                w.cancel()

    async def run(self, stop: asyncio.Event) -> None:
        """List, then watch until ``stop``; recover from every failure with backoff."""
        backoff = 0.5
        gone_backoff = 0.0  # the wait before re-listing after a 410 that repeats within GONE_WINDOW
        last_gone = -GONE_WINDOW
        failed_since_gone = False  # a list or watch failed since the last 410
        need_list = True
        while not stop.is_set():
            try:
                if need_list:
                    stream = None
                    if self.use_watch_list:
                        try:
                            stream = await self.watch_list()
                        except asyncio.CancelledError:
                            raise
                        except WatchListUnsupported as e:
                            self.use_watch_list = False
                            log.info("%s: no watch-list (%s): LIST+WATCH from now on", self.resource.kind, e)
                        except _StreamBroke as e:  # progress over deadlock: list this time
                            log.info("%s watch-list: %s; listing instead", self.resource.kind, e)
                        # an answer with an error status, or no answer: a failure as any list's
                    if stream is None:
                        await self.list()
                    need_list = False
                    backoff = 0.5  # an answer: a failure from now on starts a new backoff
                    if self.relists:
                        log.info("re-listed %s (%d objects)", self.resource.kind, len(self.objects))
                    self.relists += 1
                    if stream is not None:
                        await self._follow(*stream)
                        backoff = 0.5
                        continue  # the stream ended: watch on from its resourceVersion
                await self.watch_once()
                backoff = 0.5
            except GoneError:
                now = time.monotonic()
                # a 410 after the server went away is the restart's, not a loop of ours
                repeated = now - last_gone < GONE_WINDOW and not failed_since_gone
                gone_backoff = min(max(GONE_BACKOFF, gone_backoff * 2), GONE_MAX_BACKOFF) if repeated else 0.0
                last_gone = now
                failed_since_gone = False
                self._failed("watch expired (410 Gone), re-listing")
                need_list = True
                if not gone_backoff:
                    log.info("%s watch expired (410 Gone): re-listing", self.resource.kind)
                    continue
                log.warning(
                    "%s watch expired (410 Gone) again within %.0fs: re-listing in %.1fs",
                    self.resource.kind,
                    GONE_WINDOW,
                    gone_backoff,
                )
                await self._pause(
                    stop, gone_backoff, until_answered=False
                )  # the server answers: it expired us
            except asyncio.CancelledError:
                raise
            except Exception as e:
                opened, self._watching_since = self._watching_since, None
                if opened is not None and time.monotonic() - opened >= WATCH_CUT_GRACE:
                    # an open watch cut (a proxy, a reset): re-opened at once from its resourceVersion
                    log.info("%s watch cut (%s): re-watching", self.resource.kind, type(e).__name__)
                    continue
                what = f"{self.resource.kind} {'list' if need_list else 'watch'}"
                if self.monitor is not None:
                    self._failed(self.monitor.failure(what, e).message)
                else:
                    self._failed(f"{type(e).__name__}: {e}")
                    log.warning("%s failed: %s; retrying in %.1fs", what, e, backoff)
                failed_since_gone = True
                await self._pause(stop, backoff, until_answered=True)  # unless the server is back meanwhile
                backoff = min(backoff * 2, retry_cap(e))


class _Lines:
    """The non-empty lines of a streamed answer (a watch: one JSON event a line). While ``silence``
    is set, no data for that many seconds ends it with :class:`WatchListUnsupported`."""

    def __init__(self, resp: Any, silence: float | None = None) -> None:
        self._chunks = resp.content.iter_any().__aiter__()
        self.silence = silence
        self._buf = b""
        self._ready: list[bytes] = []

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> bytes:
        while not self._ready:
            try:
                if self.silence is None:
                    chunk = await self._chunks.__anext__()
                else:
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the chunk when a
                    # cancel lands as it arrives, and the cancelled informer then follows the watch
                    async with asyncio.timeout(self.silence):
                        chunk = await self._chunks.__anext__()
            except TimeoutError:
                raise WatchListUnsupported(
                    f"no initial events for {self.silence:.0f}s: the server does not stream them"
                ) from None
            if self._buf:
                chunk = self._buf + chunk
            lines = chunk.split(b"\n")
            self._buf = lines.pop()
            lines.reverse()
            self._ready = [line for line in lines if line.strip()]
        return self._ready.pop()


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
        on_resume: ResumeCallback | None = None,
    ) -> None:
        self.informers = {
            k: Informer(
                api, RESOURCES[k], limiter=limiter, on_change=on_change, monitor=monitor, on_resume=on_resume
            )
            for k in kinds
        }
        self._tasks: list[asyncio.Task[None]] = []
        self._stop = asyncio.Event()
        self._requests = RequestsMemo()

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

        pods = values("Pod")
        self._requests.trim(len(pods))
        return ClusterSnapshot(
            nodes=values("Node"),
            pods=pods,
            namespaces=values("Namespace"),
            pdbs=values("PodDisruptionBudget"),
            priority_classes=values("PriorityClass"),
            pvcs=values("PersistentVolumeClaim"),
            events=values("Event"),
            workloads=[w for kind in WORKLOAD_KINDS for w in values(kind)],
            requests_memo=self._requests,
        )
