"""Which pods a plugin considers, as upstream lists them: finished pods and minReplicas.

Upstream's RemovePodsViolatingNodeTaints, RemovePodsViolatingNodeAffinity and
RemovePodsViolatingInterPodAntiAffinity list a node's pods with ``ListPodsOnANode``, which drops
Succeeded and Failed pods; DefaultEvictor's ``minReplicas`` is checked when a plugin lists a node's
pods, on the counts the cluster shows then, not again with a count that shrinks at each eviction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
from tests import builders
from tests.unit.plugins.harness import (
    NOW,
    REGISTRY,
    Sorter,
    cycle,
    evicted,
    load,
    policy_doc,
    run,
    run_policy,
)

from desched.api.policy import load_policy
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import Framework
from desched.k8s.objects import Node, Pod


def node(name: str, *, taint: bool = False, zone: str = "a") -> Node:
    return builders.node(
        name,
        labels={"zone": zone},
        taints=[{"key": "maint", "effect": "NoSchedule"}] if taint else None,
        cpu="8",
        memory="16Gi",
    )


def pod(
    name: str,
    node_name: str,
    *,
    phase: str = "Running",
    owner: tuple[str, str] = ("ReplicaSet", "web"),
    labels: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
) -> Pod:
    kind, owner_name = owner
    return builders.pod(
        name,
        node=node_name,
        uid=f"uid-{name}",
        labels=labels or {},
        owner=(kind, owner_name, f"uid-{owner_name}"),
        controller=None,
        cpu="100m",
        affinity=affinity,
        phase=phase,
    )


def test_node_taints_leaves_finished_pods_alone() -> None:
    snapshot = ClusterSnapshot(
        nodes=[node("n1", taint=True), node("n2")],
        pods=[
            pod("job-done", "n1", phase="Succeeded", owner=("Job", "batch")),
            pod("job-failed", "n1", phase="Failed", owner=("Job", "batch")),
            pod("web-1", "n1"),
        ],
    )
    assert evicted(run("RemovePodsViolatingNodeTaints", {}, snapshot=snapshot, evictor={})) == ["web-1"]


def test_node_affinity_leaves_finished_pods_alone() -> None:
    required = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                ]
            }
        }
    }
    snapshot = ClusterSnapshot(
        nodes=[node("n1", zone="a"), node("n2", zone="b")],
        pods=[
            pod("failed", "n1", phase="Failed", affinity=required),
            pod("running", "n1", affinity=required),
        ],
    )
    args = {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}
    assert evicted(run("RemovePodsViolatingNodeAffinity", args, snapshot=snapshot, evictor={})) == ["running"]


def test_a_failed_sibling_does_not_make_anti_affinity_evict_the_running_pod() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    web = {"app": "web"}
    snapshot = ClusterSnapshot(
        nodes=[node("n1"), node("n2")],
        pods=[
            pod("web-old", "n1", phase="Failed", labels=web, affinity=anti),
            pod("web-1", "n1", labels=web, affinity=anti),
            pod("web-2", "n2", labels=web, affinity=anti),
        ],
    )
    assert evicted(run("RemovePodsViolatingInterPodAntiAffinity", {}, snapshot=snapshot, evictor={})) == []
    # a running neighbour still counts
    snapshot = ClusterSnapshot(
        nodes=[node("n1"), node("n2")],
        pods=[pod("web-1", "n1", labels=web, affinity=anti), pod("web-3", "n1", labels=web, affinity=anti)],
    )
    assert evicted(run("RemovePodsViolatingInterPodAntiAffinity", {}, snapshot=snapshot, evictor={})) == [
        "web-1"
    ]


def test_min_replicas_is_counted_once_per_cycle_so_both_replicas_leave_a_tainted_node() -> None:
    snapshot = ClusterSnapshot(
        nodes=[node("n1", taint=True), node("n2")],
        pods=[pod("web-1", "n1"), pod("web-2", "n1")],
    )
    assert evicted(
        run("RemovePodsViolatingNodeTaints", {}, snapshot=snapshot, evictor={"minReplicas": 2})
    ) == ["web-1", "web-2"]


def test_min_replicas_still_protects_an_owner_with_too_few_pods() -> None:
    snapshot = ClusterSnapshot(
        nodes=[node("n1", taint=True), node("n2")],
        pods=[pod("web-1", "n1"), pod("web-2", "n1"), pod("api-1", "n1", owner=("ReplicaSet", "api"))],
    )
    assert (
        evicted(run("RemovePodsViolatingNodeTaints", {}, snapshot=snapshot, evictor={"minReplicas": 3})) == []
    )
    assert evicted(
        run("RemovePodsViolatingNodeTaints", {}, snapshot=snapshot, evictor={"minReplicas": 2})
    ) == ["web-1", "web-2"]


def test_min_replicas_counts_the_cycle_start_across_profiles() -> None:
    """A profile without minReplicas evicts one replica; a later profile with minReplicas 2 still
    counts two (in a live cluster the first is terminating, still listed) and evicts the other."""
    taint_profile = {
        "name": "",
        "pluginConfig": [{"name": "DefaultEvictor", "args": {}}, {"name": "RemovePodsViolatingNodeTaints"}],
        "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}},
    }
    first = dict(taint_profile, name="first")
    first["pluginConfig"] = [
        {"name": "DefaultEvictor", "args": {"labelSelector": {"matchLabels": {"first": "yes"}}}},
        {"name": "RemovePodsViolatingNodeTaints"},
    ]
    second = dict(taint_profile, name="second")
    second["pluginConfig"] = [
        {"name": "DefaultEvictor", "args": {"minReplicas": 2}},
        {"name": "RemovePodsViolatingNodeTaints"},
    ]
    snapshot = ClusterSnapshot(
        nodes=[node("n1", taint=True), node("n2")],
        pods=[pod("web-1", "n1", labels={"first": "yes"}), pod("web-2", "n1")],
    )
    doc = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [first, second]}
    result = run_policy(doc, snapshot=snapshot)
    assert [(r.profile, r.name) for r in result.evictions] == [("first", "web-1"), ("second", "web-2")]


# ----------------------------------------------------------------------------- PreSort


def _aged(name: str, created: str) -> Pod:
    base = pod(name, "n1")
    return msgspec.structs.replace(
        base,
        metadata=msgspec.structs.replace(
            base.metadata, creation_timestamp=msgspec.convert(created, datetime)
        ),
    )


def test_presort_changes_which_pod_a_node_limit_leaves() -> None:
    pods = [_aged("a-old", "2026-01-01T00:00:00Z"), _aged("b-new", "2026-03-01T00:00:00Z")]
    pods.append(_aged("c-mid", "2026-02-01T00:00:00Z"))

    def first_evicted(presort: list[Sorter]) -> list[str]:
        snapshot = ClusterSnapshot(nodes=[node("n1", taint=True), node("n2")], pods=pods)
        doc = policy_doc(
            "RemovePodsViolatingNodeTaints", {}, evictor={}, presort=presort, maxNoOfPodsToEvictPerNode=1
        )
        return evicted(run_policy(doc, snapshot=snapshot))

    assert first_evicted([]) == ["a-old"]  # listing order: by name
    newest: list[Sorter] = [("PodAgeSort", {"order": "NewestFirst"})]
    assert first_evicted(newest) == ["b-new"]
    assert first_evicted([("PodAgeSort", {})]) == ["a-old"]


def test_presort_orders_the_pods_node_affinity_considers() -> None:
    required = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                ]
            }
        }
    }
    pods = []
    for name, created in (("a-old", "2026-01-01T00:00:00Z"), ("b-new", "2026-03-01T00:00:00Z")):
        p = _aged(name, created)
        pods.append(
            msgspec.structs.replace(
                p,
                spec=msgspec.structs.replace(
                    p.spec, affinity=pod("x", "n1", affinity=required).spec.affinity
                ),
            )
        )
    args = {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}
    newest: list[Sorter] = [("PodAgeSort", {"order": "NewestFirst"})]
    snapshot = ClusterSnapshot(nodes=[node("n1", zone="a"), node("n2", zone="b")], pods=pods)
    policy = load(
        "RemovePodsViolatingNodeAffinity", args, evictor={}, presort=newest, maxNoOfPodsToEvictPerNode=1
    )
    assert evicted(cycle(Framework(policy, REGISTRY, clock=lambda: NOW), snapshot=snapshot)) == ["b-new"]
    assert policy.warnings == ()


def test_policy_warns_when_a_strategy_has_no_presort_step() -> None:
    doc = policy_doc(
        "RemovePodsHavingTooManyRestarts",
        {"podRestartThreshold": 3},
        evictor={},
        presort=[("PodAgeSort", {})],
        maxNoOfPodsToEvictPerNode=1,
    )
    policy = load_policy(doc, REGISTRY)
    assert policy.warnings == (
        "profiles[0].plugins.presort: RemovePodsHavingTooManyRestarts has no pre-sort step, so "
        "PodAgeSort does not change the order it considers pods in",
    )
    doc = policy_doc(
        "RemovePodsViolatingNodeTaints",
        {},
        evictor={},
        presort=[("PodAgeSort", {})],
        maxNoOfPodsToEvictPerNode=1,
    )
    assert load_policy(doc, REGISTRY).warnings == ()
