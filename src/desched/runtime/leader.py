"""Leader election with a ``coordination.k8s.io/v1`` Lease, with client-go's rules and defaults.

A candidate takes the lease when it is free or its holder has not renewed it for
``lease_duration`` (measured on this replica's own clock from when it last saw the lease change,
as client-go does, so clock skew between replicas does not matter). The leader renews every
``retry_period``; it counts itself leader only while its last successful renewal is younger than
``renew_deadline``. Since ``renew_deadline < lease_duration``, a leader that cannot renew stops
evicting before any other replica may take over. On shutdown the lease is released.

:meth:`LeaderElector.time_left` bounds every eviction request: the lease may pass to another
replica ``lease_duration`` after the last renewal this replica *sent* (the other replica starts
its own timer no earlier than when it sees that renewal), minus a safety margin for clock rate
drift and for a request's way to the apiserver. A request is not sent, or is abandoned, before then.

kubernetes_asyncio ships an elector, but it does not release on shutdown and gives no way to ask
"am I still safely the leader?" right before a side effect; this one is small and does both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from desched.kube.client import ApiError, request

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaderConfig:
    name: str = "descheduler"
    namespace: str = "kube-system"
    identity: str = ""
    lease_duration: float = 137.0
    renew_deadline: float = 107.0
    retry_period: float = 26.0

    @property
    def safety_margin(self) -> float:
        """Kept off the lease's end when bounding a request: 10% of the duration, at least 1 s."""
        return max(1.0, 0.1 * self.lease_duration)


def _micro_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self, api: client.ApiClient, config: LeaderConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not config.identity:
            raise ValueError("leader election needs an identity")
        if config.renew_deadline >= config.lease_duration:
            raise ValueError(
                "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"
            )
        if config.retry_period >= config.renew_deadline:
            raise ValueError("--leader-elect-retry-period must be shorter than --leader-elect-renew-deadline")
        self.api = api
        self.config = config
        self._clock = clock
        self._last_renew = float("-inf")  # when the last successful renewal was sent
        self._leading = False
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = float("-inf")
        self.became_leader = asyncio.Event()
        self.transitions = 0

    @property
    def path(self) -> str:
        c = self.config
        return f"/apis/coordination.k8s.io/v1/namespaces/{c.namespace}/leases/{c.name}"

    def is_leader(self) -> bool:
        """True only while a renewal younger than the renew deadline backs it."""
        return self._leading and self._clock() - self._last_renew < self.config.renew_deadline

    def time_left(self) -> float:
        """Seconds before the lease could pass to another replica, less the safety margin (0 if
        not leading): an eviction request must be over by then."""
        if not self._leading:
            return 0.0
        c = self.config
        return max(0.0, self._last_renew + c.lease_duration - c.safety_margin - self._clock())

    async def _get(self) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(await request(self.api, "GET", self.path, timeout=10))
            return data
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    async def try_acquire_or_renew(self) -> bool:
        c = self.config
        sent = self._clock()  # a renewal counts from before it was sent: the safe side
        now = datetime.now(UTC)
        lease = await self._get()
        spec_new = {
            "holderIdentity": c.identity,
            "leaseDurationSeconds": int(c.lease_duration),
            "renewTime": _micro_time(now),
        }
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": c.name, "namespace": c.namespace},
                "spec": {**spec_new, "acquireTime": _micro_time(now), "leaseTransitions": 0},
            }
            try:
                await request(
                    self.api,
                    "POST",
                    f"/apis/coordination.k8s.io/v1/namespaces/{c.namespace}/leases",
                    body=body,
                    timeout=10,
                )
            except ApiError as e:
                if e.status == 409:
                    return False
                raise
            return self._renewed(sent)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        observed = (holder, str(spec.get("renewTime")))
        if observed != self._observed:
            self._observed = observed
            self._observed_at = self._clock()
        duration = float(spec.get("leaseDurationSeconds") or c.lease_duration)
        if holder and holder != c.identity and self._clock() - self._observed_at < duration:
            self._leading = False
            return False
        new_spec = dict(spec)
        new_spec.update(spec_new)
        if holder != c.identity:
            new_spec["acquireTime"] = _micro_time(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        try:
            await request(self.api, "PUT", self.path, body=lease, timeout=10)
        except ApiError as e:
            if e.status == 409:  # someone else wrote it first
                return False
            raise
        return self._renewed(sent)

    def _renewed(self, sent: float) -> bool:
        if not self._leading:
            self.transitions += 1
            log.info(
                "%s became the leader (lease %s/%s)",
                self.config.identity,
                self.config.namespace,
                self.config.name,
            )
        self._leading = True
        self._last_renew = sent
        self.became_leader.set()
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Acquire, then renew until ``stop``; losing the lease clears leadership at once."""
        while not stop.is_set():
            try:
                ok = await self.try_acquire_or_renew()
            except Exception as e:
                log.warning("leader election: %s", e)
                ok = False
            if not ok and self._leading and not self.is_leader():
                log.warning("%s lost the lease", self.config.identity)
                self._leading = False
                self.became_leader.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.config.retry_period)

    async def release(self) -> None:
        if not self._leading:
            return
        self._leading = False
        try:
            lease = await self._get()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.config.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            await request(self.api, "PUT", self.path, body=lease, timeout=10)
            log.info("released the lease")
        except Exception as e:
            log.warning("could not release the lease: %s", e)
