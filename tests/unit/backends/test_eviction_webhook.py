"""``evictionPolicy.webhook`` against a loopback aiohttp server: the review sent, allow and deny,
every kind of bad answer under both failure policies, a hang bounded by the timeout, TLS with the
caBundle, and the live backend asking it last (after the settling guard, before the eviction)."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from tests import builders
from tests.kubeapi import api_client_for

from desched.api.evictionpolicy import FailurePolicy, Webhook
from desched.backends.api_eviction import ApiEvictionBackend
from desched.backends.eviction_webhook import EvictionWebhooks
from desched.framework.evictor import EvictionRequest
from desched.framework.safety import Skip, SkipReason
from desched.runtime.tls import _self_signed

Handler = Callable[[dict[str, Any]], Awaitable[web.StreamResponse]]


def pod() -> Any:
    return builders.pod(
        "web-abc",
        namespace="shop",
        node="n1",
        uid="uid-web",
        owner=("ReplicaSet", "web-5f"),
        labels={"app": "web"},
    )


def hook(url: str, policy: FailurePolicy = FailurePolicy.IGNORE, timeout: float = 2.0, **kw: Any) -> Webhook:
    return Webhook(url=url, timeout=timedelta(seconds=timeout), failure_policy=policy, **kw)


def answer(uid: Any, allowed: Any, reason: str = "") -> web.Response:
    return web.json_response(
        {
            "apiVersion": "desched.io/v1alpha1",
            "kind": "EvictionReview",
            "response": {"uid": uid, "allowed": allowed, "reason": reason},
        }
    )


def ask(
    handler: Handler, policy: FailurePolicy = FailurePolicy.IGNORE, timeout: float = 2.0
) -> tuple[Skip | None, list[dict[str, Any]], EvictionWebhooks]:
    seen: list[dict[str, Any]] = []

    async def serve(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        return await handler(body)

    async def test() -> tuple[Skip | None, EvictionWebhooks]:
        app = web.Application()
        app.router.add_post("/review", serve)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        errors: list[tuple[str, str]] = []
        webhooks = EvictionWebhooks(asyncio.get_running_loop(), on_error=lambda *a: errors.append(a))
        try:
            url = str(server.make_url("/review"))
            req = EvictionRequest(
                "prof", "PodLifetime", "too old", webhook=hook(url, policy, timeout, insecure=True)
            )
            out = await asyncio.to_thread(webhooks.review, pod(), req, dry_run=True)
        finally:
            await webhooks.close()
            await server.close()
        assert len(errors) == sum(webhooks.errors.values())
        return out, webhooks

    out, webhooks = asyncio.run(test())
    return out, seen, webhooks


def test_the_review_carries_the_pod_and_the_eviction_and_an_allow_lets_it_go() -> None:
    async def allow(body: dict[str, Any]) -> web.StreamResponse:
        return answer(body["request"]["uid"], True)

    out, seen, webhooks = ask(allow)
    assert out is None
    assert webhooks.errors == {} and webhooks.denied == {}
    (body,) = seen
    assert body["apiVersion"] == "desched.io/v1alpha1" and body["kind"] == "EvictionReview"
    req = body["request"]
    assert len(req["uid"]) == 36
    assert req["pod"] == {
        "namespace": "shop",
        "name": "web-abc",
        "uid": "uid-web",
        "labels": {"app": "web"},
        "owner": {"kind": "ReplicaSet", "name": "web-5f"},
    }
    assert (req["node"], req["profile"], req["plugin"], req["reason"], req["dryRun"]) == (
        "n1",
        "prof",
        "PodLifetime",
        "too old",
        True,
    )


def test_a_denial_is_a_skip_with_the_webhooks_reason_under_either_policy() -> None:
    async def deny(body: dict[str, Any]) -> web.StreamResponse:
        return answer(body["request"]["uid"], False, "change freeze until Monday")

    for policy in FailurePolicy:
        out, _, webhooks = ask(deny, policy)
        assert out is not None and out.reason == SkipReason.WEBHOOK_DENIED
        assert "change freeze until Monday" in out.detail
        assert webhooks.denied == {"prof": 1} and webhooks.errors == {}


async def _wrong_uid(body: dict[str, Any]) -> web.StreamResponse:
    return answer("not-" + body["request"]["uid"], True)


async def _not_json(body: dict[str, Any]) -> web.StreamResponse:
    return web.Response(text="<html>ok</html>")


async def _server_error(body: dict[str, Any]) -> web.StreamResponse:
    return web.Response(status=500, text="boom")


async def _allowed_not_bool(body: dict[str, Any]) -> web.StreamResponse:
    return answer(body["request"]["uid"], "yes")


async def _no_response(body: dict[str, Any]) -> web.StreamResponse:
    return web.json_response({"allowed": True})


BAD = {
    "wrong uid": (_wrong_uid, "is not the request's"),
    "not JSON": (_not_json, "not JSON"),
    "500": (_server_error, "HTTP 500"),
    "allowed not a bool": (_allowed_not_bool, "response.allowed"),
    "no response object": (_no_response, "no 'response'"),
}


def test_bad_answers_follow_the_failure_policy_and_are_counted() -> None:
    for name, (handler, why) in BAD.items():
        out, _, webhooks = ask(handler, FailurePolicy.IGNORE)
        assert out is None, name  # Ignore: allowed
        assert webhooks.errors == {"prof": 1}, name
        out, _, webhooks = ask(handler, FailurePolicy.FAIL)
        assert out is not None and out.reason == SkipReason.WEBHOOK_ERROR, name
        assert why in out.detail, (name, out.detail)
        assert webhooks.errors == {"prof": 1}, name


def test_a_hanging_webhook_costs_at_most_its_timeout() -> None:
    async def hang(body: dict[str, Any]) -> web.StreamResponse:
        await asyncio.sleep(30)
        return answer(body["request"]["uid"], True)

    for policy, skipped in ((FailurePolicy.IGNORE, False), (FailurePolicy.FAIL, True)):
        start = time.monotonic()
        out, _, webhooks = ask(hang, policy, timeout=0.5)
        took = time.monotonic() - start
        assert (out is not None) is skipped
        if out is not None:
            assert out.reason == SkipReason.WEBHOOK_ERROR and "no answer within 0.5s" in out.detail
        assert webhooks.errors == {"prof": 1}
        assert took < 3.0, took  # the timeout (0.5 s), plus the server's start and close


def test_no_webhook_listening_follows_the_failure_policy() -> None:
    async def test(policy: FailurePolicy) -> Skip | None:
        webhooks = EvictionWebhooks(asyncio.get_running_loop())
        req = EvictionRequest(
            "prof", "P", "r", webhook=hook("http://127.0.0.1:9/review", policy, insecure=True)
        )
        try:
            return await asyncio.to_thread(webhooks.review, pod(), req, dry_run=False)
        finally:
            await webhooks.close()

    assert asyncio.run(test(FailurePolicy.IGNORE)) is None
    out = asyncio.run(test(FailurePolicy.FAIL))
    assert out is not None and out.reason == SkipReason.WEBHOOK_ERROR


def test_tls_with_the_ca_bundle_and_an_untrusted_certificate(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _self_signed(cert, key)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)

    async def serve(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return answer(body["request"]["uid"], False, "frozen")

    async def test(trust: bool) -> Skip | None:
        app = web.Application()
        app.router.add_post("/review", serve)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server(ssl=ctx)
        webhooks = EvictionWebhooks(asyncio.get_running_loop())
        ca = cert.read_text() if trust else None
        url = f"https://localhost:{server.port}/review"
        req = EvictionRequest("prof", "P", "r", webhook=hook(url, FailurePolicy.FAIL, ca_pem=ca))
        try:
            return await asyncio.to_thread(webhooks.review, pod(), req, dry_run=False)
        finally:
            await webhooks.close()
            await server.close()

    trusted = asyncio.run(test(True))
    assert trusted is not None and trusted.reason == SkipReason.WEBHOOK_DENIED  # the answer was read
    untrusted = asyncio.run(test(False))
    assert untrusted is not None and untrusted.reason == SkipReason.WEBHOOK_ERROR
    assert "TLS error" in untrusted.detail or "certificate" in untrusted.detail


def test_the_live_backend_asks_the_webhook_before_evicting_and_a_denial_sends_no_eviction() -> None:
    evictions: list[str] = []
    reviews: list[str] = []

    async def evict(request: web.Request) -> web.StreamResponse:
        evictions.append(request.match_info["name"])
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def review(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        reviews.append(body["request"]["pod"]["name"])
        return answer(body["request"]["uid"], body["request"]["pod"]["name"] != "web-abc")

    async def test() -> list[Any]:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", evict)
        app.router.add_post("/review", review)
        async with api_client_for(app) as api:
            url = api.configuration.host + "/review"
            webhooks = EvictionWebhooks(asyncio.get_running_loop())
            backend = ApiEvictionBackend(api, asyncio.get_running_loop(), webhooks=webhooks)
            req = EvictionRequest("prof", "P", "r", webhook=hook(url, insecure=True))
            other = builders.pod("api-1", namespace="shop", node="n1", uid="uid-api")
            try:
                return [
                    await asyncio.to_thread(backend.evict, pod(), req),
                    await asyncio.to_thread(backend.evict, other, req),
                    await asyncio.to_thread(backend.evict, other, EvictionRequest("prof", "P", "r")),
                ]
            finally:
                await webhooks.close()

    denied, allowed, unasked = asyncio.run(test())
    assert isinstance(denied, Skip) and denied.reason == SkipReason.WEBHOOK_DENIED
    assert allowed is None and unasked is None
    assert reviews == ["web-abc", "api-1"]  # a profile without a webhook is not asked
    assert evictions == ["api-1", "api-1"]


def test_the_example_webhook_in_the_docs_allows_and_denies(tmp_path: Path) -> None:
    """docs/operations.md's example webhook, run as written (on a free port), answers desched."""
    text = (Path(__file__).parents[3] / "docs" / "operations.md").read_text()
    section = text.split("### Eviction webhook", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert '("127.0.0.1", 8443)' in code
    script = tmp_path / "webhook.py"
    script.write_text(code.replace('("127.0.0.1", 8443)', f'("127.0.0.1", {port})'))
    proc = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the example webhook did not start"
                time.sleep(0.1)

        async def test() -> list[Skip | None]:
            webhooks = EvictionWebhooks(asyncio.get_running_loop())
            url = f"http://127.0.0.1:{port}/"
            req = EvictionRequest("prof", "P", "r", webhook=hook(url, FailurePolicy.FAIL, insecure=True))
            frozen = builders.pod(
                "db-0", namespace="shop", node="n1", uid="uid-db", labels={"freeze": "true"}
            )
            try:
                return [
                    await asyncio.to_thread(webhooks.review, pod(), req, dry_run=False),
                    await asyncio.to_thread(webhooks.review, frozen, req, dry_run=False),
                ]
            finally:
                await webhooks.close()

        allowed, denied = asyncio.run(test())
    finally:
        proc.terminate()
        proc.wait(10)
    assert allowed is None
    assert (
        denied is not None and denied.reason == SkipReason.WEBHOOK_DENIED and "change freeze" in denied.detail
    )


def test_a_cycle_asks_the_profiles_webhook_after_its_limits_and_records_the_denials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The policy's block reaches the live backend through the evictor: denied pods are skipped
    (reason webhook_denied, in the metric and in the evictor's ``eviction skipped`` line at --v=4),
    allowed ones evicted, and the per-cycle limit is checked before the webhook is asked (the pods
    past it are never sent for review)."""
    caplog.set_level(logging.DEBUG, logger="desched")
    from desched.api.policy import load_policy
    from desched.cluster.snapshot import ClusterSnapshot
    from desched.framework.framework import Framework
    from desched.framework.types import EvictResult
    from desched.plugins import default_registry
    from desched.runtime.metrics import Metrics

    evictions: list[str] = []
    reviews: list[str] = []

    async def evict(request: web.Request) -> web.StreamResponse:
        evictions.append(request.match_info["name"])
        return web.json_response({"kind": "Status", "status": "Success"}, status=201)

    async def review(request: web.Request) -> web.StreamResponse:
        req = (await request.json())["request"]
        reviews.append(req["pod"]["name"])
        return answer(req["uid"], req["pod"]["labels"].get("freeze") != "true", "frozen")

    pods = [
        builders.pod(
            f"p{i}",
            namespace="shop",
            node="n1",
            uid=f"uid-{i}",
            created="2020-01-01T00:00:00Z",
            owner=("ReplicaSet", f"rs{i}"),
            labels={"freeze": "true"} if i in (0, 2) else {},
        )
        for i in range(6)
    ]
    snapshot = ClusterSnapshot(nodes=[builders.node("n1"), builders.node("n2")], pods=pods)

    async def test() -> list[Any]:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", evict)
        app.router.add_post("/review", review)
        async with api_client_for(app) as api:
            policy = load_policy(
                {
                    "apiVersion": "descheduler/v1alpha2",
                    "kind": "DeschedulerPolicy",
                    "maxNoOfPodsToEvictTotal": 2,
                    "evictionPolicy": {
                        "webhook": {"url": api.configuration.host + "/review", "insecure": True}
                    },
                    "profiles": [
                        {
                            "name": "p",
                            "pluginConfig": [{"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}}],
                            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
                        }
                    ],
                },
                default_registry(),
            )
            webhooks = EvictionWebhooks(asyncio.get_running_loop())
            backend = ApiEvictionBackend(api, asyncio.get_running_loop(), webhooks=webhooks)
            try:
                result = await asyncio.to_thread(
                    Framework(policy, default_registry()).run_cycle, snapshot, backend
                )
            finally:
                await webhooks.close()
            return list(result.records)

    records = asyncio.run(test())
    metrics = Metrics()
    for r in records:
        metrics.observe_eviction(r)
    evicted = sorted(r.name for r in records if r.result is EvictResult.EVICTED)
    denied = sorted(r.name for r in records if r.skip_reason == SkipReason.WEBHOOK_DENIED)
    assert sorted(evictions) == evicted and len(evicted) == 2  # the total limit holds
    assert denied and set(denied) <= {"p0", "p2"}
    assert all("frozen" in r.error for r in records if r.name in denied)
    # asked only for pods within the limit: once two are evicted the rest are not reviewed
    assert sorted(reviews) == sorted(evicted + denied)
    exposed = metrics.registry.get_sample_value(
        "descheduler_evictions_skipped_total",
        {"reason": "webhook_denied", "strategy": "PodLifeTime", "profile": "p", "namespace": "shop"},
    )
    assert exposed == len(denied)
    # each denial is the evictor's standard skip line (--v=4), with the eviction line's fields
    skip_lines = [r for r in caplog.records if r.getMessage() == "eviction skipped"]
    assert [
        (r.name, r.levelno, r.pod, r.node, r.profile, r.plugin, r.reason)  # type: ignore[attr-defined]
        for r in skip_lines
    ] == [
        ("desched.framework.evictor", logging.DEBUG, f"shop/{n}", "n1", "p", "PodLifeTime", "webhook_denied")
        for n in denied
    ]
    assert all("frozen" in r.detail for r in skip_lines)  # type: ignore[attr-defined]
    assert not [r for r in caplog.records if "denied by webhook" in r.getMessage()]  # no second message


def test_requests_in_flight_are_bounded() -> None:
    in_flight = 0
    most = 0

    async def slow(request: web.Request) -> web.StreamResponse:
        nonlocal in_flight, most
        body = await request.json()
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.1)
        in_flight -= 1
        return answer(body["request"]["uid"], True)

    async def test() -> list[Skip | None]:
        app = web.Application()
        app.router.add_post("/review", slow)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        webhooks = EvictionWebhooks(asyncio.get_running_loop(), max_in_flight=2)
        req = EvictionRequest("prof", "P", "r", webhook=hook(str(server.make_url("/review")), insecure=True))
        try:
            return await asyncio.gather(*(webhooks.review_async(pod(), req, dry_run=False) for _ in range(8)))
        finally:
            await webhooks.close()
            await server.close()

    assert asyncio.run(test()) == [None] * 8
    assert most == 2


def test_a_dry_run_asks_the_webhook_with_dry_run_set_and_sends_no_eviction() -> None:
    evictions: list[str] = []
    dry: list[bool] = []

    async def evict(request: web.Request) -> web.StreamResponse:
        evictions.append(request.match_info["name"])
        return web.json_response({}, status=201)

    async def review(request: web.Request) -> web.StreamResponse:
        req = (await request.json())["request"]
        dry.append(req["dryRun"])
        return answer(req["uid"], False, "frozen")

    async def test() -> Any:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/eviction", evict)
        app.router.add_post("/review", review)
        async with api_client_for(app) as api:
            webhooks = EvictionWebhooks(asyncio.get_running_loop())
            backend = ApiEvictionBackend(api, asyncio.get_running_loop(), dry_run=True, webhooks=webhooks)
            req = EvictionRequest(
                "prof", "P", "r", webhook=hook(api.configuration.host + "/review", insecure=True)
            )
            try:
                return await asyncio.to_thread(backend.evict, pod(), req)
            finally:
                await webhooks.close()

    out = asyncio.run(test())
    assert isinstance(out, Skip) and out.reason == SkipReason.WEBHOOK_DENIED  # a dry run reports it too
    assert dry == [True] and evictions == []


def test_a_rotated_ca_file_is_read_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A caFile replaced while desched runs (a Secret volume's certificates rotated) is trusted
    from the next request on; one that cannot be read again leaves the certificates read before
    in use."""
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    _self_signed(cert, key)
    other, other_key = tmp_path / "other.crt", tmp_path / "other.key"
    _self_signed(other, other_key)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text(other.read_text())  # a CA that did not sign the server's certificate

    def rotate(source: Path) -> None:  # as the kubelet swaps a Secret volume's files: a new inode
        staged = tmp_path / "ca.crt.new"
        staged.write_text(source.read_text())
        staged.replace(ca_file)

    async def serve(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return answer(body["request"]["uid"], False, "frozen")

    async def test() -> list[Skip | None]:
        app = web.Application()
        app.router.add_post("/review", serve)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server(ssl=ctx)
        webhooks = EvictionWebhooks(asyncio.get_running_loop())
        url = f"https://localhost:{server.port}/review"
        req = EvictionRequest("prof", "P", "r", webhook=hook(url, FailurePolicy.FAIL, ca_file=str(ca_file)))
        out: list[Skip | None] = []
        try:
            out.append(await asyncio.to_thread(webhooks.review, pod(), req, dry_run=False))
            rotate(cert)  # now the server's own CA
            out.append(await asyncio.to_thread(webhooks.review, pod(), req, dry_run=False))
            ca_file.unlink()  # gone for a moment: the certificates read last stay in use
            out.append(await asyncio.to_thread(webhooks.review, pod(), req, dry_run=False))
            rotate(other)  # back to an untrusted CA
            out.append(await asyncio.to_thread(webhooks.review, pod(), req, dry_run=False))
            return out
        finally:
            await webhooks.close()
            await server.close()

    with caplog.at_level(logging.INFO, logger="desched.backends.eviction_webhook"):
        before, rotated, missing, back = asyncio.run(test())
    assert before is not None and before.reason == SkipReason.WEBHOOK_ERROR
    assert rotated is not None and rotated.reason == SkipReason.WEBHOOK_DENIED  # the answer was read
    assert missing is not None and missing.reason == SkipReason.WEBHOOK_DENIED
    assert back is not None and back.reason == SkipReason.WEBHOOK_ERROR
    assert "cannot read caFile" in caplog.text and "changed, its certificates read again" in caplog.text
