"""A realistic, deterministic cluster snapshot generator for benchmarks (and tests).

``generate(ClusterSpec(nodes=1000, pods_per_node=30, seed=1))`` yields the objects of a cluster as
``kubectl get namespaces,priorityclasses,nodes,pods,poddisruptionbudgets,persistentvolumeclaims,
events -A -o json`` would list them; :func:`write_snapshot` writes them as the v1 ``List`` kubectl
prints (compact, as the API server sends it; ``pretty=True`` indents like kubectl), with the noise
real objects carry (managedFields, conditions, env, probes, node images: a pod is 6-8 KB), so that
decode cost is realistic; :func:`cached_snapshot` keeps one file per (size, seed, generator
version) under ``${XDG_CACHE_HOME:-~/.cache}/desched/bench/``.

The cluster is shaped like a real multi-team production cluster, so that every in-tree plugin has
work and every index and check is exercised:

- node pools of several instance shapes (general amd64, arm64, compute, memory, spot, GPU,
  dedicated infra, control plane) over three zones, with the noise kubectl prints (images,
  nodeInfo, managedFields, conditions with heartbeats);
- DaemonSets on every node, control-plane mirror pods, system Deployments, team Deployments and
  StatefulSets (with PVCs and PDBs), Jobs from CronJobs, preview environments, bare pods;
- requests and limits sized per pool from the nodes' allocatable, init containers and sidecars,
  env, probes, volumes, security contexts, managedFields and status conditions;
- node selectors, required and preferred node affinity, required and preferred pod
  (anti-)affinity, topology spread constraints, taints and tolerations, priority classes;
- drift that makes the descheduler's plugins act: node pools relabelled after scheduling
  (RemovePodsViolatingNodeAffinity), nodes cordoned, NotReady or tainted after scheduling
  (RemovePodsViolatingNodeTaints), anti-affine replicas sharing a node
  (RemovePodsViolatingInterPodAntiAffinity), replicas of one ReplicaSet sharing a node
  (RemoveDuplicates), zone-skewed spread (RemovePodsViolatingTopologySpreadConstraint), fresh
  near-empty nodes next to hot ones (LowNodeUtilization, HighNodeUtilization), old preview pods
  (PodLifeTime), failed and evicted pods (RemoveFailedPods), crash-looping pods
  (RemovePodsHavingTooManyRestarts), and a node whose CNI broke, where new pods sit in
  ContainerCreating with FailedCreatePodSandBox events (RemoveAnomalyPods).

Everything is drawn from one ``random.Random(seed)``, so a spec always gives the same bytes.
``python -m benchmarks.generator --nodes 50 -o cluster.json`` writes one snapshot.
"""

from __future__ import annotations

import argparse
import calendar
import hashlib
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

#: Bump whenever the output for a given spec changes: it keys the snapshot cache.
GENERATOR_VERSION = 1

#: Also in the cache key, so that editing the generator never serves a stale snapshot.
_SOURCE_HASH = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:8]

#: The generated cluster's "now"; run cycles on it with this clock (``desched simulate --now``).
NOW = "2026-11-21T12:00:00Z"
_NOW_EPOCH = calendar.timegm(time.strptime(NOW, "%Y-%m-%dT%H:%M:%SZ"))

MIN_NODES = 20
REGION = "eu-west-1"
ZONES = (f"{REGION}a", f"{REGION}b", f"{REGION}c")
K8S_VERSION = "v1.31.4"

Obj = dict[str, Any]

_DAY = 86400
_HOUR = 3600
_MI = 1024 * 1024
_GI = 1024 * _MI
_HASH_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes uses for generated names
_HEX = "0123456789abcdef"


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int
    pods_per_node: int = 30
    seed: int = 1

    def __post_init__(self) -> None:
        if self.nodes < MIN_NODES:
            raise ValueError(f"nodes must be at least {MIN_NODES}, got {self.nodes}")
        if not 8 <= self.pods_per_node <= 100:
            raise ValueError(f"pods_per_node must be in [8, 100], got {self.pods_per_node}")

    @property
    def cache_name(self) -> str:
        size = f"n{self.nodes}-ppn{self.pods_per_node}-s{self.seed}"
        return f"cluster-{size}-g{GENERATOR_VERSION}-{_SOURCE_HASH}.json"


@dataclass
class GenerationStats:
    """What was generated, by kind (and the byte size once written)."""

    counts: dict[str, int] = field(default_factory=dict)
    pod_bytes: int = 0
    total_bytes: int = 0

    def add(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1


def ts(age_seconds: float) -> str:
    """The RFC 3339 time ``age_seconds`` before :data:`NOW`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_NOW_EPOCH - int(age_seconds)))


# ============================================================================ nodes


@dataclass(frozen=True)
class _Shape:
    instance_type: str
    cpu: int  # cores
    memory_gi: int
    arch: str = "amd64"
    gpus: int = 0


_POOL_SHAPES: dict[str, tuple[_Shape, ...]] = {
    "system": (_Shape("m5.xlarge", 4, 16),),
    "general": (_Shape("m5.2xlarge", 8, 32), _Shape("m5.4xlarge", 16, 64), _Shape("m6i.4xlarge", 16, 64)),
    "arm": (_Shape("m6g.2xlarge", 8, 32, "arm64"), _Shape("m6g.4xlarge", 16, 64, "arm64")),
    "compute": (_Shape("c5.4xlarge", 16, 32), _Shape("c6i.8xlarge", 32, 64)),
    "memory": (_Shape("r5.2xlarge", 8, 64), _Shape("r6i.4xlarge", 16, 128)),
    "spot": (_Shape("m5.2xlarge", 8, 32), _Shape("m5a.4xlarge", 16, 64)),
    "gpu": (_Shape("p3.8xlarge", 32, 244, gpus=4),),
    "infra": (_Shape("m5.4xlarge", 16, 64),),
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
class _Node:
    index: int
    name: str
    pool: str
    zone: str
    shape: _Shape
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


# ============================================================================ workloads


_TEAMS = [
    "payments",
    "checkout",
    "search",
    "catalog",
    "identity",
    "orders",
    "shipping",
    "pricing",
    "recommendations",
    "notifications",
    "analytics",
    "fraud",
    "inventory",
    "billing",
    "media",
    "messaging",
    "growth",
    "ads",
    "maps",
    "support",
    "platform-apps",
    "data-eng",
    "ml-serving",
    "partners",
]
_NOUNS = [
    "api",
    "worker",
    "gateway",
    "frontend",
    "backend",
    "consumer",
    "scheduler",
    "sync",
    "indexer",
    "renderer",
    "proxy",
    "cache",
    "router",
    "aggregator",
    "exporter",
    "processor",
    "webhook",
    "bff",
    "auth",
    "ledger",
    "stream",
    "feed",
    "ranker",
    "resolver",
]
_ADJ = [
    "order",
    "user",
    "cart",
    "price",
    "stock",
    "event",
    "email",
    "sms",
    "report",
    "image",
    "video",
    "search",
    "session",
    "quote",
    "invoice",
    "refund",
    "profile",
    "rating",
    "tracking",
    "geo",
    "audit",
    "config",
    "feature",
    "token",
]
_LANG_IMAGES = [
    "eclipse-temurin:21-jre",
    "python:3.12-slim",
    "golang:1.23",
    "node:22-alpine",
    "distroless/static:nonroot",
]
_JOB_NAMES = [
    "nightly-report",
    "db-backup",
    "cache-warmup",
    "etl-orders",
    "etl-events",
    "invoice-run",
    "cleanup-sessions",
    "sitemap-build",
    "model-retrain",
    "e2e-tests",
    "lint",
    "unit-tests",
    "integration-tests",
    "image-scan",
    "dependency-audit",
]

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


@dataclass
class _Workload:
    kind: str  # Deployment | StatefulSet | Job | Pod | DaemonSet
    namespace: str
    name: str
    pool: str
    replicas: int
    app: str
    team: str
    cpu_m: int
    mem: int
    priority_class: str = "default-priority"
    image: str = ""
    sidecar: bool = False
    init: bool = False
    gpu: int = 0
    limits: str = "burstable"  # guaranteed | burstable | none
    empty_dir: bool = False
    pvc: bool = False
    node_selector: dict[str, str] | None = None
    required_pool: str | None = None
    required_gpu: bool = False
    preferred_zone: str | None = None
    preferred_spot: bool = False
    anti_affinity: str | None = None  # required | preferred
    pod_affinity_to: str | None = None  # app label of pods to be near (preferred)
    tsc_zone: bool = False
    tsc_host: bool = False
    skew: bool = False  # place the zone-spread replicas unevenly
    duplicates: bool = False  # let replicas share nodes
    anti_violation: bool = False  # put two anti-affine replicas on one node
    tolerations: list[Obj] = field(default_factory=list)
    pdb: bool = False
    age_days: float = 100.0
    pod_age_days: tuple[float, float] = (0.5, 30.0)
    job_states: bool = False  # Succeeded/Failed/Running mix
    restart_policy: str = "Always"
    ports: bool = True
    probes: bool = True
    rollout: bool = False  # mid-rollout: two ReplicaSets


_DEFAULT_TOLERATIONS: list[Obj] = [
    {
        "effect": "NoExecute",
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "tolerationSeconds": 300,
    },
    {
        "effect": "NoExecute",
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "tolerationSeconds": 300,
    },
]
_DS_TOLERATIONS: list[Obj] = [
    {"operator": "Exists"},
    {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists"},
    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node.kubernetes.io/disk-pressure", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node.kubernetes.io/memory-pressure", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node.kubernetes.io/pid-pressure", "operator": "Exists"},
    {"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", "operator": "Exists"},
]

_DAEMONSETS: list[tuple[str, str, str, int, int, str | None]] = [
    # namespace, name, image, cpu m, memory Mi, pool (None = every node)
    ("kube-system", "kube-proxy", f"registry.k8s.io/kube-proxy:{K8S_VERSION}", 100, 128, None),
    ("kube-system", "calico-node", "quay.io/calico/node:v3.28.2", 250, 256, None),
    ("monitoring", "node-exporter", "quay.io/prometheus/node-exporter:v1.8.2", 50, 64, None),
    ("logging", "fluent-bit", "cr.fluentbit.io/fluent/fluent-bit:3.1.9", 100, 200, None),
    ("kube-system", "ebs-csi-node", "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.37.0", 30, 64, None),
    ("kube-system", "nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.16.2", 50, 64, "gpu"),
]


# ============================================================================ the generator


class _Generator:
    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.nodes: list[_Node] = []
        self.pools: dict[str, list[_Node]] = {}
        self.stacks: dict[tuple[str, str], list[_Node]] = {}
        self.namespaces: dict[str, Obj] = {}
        self.pdbs: list[Obj] = []
        self.pvcs: list[Obj] = []
        self.events: list[Obj] = []
        self.used_names: set[tuple[str, str]] = set()
        #: (namespace, name) of the pods with a random suffix, see :meth:`pod_name`
        self.pod_names: set[tuple[str, str]] = set()
        self.cpu_per_pod: dict[str, float] = {}
        self.mem_per_pod: dict[str, float] = {}
        self.n_teams = max(3, spec.nodes // 25)
        self.teams = [
            _TEAMS[i % len(_TEAMS)] + ("" if i < len(_TEAMS) else f"-{i // len(_TEAMS) + 1}")
            for i in range(self.n_teams)
        ]
        self.stats = GenerationStats()
        #: drift every cluster gets at least this much of, however small, so every plugin has work
        self.min_left = {"preview": 2, "bare": 1, "crashloop": 3, "anti_violation": 2}

    # ------------------------------------------------------------------ helpers

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def suffix(self, k: int = 5) -> str:
        return "".join(self.rng.choices(_HASH_CHARS, k=k))

    def pod_name(self, namespace: str, prefix: str) -> str:
        """``prefix-<5 random characters>``, drawn again while the namespace has a pod of that
        name (27^5 suffixes: 5,000 DaemonSet pods collide about once, and the API server
        refuses a duplicate); a first draw that is free changes nothing in the output."""
        name = f"{prefix}-{self.suffix()}"
        while (namespace, name) in self.pod_names:
            name = f"{prefix}-{self.suffix()}"
        self.pod_names.add((namespace, name))
        return name

    def hexid(self, bits: int = 256) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def count(self, rate: float, base: int, minimum: int) -> int:
        return max(minimum, round(rate * base))

    # ------------------------------------------------------------------ top level

    def generate(self) -> Iterator[Obj]:
        self._plan_nodes()
        self._plan_namespaces()
        for obj in self._namespace_objects():
            yield obj
        for obj in self._priority_class_objects():
            yield obj
        for node in self.nodes:
            yield self._node_object(node)
        yield from self._pods()
        yield from self.pdbs
        yield from self.pvcs
        yield from self.events

    # ------------------------------------------------------------------ nodes

    def _plan_nodes(self) -> None:
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
            node = _Node(
                index=index, name=name, pool=pool, zone=zone, shape=shape, age_days=rng.uniform(2, 200)
            )
            node.alloc_cpu = shape.cpu * 1000 - (70 if shape.cpu <= 4 else 110 + shape.cpu * 5)
            node.alloc_mem = shape.memory_gi * _GI - (574 + 11 * _MAX_PODS) * _MI
            node.free_cpu, node.free_mem, node.free_gpu = node.alloc_cpu, node.alloc_mem, shape.gpus
            node.weight = rng.uniform(0.65, 1.15)
            self.nodes.append(node)
            self.pools.setdefault(pool, []).append(node)

        # drift: which nodes are fresh, hot, broken, cordoned, tainted or relabelled since scheduling
        general = list(self.pools["general"])
        rng.shuffle(general)
        g = len(general)
        take = iter(general)
        for _ in range(self.count(0.06, g, 1)):
            node = next(take)
            node.fresh, node.weight, node.age_days = True, rng.uniform(0.0, 0.04), rng.uniform(0.02, 0.3)
        for _ in range(self.count(0.12, g, 1)):
            node = next(take)
            node.hot, node.weight = True, rng.uniform(1.55, 1.8)
        for _ in range(self.count(0.01, g, 1)):
            next(take).ready = False
        for _ in range(self.count(0.01, g, 1)):
            next(take).cordoned = True
        for _ in range(self.count(0.015, g, 1)):
            next(take).maintenance_taint = True
        for _ in range(self.count(0.005, g, 1)):
            next(take).broken_cni = True  # enough general nodes for all of these: MIN_NODES keeps g >= 9
        for pool in ("compute", "memory"):
            members = sorted(self.pools[pool], key=lambda nd: nd.index)
            for node in rng.sample(members, self.count(0.04, len(members), 1)):
                node.relabelled = True
        for pool in ("arm", "compute", "memory", "spot"):
            members = self.pools[pool]
            for node in rng.sample(members, self.count(0.1, len(members), 1) if len(members) > 2 else 0):
                node.hot, node.weight = True, rng.uniform(1.5, 1.75)

        # daemon set pods per node, then how many other pods each node gets (its slots)
        daemonsets = self._daemonsets()
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
                self.mem_per_pod[pool] = 128.0 * _MI
                continue
            ds_cpu = sum(d[3] for d in self._daemonsets() if d[5] is None) * 1.0
            ds_mem = sum(d[4] for d in self._daemonsets() if d[5] is None) * float(_MI)
            cpu = sum(nd.alloc_cpu * nd.weight for nd in members) / len(members)
            mem = sum(nd.alloc_mem * nd.weight for nd in members) / len(members)
            per_node = slots / len(members)
            fill = 0.6 if pool == "gpu" else 0.45
            self.cpu_per_pod[pool] = max(20.0, (fill * cpu - ds_cpu) / per_node)
            self.mem_per_pod[pool] = max(32.0 * _MI, (fill * mem - ds_mem) / per_node)

        for (pool, zone), stack in self._build_stacks().items():
            self.stacks[(pool, zone)] = stack

    def _daemonsets(self) -> list[tuple[str, str, str, int, int, str | None]]:
        every_node = [d for d in _DAEMONSETS if d[5] is None]
        keep = max(1, min(len(every_node), self.spec.pods_per_node // 6))
        return every_node[:keep] + [d for d in _DAEMONSETS if d[5] is not None]

    def _build_stacks(self) -> dict[tuple[str, str], list[_Node]]:
        stacks: dict[tuple[str, str], list[_Node]] = {}
        for node in self.nodes:
            stacks.setdefault((node.pool, node.zone), []).extend([node] * node.slots)
        for key in sorted(stacks):
            self.rng.shuffle(stacks[key])
        return stacks

    def remaining(self, pool: str) -> int:
        return sum(len(self.stacks.get((pool, z), ())) for z in ZONES)

    def take_slot(
        self, pool: str, zone: str | None, exclude: set[int] | None, cpu: int, mem: int, gpu: int
    ) -> _Node | None:
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

    def _node_object(self, node: _Node) -> Obj:
        rng = self.rng
        shape = node.shape
        created = ts(node.age_days * _DAY)
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
                    "timeAdded": ts(2 * _HOUR),
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
            {"names": [f"{img}@sha256:{_sha(img + tag)}", f"{img}:{tag}"], "sizeBytes": size}
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
                    "fieldsV1": _fields_v1(
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
                    "fieldsV1": _fields_v1(
                        {"spec": {"podCIDR": "", "podCIDRs": [""], "taints": taints or [""]}}
                    ),
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "time": ts(rng.uniform(60, 3600)),
                },
                {
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": _fields_v1(
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

    # ------------------------------------------------------------------ namespaces, classes

    def _plan_namespaces(self) -> None:
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
        names += [f"{team}-prod" for team in self.teams]
        names += [f"{team}-staging" for team in self.teams[: max(1, self.n_teams // 3)]]
        for name in names:
            team = name.rsplit("-", 1)[0] if name.endswith(("-prod", "-staging")) else "platform"
            env = "prod" if name.endswith("-prod") else "staging" if name.endswith("-staging") else "shared"
            self.namespaces[name] = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "creationTimestamp": ts(self.rng.uniform(200, 700) * _DAY),
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

    def _namespace_objects(self) -> Iterator[Obj]:
        for obj in self.namespaces.values():
            self.stats.add("Namespace")
            yield obj

    def _priority_class_objects(self) -> Iterator[Obj]:
        for name, value, default, preemption, description in _PRIORITY_CLASSES:
            obj: Obj = {
                "apiVersion": "scheduling.k8s.io/v1",
                "description": description,
                "kind": "PriorityClass",
                "metadata": {
                    "creationTimestamp": ts(700 * _DAY),
                    "generation": 1,
                    "name": name,
                    "resourceVersion": str(self.rng.randrange(100, 10**5)),
                    "uid": self.uid(),
                },
                "preemptionPolicy": preemption,
                "value": value,
            }
            if default:
                obj["globalDefault"] = True
            self.stats.add("PriorityClass")
            yield obj

    # ------------------------------------------------------------------ workloads

    def _name(self, namespace: str, base: str) -> str:
        name = base
        i = 2
        while (namespace, name) in self.used_names:
            name = f"{base}-{i}"
            i += 1
        self.used_names.add((namespace, name))
        return name

    def _size(self, pool: str, tier: float) -> tuple[int, int]:
        cpu = max(10, int(self.cpu_per_pod[pool] * tier / 10) * 10)
        mem = max(32, int(self.mem_per_pod[pool] * tier / _MI / 16) * 16) * _MI
        return cpu, mem

    def _tier(self) -> float:
        # log-normal-ish request sizes with mean ~1: many small pods, a few big ones
        return self.rng.choice((0.25, 0.4, 0.5, 0.7, 0.8, 1.0, 1.0, 1.2, 1.5, 2.0, 2.5))

    def _replicas(self, hi: int) -> int:
        r = self.rng.random()
        if r < 0.35:
            n = self.rng.randint(1, 2)
        elif r < 0.75:
            n = self.rng.randint(3, 6)
        elif r < 0.93:
            n = self.rng.randint(7, 20)
        else:
            n = self.rng.randint(21, 80)
        return max(1, min(n, hi))

    def _team_workload(self, pool: str, hi: int) -> _Workload:
        rng = self.rng
        team = rng.choice(self.teams)
        staging = f"{team}-staging"
        namespace = staging if staging in self.namespaces and rng.random() < 0.2 else f"{team}-prod"
        base = f"{rng.choice(_ADJ)}-{rng.choice(_NOUNS)}"
        kind = "StatefulSet" if pool == "memory" and rng.random() < 0.4 else "Deployment"
        if pool == "general" and rng.random() < 0.04:
            kind = "StatefulSet"
        replicas = self._replicas(hi) if kind == "Deployment" else min(hi, rng.choice((3, 3, 3, 5)))
        cpu, mem = self._size(pool, self._tier())
        w = _Workload(
            kind=kind,
            namespace=namespace,
            name=self._name(namespace, base),
            pool=pool,
            replicas=replicas,
            app=base,
            team=team,
            cpu_m=cpu,
            mem=mem,
        )
        w.image = (
            f"123456789012.dkr.ecr.{REGION}.amazonaws.com/{team}/{base}:"
            f"v{rng.randint(1, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 20)}"
        )
        w.priority_class = rng.choices(["default-priority", "high-priority", ""], (0.6, 0.3, 0.1))[0]
        w.sidecar = namespace.endswith("-prod") and rng.random() < 0.25
        w.init = rng.random() < 0.1
        w.limits = rng.choices(["burstable", "guaranteed", "none"], (0.65, 0.25, 0.1))[0]
        w.empty_dir = rng.random() < 0.3
        w.age_days = rng.uniform(10, 700)
        w.pod_age_days = (0.05, min(60.0, w.age_days))
        w.tolerations = list(_DEFAULT_TOLERATIONS)
        if kind == "StatefulSet":
            w.pvc = True
            w.anti_affinity = "required"
            w.pdb = True
            w.duplicates = False
        else:
            w.pdb = replicas >= 2 and rng.random() < 0.45
            w.duplicates = rng.random() < 0.07
            a = rng.random()
            if a < 0.10 and replicas >= 2:
                w.anti_affinity = "required"
            elif a < 0.35:
                w.anti_affinity = "preferred"
            if replicas >= 3 and rng.random() < 0.3:
                w.tsc_zone = True
                w.skew = rng.random() < 0.25
                w.tsc_host = rng.random() < 0.3
            w.rollout = replicas >= 4 and rng.random() < 0.04
        if w.anti_affinity == "required" and replicas >= 2:
            w.anti_violation = rng.random() < 0.06
            w.duplicates = False
        if pool == "general":
            if rng.random() < 0.3:
                w.preferred_zone = rng.choice(ZONES)
            if rng.random() < 0.05:
                w.pod_affinity_to = "redis"
        elif pool == "arm":
            w.node_selector = {"kubernetes.io/arch": "arm64"}
        elif pool in ("compute", "memory"):
            w.required_pool = pool
        elif pool == "spot":
            w.preferred_spot = True
            w.tolerations.append(
                {"effect": "NoSchedule", "key": "spot", "operator": "Equal", "value": "true"}
            )
        if pool == "memory":
            w.app = rng.choice(("redis", "memcached", "elasticsearch", "clickhouse", base))
            if w.app != base:
                w.image = {
                    "redis": "docker.io/library/redis:7.4.1",
                    "memcached": "docker.io/library/memcached:1.6",
                    "elasticsearch": "docker.elastic.co/elasticsearch/elasticsearch:8.15.3",
                    "clickhouse": "docker.io/clickhouse/clickhouse-server:24.8",
                }[w.app]
        return w

    def _special_workload(self, pool: str, hi: int) -> _Workload | None:
        """Preview environments, bare pods, jobs: the less common shapes, by pool."""
        rng = self.rng
        r = rng.random()
        forced = False
        if pool == "general" and self.min_left["preview"] > 0:
            self.min_left["preview"] -= 1
            r, forced = 0.0, True
        elif pool == "general" and self.min_left["bare"] > 0:
            self.min_left["bare"] -= 1
            r = 0.07
        if pool == "general" and r < 0.06:
            namespace = rng.choice(("preview", "sandbox"))
            base = f"pr-{rng.randint(1000, 9999)}-{rng.choice(_ADJ)}-{rng.choice(_NOUNS)}"
            cpu, mem = self._size(pool, 0.5)
            w = _Workload(
                kind="Deployment",
                namespace=namespace,
                name=self._name(namespace, base),
                pool=pool,
                replicas=min(hi, rng.choice((1, 2, 2, 3))),
                app=base,
                team=rng.choice(self.teams),
                cpu_m=cpu,
                mem=mem,
                priority_class="preview-low",
                limits="burstable",
            )
            w.image = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/previews/{base}:sha-{self.hexid(32)[:7]}"
            w.age_days = rng.uniform(10 if forced else 1, 45)
            w.pod_age_days = (w.age_days * 0.5, w.age_days)
            w.tolerations = list(_DEFAULT_TOLERATIONS)
            return w
        if pool == "general" and r < 0.075:
            namespace = "sandbox"
            base = f"debug-{rng.choice(('shell', 'netshoot', 'curl', 'psql', 'toolbox'))}-{self.suffix()}"
            cpu, mem = self._size(pool, 0.25)
            w = _Workload(
                kind="Pod",
                namespace=namespace,
                name=self._name(namespace, base),
                pool=pool,
                replicas=1,
                app=base,
                team="platform",
                cpu_m=cpu,
                mem=mem,
                priority_class="",
                limits="none",
                ports=False,
                probes=False,
            )
            w.image = "docker.io/nicolaka/netshoot:v0.13"
            w.age_days = rng.uniform(0.1, 90)
            w.pod_age_days = (w.age_days, w.age_days)
            w.tolerations = list(_DEFAULT_TOLERATIONS)
            return w
        if (pool == "spot" and r < 0.55) or (pool == "general" and r < 0.10):
            namespace = rng.choice(("batch", "ci", "data-platform"))
            cron = rng.choice(_JOB_NAMES)
            job = self._name(namespace, f"{cron}-{29_000_000 + rng.randrange(900_000)}")
            cpu, mem = self._size(pool, rng.choice((0.5, 1.0, 2.0)))
            w = _Workload(
                kind="Job",
                namespace=namespace,
                name=job,
                pool=pool,
                replicas=min(hi, rng.choice((1, 1, 1, 2, 3, 5))),
                app=cron,
                team="platform",
                cpu_m=cpu,
                mem=mem,
                priority_class="batch-low",
                limits="guaranteed",
                restart_policy=rng.choice(("Never", "OnFailure")),
                job_states=True,
                ports=False,
                probes=False,
                empty_dir=rng.random() < 0.5,
            )
            w.image = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/jobs/{cron}:{self.hexid(32)[:7]}"
            w.age_days = rng.uniform(0.05, 3)
            w.pod_age_days = (w.age_days, w.age_days)
            w.tolerations = list(_DEFAULT_TOLERATIONS)
            if pool == "spot":
                w.preferred_spot = True
                w.tolerations.append({"effect": "NoSchedule", "key": "spot", "operator": "Exists"})
            return w
        return None

    def _gpu_workload(self, hi: int) -> _Workload:
        rng = self.rng
        base = f"{rng.choice(('llm', 'embedding', 'vision', 'ranker', 'asr'))}-inference"
        namespace = "ml-serving"
        w = _Workload(
            kind="Deployment",
            namespace=namespace,
            name=self._name(namespace, base),
            pool="gpu",
            replicas=min(hi, rng.randint(1, 8)),
            app=base,
            team="ml-serving",
            cpu_m=0,
            mem=0,
            priority_class="high-priority",
            limits="guaranteed",
            gpu=1,
        )
        w.cpu_m, w.mem = self._size("gpu", rng.choice((0.8, 1.0, 1.2)))
        w.image = f"nvcr.io/nvidia/tritonserver:24.{rng.randint(1, 10):02d}-py3"
        w.required_gpu = True
        w.tolerations = [
            *_DEFAULT_TOLERATIONS,
            {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
        ]
        w.tsc_zone = w.replicas >= 3
        w.pdb = w.replicas >= 2
        w.age_days = rng.uniform(5, 200)
        w.pod_age_days = (0.2, min(30.0, w.age_days))
        return w

    _INFRA = [
        ("monitoring", "prometheus", "StatefulSet", "quay.io/prometheus/prometheus:v2.55.1", 3.0),
        ("monitoring", "alertmanager", "StatefulSet", "quay.io/prometheus/alertmanager:v0.27.0", 0.3),
        ("monitoring", "thanos-store", "StatefulSet", "quay.io/thanos/thanos:v0.36.1", 1.5),
        ("monitoring", "grafana", "Deployment", "docker.io/grafana/grafana:11.3.0", 0.5),
        (
            "monitoring",
            "kube-state-metrics",
            "Deployment",
            "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.13.0",
            0.5,
        ),
        ("logging", "loki-ingester", "StatefulSet", "docker.io/grafana/loki:3.2.1", 1.5),
        ("logging", "loki-querier", "Deployment", "docker.io/grafana/loki:3.2.1", 1.0),
        (
            "ingress-nginx",
            "ingress-nginx-controller",
            "Deployment",
            "registry.k8s.io/ingress-nginx/controller:v1.11.3",
            1.0,
        ),
        ("data-platform", "kafka", "StatefulSet", "docker.io/bitnami/kafka:3.8.1", 2.0),
        ("data-platform", "zookeeper", "StatefulSet", "docker.io/bitnami/zookeeper:3.9.3", 0.5),
        (
            "cert-manager",
            "cert-manager",
            "Deployment",
            "quay.io/jetstack/cert-manager-controller:v1.16.1",
            0.3,
        ),
        (
            "cert-manager",
            "cert-manager-webhook",
            "Deployment",
            "quay.io/jetstack/cert-manager-webhook:v1.16.1",
            0.2,
        ),
    ]

    def _infra_workload(self, hi: int, k: int) -> _Workload:
        rng = self.rng
        namespace, base, kind, image, tier = self._INFRA[k % len(self._INFRA)]
        if k >= len(self._INFRA):
            base = f"{base}-shard-{k // len(self._INFRA)}"
        cpu, mem = self._size("infra", tier)
        replicas = min(hi, rng.choice((2, 3, 3, 5)) if kind == "StatefulSet" else rng.randint(2, 6))
        w = _Workload(
            kind=kind,
            namespace=namespace,
            name=self._name(namespace, base),
            pool="infra",
            replicas=replicas,
            app=base,
            team="platform",
            cpu_m=cpu,
            mem=mem,
            priority_class="platform-critical",
            image=image,
            limits="burstable",
        )
        w.node_selector = {"node-pool": "infra"}
        w.tolerations = [
            *_DEFAULT_TOLERATIONS,
            {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "infra"},
        ]
        w.anti_affinity = "required" if kind == "StatefulSet" or base.startswith("ingress") else "preferred"
        w.anti_violation = w.anti_affinity == "required" and replicas >= 2 and rng.random() < 0.1
        w.tsc_zone = replicas >= 3 and rng.random() < 0.5
        w.skew = w.tsc_zone and rng.random() < 0.3
        w.pvc = kind == "StatefulSet"
        w.pdb = replicas >= 2
        w.age_days = rng.uniform(100, 700)
        w.pod_age_days = (0.5, 40.0)
        return w

    def _system_workloads(self) -> list[_Workload]:
        n = self.spec.nodes
        out = []
        for base, replicas, image, cpu, mem_mi, anti in [
            (
                "coredns",
                max(2, min(40, n // 60)),
                "registry.k8s.io/coredns/coredns:v1.11.3",
                100,
                70,
                "preferred",
            ),
            (
                "metrics-server",
                2,
                "registry.k8s.io/metrics-server/metrics-server:v0.7.2",
                100,
                200,
                "required",
            ),
            (
                "cluster-autoscaler",
                1,
                "registry.k8s.io/autoscaling/cluster-autoscaler:v1.31.0",
                100,
                600,
                None,
            ),
            (
                "ebs-csi-controller",
                2,
                "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.37.0",
                60,
                240,
                "preferred",
            ),
        ]:
            w = _Workload(
                kind="Deployment",
                namespace="kube-system",
                name=self._name("kube-system", base),
                pool="general",
                replicas=replicas,
                app=base,
                team="platform",
                cpu_m=cpu,
                mem=mem_mi * _MI,
                priority_class="system-cluster-critical",
                image=image,
                limits="burstable",
                anti_affinity=anti,
                pdb=replicas >= 2,
            )
            w.tolerations = [
                *_DEFAULT_TOLERATIONS,
                {"key": "CriticalAddonsOnly", "operator": "Exists"},
                {"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane"},
            ]
            w.tsc_zone = base == "coredns" and replicas >= 3
            w.age_days = 700
            w.pod_age_days = (1, 120)
            out.append(w)
        return out

    def _workloads(self) -> Iterator[_Workload]:
        """Every Deployment, StatefulSet, Job and bare pod, pool by pool, until the pool's slots are used."""
        yield from self._system_workloads()
        for pool in ("infra", "gpu", "memory", "compute", "arm", "spot", "general"):
            k = 0
            while True:
                hi = self.remaining(pool)
                if hi <= 0:
                    break
                if pool == "infra":
                    w = self._infra_workload(hi, k)
                elif pool == "gpu":
                    w = self._gpu_workload(hi)
                else:
                    w = self._special_workload(pool, hi) or self._team_workload(pool, hi)
                k += 1
                yield w

    # ------------------------------------------------------------------ pods

    def _pods(self) -> Iterator[Obj]:
        for node in self.nodes:
            if node.pool == "system":
                yield from self._mirror_pods(node)
        for ds in self._daemonsets():
            yield from self._daemonset_pods(*ds)
        for w in self._workloads():
            yield from self._workload_pods(w)

    def _emit(self, pod: Obj) -> Obj:
        self.stats.add("Pod")
        return pod

    def _mirror_pods(self, node: _Node) -> Iterator[Obj]:
        for comp, cpu in (
            ("etcd", 100),
            ("kube-apiserver", 250),
            ("kube-controller-manager", 200),
            ("kube-scheduler", 100),
        ):
            name = f"{comp}-{node.name}"
            image = f"registry.k8s.io/{comp}:{'3.5.15-0' if comp == 'etcd' else K8S_VERSION}"
            created = ts(node.age_days * _DAY)
            container = {
                "command": [comp, f"--advertise-address={node.internal_ip}", "--v=2"],
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "name": comp,
                "resources": {"requests": {"cpu": f"{cpu}m"}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "livenessProbe": {
                    "failureThreshold": 8,
                    "httpGet": {"host": node.internal_ip, "path": "/livez", "port": 10257, "scheme": "HTTPS"},
                    "initialDelaySeconds": 10,
                    "periodSeconds": 10,
                    "successThreshold": 1,
                    "timeoutSeconds": 15,
                },
                "volumeMounts": [{"mountPath": "/etc/kubernetes/pki", "name": "k8s-certs", "readOnly": True}],
            }
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "annotations": {
                        "kubernetes.io/config.hash": self.hexid(128),
                        "kubernetes.io/config.mirror": self.hexid(128),
                        "kubernetes.io/config.seen": created,
                        "kubernetes.io/config.source": "file",
                    },
                    "creationTimestamp": created,
                    "labels": {"component": comp, "tier": "control-plane"},
                    "name": name,
                    "namespace": "kube-system",
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "controller": True,
                            "kind": "Node",
                            "name": node.name,
                            "uid": self.uid(),
                        }
                    ],
                    "resourceVersion": str(self.rng.randrange(10**8, 10**9)),
                    "uid": self.uid(),
                },
                "spec": {
                    "containers": [container],
                    "dnsPolicy": "ClusterFirst",
                    "enableServiceLinks": True,
                    "hostNetwork": True,
                    "nodeName": node.name,
                    "preemptionPolicy": "PreemptLowerPriority",
                    "priority": 2_000_001_000,
                    "priorityClassName": "system-node-critical",
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 30,
                    "tolerations": [{"effect": "NoExecute", "operator": "Exists"}],
                    "volumes": [
                        {
                            "hostPath": {"path": "/etc/kubernetes/pki", "type": "DirectoryOrCreate"},
                            "name": "k8s-certs",
                        }
                    ],
                },
                "status": self._status(
                    [container], [], node, node.internal_ip, created, "Burstable", "run", 0
                ),
            }
            node.pods += 1
            yield self._emit(pod)

    def _daemonset_pods(
        self, namespace: str, base: str, image: str, cpu: int, mem_mi: int, pool: str | None
    ) -> Iterator[Obj]:
        w = _Workload(
            kind="DaemonSet",
            namespace=namespace,
            name=base,
            pool=pool or "*",
            replicas=0,
            app=base,
            team="platform",
            cpu_m=cpu,
            mem=mem_mi * _MI,
            image=image,
            limits="burstable",
            priority_class="system-node-critical" if namespace == "kube-system" else "platform-critical",
            age_days=400,
            pod_age_days=(0.1, 60),
        )
        w.tolerations = list(_DS_TOLERATIONS)
        w.empty_dir = base in ("fluent-bit",)
        tpl = self._template(w)
        revision = self.suffix(10)
        for node in self.nodes:
            if pool is not None and node.pool != pool:
                continue
            node.free_cpu -= cpu
            node.free_mem -= mem_mi * _MI
            labels = {**tpl.labels, "controller-revision-hash": revision, "pod-template-generation": "3"}
            name = self.pod_name(namespace, base)
            spec = dict(tpl.spec)
            spec["nodeName"] = node.name
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node.name]}
                                ]
                            }
                        ]
                    }
                }
            }
            age = min(node.age_days * _DAY, self.rng.uniform(*w.pod_age_days) * _DAY)
            yield self._emit(self._pod(tpl, w, name, labels, spec, node, age, "run", 0))

    def _workload_pods(self, w: _Workload) -> Iterator[Obj]:
        rng = self.rng
        if w.anti_affinity == "required":
            # an operator keeps required anti-affinity schedulable: at most one replica per node
            w.replicas = max(1, min(w.replicas, len(self.pools.get(w.pool, ())) - 1))
            if w.replicas >= 2 and w.kind == "Deployment" and self.min_left["anti_violation"] > 0:
                self.min_left["anti_violation"] -= 1
                w.anti_violation = True
        tpl = self._template(w)
        if w.kind == "Deployment":
            hashes = [self.suffix(rng.choice((9, 10)))]
            if w.rollout:
                hashes.append(self.suffix(10))
        used: set[int] = set()
        exclude = None if w.duplicates else used
        zone_offset = rng.randrange(3)
        placed: list[_Node] = []
        ready = 0
        for i in range(w.replicas):
            zone: str | None = None
            if w.tsc_zone:
                zone = (
                    ZONES[zone_offset]
                    if w.skew and i < max(2, int(w.replicas * 0.8))
                    else ZONES[(i + zone_offset) % 3]
                )
            elif w.preferred_zone and rng.random() < 0.85:
                zone = w.preferred_zone  # the scheduler mostly honours it
            node: _Node | None
            if w.anti_violation and i == 1 and placed:
                node = placed[0]
                self.drop_slot(w.pool)  # keep the pod count in step
            else:
                node = self.take_slot(w.pool, zone, exclude, w.cpu_m, w.mem, w.gpu)
                if node is None and exclude is not None and w.anti_affinity != "required":
                    node = self.take_slot(w.pool, zone, None, w.cpu_m, w.mem, w.gpu)
                if node is None:
                    self.drop_slot(w.pool)
            state = self._pod_state(w, node, i)
            if node is not None:
                used.add(node.index)
                placed.append(node)
                if state not in ("succeeded", "failed", "evicted"):
                    node.free_cpu -= w.cpu_m + (100 if w.sidecar else 0)
                    node.free_mem -= w.mem + (128 * _MI if w.sidecar else 0)
                    node.free_gpu -= w.gpu
            if state == "run":
                ready += 1
            labels = dict(tpl.labels)
            spec = dict(tpl.spec)
            owner: list[Obj] | None
            if w.kind == "Deployment":
                h = hashes[1] if len(hashes) > 1 and i % 2 == 1 else hashes[0]
                labels["pod-template-hash"] = h
                name = self.pod_name(w.namespace, f"{w.name}-{h}")
                owner = tpl.owner_for(h)
            elif w.kind == "StatefulSet":
                name = f"{w.name}-{i}"
                labels["apps.kubernetes.io/pod-index"] = str(i)
                labels["controller-revision-hash"] = f"{w.name}-{tpl.revision}"
                labels["statefulset.kubernetes.io/pod-name"] = name
                spec["hostname"] = name
                spec["subdomain"] = f"{w.name}-headless"
                claim = f"data-{name}"
                spec["volumes"] = [
                    {"name": "data", "persistentVolumeClaim": {"claimName": claim}},
                    *tpl.spec["volumes"],
                ]
                self.pvcs.append(self._pvc(w, claim, node))
                owner = tpl.owner
            elif w.kind == "Job":
                name = self.pod_name(w.namespace, w.name)
                owner = tpl.owner
            else:
                name = w.name
                owner = None
            if node is not None:
                spec["nodeName"] = node.name
            age = rng.uniform(*w.pod_age_days) * _DAY
            if node is not None:
                age = min(age, node.age_days * _DAY)
            if state == "sandbox":
                age = rng.uniform(600, 1800)  # scaled out onto the broken node minutes ago
            pod = self._pod(tpl, w, name, labels, spec, node, age, state, i, owner=owner)
            yield self._emit(pod)
        if w.pdb:
            self.pdbs.append(self._pdb(w, tpl, ready))

    def _pod_state(self, w: _Workload, node: _Node | None, index: int) -> str:
        if node is None:
            return "pending"
        r = self.rng.random()
        if w.job_states:
            return "succeeded" if r < 0.55 else "failed" if r < 0.72 else "run"
        if w.kind == "Pod":
            return "run"
        if node.broken_cni and w.kind == "Deployment" and r < 0.6:
            return "sandbox"
        if (
            index == 1
            and w.kind == "Deployment"
            and w.namespace.endswith("-prod")
            and self.min_left["crashloop"]
        ):
            self.min_left["crashloop"] -= 1
            return "crashloop"
        if r < 0.006:
            return "crashloop"
        if r < 0.022:
            return "restarted"
        if r < 0.025:
            return "imagepull"
        if r < 0.028:
            return "terminating"
        if r < 0.031 and w.kind == "Deployment":
            return "evicted"
        return "run"

    # ------------------------------------------------------------------ templates

    def _template(self, w: _Workload) -> _Template:
        rng = self.rng
        labels = {
            "app.kubernetes.io/instance": w.name if w.kind != "Job" else w.app,
            "app.kubernetes.io/name": w.app,
        }
        if w.kind not in ("Job", "Pod"):
            labels["app.kubernetes.io/component"] = rng.choice(("server", "worker", "api", "controller"))
            labels["app.kubernetes.io/part-of"] = w.team
            labels["app.kubernetes.io/version"] = w.image.rsplit(":", 1)[-1][:63]
            if rng.random() < 0.5:
                labels["app.kubernetes.io/managed-by"] = "Helm"
                labels["helm.sh/chart"] = (
                    f"{w.app[:40]}-{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
                )
        labels["team"] = w.team
        owner_uid = self.uid()
        tpl = _Template(labels=labels, revision=self.suffix(10))
        if w.kind == "Job":
            labels["batch.kubernetes.io/controller-uid"] = owner_uid
            labels["batch.kubernetes.io/job-name"] = w.name
            labels["controller-uid"] = owner_uid
            labels["job-name"] = w.name
        annotations: Obj = {}
        if w.ports:
            annotations["prometheus.io/scrape"] = "true"
            annotations["prometheus.io/port"] = "9090"
        if w.kind in ("Deployment", "StatefulSet", "DaemonSet"):
            annotations["checksum/config"] = _sha(w.namespace + w.name)
            if rng.random() < 0.3:
                annotations["kubectl.kubernetes.io/restartedAt"] = ts(rng.uniform(1, 60) * _DAY)
        if w.sidecar:
            annotations["sidecar.istio.io/status"] = json.dumps(
                {
                    "initContainers": ["istio-init"],
                    "containers": ["istio-proxy"],
                    "volumes": [
                        "workload-socket",
                        "credential-socket",
                        "workload-certs",
                        "istio-envoy",
                        "istio-data",
                        "istio-podinfo",
                        "istio-token",
                        "istiod-ca-cert",
                    ],
                    "imagePullSecrets": None,
                    "revision": "default",
                },
                separators=(",", ":"),
            )
            annotations["kubectl.kubernetes.io/default-container"] = w.app[:63]
        tpl.annotations = annotations or None

        containers = [self._app_container(w)]
        if w.sidecar:
            containers.append(_istio_proxy())
        init_containers: list[Obj] = []
        if w.init:
            init_containers.append(
                {
                    "command": ["/bin/sh", "-c", "until nc -z db 5432; do sleep 2; done; /app/migrate up"],
                    "image": w.image,
                    "imagePullPolicy": "IfNotPresent",
                    "name": "migrate",
                    "resources": {
                        "limits": {"cpu": f"{max(100, w.cpu_m)}m", "memory": f"{w.mem // _MI}Mi"},
                        "requests": {
                            "cpu": f"{max(100, w.cpu_m // 2)}m",
                            "memory": f"{max(64, w.mem // _MI // 2)}Mi",
                        },
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            )
        if w.sidecar:
            init_containers.append(
                {
                    "args": [
                        "istio-iptables",
                        "-p",
                        "15001",
                        "-z",
                        "15006",
                        "-u",
                        "1337",
                        "-m",
                        "REDIRECT",
                        "-i",
                        "*",
                        "-x",
                        "",
                        "-b",
                        "*",
                        "-d",
                        "15090,15021,15020",
                        "--log_output_level=default:info",
                    ],
                    "image": "docker.io/istio/proxyv2:1.23.3",
                    "imagePullPolicy": "IfNotPresent",
                    "name": "istio-init",
                    "resources": {
                        "limits": {"cpu": "2", "memory": "1Gi"},
                        "requests": {"cpu": "10m", "memory": "40Mi"},
                    },
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
                        "privileged": False,
                        "readOnlyRootFilesystem": False,
                        "runAsGroup": 0,
                        "runAsNonRoot": False,
                        "runAsUser": 0,
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            )
        api_volume = f"kube-api-access-{self.suffix()}"
        for c in containers:
            c.setdefault("volumeMounts", []).append(
                {
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "name": api_volume,
                    "readOnly": True,
                }
            )
        volumes: list[Obj] = []
        if w.kind != "DaemonSet" and w.kind != "Pod":
            volumes.append(
                {"configMap": {"defaultMode": 420, "name": f"{w.name[:40]}-config"}, "name": "config"}
            )
        if w.empty_dir:
            volumes.append({"emptyDir": {"sizeLimit": "1Gi"}, "name": "tmp"})
        if w.kind == "DaemonSet" and w.name in ("calico-node", "fluent-bit", "node-exporter", "ebs-csi-node"):
            volumes.append(
                {
                    "hostPath": {"path": "/var/log" if w.name == "fluent-bit" else "/proc", "type": ""},
                    "name": "host",
                }
            )
        if w.sidecar:
            volumes.append({"emptyDir": {"medium": "Memory"}, "name": "istio-envoy"})
            volumes.append(
                {
                    "name": "istio-token",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {
                                "serviceAccountToken": {
                                    "audience": "istio-ca",
                                    "expirationSeconds": 43200,
                                    "path": "istio-token",
                                }
                            }
                        ],
                    },
                }
            )
        volumes.append(
            {
                "name": api_volume,
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                "name": "kube-root-ca.crt",
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                        "path": "namespace",
                                    }
                                ]
                            }
                        },
                    ],
                },
            }
        )

        spec: Obj = {}
        affinity = self._affinity(w, labels)
        if affinity:
            spec["affinity"] = affinity
        spec["containers"] = containers
        spec["dnsPolicy"] = "ClusterFirst"
        spec["enableServiceLinks"] = True
        if init_containers:
            spec["initContainers"] = init_containers
        if w.node_selector:
            spec["nodeSelector"] = w.node_selector
        pc = w.priority_class or "default-priority"  # admission fills in the global default
        spec["preemptionPolicy"] = "Never" if pc in ("batch-low", "preview-low") else "PreemptLowerPriority"
        spec["priority"] = _PRIORITY_VALUE[pc]
        spec["priorityClassName"] = pc
        spec["restartPolicy"] = w.restart_policy
        spec["schedulerName"] = "default-scheduler"
        spec["securityContext"] = (
            {"fsGroup": 10001, "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
            if w.kind != "DaemonSet"
            else {}
        )
        spec["serviceAccount"] = w.app[:63] if w.kind != "Job" else "default"
        spec["serviceAccountName"] = spec["serviceAccount"]
        spec["terminationGracePeriodSeconds"] = 30 if w.kind != "StatefulSet" else 120
        spec["tolerations"] = w.tolerations
        if w.tsc_zone or w.tsc_host:
            constraints: list[Obj] = []
            selector = {
                "matchLabels": {
                    "app.kubernetes.io/instance": labels["app.kubernetes.io/instance"],
                    "app.kubernetes.io/name": w.app,
                }
            }
            if w.tsc_zone:
                constraints.append(
                    {
                        "labelSelector": selector,
                        "maxSkew": 1,
                        "topologyKey": "topology.kubernetes.io/zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                    }
                )
            if w.tsc_host:
                constraints.append(
                    {
                        "labelSelector": selector,
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                    }
                )
            spec["topologySpreadConstraints"] = constraints
        spec["volumes"] = volumes
        tpl.spec = spec
        tpl.qos = "Guaranteed" if w.limits == "guaranteed" and not w.sidecar else "Burstable"
        tpl.init_names = [c["name"] for c in init_containers]

        if w.kind in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            api = "batch/v1" if w.kind == "Job" else "apps/v1"
            tpl.owner_uids = {}
            tpl.owner = [
                {
                    "apiVersion": api,
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": w.kind,
                    "name": w.name,
                    "uid": owner_uid,
                }
            ]
            tpl.rs_base = w.name
            tpl.uid_source = self.uid
        manager = "kubelet" if w.kind == "Pod" else "kube-controller-manager"
        tpl.managed_fields = [
            {
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": _fields_v1(
                        {"annotations": annotations, "labels": labels, "ownerReferences": tpl.owner or []}, 2
                    ),
                    "f:spec": _fields_v1(spec, 2),
                },
                "manager": manager if w.kind != "Pod" else "kubectl-run",
                "operation": "Update",
                "time": ts(w.pod_age_days[0] * _DAY),
            },
            {
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": _STATUS_FIELDS,
                "manager": "kubelet",
                "operation": "Update",
                "subresource": "status",
                "time": ts(rng.uniform(60, 3600)),
            },
        ]
        return tpl

    def _app_container(self, w: _Workload) -> Obj:
        rng = self.rng
        req: Obj = {"cpu": f"{w.cpu_m}m", "memory": f"{w.mem // _MI}Mi"}
        if w.gpu:
            req["nvidia.com/gpu"] = str(w.gpu)
        resources: Obj = {"requests": req}
        if w.limits == "guaranteed":
            resources["limits"] = dict(req)
        elif w.limits == "burstable":
            resources["limits"] = {"memory": f"{w.mem * rng.choice((1, 2)) // _MI}Mi"}
            if rng.random() < 0.5:
                resources["limits"]["cpu"] = f"{w.cpu_m * rng.choice((2, 4))}m"
            if w.gpu:
                resources["limits"]["nvidia.com/gpu"] = str(w.gpu)
        env: list[Obj] = [
            {
                "name": "POD_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
            },
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
            },
            {
                "name": "NODE_NAME",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
            },
        ]
        if w.kind != "DaemonSet":
            env += [
                {"name": "LOG_LEVEL", "value": rng.choice(("info", "warn", "debug"))},
                {
                    "name": "ENVIRONMENT",
                    "value": "production" if w.namespace.endswith("-prod") else "staging",
                },
                {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.monitoring:4317"},
            ]
            for k in range(rng.randint(0, 4)):
                key = rng.choice(
                    (
                        "DATABASE_URL",
                        "REDIS_HOST",
                        "KAFKA_BROKERS",
                        "API_KEY",
                        "FEATURE_FLAGS",
                        "HTTP_TIMEOUT",
                        "MAX_CONNECTIONS",
                        "CACHE_TTL",
                        "REGION",
                        "S3_BUCKET",
                    )
                )
                if k % 3 == 0:
                    env.append(
                        {
                            "name": f"{key}_{k}",
                            "valueFrom": {
                                "secretKeyRef": {"key": key.lower(), "name": f"{w.app[:40]}-secrets"}
                            },
                        }
                    )
                else:
                    env.append(
                        {"name": f"{key}_{k}", "value": f"{w.app}-{key.lower()}-{rng.randint(1, 999)}"}
                    )
        c: Obj = {"env": env, "image": w.image, "imagePullPolicy": "IfNotPresent", "name": w.app[:63]}
        if w.ports:
            c["ports"] = [
                {"containerPort": 8080, "name": "http", "protocol": "TCP"},
                {"containerPort": 9090, "name": "metrics", "protocol": "TCP"},
            ]
        if w.probes:
            c["livenessProbe"] = {
                "failureThreshold": 3,
                "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                "initialDelaySeconds": 15,
                "periodSeconds": 10,
                "successThreshold": 1,
                "timeoutSeconds": 2,
            }
            c["readinessProbe"] = {
                "failureThreshold": 3,
                "httpGet": {"path": "/ready", "port": "http", "scheme": "HTTP"},
                "periodSeconds": 5,
                "successThreshold": 1,
                "timeoutSeconds": 1,
            }
            if rng.random() < 0.15:
                c["startupProbe"] = {
                    "failureThreshold": 30,
                    "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"},
                    "periodSeconds": 5,
                    "successThreshold": 1,
                    "timeoutSeconds": 1,
                }
        c["resources"] = resources
        c["securityContext"] = {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 10001,
        }
        c["terminationMessagePath"] = "/dev/termination-log"
        c["terminationMessagePolicy"] = "File"
        mounts: list[Obj] = []
        if w.kind not in ("DaemonSet", "Pod"):
            mounts.append({"mountPath": "/etc/app", "name": "config", "readOnly": True})
        if w.empty_dir:
            mounts.append({"mountPath": "/tmp", "name": "tmp"})
        if w.pvc:
            mounts.append({"mountPath": "/data", "name": "data"})
        c["volumeMounts"] = mounts
        return c

    def _affinity(self, w: _Workload, labels: dict[str, str]) -> Obj | None:
        out: Obj = {}
        node_aff: Obj = {}
        if w.required_pool or w.required_gpu:
            expr = (
                {"key": "node-pool", "operator": "In", "values": [w.required_pool]}
                if w.required_pool
                else {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
            )
            node_aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            expr,
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        ]
                    }
                ]
            }
        preferred = []
        if w.preferred_zone:
            preferred.append(
                {
                    "preference": {
                        "matchExpressions": [
                            {
                                "key": "topology.kubernetes.io/zone",
                                "operator": "In",
                                "values": [w.preferred_zone],
                            }
                        ]
                    },
                    "weight": 50,
                }
            )
        if w.preferred_spot:
            preferred.append(
                {
                    "preference": {
                        "matchExpressions": [{"key": "lifecycle", "operator": "In", "values": ["spot"]}]
                    },
                    "weight": 100,
                }
            )
        if preferred:
            node_aff["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
        if node_aff:
            out["nodeAffinity"] = node_aff
        selector = {
            "matchLabels": {
                "app.kubernetes.io/instance": labels["app.kubernetes.io/instance"],
                "app.kubernetes.io/name": w.app,
            }
        }
        if w.anti_affinity == "required":
            out["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        elif w.anti_affinity == "preferred":
            out["podAntiAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "podAffinityTerm": {
                            "labelSelector": selector,
                            "topologyKey": "kubernetes.io/hostname",
                        },
                        "weight": 100,
                    }
                ]
            }
        if w.pod_affinity_to:
            out["podAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": w.pod_affinity_to}},
                            "namespaceSelector": {},
                            "topologyKey": "topology.kubernetes.io/zone",
                        },
                        "weight": 20,
                    }
                ]
            }
        return out or None

    # ------------------------------------------------------------------ one pod

    def _pod(
        self,
        tpl: _Template,
        w: _Workload,
        name: str,
        labels: dict[str, str],
        spec: Obj,
        node: _Node | None,
        age: float,
        state: str,
        index: int,
        owner: list[Obj] | None = None,
    ) -> Obj:
        rng = self.rng
        created = ts(age)
        metadata: Obj = {}
        if tpl.annotations:
            metadata["annotations"] = tpl.annotations
        metadata["creationTimestamp"] = created
        if state == "terminating":
            metadata["deletionGracePeriodSeconds"] = 30
            metadata["deletionTimestamp"] = ts(rng.uniform(1, 25))
        if w.kind in ("Deployment", "DaemonSet", "Job"):
            metadata["generateName"] = name[: name.rfind("-") + 1]
        metadata["labels"] = labels
        metadata["managedFields"] = tpl.managed_fields
        metadata["name"] = name
        metadata["namespace"] = w.namespace
        if w.kind == "DaemonSet":
            owner = tpl.owner
        if owner:
            metadata["ownerReferences"] = owner
        metadata["resourceVersion"] = str(rng.randrange(10**8, 10**9))
        metadata["uid"] = self.uid()
        pod_ip = node.next_pod_ip() if node is not None else ""
        pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
        if node is None:
            pod["status"] = {
                "conditions": [
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "message": f"0/{self.spec.nodes} nodes are available: "
                        f"{self.spec.nodes // 3} Insufficient cpu, "
                        f"{self.spec.nodes - self.spec.nodes // 3} node(s) didn't match "
                        "pod anti-affinity rules. preemption: 0/"
                        f"{self.spec.nodes} nodes are available.",
                        "reason": "Unschedulable",
                        "status": "False",
                        "type": "PodScheduled",
                    }
                ],
                "phase": "Pending",
                "qosClass": tpl.qos,
            }
            self._event(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "FailedScheduling",
                pod["status"]["conditions"][0]["message"],
                "default-scheduler",
                "",
                1,
                age,
            )
            return pod
        pod["status"] = self._status(
            spec["containers"], tpl.init_names, node, pod_ip, created, tpl.qos, state, age
        )
        if state == "crashloop":
            restarts = pod["status"]["containerStatuses"][0]["restartCount"]
            self._event(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "BackOff",
                "Back-off restarting failed container",
                "kubelet",
                node.name,
                restarts // 3 + 1,
                age,
            )
        elif state == "imagepull":
            self._event(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "Failed",
                f'Failed to pull image "{w.image}": rpc error: code = NotFound desc = failed to pull and '
                f'unpack image "{w.image}": not found',
                "kubelet",
                node.name,
                rng.randint(3, 20),
                age,
            )
            self._event(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "Failed",
                "Error: ImagePullBackOff",
                "kubelet",
                node.name,
                rng.randint(3, 60),
                age,
            )
        elif state == "sandbox":
            self._event(
                w.namespace,
                name,
                metadata["uid"],
                "Warning",
                "FailedCreatePodSandBox",
                "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for "
                f'sandbox "{self.hexid()}": plugin type="calico" failed (add): '
                "error getting ClusterInformation: "
                "connection is unauthorized: Unauthorized",
                "kubelet",
                node.name,
                rng.randint(5, 40),
                age,
                recent=True,
            )
        elif rng.random() < 0.02:
            self._event(
                w.namespace,
                name,
                metadata["uid"],
                "Normal",
                "Pulled",
                f'Container image "{w.image}" already present on machine',
                "kubelet",
                node.name,
                1,
                min(age, 3000),
            )
        return pod

    def _status(
        self,
        containers: list[Obj],
        init_names: list[str],
        node: _Node,
        pod_ip: str,
        created: str,
        qos: str,
        state: str,
        age: float,
    ) -> Obj:
        rng = self.rng
        started = created
        ready = state in ("run", "restarted", "terminating")
        if state == "sandbox":
            return {
                "conditions": [
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "False",
                        "type": "PodReadyToStartContainers",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "True",
                        "type": "Initialized",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "message": f"containers with unready status: [{containers[0]['name']}]",
                        "reason": "ContainersNotReady",
                        "status": "False",
                        "type": "Ready",
                    },
                    {
                        "lastProbeTime": None,
                        "lastTransitionTime": created,
                        "status": "True",
                        "type": "PodScheduled",
                    },
                ],
                "containerStatuses": [
                    {
                        "image": c["image"],
                        "imageID": "",
                        "lastState": {},
                        "name": c["name"],
                        "ready": False,
                        "restartCount": 0,
                        "started": False,
                        "state": {"waiting": {"reason": "ContainerCreating"}},
                    }
                    for c in containers
                ],
                "hostIP": node.internal_ip,
                "hostIPs": [{"ip": node.internal_ip}],
                "phase": "Pending",
                "qosClass": qos,
                "startTime": created,
            }
        finished = state in ("succeeded", "failed", "evicted")
        phase = {
            "succeeded": "Succeeded",
            "failed": "Failed",
            "evicted": "Failed",
            "imagepull": "Pending",
        }.get(state, "Running")
        tstatus = "True" if ready else "False"
        conditions = [
            {
                "lastProbeTime": None,
                "lastTransitionTime": created,
                "status": "True" if not finished else "False",
                "type": "PodReadyToStartContainers",
            },
            {"lastProbeTime": None, "lastTransitionTime": created, "status": "True", "type": "Initialized"},
            {
                "lastProbeTime": None,
                "lastTransitionTime": ts(max(0, age - 30)),
                "status": tstatus,
                "type": "Ready",
                **({} if ready else {"reason": "PodCompleted" if finished else "ContainersNotReady"}),
            },
            {
                "lastProbeTime": None,
                "lastTransitionTime": ts(max(0, age - 30)),
                "status": tstatus,
                "type": "ContainersReady",
                **({} if ready else {"reason": "PodCompleted" if finished else "ContainersNotReady"}),
            },
            {"lastProbeTime": None, "lastTransitionTime": created, "status": "True", "type": "PodScheduled"},
        ]
        statuses = []
        for k, c in enumerate(containers):
            cs: Obj = {
                "containerID": f"containerd://{self.hexid()}",
                "image": c["image"],
                "imageID": f"{c['image'].rsplit(':', 1)[0]}@sha256:{_sha(c['image'])}",
                "lastState": {},
                "name": c["name"],
                "ready": ready,
                "restartCount": 0,
                "started": ready,
                "state": {"running": {"startedAt": ts(max(0, age - 20))}},
            }
            if k == 0 and state == "crashloop":
                restarts = rng.randint(100, 4000)
                reason = rng.choice(("Error", "OOMKilled"))
                cs["restartCount"] = restarts
                cs["lastState"] = {
                    "terminated": {
                        "containerID": f"containerd://{self.hexid()}",
                        "exitCode": 137 if reason == "OOMKilled" else 1,
                        "finishedAt": ts(90),
                        "reason": reason,
                        "startedAt": ts(120),
                    }
                }
                cs["state"] = {
                    "waiting": {
                        "message": f"back-off 5m0s restarting failed container={c['name']}",
                        "reason": "CrashLoopBackOff",
                    }
                }
                cs["started"] = False
            elif k == 0 and state == "restarted":
                cs["restartCount"] = rng.randint(1, 30)
                cs["lastState"] = {
                    "terminated": {
                        "containerID": f"containerd://{self.hexid()}",
                        "exitCode": 137,
                        "finishedAt": ts(rng.uniform(100, age + 101)),
                        "reason": "OOMKilled",
                        "startedAt": started,
                    }
                }
            elif state == "imagepull":
                cs["image"] = c["image"]
                cs.pop("containerID")
                cs["imageID"] = ""
                cs["state"] = {
                    "waiting": {
                        "message": f'Back-off pulling image "{c["image"]}"',
                        "reason": "ImagePullBackOff",
                    }
                }
            elif finished:
                failed = state != "succeeded"
                reason = "Completed" if not failed else rng.choice(("Error", "OOMKilled", "Error"))
                if state == "evicted":
                    reason = "ContainerStatusUnknown"
                cs["state"] = {
                    "terminated": {
                        "containerID": f"containerd://{self.hexid()}",
                        "exitCode": 0 if not failed else 137 if reason == "OOMKilled" else 1,
                        "finishedAt": ts(max(0, age - rng.uniform(60, 900))),
                        "reason": reason,
                        "startedAt": ts(max(0, age - 20)),
                    }
                }
            statuses.append(cs)
        status: Obj = {
            "conditions": conditions,
            "containerStatuses": statuses,
            "hostIP": node.internal_ip,
            "hostIPs": [{"ip": node.internal_ip}],
        }
        if init_names:
            status["initContainerStatuses"] = [
                {
                    "containerID": f"containerd://{self.hexid()}",
                    "image": "init",
                    "imageID": "",
                    "lastState": {},
                    "name": n,
                    "ready": True,
                    "restartCount": 0,
                    "started": False,
                    "state": {
                        "terminated": {
                            "containerID": f"containerd://{self.hexid()}",
                            "exitCode": 0,
                            "finishedAt": ts(max(0, age - 25)),
                            "reason": "Completed",
                            "startedAt": started,
                        }
                    },
                }
                for n in init_names
            ]
        status["phase"] = phase
        if state == "evicted":
            status["message"] = (
                "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92Mi."
            )
            status["reason"] = "Evicted"
        if pod_ip and not finished:
            status["podIP"] = pod_ip
            status["podIPs"] = [{"ip": pod_ip}]
        status["qosClass"] = qos
        status["startTime"] = started
        return status

    # ------------------------------------------------------------------ PDBs, PVCs, events

    def _pdb(self, w: _Workload, tpl: _Template, healthy: int) -> Obj:
        rng = self.rng
        spec: Obj = {
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/instance": tpl.labels["app.kubernetes.io/instance"],
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
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {
                "annotations": {
                    "meta.helm.sh/release-name": w.name,
                    "meta.helm.sh/release-namespace": w.namespace,
                },
                "creationTimestamp": ts(w.age_days * _DAY),
                "generation": 1,
                "labels": {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/name": w.app},
                "name": w.name,
                "namespace": w.namespace,
                "resourceVersion": str(rng.randrange(10**8, 10**9)),
                "uid": self.uid(),
            },
            "spec": spec,
            "status": {
                "conditions": [
                    {
                        "lastTransitionTime": ts(rng.uniform(1, 30) * _DAY),
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
        }

    def _pvc(self, w: _Workload, claim: str, node: _Node | None) -> Obj:
        self.stats.add("PersistentVolumeClaim")
        size = self.rng.choice(("10Gi", "50Gi", "100Gi", "500Gi"))
        meta: Obj = {
            "annotations": {
                "pv.kubernetes.io/bind-completed": "yes",
                "pv.kubernetes.io/bound-by-controller": "yes",
                "volume.beta.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
                "volume.kubernetes.io/storage-provisioner": "ebs.csi.aws.com",
            },
            "creationTimestamp": ts(w.age_days * _DAY),
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

    def _event(
        self,
        namespace: str,
        pod: str,
        uid: str,
        type_: str,
        reason: str,
        message: str,
        component: str,
        host: str,
        count: int,
        age: float,
        *,
        recent: bool = False,
    ) -> None:
        first = ts(min(age, 3 * _HOUR))
        last = ts(self.rng.uniform(5, 200 if recent else 600))
        self.events.append(
            {
                "apiVersion": "v1",
                "count": count,
                "eventTime": None,
                "firstTimestamp": first,
                "involvedObject": {
                    "apiVersion": "v1",
                    "fieldPath": "spec.containers{app}" if host else "",
                    "kind": "Pod",
                    "name": pod,
                    "namespace": namespace,
                    "resourceVersion": str(self.rng.randrange(10**8, 10**9)),
                    "uid": uid,
                },
                "kind": "Event",
                "lastTimestamp": last,
                "message": message,
                "metadata": {
                    "creationTimestamp": first,
                    "name": f"{pod}.{self.hexid(64)[:16]}",
                    "namespace": namespace,
                    "resourceVersion": str(self.rng.randrange(10**8, 10**9)),
                    "uid": self.uid(),
                },
                "reason": reason,
                "reportingComponent": component,
                "reportingInstance": host,
                "source": {"component": component, **({"host": host} if host else {})},
                "type": type_,
            }
        )
        self.stats.add("Event")


@dataclass(eq=False)
class _Template:
    """What all pods of one workload share (the pod template, as the controller stamps it)."""

    labels: dict[str, str]
    revision: str
    annotations: Obj | None = None
    spec: Obj = field(default_factory=dict)
    qos: str = "Burstable"
    init_names: list[str] = field(default_factory=list)
    owner: list[Obj] | None = None
    owner_uids: dict[str, str] | None = None
    rs_base: str = ""
    managed_fields: list[Obj] = field(default_factory=list)
    uid_source: Any = None

    def owner_for(self, pod_template_hash: str) -> list[Obj]:
        """A Deployment's pods are owned by its ReplicaSet ``<deployment>-<pod-template-hash>``."""
        assert self.owner_uids is not None
        uid = self.owner_uids.get(pod_template_hash)
        if uid is None:
            uid = self.owner_uids[pod_template_hash] = self.uid_source()
        return [
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "ReplicaSet",
                "name": f"{self.rs_base}-{pod_template_hash}",
                "uid": uid,
            }
        ]


def _istio_proxy() -> Obj:
    return {
        "args": [
            "proxy",
            "sidecar",
            "--domain",
            "$(POD_NAMESPACE).svc.cluster.local",
            "--proxyLogLevel=warning",
            "--proxyComponentLogLevel=misc:error",
            "--log_output_level=default:info",
        ],
        "env": [
            {"name": n, "value": v}
            for n, v in (
                ("PILOT_CERT_PROVIDER", "istiod"),
                ("CA_ADDR", "istiod.istio-system.svc:15012"),
                ("PROXY_CONFIG", "{}"),
                ("ISTIO_META_CLUSTER_ID", "Kubernetes"),
                ("TRUST_DOMAIN", "cluster.local"),
                ("ISTIO_META_MESH_ID", "cluster.local"),
                ("ISTIO_META_INTERCEPTION_MODE", "REDIRECT"),
            )
        ]
        + [
            {
                "name": "INSTANCE_IP",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
            },
            {
                "name": "SERVICE_ACCOUNT",
                "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.serviceAccountName"}},
            },
        ],
        "image": "docker.io/istio/proxyv2:1.23.3",
        "imagePullPolicy": "IfNotPresent",
        "name": "istio-proxy",
        "ports": [{"containerPort": 15090, "name": "http-envoy-prom", "protocol": "TCP"}],
        "readinessProbe": {
            "failureThreshold": 4,
            "httpGet": {"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"},
            "periodSeconds": 15,
            "successThreshold": 1,
            "timeoutSeconds": 3,
        },
        "resources": {
            "limits": {"cpu": "2", "memory": "1Gi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsGroup": 1337,
            "runAsNonRoot": True,
            "runAsUser": 1337,
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {"mountPath": "/etc/istio/proxy", "name": "istio-envoy"},
            {"mountPath": "/var/run/secrets/tokens", "name": "istio-token"},
        ],
    }


def _fields_v1(obj: Any, depth: int = 5) -> Any:
    """The managedFields ``fieldsV1`` set of an object (``f:`` keys, ``k:`` keys for named list items).

    Cut at ``depth`` levels: the API server would go all the way down, which makes a pod 2-3 times
    the 5-8 KB that pods of real clusters average.
    """
    if depth <= 0:
        return {}
    if isinstance(obj, dict):
        out: Obj = {".": {}} if obj else {}
        for key, value in obj.items():
            out[f"f:{key}"] = _fields_v1(value, depth - 1)
        return out
    if isinstance(obj, list):
        out = {}
        for item in obj:
            if isinstance(item, dict) and "name" in item:
                out[f'k:{{"name":"{item["name"]}"}}'] = _fields_v1(item, depth - 1)
            elif isinstance(item, dict) and "uid" in item:
                out[f'k:{{"uid":"{item["uid"]}"}}'] = {}
            elif isinstance(item, dict) and "type" in item:
                out[f'k:{{"type":"{item["type"]}"}}'] = _fields_v1(item, depth - 1)
            elif isinstance(item, str):
                out[f'v:"{item}"'] = {}
        return out
    return {}


_STATUS_FIELDS = _fields_v1(
    {
        "status": {
            "conditions": [
                {"type": t, "lastProbeTime": "", "lastTransitionTime": "", "status": ""}
                for t in ("ContainersReady", "Initialized", "PodReadyToStartContainers", "Ready")
            ],
            "containerStatuses": {},
            "hostIP": "",
            "hostIPs": {},
            "phase": "",
            "podIP": "",
            "podIPs": {},
            "startTime": "",
        }
    }
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


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


# ============================================================================ output


def generate(spec: ClusterSpec, stats: GenerationStats | None = None) -> Iterator[Obj]:
    """Every object of the cluster, in the order kubectl would list them."""
    gen = _Generator(spec)
    if stats is not None:
        gen.stats = stats
    return gen.generate()


_INDENT = 4


def write_snapshot(spec: ClusterSpec, out: BinaryIO, *, pretty: bool = False) -> GenerationStats:
    """Write the cluster as a v1 List: compact JSON, as the API server sends it and ``desched snapshot``
    writes it; ``pretty`` indents it as ``kubectl get -o json`` prints it (about 3 times the bytes)."""
    stats = GenerationStats()
    encoder = msgspec.json.Encoder()
    total = 0
    head = b'{\n    "apiVersion": "v1",\n    "items": [\n' if pretty else b'{"apiVersion":"v1","items":['
    out.write(head)
    total += len(head)
    first = True
    sep = b",\n" if pretty else b","
    for obj in generate(spec, stats):
        data = encoder.encode(obj)
        if pretty:
            data = b"        " + msgspec.json.format(data, indent=_INDENT).replace(b"\n", b"\n        ")
        if obj["kind"] == "Pod":
            stats.pod_bytes += len(data)
        if not first:
            out.write(sep)
            total += len(sep)
        first = False
        out.write(data)
        total += len(data)
    tail = (
        b'\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n'
        if pretty
        else b'],"kind":"List","metadata":{"resourceVersion":""}}'
    )
    out.write(tail)
    stats.total_bytes = total + len(tail)
    return stats


def snapshot_bytes(spec: ClusterSpec, *, pretty: bool = False) -> bytes:
    import io

    buf = io.BytesIO()
    write_snapshot(spec, buf, pretty=pretty)
    return buf.getvalue()


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "desched" / "bench"


def cached_snapshot(spec: ClusterSpec, directory: Path | None = None) -> tuple[Path, bool]:
    """The snapshot file of ``spec``, generated unless cached. Returns (path, generated now)."""
    directory = directory or cache_dir()
    path = directory / spec.cache_name
    if path.exists():
        return path, False
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    try:
        with tmp.open("wb") as f:
            write_snapshot(spec, f)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path, True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.generator",
        description="Write a realistic generated cluster snapshot (a v1 List, JSON).",
    )
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods-per-node", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pretty", action="store_true", help="indent as kubectl does (about 3x the bytes)")
    parser.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    try:
        spec = ClusterSpec(args.nodes, args.pods_per_node, args.seed)
    except ValueError as e:
        parser.error(str(e))
    t0 = time.perf_counter()
    if args.output == "-":
        stats = write_snapshot(spec, sys.stdout.buffer, pretty=args.pretty)
    else:
        with open(args.output, "wb") as f:
            stats = write_snapshot(spec, f, pretty=args.pretty)
    pods = stats.counts.get("Pod", 0)
    print(
        f"generated {', '.join(f'{v} {k}' for k, v in stats.counts.items())}: "
        f"{stats.total_bytes / 1e6:.1f} MB, "
        f"mean pod {stats.pod_bytes / max(1, pods) / 1024:.1f} KiB, in {time.perf_counter() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
