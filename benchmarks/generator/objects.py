"""The cluster's other objects: Namespaces (one prod and some staging per team, the platform's),
PriorityClasses (seven, one global default), and the PodDisruptionBudgets and
PersistentVolumeClaims of the workloads, with the status and metadata noise kubectl shows."""

from __future__ import annotations

from collections.abc import Iterator

from benchmarks.generator.common import DAY, Context, Obj, Part, ts
from benchmarks.generator.nodes import Node
from benchmarks.generator.workloads import Workload

_PRIORITY_CLASSES: list[tuple[str, int, bool, str, str]] = [
    # name, value, globalDefault, preemptionPolicy, description
    (
        "system-node-critical",
        2_000_001_000,
        False,
        "PreemptLowerPriority",
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        False,
        "PreemptLowerPriority",
        "Used for system critical pods that must run in the cluster, but can be moved to another node "
        "if necessary.",
    ),
    (
        "platform-critical",
        1_000_000,
        False,
        "PreemptLowerPriority",
        "Platform services: ingress, monitoring.",
    ),
    ("high-priority", 100_000, False, "PreemptLowerPriority", "Customer-facing services."),
    ("default-priority", 1_000, True, "PreemptLowerPriority", "Default for workloads without a class."),
    ("batch-low", 100, False, "Never", "Batch and CI jobs; never preempt."),
    ("preview-low", -10, False, "Never", "Preview environments."),
]
_PRIORITY_VALUE = {name: value for name, value, *_ in _PRIORITY_CLASSES}


class ClusterObjects(Part):
    """The Namespaces and PriorityClasses, and the PDBs and PVCs gathered while pods are made."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.namespaces: dict[str, Obj] = {}
        self.pdbs: list[Obj] = []
        self.pvcs: list[Obj] = []

    def plan_namespaces(self, teams: list[str]) -> None:
        names = [
            "default",
            "kube-node-lease",
            "kube-public",
            "kube-system",
            "monitoring",
            "logging",
            "ingress-nginx",
            "cert-manager",
            "data-platform",
            "ml-serving",
            "batch",
            "ci",
            "preview",
            "sandbox",
        ]
        names += [f"{team}-prod" for team in teams]
        names += [f"{team}-staging" for team in teams[: max(1, len(teams) // 3)]]
        for name in names:
            team = name.rsplit("-", 1)[0] if name.endswith(("-prod", "-staging")) else "platform"
            env = "prod" if name.endswith("-prod") else "staging" if name.endswith("-staging") else "shared"
            self.namespaces[name] = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "creationTimestamp": ts(self.rng.uniform(200, 700) * DAY),
                    "labels": {
                        "kubernetes.io/metadata.name": name,
                        "team": team,
                        "environment": env,
                        **({"istio-injection": "enabled"} if env == "prod" else {}),
                    },
                    "name": name,
                    "resourceVersion": str(self.rng.randrange(10**6, 10**8)),
                    "uid": self.uid(),
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }

    def namespace_objects(self) -> Iterator[Obj]:
        for obj in self.namespaces.values():
            self.stats.add("Namespace")
            yield obj

    def priority_class_objects(self) -> Iterator[Obj]:
        for name, value, default, preemption, description in _PRIORITY_CLASSES:
            obj = priority_class_object(
                {
                    "creationTimestamp": ts(700 * DAY),
                    "generation": 1,
                    "name": name,
                    "resourceVersion": str(self.rng.randrange(100, 10**5)),
                    "uid": self.uid(),
                },
                value,
                description=description,
                preemption=preemption,
                default=default,
            )
            self.stats.add("PriorityClass")
            yield obj

    def pdb(self, w: Workload, instance: str, healthy: int) -> Obj:
        """The PodDisruptionBudget of a workload whose pods carry ``app.kubernetes.io/instance=instance``."""
        rng = self.rng
        spec: Obj = {
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/instance": instance,
                    "app.kubernetes.io/name": w.app,
                }
            }
        }
        if w.kind == "StatefulSet" or rng.random() < 0.5:
            spec["maxUnavailable"] = 1 if rng.random() < 0.7 else "25%"
            desired = max(0, w.replicas - 1)
        else:
            spec["minAvailable"] = rng.choice((1, "50%"))
            desired = 1 if spec["minAvailable"] == 1 else (w.replicas + 1) // 2
        self.stats.add("PodDisruptionBudget")
        metadata = {
            "annotations": {
                "meta.helm.sh/release-name": w.name,
                "meta.helm.sh/release-namespace": w.namespace,
            },
            "creationTimestamp": ts(w.age_days * DAY),
            "generation": 1,
            "labels": {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/name": w.app},
            "name": w.name,
            "namespace": w.namespace,
            "resourceVersion": str(rng.randrange(10**8, 10**9)),
            "uid": self.uid(),
        }
        return pdb_object(
            metadata,
            spec,
            {
                "conditions": [
                    {
                        "lastTransitionTime": ts(rng.uniform(1, 30) * DAY),
                        "message": "",
                        "observedGeneration": 1,
                        "reason": "SufficientPods" if healthy > desired else "InsufficientPods",
                        "status": "True" if healthy > desired else "False",
                        "type": "DisruptionAllowed",
                    }
                ],
                "currentHealthy": healthy,
                "desiredHealthy": desired,
                "disruptionsAllowed": max(0, healthy - desired),
                "expectedPods": w.replicas,
                "observedGeneration": 1,
            },
        )

    def pvc(self, w: Workload, claim: str, node: Node | None) -> Obj:
        self.stats.add("PersistentVolumeClaim")
        size = self.rng.choice(("10Gi", "50Gi", "100Gi", "500Gi"))
        meta: Obj = {
            "annotations": {
                "pv.kubernetes.io/bind-completed": "yes",
                "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.beta.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
                "volume.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
            },
            "creationTimestamp": ts(w.age_days * DAY),
            "finalizers": ["kubernetes.io/pvc-protection"],
            "labels": {"app.kubernetes.io/name": w.app},
            "name": claim,
            "namespace": w.namespace,
            "resourceVersion": str(self.rng.randrange(10**8, 10**9)),
            "uid": self.uid(),
        }
        if node is not None:
            meta["annotations"]["volume.kubernetes.io/selected-node"] = node.name
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": meta,
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": size}},
                "storageClassName": "gp3",
                "volumeMode": "Filesystem",
                "volumeName": f"pvc-{self.uid()}",
            },
            "status": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": size}, "phase": "Bound"},
        }


def priority_class_object(
    metadata: Obj,
    value: int,
    *,
    description: str | None = None,
    preemption: str | None = None,
    default: bool = False,
) -> Obj:
    """A PriorityClass (keys in the order the API server lists them)."""
    obj: Obj = {"apiVersion": "scheduling.k8s.io/v1"}
    if description is not None:
        obj["description"] = description
    obj["kind"] = "PriorityClass"
    obj["metadata"] = metadata
    if preemption is not None:
        obj["preemptionPolicy"] = preemption
    obj["value"] = value
    if default:
        obj["globalDefault"] = True
    return obj


def pdb_object(metadata: Obj, spec: Obj, status: Obj | None = None) -> Obj:
    """A PodDisruptionBudget: a manifest to create, or with its status, as the API server lists it."""
    obj: Obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj
