"""``evictionPolicy.webhook`` against a real kube-apiserver: ``desched run`` (one cycle, under the
deploy/ ServiceAccount) asks a TLS webhook served by this test (aiohttp on loopback, its self-signed
certificate passed as ``caBundle``) before each eviction. Exactly the pods it allows are evicted; the
ones it denies carry ``webhook_denied`` (an ``EvictionSkipped`` Event and the evictor's ``eviction
skipped`` line at --v=4). With no webhook listening, ``failurePolicy: Ignore`` evicts and ``Fail``
skips (``webhook_error``). A webhook that hangs costs at most ``timeout`` per eviction and the
cycle's limit still holds.

Reuses tests/e2e/test_live_run.py's cluster (kwok nodes e2e-n1..3).
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from desched.runtime.tls import _self_signed
from tests.e2e import test_live_run
from tests.e2e.support import free_port, single_plugin_policy, wait_for
from tests.e2e.test_live_run import CREATED, Cluster, gone_or_terminating, make_pod, new_namespace, run_once
from tests.e2e.test_safe_disruption import skip_reasons

#: the live-run module's cluster fixture (kwok nodes e2e-n1..3, desched's ServiceAccount kubeconfig)
cluster = test_live_run.cluster


class Webhook:
    """An HTTPS eviction webhook on loopback, in its own thread: denies pods labelled
    ``freeze: "true"``, or (``hang``) never answers. ``asked`` lists the pods it was asked about."""

    def __init__(self, tmp: Path) -> None:
        cert, key = tmp / "webhook.crt", tmp / "webhook.key"
        _self_signed(cert, key)
        self.ca_bundle = base64.b64encode(cert.read_bytes()).decode()
        self._ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._ctx.load_cert_chain(cert, key)
        self.hang = False
        self.asked: list[str] = []
        self.port = free_port()
        self.url = f"https://localhost:{self.port}/review"
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._runner: web.AppRunner | None = None

    async def _review(self, request: web.Request) -> web.StreamResponse:
        req = (await request.json())["request"]
        self.asked.append(req["pod"]["name"])
        if self.hang:
            await asyncio.sleep(60)
        frozen = req["pod"]["labels"].get("freeze") == "true"
        return web.json_response(
            {
                "apiVersion": "desched.io/v1alpha1",
                "kind": "EvictionReview",
                "response": {"uid": req["uid"], "allowed": not frozen, "reason": "change freeze"},
            }
        )

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/review", self._review)
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, ssl_context=self._ctx)
        self._loop.run_until_complete(site.start())
        self._started.set()
        self._loop.run_forever()

    def start(self) -> None:
        self._thread.start()
        assert self._started.wait(10), "the test webhook did not start"

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[Webhook]:
    w = Webhook(tmp_path)
    w.start()
    try:
        yield w
    finally:
        w.stop()


def old_pods(cp: Any, ns: str, frozen: set[str], count: int = 4) -> list[str]:
    """``count`` running pods in ns on e2e-n1, one owner each; those named in ``frozen`` labelled
    ``freeze: "true"``. PodLifeTime (1 s) wants every one of them gone."""
    names = [f"p-{i}" for i in range(count)]
    for name in names:
        labels = {"freeze": "true"} if name in frozen else {}
        make_pod(cp, ns, name, "e2e-n1", owner=name, labels=labels)
    CREATED[ns] = set(names)
    test_live_run.wait_running(cp, ns, count)
    time.sleep(1.5)  # older than maxPodLifeTimeSeconds
    return names


def webhook_policy(tmp: Path, ns: str, hook: dict[str, Any], **top: Any) -> Path:
    return single_plugin_policy(
        tmp / f"policy-{ns}.yaml",
        ns,
        "PodLifeTime",
        {"maxPodLifeTimeSeconds": 1},
        evictionPolicy={"webhook": hook},
        **top,
    )


def skip_lines(stderr: str, ns: str) -> dict[str, str]:
    """pod name -> reason, from the evictor's ``eviction skipped`` lines (--v=4, text format)."""
    out = {}
    for line in stderr.splitlines():
        if "eviction skipped " in line:
            pod = re.search(rf" pod={re.escape(ns)}/(\S+)", line)
            reason = re.search(r" reason=(\S+)", line)
            assert pod and reason and " profile=e2e " in line and " plugin=PodLifeTime " in line, line
            out[pod.group(1)] = reason.group(1)
    return out


def test_run_evicts_exactly_what_the_webhook_allows(
    cluster: Cluster, tmp_path: Path, webhook: Webhook
) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "hook")
    frozen = {"p-0", "p-2"}
    names = old_pods(cp, ns, frozen)
    pol = webhook_policy(tmp_path, ns, {"url": webhook.url, "caBundle": webhook.ca_bundle})
    proc = run_once(cluster, pol, "--v=4")
    time.sleep(2)
    assert gone_or_terminating(cp, ns) == set(names) - frozen, proc.stderr
    assert sorted(webhook.asked) == names  # asked once about each, over TLS trusted via caBundle
    reasons = wait_for(lambda: skip_reasons(cluster, ns) or None, "EvictionSkipped events", timeout=30)
    assert reasons == {n: {"webhook_denied"} for n in frozen}, reasons
    assert skip_lines(proc.stderr, ns) == {n: "webhook_denied" for n in frozen}, proc.stderr
    assert re.search(r"cycle done .* evictionsSkipped=2 ", proc.stderr), proc.stderr


@pytest.mark.parametrize("failure_policy", ["Ignore", "Fail"])
def test_a_webhook_down_follows_the_failure_policy(
    cluster: Cluster, tmp_path: Path, failure_policy: str
) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, f"hookdown-{failure_policy.lower()}")
    names = old_pods(cp, ns, set(), count=2)
    down = f"https://localhost:{free_port()}/review"  # nothing listens there
    hook = {"url": down, "failurePolicy": failure_policy, "caBundle": _any_ca(tmp_path)}
    proc = run_once(cluster, webhook_policy(tmp_path, ns, hook), "--v=4")
    time.sleep(2)
    evicted = gone_or_terminating(cp, ns)
    if failure_policy == "Ignore":
        assert evicted == set(names), proc.stderr
        assert "failurePolicy Ignore: allowed" in proc.stderr
        assert skip_lines(proc.stderr, ns) == {}
    else:
        assert evicted == set(), proc.stderr
        assert skip_lines(proc.stderr, ns) == {n: "webhook_error" for n in names}, proc.stderr
        reasons = wait_for(lambda: skip_reasons(cluster, ns) or None, "EvictionSkipped events", timeout=30)
        assert reasons == {n: {"webhook_error"} for n in names}, reasons


def _any_ca(tmp: Path) -> str:
    cert, key = tmp / "other.crt", tmp / "other.key"
    _self_signed(cert, key)
    return base64.b64encode(cert.read_bytes()).decode()


def test_a_hanging_webhook_costs_at_most_its_timeout_and_the_limit_holds(
    cluster: Cluster, tmp_path: Path, webhook: Webhook
) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "hookhang")
    names = old_pods(cp, ns, set())
    webhook.hang = True
    hook = {"url": webhook.url, "caBundle": webhook.ca_bundle, "timeout": "1s"}  # failurePolicy Ignore
    proc = run_once(cluster, webhook_policy(tmp_path, ns, hook, maxNoOfPodsToEvictTotal=2))
    time.sleep(2)
    evicted = gone_or_terminating(cp, ns)
    assert len(evicted) == 2 and evicted < set(names), (evicted, proc.stderr)  # the limit holds
    assert len(webhook.asked) == 2  # the pods past the limit are never sent for review
    seconds = float(re.search(r"cycle done .* seconds=(\S+)", proc.stderr).group(1))  # type: ignore[union-attr]
    # two evictions, each waiting at most its 1s timeout (the rest of the cycle: well under a second)
    assert 2.0 <= seconds < 3.0, (seconds, proc.stderr)
