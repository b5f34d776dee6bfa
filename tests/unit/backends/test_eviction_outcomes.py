"""Eviction outcomes: evicted / refused / unknown, how the limits count them, never a second
eviction, and request deadlines bounded by the leader lease (issue 17).

The live backend is exercised over real HTTP against a small aiohttp server on 127.0.0.1 that
answers as the apiserver's eviction subresource would (or loses the answer); the lease with an
injected clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client
from tests import builders

from desched.api.policy import EvictionLimits, load_policy
from desched.backends.api_eviction import (
    ApiEvictionBackend,
    EvictionLedger,
    reconcile,
)
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import (
    EvictionRecord,
    EvictionRequest,
    OutcomeUnknown,
    PodEvictor,
    ProfileEvictor,
)
from desched.framework.framework import Framework
from desched.framework.types import EvictResult
from desched.k8s.objects import Node, Pod
from desched.plugins import default_registry
from desched.runtime.leader import LeaderConfig, LeaderElector
from desched.runtime.metrics import Metrics

REG = default_registry(entry_points=False)
REQ = EvictionRequest("p", "Plugin", "test")


def pod(
    name: str, node: str, *, ns: str = "default", uid: str | None = None, terminating: bool = False
) -> Pod:
    return builders.pod(
        name,
        node=node,
        namespace=ns,
        uid=uid if uid is not None else f"uid-{name}",
        created="2026-01-01T00:00:00Z",
        deleted="2026-01-01T00:00:01Z" if terminating else None,
        owner=("ReplicaSet", "rs", "rs"),
        controller=None,
    )


class Scripted:
    """A backend answering from a function of the pod; records what was sent."""

    def __init__(self, answer: Callable[[Pod], str | OutcomeUnknown | None]) -> None:
        self.answer = answer
        self.sent: list[str] = []

    def evict(self, p: Pod, request: EvictionRequest) -> str | OutcomeUnknown | None:
        self.sent.append(p.metadata.name)
        return self.answer(p)


LIMITS = EvictionLimits(total=5, per_node=2, per_namespace=4)


def many_pods() -> list[Pod]:
    return [pod(f"p{n}{i}", f"n{n}", ns=f"ns{i % 2}") for n in range(4) for i in range(4)]


def charged(ev: PodEvictor) -> tuple[int, dict[str, int], dict[str, int]]:
    nodes = {f"n{n}": ev.evicted_on_node(f"n{n}") for n in range(4)}
    nss = {ns: ev.evicted_in_namespace(ns) for ns in ("ns0", "ns1")}
    return ev.total, nodes, nss


def test_unknown_outcomes_count_against_every_limit() -> None:
    backend = Scripted(lambda p: OutcomeUnknown("500 Internal Server Error"))
    ev = PodEvictor(backend, LIMITS)
    results = [ev.evict(p, "prof", "Plugin", "r") for p in many_pods()]
    assert len(backend.sent) == 5  # the total limit, though none was answered as evicted
    assert results.count(EvictResult.UNKNOWN) == 5
    total, nodes, nss = charged(ev)
    assert total == 5 and max(nodes.values()) == 2 and max(nss.values()) <= 4
    # p02, p03 on n0 and p12, p13 on n1 hit the node limit; the total limit stops the rest
    assert [r.result for r in ev.records].count(EvictResult.NODE_LIMIT) == 4
    assert all(r.error == "500 Internal Server Error" for r in ev.records if r.result is EvictResult.UNKNOWN)
    assert all(r.uid.startswith("uid-") for r in ev.records)


def test_per_namespace_limit_counts_unknown_outcomes() -> None:
    backend = Scripted(lambda p: OutcomeUnknown("reset"))
    ev = PodEvictor(backend, EvictionLimits(per_namespace=1))
    for p in many_pods():
        ev.evict(p, "prof", "Plugin", "r")
    assert sorted(backend.sent) == ["p00", "p01"]  # one per namespace, ns0 and ns1


def test_refusals_do_not_count_and_mixed_outcomes_stay_within_limits() -> None:
    # every third pod refused (429), every other answer lost: the limits count the rest
    answers: dict[str, str | OutcomeUnknown | None] = {}
    for i, p in enumerate(many_pods()):
        answers[p.metadata.name] = (
            "429 Too Many Requests" if i % 3 == 0 else (OutcomeUnknown("x") if i % 2 else None)
        )
    backend = Scripted(lambda p: answers[p.metadata.name])
    ev = PodEvictor(backend, LIMITS)
    for p in many_pods():
        ev.evict(p, "prof", "Plugin", "r")
    charged_records = [r for r in ev.records if r.result in (EvictResult.EVICTED, EvictResult.UNKNOWN)]
    assert len(charged_records) == 5 == ev.total
    per_node: dict[str, int] = {}
    for r in charged_records:
        per_node[r.node] = per_node.get(r.node, 0) + 1
    assert max(per_node.values()) <= 2
    assert any(r.result is EvictResult.FAILED for r in ev.records)


def test_never_a_second_eviction_in_a_cycle_even_for_a_relisted_object() -> None:
    backend = Scripted(lambda p: OutcomeUnknown("reset") if p.metadata.name == "a" else None)
    ev = PodEvictor(backend)
    pe = ProfileEvictor(ev, "prof", "Plugin", [], [])
    assert pe.evict(pod("a", "n1")) is EvictResult.UNKNOWN
    assert pe.evict(pod("b", "n1")) is EvictResult.EVICTED
    # new objects for the same pods (a relist after an apiserver restart): same uid, same pod
    assert pe.evict(pod("a", "n1")) is EvictResult.ALREADY_EVICTED
    assert ev.evict(pod("b", "n1"), "other", "Other", "r") is EvictResult.ALREADY_EVICTED
    # a pod with the same name but another uid is another pod
    assert pe.evict(pod("b", "n1", uid="uid-b2")) is EvictResult.EVICTED
    assert backend.sent == ["a", "b", "b"]


def test_terminating_pods_are_never_sent_an_eviction() -> None:
    backend = Scripted(lambda p: None)
    ev = PodEvictor(backend)
    # no filters at all (as a profile whose filters let everything through, or the evict annotation)
    pe = ProfileEvictor(ev, "prof", "Plugin", [], [])
    assert pe.evict(pod("t", "n1", terminating=True)) is EvictResult.FILTERED
    assert ev.evict(pod("t", "n1", terminating=True), "p", "P", "r") is EvictResult.FILTERED
    assert backend.sent == [] and ev.total == 0


def test_a_backend_that_remembers_earlier_cycles_is_asked_first() -> None:
    class Remembering(Scripted):
        def already_evicted(self, p: Pod) -> bool:
            return p.metadata.uid == "uid-old"

    backend = Remembering(lambda p: None)
    ev = PodEvictor(backend)
    assert ev.evict(pod("old", "n1"), "p", "P", "r") is EvictResult.ALREADY_EVICTED
    assert ev.evict(pod("new", "n1"), "p", "P", "r") is EvictResult.EVICTED
    assert backend.sent == ["new"]


def test_a_cycle_with_every_answer_lost_evicts_at_most_the_limits() -> None:
    policy = load_policy(
        {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "maxNoOfPodsToEvictTotal": 5,
            "maxNoOfPodsToEvictPerNode": 2,
            "profiles": [
                {
                    "name": "p",
                    "pluginConfig": [
                        {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 1}},
                        {"name": "RemoveDuplicates", "args": {}},
                    ],
                    "plugins": {
                        "deschedule": {"enabled": ["PodLifeTime"]},
                        "balance": {"enabled": ["RemoveDuplicates"]},
                    },
                }
            ],
        },
        REG,
    )
    nodes = [
        msgspec.convert(
            {
                "metadata": {"name": f"n{n}"},
                "status": {
                    "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
            Node,
            strict=False,
        )
        for n in range(4)
    ]
    snapshot = ClusterSnapshot(nodes=nodes, pods=many_pods())
    backend = Scripted(lambda p: OutcomeUnknown("connection reset"))
    result = Framework(policy, REG).run_cycle(snapshot, backend)
    assert len(backend.sent) == 5 == len(set(backend.sent))
    assert len(result.unknown) == 5 and result.evictions == []
    per_node: dict[str, int] = {}
    for r in result.unknown:
        per_node[r.node] = per_node.get(r.node, 0) + 1
    assert max(per_node.values()) == 2
    assert all(r.result is not EvictResult.UNKNOWN for r in result.failures)


# ------------------------------------------------------------------------- the live backend


class Api:
    """What the in-test server does with an eviction: a status, lose the answer, or hang."""

    def __init__(self) -> None:
        self.mode = "201"
        self.received: list[str] = []

    def app(self) -> web.Application:
        async def evict(request: web.Request) -> web.StreamResponse:
            self.received.append(request.match_info["name"])
            await request.read()
            if self.mode == "reset":
                assert request.transport is not None
                request.transport.abort()  # the answer never comes
                await asyncio.sleep(1)
            if self.mode == "hang":
                await asyncio.sleep(30)
            status = int(self.mode) if self.mode.isdigit() else 201
            return web.json_response({"kind": "Status", "message": f"answer {status}"}, status=status)

        async def lease_get(request: web.Request) -> web.Response:
            return web.json_response({"kind": "Status", "message": "not found"}, status=404)

        async def lease_post(request: web.Request) -> web.Response:
            return web.json_response(await request.json(), status=201)

        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", evict)
        app.router.add_get("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}", lease_get)
        app.router.add_post("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", lease_post)
        return app


@asynccontextmanager
async def served(state: Api) -> AsyncIterator[client.ApiClient]:
    server = TestServer(state.app(), host="127.0.0.1")
    await server.start_server()
    cfg = client.Configuration()
    cfg.host = str(server.make_url("")).rstrip("/")
    api = client.ApiClient(configuration=cfg)
    try:
        yield api
    finally:
        await api.close()
        await server.close()


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("mode", "outcome"),
    [
        ("201", None),
        ("429", "refused"),
        ("404", "refused"),
        ("409", "refused"),
        ("500", "unknown"),
        ("503", "unknown"),
        ("reset", "unknown"),
    ],
)
def test_the_live_backend_tells_refused_from_unknown(mode: str, outcome: str | None) -> None:
    state = Api()
    state.mode = mode

    async def test() -> None:
        async with served(state) as api:
            ledger = EvictionLedger()
            backend = ApiEvictionBackend(api, asyncio.get_running_loop(), ledger=ledger)
            answer = await asyncio.to_thread(backend.evict, pod("a", "n1"), REQ)
            if outcome is None:
                assert answer is None
            elif outcome == "refused":
                assert isinstance(answer, str) and answer.startswith(mode), answer
            else:
                assert isinstance(answer, OutcomeUnknown), answer
                assert "\n" not in answer.error
            assert state.received == ["a"]
            # remembered (no second eviction in a later cycle) unless it surely did not happen
            assert backend.already_evicted(pod("a", "n1")) is (outcome != "refused")

    run(test)


def test_a_connection_that_cannot_be_opened_is_refused_not_unknown() -> None:
    async def test() -> None:
        cfg = client.Configuration()
        cfg.host = "http://127.0.0.1:9"  # discard port: nothing listens
        api = client.ApiClient(configuration=cfg)
        try:
            backend = ApiEvictionBackend(api, asyncio.get_running_loop())
            answer = await asyncio.to_thread(backend.evict, pod("a", "n1"), REQ)
        finally:
            await api.close()
        assert isinstance(answer, str) and answer.startswith("not sent"), answer

    run(test)


def test_the_ledger_forgets_after_its_ttl() -> None:
    now = [0.0]
    ledger = EvictionLedger(ttl=10, clock=lambda: now[0])
    ledger.remember("u")
    assert ledger.knows("u")
    now[0] = 10.5
    assert not ledger.knows("u") and len(ledger) == 0


# --------------------------------------------------------------------------- lease deadline


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_time_left_on_the_lease_follows_the_injected_clock() -> None:
    clock = FakeClock()
    config = LeaderConfig(identity="me", lease_duration=15, renew_deadline=10, retry_period=2)

    async def test() -> None:
        async with served(Api()) as api:
            elector = LeaderElector(api, config, clock=clock)
            assert elector.time_left() == 0.0  # not leading
            assert await elector.try_acquire_or_renew()
            # 15 s lease, 1.5 s margin, counted from before the renewal was sent
            assert elector.time_left() == pytest.approx(13.5)
            clock.now += 10
            assert elector.time_left() == pytest.approx(3.5)
            clock.now += 5
            assert elector.time_left() == 0.0

    run(test)


def test_eviction_requests_end_before_the_lease_could_pass() -> None:
    clock = FakeClock()
    config = LeaderConfig(identity="me", lease_duration=3, renew_deadline=2, retry_period=1)
    state = Api()
    state.mode = "hang"

    async def test() -> None:
        async with served(state) as api:
            elector = LeaderElector(api, config, clock=clock)
            assert await elector.try_acquire_or_renew()
            backend = ApiEvictionBackend(
                api, asyncio.get_running_loop(), lease_time_left=elector.time_left, clock=clock
            )
            # 2 s left (3 s lease - 1 s margin): the request is abandoned then, its outcome unknown
            started = time.monotonic()
            answer = await asyncio.to_thread(backend.evict, pod("a", "n1"), REQ)
            took = time.monotonic() - started
            assert isinstance(answer, OutcomeUnknown), answer
            assert 1.5 < took < 3.0, took
            assert state.received == ["a"]
            # 1.5 s later on the lease's clock, 0.5 s is left: too little, nothing is sent
            clock.now += 1.5
            answer = await asyncio.to_thread(backend.evict, pod("b", "n1"), REQ)
            assert isinstance(answer, str) and "lease" in answer, answer
            assert state.received == ["a"]
            assert not backend.already_evicted(pod("b", "n1"))

    run(test)


# ------------------------------------------------------------------------------ reconciliation


def record(p: Pod) -> EvictionRecord:
    n = p.metadata
    return EvictionRecord(
        n.namespace, n.name, p.spec.node_name, "prof", "Plugin", "r", EvictResult.UNKNOWN, "500", n.uid
    )


def test_reconciliation_reads_the_cache_then_the_api() -> None:
    gone, terminating, replaced, still = (
        pod("gone", "n1"),
        pod("term", "n1"),
        pod("repl", "n1"),
        pod("still", "n1"),
    )
    cache: dict[str, Pod] = {
        "term": pod("term", "n1", terminating=True),
        "repl": pod("repl", "n1", uid="uid-new"),
        "still": still,
    }
    answers = {"still": {"metadata": {"name": "still", "uid": "uid-still"}}}

    async def pods(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name in answers:
            return web.json_response(answers[name])
        return web.json_response({"kind": "Status", "message": "not found"}, status=404)

    async def test() -> None:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}", pods)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        cfg = client.Configuration()
        cfg.host = str(server.make_url("")).rstrip("/")
        api = client.ApiClient(configuration=cfg)
        ledger = EvictionLedger()
        for p in (gone, terminating, replaced, still):
            ledger.remember(p.metadata.uid)
        try:
            done = await reconcile(
                [record(p) for p in (gone, terminating, replaced, still)],
                lambda ns, name: cache.get(name),
                api,
                window=0.5,
                ledger=ledger,
            )
        finally:
            await api.close()
            await server.close()
        outcome = {d.record.name: d.outcome for d in done}
        assert outcome == {"gone": "evicted", "term": "evicted", "repl": "evicted", "still": "not evicted"}
        assert not ledger.knows("uid-still") and ledger.knows("uid-term")
        metrics = Metrics()
        for d in done:
            metrics.observe_reconciled(d.record, d.outcome)
        text = metrics.registry.get_sample_value
        assert (
            text(
                "descheduler_pods_evicted_total",
                {
                    "result": "success",
                    "strategy": "Plugin",
                    "profile": "prof",
                    "namespace": "default",
                    "node": "n1",
                },
            )
            == 3
        )
        assert (
            text(
                "descheduler_eviction_outcome_unknown_total",
                {"outcome": "not_evicted", "strategy": "Plugin", "profile": "prof", "namespace": "default"},
            )
            == 1
        )

    run(test)


def test_reconciliation_without_an_answer_stays_unknown() -> None:
    async def test() -> None:
        cfg = client.Configuration()
        cfg.host = "http://127.0.0.1:9"
        api = client.ApiClient(configuration=cfg)
        p = pod("still", "n1")
        try:
            done = await reconcile([record(p)], lambda ns, name: p, api, window=0.2)
        finally:
            await api.close()
        assert [d.outcome for d in done] == ["unknown"]

    run(test)


def test_the_live_loop_retries_what_it_cannot_tell_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """An outcome the cache cannot tell and the API cannot be asked about is kept, tried again
    after the next cycle, and counted once, when known."""
    from types import SimpleNamespace

    from desched.app import run as live

    monkeypatch.setattr(live, "RECONCILE_WINDOW_SECONDS", 0.1)
    policy = load_policy({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy"}, REG)
    d = live.Descheduler(live.RunOptions(policy_file="-", interval=60), policy)
    p = pod("a", "n1")
    objects: dict[str, Pod] = {"default/a": p}
    cache: Any = SimpleNamespace(informers={"Pod": SimpleNamespace(objects=objects)})
    seen: list[str] = []
    d.outcomes.events = SimpleNamespace(observe_reconciled=lambda done: seen.append(done.outcome))
    services = live.CycleServices(api=None, cache=cache)
    assert d.metrics is not None
    sample = d.metrics.registry.get_sample_value
    labels = {"outcome": "evicted", "strategy": "Plugin", "profile": "prof", "namespace": "default"}

    async def test() -> None:
        await d._reconcile([record(p)], services, final=False)
        assert [r.name for r, _ in d.unresolved] == ["a"] and seen == []
        assert sample("descheduler_eviction_outcome_unknown_total", labels) is None
        objects["default/a"] = pod("a", "n1", terminating=True)  # the watch caught up
        await d._reconcile([], services, final=False)
        assert d.unresolved == [] and seen == ["evicted"]
        assert sample("descheduler_eviction_outcome_unknown_total", labels) == 1
        # a one-shot run has no next cycle: what it cannot tell is reported unknown at once
        objects["default/b"] = pod("b", "n1")
        await d._reconcile([record(pod("b", "n1"))], services, final=True)
        assert d.unresolved == [] and seen == ["evicted", "unknown"]

    run(test)


def test_after_an_outage_what_could_not_be_told_is_resolved_before_the_next_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Evictions whose answers were lost when the apiserver went down could not be told then (the
    read failed too): the pod stays in the ledger. When the cache is back in sync, they are
    resolved *before* the cycle: a pod still running unchanged is forgotten, so this cycle may
    evict it (it was skipped as already evicted until the cycle after: an interval more)."""
    from types import SimpleNamespace

    from desched.app import run as live

    policy = load_policy({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy"}, REG)
    d = live.Descheduler(live.RunOptions(policy_file="-", interval=60), policy)
    p = pod("a", "n1")
    d.ledger.remember(p.metadata.uid)
    d.unresolved = [(record(p), time.monotonic())]
    cache: Any = SimpleNamespace(informers={"Pod": SimpleNamespace(objects={"default/a": p})})
    seen: list[str] = []
    d.outcomes.events = SimpleNamespace(observe_reconciled=lambda done: seen.append(done.outcome))

    async def pods(request: web.Request) -> web.Response:
        return web.json_response({"metadata": {"name": "a", "uid": p.metadata.uid}})

    async def test() -> None:
        app = web.Application()
        app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}", pods)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        cfg = client.Configuration()
        cfg.host = str(server.make_url("")).rstrip("/")
        api = client.ApiClient(configuration=cfg)
        try:
            await d._resolve_before_cycle(live.CycleServices(api=api, cache=cache))
        finally:
            await api.close()
            await server.close()

    run(test)
    assert seen == ["not evicted"] and d.unresolved == []
    assert not d.ledger.knows(p.metadata.uid)  # this cycle may evict it
