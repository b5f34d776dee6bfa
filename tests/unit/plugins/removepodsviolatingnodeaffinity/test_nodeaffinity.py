"""RemovePodsViolatingNodeAffinity: args validation through the policy loader, and edge cases the
upstream fixtures leave out (nodeSelector without affinity, fit, scores, shape caching)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from tests import builders
from tests.unit.plugins.harness import evicted, load, load_error, run

from desched.k8s.objects import Node, Pod
from desched.plugins.removepodsviolatingnodeaffinity.args import RemovePodsViolatingNodeAffinityArgs

PLUGIN = "RemovePodsViolatingNodeAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def node(
    name: str, labels: dict[str, str] | None = None, *, unschedulable: bool = False, cpu: str = "4"
) -> Node:
    return builders.node(
        name, hostname_label=False, labels=labels or {}, unschedulable=unschedulable, cpu=cpu
    )


def expr(key: str, op: str = "In", *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


def pod(
    name: str,
    node_name: str,
    *,
    required: list[dict[str, Any]] | None = None,
    preferred: list[tuple[int, dict[str, Any]]] | None = None,
    node_selector: dict[str, str] | None = None,
    ns: str = "default",
    cpu: str = "100m",
) -> Pod:
    node_affinity: dict[str, Any] = {}
    if required is not None:
        node_affinity[REQUIRED] = {"nodeSelectorTerms": [{"matchExpressions": required}]}
    if preferred is not None:
        node_affinity[PREFERRED] = [{"weight": w, "preference": term} for w, term in preferred]
    return builders.pod(
        name,
        namespace=ns,
        node=node_name,
        uid=name,
        owner=("ReplicaSet", "rs"),
        controller=None,
        cpu=cpu,
        affinity={"nodeAffinity": node_affinity} if node_affinity else None,
        node_selector=node_selector or None,
    )


def types(affinity_types: list[str]) -> dict[str, Any]:
    """The args of a run: these nodeAffinityTypes."""
    return {"nodeAffinityType": affinity_types}


WANT_SSD = [expr("disk", "In", "ssd")]


# ----------------------------------------------------------------------------- args


def test_valid_args() -> None:
    policy = load(PLUGIN, {"nodeAffinityType": [REQUIRED, PREFERRED]})
    args = policy.profiles[0].args[PLUGIN]
    assert isinstance(args, RemovePodsViolatingNodeAffinityArgs)
    assert args.node_affinity_type == [REQUIRED, PREFERRED]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({}, "required field is missing"),
        (None, "required field is missing"),
        ({"nodeAffinityType": []}, f"must not be empty: list {REQUIRED} and/or {PREFERRED} (got [])"),
        ({"nodeAffinityType": None}, "input should be a valid list, got None"),
    ],
)
def test_node_affinity_type_is_required(args: dict[str, Any] | None, reason: str) -> None:
    assert load_error(PLUGIN, args) == f"profiles[0].pluginConfig[0].args.nodeAffinityType: {reason}"


def test_enabled_without_plugin_config_names_the_missing_arg() -> None:
    assert load_error(PLUGIN, None, configured=False) == (
        "profiles[0].pluginConfig: plugin 'RemovePodsViolatingNodeAffinity' is enabled but has no "
        "pluginConfig, and its args have no default (nodeAffinityType: required field is missing)"
    )


def test_namespaces_include_and_exclude_are_exclusive() -> None:
    msg = load_error(
        PLUGIN, {"nodeAffinityType": [REQUIRED], "namespaces": {"include": ["a"], "exclude": ["b"]}}
    )
    assert msg.startswith("profiles[0].pluginConfig[0].args.namespaces")


def test_unknown_type_is_accepted_as_upstream_and_does_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        result = run(
            PLUGIN,
            types(["requiredDuringSchedulingRequiredDuringExecution"]),
            [node("n1"), node("n2", {"disk": "ssd"})],
            [pod("a", "n1", required=WANT_SSD)],
        )
    assert evicted(result) == []
    assert "requiredDuringSchedulingRequiredDuringExecution" in caplog.text


# ----------------------------------------------------------------------------- required


def test_required_violation_is_evicted_when_another_node_fits() -> None:
    result = run(
        PLUGIN,
        types([REQUIRED]),
        [node("n1"), node("n2", {"disk": "ssd"})],
        [pod("a", "n1", required=WANT_SSD), pod("b", "n2", required=WANT_SSD), pod("c", "n1")],
    )
    assert evicted(result) == ["a"]
    assert "no longer matches" in result.evictions[0].reason


def test_node_selector_alone_is_not_enough() -> None:
    # Upstream only looks at pods that have a required node affinity.
    result = run(
        PLUGIN,
        types([REQUIRED]),
        [node("n1"), node("n2", {"disk": "ssd"})],
        [pod("a", "n1", node_selector={"disk": "ssd"})],
    )
    assert evicted(result) == []


def test_node_selector_counts_for_a_pod_with_required_affinity() -> None:
    nodes = [node("n1", {"disk": "ssd"}), node("n2", {"disk": "ssd", "zone": "a"})]
    result = run(
        PLUGIN, types([REQUIRED]), nodes, [pod("a", "n1", required=WANT_SSD, node_selector={"zone": "a"})]
    )
    assert evicted(result) == ["a"]


@pytest.mark.parametrize(
    "target",
    [
        node("n2", {"disk": "ssd"}, unschedulable=True),
        node("n2", {"disk": "ssd"}, cpu="50m"),
        node("n2", {"disk": "hdd"}),
    ],
    ids=["unschedulable", "too-small", "no-match"],
)
def test_required_violation_stays_when_no_node_fits(target: Node) -> None:
    result = run(PLUGIN, types([REQUIRED]), [node("n1"), target], [pod("a", "n1", required=WANT_SSD)])
    assert evicted(result) == []


def test_only_nodes_given_to_the_plugin_count_as_targets() -> None:
    nodes = [node("n1", {"pool": "x"}), node("n2", {"pool": "x"}), node("n3", {"disk": "ssd"})]
    result = run(PLUGIN, types([REQUIRED]), nodes, [pod("a", "n1", required=WANT_SSD)], nodeSelector="pool=x")
    assert evicted(result) == []


def test_required_pods_of_one_shape_on_many_nodes() -> None:
    nodes = [node(f"n{i}", {"disk": "ssd" if i % 2 else "hdd"}) for i in range(10)]
    pods = [pod(f"p{i}-{j}", f"n{i}", required=WANT_SSD) for i in range(10) for j in range(3)]
    result = run(PLUGIN, types([REQUIRED]), nodes, pods)
    assert sorted(evicted(result)) == sorted(f"p{i}-{j}" for i in range(0, 10, 2) for j in range(3))


def test_node_limit_and_total_limit() -> None:
    nodes = [node("n1"), node("n2"), node("n3", {"disk": "ssd"})]
    pods = [
        pod(n, node_name, required=WANT_SSD)
        for n, node_name in [("a1", "n1"), ("a2", "n1"), ("b1", "n2"), ("b2", "n2")]
    ]
    assert evicted(run(PLUGIN, types([REQUIRED]), nodes, pods, maxNoOfPodsToEvictPerNode=1)) == ["a1", "b1"]
    assert evicted(run(PLUGIN, types([REQUIRED]), nodes, pods, maxNoOfPodsToEvictTotal=3)) == [
        "a1",
        "a2",
        "b1",
    ]
    # The total limit also ends the other affinity types.
    assert evicted(run(PLUGIN, types([REQUIRED, PREFERRED]), nodes, pods, maxNoOfPodsToEvictTotal=1)) == [
        "a1"
    ]


# ----------------------------------------------------------------------------- preferred


def test_preferred_evicts_towards_a_better_scoring_node() -> None:
    nodes = [node("n1", {"zone": "a"}), node("n2", {"zone": "b", "disk": "ssd"})]
    prefs = [
        (10, {"matchExpressions": [expr("zone", "In", "b")]}),
        (5, {"matchExpressions": [expr("disk", "Exists")]}),
    ]
    result = run(
        PLUGIN, types([PREFERRED]), nodes, [pod("a", "n1", preferred=prefs), pod("b", "n2", preferred=prefs)]
    )
    assert evicted(result) == ["a"]
    assert result.evictions[0].reason.startswith("a node scores 15")


def test_preferred_equal_score_stays() -> None:
    nodes = [node("n1", {"zone": "a"}), node("n2", {"zone": "b"})]
    prefs = [
        (10, {"matchExpressions": [expr("zone", "In", "a")]}),
        (10, {"matchExpressions": [expr("zone", "In", "b")]}),
    ]
    assert evicted(run(PLUGIN, types([PREFERRED]), nodes, [pod("a", "n1", preferred=prefs)])) == []


def test_preferred_like_upstream_best_node_need_not_fit() -> None:
    # The best node is cordoned; the pod still fits its own node, which is all upstream asks.
    # (DefaultEvictor's nodeFit is what stops such an eviction.)
    nodes = [node("n1"), node("n2", {"zone": "b"}, unschedulable=True)]
    prefs = [(10, {"matchExpressions": [expr("zone", "In", "b")]})]
    assert evicted(run(PLUGIN, types([PREFERRED]), nodes, [pod("a", "n1", preferred=prefs)])) == ["a"]


def test_preferred_needs_the_pod_to_fit_some_node() -> None:
    nodes = [
        node("n1", unschedulable=True),
        node("n2", {"zone": "b"}, unschedulable=True),
        node("n3", {"zone": "c"}),
    ]
    prefs = [(10, {"matchExpressions": [expr("zone", "In", "b")]})]
    # n3 fits: evicted.
    assert evicted(run(PLUGIN, types([PREFERRED]), nodes, [pod("a", "n1", preferred=prefs)])) == ["a"]
    # Nothing fits (n3 is too small): stays.
    nodes[2] = node("n3", {"zone": "c"}, cpu="10m")
    assert evicted(run(PLUGIN, types([PREFERRED]), nodes, [pod("a", "n1", preferred=prefs)])) == []


def test_preferred_match_fields_tell_nodes_apart() -> None:
    # Nodes with identical labels but different names must not share a cached score.
    nodes = [node("n1", {"zone": "a"}), node("n2", {"zone": "a"})]
    prefs = [(10, {"matchFields": [expr("metadata.name", "In", "n2")]})]
    result = run(
        PLUGIN, types([PREFERRED]), nodes, [pod("a", "n1", preferred=prefs), pod("b", "n2", preferred=prefs)]
    )
    assert evicted(result) == ["a"]


def test_preferred_gt_and_missing_labels_score_by_value() -> None:
    nodes = [node("n1", {"gen": "3"}), node("n2"), node("n3", {"gen": "5"})]
    prefs = [(7, {"matchExpressions": [expr("gen", "Gt", "4")]})]
    pods = [pod("a", "n1", preferred=prefs), pod("b", "n2", preferred=prefs), pod("c", "n3", preferred=prefs)]
    assert evicted(run(PLUGIN, types([PREFERRED]), nodes, pods)) == ["a", "b"]


def test_a_pod_violating_both_types_is_evicted_once() -> None:
    nodes = [node("n1"), node("n2", {"disk": "ssd"})]
    prefs = [(10, {"matchExpressions": [expr("disk", "In", "ssd")]})]
    result = run(
        PLUGIN, types([REQUIRED, PREFERRED]), nodes, [pod("a", "n1", required=WANT_SSD, preferred=prefs)]
    )
    assert evicted(result) == ["a"]
