"""The one HTTP(S) endpoint of desched's long-running commands: ``/healthz`` (also ``/livez``),
``/readyz`` and ``/metrics`` (Prometheus), on aiohttp.

``desched run`` serves it on a thread of its own (:class:`HealthServer`): a cycle busy in Python
code on the main event loop does not stop the endpoint answering. ``desched extender`` adds its
verbs to the same server (:class:`HttpServer` is its base) and serves it on its main event loop.
TLS contexts come from :mod:`desched.runtime.tls` (one builder for both commands).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from desched.errors import UserError
from desched.runtime.tls import server_context

log = logging.getLogger(__name__)

#: aiohttp's default limit on a request body (the health endpoints read none).
DEFAULT_MAX_BODY = 1024**2


class HttpServer:
    """``/healthz``, ``/livez``, ``/readyz`` and ``/metrics`` (when there is a registry) on the running
    event loop; a subclass adds its own routes to :attr:`app` before :meth:`start`. Any other GET
    answers 404."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        registry: CollectorRegistry | None,
        ready: Callable[[], bool],
        ssl_context: ssl.SSLContext | None = None,
        reuse_port: bool = False,
        not_ready: str = "not ready",
        max_body: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.host = host
        self.port = port
        self.registry = registry
        self.ready = ready
        self.ssl_context = ssl_context
        self.reuse_port = reuse_port
        self.not_ready = not_ready
        self.app = web.Application(client_max_size=max_body)
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/livez", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        if registry is not None:
            self.app.router.add_get("/metrics", self._metrics)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        return f"{scheme}://{self.host}:{self.port}"

    async def start(self) -> None:
        """Listen (``OSError`` when the address cannot be bound); :attr:`port` is then the bound port."""
        self.app.router.add_get("/{path:.*}", self._not_found)
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        # SO_REUSEADDR always (--permit-address-sharing); SO_REUSEPORT with --permit-port-sharing
        site = web.TCPSite(
            runner,
            self.host,
            self.port,
            ssl_context=self.ssl_context,
            reuse_address=True,
            reuse_port=self.reuse_port or None,
        )
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        for addr in runner.addresses:
            if isinstance(addr, tuple) and len(addr) >= 2:
                self.port = int(addr[1])
                break

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.ready():
            return web.Response(text="ok")
        return web.Response(status=503, text=self.not_ready)

    async def _metrics(self, request: web.Request) -> web.Response:
        assert self.registry is not None
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _not_found(self, request: web.Request) -> web.Response:
        return web.Response(status=404, text="not found")


class BackgroundServer:
    """An :class:`HttpServer` on an event loop of its own thread, started and stopped from
    synchronous code (``desched run``, tests, benchmarks)::

    with BackgroundServer(server) as bg:
        urllib.request.urlopen(bg.url + "/healthz")
    """

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="http", daemon=True)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> None:
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=30)
        except BaseException:
            self._close()
            raise

    def stop(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(timeout=30)
        finally:
            self._close()

    def _close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HealthServer(BackgroundServer):
    """``desched run``'s endpoint, in a thread of its own so a busy cycle does not stop it answering.

    ``tls`` is a context from :func:`desched.runtime.tls.server_context`, or a (cert, key) pair of
    files to build one from.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        registry: CollectorRegistry | None,
        ready: Callable[[], bool],
        tls: tuple[str, str] | ssl.SSLContext | None = None,
        reuse_port: bool = False,
    ) -> None:
        ctx = server_context(*tls) if isinstance(tls, tuple) else tls
        super().__init__(
            HttpServer(host, port, registry=registry, ready=ready, ssl_context=ctx, reuse_port=reuse_port)
        )

    def start(self) -> None:
        """Listen; an address that cannot be bound (a port taken since the start's check) is one
        line naming --secure-port, not a traceback."""
        try:
            super().start()
        except OSError as e:
            where = f"{self.server.host}:{self.server.port}"
            raise UserError("--secure-port", f"cannot listen on {where}: {e.strerror or e}") from None
