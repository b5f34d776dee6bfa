"""DefaultEvictor: args validation and the rules the upstream fixtures do not cover."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest
from tests import builders
from tests.unit.plugins.harness import framework, instance, load_error

from desched.api.types import validate_model
from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.k8s.objects import (
    Node,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
)
from desched.plugins.defaultevictor import plugin as plugin_module
from desched.plugins.defaultevictor.args import DefaultEvictorArgs, PodProtection
from desched.plugins.defaultevictor.plugin import DefaultEvictor

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PLUGIN = "DefaultEvictor"
ARGS_PATH = "profiles[0].pluginConfig[0].args"
RS_OWNER = [{"kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}]


def make_pod(name: str = "p", node: str = "n1", **extra: Any) -> Pod:
    """``extra``: ``namespace``, ``owners`` (the ownerReferences), ``labels``, ``annotations``,
    ``deletionTimestamp``, ``cpu``, ``phase``, ``startTime``; the rest goes into the spec."""
    namespace = extra.pop("namespace", "default")
    meta: dict[str, Any] = {"ownerReferences": extra.pop("owners", RS_OWNER)}
    for key in ("labels", "annotations", "deletionTimestamp"):
        if key in extra:
            meta[key] = extra.pop(key)
    cpu = extra.pop("cpu", "100m")
    phase = extra.pop("phase", "Running")
    status = {"startTime": extra.pop("startTime")} if "startTime" in extra else None
    return builders.pod(
        name, namespace=namespace, node=node, cpu=cpu, phase=phase, metadata=meta, spec=extra, status=status
    )


def make_node(name: str, *, ready: bool = True, labels: dict[str, str] | None = None, cpu: str = "2") -> Node:
    return builders.node(
        name, hostname_label=False, labels=labels or {}, cpu=cpu, memory="4Gi", pods="10", ready=ready
    )


def convert(cls: Any, doc: dict[str, Any]) -> Any:
    return msgspec.convert(doc, cls, strict=False)


def evictor(args: dict[str, Any] | None = None, snapshot: ClusterSnapshot | None = None) -> DefaultEvictor:
    inst = instance(PLUGIN, args or {}, snapshot=snapshot, evictor=True, now=NOW)
    assert isinstance(inst, DefaultEvictor)
    return inst


# ---------------------------------------------------------------------------- args


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"noEvictionPolicy": "Sometimes"},
            f"{ARGS_PATH}.noEvictionPolicy: must be 'Preferred' or 'Mandatory' (or empty), got 'Sometimes'",
        ),
        ({"minPodAge": "ten minutes"}, f"{ARGS_PATH}.minPodAge: invalid duration 'ten minutes'"),
        ({"minReplicas": -1}, f"{ARGS_PATH}.minReplicas: input should be greater than or equal to 0"),
        ({"nodeSelector": "a in (b"}, f"{ARGS_PATH}.nodeSelector: "),
        (
            {"priorityThreshold": {"value": 1, "name": "x"}},
            f"{ARGS_PATH}.priorityThreshold.name: cannot be set with value (got value=1, name='x')",
        ),
        (
            {"podProtections": {"extraEnabled": ["PodsWithLocalStorage"]}},
            f"{ARGS_PATH}.podProtections.extraEnabled[0]: must be one of PodsWithPVC, PodsWithoutPDB, "
            "PodsWithResourceClaims (the extraEnabled protections), got 'PodsWithLocalStorage'",
        ),
        (
            {"podProtections": {"defaultDisabled": ["PodsWithPVC"]}},
            f"{ARGS_PATH}.podProtections.defaultDisabled[0]: must be one of ",
        ),
        (
            {"podProtections": {"defaultDisabled": ["DaemonSetPods", "DaemonSetPods"]}},
            f"{ARGS_PATH}.podProtections.defaultDisabled[1]: 'DaemonSetPods' is listed twice",
        ),
        (
            {"podProtections": {"extraEnabled": ["PodsWithPVC"]}, "ignorePodsWithoutPDB": True},
            f"{ARGS_PATH}.ignorePodsWithoutPDB: deprecated, cannot be combined with "
            "podProtections.extraEnabled or podProtections.defaultDisabled (got ignorePodsWithoutPDB: true; "
            "use instead:",
        ),
        (
            {"podProtections": {"config": {"PodsWithPVC": {"protectedStorageClasses": [{}]}}}},
            f"{ARGS_PATH}.podProtections.config.PodsWithPVC.protectedStorageClasses[0].name: "
            "required field is missing",
        ),
        ({"nodefit": True}, f"{ARGS_PATH}.nodefit: unknown field"),
        (
            {"namespaceLabelSelector": {"matchExpressions": [{"key": "a", "operator": "Foo"}]}},
            f"{ARGS_PATH}.namespaceLabelSelector: matchExpressions[0]: 'Foo' is not a valid",
        ),
    ],
)
def test_args_validation_messages(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError) as err:
        validate_model(DefaultEvictorArgs, args, ARGS_PATH)
    assert str(err.value).startswith(message), str(err.value)


def test_args_error_path_through_the_policy_loader() -> None:
    message = load_error(PLUGIN, {"noEvictionPolicy": "x"}, evictor=True)
    assert message.startswith("profiles[0].pluginConfig[0].args.noEvictionPolicy: must be")


def test_all_upstream_args_are_accepted() -> None:
    args = DefaultEvictorArgs.model_validate(
        {
            "nodeSelector": "role=worker",
            "labelSelector": {"matchLabels": {"a": "b"}},
            "namespaceLabelSelector": {"matchLabels": {"team": "x"}},
            "priorityThreshold": {"value": 100},
            "nodeFit": True,
            "minReplicas": 2,
            "minPodAge": "1h30m",
            "noEvictionPolicy": "Preferred",
            "podProtections": {
                "extraEnabled": ["PodsWithPVC", "PodsWithoutPDB", "PodsWithResourceClaims"],
                "defaultDisabled": ["PodsWithLocalStorage", "DaemonSetPods"],
                "config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}},
            },
        }
    )
    assert args.min_pod_age_duration == timedelta(hours=1, minutes=30)
    assert args.effective_protections() == {
        PodProtection.SYSTEM_CRITICAL_PODS,
        PodProtection.FAILED_BARE_PODS,
        PodProtection.PODS_WITH_PVC,
        PodProtection.PODS_WITHOUT_PDB,
        PodProtection.PODS_WITH_RESOURCE_CLAIMS,
    }
    dumped = args.model_dump(by_alias=True, exclude_defaults=True)
    assert dumped["podProtections"]["config"] == {
        "PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}
    }


def test_deprecated_booleans_with_empty_pod_protections() -> None:
    args = DefaultEvictorArgs.model_validate(
        {
            "podProtections": {},
            "evictLocalStoragePods": True,
            "evictDaemonSetPods": True,
            "evictSystemCriticalPods": True,
            "evictFailedBarePods": True,
            "ignorePvcPods": True,
            "ignorePodsWithoutPDB": True,
        }
    )
    assert args.effective_protections() == {PodProtection.PODS_WITH_PVC, PodProtection.PODS_WITHOUT_PDB}
    assert DefaultEvictorArgs().effective_protections() == {
        PodProtection.PODS_WITH_LOCAL_STORAGE,
        PodProtection.SYSTEM_CRITICAL_PODS,
        PodProtection.FAILED_BARE_PODS,
        PodProtection.DAEMON_SET_PODS,
    }


# ---------------------------------------------------------------------------- filter


def test_mirror_static_and_terminating_pods_are_kept_unless_annotated() -> None:
    ev = evictor()
    assert ev.filter(make_pod())
    assert not ev.filter(make_pod(annotations={"kubernetes.io/config.mirror": "x"}))
    assert not ev.filter(make_pod(annotations={"kubernetes.io/config.source": "file"}))
    assert ev.filter(make_pod(annotations={"kubernetes.io/config.source": "api"}))
    terminating = make_pod(deletionTimestamp="2026-01-01T11:00:00Z")
    assert not ev.filter(terminating)
    assert "pod is terminating" in ev.filter_reasons(terminating)
    annotated = make_pod(
        deletionTimestamp="2026-01-01T11:00:00Z", annotations={"descheduler.alpha.kubernetes.io/evict": ""}
    )
    assert ev.filter(annotated)
    assert ev.filter_reasons(annotated) == []


def test_no_eviction_policy() -> None:
    pod = make_pod(annotations={"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""})
    assert evictor({"noEvictionPolicy": "Preferred"}).filter(pod)
    assert not evictor({"noEvictionPolicy": "Mandatory"}).filter(pod)
    both = make_pod(
        annotations={
            "descheduler.alpha.kubernetes.io/prefer-no-eviction": "",
            "descheduler.alpha.kubernetes.io/evict": "",
        }
    )
    assert evictor({"noEvictionPolicy": "Mandatory"}).filter(both)


def test_priority_threshold_by_name_resolved_from_the_snapshot() -> None:
    high = builders.priority_class("high", 1000)
    snap = ClusterSnapshot(priority_classes=[high])
    ev = evictor({"priorityThreshold": {"name": "high"}}, snap)
    assert ev.filter(make_pod(priority=999))
    assert not ev.filter(make_pod(priority=1000))
    assert ev.filter(make_pod())  # no spec.priority: evictable, as upstream


def test_builtin_priority_class_needs_no_object() -> None:
    ev = evictor({"priorityThreshold": {"name": "system-cluster-critical"}})
    assert ev.error is None
    assert ev.filter(make_pod(priority=1_999_999_999))
    assert not ev.filter(make_pod(priority=2_000_000_000))


@pytest.mark.parametrize("class_name", ["system-cluster-critical", "system-node-critical"])
def test_a_pod_naming_a_critical_class_without_spec_priority_is_critical(class_name: str) -> None:
    """A hand-written snapshot's pod may name its class and leave spec.priority out (admission
    would have set it): the class's value counts, the built-in one without the object."""
    ev = evictor()
    assert not ev.filter(make_pod(priorityClassName=class_name))
    assert evictor({"evictSystemCriticalPods": True}).filter(make_pod(priorityClassName=class_name))
    assert ev.filter(make_pod(priorityClassName=class_name, priority=10))  # spec.priority wins


def test_a_class_named_without_spec_priority_meets_the_threshold_by_its_value() -> None:
    snap = ClusterSnapshot(
        priority_classes=[builders.priority_class("high", 1000), builders.priority_class("low", 1)]
    )
    ev = evictor({"priorityThreshold": {"value": 500}}, snap)
    assert not ev.filter(make_pod(priorityClassName="high"))
    assert ev.filter(make_pod(priorityClassName="low"))
    assert ev.filter(make_pod(priorityClassName="not-in-the-snapshot"))  # unknown: as without a class
    assert not evictor({"priorityThreshold": {"value": 500}}).filter(
        make_pod(priorityClassName="system-node-critical")
    )


def test_unknown_priority_class_refuses_every_pod_for_the_cycle() -> None:
    fw = framework(PLUGIN, {"priorityThreshold": {"name": "missing"}}, evictor=True, now=NOW)
    empty = ClusterSnapshot()
    fw.begin_cycle(empty, SimulatedBackend(empty))
    ev = fw.profiles[0].instances["DefaultEvictor"]
    assert isinstance(ev, DefaultEvictor)
    assert ev.error is not None and "'missing' does not exist" in ev.error
    annotated = make_pod(annotations={"descheduler.alpha.kubernetes.io/evict": ""})
    assert not ev.filter(annotated)
    assert not ev.pre_eviction_filter(annotated)
    assert ev.filter_reasons(make_pod()) == [ev.error]
    # next cycle the class exists: the evictor works again
    missing = builders.priority_class("missing", 5)
    with_class = ClusterSnapshot(priority_classes=[missing])
    fw.begin_cycle(with_class, SimulatedBackend(with_class))
    assert ev.error is None
    assert ev.filter(make_pod(priority=4))
    assert not ev.filter(make_pod(priority=5))


def test_threshold_with_neither_value_nor_name_is_no_threshold() -> None:
    ev = evictor({"priorityThreshold": {"value": None, "name": ""}})
    assert ev.filter(make_pod(priority=1_999_999_999))
    assert not ev.filter(make_pod(priority=2_000_000_000))


def test_failed_bare_pods() -> None:
    bare_failed = make_pod(owners=[], phase="Failed")
    bare_running = make_pod(owners=[])
    assert not evictor().filter(bare_failed)
    relaxed = evictor({"podProtections": {"defaultDisabled": ["FailedBarePods"]}})
    assert relaxed.filter(bare_failed)
    assert not relaxed.filter(bare_running)


def test_pvc_protection_with_storage_classes() -> None:
    def claim(name: str, sc: str | None) -> PersistentVolumeClaim:
        return msgspec.convert(
            {"metadata": {"name": name, "namespace": "default"}, "spec": {"storageClassName": sc}},
            PersistentVolumeClaim,
            strict=False,
        )

    snap = ClusterSnapshot(pvcs=[claim("fast", "local"), claim("slow", "nfs"), claim("unset", None)])

    def with_claim(name: str) -> Pod:
        return make_pod(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": name}}])

    classes = {"config": {"PodsWithPVC": {"protectedStorageClasses": [{"name": "local"}]}}}
    ev = evictor({"podProtections": {"extraEnabled": ["PodsWithPVC"], **classes}}, snap)
    assert not ev.filter(with_claim("fast"))
    assert ev.filter(with_claim("slow"))
    assert not ev.filter(with_claim("unset"))  # class unknown: kept
    assert not ev.filter(with_claim("absent"))  # claim unknown: kept
    assert ev.filter(make_pod())
    # the deprecated ignorePvcPods reads the same config, as upstream
    legacy = evictor({"ignorePvcPods": True, "podProtections": classes}, snap)
    assert legacy.filter(with_claim("slow"))
    assert not legacy.filter(with_claim("fast"))


def test_pods_without_pdb_and_with_resource_claims() -> None:
    pdb = builders.pdb("b", selector={"app": "a"})
    nil_selector = convert(
        PodDisruptionBudget, {"metadata": {"name": "nil", "namespace": "default"}, "spec": {}}
    )
    snap = ClusterSnapshot(pdbs=[pdb, nil_selector])
    ev = evictor({"podProtections": {"extraEnabled": ["PodsWithoutPDB", "PodsWithResourceClaims"]}}, snap)
    assert ev.filter(make_pod(labels={"app": "a"}))
    assert not ev.filter(make_pod(labels={"app": "other"}))
    claims = make_pod(labels={"app": "a"}, resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-0"}])
    assert not ev.filter(claims)
    assert ev.filter_reasons(claims) == ["pod has ResourceClaims"]


def test_label_selector() -> None:
    ev = evictor(
        {"labelSelector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}}
    )
    assert ev.filter(make_pod(labels={"tier": "web"}))
    assert not ev.filter(make_pod(labels={"tier": "db"}))
    assert evictor({"labelSelector": {}}).filter(make_pod())


def test_min_replicas_counts_the_owners_pods_at_the_cycle_start() -> None:
    pods = [make_pod(f"p{i}") for i in range(3)]
    stranger = make_pod("x", owners=[{"kind": "ReplicaSet", "name": "rs", "uid": "other-uid"}])
    snap = ClusterSnapshot(pods=[*pods, stranger])
    ev = evictor({"minReplicas": 3}, snap)
    assert ev.filter(pods[0])
    assert not ev.filter(stranger)  # same name, another uid: an owner with one pod
    snap.remove_pod(pods[2])  # evicted during the cycle: upstream counted before evicting
    assert ev.filter(pods[0])
    ev.on_cycle_start()  # the next cycle counts again
    assert not ev.filter(pods[0])
    assert evictor({"minReplicas": 1}, snap).filter(stranger)  # 1 is ignored, as upstream
    two_owners = make_pod("two", owners=[*RS_OWNER, {"kind": "Job", "name": "j", "uid": "j"}])
    assert ev.filter(two_owners)  # several owners: not checked, as upstream
    assert "owner has fewer replicas than minReplicas" not in ev.filter_reasons(make_pod("b", owners=[]))


def test_the_profiles_of_a_cycle_count_the_owners_once() -> None:
    # each profile has its DefaultEvictor; at the cycle's start they count the same snapshot
    pods = [make_pod(f"p{i}") for i in range(3)]
    snap = ClusterSnapshot(pods=pods)
    first, second = evictor({"minReplicas": 3}, snap), evictor({"minReplicas": 2}, snap)
    first.on_cycle_start()
    second.on_cycle_start()
    assert second._owner_counts is first._owner_counts  # one pass over the pods, not two
    assert first.filter(pods[0]) and second.filter(pods[0])
    # a snapshot that changed since, or another one, is counted afresh
    snap.remove_pod(pods[2])
    second.on_cycle_start()
    assert second._owner_counts is not first._owner_counts
    assert not evictor({"minReplicas": 3}, snap).filter(pods[0])
    assert evictor({"minReplicas": 2}, snap).filter(pods[0])
    snap.add_pod(make_pod("p9"))
    assert evictor({"minReplicas": 3}, snap).filter(pods[0])
    other = ClusterSnapshot(pods=pods[:1])
    assert not evictor({"minReplicas": 2}, other).filter(pods[0])
    assert first.filter(pods[0])  # (its counts were made at its cycle's start: three pods)


def test_the_cycle_end_lets_go_of_the_cycle_and_a_later_call_counts_again() -> None:
    pods = [make_pod(f"p{i}") for i in range(3)]
    snap = ClusterSnapshot(pods=pods)
    ev = evictor({"minReplicas": 3}, snap)
    assert ev.filter(pods[0])
    snap.remove_pod(pods[2])
    ev.on_cycle_end()  # the verdicts, the owner counts (the shared ones too) and the snapshot go
    assert ev._verdicts == {} and ev._owner_counts == {} and ev._snapshot is None
    assert plugin_module._last_count is None
    # asked again, it binds to the snapshot as it is now: two pods left, below minReplicas
    assert not ev.filter(pods[0])


def test_min_pod_age_uses_start_time_and_the_handle_clock() -> None:
    ev = evictor({"minPodAge": "30m"})
    assert ev.filter(make_pod(startTime="2026-01-01T11:00:00Z"))
    assert not ev.filter(make_pod(startTime="2026-01-01T11:45:00Z"))
    assert not ev.filter(make_pod())  # no startTime: too young to tell


# ---------------------------------------------------------------------------- pre-eviction filter


def test_node_fit_looks_at_all_ready_nodes_matching_the_node_selector() -> None:
    nodes = [
        make_node("n1", labels={"role": "worker"}),
        make_node("n2", labels={"role": "worker"}, ready=False),
        make_node("n3", labels={"role": "infra"}),
    ]
    snap = ClusterSnapshot(nodes=nodes)
    pod = make_pod(node="n1")
    assert evictor({"nodeFit": True}, snap).pre_eviction_filter(pod)  # n3 fits
    only_workers = evictor({"nodeFit": True, "nodeSelector": "role=worker"}, snap)
    assert not only_workers.pre_eviction_filter(pod)  # n2 is not ready, n1 is its own node
    assert [n.name for n in only_workers.nodes_for_fit()] == ["n1"]
    assert evictor({"nodeSelector": "role=worker"}, snap).pre_eviction_filter(pod)  # nodeFit off


def test_node_fit_sees_room_freed_by_evictions() -> None:
    n1, n2 = make_node("n1", cpu="1"), make_node("n2", cpu="1")
    blocker = make_pod("blocker", node="n2", cpu="900m")
    mover = make_pod("mover", node="n1", cpu="500m")
    snap = ClusterSnapshot(nodes=[n1, n2], pods=[blocker, mover])
    ev = evictor({"nodeFit": True}, snap)
    assert not ev.pre_eviction_filter(mover)
    snap.remove_pod(blocker)
    assert ev.pre_eviction_filter(mover)


def test_namespace_label_selector() -> None:
    ns = builders.namespace("team-a", labels={"team": "a"})
    snap = ClusterSnapshot(namespaces=[ns])
    ev = evictor({"namespaceLabelSelector": {"matchLabels": {"team": "a"}}}, snap)
    assert ev.pre_eviction_filter(make_pod(namespace="team-a"))
    assert not ev.pre_eviction_filter(make_pod(namespace="unknown"))
    assert evictor({"namespaceLabelSelector": {}}, snap).pre_eviction_filter(make_pod(namespace="unknown"))
