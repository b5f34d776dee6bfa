"""Slim, typed records of the Kubernetes objects desched decides on.

These are msgspec Structs shaped like the API's JSON (camelCase on the wire), holding only the
fields a decision reads. Unknown fields (managedFields, most of status, ...) are skipped by the
decoder without being built, which is what keeps a large cluster's pods small in memory (the
figures are in docs/performance.md).

Quantities stay as the API wrote them (a string, or a number when a hand-written YAML snapshot
has ``cpu: 1``); :mod:`desched.k8s.quantity` parses them once per snapshot.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import msgspec

#: Go's zero time. A value timestamp that is absent or null means this (see conformance README).
ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)

#: A timestamp as the API writes it (RFC 3339 with a zone); a zone-less one is refused when decoded,
#: as the API server refuses it, rather than compared later with aware ones.
Time = Annotated[datetime, msgspec.Meta(tz=True)]
#: Go's int32 and int64, as the API's fields are typed (a larger number is refused when decoded).
Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]

QuantityValue = str | int | float
ResourceList = dict[str, QuantityValue]


class _Base(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    pass


class OwnerReference(_Base):
    kind: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    controller: bool | None = None


class ObjectMeta(_Base):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: Int64 = 0
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None


# --------------------------------------------------------------------------- selectors


class LabelSelectorRequirement(_Base):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class LabelSelector(_Base):
    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirement] | None = None


class NodeSelectorRequirement(_Base):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class NodeSelectorTerm(_Base):
    match_expressions: list[NodeSelectorRequirement] | None = None
    match_fields: list[NodeSelectorRequirement] | None = None


class NodeSelector(_Base):
    node_selector_terms: list[NodeSelectorTerm] = msgspec.field(default_factory=list)


class PreferredSchedulingTerm(_Base):
    weight: Int32 = 0
    preference: NodeSelectorTerm = msgspec.field(default_factory=NodeSelectorTerm)


class NodeAffinity(_Base):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = None


class PodAffinityTerm(_Base):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(_Base):
    weight: Int32 = 0
    pod_affinity_term: PodAffinityTerm = msgspec.field(default_factory=PodAffinityTerm)


class PodAffinity(_Base):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(_Base):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(_Base):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: Int64 | None = None


class Taint(_Base):
    key: str = ""
    value: str = ""
    effect: str = ""
    time_added: Time | None = None


class TopologySpreadConstraint(_Base):
    max_skew: Int32 = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: LabelSelector | None = None
    min_domains: Int32 | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


# --------------------------------------------------------------------------- pods


class ResourceRequirements(_Base):
    requests: ResourceList | None = None
    limits: ResourceList | None = None


class Container(_Base):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None


class PersistentVolumeClaimVolumeSource(_Base):
    claim_name: str = ""
    read_only: bool = False


class Volume(_Base):
    name: str = ""
    empty_dir: dict[str, object] | None = None
    host_path: dict[str, object] | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: dict[str, object] | None = None


class PodResourceClaim(_Base):
    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSpec(_Base):
    node_name: str = ""
    priority: Int32 | None = None
    priority_class_name: str = ""
    scheduler_name: str = ""
    node_selector: dict[str, str] | None = None
    tolerations: list[Toleration] | None = None
    affinity: Affinity | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    containers: list[Container] = msgspec.field(default_factory=list)
    init_containers: list[Container] | None = None
    ephemeral_containers: list[Container] | None = None
    overhead: ResourceList | None = None
    volumes: list[Volume] | None = None
    resource_claims: list[PodResourceClaim] | None = None
    restart_policy: str = ""
    preemption_policy: str | None = None
    resources: ResourceRequirements | None = None


class ContainerStateWaiting(_Base):
    reason: str = ""
    message: str = ""


class ContainerStateRunning(_Base):
    started_at: Time | None = None


class ContainerStateTerminated(_Base):
    exit_code: Int32 = 0
    reason: str = ""
    message: str = ""
    started_at: Time | None = None
    finished_at: Time | None = None


class ContainerState(_Base):
    waiting: ContainerStateWaiting | None = None
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None


class ContainerStatus(_Base):
    name: str = ""
    restart_count: Int32 = 0
    ready: bool = False
    state: ContainerState | None = None
    last_state: ContainerState | None = None


class PodCondition(_Base):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: Time | None = None


class PodStatus(_Base):
    phase: str = ""
    reason: str = ""
    message: str = ""
    start_time: Time | None = None
    qos_class: str = ""
    conditions: list[PodCondition] | None = None
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None
    ephemeral_container_statuses: list[ContainerStatus] | None = None


class Pod(_Base, tag_field="kind", tag="Pod"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def key(self) -> str:
        """``namespace/name``: unique among the pods of one cluster."""
        return f"{self.metadata.namespace}/{self.metadata.name}"

    @property
    def node_name(self) -> str:
        return self.spec.node_name

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels or {}

    @property
    def annotations(self) -> dict[str, str]:
        return self.metadata.annotations or {}


# --------------------------------------------------------------------------- nodes


class NodeSpec(_Base):
    unschedulable: bool = False
    taints: list[Taint] | None = None


class NodeCondition(_Base):
    type: str = ""
    status: str = ""
    reason: str = ""
    last_transition_time: Time | None = None


class NodeStatus(_Base):
    capacity: ResourceList | None = None
    allocatable: ResourceList | None = None
    conditions: list[NodeCondition] | None = None


class Node(_Base, tag_field="kind", tag="Node"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels or {}


# --------------------------------------------------------------------------- the rest


class Namespace(_Base, tag_field="kind", tag="Namespace"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name


class PodDisruptionBudgetSpec(_Base):
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    #: ``IfHealthyBudget`` (the default when unset) or ``AlwaysAllow``.
    unhealthy_pod_eviction_policy: str | None = None


class PodDisruptionBudgetStatus(_Base):
    #: ``None`` when the object has no status (a hand-written snapshot): the budget is then
    #: computed from the pods, as the disruption controller would (:mod:`desched.k8s.disruption`).
    disruptions_allowed: Int32 | None = None
    current_healthy: Int32 = 0
    desired_healthy: Int32 = 0
    expected_pods: Int32 = 0
    observed_generation: Int64 = 0


class PodDisruptionBudget(_Base, tag_field="kind", tag="PodDisruptionBudget"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = msgspec.field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = msgspec.field(default_factory=PodDisruptionBudgetStatus)


class PriorityClass(_Base, tag_field="kind", tag="PriorityClass"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    value: Int32 = 0
    global_default: bool = False
    preemption_policy: str | None = None


class PersistentVolumeClaimSpec(_Base):
    storage_class_name: str | None = None
    volume_name: str = ""


class PersistentVolumeClaim(_Base, tag_field="kind", tag="PersistentVolumeClaim"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = msgspec.field(default_factory=PersistentVolumeClaimSpec)


class ObjectReference(_Base):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    field_path: str = ""


class EventSource(_Base):
    component: str = ""
    host: str = ""


class EventSeries(_Base):
    count: Int32 = 0
    last_observed_time: Time | None = None


class Event(_Base, tag_field="kind", tag="Event"):
    """A core/v1 Event (what ``kubectl get events -o yaml`` prints)."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    involved_object: ObjectReference = msgspec.field(default_factory=ObjectReference)
    reason: str = ""
    message: str = ""
    type: str = ""
    count: Int32 = 0
    first_timestamp: Time | None = None
    last_timestamp: Time | None = None
    event_time: Time | None = None
    source: EventSource | None = None
    reporting_component: str = ""
    series: EventSeries | None = None


# --------------------------------------------------------------------------- workloads
# Only what kube-scheduler's default spread selector reads of them (``DefaultSelector``):
# the objects whose selectors build the selector of the cluster-level default constraints.


class ServiceSpec(_Base):
    selector: dict[str, str] | None = None


class Service(_Base, tag_field="kind", tag="Service"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ServiceSpec = msgspec.field(default_factory=ServiceSpec)


class ReplicationControllerSpec(_Base):
    selector: dict[str, str] | None = None


class ReplicationController(_Base, tag_field="kind", tag="ReplicationController"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ReplicationControllerSpec = msgspec.field(default_factory=ReplicationControllerSpec)


class WorkloadSpec(_Base):
    selector: LabelSelector | None = None


class ReplicaSet(_Base, tag_field="kind", tag="ReplicaSet"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)


class StatefulSet(_Base, tag_field="kind", tag="StatefulSet"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: WorkloadSpec = msgspec.field(default_factory=WorkloadSpec)


#: The kinds whose selectors make kube-scheduler's default spread selector.
Workload = Service | ReplicationController | ReplicaSet | StatefulSet


# --------------------------------------------------------------------------- deployments
# Only what ``evictionPolicy.surge`` reads of them (:mod:`desched.k8s.deployments`).


class RollingUpdateDeployment(_Base):
    max_surge: int | str | None = None
    max_unavailable: int | str | None = None


class DeploymentStrategy(_Base):
    type: str = ""
    rolling_update: RollingUpdateDeployment | None = None


class DeploymentSpec(_Base):
    replicas: int | None = None
    paused: bool = False
    strategy: DeploymentStrategy | None = None


class DeploymentStatus(_Base):
    observed_generation: Int64 = 0
    replicas: int = 0
    updated_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0


class Deployment(_Base, tag_field="kind", tag="Deployment"):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: DeploymentSpec = msgspec.field(default_factory=DeploymentSpec)
    status: DeploymentStatus = msgspec.field(default_factory=DeploymentStatus)


#: Every kind a snapshot may hold, by its ``kind``.
KINDS: dict[str, type[msgspec.Struct]] = {
    "Pod": Pod,
    "Node": Node,
    "Namespace": Namespace,
    "PodDisruptionBudget": PodDisruptionBudget,
    "PriorityClass": PriorityClass,
    "PersistentVolumeClaim": PersistentVolumeClaim,
    "Event": Event,
    "Service": Service,
    "ReplicationController": ReplicationController,
    "ReplicaSet": ReplicaSet,
    "StatefulSet": StatefulSet,
    "Deployment": Deployment,
}

AnyObject = (
    Pod
    | Node
    | Namespace
    | PodDisruptionBudget
    | PriorityClass
    | PersistentVolumeClaim
    | Event
    | Service
    | ReplicationController
    | ReplicaSet
    | StatefulSet
    | Deployment
)


def timestamp(value: datetime | None) -> datetime:
    """A value timestamp as Kubernetes means it: absent or null is Go's zero time."""
    return value if value is not None else ZERO_TIME
