"""``evictionPolicy.surge`` in the live backend, against an aiohttp server answering as the
apiserver: a pod of an eligible Deployment is moved by a rollout restart (the PDB asked first, by a
dry-run eviction; no eviction sent), an ineligible one is evicted as today, a dry run patches
nothing, a Deployment is surged once a cycle, and the follow-up tells done from failed."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from datetime import timedelta
from typing import Any

from aiohttp import web
from tests import builders
from tests.kubeapi import api_client_for, status

from desched.api.evictionpolicy import Surge
from desched.backends import surge as surging
from desched.backends.api_eviction import ApiEvictionBackend, EventRecorder
from desched.framework.evictor import EvictionRecord, EvictionRequest, Surged
from desched.framework.types import EvictResult
from desched.k8s.deployments import RESTARTED_AT

SURGE = Surge(1, timedelta(minutes=10))
REQ = EvictionRequest("prof", "RemovePodsViolatingNodeTaints", "tainted", surge=SURGE)


def pod(name: str = "web-abc") -> Any:
    return builders.pod(name, namespace="shop", node="n1", uid=f"uid-{name}", owner=("ReplicaSet", "web-5f"))


def deployment(max_surge: Any = 1, generation: int = 3) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "shop", "generation": generation, "resourceVersion": "41"},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": max_surge}},
        },
        "status": {
            "observedGeneration": generation,
            "replicas": 1,
            "updatedReplicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
        },
    }


class Apiserver:
    def __init__(
        self,
        dep: dict[str, Any],
        *,
        pdb_allows: bool = True,
        rs_owner: str = "Deployment",
        patch_status: int = 200,
        rs_status: int = 200,
    ) -> None:
        self.dep = dep
        self.patch_status = patch_status
        self.rs_status = rs_status
        self.pdb_allows = pdb_allows
        self.rs_owner = rs_owner
        self.requests: list[tuple[str, str, str]] = []  # (method, path, query)
        self.patches: list[dict[str, Any]] = []
        self.pod_exists = True

    def app(self) -> web.Application:
        async def rs(request: web.Request) -> web.StreamResponse:
            self.requests.append(("GET", request.path, request.query_string))
            if self.rs_status != 200:
                return status(self.rs_status, "replicasets.apps is forbidden", "Forbidden")
            owner = {"kind": self.rs_owner, "name": "web", "controller": True}
            return web.json_response({"metadata": {"name": "web-5f", "ownerReferences": [owner]}})

        async def dep(request: web.Request) -> web.StreamResponse:
            self.requests.append((request.method, request.path, request.query_string))
            if request.method == "PATCH":
                if self.patch_status != 200:
                    return status(self.patch_status, "the object has been modified", "Conflict")
                patch = await request.json()
                self.patches.append(patch)
                self.dep["metadata"]["generation"] += 1
            return web.json_response(self.dep)

        async def evict(request: web.Request) -> web.StreamResponse:
            self.requests.append(("POST", request.path, request.query_string))
            if not self.pdb_allows:
                return status(429, "Cannot evict pod as it would violate the pod's disruption budget.")
            return web.json_response({"kind": "Status", "status": "Success"}, status=201)

        async def get_pod(request: web.Request) -> web.StreamResponse:
            if not self.pod_exists:
                return status(404, "pods not found", "NotFound")
            return web.json_response({"metadata": {"name": "web-abc", "uid": "uid-web-abc"}})

        app = web.Application()
        app.router.add_get("/apis/apps/v1/namespaces/shop/replicasets/web-5f", rs)
        app.router.add_route("*", "/apis/apps/v1/namespaces/shop/deployments/web", dep)
        app.router.add_post("/api/v1/namespaces/shop/pods/{name}/eviction", evict)
        app.router.add_get("/api/v1/namespaces/shop/pods/{name}", get_pod)
        return app


def evict(
    server: Apiserver, pods: list[Any], request: EvictionRequest = REQ, **kw: Any
) -> tuple[list[Any], Any]:
    out: list[Any] = []
    backend_out: list[ApiEvictionBackend] = []

    async def test() -> None:
        async with api_client_for(server.app()) as api:
            backend = ApiEvictionBackend(api, asyncio.get_running_loop(), **kw)
            for p in pods:
                out.append(await asyncio.to_thread(backend.evict, p, request))
            backend_out.append(backend)

    asyncio.run(test())
    return out, backend_out[0]


def evictions(server: Apiserver) -> list[str]:
    """The eviction requests that were not dry runs (the ones that evict)."""
    return [q for m, p, q in server.requests if p.endswith("/eviction") and "dryRun=All" not in q]


def test_an_eligible_pod_is_surged_not_evicted() -> None:
    server = Apiserver(deployment())
    answers, backend = evict(server, [pod()])
    assert answers == [Surged("Deployment shop/web")]
    assert evictions(server) == []  # no eviction: the PDB was asked by a dry run only
    assert [q for _, p, q in server.requests if p.endswith("/eviction")] == ["dryRun=All"]
    [patch] = server.patches
    assert patch["metadata"] == {"resourceVersion": "41"}
    assert RESTARTED_AT in patch["spec"]["template"]["metadata"]["annotations"]
    [started] = backend.surges
    assert (started.deployment, started.generation, started.pod_uid) == ("web", 4, "uid-web-abc")
    assert not started.dry_run
    # while its rollout goes on (and a while after) the old pod is never evicted in a later cycle
    assert backend.already_evicted(pod())
    assert backend.ledger._until["uid-web-abc"] - backend.clock() > SURGE.timeout.total_seconds()


def test_without_surge_in_the_request_the_pod_is_evicted() -> None:
    server = Apiserver(deployment())
    answers, _ = evict(server, [pod()], EvictionRequest("prof", "P", "r"))
    assert answers == [None] and server.patches == [] and len(evictions(server)) == 1


def test_an_ineligible_deployment_is_evicted_as_today() -> None:
    server = Apiserver(deployment(max_surge=0))
    answers, backend = evict(server, [pod()])
    assert answers == [None]
    assert server.patches == [] and len(evictions(server)) == 1 and backend.surges == []


def test_a_replicaset_without_a_deployment_is_evicted_as_today() -> None:
    server = Apiserver(deployment(), rs_owner="SomethingElse")
    answers, _ = evict(server, [pod()])
    assert answers == [None] and server.patches == [] and len(evictions(server)) == 1


def test_a_statefulset_or_bare_pod_is_never_looked_up() -> None:
    server = Apiserver(deployment())
    sts = builders.pod("db-0", namespace="shop", node="n1", uid="u0", owner=("StatefulSet", "db"))
    bare = builders.pod("solo", namespace="shop", node="n1", uid="u1", owner=None)
    answers, _ = evict(server, [sts, bare])
    assert answers == [None, None]
    assert server.patches == [] and len(evictions(server)) == 2
    assert not any("replicasets" in p or "deployments" in p for _, p, _ in server.requests)


def test_the_pdb_is_respected_before_surging() -> None:
    server = Apiserver(deployment(), pdb_allows=False)
    answers, backend = evict(server, [pod()])
    assert isinstance(answers[0], str) and "disruption budget" in answers[0]
    assert server.patches == [] and evictions(server) == [] and backend.surges == []


def test_a_deployment_changed_since_it_was_read_is_not_moved() -> None:
    server = Apiserver(deployment(), patch_status=409)
    answers, backend = evict(server, [pod()])
    assert isinstance(answers[0], str) and "refused" in answers[0] and "409" in answers[0]
    assert evictions(server) == [] and backend.surges == []


def test_without_rbac_to_read_the_replicaset_the_pod_is_not_moved() -> None:
    server = Apiserver(deployment(), rs_status=403)
    answers, _ = evict(server, [pod()])
    assert isinstance(answers[0], str) and "could not read ReplicaSet shop/web-5f" in answers[0]
    assert evictions(server) == [] and server.patches == []


def test_dry_run_surges_nothing_and_says_what_it_would_do(caplog: Any) -> None:
    server = Apiserver(deployment())
    with caplog.at_level(logging.INFO, logger="desched.backends.api_eviction"):
        answers, backend = evict(server, [pod()], dry_run=True)
    assert "would surge pod shop/web-abc: rollout restart of Deployment shop/web" in caplog.text
    assert answers == [Surged("Deployment shop/web")]
    assert server.patches == [] and evictions(server) == []
    assert [s.dry_run for s in backend.surges] == [True]
    assert not backend.already_evicted(pod())


def test_a_deployment_is_surged_at_most_once_a_cycle() -> None:
    dep = deployment()
    server = Apiserver(dep)
    answers, _ = evict(server, [pod("web-abc"), pod("web-def")])
    assert answers[0] == Surged("Deployment shop/web")
    assert isinstance(answers[1], str) and "already surged in this cycle" in answers[1]
    assert len(server.patches) == 1 and evictions(server) == []


def _follow(server: Apiserver, started: surging.Started) -> surging.Followed:
    out: list[surging.Followed] = []

    async def test() -> None:
        async with api_client_for(server.app()) as api:
            out.append(await surging.follow_surge(api, started, poll=0.05))

    asyncio.run(test())
    return out[0]


def _started(timeout: float, generation: int = 4) -> surging.Started:
    return surging.Started(
        "shop", "web", generation, "web-abc", "uid-web-abc", "n1", "p", "P", timeout, time.monotonic()
    )


def test_follow_up_succeeds_when_the_rollout_is_done_and_the_old_pod_gone() -> None:
    server = Apiserver(deployment(generation=4))
    server.pod_exists = False
    done = _follow(server, _started(5.0))
    assert done.succeeded and "1 available of 1" in done.detail


def test_follow_up_fails_after_the_timeout_while_the_old_pod_stays() -> None:
    server = Apiserver(deployment(generation=4))  # done, but the old pod is still there
    done = _follow(server, _started(0.3))
    assert not done.succeeded
    assert "not done after" in done.detail and "web-abc is still there" in done.detail
    assert done.seconds >= 0.3


def test_follow_up_fails_when_the_restart_is_never_observed() -> None:
    server = Apiserver(deployment(generation=3))
    server.pod_exists = False
    done = _follow(server, _started(0.3, generation=4))
    assert not done.succeeded and "the old pod is gone" in done.detail


def test_json_of_the_patch_is_a_merge_patch() -> None:
    # (kept apart: the content type the apiserver needs for a partial update)
    server = Apiserver(deployment())
    seen: list[str] = []
    app = server.app()

    @web.middleware
    async def content_type(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method == "PATCH":
            seen.append(request.content_type)
        return await handler(request)  # type: ignore[no-any-return]

    app.middlewares.append(content_type)

    async def test() -> None:
        async with api_client_for(app) as api:
            backend = ApiEvictionBackend(api, asyncio.get_running_loop())
            await asyncio.to_thread(backend.evict, pod(), REQ)

    asyncio.run(test())
    assert seen == ["application/merge-patch+json"]
    assert json.dumps(server.patches[0])  # a JSON document was sent


def test_surge_events_on_the_pod_and_the_deployment() -> None:
    events: list[dict[str, Any]] = []

    async def post(request: web.Request) -> web.StreamResponse:
        events.append(await request.json())
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", post)
    rec = EvictionRecord(
        "shop",
        "web-abc",
        "n1",
        "p",
        "RemovePodsViolatingNodeTaints",
        "tainted",
        EvictResult.EVICTED,
        method="surge",
        target="Deployment shop/web",
    )

    async def test() -> None:
        async with api_client_for(app) as api:
            recorder = EventRecorder(api, asyncio.get_running_loop(), failures=True)
            recorder.observe(rec)
            recorder.observe_surge(surging.Followed(_started(60), False, "not done after 1m: ...", 60.0))
            await recorder.flush()

    asyncio.run(test())
    seen = sorted((e["type"], e["reason"], e["regarding"]["kind"], e["regarding"]["name"]) for e in events)
    assert seen == [
        ("Normal", "RemovePodsViolatingNodeTaints", "Pod", "web-abc"),
        ("Normal", "SurgeStarted", "Deployment", "web"),
        ("Warning", "SurgeFailed", "Deployment", "web"),
        ("Warning", "SurgeFailed", "Pod", "web-abc"),
    ]
    on_pod = next(e for e in events if e["reason"] == "RemovePodsViolatingNodeTaints")
    assert on_pod["note"] == (
        "pod surged from n1 node by sigs.k8s.io/descheduler: rollout restart of Deployment shop/web "
        "(make before break)"
    )
    failed = next(e for e in events if e["reason"] == "SurgeFailed")
    assert "failed: not done after 1m" in failed["note"]
