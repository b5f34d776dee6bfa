"""The order kube-scheduler looks at nodes and pods in: its node tree (round-robin over zones),
``numFeasibleNodesToFind`` (how many feasible nodes a search looks for) and the scheduling queue's
order (higher priority first, then first queued first)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol, TypeVar

from desched.k8s.objects import Node

MIN_FEASIBLE_NODES: Final = 100
MIN_FEASIBLE_PERCENTAGE: Final = 5
_LABEL_ZONE: Final = "topology.kubernetes.io/zone"
_LABEL_REGION: Final = "topology.kubernetes.io/region"
_LABEL_ZONE_BETA: Final = "failure-domain.beta.kubernetes.io/zone"
_LABEL_REGION_BETA: Final = "failure-domain.beta.kubernetes.io/region"

_Q = TypeVar("_Q", bound="Queued")


def num_feasible_nodes_to_find(num_all_nodes: int, percentage: int | None = None) -> int:
    """kube-scheduler's ``numFeasibleNodesToFind``: how many feasible nodes are looked for."""
    if num_all_nodes < MIN_FEASIBLE_NODES or (percentage is not None and percentage >= 100):
        return num_all_nodes
    if not percentage:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_PERCENTAGE)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES)


def _zone_key(labels: Mapping[str, str]) -> str:
    region = labels.get(_LABEL_REGION) or labels.get(_LABEL_REGION_BETA) or ""
    zone = labels.get(_LABEL_ZONE) or labels.get(_LABEL_ZONE_BETA) or ""
    return f"{region}:\x00:{zone}" if region or zone else ""


def scheduler_node_order(nodes: Iterable[Node]) -> list[Node]:
    """kube-scheduler's node tree order: round-robin over zones (in order of first appearance),
    nodes by name within a zone."""
    zones: dict[str, list[Node]] = {}
    for node in sorted(nodes, key=lambda n: n.metadata.name):
        zones.setdefault(_zone_key(node.metadata.labels or {}), []).append(node)
    out: list[Node] = []
    lists = list(zones.values())
    depth = max((len(z) for z in lists), default=0)
    for k in range(depth):
        for z in lists:
            if k < len(z):
                out.append(z[k])
    return out


class Queued(Protocol):
    """A pod waiting in the scheduling queue: its priority decides its turn."""

    @property
    def priority(self) -> int: ...


def queue_order(pods: Iterable[_Q]) -> list[_Q]:
    """kube-scheduler's activeQ order (PrioritySort): higher priority first, then first queued
    first (a stable sort)."""
    return sorted(pods, key=lambda q: -q.priority)
