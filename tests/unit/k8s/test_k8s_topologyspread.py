"""Topology spread semantics (desched.k8s.topologyspread): which nodes are domains of a constraint
under nodeAffinityPolicy/nodeTaintsPolicy, and which pods the selector with matchLabelKeys counts,
against kube-scheduler's documented rules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from desched.k8s import labels as k8s_labels
from desched.k8s import topologyspread as tsc
from desched.k8s.objects import LabelSelector, Node, Pod, Taint, TopologySpreadConstraint

ZONE = "topology.kubernetes.io/zone"


def node(name: str, labels: dict[str, str], taints: list[dict[str, str]] | None = None) -> Node:
    return msgspec.convert(
        {"metadata": {"name": name, "labels": labels}, "spec": {"taints": taints or []}}, Node
    )


def pod(labels: dict[str, str], *, spec: dict[str, Any] | None = None, **status: Any) -> Pod:
    return msgspec.convert(
        {
            "metadata": {"name": "p", "namespace": "ns", "labels": labels, **status.pop("meta", {})},
            "spec": {"containers": [{"name": "c"}], **(spec or {})},
            "status": {"phase": status.get("phase", "Running")},
        },
        Pod,
    )


def constraint(**fields: Any) -> TopologySpreadConstraint:
    doc = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", **fields}
    return msgspec.convert(doc, TopologySpreadConstraint)


def test_policies_default_to_honor_affinity_and_ignore_taints() -> None:
    c = constraint()
    assert tsc.node_affinity_policy(c) == tsc.HONOR
    assert tsc.node_taints_policy(c) == tsc.IGNORE
    # kube-scheduler's system-default constraints (no constraint object) honour affinity only
    assert tsc.honors_node_affinity(None) and not tsc.honors_node_taints(None)
    explicit = constraint(nodeAffinityPolicy="Ignore", nodeTaintsPolicy="Honor")
    assert not tsc.honors_node_affinity(explicit) and tsc.honors_node_taints(explicit)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, {"a": True, "b": False, "tainted": True, "keyless": False}),
        ({"nodeAffinityPolicy": "Ignore"}, {"a": True, "b": True, "tainted": True, "keyless": False}),
        ({"nodeTaintsPolicy": "Honor"}, {"a": True, "b": False, "tainted": False, "keyless": False}),
    ],
)
def test_node_eligible_follows_the_inclusion_policies(
    fields: dict[str, str], expected: dict[str, bool]
) -> None:
    nodes = {
        "a": node("a", {ZONE: "z1", "disk": "ssd"}),
        "b": node("b", {ZONE: "z2", "disk": "hdd"}),
        "tainted": node("tainted", {ZONE: "z3", "disk": "ssd"}, [{"key": "gpu", "effect": "NoSchedule"}]),
        "keyless": node("keyless", {"disk": "ssd"}),
    }
    p = pod({"app": "web"}, spec={"nodeSelector": {"disk": "ssd"}})
    c = constraint(**fields)
    got = {name: tsc.node_eligible(p, c, n, required_keys=(ZONE,)) for name, n in nodes.items()}
    assert got == expected


def test_node_eligible_checks_the_taints_it_is_given() -> None:
    # the placement simulator passes the not-ready taint the node lifecycle controller would add
    n = node("a", {ZONE: "z1"})
    p = pod({"app": "web"})
    c = constraint(nodeTaintsPolicy="Honor")
    assert tsc.node_eligible(p, c, n)
    not_ready = [Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule")]
    assert not tsc.node_eligible(p, c, n, taints=not_ready)


def test_match_label_keys_add_the_pods_own_values_and_skip_missing_keys() -> None:
    c = constraint(
        matchLabelKeys=["pod-template-hash", "missing"], labelSelector={"matchLabels": {"app": "web"}}
    )
    assert tsc.match_label_pairs(c, {"app": "web", "pod-template-hash": "abc"}) == (
        ("pod-template-hash", "abc"),
    )
    assert tsc.match_label_pairs(constraint(), {"app": "web"}) == ()
    assert tsc.match_label_pairs(c, None) == ()


def test_merged_matcher_needs_the_selector_and_every_pair() -> None:
    selector = k8s_labels.compile_label_selector(
        LabelSelector(match_labels={"app": "web"}), none_matches=False
    )
    match = tsc.merged_pod_matcher(selector, (("pod-template-hash", "abc"),))
    assert match(pod({"app": "web", "pod-template-hash": "abc"}))
    assert not match(pod({"app": "web", "pod-template-hash": "old"}))
    assert not match(pod({"app": "db", "pod-template-hash": "abc"}))
    plain = tsc.merged_pod_matcher(selector, ())
    assert plain(pod({"app": "web"})) and not plain(pod({}))


def test_finished_and_terminating_pods_do_not_count() -> None:
    assert tsc.counts_pod(pod({}))
    assert not tsc.counts_pod(pod({}, phase="Succeeded"))
    assert not tsc.counts_pod(pod({}, phase="Failed"))
    deleting = pod({}, meta={"deletionTimestamp": datetime(2026, 1, 1, tzinfo=UTC).isoformat()})
    assert not tsc.counts_pod(deleting)
