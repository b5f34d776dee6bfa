"""The Event of an eviction the evictionPolicy skipped (reason ``EvictionSkipped``), as posted to
events.k8s.io/v1 (an aiohttp server answering as the apiserver; the real one: tests/e2e)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from tests.kubeapi import api_client_for

from desched.backends.api_eviction import EVICTION_SKIPPED, REQUESTED_BY, EventRecorder
from desched.framework.evictor import EvictionRecord
from desched.framework.types import EvictResult


def test_a_skipped_eviction_has_an_eviction_skipped_event_whatever_the_failure_switch() -> None:
    events: list[dict[str, Any]] = []

    async def post(request: web.Request) -> web.Response:
        events.append({"ns": request.match_info["ns"], **(await request.json())})
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", post)
    skipped = EvictionRecord(
        "shop",
        "web-1",
        "n1",
        "prof",
        "RemoveDuplicates",
        "dup",
        EvictResult.SKIPPED,
        "ReplicaSet shop/web already had 1 eviction(s) in this cycle (maxEvictionsPerWorkload: 1)",
        "uid-web-1",
        "max_evictions_per_workload",
    )

    async def test() -> None:
        async with api_client_for(app) as api:
            recorder = EventRecorder(api, asyncio.get_running_loop(), failures=False)
            recorder.observe(skipped)
            recorder.observe(skipped)  # the next cycle: the same pod, the same reason: not again
            for _ in range(300):
                if events:
                    break
                await asyncio.sleep(0.01)
            await recorder.flush()
            await asyncio.sleep(0.2)

    asyncio.run(test())
    assert [(e["ns"], e["type"], e["reason"], e["action"]) for e in events] == [
        ("shop", "Normal", EVICTION_SKIPPED, "Descheduled")
    ]
    assert events[0]["note"] == (
        f"pod eviction from n1 node by {REQUESTED_BY} skipped (max_evictions_per_workload): "
        "ReplicaSet shop/web already had 1 eviction(s) in this cycle (maxEvictionsPerWorkload: 1)"
    )
    assert events[0]["regarding"]["name"] == "web-1"


def test_event_driven_runs_start_a_cycle_when_an_awaited_replacement_is_ready() -> None:
    from datetime import UTC, datetime

    from tests import builders

    from desched.api.policy import load_policy
    from desched.app import run as live
    from desched.backends.simulated_eviction import SimulatedBackend
    from desched.framework.framework import Framework
    from desched.plugins import default_registry

    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "evictionPolicy": {"waitForReplacement": {}},
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}}],
                "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
            }
        ],
    }
    policy = load_policy(doc, default_registry())
    owner = ("ReplicaSet", "web")
    old = [
        builders.pod(f"web-{i}", node="n1", owner=owner, ready=True, created="2026-01-01T00:00:00Z")
        for i in range(2)
    ]
    snap = builders.snapshot(nodes=[builders.node("n1"), builders.node("n2")], pods=old)
    d = live.Descheduler(live.RunOptions(policy_file="-", event_driven=True), policy)
    d.ready = True
    d.framework = Framework(policy, default_registry(), clock=lambda: datetime(2026, 11, 24, tzinfo=UTC))
    result = d.framework.run_cycle(snap, SimulatedBackend(snap))
    assert [r.name for r in result.evictions] == ["web-0"]
    assert [r.skip_reason for r in result.skips] == ["wait_for_replacement"]

    def changed(old_pod: object, new_pod: object) -> bool:
        d.trigger.clear()
        d._on_change("Pod", "MODIFIED", old_pod, new_pod)
        return d.trigger.is_set()

    starting = builders.pod("web-x", node="n2", owner=owner, ready=False)
    ready = builders.pod("web-x", node="n2", owner=owner, ready=True)
    other = builders.pod("api-x", node="n2", owner=("ReplicaSet", "api"), ready=True)
    assert changed(starting, ready)  # the replacement became Ready: a cycle now
    assert not changed(ready, ready)  # already Ready: nothing new
    assert not changed(None, other)  # another workload waits for nothing
    d.options = live.RunOptions(policy_file="-", event_driven=False)
    assert not changed(starting, ready)  # interval mode: the next cycle sees it
