"""EvictionsInBackground (upstream's alpha feature gate, for KubeVirt): a pod annotated
request-evict-only whose eviction is answered 429 "Eviction triggered evacuation" is tracked as an
eviction in progress until it leaves; tracked evictions are not sent again and count against the
limits of every cycle; metrics say ``background``; no Event. The backend runs over HTTP against an
aiohttp server answering as the apiserver does when KubeVirt's webhook denies the eviction."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import msgspec
import pytest
from aiohttp import web
from tests import builders
from tests.kubeapi import api_client_for, status

from desched.api.policy import EvictionLimits
from desched.backends.api_eviction import ApiEvictionBackend, EventRecorder
from desched.backends.background_evictions import (
    ASSUMED_TIMEOUT_SECONDS,
    EVICTION_IN_PROGRESS,
    REQUEST_EVICT_ONLY,
    BackgroundEvictions,
)
from desched.framework.evictor import (
    BackgroundCounts,
    EvictionRecord,
    EvictionRequest,
    InBackground,
    PodEvictor,
)
from desched.framework.types import EvictResult
from desched.k8s.objects import Pod
from desched.runtime.metrics import Metrics

EVICTION = "/api/v1/namespaces/{ns}/pods/{name}/eviction"
REQ = EvictionRequest("prof", "PodLifeTime", "too old")
#: what the apiserver answers when KubeVirt's validating webhook denies the eviction
KUBEVIRT = (
    'admission webhook "virt-launcher-eviction-interceptor.kubevirt.io" denied the request: '
    "Eviction triggered evacuation of VMI default/vm-1"
)
PDB = "Cannot evict pod as it would violate the pod's disruption budget."


def vm_pod(
    name: str = "virt-launcher-vm-1", *, node: str = "n1", phase: str = "Running", **annotations: str
) -> Pod:
    return builders.pod(
        name,
        node=node,
        uid=f"uid-{name}",
        owner=("VirtualMachineInstance", "vm-1"),
        phase=phase,
        annotations={REQUEST_EVICT_ONLY: "", **annotations},
    )


def plain_pod(name: str = "web-1") -> Pod:
    return builders.pod(name, node="n1", uid=f"uid-{name}", owner=("ReplicaSet", "web"))


def evict_over_http(
    pod: Pod, message: str, *, gate: bool = True, code: int = 429
) -> tuple[Any, ApiEvictionBackend, int]:
    sent: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        sent.append(request.match_info["name"])
        return status(code, message, "TooManyRequests")

    app = web.Application()
    app.router.add_post(EVICTION, answer)
    out: list[Any] = []

    async def test() -> None:
        async with api_client_for(app) as api:
            bg = BackgroundEvictions() if gate else None
            backend = ApiEvictionBackend(api, asyncio.get_running_loop(), background=bg)
            out.append(await asyncio.to_thread(backend.evict, pod, REQ))
            out.append(backend)

    asyncio.run(test())  # type: ignore[arg-type]
    return out[0], out[1], len(sent)


def test_kubevirts_answer_is_an_eviction_in_background() -> None:
    pod = vm_pod()
    answer, backend, sent = evict_over_http(pod, KUBEVIRT)
    assert sent == 1
    assert isinstance(answer, InBackground) and "Eviction triggered evacuation" in answer.message
    assert backend.already_evicted(pod)  # never sent again while it goes on
    assert backend.background_counts() == BackgroundCounts(1, {"n1": 1}, {"default": 1})


@pytest.mark.parametrize(
    ("pod", "message", "gate"),
    [
        (vm_pod(), KUBEVIRT, False),  # the feature gate is off: a refusal like any other
        (plain_pod(), KUBEVIRT, True),  # the pod does not ask for eviction in background
        (vm_pod(), PDB, True),  # a PDB's 429 is a refusal
    ],
)
def test_other_429s_are_refusals(pod: Pod, message: str, gate: bool) -> None:
    answer, backend, _ = evict_over_http(pod, message, gate=gate)
    assert answer == f"429 {message}"
    assert not backend.already_evicted(pod)
    assert backend.background_counts().total == 0


def test_a_finished_pod_is_not_tracked() -> None:
    pod = vm_pod(phase="Succeeded")
    answer, backend, _ = evict_over_http(pod, KUBEVIRT)
    assert isinstance(answer, str) and "the pod has finished" in answer
    assert backend.background_counts().total == 0


# ------------------------------------------------------------------------------ tracking


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def with_annotations(pod: Pod, annotations: dict[str, str]) -> Pod:
    return msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(pod.metadata, annotations=annotations)
    )


def test_an_assumed_eviction_ends_after_ten_minutes_unless_confirmed() -> None:
    clock = Clock()
    bg = BackgroundEvictions(clock=clock)
    pod = vm_pod()
    bg.assume(pod)
    bg.sync([pod])
    assert bg.tracks(pod)
    clock.now += ASSUMED_TIMEOUT_SECONDS + 1
    bg.sync([pod])
    assert not bg.tracks(pod)  # never confirmed: may be evicted again
    # confirmed by the in-progress annotation: tracked as long as the migration goes on
    bg.assume(pod)
    migrating = vm_pod(**{EVICTION_IN_PROGRESS: ""})
    bg.sync([migrating])
    clock.now += 10 * ASSUMED_TIMEOUT_SECONDS
    bg.sync([migrating])
    assert bg.tracks(migrating)


@pytest.mark.parametrize(
    ("later", "why"),
    [
        ([], "gone"),
        ([vm_pod(phase="Succeeded", **{EVICTION_IN_PROGRESS: ""})], "finished"),
        ([vm_pod()], "in-progress annotation removed: cancelled or failed"),
        ([with_annotations(vm_pod(), {EVICTION_IN_PROGRESS: ""})], "no longer request-evict-only"),
    ],
)
def test_tracking_ends_when_the_pod_leaves_or_the_eviction_stops(later: list[Pod], why: str) -> None:
    bg = BackgroundEvictions()
    migrating = vm_pod(**{EVICTION_IN_PROGRESS: ""})
    # found in progress though this process never asked (a restart, another replica)
    bg.sync([migrating, plain_pod()])
    assert bg.tracks(migrating) and len(bg) == 1
    bg.sync(later)
    assert not bg.tracks(migrating), why


# ------------------------------------------------------------------------------ limits


class Backend:
    """An eviction backend answering "in background" for VM pods, with earlier ones going on."""

    def __init__(self, counts: BackgroundCounts) -> None:
        self.counts = counts
        self.sent: list[str] = []

    def background_counts(self) -> BackgroundCounts:
        return self.counts

    def evict(self, pod: Pod, request: EvictionRequest) -> str | InBackground | None:
        self.sent.append(pod.metadata.name)
        return InBackground(KUBEVIRT) if REQUEST_EVICT_ONLY in (pod.metadata.annotations or {}) else None


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (EvictionLimits(per_node=2), [EvictResult.EVICTED, EvictResult.NODE_LIMIT]),
        (EvictionLimits(total=2), [EvictResult.EVICTED, EvictResult.TOTAL_LIMIT]),
        (EvictionLimits(per_namespace=2), [EvictResult.EVICTED, EvictResult.NAMESPACE_LIMIT]),
        (EvictionLimits(), [EvictResult.EVICTED, EvictResult.EVICTED]),
    ],
)
def test_evictions_going_on_in_background_count_against_every_limit(
    limits: EvictionLimits, expected: list[EvictResult]
) -> None:
    backend = Backend(BackgroundCounts(1, {"n1": 1}, {"default": 1}))
    evictor = PodEvictor(backend, limits)
    got = [evictor.evict(plain_pod(f"p{i}"), "prof", "PodLifeTime", "old") for i in range(2)]
    assert got == expected


def test_a_background_eviction_counts_in_its_cycle_and_is_reported_as_background() -> None:
    backend = Backend(BackgroundCounts())
    seen: list[EvictionRecord] = []
    evictor = PodEvictor(backend, EvictionLimits(per_node=1), observers=[seen.append])
    assert evictor.evict(vm_pod(), "prof", "PodLifeTime", "old") is EvictResult.BACKGROUND
    assert EvictResult.BACKGROUND.ok  # the plugin counts the pod as leaving
    assert evictor.evict(plain_pod(), "prof", "PodLifeTime", "old") is EvictResult.NODE_LIMIT
    (record,) = [r for r in seen if r.result is EvictResult.BACKGROUND]
    assert "Eviction triggered evacuation" in record.error
    metrics = Metrics()
    metrics.observe_eviction(record)
    labels = {
        "result": "background",
        "strategy": "PodLifeTime",
        "profile": "prof",
        "namespace": "default",
        "node": "n1",
    }
    assert metrics.registry.get_sample_value("descheduler_pods_evicted_total", labels) == 1.0


def test_no_event_for_an_eviction_in_background() -> None:
    posted: list[dict[str, Any]] = []

    async def events(request: web.Request) -> web.Response:
        posted.append(await request.json())
        return web.json_response({}, status=201)

    app = web.Application()
    app.router.add_post("/apis/events.k8s.io/v1/namespaces/{ns}/events", events)
    record = EvictionRecord(
        "default", "vm", "n1", "prof", "PodLifeTime", "old", EvictResult.BACKGROUND, KUBEVIRT
    )

    async def test() -> None:
        async with api_client_for(app) as api:
            recorder = EventRecorder(api, asyncio.get_running_loop(), failures=True)
            recorder.observe(record)
            recorder.observe(dataclasses.replace(record, name="refused", result=EvictResult.FAILED))
            for _ in range(50):
                if posted:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.2)

    asyncio.run(test())  # type: ignore[arg-type]
    # only the refusal got its (EvictionFailed) event
    assert [(e["regarding"]["name"], e["reason"]) for e in posted] == [("refused", "EvictionFailed")]
