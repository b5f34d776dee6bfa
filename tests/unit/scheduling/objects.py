"""The nodes and pods of the placement and simulation tests: shortcuts over tests/builders.py
(allocatable as capacity too, zone ``a``, a ReplicaSet owner), a snapshot of them, one placement
decision, and a required pod anti-affinity."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tests import builders

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import Node, Pod
from desched.scheduling.placement import (
    PlacementOptions,
    PlacementSimulator,
)

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "20",
    zone: str = "a",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: str = "True",
    extra: dict[str, str] | None = None,
) -> Node:
    return builders.node(
        name,
        cpu=cpu,
        memory=memory,
        pods=pods,
        extra=extra,
        capacity=True,
        zone=zone,
        labels=labels,
        taints=taints or [],
        unschedulable=unschedulable,
        ready=ready,
    )


def pod(
    name: str,
    on: str = "",
    *,
    ns: str = "default",
    cpu: str | None = "100m",
    memory: str | None = "128Mi",
    labels: dict[str, str] | None = None,
    owner: tuple[str, str] | None = ("ReplicaSet", "rs"),
    priority: int | None = None,
    phase: str = "Running",
    spec: dict[str, Any] | None = None,
) -> Pod:
    return builders.pod(
        name,
        node=on,
        namespace=ns,
        cpu=cpu,
        memory=memory,
        labels=labels or {},
        owner=owner,
        priority=priority,
        phase=phase,
        spec=spec,
    )


def snap(nodes: list[Node], pods: list[Pod] = ()) -> ClusterSnapshot:  # type: ignore[assignment]
    return ClusterSnapshot(nodes=nodes, pods=pods)


def decide(snapshot: ClusterSnapshot, p: Pod, options: PlacementOptions | None = None) -> Any:
    return PlacementSimulator(snapshot, options).decide(p)


def anti(app: str, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
                ]
            }
        }
    }
