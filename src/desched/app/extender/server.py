"""The extender's HTTP(S) endpoint: the verbs beside health and metrics."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable

from aiohttp import web

from desched.app.extender.metrics import ExtenderMetrics
from desched.app.extender.verbs import Extender
from desched.app.extender.wire import DEFAULT_PORT, FILTER, MAX_BODY, POOLED_BUFFERS, VERBS, BadRequest, Reply
from desched.errors import UserError
from desched.runtime.server import HttpServer

log = logging.getLogger(__name__)


class ExtenderServer(HttpServer):
    """The extender's HTTP(S) endpoint: the verbs, beside the health and metrics endpoints every
    command serves (:class:`desched.runtime.server.HttpServer`, on the running event loop)."""

    def __init__(
        self,
        extender: Extender,
        *,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        ssl_context: ssl.SSLContext | None = None,
        metrics: ExtenderMetrics | None = None,
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.extender = extender
        self.metrics = metrics or ExtenderMetrics()
        self.clock = clock
        self.max_body = MAX_BODY
        #: request buffers kept for the next requests (see :meth:`_read_body`)
        self._buffers: list[bytearray] = []
        super().__init__(
            host,
            port,
            registry=self.metrics.registry,
            ready=ready,
            ssl_context=ssl_context,
            not_ready="not ready: the node and pod cache has not synced yet",
            max_body=MAX_BODY,
        )
        self.app.router.add_post("/{path:.*}", self._verb)

    async def start(self) -> None:
        try:
            await super().start()
        except OSError as e:
            where = f"{self.host}:{self.port}"
            raise UserError("--port", f"cannot listen on {where}: {e.strerror or e}") from None

    async def _verb(self, request: web.Request) -> web.Response:
        started = self.clock()
        segment = request.match_info["path"].rstrip("/").rsplit("/", 1)[-1]
        verb = VERBS.get(segment)
        if verb is None:
            return web.Response(status=404, text=f"unknown verb {segment!r}: use filter or prioritize")
        code = 200
        reply: Reply | None = None
        body: memoryview | None = None
        try:
            if not self.ready():
                code = 503
                return web.Response(status=code, text="not ready: the node and pod cache has not synced yet")
            body = await self._read_body(request)
            if body is None:
                code = 413
                return web.Response(status=code, text=f"request body over {self.max_body} bytes")
            try:
                if verb == FILTER:
                    reply = self.extender.filter(body, started)
                else:
                    reply = self.extender.prioritize(body, started)
            except BadRequest as e:
                code = 400
                return web.Response(status=code, text=str(e))
            except Exception:
                log.exception("%s failed", verb)
                code = 500
                return web.Response(status=code, text=f"{verb} failed; see the extender's log")
            return web.Response(body=reply.body, content_type="application/json")
        finally:
            m = self.metrics
            m.requests.labels(verb, str(code)).inc()
            m.latency.labels(verb).observe(self.clock() - started)
            if reply is not None:
                m.nodes.labels(verb).observe(reply.nodes)
                if reply.over_budget:
                    m.over_budget.labels(verb).inc()
                    log.warning("%s over its %.3gs budget: answered early", verb, self.extender.budget)
            if body is not None:
                self._release(body)

    async def _read_body(self, request: web.Request) -> memoryview | None:
        """The request body in a buffer of the pool (None: over :attr:`max_body`).

        Not ``request.read()``: that grows a fresh bytearray chunk by chunk and copies it into a
        fresh ``bytes``, which for a 7.7 MB NodeList cost more CPU than decoding it (a new 8 MB
        allocation is mapped and page-faulted on every request). A buffer kept from one request to
        the next is written once per chunk; the verbs decode straight from it.
        """
        length = request.content_length
        if length is not None and length > self.max_body:
            return None
        buf = self._buffers.pop() if self._buffers else bytearray()
        if length is not None and len(buf) < length:
            buf = bytearray(length)  # never resized in place: a decoded Raw may still point into the old one
        view = memoryview(buf)
        size = 0
        content = request.content
        while True:
            chunk = await content.readany()
            if not chunk:
                break
            end = size + len(chunk)
            if end > self.max_body:
                return None
            if end > len(buf):
                grown = bytearray(max(end, 2 * len(buf)))
                grown[:size] = view[:size]
                buf, view = grown, memoryview(grown)
            view[size:end] = chunk
            size = end
        return view[:size]

    def _release(self, body: memoryview) -> None:
        """Give a body's buffer back to the pool (at most :data:`POOLED_BUFFERS` are kept)."""
        buf = body.obj
        if isinstance(buf, bytearray) and len(self._buffers) < POOLED_BUFFERS:
            self._buffers.append(buf)
