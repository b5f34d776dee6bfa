"""softTaint of LowNodeUtilization and HighNodeUtilization (issue 26 item 3): args validation, the
taint added on the nodes the plugin acts on and removed once they no longer qualify, only
desched's own taint removed, other taints untouched, taintOnly, and simulate's placement."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests import builders
from tests.unit.plugins.harness import NOW, REGISTRY, cycle, framework, load, policy_doc

from desched.api.policy import load_policy
from desched.backends.simulated_nodeactions import SimulatedNodeActions
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.framework import CycleResult
from desched.framework.nodeactions import (
    DOWNGRADE_ANNOTATION,
    ActionResult,
    NodeState,
    apply_patch,
    nodes_after_actions,
    plan_release,
)
from desched.k8s.objects import Node, Pod
from desched.scheduling.placement.simulator import PlacementSimulator

LNU = "LowNodeUtilization"
HNU = "HighNodeUtilization"
OVER = "desched.io/overutilized"
UNDER = "desched.io/underutilized"
FOREIGN = {"key": "example.com/maintenance", "value": "x", "effect": "NoSchedule"}
LNU_ARGS: dict[str, Any] = {
    "thresholds": {"cpu": 30, "pods": 30},
    "targetThresholds": {"cpu": 50, "pods": 50},
}


def node(name: str, taints: list[dict[str, str]] | None = None) -> Node:
    return builders.bare_node(name, cpu="4", memory="4Gi", pods="10", ready=True, taints=taints or [])


def pod(name: str, node_name: str, cpu: str | None = "400m") -> Pod:
    return builders.pod(
        name, namespace="default", node=node_name, uid=f"u-{name}", owner=("ReplicaSet", "rs"),
        controller=None, cpu=cpu,
    )  # fmt: skip


class Cluster:
    """Nodes that keep what the (simulated) node actions did to them between cycles."""

    def __init__(self, plugin: str, args: dict[str, Any], nodes: list[Node]) -> None:
        self.framework = framework(plugin, args)
        self.nodes = nodes

    def cycle(self, pods: list[Pod]) -> CycleResult:
        actions = SimulatedNodeActions(lambda: NOW)
        result = cycle(self.framework, self.nodes, pods, node_actions=actions)
        self.nodes = [with_state(n, actions._states.get(n.metadata.name)) for n in self.nodes]
        return result

    def taints(self, name: str) -> list[tuple[str, str]]:
        [n] = [n for n in self.nodes if n.metadata.name == name]
        return [(t.key, t.effect) for t in n.spec.taints or ()]


def with_state(n: Node, state: NodeState | None) -> Node:
    if state is None:
        return n
    doc = msgspec.to_builtins(n)
    doc["metadata"]["annotations"] = state.annotations or None
    doc["spec"]["taints"] = state.taints or None
    return msgspec.convert(doc, Node)


def busy_n1(count: int) -> list[Pod]:
    return [pod(f"p{i}", "n1") for i in range(count)]


# ------------------------------------------------------------------------------ args


@pytest.mark.parametrize(
    ("plugin", "soft", "message"),
    [
        (LNU, {"effect": "NoExecute"}, "args.softTaint.effect: must be one of PreferNoSchedule, NoSchedule"),
        (LNU, {"key": "not a key!"}, "args.softTaint.key: must be a valid taint key"),
        (LNU, {"ttl": "0s"}, "args.softTaint.ttl: must be a positive duration"),
        (LNU, {"ttl": "soon"}, "args.softTaint.ttl: must be a positive duration"),
        (LNU, {"taintonly": True}, "args.softTaint.taintonly"),
        (
            HNU,
            {"taintOnly": True},
            "args.softTaint.taintOnly: cannot be combined with compactWhenAllUnderutilized",
        ),
    ],
)
def test_soft_taint_args_rejected_in_one_line_naming_the_field(
    plugin: str, soft: dict[str, Any], message: str
) -> None:
    args: dict[str, Any] = dict(LNU_ARGS) if plugin == LNU else {"thresholds": {"cpu": 20}}
    if plugin == HNU:
        args["compactWhenAllUnderutilized"] = True
    with pytest.raises(PolicyError) as e:
        load(plugin, {**args, "softTaint": soft})
    text = str(e.value)
    assert message in text and "\n" not in text, text


def test_soft_taint_defaults() -> None:
    policy = load(LNU, {**LNU_ARGS, "softTaint": {}})
    soft = policy.profiles[0].args[LNU].soft_taint  # type: ignore[attr-defined]
    assert (soft.key, soft.effect, soft.ttl_duration, soft.taint_only) == (
        "",
        "PreferNoSchedule",
        timedelta(hours=1),
        False,
    )


# ------------------------------------------------------------------------------ LowNodeUtilization


def test_lnu_taints_the_over_utilised_node_and_removes_it_once_it_no_longer_is() -> None:
    cluster = Cluster(LNU, {**LNU_ARGS, "softTaint": {}}, [node("n1", [FOREIGN]), node("n2"), node("n3")])
    result = cluster.cycle([*busy_n1(7), pod("q", "n2")])
    # evictions still happen as configured
    assert [e.name for e in result.evictions] == ["p0", "p1"]
    [action] = result.node_actions
    assert (action.node, action.action, action.key, action.effect, action.result) == (
        "n1",
        "downgrade",
        OVER,
        "PreferNoSchedule",
        ActionResult.DOWNGRADED,
    )
    assert "over-utilized" in action.reason and action.by == f"p/{LNU}"
    # the other taint is kept, in place
    assert cluster.taints("n1") == [("example.com/maintenance", "NoSchedule"), (OVER, "PreferNoSchedule")]
    assert cluster.taints("n2") == cluster.taints("n3") == []
    # a cycle later n1 is no longer over its target: desched's taint goes, the other stays
    result = cluster.cycle([*busy_n1(4), pod("q", "n2")])
    assert result.evictions == []
    [action] = result.node_actions
    assert (action.node, action.action, action.key, action.result) == (
        "n1",
        "restore",
        OVER,
        ActionResult.RESTORED,
    )
    assert "no longer qualifies" in action.reason
    assert cluster.taints("n1") == [("example.com/maintenance", "NoSchedule")]
    assert DOWNGRADE_ANNOTATION not in (cluster.nodes[0].metadata.annotations or {})


def test_lnu_taints_even_when_nothing_can_be_evicted_and_taint_only_evicts_nothing() -> None:
    # no under-utilised node: nothing to evict, but n1 is over-utilised and is tainted
    nodes = [node("n1"), node("n2")]
    cluster = Cluster(LNU, {**LNU_ARGS, "softTaint": {"key": "example.com/hot"}}, nodes)
    result = cluster.cycle([*busy_n1(7), *[pod(f"q{i}", "n2") for i in range(4)]])
    assert result.evictions == [] and cluster.taints("n1") == [("example.com/hot", "PreferNoSchedule")]
    cluster = Cluster(
        LNU, {**LNU_ARGS, "softTaint": {"taintOnly": True}}, [node("n1"), node("n2"), node("n3")]
    )
    result = cluster.cycle([*busy_n1(7), pod("q", "n2")])
    assert result.evictions == [] and cluster.taints("n1") == [(OVER, "PreferNoSchedule")]


def test_a_taint_with_our_key_that_desched_did_not_set_is_never_removed_or_claimed() -> None:
    theirs = {"key": OVER, "value": "", "effect": "PreferNoSchedule"}
    cluster = Cluster(LNU, {**LNU_ARGS, "softTaint": {}}, [node("n1", [theirs]), node("n2"), node("n3")])
    result = cluster.cycle([*busy_n1(7), pod("q", "n2")])
    [action] = result.node_actions
    assert action.result is ActionResult.SKIPPED and "desched did not add it" in action.detail
    # not over-utilised any more: the taint desched did not set stays
    result = cluster.cycle([pod("q", "n2")])
    assert result.node_actions == [] and cluster.taints("n1") == [(OVER, "PreferNoSchedule")]


def test_release_removes_only_desched_s_entry_of_that_key() -> None:
    other_entry = {"method": "taint", "key": "desched.io/anomalous-node", "value": "true",
                   "effect": "NoSchedule", "expiresAt": "2026-01-01T01:00:00Z",
                   "by": "p/RemoveAnomalyPods"}  # fmt: skip
    mine = {"method": "taint", "key": OVER, "value": "", "effect": "PreferNoSchedule",
            "expiresAt": "2026-01-01T01:00:00Z", "by": f"p/{LNU}"}  # fmt: skip
    state = NodeState(
        {},
        [
            {"key": "desched.io/anomalous-node", "value": "true", "effect": "NoSchedule"},
            {"key": OVER, "effect": "PreferNoSchedule"},
            dict(FOREIGN),
        ],
        {DOWNGRADE_ANNOTATION: json.dumps([other_entry, mine])},
    )
    plan = plan_release(state, "taint", OVER, "PreferNoSchedule")
    assert plan.patch is not None
    after = apply_patch(state, plan.patch)
    assert [t["key"] for t in after.taints] == ["desched.io/anomalous-node", "example.com/maintenance"]
    assert json.loads(after.annotations[DOWNGRADE_ANNOTATION]) == [other_entry]
    # nothing of desched's with that key: nothing to do
    assert plan_release(after, "taint", OVER, "PreferNoSchedule").patch is None


# ------------------------------------------------------------------------------ HighNodeUtilization


def test_hnu_taints_the_nodes_it_empties_and_untaints_them_when_they_fill_up() -> None:
    args = {"thresholds": {"cpu": 20, "pods": 20}, "softTaint": {}}
    cluster = Cluster(HNU, args, [node("n1"), node("n2", [FOREIGN]), node("n3")])
    busy = [pod(f"b{i}", "n2") for i in range(5)] + [pod(f"c{i}", "n3") for i in range(5)]
    result = cluster.cycle([pod("lone", "n1"), *busy])
    assert [e.name for e in result.evictions] == ["lone"]
    assert cluster.taints("n1") == [(UNDER, "PreferNoSchedule")]
    assert cluster.taints("n2") == [("example.com/maintenance", "NoSchedule")] and cluster.taints("n3") == []
    result = cluster.cycle([*[pod(f"l{i}", "n1") for i in range(5)], *busy])
    assert cluster.taints("n1") == [] and [a.action for a in result.node_actions] == ["restore"]


# ------------------------------------------------------------------------------ simulate's placement


def test_placement_avoids_the_soft_tainted_node_when_others_fit() -> None:
    # n1 is over-utilised by pod count (6 best-effort pods) with the least cpu requested: without
    # the taint kube-scheduler's LeastAllocated would pick it for a new pod
    nodes = [node("n1"), node("n2")]
    pods = [pod(f"be{i}", "n1", cpu=None) for i in range(6)] + [pod("half", "n2", cpu="2")]
    cluster = Cluster(LNU, {**LNU_ARGS, "softTaint": {"taintOnly": True}}, nodes)
    snapshot = ClusterSnapshot(nodes=nodes, pods=pods)
    result = cluster.cycle(pods)
    after = nodes_after_actions(nodes, result.node_actions)
    assert after is not None
    new = builders.pod("new", namespace="default", uid="u-new", cpu="100m")
    assert PlacementSimulator(snapshot).decide(new).node == "n1"
    assert PlacementSimulator(snapshot, nodes=after).decide(new).node == "n2"


def test_the_policy_md_example_loads() -> None:
    import re
    from pathlib import Path

    import yaml

    text = (Path(__file__).parents[4] / "docs" / "policy.md").read_text()
    section = text[text.index("## Soft taints") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None
    args = load_policy(yaml.safe_load(block.group(1)), REGISTRY).profiles[0].args[LNU]
    assert args.soft_taint is not None and args.soft_taint.taint_only  # type: ignore[attr-defined]


def test_simulate_shows_the_taint_and_removes_it_in_a_later_cycle(tmp_path: Path) -> None:
    """Through the CLI: ``desched simulate --cycles 3`` lists the taint under node actions (a dry
    run); the replacements avoid the tainted node; the next cycle finds the node no longer
    over-utilised and removes desched's taint, which it knows as its own (the record carried)."""
    ready = {
        "conditions": [{"type": "Ready", "status": "True"}],
        "allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"},
    }
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}, "status": ready}
        for n in ("n1", "n2", "n3")
    ]
    for i in range(7):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{i}",
                    "namespace": "default",
                    "uid": f"u{i}",
                    "ownerReferences": [
                        {"kind": "ReplicaSet", "name": "rs", "uid": "rs", "controller": True}
                    ],
                },
                "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
                "status": {"phase": "Running"},
            }
        )
    (tmp_path / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    (tmp_path / "policy.json").write_text(json.dumps(policy_doc(LNU, {**LNU_ARGS, "softTaint": {}})))

    def simulate(*extra: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "desched.cli", "simulate", str(tmp_path / "cluster.json"), "--policy",
             str(tmp_path / "policy.json"), "--now", "2026-01-01T00:00:00Z", *extra],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = json.loads(simulate("--cycles", "3", "-o", "json"))
    actions = out["nodeActions"]
    assert [(a["node"], a["action"], a["key"], a["effect"], a["result"], a["dryRun"]) for a in actions] == [
        ("n1", "downgrade", OVER, "PreferNoSchedule", "downgraded", True),
        ("n1", "restore", OVER, "PreferNoSchedule", "restored", True),
    ], json.dumps(out, indent=1)[:3000]
    text = simulate()
    assert f"downgrade taint {OVER}=:PreferNoSchedule: downgraded" in text, text


def test_hnu_compaction_taints_the_nodes_it_empties() -> None:
    args = {"thresholds": {"cpu": 50, "pods": 50}, "compactWhenAllUnderutilized": True, "softTaint": {}}
    cluster = Cluster(HNU, args, [node("n1"), node("n2"), node("n3")])
    pods = [
        pod("a", "n1"),
        pod("b1", "n2"),
        pod("b2", "n2"),
        pod("c1", "n3"),
        pod("c2", "n3"),
        pod("c3", "n3"),
    ]
    result = cluster.cycle(pods)
    emptied = sorted({e.node for e in result.evictions})
    assert emptied  # every node under-utilised: compaction empties some
    tainted = sorted(
        n.metadata.name
        for n in cluster.nodes
        if (UNDER, "PreferNoSchedule") in cluster.taints(n.metadata.name)
    )
    assert tainted == emptied
