"""PodLifeTime and pods stuck Pending before they ever start (upstream #1183): unschedulable for
longer than a threshold (``includingUnscheduledPods`` with a ``PodScheduled=False`` condition
filter), or bound and never started (``states: [Pending]`` with a ``PodScheduled=True`` filter).
Through the real policy loader, with DefaultEvictor on, as an operator would configure it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import builders

from desched.api.policy import load_policy
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.evictor import SimulatedBackend
from desched.framework.findings import Finding, Verdict
from desched.framework.framework import CycleResult, Framework
from desched.k8s.objects import Pod
from desched.plugins import default_registry
from desched.plugins.podlifetime.args import PodLifeTimeArgs

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
REG = default_registry(entry_points=False)

UNSCHEDULABLE_10M: dict[str, Any] = {
    "includingUnscheduledPods": True,
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "minTimeSinceLastTransitionSeconds": 600,
        }
    ],
}
NEVER_STARTED_10M: dict[str, Any] = {
    "states": ["Pending"],
    "conditions": [{"type": "PodScheduled", "status": "True", "minTimeSinceLastTransitionSeconds": 600}],
}


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def policy_doc(args: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "stuck",
                "pluginConfig": [{"name": "PodLifeTime", "args": args}],
                "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
            }
        ],
        **top,
    }


def unscheduled(name: str, since: float, *, reason: str = "Unschedulable", **kw: Any) -> Pod:
    """Pending, bound to no node, PodScheduled=False since ``since`` seconds."""
    cond = {"type": "PodScheduled", "status": "False", "reason": reason, "lastTransitionTime": ago(since)}
    return builders.pod(
        name,
        uid=name,
        owner=("Job", "batch"),
        created=ago(since + 5),
        phase="Pending",
        status={"conditions": [cond]},
        **kw,
    )


def bound_waiting(name: str, node: str, since: float, waiting: str = "ContainerCreating") -> Pod:
    """Bound ``since`` seconds ago, its container still waiting: Pending, never started."""
    return builders.pod(
        name,
        uid=name,
        node=node,
        owner=("ReplicaSet", "web"),
        created=ago(since + 5),
        phase="Pending",
        status={
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(since)}],
            "containerStatuses": [
                {"name": "c", "restartCount": 0, "state": {"waiting": {"reason": waiting}}}
            ],
        },
    )


def running(name: str, node: str, since: float) -> Pod:
    return builders.pod(
        name,
        uid=name,
        node=node,
        owner=("ReplicaSet", "web"),
        created=ago(since + 5),
        phase="Running",
        status={"conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": ago(since)}]},
    )


def run(args: dict[str, Any], pods: list[Pod], found: list[Finding] | None = None, **top: Any) -> CycleResult:
    snapshot = ClusterSnapshot(nodes=[builders.node("n1"), builders.node("n2")], pods=pods)
    fw = Framework(load_policy(policy_doc(args, **top), REG), REG, clock=lambda: NOW)
    if found is not None:
        fw.findings.attach(found.append)
    return fw.run_cycle(snapshot, SimulatedBackend(snapshot))


def evicted(result: CycleResult) -> list[str]:
    return [r.name for r in result.evictions]


def test_the_arg_is_off_by_default_and_validated() -> None:
    args = load_policy(policy_doc({"states": ["Pending"]}), REG).profiles[0].args["PodLifeTime"]
    assert isinstance(args, PodLifeTimeArgs)
    assert args.including_unscheduled_pods is False
    with pytest.raises(PolicyError) as e:
        load_policy(policy_doc({"states": ["Pending"], "includingUnscheduledPods": "yes"}), REG)
    assert str(e.value).startswith("profiles[0].pluginConfig[0].args.includingUnscheduledPods")


def test_unscheduled_pods_are_not_considered_without_the_arg_as_upstream() -> None:
    pods = [unscheduled("stuck", 3600)]
    args = {k: v for k, v in UNSCHEDULABLE_10M.items() if k != "includingUnscheduledPods"}
    assert evicted(run(args, pods)) == []


def test_unschedulable_longer_than_the_threshold_is_evicted() -> None:
    pods = [
        unscheduled("stuck-old", 3600),
        unscheduled("stuck-new", 300),  # within the 10 minutes
        unscheduled("gated", 3600, reason="SchedulingGated"),  # not Unschedulable
        running("fine", "n1", 3600),
    ]
    result = run(UNSCHEDULABLE_10M, pods)
    assert evicted(result) == ["stuck-old"]
    assert result.evictions[0].node == ""


def test_oldest_transition_first_and_limits() -> None:
    pods = [unscheduled(f"s{i}", 1000 + 100 * i) for i in range(4)]
    assert evicted(run(UNSCHEDULABLE_10M, pods)) == ["s3", "s2", "s1", "s0"]
    # a pod bound to no node counts against no node's limit, but against the total
    assert evicted(run(UNSCHEDULABLE_10M, pods, maxNoOfPodsToEvictPerNode=1)) == ["s3", "s2", "s1", "s0"]
    assert evicted(run(UNSCHEDULABLE_10M, pods, maxNoOfPodsToEvictTotal=2)) == ["s3", "s2"]


def test_namespaces_and_label_selector_apply_to_unscheduled_pods() -> None:
    pods = [unscheduled("a", 3600, namespace="batch"), unscheduled("b", 3600, labels={"tier": "x"})]
    assert evicted(run({**UNSCHEDULABLE_10M, "namespaces": {"include": ["batch"]}}, pods)) == ["a"]
    assert evicted(run({**UNSCHEDULABLE_10M, "namespaces": {"exclude": ["batch"]}}, pods)) == ["b"]
    selector = {"labelSelector": {"matchLabels": {"tier": "x"}}}
    assert evicted(run({**UNSCHEDULABLE_10M, **selector}, pods)) == ["b"]


def test_default_evictor_still_protects_unscheduled_pods() -> None:
    bare = builders.pod(
        "bare",
        uid="bare",
        created=ago(3600),
        phase="Pending",
        status={
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "lastTransitionTime": ago(3600),
                }
            ]
        },
    )
    found: list[Finding] = []
    assert evicted(run(UNSCHEDULABLE_10M, [bare], found)) == []
    assert [f.verdict for f in found if f.name == "bare"] == [Verdict.FILTERED]


def test_bound_and_never_started_longer_than_the_threshold_is_evicted() -> None:
    pods = [
        bound_waiting("sandbox-stuck", "n1", 3600),
        bound_waiting("pulling", "n2", 120),  # bound 2 minutes ago
        running("up", "n1", 3600),
        unscheduled("not-bound", 3600),  # not on a node: not this recipe's
    ]
    assert evicted(run(NEVER_STARTED_10M, pods)) == ["sandbox-stuck"]


def test_both_recipes_in_one_policy() -> None:
    pods = [bound_waiting("sandbox-stuck", "n1", 3600), unscheduled("stuck", 3600), running("up", "n2", 3600)]
    doc = policy_doc(UNSCHEDULABLE_10M)
    doc["profiles"].append(
        {
            "name": "never-started",
            "pluginConfig": [{"name": "PodLifeTime", "args": NEVER_STARTED_10M}],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
        }
    )
    snapshot = ClusterSnapshot(nodes=[builders.node("n1"), builders.node("n2")], pods=pods)
    fw = Framework(load_policy(doc, REG), REG, clock=lambda: NOW)
    result = fw.run_cycle(snapshot, SimulatedBackend(snapshot))
    assert sorted(evicted(result)) == ["sandbox-stuck", "stuck"]


def test_the_readme_recipes_do_what_the_readme_says() -> None:
    readme = Path(__file__).resolve().parents[4] / "src/desched/plugins/podlifetime/README.md"
    text = readme.read_text().split("## Pods stuck Pending before they ever start", 1)[1]
    m = re.search(r"^```yaml\n(.*?)^```$", text, re.M | re.S)
    assert m is not None
    pods = [
        bound_waiting("sandbox-stuck", "n1", 3600),
        bound_waiting("pulling", "n2", 120),
        unscheduled("stuck", 3600),  # a Job's pod
        unscheduled("stuck-new", 300),
        running("up", "n2", 3600),
    ]
    snapshot = ClusterSnapshot(nodes=[builders.node("n1"), builders.node("n2")], pods=pods)
    fw = Framework(load_policy(yaml.safe_load(m.group(1)), REG), REG, clock=lambda: NOW)
    result = fw.run_cycle(snapshot, SimulatedBackend(snapshot))
    assert [(r.profile, r.name) for r in result.evictions] == [
        ("unschedulable", "stuck"),
        ("never-started", "sandbox-stuck"),
    ]
