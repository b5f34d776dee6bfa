"""Writes examples/cluster.yaml: a small, realistic cluster snapshot where several plugins have work.

The snapshot is what ``kubectl get nodes,pods,namespaces,poddisruptionbudgets,priorityclasses,
events -A -o yaml`` prints (a v1 List). Run ``python examples/make_cluster.py`` to regenerate it;
the output is deterministic. The story of each object is in the comments below; the README's
``desched simulate`` command uses ``--now 2026-11-21T12:00:00Z``.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import yaml

NOW = "2026-11-21T12:00:00Z"
Obj = dict[str, Any]


def uid(*parts: str) -> str:
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def node(
    name: str,
    zone: str,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    labels: Obj | None = None,
    taints: list[Obj] | None = None,
) -> Obj:
    lab = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "topology.kubernetes.io/zone": zone,
        "node.kubernetes.io/instance-type": "m5.xlarge",
        **(labels or {}),
    }
    res = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    spec: Obj = {"podCIDR": "10.244.0.0/24"}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": uid("node", name),
            "labels": lab,
            "creationTimestamp": "2026-10-01T08:00:00Z",
        },
        "spec": spec,
        "status": {
            "capacity": res,
            "allocatable": res,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
            ],
        },
    }


def pod(
    ns: str,
    name: str,
    node_name: str,
    *,
    owner: tuple[str, str] | None = None,
    cpu: str = "100m",
    memory: str = "128Mi",
    image: str = "nginx:1.27",
    labels: Obj | None = None,
    created: str = "2026-11-14T09:00:00Z",
    phase: str = "Running",
    priority: int | None = 0,
    priority_class: str = "",
    extra_spec: Obj | None = None,
    status: Obj | None = None,
    limits: bool = False,
    annotations: Obj | None = None,
) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": ns,
        "uid": uid("pod", ns, name),
        "creationTimestamp": created,
        "labels": labels or {},
    }
    if annotations:
        meta["annotations"] = annotations
    if owner is not None:
        kind, oname = owner
        api = {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Job": "batch/v1"}[
            kind
        ]
        meta["ownerReferences"] = [
            {
                "apiVersion": api,
                "kind": kind,
                "name": oname,
                "uid": uid(kind, ns, oname),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    resources: Obj = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = {"cpu": cpu, "memory": memory}
    spec: Obj = {
        "nodeName": node_name,
        "schedulerName": "default-scheduler",
        "containers": [{"name": name.split("-")[0], "image": image, "resources": resources}],
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        **(extra_spec or {}),
    }
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    st: Obj = {"phase": phase, "startTime": created, "qosClass": "Guaranteed" if limits else "Burstable"}
    if phase == "Running":
        st["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": created}]
        st["containerStatuses"] = [
            {
                "name": name.split("-")[0],
                "ready": True,
                "restartCount": 0,
                "image": image,
                "state": {"running": {"startedAt": created}},
            }
        ]
    st.update(status or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": st}


def zone_spread(app: str) -> Obj:
    return {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    }


def build() -> list[Obj]:
    items: list[Obj] = []
    # Nodes: three zones. node-b1 was tainted for GPU work after ordinary pods had landed on it;
    # node-c1 lost its disktype=ssd label after a disk swap.
    items += [
        node(
            "control-plane",
            "zone-a",
            labels={"node-role.kubernetes.io/control-plane": ""},
            taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
        ),
        node("node-a1", "zone-a", labels={"disktype": "ssd"}),
        node("node-a2", "zone-a", labels={"disktype": "ssd"}),
        node(
            "node-b1",
            "zone-b",
            labels={"disktype": "ssd"},
            taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
        ),
        node("node-b2", "zone-b", labels={"disktype": "ssd"}),
        node("node-c1", "zone-c", labels={"disktype": "hdd"}),
        node("node-c2", "zone-c", labels={"disktype": "ssd"}),
    ]
    for ns, labels in (
        ("kube-system", {}),
        ("shop", {"team": "shop"}),
        ("batch", {"team": "data"}),
        ("sandbox", {"team": "dev"}),
        ("monitoring", {"team": "sre"}),
    ):
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": ns,
                    "uid": uid("ns", ns),
                    "labels": {"kubernetes.io/metadata.name": ns, **labels},
                },
                "status": {"phase": "Active"},
            }
        )
    items += [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "system-cluster-critical"},
            "value": 2000000000,
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "system-node-critical"},
            "value": 2000001000,
        },
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "shop-high"},
            "value": 10000,
        },
    ]
    workers = ["node-a1", "node-a2", "node-b1", "node-b2", "node-c1", "node-c2"]
    # kube-system: a DaemonSet on every node (never evicted), system-critical CoreDNS.
    for n in ["control-plane", *workers]:
        items.append(
            pod(
                "kube-system",
                f"kube-proxy-{n}",
                n,
                owner=("DaemonSet", "kube-proxy"),
                image="registry.k8s.io/kube-proxy:v1.34.1",
                labels={"k8s-app": "kube-proxy"},
                priority=2000001000,
                priority_class="system-node-critical",
                created="2026-10-01T08:05:00Z",
                extra_spec={"tolerations": [{"operator": "Exists"}]},  # as kube-proxy: runs everywhere
            )
        )
    for i, n in enumerate(["node-a1", "node-a2"]):
        items.append(
            pod(
                "kube-system",
                f"coredns-5d78c9869d-{i}",
                n,
                owner=("ReplicaSet", "coredns-5d78c9869d"),
                image="registry.k8s.io/coredns/coredns:v1.11.3",
                labels={"k8s-app": "kube-dns"},
                priority=2000000000,
                priority_class="system-cluster-critical",
                created="2026-10-01T08:06:00Z",
            )
        )
    # shop/web: 6 replicas, 4 of them piled on node-a1 (duplicates; node-a1 is also overloaded).
    web_nodes = ["node-a1", "node-a1", "node-a1", "node-a1", "node-a2", "node-c2"]
    for i, n in enumerate(web_nodes):
        items.append(
            pod(
                "shop",
                f"web-7d9f8b6c5-{i}",
                n,
                owner=("ReplicaSet", "web-7d9f8b6c5"),
                cpu="500m",
                memory="512Mi",
                labels={"app": "web"},
                created=f"2026-11-20T0{i}:00:00Z",
            )
        )
    # shop/api: spread over zones with maxSkew 1, but all three replicas ended up in zone-a.
    for i, n in enumerate(["node-a1", "node-a2", "node-a2"]):
        items.append(
            pod(
                "shop",
                f"api-6c8d7f9b4-{i}",
                n,
                owner=("ReplicaSet", "api-6c8d7f9b4"),
                cpu="250m",
                memory="256Mi",
                labels={"app": "api"},
                extra_spec=zone_spread("api"),
                priority=10000,
                priority_class="shop-high",
                image="shop/api:2.4.1",
                created=f"2026-11-19T1{i}:00:00Z",
            )
        )
    # shop/cart: a StatefulSet that requires one replica per node; two share node-a2.
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "cart"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    }
    for i, n in enumerate(["node-a2", "node-a2", "node-b2"]):
        items.append(
            pod(
                "shop",
                f"cart-{i}",
                n,
                owner=("StatefulSet", "cart"),
                cpu="200m",
                memory="1Gi",
                labels={"app": "cart"},
                extra_spec=anti,
                image="redis:7.4",
                limits=True,
                created=f"2026-11-1{i + 5}T10:00:00Z",
            )
        )
    # shop/search: needs an ssd node; node-c1 no longer has one.
    ssd = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "disktype", "operator": "In", "values": ["ssd"]}]}
                    ]
                }
            }
        }
    }
    items.append(
        pod(
            "shop",
            "search-5f6b7c8d9-0",
            "node-c1",
            owner=("ReplicaSet", "search-5f6b7c8d9"),
            cpu="300m",
            memory="1Gi",
            labels={"app": "search"},
            extra_spec=ssd,
            image="opensearch:2.17",
        )
    )
    # monitoring/reports on node-b1, which is now tainted dedicated=gpu:NoSchedule.
    for i in range(2):
        items.append(
            pod(
                "monitoring",
                f"reports-84c6d9f7b-{i}",
                "node-b1",
                owner=("ReplicaSet", "reports-84c6d9f7b"),
                cpu="200m",
                memory="256Mi",
                labels={"app": "reports"},
                image="grafana/grafana:11.3",
            )
        )
    gpu_tol = {
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    }
    items.append(
        pod(
            "batch",
            "trainer-0",
            "node-b1",
            owner=("StatefulSet", "trainer"),
            cpu="1",
            memory="4Gi",
            labels={"app": "trainer"},
            extra_spec=gpu_tol,
            image="pytorch/pytorch:2.5",
        )
    )
    # monitoring/agent crash-looping: 150 restarts.
    items.append(
        pod(
            "monitoring",
            "log-agent-7b9c5d6f8-0",
            "node-c2",
            owner=("ReplicaSet", "log-agent-7b9c5d6f8"),
            labels={"app": "log-agent"},
            image="fluent/fluent-bit:3.1",
            status={
                "containerStatuses": [
                    {
                        "name": "log",
                        "ready": False,
                        "restartCount": 150,
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                    }
                ]
            },
        )
    )
    # batch: one Job pod failed two hours ago; one finished fine.
    items.append(
        pod(
            "batch",
            "nightly-etl-29876-x7k2p",
            "node-c2",
            owner=("Job", "nightly-etl-29876"),
            cpu="500m",
            memory="1Gi",
            labels={"job-name": "nightly-etl-29876"},
            phase="Failed",
            created="2026-11-21T09:00:00Z",
            status={
                "reason": "",
                "containerStatuses": [
                    {
                        "name": "nightly",
                        "restartCount": 0,
                        "state": {
                            "terminated": {
                                "exitCode": 137,
                                "reason": "OOMKilled",
                                "finishedAt": "2026-11-21T09:40:00Z",
                            }
                        },
                    }
                ],
            },
        )
    )
    items.append(
        pod(
            "batch",
            "hourly-sync-29877-m2nq8",
            "node-b2",
            owner=("Job", "hourly-sync-29877"),
            labels={"job-name": "hourly-sync-29877"},
            phase="Succeeded",
            created="2026-11-21T11:00:00Z",
        )
    )
    # sandbox: dev pods, one forgotten for ten days (PodLifeTime caps sandbox pods at 7 days).
    items.append(
        pod(
            "sandbox",
            "notebook-6f7d8c9b5-0",
            "node-b2",
            owner=("ReplicaSet", "notebook-6f7d8c9b5"),
            cpu="500m",
            memory="2Gi",
            labels={"app": "notebook"},
            image="jupyter/base-notebook:2024",
            created="2026-11-11T12:00:00Z",
        )
    )
    items.append(
        pod(
            "sandbox",
            "scratch",
            "node-c1",
            labels={"app": "scratch"},
            image="busybox:1.36",
            created="2026-11-01T12:00:00Z",
        )
    )  # a bare pod: DefaultEvictor protects it
    # shop/session-cache uses an emptyDir: protected from eviction by default (PodsWithLocalStorage).
    items.append(
        pod(
            "shop",
            "session-cache-0",
            "node-a1",
            owner=("StatefulSet", "session-cache"),
            cpu="500m",
            memory="1Gi",
            labels={"app": "session-cache"},
            image="memcached:1.6",
            extra_spec={"volumes": [{"name": "tmp", "emptyDir": {}}]},
        )
    )
    # shop/recommender: a heavy service that also landed on node-a1, leaving it over-utilised
    # (LowNodeUtilization moves pods from it to the idle node-c1).
    items.append(
        pod(
            "shop",
            "recommender-59d7c6b8f4-0",
            "node-a1",
            owner=("ReplicaSet", "recommender-59d7c6b8f4"),
            cpu="1",
            memory="4Gi",
            labels={"app": "recommender"},
            image="shop/recommender:3.2",
        )
    )
    # shop/promo: a campaign whose pods carry an expiry annotation (for the out-of-tree example plugin).
    items.append(
        pod(
            "shop",
            "promo-7f8c9d6b5-0",
            "node-c2",
            owner=("ReplicaSet", "promo-7f8c9d6b5"),
            labels={"app": "promo"},
            image="shop/promo:black-friday",
            annotations={"example.desched.io/expires-at": "2026-11-20T00:00:00Z"},
        )
    )
    # shop/checkout and shop/payments scaled out onto node-c1, whose CNI plugin is broken: their
    # sandboxes cannot be created, the pods sit Pending (RemoveAnomalyPods, examples/policy-anomaly.yaml).
    # checkout has failed 12 times (anomalous), payments 3 times so far (only suspected).
    for name, rs, failures in (
        ("checkout-5c7b9d8f6-0", "checkout-5c7b9d8f6", 12),
        ("payments-6d8c4b7f9-0", "payments-6d8c4b7f9", 3),
    ):
        items.append(
            pod(
                "shop",
                name,
                "node-c1",
                owner=("ReplicaSet", rs),
                labels={"app": name.split("-")[0]},
                image=f"shop/{name.split('-')[0]}:3.2.0",
                phase="Pending",
                created="2026-11-21T11:50:00Z",
                status={
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "True",
                            "lastTransitionTime": "2026-11-21T11:50:00Z",
                        }
                    ],
                    "containerStatuses": [
                        {
                            "name": name.split("-")[0],
                            "ready": False,
                            "restartCount": 0,
                            "state": {"waiting": {"reason": "ContainerCreating"}},
                        }
                    ],
                },
            )
        )
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.18a", "namespace": "shop", "uid": uid("event", name)},
                "involvedObject": {
                    "kind": "Pod",
                    "namespace": "shop",
                    "name": name,
                    "uid": uid("pod", "shop", name),
                },
                "reason": "FailedCreatePodSandBox",
                "type": "Warning",
                "count": failures,
                "message": "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup "
                'network for sandbox: plugin type="calico" failed (add): connection refused',
                "firstTimestamp": "2026-11-21T11:50:05Z",
                "lastTimestamp": "2026-11-21T11:59:30Z",
                "source": {"component": "kubelet", "host": "node-c1"},
            }
        )
    items.append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "shop", "uid": uid("pdb", "web"), "generation": 1},
            "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "web"}}},
            "status": {
                "currentHealthy": 6,
                "desiredHealthy": 4,
                "disruptionsAllowed": 2,
                "expectedPods": 6,
                "observedGeneration": 1,
            },
        }
    )
    items.append(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "log-agent-7b9c5d6f8-0.17f", "namespace": "monitoring"},
            "involvedObject": {
                "kind": "Pod",
                "namespace": "monitoring",
                "name": "log-agent-7b9c5d6f8-0",
                "uid": uid("pod", "monitoring", "log-agent-7b9c5d6f8-0"),
            },
            "reason": "BackOff",
            "message": "Back-off restarting failed container log",
            "type": "Warning",
            "count": 150,
            "firstTimestamp": "2026-11-20T08:00:00Z",
            "lastTimestamp": "2026-11-21T11:58:00Z",
            "source": {"component": "kubelet", "host": "node-c2"},
        }
    )
    return items


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("cluster.yaml")
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": build()}
    header = "# A small example cluster for `desched simulate` (generated by examples/make_cluster.py).\n"
    out.write_text(header + yaml.safe_dump(doc, sort_keys=False))


if __name__ == "__main__":
    main()
