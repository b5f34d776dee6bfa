"""Facts about a node, as upstream descheduler reads them (``pkg/descheduler/node/node.go``)."""

from __future__ import annotations

from desched.k8s.objects import Node

__all__ = [
    "LABEL_HOSTNAME",
    "LABEL_REGION",
    "LABEL_ZONE",
    "is_node_ready",
    "is_node_unschedulable",
    "node_region",
    "node_zone",
]

LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_HOSTNAME = "kubernetes.io/hostname"


def is_node_ready(node: Node) -> bool:
    """``IsReady``: False only if the node has a Ready condition whose status is not "True".

    A node without a Ready condition (or without conditions) counts as ready, as upstream.
    """
    return not any(cond.type == "Ready" and cond.status != "True" for cond in node.status.conditions or ())


def is_node_unschedulable(node: Node) -> bool:
    """spec.unschedulable (cordoned)."""
    return node.spec.unschedulable


def node_zone(node: Node) -> str | None:
    """The topology.kubernetes.io/zone label, or None (the deprecated beta label is not read)."""
    labels = node.metadata.labels
    return labels.get(LABEL_ZONE) if labels else None


def node_region(node: Node) -> str | None:
    """The topology.kubernetes.io/region label, or None."""
    labels = node.metadata.labels
    return labels.get(LABEL_REGION) if labels else None
