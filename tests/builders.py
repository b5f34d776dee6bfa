"""Test objects, built in one place (as upstream's ``test/test_utils.go``): pods, nodes,
namespaces, PodDisruptionBudgets, priority classes, events and snapshots.

Each ``*_doc`` function returns the JSON object the API server (or a snapshot file) would carry,
with ``apiVersion`` and ``kind`` first, as ``kubectl get -o json`` prints them; the function of the
same name without ``_doc`` decodes that object into desched's own record, as the sources do
(msgspec). Everything is a keyword argument with a default that makes a plain, healthy object; an
argument left at ``None`` leaves its field out. What no argument covers goes in ``metadata=``,
``spec=`` or ``status=``, merged last (a key given there replaces the built one).

    pod("web-1", node="n1", cpu="100m", owner=("ReplicaSet", "web"))
    node("n1", cpu="8", taints=[taint("dedicated", "gpu")])
    snapshot(nodes=[node("n1"), node("n2")], pods=[pod("a", node="n1")])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import (
    Event,
    Namespace,
    Node,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
    Workload,
)

__all__ = [
    "bare_node",
    "bare_pod",
    "event",
    "event_doc",
    "list_doc",
    "namespace",
    "namespace_doc",
    "node",
    "node_doc",
    "owner_ref",
    "pdb",
    "pdb_doc",
    "pod",
    "pod_doc",
    "priority_class",
    "priority_class_doc",
    "replica_set",
    "replica_set_doc",
    "replication_controller",
    "service",
    "service_doc",
    "snapshot",
    "stateful_set",
    "taint",
    "toleration",
]

Doc = dict[str, Any]
#: An owner: ``(kind, name)``, ``(kind, name, uid)``, or a whole ownerReferences entry.
Owner = tuple[str, str] | tuple[str, str, str] | Mapping[str, Any]


def _merged(base: Doc, extra: Mapping[str, Any] | None) -> Doc:
    if extra:
        base.update(extra)
    return base


def _meta(
    name: str,
    namespace: str | None,
    *,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Doc:
    meta: Doc = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if created is not None:
        meta["creationTimestamp"] = created
    return _merged(meta, extra)


def owner_ref(owner: Owner, *, controller: bool | None = True) -> Doc:
    """One ownerReferences entry; ``controller`` None leaves the field out."""
    if isinstance(owner, Mapping):
        return dict(owner)
    ref: Doc = {"kind": owner[0], "name": owner[1]}
    if len(owner) == 3:
        ref["uid"] = owner[2]
    if controller is not None:
        ref["controller"] = controller
    return ref


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Doc:
    return {"key": key, "value": value, "effect": effect}


def toleration(key: str, value: str | None = None, effect: str | None = "NoSchedule") -> Doc:
    """``operator: Exists`` when ``value`` is None, else ``Equal``."""
    tol: Doc = {"key": key, "operator": "Exists" if value is None else "Equal"}
    if value is not None:
        tol["value"] = value
    if effect is not None:
        tol["effect"] = effect
    return tol


# --------------------------------------------------------------------------------------- pods


def pod_doc(
    name: str = "pod",
    *,
    namespace: str | None = "default",
    node: str | None = None,
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    created: str | None = None,
    deleted: str | None = None,
    owner: Owner | None = None,
    controller: bool | None = True,
    cpu: str | None = None,
    memory: str | None = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    containers: list[Doc] | None = None,
    init_containers: list[Doc] | None = None,
    priority: int | None = None,
    priority_class: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: list[Doc] | None = None,
    phase: str | None = "Running",
    ready: bool | None = None,
    restarts: int | None = None,
    metadata: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
) -> Doc:
    """A pod: one container ``c`` (requesting ``cpu``/``memory`` and ``requests``, limited by
    ``limits``) unless ``containers`` are given; ``owner`` becomes its controller reference;
    ``ready`` adds the Ready condition, ``restarts`` a container status of ``c``."""
    meta = _meta(
        name, namespace, uid=uid, labels=labels, annotations=annotations, created=created, extra=None
    )
    if deleted is not None:
        meta["deletionTimestamp"] = deleted
    if owner is not None:
        meta["ownerReferences"] = [owner_ref(owner, controller=controller)]
    _merged(meta, metadata)
    if containers is None:
        container: Doc = {"name": "c"}
        res: Doc = {}
        req = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        req.update(requests or {})
        if req:
            res["requests"] = req
        if limits is not None:
            res["limits"] = dict(limits)
        if res:
            container["resources"] = res
        containers = [container]
    pod_spec: Doc = {}
    if node is not None:
        pod_spec["nodeName"] = node
    pod_spec["containers"] = containers
    if init_containers is not None:
        pod_spec["initContainers"] = init_containers
    if priority is not None:
        pod_spec["priority"] = priority
    if priority_class is not None:
        pod_spec["priorityClassName"] = priority_class
    if node_selector is not None:
        pod_spec["nodeSelector"] = dict(node_selector)
    if affinity is not None:
        pod_spec["affinity"] = dict(affinity)
    if tolerations is not None:
        pod_spec["tolerations"] = tolerations
    _merged(pod_spec, spec)
    pod_status: Doc = {}
    if phase is not None:
        pod_status["phase"] = phase
    if ready is not None:
        pod_status["conditions"] = [{"type": "Ready", "status": str(ready)}]
    if restarts is not None:
        pod_status["containerStatuses"] = [{"name": "c", "restartCount": restarts}]
    _merged(pod_status, status)
    doc: Doc = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
    if pod_status:
        doc["status"] = pod_status
    return doc


def pod(name: str = "pod", **kw: Any) -> Pod:
    """:func:`pod_doc` decoded into the record."""
    return msgspec.convert(pod_doc(name, **kw), Pod, strict=False)


def bare_pod(name: str = "pod", **kw: Any) -> Pod:
    """A pod with only what is asked for (and its container ``c``): no namespace, no phase."""
    return pod(name, **{"namespace": None, "phase": None, **kw})


# -------------------------------------------------------------------------------------- nodes


def node_doc(
    name: str = "node",
    *,
    labels: Mapping[str, str] | None = None,
    hostname_label: bool = True,
    zone: str | None = None,
    annotations: Mapping[str, str] | None = None,
    cpu: str | None = "4",
    memory: str | None = "8Gi",
    pods: str | None = "110",
    extra: Mapping[str, str] | None = None,
    capacity: bool = False,
    ready: bool | str | None = True,
    conditions: list[Doc] | None = None,
    taints: list[Doc] | None = None,
    unschedulable: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
) -> Doc:
    """A node: the ``kubernetes.io/hostname`` label (unless ``hostname_label`` is False) and the
    zone label if ``zone``; allocatable ``cpu``, ``memory``, ``pods`` and ``extra`` resources
    (also as capacity with ``capacity``; no allocatable at all when all are None); the Ready
    condition (``ready`` True, False or a status string; None for none; ``conditions`` replaces it)."""
    all_labels: dict[str, str] = {}
    if hostname_label:
        all_labels["kubernetes.io/hostname"] = name
    if zone is not None:
        all_labels["topology.kubernetes.io/zone"] = zone
    all_labels.update(labels or {})
    meta = _meta(
        name,
        None,
        labels=all_labels if (all_labels or labels is not None) else None,
        annotations=annotations,
        extra=metadata,
    )
    node_spec: Doc = {}
    if unschedulable is not None:
        node_spec["unschedulable"] = unschedulable
    if taints is not None:
        node_spec["taints"] = taints
    _merged(node_spec, spec)
    node_status: Doc = {}
    alloc = {k: v for k, v in (("cpu", cpu), ("memory", memory), ("pods", pods)) if v is not None}
    alloc.update(extra or {})
    if alloc:
        node_status["allocatable"] = alloc
        if capacity:
            node_status["capacity"] = dict(alloc)
    if conditions is not None:
        node_status["conditions"] = conditions
    elif ready is not None:
        value = ready if isinstance(ready, str) else str(ready)
        node_status["conditions"] = [{"type": "Ready", "status": value}]
    _merged(node_status, status)
    doc: Doc = {"apiVersion": "v1", "kind": "Node", "metadata": meta}
    if node_spec:
        doc["spec"] = node_spec
    if node_status:
        doc["status"] = node_status
    return doc


def node(name: str = "node", **kw: Any) -> Node:
    """:func:`node_doc` decoded into the record."""
    return msgspec.convert(node_doc(name, **kw), Node, strict=False)


_BARE_NODE: dict[str, Any] = {
    "hostname_label": False,
    "cpu": None,
    "memory": None,
    "pods": None,
    "ready": None,
}


def bare_node(name: str = "node", **kw: Any) -> Node:
    """A node with only what is asked for: no labels, resources or conditions unless given."""
    return node(name, **{**_BARE_NODE, **kw})


# ---------------------------------------------------------------------- the objects around them


def namespace_doc(name: str = "default", *, labels: Mapping[str, str] | None = None) -> Doc:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name, None, labels=labels)}


def namespace(name: str = "default", **kw: Any) -> Namespace:
    return msgspec.convert(namespace_doc(name, **kw), Namespace, strict=False)


def pdb_doc(
    name: str = "pdb",
    *,
    namespace: str = "default",
    selector: Mapping[str, str] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    generation: int | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
) -> Doc:
    """A policy/v1 PodDisruptionBudget selecting ``selector`` by matchLabels (``{"app": name}``
    by default); no status unless given (desched computes it as the disruption controller)."""
    meta = _meta(name, namespace)
    if generation is not None:
        meta["generation"] = generation
    pdb_spec: Doc = {"selector": {"matchLabels": dict(selector if selector is not None else {"app": name})}}
    if min_available is not None:
        pdb_spec["minAvailable"] = min_available
    if max_unavailable is not None:
        pdb_spec["maxUnavailable"] = max_unavailable
    _merged(pdb_spec, spec)
    doc: Doc = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": meta, "spec": pdb_spec}
    if status is not None:
        doc["status"] = dict(status)
    return doc


def pdb(name: str = "pdb", **kw: Any) -> PodDisruptionBudget:
    return msgspec.convert(pdb_doc(name, **kw), PodDisruptionBudget, strict=False)


def priority_class_doc(name: str, value: int, *, global_default: bool = False) -> Doc:
    doc: Doc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
    doc["value"] = value
    if global_default:
        doc["globalDefault"] = True
    return doc


def priority_class(name: str, value: int, **kw: Any) -> PriorityClass:
    return msgspec.convert(priority_class_doc(name, value, **kw), PriorityClass, strict=False)


def event_doc(
    name: str = "event",
    *,
    namespace: str = "default",
    kind: str = "Pod",
    object_name: str = "pod",
    object_namespace: str | None = None,
    reason: str = "BackOff",
    message: str | None = None,
    type_: str = "Warning",
    count: int | None = 1,
    series: int | None = None,
    last_timestamp: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Doc:
    """A core/v1 Event about ``kind``/``object_name`` (in ``object_namespace``, by default the
    event's own namespace); ``series`` adds ``series.count``."""
    doc: Doc = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": _meta(name, namespace),
        "involvedObject": {
            "kind": kind,
            "name": object_name,
            "namespace": namespace if object_namespace is None else object_namespace,
        },
        "reason": reason,
        "type": type_,
    }
    if message is not None:
        doc["message"] = message
    if count is not None:
        doc["count"] = count
    if series is not None:
        doc["series"] = {"count": series}
    if last_timestamp is not None:
        doc["lastTimestamp"] = last_timestamp
    return _merged(doc, extra)


def event(name: str = "event", **kw: Any) -> Event:
    return msgspec.convert(event_doc(name, **kw), Event, strict=False)


# ---------------------------------------------------------------------------------- workloads


def service_doc(name: str, selector: Mapping[str, str] | None, *, namespace: str = "default") -> Doc:
    """A Service; ``selector`` None leaves it out (a Service without a selector)."""
    spec: Doc = {"ports": [{"port": 80}]}
    if selector is not None:
        spec["selector"] = dict(selector)
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, namespace), "spec": spec}


def service(name: str, selector: Mapping[str, str] | None, **kw: Any) -> Service:
    return msgspec.convert(service_doc(name, selector, **kw), Service, strict=False)


def _controller_doc(
    api_version: str, kind: str, name: str, selector: Doc | None, namespace: str, replicas: int
) -> Doc:
    spec: Doc = {"replicas": replicas}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": api_version, "kind": kind, "metadata": _meta(name, namespace), "spec": spec}


def replica_set_doc(
    name: str,
    match_labels: Mapping[str, str] | None = None,
    *,
    match_expressions: list[Doc] | None = None,
    namespace: str = "default",
    replicas: int = 1,
) -> Doc:
    """A ReplicaSet selecting ``match_labels`` (and ``match_expressions``)."""
    sel: Doc = {}
    if match_labels is not None:
        sel["matchLabels"] = dict(match_labels)
    if match_expressions is not None:
        sel["matchExpressions"] = match_expressions
    return _controller_doc("apps/v1", "ReplicaSet", name, sel, namespace, replicas)


def replica_set(name: str, match_labels: Mapping[str, str] | None = None, **kw: Any) -> ReplicaSet:
    return msgspec.convert(replica_set_doc(name, match_labels, **kw), ReplicaSet, strict=False)


def stateful_set(name: str, match_labels: Mapping[str, str], *, namespace: str = "default") -> StatefulSet:
    doc = _controller_doc("apps/v1", "StatefulSet", name, {"matchLabels": dict(match_labels)}, namespace, 1)
    return msgspec.convert(doc, StatefulSet, strict=False)


def replication_controller(
    name: str, selector: Mapping[str, str], *, namespace: str = "default"
) -> ReplicationController:
    doc = _controller_doc("v1", "ReplicationController", name, dict(selector), namespace, 1)
    return msgspec.convert(doc, ReplicationController, strict=False)


# ---------------------------------------------------------------------------------- snapshots


def snapshot(
    *,
    nodes: Iterable[Node] = (),
    pods: Iterable[Pod] = (),
    namespaces: Iterable[Namespace] = (),
    pdbs: Iterable[PodDisruptionBudget] = (),
    priority_classes: Iterable[PriorityClass] = (),
    events: Iterable[Event] = (),
    workloads: Iterable[Workload] = (),
) -> ClusterSnapshot:
    """A snapshot of these records (what a source builds after decoding)."""
    return ClusterSnapshot(
        nodes=nodes,
        pods=pods,
        namespaces=namespaces,
        pdbs=pdbs,
        priority_classes=priority_classes,
        events=events,
        workloads=workloads,
    )


def list_doc(*objects: Doc | Iterable[Doc]) -> Doc:
    """A ``kind: List`` of these objects, as ``kubectl get nodes,pods,... -A -o json`` prints it
    (what ``desched simulate`` reads); lists of objects are flattened."""
    items: list[Doc] = []
    for obj in objects:
        if isinstance(obj, dict):
            items.append(obj)
        else:
            items.extend(obj)
    return {"apiVersion": "v1", "kind": "List", "items": items}
