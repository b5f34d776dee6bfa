"""A fault-injecting HTTP reverse proxy between ``desched run`` and the real kube-apiserver.

It listens on 127.0.0.1 (plain HTTP; :meth:`FaultProxy.kubeconfig` writes a kubeconfig pointing at
it with a bearer token) and forwards every request to the apiserver over TLS, except what the
current :attr:`FaultProxy.mode` changes:

============== ===============================================================================
``pass``       forward everything unchanged
``429``        eviction requests answered 429 (as a PodDisruptionBudget refusal), never forwarded
``5xx-before`` eviction requests answered 500/503, never forwarded (the apiserver did not act)
``5xx-after``  eviction requests forwarded, then the apiserver's answer replaced by a 5xx
``reset``      eviction requests forwarded, then the client connection reset (answer lost)
``slow``       eviction requests held ``delay`` seconds before being forwarded (answer arrives)
``hold``       eviction requests held ``delay`` seconds, then forwarded only if the client still
               waits (a request the client abandoned in time never reaches the apiserver)
``watch-cut``  watches forwarded, and cut after ``delay`` seconds
``watch-410``  the first three watches of each resource answered with a 410 Expired ERROR event
``watch-stall`` watches forwarded, their events never delivered (the stream stays open, silent)
``blackhole``  every request accepted and never answered (nor forwarded)
``down``       every request answered 503 at once, never forwarded (a load balancer whose apiserver
               is down)
``mixed``      each eviction request, by a seeded draw: forwarded (4 in 10), ``429``, ``5xx-before``,
               ``5xx-after``, ``reset`` or ``slow`` (1 in 10 each); each watch: forwarded (half),
               ``watch-cut`` or a 410 Expired ERROR event (a quarter each). The draw is recorded as
               the eviction's mode
============== ===============================================================================

Every eviction request is recorded (:attr:`FaultProxy.evictions`): the pod, when it arrived,
whether it was forwarded and the apiserver's own status, so a test counts what the apiserver
really did rather than what desched says. The proxy runs its own event loop in a thread.

Hand-written rather than a generic proxy (mitmproxy, toxiproxy) because the faults are HTTP- and
Kubernetes-aware (replace an answer after the apiserver acted, answer a watch with a 410 event)
and the records must be read from the test; aiohttp does the HTTP on both sides.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

MODES = (
    "pass",
    "429",
    "5xx-before",
    "5xx-after",
    "reset",
    "slow",
    "hold",
    "watch-cut",
    "watch-410",
    "watch-stall",
    "blackhole",
    "down",
    "mixed",
)
#: ``mixed``: the eviction faults and the watch faults drawn from, with their weights.
MIXED_EVICTIONS = (("pass", 4), ("429", 1), ("5xx-before", 1), ("5xx-after", 1), ("reset", 1), ("slow", 1))
MIXED_WATCHES = (("pass", 2), ("watch-cut", 1), ("watch-410", 1))
#: Not relayed. Bodies are relayed as they come (auto_decompress=False), so Accept-Encoding and
#: Content-Encoding pass through: the apiserver gzips large lists for a client that accepts it.
_HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class Eviction:
    """One eviction request as the proxy saw it."""

    namespace: str
    name: str
    arrived: float  # time.time()
    mode: str
    forwarded: bool = False
    upstream_status: int | None = None  # the apiserver's own answer, if forwarded
    abandoned_after: float | None = None  # seconds after arrival the client gave up (hold mode)

    @property
    def done(self) -> bool:
        """The apiserver accepted it: the pod was evicted by this request."""
        return self.upstream_status is not None and 200 <= self.upstream_status < 300


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


class FaultProxy:
    def __init__(self, upstream: str, ca_file: Path, *, delay: float = 2.0) -> None:
        self.upstream = upstream.rstrip("/")
        self.ssl = ssl.create_default_context(cafile=str(ca_file))
        self.mode = "pass"
        self.delay = delay
        self.evictions: list[Eviction] = []
        self.watches: dict[str, int] = {}  # resource path -> watch requests seen
        self._lock = threading.Lock()
        # mixed mode: the same faults in the same order every run (apart for evictions and for
        # watches, so the informers' timing does not change what the evictions draw)
        self._draws = {"eviction": random.Random(30), "watch": random.Random(31)}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="faultproxy", daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    async def _start(self) -> None:
        # the faults break connections on purpose: aiohttp's "Error handling request" is noise here
        logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=self.ssl),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding",),  # only what the client itself accepts
        )
        app = web.Application(client_max_size=16 << 20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = int(server.sockets[0].getsockname()[1])

    def stop(self) -> None:
        async def _stop() -> None:
            if self._runner is not None:
                await self._runner.cleanup()
            if self._session is not None:
                await self._session.close()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(30)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: Path, token: str) -> Path:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "faultproxy", "cluster": {"server": self.url}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "faultproxy", "context": {"cluster": "faultproxy", "user": "u"}}],
            "current-context": "faultproxy",
        }
        path.write_text(json.dumps(cfg))
        path.chmod(0o600)
        return path

    def set_mode(self, mode: str) -> None:
        assert mode in MODES, mode
        with self._lock:
            if mode == "mixed" and self.mode != "mixed":  # each time the same draws again
                self._draws = {"eviction": random.Random(30), "watch": random.Random(31)}
            self.mode = mode
            self.watches.clear()

    def records(self) -> list[Eviction]:
        with self._lock:
            return list(self.evictions)

    # ---------------------------------------------------------------- the proxy

    def _pick(self, what: str, choices: tuple[tuple[str, int], ...]) -> str:
        with self._lock:
            return self._draws[what].choices([c for c, _ in choices], [w for _, w in choices])[0]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        mode = self.mode
        parts = request.path.strip("/").split("/")
        if mode == "down":
            return _status(503, "ServiceUnavailable", "faultproxy: the apiserver is down")
        if request.method == "POST" and parts[-1] == "eviction" and len(parts) >= 6:
            if mode == "mixed":
                mode = self._pick("eviction", MIXED_EVICTIONS)
            return await self._eviction(request, mode, parts[-4], parts[-2])
        if mode == "blackhole":
            await self._until_client_leaves(request, 3600)
            return _status(504, "Timeout", "blackhole")
        if request.query.get("watch") in ("true", "1"):
            if mode == "mixed":
                return await self._watch(request, self._pick("watch", MIXED_WATCHES), always=True)
            return await self._watch(request, mode)
        return await self._forward(request)

    async def _eviction(
        self, request: web.Request, mode: str, namespace: str, name: str
    ) -> web.StreamResponse:
        rec = Eviction(namespace, name, time.time(), mode)
        with self._lock:
            self.evictions.append(rec)
        body = await request.read()
        if mode == "429":
            return _status(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget. (injected by faultproxy)",
            )
        if mode == "5xx-before":
            code = 500 if len(self.evictions) % 2 else 503
            return _status(code, "InternalError", "injected by faultproxy before the apiserver")
        if mode in ("slow", "hold", "blackhole"):
            started = time.monotonic()
            stayed = await self._until_client_leaves(request, 3600 if mode == "blackhole" else self.delay)
            if not stayed:
                rec.abandoned_after = time.monotonic() - started
            if mode == "blackhole" or (mode == "hold" and not stayed):
                return _status(504, "Timeout", "never forwarded")
        try:
            status, headers, data = await self._send(request, body)
        except aiohttp.ClientConnectorError as e:  # the apiserver is down: nothing reached it
            return _status(502, "ServiceUnavailable", f"faultproxy: apiserver unreachable: {e}")
        except aiohttp.ClientError as e:  # sent, then lost: the apiserver may have acted
            rec.forwarded = True
            return _status(502, "ServiceUnavailable", f"faultproxy: apiserver answer lost: {e}")
        rec.forwarded = True
        rec.upstream_status = status
        if mode == "5xx-after":
            code = (500, 502, 503, 504)[len(self.evictions) % 4]
            return _status(code, "InternalError", "injected by faultproxy after the apiserver answered")
        if mode == "reset":
            self._reset(request)
            return web.Response(status=500)  # never delivered: the connection is gone
        return web.Response(status=status, headers=headers, body=data)

    async def _until_client_leaves(self, request: web.Request, seconds: float) -> bool:
        """Wait up to ``seconds``; False as soon as the client closed its connection."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            transport = request.transport
            if transport is None or transport.is_closing():
                return False
            await asyncio.sleep(0.05)
        return True

    @staticmethod
    def _reset(request: web.Request) -> None:
        transport = request.transport
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:  # close with RST, not FIN: a connection reset by peer
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    def _upstream_headers(self, request: web.Request) -> dict[str, str]:
        return {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}

    async def _send(self, request: web.Request, body: bytes) -> tuple[int, dict[str, str], bytes]:
        assert self._session is not None
        async with self._session.request(
            request.method,
            self.upstream + request.path_qs,
            headers=self._upstream_headers(request),
            data=body,
        ) as up:
            data = await up.read()
            headers = {k: v for k, v in up.headers.items() if k.lower() not in _HOP_BY_HOP}
            return up.status, headers, data

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        try:
            status, headers, data = await self._send(request, await request.read())
        except aiohttp.ClientError as e:
            return _status(502, "ServiceUnavailable", f"faultproxy: {type(e).__name__}: {e}")
        return web.Response(status=status, headers=headers, body=data)

    async def _watch(self, request: web.Request, mode: str, *, always: bool = False) -> web.StreamResponse:
        """A watch under ``mode``; ``watch-410`` expires the first three of each resource, or
        every one drawn so with ``always`` (mixed mode)."""
        with self._lock:
            seen = self.watches.get(request.path, 0)
            self.watches[request.path] = seen + 1
        if mode == "watch-410" and (seen < 3 or always):
            resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            event = {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "too old resource version (injected by faultproxy)",
                    "reason": "Expired",
                    "code": 410,
                },
            }
            await resp.write(json.dumps(event).encode() + b"\n")
            await resp.write_eof()
            return resp
        assert self._session is not None
        try:
            upstream = await self._session.request(
                "GET", self.upstream + request.path_qs, headers=self._upstream_headers(request)
            )
        except aiohttp.ClientError as e:  # the apiserver is down: as _forward answers
            return _status(502, "ServiceUnavailable", f"faultproxy: {type(e).__name__}: {e}")
        async with upstream as up:
            headers = {k: v for k, v in up.headers.items() if k.lower() not in _HOP_BY_HOP}
            resp = web.StreamResponse(status=up.status, headers=headers)
            await resp.prepare(request)
            if mode == "watch-stall":
                await self._until_client_leaves(request, 3600)
                return resp
            cut_at = time.monotonic() + self.delay if mode == "watch-cut" else None
            while True:
                timeout = None if cut_at is None else max(0.0, cut_at - time.monotonic())
                try:
                    chunk = await asyncio.wait_for(up.content.readany(), timeout)
                except TimeoutError:
                    self._reset(request)  # cut mid-stream
                    return resp
                if not chunk:
                    break
                await resp.write(chunk)
            await resp.write_eof()
            return resp


def token_of(kubeconfig: Path) -> str:
    """The bearer token of a kubeconfig written by the e2e control plane."""
    cfg: dict[str, Any] = json.loads(kubeconfig.read_text())
    return str(cfg["users"][0]["user"]["token"])
