"""RemovePodsViolatingNodeTaints: args validation through the policy loader, and edge cases the
upstream fixtures leave out."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.unit.plugins.harness import evicted, load_args, load_error, run

from desched.k8s.objects import Node, Pod

PLUGIN = "RemovePodsViolatingNodeTaints"


def node(name: str, *taints: tuple[str, str, str]) -> Node:
    return builders.node(
        name, hostname_label=False, taints=[builders.taint(k, v, eff) for k, v, eff in taints]
    )


def pod(
    name: str,
    node_name: str,
    *tolerations: dict[str, Any],
    ns: str = "default",
    labels: dict[str, str] | None = None,
) -> Pod:
    return builders.pod(
        name,
        namespace=ns,
        node=node_name,
        uid=name,
        labels=labels or {},
        owner=("ReplicaSet", "rs"),
        controller=None,
        tolerations=list(tolerations),
    )


NO_SCHEDULE = ("dedicated", "gpu", "NoSchedule")


# ----------------------------------------------------------------------------- args


def test_defaults() -> None:
    args = load_args(PLUGIN, {})
    assert args.include_prefer_no_schedule is False
    assert args.excluded_taints is None and args.included_taints is None


def test_excluded_and_included_taints_are_exclusive() -> None:
    msg = load_error(PLUGIN, {"excludedTaints": ["a"], "includedTaints": ["b=c"]})
    assert msg == (
        "profiles[0].pluginConfig[0].args.includedTaints: cannot be set with excludedTaints "
        "(got excludedTaints=['a'], includedTaints=['b=c'])"
    )


def test_an_empty_list_beside_the_other_is_allowed() -> None:
    args = load_args(PLUGIN, {"excludedTaints": [], "includedTaints": ["b"]})
    assert args.included_taints == ["b"]


def test_namespaces_include_and_exclude_are_exclusive() -> None:
    msg = load_error(PLUGIN, {"namespaces": {"include": ["a"], "exclude": ["b"]}})
    assert msg == (
        "profiles[0].pluginConfig[0].args.namespaces.exclude: cannot be set with include "
        "(got include=['a'], exclude=['b'])"
    )


def test_invalid_label_selector() -> None:
    msg = load_error(PLUGIN, {"labelSelector": {"matchExpressions": [{"key": "", "operator": "In"}]}})
    assert msg.startswith("profiles[0].pluginConfig[0].args.labelSelector")


def test_unknown_field_is_rejected() -> None:
    assert load_error(PLUGIN, {"excludeTaints": ["a"]}) == (
        "profiles[0].pluginConfig[0].args.excludeTaints: unknown field"
    )


# ----------------------------------------------------------------------------- which taints count


def test_pod_not_tolerating_no_schedule_taint_is_evicted_with_a_reason() -> None:
    result = run(
        PLUGIN,
        {},
        [node("n1", NO_SCHEDULE), node("n2")],
        [pod("bad", "n1"), pod("good", "n1", {"key": "dedicated", "operator": "Exists"})],
    )
    assert evicted(result) == ["bad"]
    assert result.evictions[0].reason == "pod does not tolerate taint dedicated=gpu:NoSchedule of node n1"


def test_no_execute_taints_are_left_to_the_kubelet() -> None:
    result = run(PLUGIN, {}, [node("n1", ("k", "v", "NoExecute")), node("n2")], [pod("a", "n1")])
    assert evicted(result) == []


def test_prefer_no_schedule_only_when_included() -> None:
    nodes = [node("n1", ("k", "", "PreferNoSchedule")), node("n2")]
    assert evicted(run(PLUGIN, {}, nodes, [pod("a", "n1")])) == []
    assert evicted(run(PLUGIN, {"includePreferNoSchedule": True}, nodes, [pod("a", "n1")])) == ["a"]


def test_toleration_with_empty_key_and_exists_tolerates_everything() -> None:
    result = run(
        PLUGIN,
        {},
        [node("n1", NO_SCHEDULE, ("other", "", "NoSchedule")), node("n2")],
        [pod("a", "n1", {"operator": "Exists"})],
    )
    assert evicted(result) == []


def test_toleration_for_another_effect_does_not_tolerate() -> None:
    result = run(
        PLUGIN,
        {},
        [node("n1", NO_SCHEDULE), node("n2")],
        [pod("a", "n1", {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"})],
    )
    assert evicted(result) == ["a"]


@pytest.mark.parametrize(
    ("excluded", "expected"),
    [
        (["dedicated"], []),
        (["dedicated=gpu"], []),
        (["dedicated=cpu"], ["a"]),
        (["other"], ["a"]),
    ],
)
def test_excluded_taints(excluded: list[str], expected: list[str]) -> None:
    result = run(
        PLUGIN, {"excludedTaints": excluded}, [node("n1", NO_SCHEDULE), node("n2")], [pod("a", "n1")]
    )
    assert evicted(result) == expected


def test_key_equals_entry_does_not_name_a_taint_without_value() -> None:
    # Upstream only builds "key=value" for a non-empty value, so "k=" matches nothing.
    nodes = [node("n1", ("k", "", "NoSchedule")), node("n2")]
    assert evicted(run(PLUGIN, {"excludedTaints": ["k="]}, nodes, [pod("a", "n1")])) == ["a"]
    assert evicted(run(PLUGIN, {"excludedTaints": ["k"]}, nodes, [pod("a", "n1")])) == []


@pytest.mark.parametrize(
    ("included", "expected"),
    [
        (None, ["a"]),
        (["dedicated"], ["a"]),
        (["dedicated=gpu"], ["a"]),
        (["dedicated=cpu"], []),
        # As upstream: a list that is present but empty includes no taint at all.
        ([], []),
    ],
)
def test_included_taints(included: list[str] | None, expected: list[str]) -> None:
    args = {} if included is None else {"includedTaints": included}
    result = run(PLUGIN, args, [node("n1", NO_SCHEDULE), node("n2")], [pod("a", "n1")])
    assert evicted(result) == expected


def test_included_taint_tolerated_while_another_taint_is_not() -> None:
    nodes = [node("n1", NO_SCHEDULE, ("other", "x", "NoSchedule")), node("n2")]
    pods = [pod("a", "n1", {"key": "dedicated", "operator": "Exists"})]
    assert evicted(run(PLUGIN, {"includedTaints": ["dedicated"]}, nodes, pods)) == []
    assert evicted(run(PLUGIN, {}, nodes, pods)) == ["a"]


# ----------------------------------------------------------------------------- selection and limits


def test_namespaces_and_label_selector_select_pods() -> None:
    nodes = [node("n1", NO_SCHEDULE), node("n2")]
    pods = [
        pod("a", "n1", ns="team-a", labels={"app": "x"}),
        pod("b", "n1", ns="team-b", labels={"app": "x"}),
        pod("c", "n1", ns="team-a", labels={"app": "y"}),
    ]
    assert evicted(run(PLUGIN, {"namespaces": {"include": ["team-a"]}}, nodes, pods)) == ["a", "c"]
    assert evicted(run(PLUGIN, {"namespaces": {"exclude": ["team-a"]}}, nodes, pods)) == ["b"]
    assert evicted(run(PLUGIN, {"labelSelector": {"matchLabels": {"app": "x"}}}, nodes, pods)) == ["a", "b"]


def test_node_limit_moves_on_to_the_next_node_and_total_limit_stops() -> None:
    nodes = [node("n1", NO_SCHEDULE), node("n2", NO_SCHEDULE), node("n3")]
    pods = [pod("a1", "n1"), pod("a2", "n1"), pod("b1", "n2"), pod("b2", "n2")]
    assert evicted(run(PLUGIN, {}, nodes, pods, maxNoOfPodsToEvictPerNode=1)) == ["a1", "b1"]
    assert evicted(run(PLUGIN, {}, nodes, pods, maxNoOfPodsToEvictTotal=3)) == ["a1", "a2", "b1"]


def test_untainted_nodes_cost_nothing() -> None:
    # A node with no counted taint is skipped before its pods are looked at.
    result = run(
        PLUGIN, {}, [node("n1"), node("n2", ("k", "v", "PreferNoSchedule"))], [pod("a", "n1"), pod("b", "n2")]
    )
    assert evicted(result) == []
