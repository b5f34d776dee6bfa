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
            for _ in range(300):
                if events:
                    break
                await asyncio.sleep(0.01)

    asyncio.run(test())
    assert [(e["ns"], e["type"], e["reason"], e["action"]) for e in events] == [
        ("shop", "Normal", EVICTION_SKIPPED, "Descheduled")
    ]
    assert events[0]["note"] == (
        f"pod eviction from n1 node by {REQUESTED_BY} skipped (max_evictions_per_workload): "
        "ReplicaSet shop/web already had 1 eviction(s) in this cycle (maxEvictionsPerWorkload: 1)"
    )
    assert events[0]["regarding"]["name"] == "web-1"
