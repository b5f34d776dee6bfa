"""What a controller and the kubelet make of an evicted pod, as kube-scheduler sees it: the
replacement the controller creates (new name and uid, unbound, Pending), the replacement once
bound and started, or Pending with kube-scheduler's reason, and the evicted pod while it
terminates. Used by the simulation's placement (``desched simulate``) and by the framework's
predictive eviction, so both model the same pods."""

from __future__ import annotations

import hashlib
from datetime import datetime

import msgspec

from desched.k8s.objects import (
    ContainerState,
    ContainerStateRunning,
    ContainerStatus,
    Pod,
    PodCondition,
    PodStatus,
)


def make_replacement(pod: Pod, name: str, now: datetime, cycle: int) -> Pod:
    """The pod as its controller would create it again: new name and uid, unbound, Pending."""
    uid_hex = hashlib.sha1(f"{pod.key}/{name}/{cycle}".encode()).hexdigest()
    uid = f"{uid_hex[:8]}-{uid_hex[8:12]}-{uid_hex[12:16]}-{uid_hex[16:20]}-{uid_hex[20:32]}"
    meta = msgspec.structs.replace(
        pod.metadata,
        name=name,
        uid=uid,
        resource_version="",
        creation_timestamp=now,
        deletion_timestamp=None,
    )
    spec = msgspec.structs.replace(pod.spec, node_name="")
    return Pod(metadata=meta, spec=spec, status=PodStatus(phase="Pending", qos_class=pod.status.qos_class))


def bound_replacement(pod: Pod, node: str, now: datetime) -> Pod:
    """The replacement once bound to ``node`` and started."""
    started = _started(now)
    return Pod(
        metadata=pod.metadata,
        spec=msgspec.structs.replace(pod.spec, node_name=node),
        status=PodStatus(
            phase="Running",
            start_time=now,
            qos_class=pod.status.qos_class,
            conditions=started.conditions,
            container_statuses=started.statuses(pod),
        ),
    )


class _Started:
    """What every replacement started at ``now`` shows alike: its conditions, and its containers'
    statuses per list of container names. Shared, never changed (as no pod is): a simulation
    binds thousands of replacements, each would otherwise carry its own equal copies."""

    __slots__ = ("_statuses", "conditions", "now", "running")

    def __init__(self, now: datetime) -> None:
        self.now = now
        self.running = ContainerState(running=ContainerStateRunning(started_at=now))
        self.conditions = [
            PodCondition(type=t, status="True", last_transition_time=now)
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        self._statuses: dict[tuple[str, ...], list[ContainerStatus]] = {}

    def statuses(self, pod: Pod) -> list[ContainerStatus]:
        names = tuple(c.name for c in pod.spec.containers)
        hit = self._statuses.get(names)
        if hit is None:
            running = self.running
            hit = self._statuses[names] = [ContainerStatus(name=n, ready=True, state=running) for n in names]
        return hit


#: the latest ``now``'s (by identity: an equal time in another zone is written differently)
_latest: list[_Started] = []


def _started(now: datetime) -> _Started:
    memo = _latest[0] if _latest else None
    if memo is None or memo.now is not now:
        memo = _Started(now)
        _latest[:] = [memo]
    return memo


def pending_replacement(pod: Pod, message: str, now: datetime) -> Pod:
    condition = PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable", message=message, last_transition_time=now
    )
    status = msgspec.structs.replace(pod.status, phase="Pending", conditions=[condition])
    return msgspec.structs.replace(pod, status=status)


def terminating_pod(pod: Pod, now: datetime) -> Pod:
    """The evicted pod while it terminates: still bound, with a deletionTimestamp."""
    meta = msgspec.structs.replace(pod.metadata, deletion_timestamp=now)
    return msgspec.structs.replace(pod, metadata=meta)
