"""PodLifeTime and pods stuck Pending before they ever start (upstream #1183): unschedulable for
longer than a threshold (``includingUnscheduledPods`` with a ``PodScheduled=False`` condition
filter), or bound and never started (``states: [Pending]`` with a ``PodScheduled=True`` filter).
Through the real policy loader, with DefaultEvictor on, as an operator would configure it."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import builders
from tests.unit.plugins.harness import NOW, evicted, load, policy_doc, run, run_policy

from desched.errors import PolicyError
from desched.framework.findings import Finding, Verdict
from desched.k8s.objects import Pod
from desched.plugins.podlifetime.args import PodLifeTimeArgs

PLUGIN = "PodLifeTime"
NODES = [builders.node("n1"), builders.node("n2")]

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


def test_the_arg_is_off_by_default_and_validated() -> None:
    args = load(PLUGIN, {"states": ["Pending"]}, evictor=True).profiles[0].args["PodLifeTime"]
    assert isinstance(args, PodLifeTimeArgs)
    assert args.including_unscheduled_pods is False
    with pytest.raises(PolicyError) as e:
        load(PLUGIN, {"states": ["Pending"], "includingUnscheduledPods": "yes"}, evictor=True)
    assert str(e.value).startswith("profiles[0].pluginConfig[0].args.includingUnscheduledPods")


def test_unscheduled_pods_are_not_considered_without_the_arg_as_upstream() -> None:
    pods = [unscheduled("stuck", 3600)]
    args = {k: v for k, v in UNSCHEDULABLE_10M.items() if k != "includingUnscheduledPods"}
    assert evicted(run(PLUGIN, args, NODES, pods, evictor=True)) == []


def test_unschedulable_longer_than_the_threshold_is_evicted() -> None:
    pods = [
        unscheduled("stuck-old", 3600),
        unscheduled("stuck-new", 300),  # within the 10 minutes
        unscheduled("gated", 3600, reason="SchedulingGated"),  # not Unschedulable
        running("fine", "n1", 3600),
    ]
    result = run(PLUGIN, UNSCHEDULABLE_10M, NODES, pods, evictor=True)
    assert evicted(result) == ["stuck-old"]
    assert result.evictions[0].node == ""


def test_oldest_transition_first_and_limits() -> None:
    pods = [unscheduled(f"s{i}", 1000 + 100 * i) for i in range(4)]
    assert evicted(run(PLUGIN, UNSCHEDULABLE_10M, NODES, pods, evictor=True)) == ["s3", "s2", "s1", "s0"]
    # a pod bound to no node counts against no node's limit, but against the total
    assert evicted(
        run(PLUGIN, UNSCHEDULABLE_10M, NODES, pods, evictor=True, maxNoOfPodsToEvictPerNode=1)
    ) == ["s3", "s2", "s1", "s0"]
    assert evicted(run(PLUGIN, UNSCHEDULABLE_10M, NODES, pods, evictor=True, maxNoOfPodsToEvictTotal=2)) == [
        "s3",
        "s2",
    ]


def test_namespaces_and_label_selector_apply_to_unscheduled_pods() -> None:
    pods = [unscheduled("a", 3600, namespace="batch"), unscheduled("b", 3600, labels={"tier": "x"})]
    assert evicted(
        run(PLUGIN, {**UNSCHEDULABLE_10M, "namespaces": {"include": ["batch"]}}, NODES, pods, evictor=True)
    ) == ["a"]
    assert evicted(
        run(PLUGIN, {**UNSCHEDULABLE_10M, "namespaces": {"exclude": ["batch"]}}, NODES, pods, evictor=True)
    ) == ["b"]
    selector = {"labelSelector": {"matchLabels": {"tier": "x"}}}
    assert evicted(run(PLUGIN, {**UNSCHEDULABLE_10M, **selector}, NODES, pods, evictor=True)) == ["b"]


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
    assert evicted(run(PLUGIN, UNSCHEDULABLE_10M, NODES, [bare], evictor=True, found=found)) == []
    assert [f.verdict for f in found if f.name == "bare"] == [Verdict.FILTERED]


def test_bound_and_never_started_longer_than_the_threshold_is_evicted() -> None:
    pods = [
        bound_waiting("sandbox-stuck", "n1", 3600),
        bound_waiting("pulling", "n2", 120),  # bound 2 minutes ago
        running("up", "n1", 3600),
        unscheduled("not-bound", 3600),  # not on a node: not this recipe's
    ]
    assert evicted(run(PLUGIN, NEVER_STARTED_10M, NODES, pods, evictor=True)) == ["sandbox-stuck"]


def test_both_recipes_in_one_policy() -> None:
    pods = [bound_waiting("sandbox-stuck", "n1", 3600), unscheduled("stuck", 3600), running("up", "n2", 3600)]
    doc = policy_doc(PLUGIN, UNSCHEDULABLE_10M, evictor=True)
    doc["profiles"].append(
        {
            "name": "never-started",
            "pluginConfig": [{"name": "PodLifeTime", "args": NEVER_STARTED_10M}],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
        }
    )
    result = run_policy(doc, NODES, pods)
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
    result = run_policy(yaml.safe_load(m.group(1)), NODES, pods)
    assert [(r.profile, r.name) for r in result.evictions] == [
        ("unschedulable", "stuck"),
        ("never-started", "sandbox-stuck"),
    ]
