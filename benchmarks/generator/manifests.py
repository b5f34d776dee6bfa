"""Serialisation to manifests for a live cluster: the objects to create on a real control plane
for a live cluster (live.py), where kube-scheduler and the controllers make the pods, as against
snapshot.py's List of objects as the API server would list them after the fact.

The scheduling constraints, PDBs and PriorityClasses are built by the same builders as the
snapshot's (constraints.py, objects.py)."""

from __future__ import annotations

from typing import Any

from benchmarks.generator.common import Obj
from benchmarks.generator.constraints import (
    HOSTNAME_KEY,
    ZONE_KEY,
    match_in,
    required_node_affinity,
    spread,
)
from benchmarks.generator.live import PRIORITY_CLASS_NAME, SSD, GenCluster, GenDeployment, GenNode
from benchmarks.generator.objects import pdb_object, priority_class_object

#: the live clusters' PriorityClass (create it before the Deployments)
PRIORITY_CLASS = priority_class_object({"name": PRIORITY_CLASS_NAME}, 1000)


def node_manifest_args(n: GenNode) -> dict[str, Any]:
    """Keyword arguments of ``ControlPlane.create_fake_node`` (tests/e2e) for the node."""
    labels = {ZONE_KEY: n.zone, "e2e.desched.io/gen": "1"}
    if n.ssd:
        labels[SSD[0]] = SSD[1]
    return {"cpu": str(n.cpu), "memory": f"{n.memory_gi}Gi", "pods": "32", "labels": labels}


def deployment_manifest(c: GenCluster, d: GenDeployment) -> Obj:
    labels = {"app": d.name}
    spec: Obj = {
        "containers": [
            {
                "name": "app",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": f"{d.cpu_m}m", "memory": f"{d.memory_mi}Mi"}},
            }
        ],
        "terminationGracePeriodSeconds": 30,
    }
    if d.priority_class:
        spec["priorityClassName"] = d.priority_class
    if d.kind in ("zone-spread", "host-spread"):
        key = ZONE_KEY if d.kind == "zone-spread" else HOSTNAME_KEY
        spec["topologySpreadConstraints"] = [spread({"matchLabels": labels}, key, "ScheduleAnyway")]
    if d.kind == "ssd":
        spec["affinity"] = {"nodeAffinity": required_node_affinity(match_in(*SSD))}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": d.name, "namespace": c.namespace, "labels": labels},
        "spec": {
            "replicas": d.replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def pdb_manifest(c: GenCluster, d: GenDeployment) -> Obj | None:
    """``maxUnavailable: 1`` or ``minAvailable: replicas - 1`` over the Deployment's pods, if it has one."""
    if not d.pdb:
        return None
    budget: Obj = {"maxUnavailable": 1} if d.pdb == "maxUnavailable" else {"minAvailable": d.replicas - 1}
    return pdb_object(
        {"name": d.name, "namespace": c.namespace}, {"selector": {"matchLabels": {"app": d.name}}, **budget}
    )
