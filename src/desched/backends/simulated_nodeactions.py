"""Node actions that change no node: ``desched simulate`` (and tests) plan every downgrade and expiry
with the framework's pure planning functions (:mod:`desched.framework.nodeactions`) and record what
``desched run`` would write (:mod:`desched.backends.api_nodeactions`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from desched.framework.nodeactions import (
    DOWNGRADE_ANNOTATION,
    DowngradeRequest,
    NodeActionRecord,
    NodeState,
    ReleaseRequest,
    apply_patch,
    downgrade_record,
    plan_downgrade,
    plan_release,
    plan_restore,
    restore_records,
)
from desched.k8s.objects import Node


class SimulatedNodeActions:
    """Changes no node: plans every action against the snapshot's nodes and records it.

    Several actions on one node in a cycle see each other (the planned state is kept per node).
    """

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self.clock = clock
        self._records: list[NodeActionRecord] = []
        self._states: dict[str, NodeState] = {}

    @property
    def records(self) -> list[NodeActionRecord]:
        return self._records

    def _state(self, node: Node) -> NodeState:
        state = self._states.get(node.metadata.name)
        return state if state is not None else NodeState.from_node(node)

    def downgrade(self, node: Node, request: DowngradeRequest) -> NodeActionRecord:
        state = self._state(node)
        plan = plan_downgrade(state, request, self.clock())
        if plan.patch is not None:
            self._states[node.metadata.name] = apply_patch(state, plan.patch)
        record = downgrade_record(node.metadata.name, request, plan, dry_run=True)
        self._records.append(record)
        return record

    def release(self, node: Node, request: ReleaseRequest) -> list[NodeActionRecord]:
        state = self._state(node)
        plan = plan_release(state, request.method, request.key, request.effect)
        if plan.patch is None:
            return []
        self._states[node.metadata.name] = apply_patch(state, plan.patch)
        records = restore_records(node.metadata.name, plan, dry_run=True, release=request)
        self._records.extend(records)
        return records

    def restore_expired(self, nodes: Iterable[Node]) -> list[NodeActionRecord]:
        """Record the expired downgrades a live cycle would remove from these nodes."""
        now = self.clock()
        out: list[NodeActionRecord] = []
        for node in nodes:
            if DOWNGRADE_ANNOTATION not in (node.metadata.annotations or {}):
                continue
            state = self._state(node)
            plan = plan_restore(state, now)
            if plan.patch is None:
                continue
            self._states[node.metadata.name] = apply_patch(state, plan.patch)
            out.extend(restore_records(node.metadata.name, plan, dry_run=True))
        self._records.extend(out)
        return out
