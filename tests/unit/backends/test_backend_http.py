"""The API eviction backend over HTTP (an aiohttp test server answering as the apiserver): what it
sends, and each way an answer ends: evicted, refused (nothing happened: it may be tried again), or
outcome unknown (it may have happened: remembered, never sent twice). It does not retry within a
request: a 429 (a PDB, or the apiserver's own rate limit with Retry-After) is the answer for this
cycle, and the next cycle decides again. Also events, and reconciliation's read of the pod.

tests/unit/backends/test_eviction_outcomes.py covers the status codes' classes and the lease deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from tests import builders
from tests.kubeapi import api_client_for, status

from desched.backends import api_eviction as backend_module
from desched.backends.api_eviction import (
    REQUESTED_BY,
    ApiEvictionBackend,
    EventRecorder,
    EvictionLedger,
    reconcile,
)
from desched.framework.evictor import EvictionRecord, EvictionRequest, OutcomeUnknown
from desched.framework.types import EvictResult
from desched.kube.client import RateLimiter

EVICTION = "/api/v1/namespaces/{ns}/pods/{name}/eviction"
REQ = EvictionRequest("prof", "RemoveDuplicates", "a duplicate", grace_period_seconds=5)
PDB_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


def target(name: str = "web-1") -> Any:
    return builders.pod(name, namespace="shop", node="n1", uid=f"uid-{name}", owner=("ReplicaSet", "web"))


class Apiserver:
    """The eviction subresource: each request is recorded, then answered by ``answer``."""

    def __init__(self, answer: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> None:
        self.answer = answer
        self.requests: list[tuple[str, str, dict[str, Any], str]] = []

    def app(self) -> web.Application:
        async def evict(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.requests.append(
                (request.match_info["ns"], request.match_info["name"], body, request.content_type)
            )
            return await self.answer(request)

        app = web.Application()
        app.router.add_post(EVICTION, evict)
        return app


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


def evict_once(
    answer: Callable[[web.Request], Awaitable[web.StreamResponse]], **kw: Any
) -> tuple[str | OutcomeUnknown | None, Apiserver, ApiEvictionBackend]:
    server = Apiserver(answer)
    out: list[Any] = []

    async def test() -> None:
        async with api_client_for(server.app()) as api:
            backend = ApiEvictionBackend(api, asyncio.get_running_loop(), **kw)
            out.append(await asyncio.to_thread(backend.evict, target(), REQ))
            out.append(backend)

    run(test)
    return out[0], server, out[1]


async def created(request: web.Request) -> web.Response:
    return web.json_response({"kind": "Status", "status": "Success", "code": 201}, status=201)


def test_the_request_is_a_policy_v1_eviction_naming_the_plugin() -> None:
    answer, server, backend = evict_once(created)
    assert answer is None
    [(ns, name, body, content_type)] = server.requests
    assert (ns, name, content_type) == ("shop", "web-1", "application/json")
    assert body == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "annotations": {
                "reason": "triggered by prof/RemoveDuplicates: a duplicate",
                "requested-by": REQUESTED_BY,
            },
        },
        "deleteOptions": {"gracePeriodSeconds": 5},
    }
    assert backend.already_evicted(target())  # an evicted pod is never sent a second eviction


def test_a_pdb_refusal_is_refused_with_the_apiservers_words_and_not_retried() -> None:
    async def pdb(request: web.Request) -> web.Response:
        return status(429, PDB_MESSAGE, "TooManyRequests", **{"Retry-After": "10"})

    answer, server, backend = evict_once(pdb)
    assert answer == f"429 {PDB_MESSAGE}"
    assert len(server.requests) == 1  # one request; the next cycle decides again
    assert not backend.already_evicted(target())  # it did not happen: a later cycle may try


def test_a_pod_already_gone_is_refused() -> None:
    async def gone(request: web.Request) -> web.Response:
        return status(404, 'pods "web-1" not found', "NotFound")

    answer, _, backend = evict_once(gone)
    assert answer == '404 pods "web-1" not found'
    assert not backend.already_evicted(target())


def test_a_server_error_may_have_evicted_it() -> None:
    async def boom(request: web.Request) -> web.Response:
        return status(500, "etcdserver: request timed out", "InternalError")

    answer, server, backend = evict_once(boom)
    assert answer == OutcomeUnknown("500 etcdserver: request timed out")
    assert len(server.requests) == 1
    assert backend.already_evicted(target())  # remembered: not sent again while unknown


def test_a_proxy_error_page_is_one_line_too() -> None:
    async def proxy(request: web.Request) -> web.Response:
        return web.Response(status=502, text="<html>\n<body>Bad Gateway</body>\n</html>\n")

    answer, _, _ = evict_once(proxy)
    assert answer == OutcomeUnknown("502 <html> <body>Bad Gateway</body> </html>")


def test_no_answer_before_the_timeout_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend_module, "EVICTION_TIMEOUT_SECONDS", 1.5)

    async def hang(request: web.Request) -> web.Response:
        await asyncio.sleep(30)
        return web.json_response({})

    started = time.monotonic()
    answer, server, backend = evict_once(hang)
    took = time.monotonic() - started
    assert answer == OutcomeUnknown("no answer within 1.5s")
    assert len(server.requests) == 1 and backend.already_evicted(target())
    assert took < 10, took


def test_a_lost_answer_is_unknown() -> None:
    async def cut(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.abort()  # the request arrived; its answer never leaves
        await asyncio.sleep(1)
        return web.json_response({})

    answer, server, backend = evict_once(cut)
    assert isinstance(answer, OutcomeUnknown) and answer.error.startswith("request failed:")
    assert "\n" not in answer.error and len(server.requests) == 1
    assert backend.already_evicted(target())


def test_dry_run_and_a_follower_send_nothing() -> None:
    answer, server, backend = evict_once(created, dry_run=True)
    assert answer is None and server.requests == [] and not backend.already_evicted(target())
    answer, server, _ = evict_once(created, may_evict=lambda: False)
    assert answer == "not evicting: this replica is not the leader or is shutting down"
    assert server.requests == []


def test_a_pod_the_ledger_knows_is_not_sent_again_by_the_same_backend() -> None:
    server = Apiserver(created)
    answers: list[Any] = []

    async def test() -> None:
        async with api_client_for(server.app()) as api:
            ledger = EvictionLedger()
            first = ApiEvictionBackend(api, asyncio.get_running_loop(), ledger=ledger)
            answers.append(await asyncio.to_thread(first.evict, target(), REQ))
            # a later cycle (a new backend, the same ledger) sees the pod still cached as running
            later = ApiEvictionBackend(api, asyncio.get_running_loop(), ledger=ledger)
            answers.append(later.already_evicted(target()))

    run(test)
    assert answers == [None, True] and len(server.requests) == 1


def test_a_rate_limiter_that_eats_the_time_left_stops_the_request() -> None:
    server = Apiserver(created)
    answers: list[Any] = []

    async def test() -> None:
        async with api_client_for(server.app()) as api:
            backend = ApiEvictionBackend(
                api,
                asyncio.get_running_loop(),
                limiter=RateLimiter(1, 1),  # the second request waits about 1 s for its token
                lease_time_left=lambda: 1.8,
            )
            for name in ("a", "b"):
                answers.append(await asyncio.to_thread(backend.evict, target(name), REQ))

    run(test)
    assert answers[0] is None
    assert answers[1] == "not sent: the leader lease could pass to another replica before it completes"
    assert [r[1] for r in server.requests] == ["a"]


# ----------------------------------------------------------------------------------- events


def record(result: EvictResult, error: str = "") -> EvictionRecord:
    return EvictionRecord(
        "shop", "web-1", "n1", "prof", "RemoveDuplicates", "dup", result, error, "uid-web-1"
    )


def test_events_say_what_was_evicted_and_what_failed(caplog: pytest.LogCaptureFixture) -> None:
    events: list[dict[str, Any]] = []
    fail_next = [False]

    async def post(request: web.Request) -> web.Response:
        if fail_next[0]:
            return status(403, "events is forbidden", "Forbidden")
        events.append({"ns": request.match_info["ns"], **(await request.json())})
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", post)

    async def emitted(n: int) -> None:
        for _ in range(200):
            if len(events) >= n:
                return
            await asyncio.sleep(0.01)

    async def test() -> None:
        async with api_client_for(app) as api:
            recorder = EventRecorder(api, asyncio.get_running_loop(), failures=True)
            recorder.observe(record(EvictResult.EVICTED))
            recorder.observe(record(EvictResult.FAILED, f"429 {PDB_MESSAGE}"))
            recorder.observe(record(EvictResult.UNKNOWN, "500 boom"))  # waits for reconciliation
            recorder.observe(record(EvictResult.FILTERED))
            await emitted(2)
            await asyncio.sleep(0.1)
            fail_next[0] = True
            with caplog.at_level(logging.WARNING, logger="desched.backends.api_eviction"):
                recorder.observe(record(EvictResult.EVICTED))
                for _ in range(200):
                    if caplog.records:
                        break
                    await asyncio.sleep(0.01)

    run(test)
    # each event is posted by its own task: the apiserver may receive them in either order
    events.sort(key=lambda e: str(e["type"]))
    assert [(e["ns"], e["type"], e["reason"], e["action"]) for e in events] == [
        ("shop", "Normal", "RemoveDuplicates", "Descheduled"),
        ("shop", "Warning", "EvictionFailed", "Descheduled"),
    ]
    assert events[0]["note"] == f"pod eviction from n1 node by {REQUESTED_BY}"
    assert events[1]["note"] == f"pod eviction from n1 node by {REQUESTED_BY} failed: 429 {PDB_MESSAGE}"
    assert events[0]["regarding"] == {"apiVersion": "v1", "kind": "Pod", "namespace": "shop", "name": "web-1"}
    assert events[0]["reportingController"] == "sigs.k8s.io.descheduler"
    # an event the apiserver refuses is a warning, never a reason to stop
    assert [r.getMessage() for r in caplog.records] == [
        "could not record event RemoveDuplicates for shop/web-1: 403 events is forbidden"
    ]


# --------------------------------------------------------------------------- reconciliation


def test_reconciliation_reads_the_pod_from_the_api_when_the_cache_cannot_tell() -> None:
    names = ("deleting", "replaced", "broken", "unchanged")

    async def get(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name == "broken":
            return status(500, "etcd is down")
        meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
        if name == "deleting":
            meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if name == "replaced":
            meta["uid"] = "another"
        return web.json_response({"kind": "Pod", "metadata": meta})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}", get)
    cached = {n: target(n) for n in names}
    records = [
        EvictionRecord("shop", n, "n1", "prof", "P", "r", EvictResult.UNKNOWN, "500", f"uid-{n}")
        for n in names
    ]
    done: list[Any] = []
    ledger = EvictionLedger()
    for n in names:
        ledger.remember(f"uid-{n}")

    async def test() -> None:
        async with api_client_for(app) as api:
            done.extend(
                await reconcile(records, lambda ns, name: cached[name], api, window=0.2, ledger=ledger)
            )
            # asked to stop: no read, the outcome stays unknown
            stop = asyncio.Event()
            stop.set()
            done.extend(await reconcile(records[:1], lambda ns, name: cached[name], api, window=5, stop=stop))

    run(test)
    assert [(d.record.name, d.outcome, d.evidence) for d in done] == [
        ("deleting", "evicted", "the pod is terminating (deletionTimestamp set)"),
        ("replaced", "evicted", "the pod was replaced (another uid)"),
        ("broken", "unknown", "could not read the pod: 500 etcd is down"),
        ("unchanged", "not evicted", "the pod still runs unchanged after 0s"),
        ("deleting", "unknown", "the pod still looks unchanged in the cache"),
    ]
    # only what surely did not happen is forgotten (a later cycle may evict it)
    assert [ledger.knows(f"uid-{n}") for n in names] == [True, True, True, False]
