"""The memos that make a cycle cheap must never change a decision: each is checked here against
what it remembers going stale (a new cycle, evictions, additions, the clock, shared records)."""

from __future__ import annotations

import gc
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from tests import builders

from desched.api.policy import Policy, ProfileConfig, load_policy
from desched.backends.simulated_eviction import RecordingBackend, SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import Framework
from desched.framework.types import ExtensionPoint
from desched.k8s._compile_cache import ContentKeys
from desched.k8s.objects import Node, Pod, Toleration
from desched.plugins import default_registry
from desched.plugins.defaultevictor.args import DefaultEvictorArgs
from desched.plugins.defaultevictor.plugin import DefaultEvictor
from desched.plugins.removepodsviolatingnodeaffinity.plugin import _AffinePods
from desched.plugins.removepodsviolatingtopologyspreadconstraint._constraints import ConstraintCache
from desched.scheduling import nodefit

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RS = [{"kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}]


def make_pod(name: str, node: str = "n1", **extra: Any) -> Pod:
    """``extra``: ``namespace``, ``owners`` (the ownerReferences), ``labels``, ``annotations``,
    ``startTime``; the rest goes into the spec."""
    namespace = extra.pop("namespace", "default")
    meta: dict[str, Any] = {"ownerReferences": extra.pop("owners", RS)}
    for key in ("labels", "annotations"):
        if key in extra:
            meta[key] = extra.pop(key)
    status = {"startTime": extra.pop("startTime")} if "startTime" in extra else None
    return builders.pod(name, namespace=namespace, node=node, metadata=meta, spec=extra, status=status)


def make_node(name: str, labels: dict[str, str] | None = None) -> Node:
    return builders.node(name, labels=labels)


def evictor_framework(args: dict[str, Any], clock: list[datetime] | None = None) -> Framework:
    profile = ProfileConfig(
        name="p",
        plugins={
            ExtensionPoint.FILTER: ("DefaultEvictor",),
            ExtensionPoint.PRE_EVICTION_FILTER: ("DefaultEvictor",),
        },
        args={"DefaultEvictor": DefaultEvictorArgs.model_validate(args)},
    )
    now = clock if clock is not None else [NOW]
    return Framework(Policy(profiles=(profile,)), default_registry(entry_points=False), clock=lambda: now[0])


def default_evictor(fw: Framework) -> DefaultEvictor:
    inst = fw.profiles[0].instances["DefaultEvictor"]
    assert isinstance(inst, DefaultEvictor)
    return inst


def _spread_only_framework() -> Framework:
    """A framework whose one profile runs RemovePodsViolatingTopologySpreadConstraint alone."""
    policy = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "plugins": {"balance": {"enabled": ["RemovePodsViolatingTopologySpreadConstraint"]}},
            }
        ],
    }
    registry = default_registry(entry_points=False)
    return Framework(load_policy(policy, registry), registry, clock=lambda: NOW)


# ---------------------------------------------------------------------------- DefaultEvictor


def test_verdicts_are_per_cycle_for_what_the_snapshot_says_about_a_pod() -> None:
    """The same pod object, judged again in a new cycle where a PDB now covers it and the
    priority threshold's class changed value."""
    pod = make_pod("p", labels={"app": "a"}, priority=1000)
    fw = evictor_framework(
        {"podProtections": {"extraEnabled": ["PodsWithoutPDB"]}, "priorityThreshold": {"name": "high"}}
    )
    ev = default_evictor(fw)
    high = builders.priority_class("high", 1000)
    fw.begin_cycle(ClusterSnapshot(pods=[pod], priority_classes=[high]), RecordingBackend())
    assert not ev.filter(pod)
    assert not ev.filter(pod)  # (remembered)
    pdb = builders.pdb("b", selector={"app": "a"})
    higher = builders.priority_class("high", 2000)
    fw.begin_cycle(ClusterSnapshot(pods=[pod], pdbs=[pdb], priority_classes=[higher]), RecordingBackend())
    assert ev.filter(pod)


def test_min_pod_age_is_asked_of_the_clock_every_time() -> None:
    clock = [NOW]
    fw = evictor_framework({"minPodAge": "30m"}, clock)
    ev = default_evictor(fw)
    pod = make_pod("p", startTime="2026-01-01T11:45:00Z")
    fw.begin_cycle(ClusterSnapshot(pods=[pod]), RecordingBackend())
    assert not ev.filter(pod)
    clock[0] = NOW + timedelta(minutes=20)
    assert ev.filter(pod)


def test_min_replicas_counts_are_taken_once_per_cycle() -> None:
    pods = [make_pod(f"p{i}") for i in range(3)]
    snap = ClusterSnapshot(pods=pods)
    fw = evictor_framework({"minReplicas": 3})
    ev = default_evictor(fw)
    fw.begin_cycle(snap, RecordingBackend())
    assert ev.filter(pods[0])
    snap.remove_pod(pods[2])  # evicted in this cycle: the cycle's count holds (upstream's)
    assert ev.filter(pods[0]) and ev.filter(pods[1])
    fw.begin_cycle(snap, RecordingBackend())  # the next cycle counts two
    assert not ev.filter(pods[0])
    snap.add_pod(make_pod("p3"))
    fw.begin_cycle(snap, RecordingBackend())
    assert ev.filter(pods[0])


def test_min_replicas_with_another_uid_under_the_same_owner_name() -> None:
    mine = [make_pod(f"p{i}") for i in range(2)]
    other_uid = [{"kind": "ReplicaSet", "name": "rs", "uid": "old-uid"}]
    strangers = [make_pod(f"s{i}", owners=other_uid) for i in range(2)]
    snap = ClusterSnapshot(pods=[*mine, *strangers])
    fw = evictor_framework({"minReplicas": 2})
    ev = default_evictor(fw)
    fw.begin_cycle(snap, RecordingBackend())
    assert ev.filter(mine[0]) and ev.filter(strangers[0])
    snap.remove_pod(strangers[1])  # the owner name lost a pod of the other uid only
    fw.begin_cycle(snap, RecordingBackend())
    assert ev.filter(mine[0])
    assert not ev.filter(strangers[0])
    snap.remove_pod(mine[1])
    fw.begin_cycle(snap, RecordingBackend())
    assert not ev.filter(mine[0])


def test_an_unchanged_verdict_is_not_mistaken_for_another_pod_with_the_same_id() -> None:
    fw = evictor_framework({"labelSelector": {"matchLabels": {"app": "a"}}})
    ev = default_evictor(fw)
    fw.begin_cycle(ClusterSnapshot(), RecordingBackend())
    for _ in range(50):  # short-lived pods: their ids are reused, the memo must tell them apart
        assert ev.filter(make_pod("a", labels={"app": "a"}))
        assert not ev.filter(make_pod("b", labels={"app": "b"}))


# ---------------------------------------------------------------------------- content keys


def test_content_keys_are_equal_for_equal_records_shared_or_not() -> None:
    keys = ContentKeys()
    a = Toleration(key="k", operator="Exists")
    same = Toleration(key="k", operator="Exists")
    other = Toleration(key="k", operator="Equal", value="v")
    assert keys(a) == keys(same) == keys(a)
    assert keys(a) != keys(other)
    assert keys(None) == keys(None) != keys([])


# ---------------------------------------------------------------------------- node fit


def _anti(match_labels: dict[str, str], **selector: Any) -> dict[str, Any]:
    term = {
        "topologyKey": "kubernetes.io/hostname",
        "labelSelector": {"matchLabels": match_labels, **selector},
    }
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_anti_affinity_label_index_sees_new_pods_and_the_whole_selector() -> None:
    n1 = make_node("n1")
    selector = {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]}
    pod = make_pod("p", "n0", affinity=_anti({"app": "web"}, **selector))
    web_front = make_pod("front", "n1", labels={"app": "web", "tier": "front"})
    snap = ClusterSnapshot(nodes=[n1], pods=[pod, web_front])
    assert nodefit.node_fit_failures(snap, pod, n1) == []  # app=web but not tier=db
    snap.add_pod(make_pod("db", "n1", labels={"app": "web", "tier": "db"}))
    assert nodefit.node_fit_failures(snap, pod, n1) == [nodefit.ANTI_AFFINITY]


def test_pods_with_equal_records_share_node_fit_answers_whether_the_records_are_shared() -> None:
    zone_a = make_node("n1", {"zone": "a"})
    zone_b = make_node("n2", {"zone": "b"})
    wants_a = make_pod("x", "n0", nodeSelector={"zone": "a"})
    shared = msgspec.structs.replace(
        make_pod("y", "n0"),
        spec=msgspec.structs.replace(make_pod("y", "n0").spec, node_selector=wants_a.spec.node_selector),
    )
    copied = make_pod("z", "n0", nodeSelector={"zone": "a"})
    wants_b = make_pod("w", "n0", nodeSelector={"zone": "b"})
    snap = ClusterSnapshot(nodes=[zone_a, zone_b], pods=[wants_a, shared, copied, wants_b])
    for p in (wants_a, shared, copied):
        assert nodefit.node_fit_failures(snap, p, zone_a) == []
        assert nodefit.node_fit_failures(snap, p, zone_b) == [nodefit.NODE_SELECTOR_MISMATCH]
    assert nodefit.node_fit_failures(snap, wants_b, zone_a) == [nodefit.NODE_SELECTOR_MISMATCH]
    assert nodefit.node_fit_failures(snap, wants_b, zone_b) == []


# ---------------------------------------------------------------------------- topology spread


def _tsc(keys: list[str] | None = None) -> list[dict[str, Any]]:
    c: dict[str, Any] = {
        "maxSkew": 1,
        "topologyKey": "zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "a"}},
    }
    if keys:
        c["matchLabelKeys"] = keys
    return [c]


def test_constraints_built_once_for_shared_records_and_apart_for_different_ones() -> None:
    first = make_pod("p0", labels={"app": "a", "rev": "1"}, topologySpreadConstraints=_tsc(["rev"]))
    spec, meta = first.spec, first.metadata
    twin = msgspec.structs.replace(first, metadata=msgspec.structs.replace(meta, name="p1"))
    assert twin.spec is spec and twin.metadata.labels is meta.labels
    other_rev = make_pod("p2", labels={"app": "a", "rev": "2"}, topologySpreadConstraints=_tsc(["rev"]))
    same_rev = make_pod("p3", labels={"app": "a", "rev": "1"}, topologySpreadConstraints=_tsc(["rev"]))
    cache = ConstraintCache()
    built = cache.build_all(first, first.spec.topology_spread_constraints)
    assert cache.build_all(twin, twin.spec.topology_spread_constraints) is built
    assert (
        cache.build_all(same_rev, same_rev.spec.topology_spread_constraints) == built
    )  # equal content, one constraint
    assert (
        cache.build_all(other_rev, other_rev.spec.topology_spread_constraints) != built
    )  # matchLabelKeys: another revision, another one
    bad = make_pod(
        "bad", topologySpreadConstraints=[{**_tsc()[0], "labelSelector": {"matchLabels": {"a b": "c"}}}]
    )
    (error,) = cache.build_all(bad, bad.spec.topology_spread_constraints)
    assert isinstance(error, str) and "labelSelector" in error


def test_invalid_constraints_are_reported_for_every_pod_sharing_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad_tsc = [{**_tsc()[0], "labelSelector": {"matchLabels": {"a b": "c"}}}]
    first = make_pod("p0", labels={"app": "a"}, topologySpreadConstraints=bad_tsc)
    twin = msgspec.structs.replace(first, metadata=msgspec.structs.replace(first.metadata, name="p1"))
    nodes = [make_node("n1", {"zone": "a"}), make_node("n2", {"zone": "b"})]
    snap = ClusterSnapshot(nodes=nodes, pods=[first, twin])
    fw = _spread_only_framework()
    with caplog.at_level(logging.ERROR):
        fw.run_cycle(snap, SimulatedBackend(snap))
    reported = [r.getMessage() for r in caplog.records if "cannot process topology spread" in r.getMessage()]
    assert len(reported) == 2 and "default/p0" in reported[0] and "default/p1" in reported[1]


# ---------------------------------------------------------------------------- node affinity


def test_affine_pods_of_a_later_pass_leave_out_pods_removed_meanwhile() -> None:
    aff = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]
            }
        }
    }
    pods = [make_pod(f"p{i}", affinity=aff) for i in range(3)]
    plain = make_pod("plain")
    snap = ClusterSnapshot(nodes=[make_node("n1")], pods=[*pods, plain])
    affine = _AffinePods(snap)
    assert affine.on("n1") == pods
    assert affine.on("n1") == pods
    snap.remove_pod(pods[1])
    assert affine.on("n1") == [pods[0], pods[2]]
    late = make_pod("p9", affinity=aff)
    snap.add_pod(late)
    assert affine.on("n1") == [pods[0], pods[2], late]


def test_a_finished_cycle_leaves_no_cycle_of_the_spread_plans_objects() -> None:
    """The plan of a Balance call is freed by reference counting once the cycle ends: the
    simulation driver runs with the cyclic collector paused, so a reference cycle through it
    (the namespaces kept the run through a method of it) held the whole plan through
    placement (~200,000 objects at 5,000 nodes)."""
    from desched.plugins.removepodsviolatingtopologyspreadconstraint import plugin as spread_plugin

    pods = [
        make_pod(f"p{i}", node="n1", labels={"app": "a"}, topologySpreadConstraints=_tsc()) for i in range(4)
    ]
    nodes = [make_node("n1", {"zone": "a"}), make_node("n2", {"zone": "b"})]
    snap = ClusterSnapshot(nodes=nodes, pods=pods)
    fw = _spread_only_framework()
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = fw.run_cycle(snap, SimulatedBackend(snap))
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            kinds = (spread_plugin._Run, spread_plugin._Namespace, spread_plugin.Plan)
            left = [type(o).__name__ for o in gc.garbage if isinstance(o, kinds)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    finally:
        if was_enabled:
            gc.enable()
    assert result.evictions  # the plan was made and used
    assert left == []
