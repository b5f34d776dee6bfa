"""What a plugin may read of the cluster: :class:`ClusterView`, the read-only side of a snapshot.

A plugin's handle gives it the cycle's :class:`~desched.cluster.snapshot.ClusterSnapshot` typed as
this protocol: it reads nodes, pods and the objects around them, and never changes them (only the
framework takes an evicted pod out of the cycle's snapshot). The type checker enforces it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from desched.cluster.snapshot import OwnerKey
from desched.k8s.objects import (
    Event,
    Namespace,
    Node,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    TopologySpreadConstraint,
)
from desched.k8s.resources import Resources
from desched.k8s.topologyspread import DefaultConstraints


class ClusterView(Protocol):
    """The read-only queries of a cluster snapshot (see ``ClusterSnapshot`` for each one)."""

    @property
    def version(self) -> int:
        """Bumped by every change of the snapshot: caches over it compare it to know they are stale."""
        ...

    @property
    def additions(self) -> int:
        """Bumped by every pod added to the snapshot (a simulation's placed pods)."""
        ...

    @property
    def nodes(self) -> Sequence[Node]: ...

    def node(self, name: str) -> Node | None: ...

    def ready_nodes(self, selector: str | None = None) -> list[Node]: ...

    def allocatable(self, node: Node) -> Resources: ...

    def requested_on(self, node_name: str) -> Resources: ...

    def pod_count_on(self, node_name: str) -> int: ...

    @property
    def pods(self) -> Sequence[Pod]: ...

    def iter_pods(self) -> Iterator[Pod]: ...

    def pod(self, namespace: str, name: str) -> Pod | None: ...

    def pods_on_node(self, node_name: str) -> list[Pod]: ...

    def pods_in_namespace(self, namespace: str) -> list[Pod]: ...

    def pods_of_owner(self, namespace: str, kind: str, name: str) -> list[Pod]: ...

    def owner_pod_count(self, namespace: str, kind: str, name: str) -> int: ...

    def owners(self) -> list[OwnerKey]: ...

    def requests(self, pod: Pod) -> Resources: ...

    def was_removed(self, pod: Pod) -> bool: ...

    @property
    def namespaces(self) -> Sequence[Namespace]: ...

    def namespace(self, name: str) -> Namespace | None: ...

    @property
    def priority_classes(self) -> dict[str, PriorityClass]: ...

    def pvc(self, namespace: str, name: str) -> PersistentVolumeClaim | None: ...

    @property
    def pdbs(self) -> Sequence[PodDisruptionBudget]: ...

    def pdbs_for_pod(self, pod: Pod) -> list[PodDisruptionBudget]: ...

    @property
    def events(self) -> Sequence[Event]: ...

    def events_for(self, kind: str, namespace: str, name: str) -> list[Event]: ...

    @property
    def workloads_known(self) -> bool: ...

    def default_spread_constraints(
        self, pod: Pod, defaults: DefaultConstraints
    ) -> list[TopologySpreadConstraint]: ...
