"""The one HTTP server of ``desched run`` and ``desched extender`` (runtime/server.py), as ``run``
serves it: on a thread of its own, answering while the thread that started it is busy."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter

from desched.errors import UserError
from desched.runtime.server import HealthServer


def get(url: str) -> tuple[int, str, bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def test_endpoints_without_metrics() -> None:
    ready = {"value": False}
    server = HealthServer("127.0.0.1", 0, registry=None, ready=lambda: ready["value"])
    server.start()
    try:
        base = server.url
        assert base == f"http://127.0.0.1:{server.port}" and server.port != 0
        assert get(f"{base}/healthz")[::2] == (200, b"ok")
        assert get(f"{base}/livez?verbose")[::2] == (200, b"ok")
        assert get(f"{base}/readyz")[::2] == (503, b"not ready")
        ready["value"] = True
        assert get(f"{base}/readyz")[::2] == (200, b"ok")
        # --disable-metrics: no /metrics
        assert get(f"{base}/metrics")[::2] == (404, b"not found")
        assert get(f"{base}/nope")[::2] == (404, b"not found")
    finally:
        server.stop()


def test_metrics_and_a_busy_caller() -> None:
    registry = CollectorRegistry()
    Counter("example_things", "Things", registry=registry).inc(3)
    server = HealthServer("127.0.0.1", 0, registry=registry, ready=lambda: True)
    server.start()
    try:
        status, ctype, body = get(f"{server.url}/metrics")
        assert status == 200 and ctype.startswith("text/plain")
        assert b"example_things_total 3.0" in body
        # the caller's thread is busy in Python code (a cycle): the endpoint still answers
        answers: list[tuple[int, float]] = []
        client = threading.Thread(
            target=lambda: answers.append((get(f"{server.url}/healthz")[0], time.monotonic()))
        )
        deadline = time.monotonic() + 2.0
        client.start()
        while time.monotonic() < deadline:
            sum(range(1000))
        client.join(timeout=10)
        [(status, at)] = answers
        assert status == 200 and at < deadline  # answered before the busy thread was done
    finally:
        server.stop()


def test_a_taken_port_fails_the_start() -> None:
    first = HealthServer("127.0.0.1", 0, registry=None, ready=lambda: True)
    first.start()
    try:
        # one line naming the flag (desched run's start), not an OSError's traceback
        with pytest.raises(UserError, match=r"^--secure-port: cannot listen on 127\.0\.0\.1:\d+: .*in use"):
            HealthServer("127.0.0.1", first.port, registry=None, ready=lambda: True).start()
        assert get(f"{first.url}/healthz")[0] == 200
    finally:
        first.stop()
