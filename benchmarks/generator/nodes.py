"""Node pools and shapes: which nodes the cluster has, how they drifted since their pods were
scheduled (fresh, hot, NotReady, cordoned, tainted, relabelled, a broken CNI), how many pods each
gets (its slots), and each Node object as kubectl lists it (labels, taints, capacity, conditions,
images, nodeInfo, managedFields)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from benchmarks.generator.common import (
    DAY,
    GI,
    HOUR,
    K8S_VERSION,
    MI,
    REGION,
    ZONES,
    Context,
    DaemonSetRow,
    Obj,
    Part,
    count,
    fields_v1,
    sha,
    ts,
)


@dataclass(frozen=True)
class Shape:
    instance_type: str
    cpu: int  # cores
    memory_gi: int
    arch: str = "amd64"
    gpus: int = 0


_POOL_SHAPES: dict[str, tuple[Shape, ...]] = {
    "system": (Shape("m5.xlarge", 4, 16),),
    "general": (Shape("m5.2xlarge", 8, 32), Shape("m5.4xlarge", 16, 64), Shape("m6i.4xlarge", 16, 64)),
    "arm": (Shape("m6g.2xlarge", 8, 32, "arm64"), Shape("m6g.4xlarge", 16, 64, "arm64")),
    "compute": (Shape("c5.4xlarge", 16, 32), Shape("c6i.8xlarge", 32, 64)),
    "memory": (Shape("r5.2xlarge", 8, 64), Shape("r6i.4xlarge", 16, 128)),
    "spot": (Shape("m5.2xlarge", 8, 32), Shape("m5a.4xlarge", 16, 64)),
    "gpu": (Shape("p3.8xlarge", 32, 244, gpus=4),),
    "infra": (Shape("m5.4xlarge", 16, 64),),
}
#: Share of the worker nodes per pool (the control plane is on top).
_POOL_WEIGHTS = {
    "general": 0.50,
    "arm": 0.10,
    "compute": 0.13,
    "memory": 0.11,
    "spot": 0.08,
    "gpu": 0.03,
    "infra": 0.05,
}
_MAX_PODS = 110

_NODE_IMAGES = [
    ("registry.k8s.io/kube-proxy", K8S_VERSION, 30_000_000),
    ("quay.io/calico/node", "v3.28.2", 120_000_000),
    ("quay.io/calico/cni", "v3.28.2", 90_000_000),
    ("public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver", "v1.37.0", 36_000_000),
    ("quay.io/prometheus/node-exporter", "v1.8.2", 12_000_000),
    ("cr.fluentbit.io/fluent/fluent-bit", "3.1.9", 42_000_000),
    ("registry.k8s.io/pause", "3.10", 320_000),
    ("docker.io/envoyproxy/envoy", "v1.31.2", 60_000_000),
    ("registry.k8s.io/coredns/coredns", "v1.11.3", 18_000_000),
    ("docker.io/library/redis", "7.4.1", 45_000_000),
    ("docker.io/library/nginx", "1.27.2", 70_000_000),
    ("docker.io/bitnami/kafka", "3.8.1", 250_000_000),
    ("docker.io/grafana/loki", "3.2.1", 30_000_000),
    ("docker.io/library/postgres", "16.4", 160_000_000),
    ("docker.io/library/python", "3.12-slim", 50_000_000),
    ("docker.io/library/golang", "1.23", 300_000_000),
    ("docker.io/library/eclipse-temurin", "21-jre", 190_000_000),
    ("docker.io/otel/opentelemetry-collector-contrib", "0.112.0", 90_000_000),
]


@dataclass(eq=False)
class Node:
    index: int
    name: str
    pool: str
    zone: str
    shape: Shape
    age_days: float
    weight: float = 1.0
    ready: bool = True
    cordoned: bool = False
    maintenance_taint: bool = False
    relabelled: bool = False
    broken_cni: bool = False
    fresh: bool = False
    hot: bool = False
    # capacity bookkeeping while placing pods
    alloc_cpu: int = 0  # millicores
    alloc_mem: int = 0  # bytes
    free_cpu: int = 0
    free_mem: int = 0
    free_gpu: int = 0
    pods: int = 0
    slots: int = 0
    ds_pods: int = 0

    @property
    def internal_ip(self) -> str:
        i = self.index
        return f"10.{16 + (i >> 16) % 16}.{(i >> 8) & 255}.{i & 255}"

    def next_pod_ip(self) -> str:
        i = self.index
        self.pods += 1
        return f"100.{64 + (i >> 8) % 64}.{i & 255}.{self.pods % 250 + 2}"


class NodePlan(Part):
    """The nodes, by pool, and the pod slots left on them while pods are placed."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.nodes: list[Node] = []
        self.pools: dict[str, list[Node]] = {}
        self.stacks: dict[tuple[str, str], list[Node]] = {}
        #: per pool: the request of an average pod (cpu millicores, memory bytes)
        self.cpu_per_pod: dict[str, float] = {}
        self.mem_per_pod: dict[str, float] = {}

    def plan(self, daemonsets: list[DaemonSetRow]) -> None:
        """Lay out the nodes, their drift, their pod slots and the pools' request sizes."""
        n = self.spec.nodes
        rng = self.rng
        control_plane = 1 if n < 50 else 3
        workers = n - control_plane
        counts = _split(workers, _POOL_WEIGHTS)
        plan: list[tuple[str, str]] = [("system", ZONES[i % 3]) for i in range(control_plane)]
        for pool, k in counts.items():
            for i in range(k):
                # zones a, b, c in proportion 36:34:30 (a little imbalance, as real node groups have)
                plan.append((pool, ZONES[_zone_index(i)]))
        used_ips: set[int] = set()
        for index, (pool, zone) in enumerate(plan):
            shape = rng.choice(_POOL_SHAPES[pool])
            while True:
                ip = rng.randrange(1 << 20)
                if ip not in used_ips:
                    used_ips.add(ip)
                    break
            name = f"ip-10-{32 + (ip >> 16)}-{(ip >> 8) & 255}-{ip & 255}.{REGION}.compute.internal"
            node = Node(
                index=index, name=name, pool=pool, zone=zone, shape=shape, age_days=rng.uniform(2, 200)
            )
            node.alloc_cpu = shape.cpu * 1000 - (70 if shape.cpu <= 4 else 110 + shape.cpu * 5)
            node.alloc_mem = shape.memory_gi * GI - (574 + 11 * _MAX_PODS) * MI
            node.free_cpu, node.free_mem, node.free_gpu = node.alloc_cpu, node.alloc_mem, shape.gpus
            node.weight = rng.uniform(0.65, 1.15)
            self.nodes.append(node)
            self.pools.setdefault(pool, []).append(node)

        # drift: which nodes are fresh, hot, broken, cordoned, tainted or relabelled since scheduling
        general = list(self.pools["general"])
        rng.shuffle(general)
        g = len(general)
        take = iter(general)
        for _ in range(count(0.06, g, 1)):
            node = next(take)
            node.fresh, node.weight, node.age_days = True, rng.uniform(0.0, 0.04), rng.uniform(0.02, 0.3)
        for _ in range(count(0.12, g, 1)):
            node = next(take)
            node.hot, node.weight = True, rng.uniform(1.55, 1.8)
        for _ in range(count(0.01, g, 1)):
            next(take).ready = False
        for _ in range(count(0.01, g, 1)):
            next(take).cordoned = True
        for _ in range(count(0.015, g, 1)):
            next(take).maintenance_taint = True
        for _ in range(count(0.005, g, 1)):
            next(take).broken_cni = True  # enough general nodes for all of these: MIN_NODES keeps g >= 9
        for pool in ("compute", "memory"):
            members = sorted(self.pools[pool], key=lambda nd: nd.index)
            for node in rng.sample(members, count(0.04, len(members), 1)):
                node.relabelled = True
        for pool in ("arm", "compute", "memory", "spot"):
            members = self.pools[pool]
            for node in rng.sample(members, count(0.1, len(members), 1) if len(members) > 2 else 0):
                node.hot, node.weight = True, rng.uniform(1.5, 1.75)

        # daemon set pods per node, then how many other pods each node gets (its slots)
        for node in self.nodes:
            node.ds_pods = sum(1 for *_, pool in daemonsets if pool is None or pool == node.pool)
        mirror = 4 * control_plane
        total_ds = sum(nd.ds_pods for nd in self.nodes)
        budget = max(0, n * self.spec.pods_per_node - total_ds - mirror)
        workers_list = [nd for nd in self.nodes if nd.pool != "system"]
        weights = [nd.weight * nd.shape.cpu / 8 if nd.pool != "gpu" else 0.0 for nd in workers_list]
        gpu_nodes = [nd for nd in workers_list if nd.pool == "gpu"]
        gpu_slots = sum(nd.shape.gpus for nd in gpu_nodes)
        for nd in gpu_nodes:
            nd.slots = nd.shape.gpus
        shares = _largest_remainder(budget - gpu_slots, weights)
        for nd, s in zip(workers_list, shares, strict=True):
            if nd.pool != "gpu":
                nd.slots = min(s, _MAX_PODS - nd.ds_pods - 2)

        # per-pool request sizes: fill ~45% of allocatable on an average node of the pool
        for pool, members in self.pools.items():
            slots = sum(nd.slots for nd in members)
            if pool == "system" or slots == 0:
                self.cpu_per_pod[pool] = 100.0
                self.mem_per_pod[pool] = 128.0 * MI
                continue
            ds_cpu = sum(d[3] for d in daemonsets if d[5] is None) * 1.0
            ds_mem = sum(d[4] for d in daemonsets if d[5] is None) * float(MI)
            cpu = sum(nd.alloc_cpu * nd.weight for nd in members) / len(members)
            mem = sum(nd.alloc_mem * nd.weight for nd in members) / len(members)
            per_node = slots / len(members)
            fill = 0.6 if pool == "gpu" else 0.45
            self.cpu_per_pod[pool] = max(20.0, (fill * cpu - ds_cpu) / per_node)
            self.mem_per_pod[pool] = max(32.0 * MI, (fill * mem - ds_mem) / per_node)

        for (pool, zone), stack in self._build_stacks().items():
            self.stacks[(pool, zone)] = stack

    def _build_stacks(self) -> dict[tuple[str, str], list[Node]]:
        stacks: dict[tuple[str, str], list[Node]] = {}
        for node in self.nodes:
            stacks.setdefault((node.pool, node.zone), []).extend([node] * node.slots)
        for key in sorted(stacks):
            self.rng.shuffle(stacks[key])
        return stacks

    def remaining(self, pool: str) -> int:
        return sum(len(self.stacks.get((pool, z), ())) for z in ZONES)

    def take_slot(
        self, pool: str, zone: str | None, exclude: set[int] | None, cpu: int, mem: int, gpu: int
    ) -> Node | None:
        """Pop a slot of the pool (preferring ``zone``) on a node that fits and is not excluded.

        Only the top of each (shuffled) stack is searched; None when nothing there fits.
        """
        zones = [zone] + [z for z in ZONES if z != zone] if zone else self._zones_by_remaining(pool)
        for z in zones:
            stack = self.stacks.get((pool, z))
            if not stack:
                continue
            depth = min(len(stack), 48)
            for k in range(1, depth + 1):
                node = stack[-k]
                if exclude is not None and node.index in exclude:
                    continue
                if node.free_cpu < cpu or node.free_mem < mem or node.free_gpu < gpu:
                    continue
                stack[-k] = stack[-1]
                stack.pop()
                return node
        return None

    def drop_slot(self, pool: str) -> None:
        """Consume one slot of the pool for a pod that stays Pending, so that generation always ends."""
        for z in self._zones_by_remaining(pool):
            stack = self.stacks.get((pool, z))
            if stack:
                stack.pop()
                return

    def _zones_by_remaining(self, pool: str) -> list[str]:
        sizes = [len(self.stacks.get((pool, z), ())) for z in ZONES]
        total = sum(sizes)
        if total == 0:
            return list(ZONES)
        r = self.rng.randrange(total)
        first = 0
        while r >= sizes[first]:
            r -= sizes[first]
            first += 1
        return [ZONES[first]] + [z for i, z in enumerate(ZONES) if i != first]

    def node_object(self, node: Node) -> Obj:
        rng = self.rng
        shape = node.shape
        created = ts(node.age_days * DAY)
        pool_label = f"{node.pool}-retired" if node.relabelled else node.pool
        labels: Obj = {
            "beta.kubernetes.io/arch": shape.arch,
            "beta.kubernetes.io/instance-type": shape.instance_type,
            "beta.kubernetes.io/os": "linux",
            "failure-domain.beta.kubernetes.io/region": REGION,
            "failure-domain.beta.kubernetes.io/zone": node.zone,
            "kubernetes.io/arch": shape.arch,
            "kubernetes.io/hostname": node.name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": shape.instance_type,
            "topology.ebs.csi.aws.com/zone": node.zone,
            "topology.kubernetes.io/region": REGION,
            "topology.kubernetes.io/zone": node.zone,
        }
        if node.pool == "system":
            labels["node-role.kubernetes.io/control-plane"] = ""
            labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
        else:
            labels["node-pool"] = pool_label
            labels["eks.amazonaws.com/nodegroup"] = f"prod-{node.pool}-{node.zone[-1]}"
            labels["eks.amazonaws.com/capacityType"] = "SPOT" if node.pool == "spot" else "ON_DEMAND"
            labels["lifecycle"] = "spot" if node.pool == "spot" else "on-demand"
        if node.pool == "gpu":
            labels["nvidia.com/gpu.present"] = "true"
            labels["nvidia.com/gpu.product"] = "Tesla-V100-SXM2-16GB"
        taints: list[Obj] = []
        if node.pool == "system":
            taints.append({"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"})
        if node.pool == "gpu":
            taints.append({"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"})
        if node.pool == "infra":
            taints.append({"effect": "NoSchedule", "key": "dedicated", "value": "infra"})
        if node.pool == "spot":
            taints.append({"effect": "PreferNoSchedule", "key": "spot", "value": "true"})
        if node.maintenance_taint:
            taints.append(
                {"effect": "NoSchedule", "key": "maintenance.example.com/scheduled", "value": "kernel"}
            )
        if node.cordoned:
            taints.append(
                {
                    "effect": "NoSchedule",
                    "key": "node.kubernetes.io/unschedulable",
                    "timeAdded": ts(2 * HOUR),
                }
            )
        if not node.ready:
            taints.append(
                {"effect": "NoSchedule", "key": "node.kubernetes.io/unreachable", "timeAdded": ts(40 * 60)}
            )
            taints.append(
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "timeAdded": ts(40 * 60)}
            )
        spec: Obj = {
            "podCIDR": f"100.{64 + (node.index >> 8) % 64}.{node.index & 255}.0/24",
            "podCIDRs": [f"100.{64 + (node.index >> 8) % 64}.{node.index & 255}.0/24"],
            "providerID": f"aws:///{node.zone}/i-0{self.hexid(64)[:16]}",
        }
        if taints:
            spec["taints"] = taints
        if node.cordoned:
            spec["unschedulable"] = True
        capacity: Obj = {
            "cpu": str(shape.cpu),
            "ephemeral-storage": "104845292Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": f"{shape.memory_gi * 1024 * 1024 - 400_000}Ki",
            "pods": str(_MAX_PODS),
        }
        allocatable: Obj = {
            "cpu": f"{node.alloc_cpu}m",
            "ephemeral-storage": "95551679124",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": f"{node.alloc_mem // 1024}Ki",
            "pods": str(_MAX_PODS),
        }
        if shape.gpus:
            capacity["nvidia.com/gpu"] = str(shape.gpus)
            allocatable["nvidia.com/gpu"] = str(shape.gpus)
        heartbeat = ts(rng.uniform(5, 60)) if node.ready else ts(41 * 60)
        conditions = [
            {
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": created,
                "message": "kubelet has sufficient memory available",
                "reason": "KubeletHasSufficientMemory",
                "status": "False",
                "type": "MemoryPressure",
            },
            {
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": created,
                "message": "kubelet has no disk pressure",
                "reason": "KubeletHasNoDiskPressure",
                "status": "False",
                "type": "DiskPressure",
            },
            {
                "lastHeartbeatTime": heartbeat,
                "lastTransitionTime": created,
                "message": "kubelet has sufficient PID available",
                "reason": "KubeletHasSufficientPID",
                "status": "False",
                "type": "PIDPressure",
            },
        ]
        if node.ready:
            conditions.append(
                {
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": created,
                    "message": "kubelet is posting ready status",
                    "reason": "KubeletReady",
                    "status": "True",
                    "type": "Ready",
                }
            )
        else:
            for c in conditions:
                c.update(
                    status="Unknown",
                    reason="NodeStatusUnknown",
                    message="Kubelet stopped posting node status.",
                    lastTransitionTime=ts(40 * 60),
                )
            conditions.append(
                {
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": ts(40 * 60),
                    "message": "Kubelet stopped posting node status.",
                    "reason": "NodeStatusUnknown",
                    "status": "Unknown",
                    "type": "Ready",
                }
            )
        images = [
            {"names": [f"{img}@sha256:{sha(img + tag)}", f"{img}:{tag}"], "sizeBytes": size}
            for img, tag, size in rng.sample(_NODE_IMAGES, rng.randint(8, len(_NODE_IMAGES)))
        ]
        node_info = {
            "architecture": shape.arch,
            "bootID": self.uid(),
            "containerRuntimeVersion": "containerd://1.7.23",
            "kernelVersion": "6.1.115-126.197.amzn2023.x86_64"
            if shape.arch == "amd64"
            else "6.1.115-126.197.amzn2023.aarch64",
            "kubeProxyVersion": K8S_VERSION,
            "kubeletVersion": K8S_VERSION,
            "machineID": self.hexid(128),
            "operatingSystem": "linux",
            "osImage": "Amazon Linux 2023.6.20241121",
            "systemUUID": f"ec2{self.hexid(128)[3:]}",
        }
        metadata: Obj = {
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": node.internal_ip,
                "csi.volume.kubernetes.io/nodeid": json.dumps(
                    {"ebs.csi.aws.com": f"i-0{self.hexid(64)[:16]}"}
                ),
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": created,
            "labels": labels,
            "managedFields": [
                {
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1(
                        {
                            "metadata": {
                                "annotations": {"alpha.kubernetes.io/provided-node-ip": ""},
                                "labels": labels,
                            },
                            "spec": {"providerID": ""},
                        }
                    ),
                    "manager": "kubelet",
                    "operation": "Update",
                    "time": created,
                },
                {
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1(
                        {"spec": {"podCIDR": "", "podCIDRs": [""], "taints": taints or [""]}}
                    ),
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "time": ts(rng.uniform(60, 3600)),
                },
                {
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1(
                        {
                            "status": {
                                "allocatable": allocatable,
                                "capacity": capacity,
                                "conditions": conditions,
                                "images": [""],
                                "nodeInfo": node_info,
                            }
                        }
                    ),
                    "manager": "kubelet",
                    "operation": "Update",
                    "subresource": "status",
                    "time": heartbeat,
                },
            ],
            "name": node.name,
            "resourceVersion": str(rng.randrange(10**8, 10**9)),
            "uid": self.uid(),
        }
        self.stats.add("Node")
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": metadata,
            "spec": spec,
            "status": {
                "addresses": [
                    {"address": node.internal_ip, "type": "InternalIP"},
                    {"address": node.name, "type": "InternalDNS"},
                    {"address": node.name, "type": "Hostname"},
                ],
                "allocatable": allocatable,
                "capacity": capacity,
                "conditions": conditions,
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": images,
                "nodeInfo": node_info,
            },
        }


def _zone_index(i: int) -> int:
    """Zones a, b, c in turn, with zone a a little bigger (as real node groups drift)."""
    return 0 if i % 17 == 16 else i % 3


def _split(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Split ``total`` by ``weights`` (largest remainder), giving every share at least one when possible."""
    names = list(weights)
    counts = dict(zip(names, _largest_remainder(total, [weights[n] for n in names]), strict=True))
    for name in names:
        if counts[name] == 0 and total >= 2 * len(names):
            donor = max(names, key=lambda n: counts[n])
            counts[donor] -= 1
            counts[name] += 1
    return counts


def _largest_remainder(total: int, weights: list[float]) -> list[int]:
    s = sum(weights)
    if s <= 0 or total <= 0:
        return [0] * len(weights)
    raw = [total * w / s for w in weights]
    out = [int(x) for x in raw]
    rest = total - sum(out)
    order = sorted(range(len(weights)), key=lambda i: (-(raw[i] - out[i]), i))
    for i in order[:rest]:
        out[i] += 1
    return out
