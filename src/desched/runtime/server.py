"""The HTTP(S) endpoint: ``/metrics``, ``/healthz``, ``/readyz``, in a thread of its own.

A thread keeps the endpoint answering while a cycle is busy in Python code.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)


class _PortSharingServer(ThreadingHTTPServer):
    """--permit-port-sharing: SO_REUSEPORT, so several processes may bind the same address and port.
    (SO_REUSEADDR, --permit-address-sharing, is always on: Python's HTTP server sets it.)"""

    allow_reuse_port = True


class HealthServer:
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
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz" or path == "/livez":
                    self._send(200, b"ok", "text/plain")
                elif path == "/readyz":
                    ok = outer.ready()
                    self._send(200 if ok else 503, b"ok" if ok else b"not ready", "text/plain")
                elif path == "/metrics" and outer.registry is not None:
                    self._send(200, generate_latest(outer.registry), CONTENT_TYPE_LATEST)
                else:
                    self._send(404, b"not found", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                log.debug("http: " + format, *args)

        self.registry = registry
        self.ready = ready
        server_class = _PortSharingServer if reuse_port else ThreadingHTTPServer
        self.httpd = server_class((host, port), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            if isinstance(tls, ssl.SSLContext):
                ctx = tls
            else:
                ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                ctx.load_cert_chain(tls[0], tls[1])
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="http", daemon=True)

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
