"""Pods' scheduling constraints, as both the snapshot's pod templates (templates.py) and the live
clusters' Deployments (manifests.py) write them: label selector terms, node affinity, topology
spread constraints, and the well-known topology keys."""

from __future__ import annotations

from benchmarks.generator.common import Obj

ZONE_KEY = "topology.kubernetes.io/zone"
HOSTNAME_KEY = "kubernetes.io/hostname"


def match_in(key: str, *values: str) -> Obj:
    """A node selector requirement ``key In (values)``."""
    return {"key": key, "operator": "In", "values": list(values)}


def required_node_affinity(*expressions: Obj) -> Obj:
    """``requiredDuringSchedulingIgnoredDuringExecution``: one node selector term of ``expressions``."""
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
        }
    }


def preferred_node_term(weight: int, *expressions: Obj) -> Obj:
    """A ``preferredDuringSchedulingIgnoredDuringExecution`` term of node affinity."""
    return {"preference": {"matchExpressions": list(expressions)}, "weight": weight}


def spread(selector: Obj, topology_key: str, when_unsatisfiable: str) -> Obj:
    """A topology spread constraint of ``maxSkew: 1`` over the pods ``selector`` selects."""
    return {
        "labelSelector": selector,
        "maxSkew": 1,
        "topologyKey": topology_key,
        "whenUnsatisfiable": when_unsatisfiable,
    }
