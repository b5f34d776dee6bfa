"""Node actions for real: timed node downgrades (a label or a taint) and their removal.

A downgrade is a JSON merge patch of the node that sets the label (or the node's whole taint list,
with desched's taint in it) **and** the ``desched.io/downgrade`` annotation recording what desched
added and when it expires (:mod:`desched.framework.nodeactions`). Every write is a
read-modify-write guarded by the node's ``resourceVersion`` (a conflict re-reads and re-plans), so
a taint or label someone else changes in between is never lost.

Expiry never depends on this process's memory: :meth:`NodeDowngrades.reconcile` reads the
annotations of the nodes (the live cache finds the candidates, each is then read fresh from the API
server) and removes every expired entry desched recorded, and only those. It runs at the start of
every cycle (so at startup too) and from a timer that wakes at the earliest known expiry, so a
downgrade ends on time even with a long ``--descheduling-interval``. A restarted desched, or the
replica that takes over the lease, finds the annotations and removes them on time.

With ``--dry-run`` nothing is written: downgrades and removals are planned and reported only. A
replica that is not the leader (or is shutting down) writes nothing either.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio import client

from desched.framework.nodeactions import (
    DOWNGRADE_ANNOTATION,
    ActionResult,
    DowngradeRequest,
    NodeActionRecord,
    NodeState,
    Plan,
    ReleaseRequest,
    apply_patch,
    downgrade_record,
    is_soft_taint,
    plan_downgrade,
    plan_release,
    plan_restore,
    read_entries,
    restore_records,
)
from desched.k8s.objects import Node
from desched.kube.client import ApiError, RateLimiter, request

log = logging.getLogger(__name__)

WRITE_TIMEOUT_SECONDS = 30.0
CONFLICT_RETRIES = 3
#: The expiry timer re-checks at least this often (new downgrades by another replica, clock jumps).
MAX_TIMER_SLEEP_SECONDS = 60.0
#: How soon an expired downgrade that could not be removed is tried again by the timer.
RETRY_SECONDS = 5.0

Clock = Callable[[], datetime]


def _system_clock() -> datetime:
    return datetime.now(UTC)


class NodeDowngrades:
    """Applies downgrades and removes expired ones through the API; lives as long as ``desched run``."""

    def __init__(
        self,
        api: client.ApiClient,
        loop: asyncio.AbstractEventLoop,
        *,
        dry_run: bool = False,
        may_write: Callable[[], bool] = lambda: True,
        limiter: RateLimiter | None = None,
        clock: Clock = _system_clock,
    ) -> None:
        self.api = api
        self.loop = loop
        self.dry_run = dry_run
        self.may_write = may_write
        self.limiter = limiter
        self.clock = clock
        #: Node -> latest expiry of desched's entries on it, as last read or written.
        self.active: dict[str, datetime] = {}
        #: The same, for the anomaly downgrades alone (not softTaint's): the downgraded-nodes gauge.
        self.anomaly: dict[str, datetime] = {}
        self._lock = asyncio.Lock()
        self._changed = asyncio.Event()

    # ------------------------------------------------------------------ what is downgraded

    def observe(self, nodes: Iterable[Node]) -> None:
        """Refresh :attr:`active` from nodes' annotations (e.g. the live cache)."""
        active: dict[str, datetime] = {}
        anomaly: dict[str, datetime] = {}
        for node in nodes:
            annotations = node.metadata.annotations
            if not annotations or DOWNGRADE_ANNOTATION not in annotations:
                continue
            try:
                entries, _ = read_entries(annotations)
            except ValueError:
                continue
            if entries:
                active[node.metadata.name] = max(e.expires_at for e in entries)
            anomaly_entries = [e for e in entries if not is_soft_taint(e)]
            if anomaly_entries:
                anomaly[node.metadata.name] = max(e.expires_at for e in anomaly_entries)
        self.active = active
        self.anomaly = anomaly

    def downgraded_count(self) -> int:
        """Nodes that carry an anomaly downgrade of desched's that has not expired (softTaint's taints
        are not counted)."""
        now = self.clock()
        return sum(1 for expiry in self.anomaly.values() if expiry > now)

    def next_expiry(self) -> datetime | None:
        return min(self.active.values(), default=None)

    # ------------------------------------------------------------------ removing expired downgrades

    async def reconcile(self, nodes: Iterable[Node]) -> list[NodeActionRecord]:
        """Remove every expired downgrade desched recorded on these nodes (read fresh before writing)."""
        nodes = list(nodes)
        self.observe(nodes)
        now = self.clock()
        due = sorted(name for name, expiry in self.active.items() if expiry <= now)
        records: list[NodeActionRecord] = []
        for name in due:
            records.extend(await self._restore(name))
        return records

    async def _restore(self, name: str) -> list[NodeActionRecord]:
        if not self.dry_run and not self.may_write():
            return []
        async with self._lock:
            for _ in range(CONFLICT_RETRIES):
                try:
                    obj = await self._get(name)
                except ApiError as e:
                    if e.status == 404:
                        self.active.pop(name, None)
                        self.anomaly.pop(name, None)
                        return []
                    log.warning("cannot read node %s to remove its expired downgrade: %s", name, e)
                    return []
                except (TimeoutError, OSError, client.ApiException) as e:
                    log.warning("cannot read node %s to remove its expired downgrade: %s", name, e)
                    return []
                state = NodeState.from_json(obj)
                plan = plan_restore(state, self.clock())
                if plan.patch is None:
                    self._remember(name, state)
                    return []
                if self.dry_run:
                    records = restore_records(name, plan, dry_run=True)
                    for r in records:
                        log.info(
                            "would remove expired downgrade %s %s=%s from node %s (dry run)",
                            r.method,
                            r.key,
                            r.value,
                            name,
                        )
                    self.active.pop(name, None)  # report it once, not on every timer tick
                    self.anomaly.pop(name, None)
                    return records
                error = await self._patch(name, obj, plan.patch)
                if error == "conflict":
                    continue
                if error:
                    log.warning("could not remove expired downgrade from node %s: %s", name, error)
                    return restore_records(name, plan, dry_run=False, failed=error)
                self._remember(name, apply_patch(state, plan.patch))
                records = restore_records(name, plan, dry_run=False)
                for r in records:
                    log.info(
                        "removed expired downgrade %s %s=%s%s from node %s",
                        r.method,
                        r.key,
                        r.value,
                        f":{r.effect}" if r.effect else "",
                        name,
                    )
                return records
            log.warning("could not remove expired downgrade from node %s: kept conflicting", name)
            return []

    async def run_timer(self, stop: asyncio.Event, nodes: Callable[[], Iterable[Node]]) -> None:
        """Reconcile when the earliest known downgrade expires (and at least every minute).

        An expired downgrade that could not be removed (API error, not the leader) is retried after
        :data:`RETRY_SECONDS`, not in a tight loop.
        """
        floor = 0.05
        while not stop.is_set():
            nxt = self.next_expiry()
            delay = MAX_TIMER_SLEEP_SECONDS
            if nxt is not None:
                delay = min(delay, max(floor, (nxt - self.clock()).total_seconds() + 0.05))
            self._changed.clear()
            waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._changed.wait())]
            try:
                await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()
            if stop.is_set():
                return
            if self._changed.is_set():
                continue  # a new downgrade: recompute the wake-up time
            try:
                await self.reconcile(nodes())
            except asyncio.CancelledError:
                raise
            except Exception:  # the timer must survive anything; the next cycle reconciles too
                log.exception("removing expired node downgrades failed")
            nxt = self.next_expiry()
            floor = RETRY_SECONDS if nxt is not None and nxt <= self.clock() else 0.05

    # ------------------------------------------------------------------ downgrading

    def cycle_actions(self) -> LiveNodeActions:
        """A node-action backend for one cycle (records per cycle; the writes go through here)."""
        return LiveNodeActions(self)

    async def downgrade(self, node: Node, req: DowngradeRequest) -> NodeActionRecord:
        name = node.metadata.name
        if self.dry_run:
            plan = plan_downgrade(NodeState.from_node(node), req, self.clock())
            record = downgrade_record(name, req, plan, dry_run=True)
            if plan.patch is not None:
                log.info(
                    "would %s node %s with %s %s=%s until %s (dry run): %s",
                    "downgrade",
                    name,
                    req.method,
                    req.key,
                    req.value,
                    record.expires_at,
                    req.reason,
                )
            return record
        if not self.may_write():
            return downgrade_record(
                name,
                req,
                Plan(ActionResult.FAILED, None, None),
                dry_run=False,
                detail="not writing: this replica is not the leader or is shutting down",
            )
        async with self._lock:
            for _ in range(CONFLICT_RETRIES):
                try:
                    obj = await self._get(name)
                except (ApiError, TimeoutError, OSError, client.ApiException) as e:
                    return downgrade_record(
                        name,
                        req,
                        Plan(ActionResult.FAILED, None, None),
                        dry_run=False,
                        detail=f"cannot read node: {e}",
                    )
                state = NodeState.from_json(obj)
                plan = plan_downgrade(state, req, self.clock())
                if plan.patch is None:
                    if plan.result is ActionResult.SKIPPED:
                        log.info("not downgrading node %s: %s", name, plan.detail)
                    self._remember(name, state)
                    return downgrade_record(name, req, plan, dry_run=False)
                error = await self._patch(name, obj, plan.patch)
                if error == "conflict":
                    continue
                if error:
                    log.warning("could not downgrade node %s: %s", name, error)
                    return downgrade_record(
                        name, req, Plan(ActionResult.FAILED, None, None), dry_run=False, detail=error
                    )
                self._remember(name, apply_patch(state, plan.patch))
                self._changed.set()
                log.info(
                    "%s node %s: %s %s=%s%s until %s (%s)",
                    plan.result.value,
                    name,
                    req.method,
                    req.key,
                    req.value,
                    f":{req.effect}" if req.method == "taint" else "",
                    plan.expires_at,
                    req.reason,
                )
                return downgrade_record(name, req, plan, dry_run=False)
        return downgrade_record(
            name,
            req,
            Plan(ActionResult.FAILED, None, None),
            dry_run=False,
            detail="the node kept changing (conflicts)",
        )

    async def release(self, node: Node, req: ReleaseRequest) -> list[NodeActionRecord]:
        """Remove desched's own ``req`` target from the node now (read fresh, patched with its
        resourceVersion, retried on conflict); nothing when desched has no entry for it."""
        name = node.metadata.name
        if self.dry_run:
            plan = plan_release(NodeState.from_node(node), req.method, req.key, req.effect)
            records = restore_records(name, plan, dry_run=True, release=req)
            for r in records:
                log.info(
                    "would remove %s %s%s from node %s (dry run): %s",
                    r.method,
                    r.key,
                    f":{r.effect}" if r.effect else "",
                    name,
                    req.reason,
                )
            return records
        if not self.may_write():
            return []
        async with self._lock:
            for _ in range(CONFLICT_RETRIES):
                try:
                    obj = await self._get(name)
                except (ApiError, TimeoutError, OSError, client.ApiException) as e:
                    log.warning("cannot read node %s to remove %s %s: %s", name, req.method, req.key, e)
                    return []
                state = NodeState.from_json(obj)
                plan = plan_release(state, req.method, req.key, req.effect)
                if plan.patch is None:
                    self._remember(name, state)
                    return []
                error = await self._patch(name, obj, plan.patch)
                if error == "conflict":
                    continue
                if error:
                    log.warning("could not remove %s %s from node %s: %s", req.method, req.key, name, error)
                    return restore_records(name, plan, dry_run=False, failed=error, release=req)
                self._remember(name, apply_patch(state, plan.patch))
                records = restore_records(name, plan, dry_run=False, release=req)
                for r in records:
                    log.info(
                        "removed %s %s%s from node %s (%s)",
                        r.method,
                        r.key,
                        f":{r.effect}" if r.effect else "",
                        name,
                        req.reason,
                    )
                return records
        log.warning(
            "could not remove %s %s from node %s: the node kept changing (conflicts)",
            req.method,
            req.key,
            name,
        )
        return []

    # ------------------------------------------------------------------ API

    def _remember(self, name: str, state: NodeState) -> None:
        try:
            entries, _ = read_entries(state.annotations)
        except ValueError:
            entries = []
        if entries:
            self.active[name] = max(e.expires_at for e in entries)
        else:
            self.active.pop(name, None)
        anomaly_entries = [e for e in entries if not is_soft_taint(e)]
        if anomaly_entries:
            self.anomaly[name] = max(e.expires_at for e in anomaly_entries)
        else:
            self.anomaly.pop(name, None)

    async def _get(self, name: str) -> dict[str, Any]:
        if self.limiter is not None:
            await self.limiter.acquire()
        data = await request(self.api, "GET", f"/api/v1/nodes/{name}", timeout=WRITE_TIMEOUT_SECONDS)
        obj: dict[str, Any] = json.loads(data)
        return obj

    async def _patch(self, name: str, current: dict[str, Any], patch: dict[str, Any]) -> str | None:
        """Apply a merge patch guarded by ``current``'s resourceVersion: None, "conflict" or an error."""
        body = dict(patch)
        meta = dict(body.get("metadata") or {})
        meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion", "")
        body["metadata"] = meta
        if self.limiter is not None:
            await self.limiter.acquire()
        try:
            await request(
                self.api,
                "PATCH",
                f"/api/v1/nodes/{name}",
                body=body,
                content_type="application/merge-patch+json",
                timeout=WRITE_TIMEOUT_SECONDS,
            )
        except ApiError as e:
            return "conflict" if e.status == 409 else str(e)
        except (TimeoutError, OSError, client.ApiException) as e:
            return f"request failed: {e}"
        return None


class LiveNodeActions:
    """The node-action backend of one live cycle: called from the cycle's worker thread."""

    def __init__(self, owner: NodeDowngrades) -> None:
        self.owner = owner
        self._records: list[NodeActionRecord] = []

    @property
    def records(self) -> list[NodeActionRecord]:
        return self._records

    def add_records(self, records: Iterable[NodeActionRecord]) -> None:
        self._records.extend(records)

    def downgrade(self, node: Node, request: DowngradeRequest) -> NodeActionRecord:
        future = asyncio.run_coroutine_threadsafe(self.owner.downgrade(node, request), self.owner.loop)
        try:
            record = future.result(WRITE_TIMEOUT_SECONDS * CONFLICT_RETRIES + 5)
        except FutureTimeout:
            future.cancel()
            record = downgrade_record(
                node.metadata.name,
                request,
                Plan(ActionResult.FAILED, None, None),
                dry_run=self.owner.dry_run,
                detail="timed out",
            )
        self._records.append(record)
        return record

    def release(self, node: Node, request: ReleaseRequest) -> list[NodeActionRecord]:
        future = asyncio.run_coroutine_threadsafe(self.owner.release(node, request), self.owner.loop)
        try:
            records = future.result(WRITE_TIMEOUT_SECONDS * CONFLICT_RETRIES + 5)
        except FutureTimeout:
            future.cancel()
            records = []
        self._records.extend(records)
        return records
