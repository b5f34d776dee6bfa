"""desched.k8s.pods against descheduler's pkg/utils/pod.go and Kubernetes' QoS rules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tests import builders

from desched.k8s.objects import ZERO_TIME, Pod
from desched.k8s.pods import (
    EVICT_ANNOTATION,
    PREFER_NO_EVICTION_ANNOTATION,
    SYSTEM_CRITICAL_PRIORITY,
    compute_qos_class,
    container_statuses,
    controller_ref,
    has_local_storage,
    has_pvc,
    has_resource_claims,
    is_bare_pod,
    is_daemonset_pod,
    is_mirror_pod,
    is_pod_ready,
    is_static_pod,
    is_terminating,
    owner_refs,
    pod_creation_time,
    pvc_claim_names,
    qos_class,
)


def make_pod(
    *,
    metadata: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> Pod:
    return builders.pod("p", namespace="ns", phase=None, metadata=metadata, spec=spec, status=status)


def resources(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {}
    if requests is not None:
        r["requests"] = requests
    if limits is not None:
        r["limits"] = limits
    return r


def with_containers(*res: dict[str, Any], init: list[dict[str, Any]] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "resources": r} for i, r in enumerate(res)]}
    if init is not None:
        spec["initContainers"] = [{"name": f"i{i}", "resources": r} for i, r in enumerate(init)]
    return make_pod(spec=spec)


def test_annotation_constants() -> None:
    assert EVICT_ANNOTATION == "descheduler.alpha.kubernetes.io/evict"
    assert PREFER_NO_EVICTION_ANNOTATION == "descheduler.alpha.kubernetes.io/prefer-no-eviction"
    assert SYSTEM_CRITICAL_PRIORITY == 2_000_000_000


def test_owner_facts() -> None:
    bare = make_pod()
    assert owner_refs(bare) == [] and is_bare_pod(bare) and not is_daemonset_pod(bare)
    assert controller_ref(bare) is None
    ds = make_pod(
        metadata={
            "ownerReferences": [
                {"kind": "Node", "name": "n1"},
                {"kind": "DaemonSet", "name": "fluentd", "controller": True},
            ]
        }
    )
    assert is_daemonset_pod(ds) and not is_bare_pod(ds)
    ref = controller_ref(ds)
    assert ref is not None and ref.name == "fluentd"
    assert [r.kind for r in owner_refs(ds)] == ["Node", "DaemonSet"]


def test_mirror_and_static_pods() -> None:
    assert is_mirror_pod(make_pod(metadata={"annotations": {"kubernetes.io/config.mirror": "abc"}}))
    assert not is_mirror_pod(make_pod())
    assert is_static_pod(make_pod(metadata={"annotations": {"kubernetes.io/config.source": "file"}}))
    assert not is_static_pod(make_pod(metadata={"annotations": {"kubernetes.io/config.source": "api"}}))
    assert not is_static_pod(make_pod())


def test_terminating() -> None:
    assert is_terminating(make_pod(metadata={"deletionTimestamp": "2024-05-01T00:00:00Z"}))
    assert not is_terminating(make_pod())


def test_volumes() -> None:
    pod = make_pod(
        spec={
            "volumes": [
                {"name": "cache", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
                {"name": "logs", "persistentVolumeClaim": {"claimName": "logs-0", "readOnly": True}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
            ]
        }
    )
    assert has_local_storage(pod) and has_pvc(pod)
    assert pvc_claim_names(pod) == ["data-0", "logs-0"]
    host = make_pod(spec={"volumes": [{"name": "h", "hostPath": {"path": "/var/log"}}]})
    assert has_local_storage(host) and not has_pvc(host) and pvc_claim_names(host) == []
    # Generic ephemeral volumes are neither, as upstream.
    eph = make_pod(spec={"volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {}}}]})
    assert not has_local_storage(eph) and not has_pvc(eph)
    cm = make_pod(spec={"volumes": [{"name": "cfg", "configMap": {"name": "x"}}]})
    assert not has_local_storage(cm) and not has_pvc(cm)


def test_resource_claims() -> None:
    assert has_resource_claims(make_pod(spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "g"}]}))
    assert not has_resource_claims(make_pod(spec={"resourceClaims": []}))
    assert not has_resource_claims(make_pod())


def test_pod_ready() -> None:
    assert is_pod_ready(make_pod(status={"conditions": [{"type": "Ready", "status": "True"}]}))
    assert not is_pod_ready(make_pod(status={"conditions": [{"type": "Ready", "status": "False"}]}))
    assert not is_pod_ready(make_pod(status={"conditions": [{"type": "PodScheduled", "status": "True"}]}))
    assert not is_pod_ready(make_pod())


def test_container_statuses() -> None:
    pod = make_pod(
        status={
            "containerStatuses": [{"name": "app"}],
            "initContainerStatuses": [{"name": "init"}],
            "ephemeralContainerStatuses": [{"name": "debug"}],
        }
    )
    assert [s.name for s in container_statuses(pod)] == ["app"]
    assert [s.name for s in container_statuses(pod, init=True)] == ["app", "init"]
    assert [s.name for s in container_statuses(pod, init=True, ephemeral=True)] == ["app", "init", "debug"]
    assert [s.name for s in container_statuses(pod, ephemeral=True)] == ["app", "debug"]
    assert container_statuses(make_pod(), init=True) == []


def test_creation_time() -> None:
    pod = make_pod(metadata={"creationTimestamp": "2024-05-01T12:00:00Z"})
    assert pod_creation_time(pod) == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert pod_creation_time(make_pod()) == ZERO_TIME


# --------------------------------------------------------------------------- QoS
# Cases from "Configure Quality of Service for Pods" and pkg/apis/core/v1/helper/qos tests.

GUARANTEED = resources({"cpu": "700m", "memory": "200Mi"}, {"cpu": "700m", "memory": "200Mi"})


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (with_containers(GUARANTEED), "Guaranteed"),
        # Equal values spelled differently are equal.
        (
            with_containers(resources({"cpu": "1", "memory": "1Gi"}, {"cpu": "1000m", "memory": "1024Mi"})),
            "Guaranteed",
        ),
        (with_containers(GUARANTEED, GUARANTEED), "Guaranteed"),
        (with_containers(resources({"memory": "100Mi"}, {"memory": "200Mi"})), "Burstable"),
        (with_containers(resources({"memory": "200Mi"}, {"memory": "200Mi"})), "Burstable"),  # no cpu
        (with_containers(resources({"cpu": "1"})), "Burstable"),
        (with_containers(resources(limits={"cpu": "1", "memory": "1Gi"})), "Burstable"),  # not defaulted
        (with_containers(resources()), "BestEffort"),
        (with_containers({}), "BestEffort"),
        (with_containers(resources({"ephemeral-storage": "1Gi"}, {"nvidia.com/gpu": "1"})), "BestEffort"),
        (with_containers(resources({"cpu": "0", "memory": "0"})), "BestEffort"),
        # Mixing a Guaranteed and a BestEffort container makes the pod Burstable.
        (with_containers(GUARANTEED, resources()), "Burstable"),
        # Init containers count too.
        (with_containers(GUARANTEED, init=[resources()]), "Burstable"),
        (with_containers(GUARANTEED, init=[GUARANTEED]), "Guaranteed"),
        (with_containers(resources(), init=[resources({"cpu": "1"})]), "Burstable"),
        # Pod-level resources decide on their own when set.
        (
            make_pod(
                spec={
                    "containers": [{"name": "a"}],
                    "resources": resources({"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
                }
            ),
            "Guaranteed",
        ),
        (
            make_pod(
                spec={
                    "containers": [{"name": "a", "resources": GUARANTEED}],
                    "resources": resources({"cpu": "1"}, {"cpu": "2"}),
                }
            ),
            "Burstable",
        ),
    ],
)
def test_compute_qos_class(pod: Pod, expected: str) -> None:
    assert compute_qos_class(pod) == expected
    assert qos_class(pod) == expected


def test_status_qos_class_wins() -> None:
    pod = make_pod(status={"qosClass": "Guaranteed"})
    assert compute_qos_class(pod) == "BestEffort"
    assert qos_class(pod) == "Guaranteed"
