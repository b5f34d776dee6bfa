"""The node-action seam: the framework carries out a plugin's node action with the backend its
caller gives; without one, nothing is changed and every request is recorded as skipped."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import ClassVar

from tests.unit.framework.test_framework_cycle import node

from desched.api.policy import load_policy
from desched.api.types import ArgsModel
from desched.backends.simulated_eviction import SimulatedBackend
from desched.backends.simulated_nodeactions import SimulatedNodeActions
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import CycleResult, Framework, PluginHandle
from desched.framework.nodeactions import ActionResult
from desched.framework.registry import Registry
from desched.framework.types import Status
from desched.k8s.objects import Node

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class TaintFirstNode:
    """Deschedule: asks to taint the first node for an hour."""

    name: ClassVar[str] = "TaintFirstNode"
    Args: ClassVar[type[ArgsModel]] = ArgsModel

    def __init__(self, args: ArgsModel, handle: PluginHandle) -> None:
        self.handle = handle

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        self.handle.node_actions.downgrade(
            nodes[0],
            method="taint",
            key="example.com/suspect",
            value="true",
            ttl=timedelta(hours=1),
            reason="test",
        )
        return None


def cycle(**kwargs: SimulatedNodeActions) -> CycleResult:
    reg = Registry()
    reg.register_all([TaintFirstNode])
    profile = {
        "name": "p",
        "allowDisablingDefaultEvictor": True,
        "plugins": {
            "deschedule": {"enabled": ["TaintFirstNode"]},
            "filter": {"disabled": ["DefaultEvictor"]},
            "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
        },
    }
    policy = load_policy(
        {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [profile]}, reg
    )
    snapshot = ClusterSnapshot(nodes=[node("n1"), node("n2")], pods=[])
    return Framework(policy, reg, clock=lambda: NOW).run_cycle(snapshot, SimulatedBackend(snapshot), **kwargs)


def test_without_a_backend_from_the_caller_node_actions_are_recorded_as_skipped() -> None:
    [record] = cycle().node_actions
    assert (record.node, record.action, record.key, record.result) == (
        "n1",
        "downgrade",
        "example.com/suspect",
        ActionResult.SKIPPED,
    )
    assert record.detail == "no node-action backend in this cycle"
    assert record.dry_run and record.expires_at is None and record.by == "p/TaintFirstNode"


def test_the_callers_backend_carries_them_out() -> None:
    [record] = cycle(node_actions=SimulatedNodeActions(lambda: NOW)).node_actions
    assert (record.node, record.result, record.expires_at) == (
        "n1",
        ActionResult.DOWNGRADED,
        NOW + timedelta(hours=1),
    )
