"""Leader election over HTTP (an aiohttp test server holding one coordination.k8s.io/v1 Lease as
the apiserver does: create refused with 409 when it exists, update refused with 409 when its
resourceVersion is stale): acquire, renew, another holder, taking over an abandoned lease, races,
API errors, losing leadership, and release. The elector's clock is injected; the API is real HTTP."""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from tests.kubeapi import api_client_for, status

from desched.kube.client import ApiError
from desched.runtime.leader import LeaderConfig, LeaderElector

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
CONFIG = LeaderConfig(identity="me", lease_duration=15, renew_deadline=10, retry_period=2)


class Leases:
    """The leases resource with one lease, ``descheduler``. ``fail`` answers every request with
    that status; ``race`` makes the next write lose to another replica's write."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.writes: list[tuple[str, dict[str, Any]]] = []
        self.fail: int | None = None
        self.race = False
        self.version = 0

    def held_by(self, holder: str, renew_time: str = "2026-01-01T00:00:00.000000Z") -> None:
        self.version += 1
        self.lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": "descheduler",
                "namespace": "kube-system",
                "resourceVersion": str(self.version),
            },
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 15,
                "renewTime": renew_time,
                "acquireTime": renew_time,
                "leaseTransitions": 4,
            },
        }

    def app(self) -> web.Application:
        async def get(request: web.Request) -> web.Response:
            if self.fail is not None:
                return status(self.fail, "etcdserver: leader changed")
            if self.lease is None:
                return status(404, 'leases.coordination.k8s.io "descheduler" not found', "NotFound")
            return web.json_response(self.lease)

        async def create(request: web.Request) -> web.Response:
            body = await request.json()
            self.writes.append(("POST", body))
            if self.fail is not None:
                return status(self.fail, "etcdserver: leader changed")
            if self.race:
                self.race = False
                self.held_by("other")
            if self.lease is not None:
                return status(409, 'leases.coordination.k8s.io "descheduler" already exists', "AlreadyExists")
            self.version += 1
            body["metadata"]["resourceVersion"] = str(self.version)
            self.lease = body
            return web.json_response(body, status=201)

        async def update(request: web.Request) -> web.Response:
            body = await request.json()
            self.writes.append(("PUT", body))
            if self.fail is not None:
                return status(self.fail, "etcdserver: leader changed")
            if self.race:
                self.race = False
                self.held_by("other")
            assert self.lease is not None
            if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
                return status(409, "the object has been modified; please apply your changes", "Conflict")
            self.version += 1
            body["metadata"]["resourceVersion"] = str(self.version)
            self.lease = body
            return web.json_response(body)

        app = web.Application()
        app.router.add_get(LEASES + "/descheduler", get)
        app.router.add_post(LEASES, create)
        app.router.add_put(LEASES + "/descheduler", update)
        return app


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(
    leases: Leases, test: Callable[[LeaderElector, Clock], Awaitable[None]], config: LeaderConfig = CONFIG
) -> None:
    async def main() -> None:
        async with api_client_for(leases.app()) as api:
            clock = Clock()
            await test(LeaderElector(api, config, clock=clock), clock)

    asyncio.run(main())


def test_a_free_lease_is_created_and_then_renewed() -> None:
    leases = Leases()

    async def test(e: LeaderElector, clock: Clock) -> None:
        assert not e.is_leader() and e.time_left() == 0.0
        assert await e.try_acquire_or_renew()
        assert e.is_leader() and e.became_leader.is_set() and e.transitions == 1
        assert e.time_left() == pytest.approx(15 - 1.5)
        clock.now += 5
        assert await e.try_acquire_or_renew()
        assert e.is_leader() and e.transitions == 1  # a renewal is not a new term
        assert e.time_left() == pytest.approx(15 - 1.5)  # counted from the renewal

    run(leases, test)
    (verb1, created), (verb2, renewed) = leases.writes
    assert (verb1, verb2) == ("POST", "PUT")
    assert created["spec"]["holderIdentity"] == "me" and created["spec"]["leaseTransitions"] == 0
    assert created["spec"]["leaseDurationSeconds"] == 15
    assert renewed["spec"]["acquireTime"] == created["spec"]["acquireTime"]
    assert renewed["spec"]["leaseTransitions"] == 0
    assert renewed["spec"]["renewTime"] >= created["spec"]["renewTime"]


def test_a_lease_another_replica_renews_is_left_alone() -> None:
    leases = Leases()
    leases.held_by("other")

    async def test(e: LeaderElector, clock: Clock) -> None:
        assert not await e.try_acquire_or_renew()
        # the holder renews (renewTime changes): its term starts again on our clock
        clock.now += 14
        leases.held_by("other", "2026-01-01T00:00:14.000000Z")
        assert not await e.try_acquire_or_renew()
        clock.now += 14
        assert not await e.try_acquire_or_renew()
        assert not e.is_leader() and not e.became_leader.is_set()

    run(leases, test)
    assert leases.writes == []
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "other"


def test_a_lease_not_renewed_for_its_duration_is_taken_over() -> None:
    leases = Leases()
    leases.held_by("other")

    async def test(e: LeaderElector, clock: Clock) -> None:
        assert not await e.try_acquire_or_renew()  # first seen now
        clock.now += 15  # unchanged for leaseDurationSeconds on this replica's clock
        assert await e.try_acquire_or_renew()
        assert e.is_leader()

    run(leases, test)
    [(verb, taken)] = leases.writes
    assert verb == "PUT" and taken["spec"]["holderIdentity"] == "me"
    assert taken["spec"]["leaseTransitions"] == 5  # one more term
    assert taken["spec"]["acquireTime"] == taken["spec"]["renewTime"]


@pytest.mark.parametrize("held", [False, True])
def test_losing_a_write_race_is_not_leading(held: bool) -> None:
    leases = Leases()
    if held:
        leases.held_by("me")

    async def test(e: LeaderElector, clock: Clock) -> None:
        leases.race = True  # another replica writes between our read and our write
        assert not await e.try_acquire_or_renew()
        assert not e.is_leader()
        # and then the lease is the other's, renewed: we keep out
        assert not await e.try_acquire_or_renew()

    run(leases, test)
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "other"
    assert [verb for verb, _ in leases.writes] == ["PUT" if held else "POST"]


def test_an_api_error_is_raised_to_the_loop() -> None:
    leases = Leases()
    leases.fail = 500

    async def test(e: LeaderElector, clock: Clock) -> None:
        with pytest.raises(ApiError) as info:
            await e.try_acquire_or_renew()
        assert info.value.status == 500 and not e.is_leader()

    run(leases, test)


def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    leases = Leases()
    config = LeaderConfig(identity="me", lease_duration=15, renew_deadline=10, retry_period=0.05)

    async def test(e: LeaderElector, clock: Clock) -> None:
        stop = asyncio.Event()
        with caplog.at_level(logging.INFO, logger="desched.runtime.leader"):
            task = asyncio.create_task(e.run(stop))
            await asyncio.wait_for(e.became_leader.wait(), 5)
            leases.fail = 503  # every renewal fails from now on
            await asyncio.sleep(0.3)
            assert e.is_leader()  # still inside the renew deadline
            clock.now += 10
            for _ in range(100):
                if not e.became_leader.is_set():
                    break
                await asyncio.sleep(0.02)
            assert not e.is_leader() and not e.became_leader.is_set() and e.time_left() == 0.0
            stop.set()
            await asyncio.wait_for(task, 5)
        messages = [r.getMessage() for r in caplog.records]
        assert "me became the leader (lease kube-system/descheduler)" in messages
        assert "leader election: 503 etcdserver: leader changed" in messages
        assert "me lost the lease" in messages

    run(leases, test, config)


def test_release_frees_the_lease_only_when_held() -> None:
    leases = Leases()

    async def test(e: LeaderElector, clock: Clock) -> None:
        await e.release()  # not leading: nothing to do
        assert leases.writes == []
        assert await e.try_acquire_or_renew()
        await e.release()
        assert not e.is_leader()
        lease = copy.deepcopy(leases.lease)
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "" and lease["spec"]["leaseDurationSeconds"] == 1
        # taken over by another replica meanwhile: left alone
        assert await e.try_acquire_or_renew()
        leases.held_by("other")
        await e.release()
        assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "other"

    run(leases, test)
    assert [verb for verb, _ in leases.writes] == ["POST", "PUT", "PUT"]
