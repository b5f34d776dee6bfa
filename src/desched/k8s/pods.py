"""Facts about a pod, named as upstream descheduler's ``pkg/utils/pod.go`` where it has them."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from desched.k8s.objects import (
    ContainerStatus,
    OwnerReference,
    Pod,
    ResourceRequirements,
    timestamp,
)
from desched.k8s.quantity import nano_value

__all__ = [
    "CONFIG_SOURCE_ANNOTATION",
    "EVICT_ANNOTATION",
    "MIRROR_POD_ANNOTATION",
    "PREFER_NO_EVICTION_ANNOTATION",
    "QOS_BEST_EFFORT",
    "QOS_BURSTABLE",
    "QOS_GUARANTEED",
    "SYSTEM_CRITICAL_PRIORITY",
    "compute_qos_class",
    "container_statuses",
    "controller_ref",
    "has_local_storage",
    "has_pvc",
    "has_resource_claims",
    "is_bare_pod",
    "is_daemonset_pod",
    "is_mirror_pod",
    "is_pod_ready",
    "is_static_pod",
    "is_terminating",
    "owner_refs",
    "pod_creation_time",
    "pvc_claim_names",
    "qos_class",
]

#: A pod with this annotation is evictable whatever the DefaultEvictor's other checks say.
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
#: Sorted last among candidates; rejected outright with ``noEvictionPolicy: Mandatory``.
PREFER_NO_EVICTION_ANNOTATION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
#: Set by the kubelet on the API mirror of a static pod.
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
#: Where the kubelet got the pod from ("api", "file", "http").
CONFIG_SOURCE_ANNOTATION = "kubernetes.io/config.source"

#: ``SystemCriticalPriority`` = 2 * HighestUserDefinablePriority (10⁹).
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000

QOS_GUARANTEED = "Guaranteed"
QOS_BURSTABLE = "Burstable"
QOS_BEST_EFFORT = "BestEffort"


def owner_refs(pod: Pod) -> list[OwnerReference]:
    """metadata.ownerReferences (empty list if none)."""
    return pod.metadata.owner_references or []


def controller_ref(pod: Pod) -> OwnerReference | None:
    """The owner reference with ``controller: true``, if any (``metav1.GetControllerOf``)."""
    for ref in pod.metadata.owner_references or ():
        if ref.controller:
            return ref
    return None


def is_mirror_pod(pod: Pod) -> bool:
    """Has the kubernetes.io/config.mirror annotation."""
    annotations = pod.metadata.annotations
    return annotations is not None and MIRROR_POD_ANNOTATION in annotations


def is_static_pod(pod: Pod) -> bool:
    """Has a kubernetes.io/config.source annotation other than "api"."""
    annotations = pod.metadata.annotations
    if annotations is None:
        return False
    source = annotations.get(CONFIG_SOURCE_ANNOTATION)
    return source is not None and source != "api"


#: Phases after which a pod no longer holds its node's room.
FINISHED_PHASES: Final = ("Succeeded", "Failed")


def occupies_node(pod: Pod) -> bool:
    """A pod counts against its node's capacity until it has finished (Succeeded or Failed)."""
    return pod.status.phase not in FINISHED_PHASES


def is_terminating(pod: Pod) -> bool:
    """metadata.deletionTimestamp is set."""
    return pod.metadata.deletion_timestamp is not None


def is_daemonset_pod(pod: Pod) -> bool:
    """Some owner reference has kind DaemonSet."""
    for ref in pod.metadata.owner_references or ():  # noqa: SIM110 -- hot path: no generator
        if ref.kind == "DaemonSet":
            return True
    return False


def is_bare_pod(pod: Pod) -> bool:
    """No owner references at all."""
    return not pod.metadata.owner_references


def has_local_storage(pod: Pod) -> bool:
    """Some volume is an emptyDir or a hostPath (``IsPodWithLocalStorage``)."""
    for v in pod.spec.volumes or ():  # noqa: SIM110 -- hot path: no generator
        if v.empty_dir is not None or v.host_path is not None:
            return True
    return False


def has_pvc(pod: Pod) -> bool:
    """Some volume is a persistentVolumeClaim (``IsPodWithPVC``).

    As upstream, generic ``ephemeral`` volumes do not count, although they are backed by a PVC.
    """
    for v in pod.spec.volumes or ():  # noqa: SIM110 -- hot path: no generator
        if v.persistent_volume_claim is not None:
            return True
    return False


def pvc_claim_names(pod: Pod) -> list[str]:
    """Claim names of the pod's persistentVolumeClaim volumes, in volume order (no ephemeral ones)."""
    return [
        v.persistent_volume_claim.claim_name
        for v in pod.spec.volumes or ()
        if v.persistent_volume_claim is not None
    ]


def has_resource_claims(pod: Pod) -> bool:
    """spec.resourceClaims is non-empty (``IsPodWithResourceClaims``)."""
    return bool(pod.spec.resource_claims)


def is_pod_ready(pod: Pod) -> bool:
    """The Ready condition is True."""
    for cond in pod.status.conditions or ():
        if cond.type == "Ready":
            return cond.status == "True"
    return False


def container_statuses(pod: Pod, *, init: bool = False, ephemeral: bool = False) -> list[ContainerStatus]:
    """Statuses of the regular containers, then init containers if ``init``, then ephemeral ones
    if ``ephemeral``."""
    status = pod.status
    out = list(status.container_statuses or ())
    if init:
        out.extend(status.init_container_statuses or ())
    if ephemeral:
        out.extend(status.ephemeral_container_statuses or ())
    return out


def pod_creation_time(pod: Pod) -> datetime:
    """metadata.creationTimestamp (Go's zero time if absent)."""
    return timestamp(pod.metadata.creation_timestamp)


def _resource_qos(res: ResourceRequirements | None) -> str:
    """The QoS class of one set of requirements (qos.go ``resourceQOS``)."""
    if res is None or (not res.requests and not res.limits):
        return QOS_BEST_EFFORT
    requests = res.requests or {}
    limits = res.limits or {}
    qos = ""
    for name in ("cpu", "memory"):
        req = requests.get(name)
        lim = limits.get(name)
        req_nano = nano_value(req) if req is not None else 0
        lim_nano = nano_value(lim) if lim is not None else 0
        if req_nano != lim_nano:
            return QOS_BURSTABLE
        best_effort = req_nano == 0
        if not qos:
            qos = QOS_BEST_EFFORT if best_effort else QOS_GUARANTEED
        elif best_effort != (qos == QOS_BEST_EFFORT):
            return QOS_BURSTABLE
    return qos


def compute_qos_class(pod: Pod) -> str:
    """``ComputePodQOS``: from pod-level resources when spec.resources is set; otherwise each
    container (init containers included, ephemeral ones not) must be Guaranteed (cpu and memory
    requests equal to non-zero limits) for the pod to be, or all BestEffort; any mix is Burstable."""
    spec = pod.spec
    if spec.resources is not None:
        return _resource_qos(spec.resources)
    pod_qos = ""
    for group in (spec.init_containers or (), spec.containers):
        for c in group:
            qos = _resource_qos(c.resources)
            if qos == QOS_BURSTABLE:
                return qos
            if not pod_qos:
                pod_qos = qos
            elif pod_qos != qos:
                return QOS_BURSTABLE
    return pod_qos or QOS_BEST_EFFORT


def qos_class(pod: Pod) -> str:
    """``GetPodQOS``: status.qosClass if set, else :func:`compute_qos_class`."""
    return pod.status.qos_class or compute_qos_class(pod)
