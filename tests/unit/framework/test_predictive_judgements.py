"""``evictionPolicy.predictive``: each in-tree plugin's judgement of a predicted move (skipped with
its own reason when the move would not reduce the violation it acts on), and the rule that a pod
left for that counts as moved in the plugin's plan (predictive never evicts other pods instead).

Every case runs the real plugin through ``simulate``'s cycle (the placement model decides where
the replacement lands) and checks the plain policy against the predictive one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from tests import builders

from desched.api.policy import load_policy
from desched.api.types import ArgsModel
from desched.app.simulate import simulate_cycles
from desched.framework import Handle, JudgesMoves, NoGain, PredictedMove, Status
from desched.framework.framework import CycleResult, Framework
from desched.framework.registry import Registry
from desched.framework.types import EvictResult
from desched.k8s.objects import Node, Pod
from desched.plugins import IN_TREE_PLUGINS, default_registry
from desched.report.output import result_to_json
from desched.runtime.metrics import Metrics
from desched.simulation.results import PodPlacement

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
REG = default_registry(entry_points=False)


def framework(
    point: str,
    plugin: str,
    args: dict[str, Any] | None,
    *,
    predictive: bool,
    registry: Registry = REG,
) -> Framework:
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": plugin, "args": args}] if args is not None else [],
                "allowDisablingDefaultEvictor": True,
                "plugins": {
                    point: {"enabled": [plugin]},
                    "filter": {"disabled": ["DefaultEvictor"]},
                    "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
                },
            }
        ],
    }
    if predictive:
        doc["evictionPolicy"] = {"predictive": True}
    return Framework(load_policy(doc, registry), registry, clock=lambda: NOW)


def run(
    point: str,
    plugin: str,
    args: dict[str, Any] | None,
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *,
    predictive: bool,
    registry: Registry = REG,
) -> tuple[CycleResult, dict[str, PodPlacement]]:
    fw = framework(point, plugin, args, predictive=predictive, registry=registry)
    sim, _, _ = simulate_cycles(fw, builders.snapshot(nodes=nodes, pods=pods), NOW)
    cycle = sim.cycles[0]
    return cycle.result, {p.name: p for p in cycle.placements}


def names(records: Sequence[Any]) -> list[str]:
    return sorted(r.name for r in records)


def skips(result: CycleResult) -> list[tuple[str, str]]:
    return [(r.name, r.skip_reason) for r in result.skips]


def pod(name: str, node: str, owner: str = "web", **kw: Any) -> Pod:
    kw.setdefault("ready", True)
    return builders.pod(name, node=node, uid=name, owner=("ReplicaSet", owner), **kw)


def test_every_in_tree_plugin_that_judges_declares_the_protocol() -> None:
    judging = sorted(cls.name for cls in IN_TREE_PLUGINS if isinstance(cls, JudgesMoves))
    assert judging == [
        "HighNodeUtilization",
        "LowNodeUtilization",
        "RemoveDuplicates",
        "RemovePodsViolatingNodeAffinity",
        "RemovePodsViolatingNodeTaints",
        "RemovePodsViolatingTopologySpreadConstraint",
    ]


# ---------------------------------------------------------------------------- node taints


def test_node_taints_skips_a_move_onto_another_prefer_no_schedule_taint() -> None:
    prefer = builders.taint("team", "a", "PreferNoSchedule")
    args = {"includePreferNoSchedule": True}
    nodes = [builders.node("n1", taints=[prefer]), builders.node("n2", taints=[prefer])]
    pods = [pod("w1", "n1", cpu="100m")]
    plain, _ = run("deschedule", "RemovePodsViolatingNodeTaints", args, nodes, pods, predictive=False)
    assert names(plain.evictions) == ["w1"]
    result, _ = run("deschedule", "RemovePodsViolatingNodeTaints", args, nodes, pods, predictive=True)
    assert result.evictions == []
    assert skips(result) == [("w1", "predicted_untolerated_taint")]
    assert result.skips[0].error == (
        "its replacement would land on n2, whose taint team=a:PreferNoSchedule it does not tolerate either"
    )
    assert result.skips[0].result is EvictResult.NO_GAIN
    # an untainted node to go to: the move helps
    nodes.append(builders.node("n3"))
    result, placed = run("deschedule", "RemovePodsViolatingNodeTaints", args, nodes, pods, predictive=True)
    assert names(result.evictions) == ["w1"] and placed["w1"].node == "n3"


def test_a_plugin_reason_is_told_as_every_skip_is() -> None:
    """simulate's JSON and the metric's ``reason`` label carry the plugin's reason; the skip is no
    refusal."""
    prefer = builders.taint("team", "a", "PreferNoSchedule")
    nodes = [builders.node("n1", taints=[prefer]), builders.node("n2", taints=[prefer])]
    args = {"includePreferNoSchedule": True}
    result, _ = run(
        "deschedule", "RemovePodsViolatingNodeTaints", args, nodes, [pod("w1", "n1")], predictive=True
    )
    doc = result_to_json(result, now="t")
    assert [(s["name"], s["reason"]) for s in doc["evictionsSkipped"]] == [
        ("w1", "predicted_untolerated_taint")
    ]
    assert doc["summary"]["skipped"] == {"predicted_untolerated_taint": 1}
    assert doc["refused"] == [] and result.failures == []
    metrics = Metrics(process=False)
    for r in result.records:
        metrics.observe_eviction(r)
    text = generate_latest(metrics.registry).decode()
    assert (
        'descheduler_evictions_skipped_total{namespace="default",profile="p",'
        'reason="predicted_untolerated_taint",strategy="RemovePodsViolatingNodeTaints"} 1.0'
    ) in text
    assert "descheduler_pods_evicted_total{" not in text


# ---------------------------------------------------------------------------- node affinity


def preferring(zone: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": term}]
        }
    }


def test_node_affinity_skips_a_move_to_a_node_it_does_not_prefer_more() -> None:
    args = {"nodeAffinityType": ["preferredDuringSchedulingIgnoredDuringExecution"]}
    nodes = [
        builders.node("n1", cpu="4"),
        builders.node("n2", cpu="1", labels={"zone": "a"}),  # preferred, but too small
        builders.node("n3", cpu="4"),
    ]
    pods = [pod("w1", "n1", cpu="2", affinity=preferring("a"))]
    plain, placed = run("deschedule", "RemovePodsViolatingNodeAffinity", args, nodes, pods, predictive=False)
    assert names(plain.evictions) == ["w1"] and placed["w1"].node == "n3"
    result, _ = run("deschedule", "RemovePodsViolatingNodeAffinity", args, nodes, pods, predictive=True)
    assert skips(result) == [("w1", "predicted_not_preferred")]
    assert result.skips[0].error == (
        "its replacement would land on n3, which scores 0 on its preferred node affinity, "
        "not more than n1's 0"
    )
    # room on the preferred node: the replacement lands there, the move helps
    nodes[1] = builders.node("n2", cpu="4", labels={"zone": "a"})
    result, placed = run("deschedule", "RemovePodsViolatingNodeAffinity", args, nodes, pods, predictive=True)
    assert names(result.evictions) == ["w1"] and placed["w1"].node == "n2"


# ---------------------------------------------------------------------------- duplicates


def test_remove_duplicates_skips_a_move_onto_a_node_that_holds_as_many_as_it_keeps() -> None:
    nodes = [builders.node("n1"), builders.node("n2"), builders.node("n3", cpu="100m")]
    # 5 pods over 3 feasible nodes: a node keeps ceil(5/3) = 2; n1 holds 3, one too many
    where = {"w1": "n1", "w2": "n1", "w3": "n1", "w4": "n2", "w5": "n2"}
    pods = [pod(name, node, cpu="500m") for name, node in where.items()]
    plain, placed = run("balance", "RemoveDuplicates", {}, nodes, pods, predictive=False)
    assert len(plain.evictions) == 1
    assert placed[plain.evictions[0].name].node == "n2"  # n3 is too small: a third pod on n2
    result, _ = run("balance", "RemoveDuplicates", {}, nodes, pods, predictive=True)
    assert result.evictions == []
    assert [reason for _, reason in skips(result)] == ["predicted_duplicate"]
    assert result.skips[0].error.endswith("which already runs 2 pod(s) of its owner (a node keeps at most 2)")
    # n3 has room: the replacement goes there
    nodes[2] = builders.node("n3")
    result, placed = run("balance", "RemoveDuplicates", {}, nodes, pods, predictive=True)
    assert len(result.evictions) == 1 and placed[result.evictions[0].name].node == "n3"


# ---------------------------------------------------------------------------- node utilization


LNU = {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}}


def lnu_cluster(middle_cpu: str) -> tuple[list[Node], list[Pod]]:
    """n1 over its target (75%), n2 under (0%) but not in pool x, n3 in between."""
    nodes = [
        builders.node("n1", cpu="8", labels={"pool": "x"}),
        builders.node("n2", cpu="8"),
        builders.node("n3", cpu="8", labels={"pool": "x"}),
    ]
    pods = [
        # first in LowNodeUtilization's order (name); its replacement can only go to n3
        pod("a-pinned", "n1", owner="pinned", cpu="2", node_selector={"pool": "x"}),
        pod("b-free", "n1", owner="free", cpu="2"),
        pod("c-free", "n1", owner="free2", cpu="2"),
        pod("m1", "n3", owner="middle", cpu=middle_cpu),
    ]
    return nodes, pods


def test_low_node_utilization_skips_a_move_that_makes_another_node_over_utilised() -> None:
    nodes, pods = lnu_cluster(middle_cpu="3")
    plain, placed = run("balance", "LowNodeUtilization", LNU, nodes, pods, predictive=False)
    # one pod brings n1 to its target (4 of 8 = 50%); its replacement puts n3 at 62%
    assert names(plain.evictions) == ["a-pinned"] and placed["a-pinned"].node == "n3"
    result, _ = run("balance", "LowNodeUtilization", LNU, nodes, pods, predictive=True)
    assert skips(result) == [("a-pinned", "predicted_over_utilized")]
    assert result.skips[0].error == (
        "its replacement would land on n3, which would then be above its target (cpu 62%; targets cpu 50%)"
    )
    # the skipped pod counts as moved: no other pod is evicted in its stead
    assert result.evictions == []


def test_low_node_utilization_evicts_when_the_destination_stays_under_its_target() -> None:
    nodes, pods = lnu_cluster(middle_cpu="1")
    result, placed = run("balance", "LowNodeUtilization", LNU, nodes, pods, predictive=True)
    assert names(result.evictions) == ["a-pinned"] and placed["a-pinned"].node == "n3"
    assert result.skips == []


def test_high_node_utilization_skips_a_move_onto_a_node_it_empties() -> None:
    args = {"thresholds": {"cpu": 30}}
    nodes = [
        builders.node("n1", cpu="4"),  # 25%: emptied first (ties with n2, by name)
        builders.node("n2", cpu="16"),  # 6%
        builders.node("n3", cpu="4"),  # not under-utilised: room for one more cpu
    ]
    pods = [
        pod("w1", "n1", owner="a", cpu="1"),
        pod("w2", "n2", owner="b", cpu="1"),
        pod("busy", "n3", owner="c", cpu="3"),
    ]
    plain, placed = run("balance", "HighNodeUtilization", args, nodes, pods, predictive=False)
    # kube-scheduler's default scoring (LeastAllocated) prefers the emptiest, n2; the budget (n3's
    # free cpu) is then spent
    assert names(plain.evictions) == ["w1"] and placed["w1"].node == "n2"
    result, _ = run("balance", "HighNodeUtilization", args, nodes, pods, predictive=True)
    assert result.evictions == []
    assert skips(result) == [("w1", "predicted_under_utilized")]
    assert (
        result.skips[0].error
        == "its replacement would land on n2, an under-utilised node this plugin empties"
    )


def spread_pod(name: str, node: str, **kw: Any) -> Pod:
    constraint = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    return pod(name, node, labels={"app": "web"}, spec={"topologySpreadConstraints": [constraint]}, **kw)


def test_topology_spread_skips_a_move_that_does_not_lower_the_skew() -> None:
    args = {"constraints": ["ScheduleAnyway"], "topologyBalanceNodeFit": False}
    nodes = [builders.node("n1"), builders.node("n2"), builders.node("n3")]
    # n1 3, n2 0, n3 2 (maxSkew 1): one pod leaves n1 for n2 in the plan; n2 is full, so its
    # replacement would land on n3: 2 and 3 instead of 3 and 2
    pods = [spread_pod(f"w{i}", "n1", cpu="100m") for i in range(3)]
    pods += [spread_pod(f"w{i}", "n3", cpu="100m") for i in range(3, 5)]
    pods.append(pod("filler", "n2", owner="other", cpu="4"))
    plain, placed = run(
        "balance", "RemovePodsViolatingTopologySpreadConstraint", args, nodes, pods, predictive=False
    )
    assert len(plain.evictions) == 1 and placed[plain.evictions[0].name].node == "n3"
    result, _ = run(
        "balance", "RemovePodsViolatingTopologySpreadConstraint", args, nodes, pods, predictive=True
    )
    assert result.evictions == []
    assert [reason for _, reason in skips(result)] == ["predicted_skew"]
    assert (
        "in domain kubernetes.io/hostname=n3, which would then hold 3 matching pods" in result.skips[0].error
    )
    # room on n2: the move lowers the skew
    pods[-1] = pod("filler", "n2", owner="other", cpu="1")
    result, placed = run(
        "balance", "RemovePodsViolatingTopologySpreadConstraint", args, nodes, pods, predictive=True
    )
    assert len(result.evictions) == 1 and placed[result.evictions[0].name].node == "n2"


# ---------------------------------------------------------------------------- properties


class MovesUntilDoneArgs(ArgsModel):
    bad: list[str] = []
    quota: int = 0


class MovesUntilDone:
    """Deschedule: move pods (name order) until ``quota`` of them count as moved; it judges a move
    useless when the replacement would land on a node named in its args' ``bad`` list."""

    name: ClassVar[str] = "MovesUntilDone"
    Args: ClassVar[type[MovesUntilDoneArgs]] = MovesUntilDoneArgs

    def __init__(self, args: MovesUntilDoneArgs, handle: Handle) -> None:
        self.handle = handle
        self.bad = frozenset(args.bad)
        self.quota = args.quota
        self.judged: list[tuple[str, str, NoGain | None]] = []

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        target = move.destination.metadata.name
        verdict = NoGain("predicted_bad_node", f"{target} is bad") if target in self.bad else None
        self.judged.append((move.pod.metadata.name, target, verdict))
        return verdict

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        moved = 0
        for p in sorted(self.handle.snapshot.pods, key=lambda p: p.metadata.name):
            if moved >= self.quota:
                break
            if self.handle.evictor.evict(p, "test").planned:
                moved += 1
        return None


def judging_registry() -> Registry:
    reg = Registry()
    reg.register_all([MovesUntilDone])
    return reg


JUDGING = judging_registry()


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod], list[str], int]:
    n = draw(st.integers(2, 5))
    nodes = [builders.node(f"n{i}", cpu=str(draw(st.integers(1, 4)))) for i in range(n)]
    pods = []
    for j in range(draw(st.integers(1, 10))):
        where = f"n{draw(st.integers(0, n - 1))}"
        owner = draw(st.sampled_from(["a", "b", "c"]))
        pods.append(pod(f"p{j:02d}", where, owner=owner, cpu=f"{draw(st.integers(1, 15)) * 100}m"))
    bad = draw(st.lists(st.sampled_from([node.metadata.name for node in nodes]), unique=True))
    return nodes, pods, bad, draw(st.integers(0, 10))


@settings(max_examples=60, deadline=None)
@given(clusters())
def test_with_predictive_no_eviction_lands_where_its_plugin_judges_the_move_useless(
    case: tuple[list[Node], list[Pod], list[str], int],
) -> None:
    """Every eviction made with predictive on lands (in simulate's placement, after the cycle)
    where the plugin judged the move useful, and the evictions are a part of the plain plan's."""
    nodes, pods, bad, quota = case
    args = {"bad": bad, "quota": quota}
    plain, _ = run("deschedule", "MovesUntilDone", args, nodes, pods, predictive=False, registry=JUDGING)
    result, placed = run("deschedule", "MovesUntilDone", args, nodes, pods, predictive=True, registry=JUDGING)
    for record in result.evictions:
        placement = placed[record.name]
        assert placement.outcome == "placed" and placement.node not in bad, placement
        assert placement.node != record.node
    for record in result.skips:
        assert record.result is EvictResult.NO_GAIN
    assert set(names(result.evictions)) <= set(names(plain.evictions))
    assert len(result.evictions) + len(result.skips) == len(plain.evictions)


@st.composite
def utilisation_clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod]]:
    n = draw(st.integers(3, 6))
    nodes = [
        builders.node(f"n{i}", cpu="4", labels={"pool": draw(st.sampled_from(["x", "y"]))}) for i in range(n)
    ]
    pods = []
    for j in range(draw(st.integers(2, 16))):
        where = f"n{draw(st.integers(0, n - 1))}"
        selector = draw(st.sampled_from([None, {"pool": "x"}, {"pool": "y"}]))
        owner = draw(st.sampled_from(["a", "b", "c", "d"]))
        cpu = f"{draw(st.integers(1, 12)) * 100}m"
        pods.append(pod(f"p{j:02d}", where, owner=owner, cpu=cpu, node_selector=selector))
    return nodes, pods


@settings(max_examples=40, deadline=None)
@given(utilisation_clusters())
def test_low_node_utilization_with_predictive_evicts_a_part_of_what_it_evicts_without(
    case: tuple[list[Node], list[Pod]],
) -> None:
    """No pod is evicted in a skipped pod's stead, and no replacement lands Pending, back on its
    node, or on a node it puts above its target."""
    nodes, pods = case
    args = {"thresholds": {"cpu": 30}, "targetThresholds": {"cpu": 50}}
    plain, _ = run("balance", "LowNodeUtilization", args, nodes, pods, predictive=False)
    result, placed = run("balance", "LowNodeUtilization", args, nodes, pods, predictive=True)
    assert set(names(result.evictions)) <= set(names(plain.evictions))
    snap = builders.snapshot(nodes=nodes, pods=pods)
    requested = {n.metadata.name: snap.requested_on(n.metadata.name).get("cpu", 0) for n in nodes}
    by_name = {p.metadata.name: p for p in pods}
    for record in result.evictions:
        placement = placed[record.name]
        assert placement.outcome == "placed" and placement.node != record.node
        # the replacements land one after the other on what stays of the cluster: together
        # they never push a node above its target
        freed = snap.requests(by_name[record.name]).get("cpu", 0)
        requested[record.node] -= freed
        requested[placement.node] += freed
    for record in result.evictions:
        assert requested[placed[record.name].node] <= 2000, (record, requested)


class JudgeRaises:
    """Deschedule: asks to evict every pod; its judgement raises."""

    name: ClassVar[str] = "JudgeRaises"

    def __init__(self, args: Any, handle: Handle) -> None:
        self.handle = handle

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        raise RuntimeError("broken judgement")

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        for p in sorted(self.handle.snapshot.pods, key=lambda p: p.metadata.name):
            self.handle.evictor.evict(p, "test")
        return None


def test_a_judgement_that_raises_fails_its_plugin_only() -> None:
    """The plugin's run is reported as crashed; the next plugin's evictions are predicted and
    placed as without it."""
    reg = Registry()
    reg.register_all([JudgeRaises, MovesUntilDone])
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "evictionPolicy": {"predictive": True},
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": "MovesUntilDone", "args": {"quota": 5}}],
                "allowDisablingDefaultEvictor": True,
                "plugins": {
                    "deschedule": {"enabled": ["JudgeRaises", "MovesUntilDone"]},
                    "filter": {"disabled": ["DefaultEvictor"]},
                    "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
                },
            }
        ],
    }
    fw = Framework(load_policy(doc, reg), reg, clock=lambda: NOW)
    nodes = [builders.node("n1", cpu="2"), builders.node("n2", cpu="2")]
    pods = [pod("p0", "n1", cpu="1500m"), pod("p1", "n1", owner="other", cpu="100m")]
    sim, _, _ = simulate_cycles(fw, builders.snapshot(nodes=nodes, pods=pods), NOW)
    cycle = sim.cycles[0]
    assert [(r.plugin, r.error) for r in cycle.result.crashes] == [
        ("JudgeRaises", "RuntimeError: broken judgement (at Pod default/p0)")
    ]
    assert names(cycle.result.evictions) == ["p0", "p1"]
    assert {p.name: p.node for p in cycle.placements} == {"p0": "n2", "p1": "n2"}


@st.composite
def tainted_clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod]]:
    keys = ("a", "b")
    nodes = []
    for i in range(draw(st.integers(2, 5))):
        mine = draw(st.lists(st.sampled_from(keys), unique=True))
        taints = [builders.taint(k, "x", "PreferNoSchedule") for k in mine] or None
        nodes.append(builders.node(f"n{i}", cpu=str(draw(st.integers(1, 3))), taints=taints))
    pods = []
    for j in range(draw(st.integers(1, 10))):
        tolerated = draw(st.lists(st.sampled_from(keys), unique=True))
        tolerations = [builders.toleration(k, "x", "PreferNoSchedule") for k in tolerated] or None
        where = f"n{draw(st.integers(0, len(nodes) - 1))}"
        cpu = f"{draw(st.integers(1, 10)) * 100}m"
        pods.append(pod(f"p{j:02d}", where, owner=f"o{j % 3}", cpu=cpu, tolerations=tolerations))
    return nodes, pods


@settings(max_examples=40, deadline=None)
@given(tainted_clusters())
def test_no_eviction_lands_where_node_taints_judges_the_move_useless(
    case: tuple[list[Node], list[Pod]],
) -> None:
    """RemovePodsViolatingNodeTaints with predictive on random PreferNoSchedule taints: every
    replacement (simulate's placement) lands on another node the plugin judges a move that helps,
    and a pod is evicted with predictive only if it is without."""
    nodes, pods = case
    args = {"includePreferNoSchedule": True}
    plugin = "RemovePodsViolatingNodeTaints"
    plain, _ = run("deschedule", plugin, args, nodes, pods, predictive=False)
    fw = framework("deschedule", plugin, args, predictive=True)
    snap = builders.snapshot(nodes=nodes, pods=pods)
    sim, _, _ = simulate_cycles(fw, snap.copy(), NOW)
    cycle = sim.cycles[0]
    judge = fw.profiles[0].judges[plugin]
    by_name = {p.metadata.name: p for p in pods}
    placed = {p.name: p for p in cycle.placements}
    for record in cycle.result.evictions:
        placement = placed[record.name]
        assert placement.outcome == "placed" and placement.node != record.node, placement
        source, target = snap.node(record.node), snap.node(placement.node)
        assert source is not None and target is not None
        assert judge(PredictedMove(by_name[record.name], source, target, snap)) is None, placement
    assert set(names(cycle.result.evictions)) <= set(names(plain.evictions))


def anti(app: str) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_anti_affinity_evicts_no_partner_in_a_skipped_pods_stead() -> None:
    """Two pods that repel each other on n1: the plain plugin evicts the first (the second then
    violates nothing); with predictive the first is skipped (it fits only n1) and counts as gone,
    so the second is not evicted in its stead."""
    nodes = [builders.node("n1", labels={"pool": "one"}), builders.node("n2")]
    pods = [
        pod("a", "n1", owner="a", labels={"app": "x"}, affinity=anti("x"), node_selector={"pool": "one"}),
        pod("b", "n1", owner="b", labels={"app": "x"}, affinity=anti("x")),
    ]
    plugin = "RemovePodsViolatingInterPodAntiAffinity"
    plain, _ = run("deschedule", plugin, {}, nodes, pods, predictive=False)
    assert names(plain.evictions) == ["a"]
    result, _ = run("deschedule", plugin, {}, nodes, pods, predictive=True)
    assert skips(result) == [("a", "predicted_pending")]
    assert result.evictions == []


@pytest.mark.parametrize("reason", ["", "Bad Reason", "pod web-1 stays", "predicted-skew", "1st"])
def test_a_skip_reason_must_be_a_label(reason: str) -> None:
    """NoGain.reason becomes a metric label: a sentence or a name in it is refused where it is made
    (the judging plugin's run then fails as any raising judgement does)."""
    with pytest.raises(ValueError, match="snake_case"):
        NoGain(reason, "detail")
    assert NoGain("predicted_skew", "any detail, with names: web-1").reason == "predicted_skew"
