"""Workloads and their owners: the teams and their namespaces' Deployments and StatefulSets, the
platform's (infra pool), the GPU inference Deployments, kube-system's, the DaemonSets, Jobs from
CronJobs, preview environments and bare debug pods; each with its requests, limits, replicas,
priority class, tolerations and the scheduling constraints its pods will carry. Pool by pool,
until the pool's pod slots are used."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from benchmarks.generator.common import (
    K8S_VERSION,
    MI,
    REGION,
    ZONES,
    ClusterSpec,
    Context,
    DaemonSetRow,
    Obj,
    Part,
)
from benchmarks.generator.nodes import NodePlan

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


@dataclass
class Workload:
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

_DAEMONSETS: list[DaemonSetRow] = [
    # namespace, name, image, cpu m, memory Mi, pool (None = every node)
    ("kube-system", "kube-proxy", f"registry.k8s.io/kube-proxy:{K8S_VERSION}", 100, 128, None),
    ("kube-system", "calico-node", "quay.io/calico/node:v3.28.2", 250, 256, None),
    ("monitoring", "node-exporter", "quay.io/prometheus/node-exporter:v1.8.2", 50, 64, None),
    ("logging", "fluent-bit", "cr.fluentbit.io/fluent/fluent-bit:3.1.9", 100, 200, None),
    ("kube-system", "ebs-csi-node", "public.ecr.aws/ebs-csi-driver/aws-ebs-csi-driver:v1.37.0", 30, 64, None),
    ("kube-system", "nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.16.2", 50, 64, "gpu"),
]


_INFRA: list[tuple[str, str, str, str, float]] = [
    # namespace, name, kind, image, size tier
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


def teams(spec: ClusterSpec) -> list[str]:
    """One team per 25 nodes (at least 3), named from :data:`_TEAMS` (``-2``, ``-3`` ... past its end)."""
    n_teams = max(3, spec.nodes // 25)
    return [
        _TEAMS[i % len(_TEAMS)] + ("" if i < len(_TEAMS) else f"-{i // len(_TEAMS) + 1}")
        for i in range(n_teams)
    ]


def daemonsets(spec: ClusterSpec) -> list[DaemonSetRow]:
    """The DaemonSets on every node (fewer when the nodes hold few pods) and the GPU pool's."""
    every_node = [d for d in _DAEMONSETS if d[5] is None]
    keep = max(1, min(len(every_node), spec.pods_per_node // 6))
    return every_node[:keep] + [d for d in _DAEMONSETS if d[5] is not None]


class Workloads(Part):
    """Every Deployment, StatefulSet, Job and bare pod, drawn one at a time (iterate), each sized
    for its pool and drawn only while the pool has pod slots left (placing the pods takes them)."""

    def __init__(self, ctx: Context, plan: NodePlan, namespaces: Collection[str]) -> None:
        super().__init__(ctx)
        self.plan = plan
        self.namespaces = namespaces
        self.teams = teams(ctx.spec)

    def _size(self, pool: str, tier: float) -> tuple[int, int]:
        cpu = max(10, int(self.plan.cpu_per_pod[pool] * tier / 10) * 10)
        mem = max(32, int(self.plan.mem_per_pod[pool] * tier / MI / 16) * 16) * MI
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

    def _team_workload(self, pool: str, hi: int) -> Workload:
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
        w = Workload(
            kind=kind,
            namespace=namespace,
            name=self.ctx.name(namespace, base),
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

    def _special_workload(self, pool: str, hi: int) -> Workload | None:
        """Preview environments, bare pods, jobs: the less common shapes, by pool."""
        rng = self.rng
        r = rng.random()
        forced = False
        if pool == "general" and self.ctx.min_left["preview"] > 0:
            self.ctx.min_left["preview"] -= 1
            r, forced = 0.0, True
        elif pool == "general" and self.ctx.min_left["bare"] > 0:
            self.ctx.min_left["bare"] -= 1
            r = 0.07
        if pool == "general" and r < 0.06:
            namespace = rng.choice(("preview", "sandbox"))
            base = f"pr-{rng.randint(1000, 9999)}-{rng.choice(_ADJ)}-{rng.choice(_NOUNS)}"
            cpu, mem = self._size(pool, 0.5)
            w = Workload(
                kind="Deployment",
                namespace=namespace,
                name=self.ctx.name(namespace, base),
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
            w = Workload(
                kind="Pod",
                namespace=namespace,
                name=self.ctx.name(namespace, base),
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
            job = self.ctx.name(namespace, f"{cron}-{29_000_000 + rng.randrange(900_000)}")
            cpu, mem = self._size(pool, rng.choice((0.5, 1.0, 2.0)))
            w = Workload(
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

    def _gpu_workload(self, hi: int) -> Workload:
        rng = self.rng
        base = f"{rng.choice(('llm', 'embedding', 'vision', 'ranker', 'asr'))}-inference"
        namespace = "ml-serving"
        w = Workload(
            kind="Deployment",
            namespace=namespace,
            name=self.ctx.name(namespace, base),
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

    def _infra_workload(self, hi: int, k: int) -> Workload:
        rng = self.rng
        namespace, base, kind, image, tier = _INFRA[k % len(_INFRA)]
        if k >= len(_INFRA):
            base = f"{base}-shard-{k // len(_INFRA)}"
        cpu, mem = self._size("infra", tier)
        replicas = min(hi, rng.choice((2, 3, 3, 5)) if kind == "StatefulSet" else rng.randint(2, 6))
        w = Workload(
            kind=kind,
            namespace=namespace,
            name=self.ctx.name(namespace, base),
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

    def _system_workloads(self) -> list[Workload]:
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
            w = Workload(
                kind="Deployment",
                namespace="kube-system",
                name=self.ctx.name("kube-system", base),
                pool="general",
                replicas=replicas,
                app=base,
                team="platform",
                cpu_m=cpu,
                mem=mem_mi * MI,
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

    def __iter__(self) -> Iterator[Workload]:
        """Every Deployment, StatefulSet, Job and bare pod, pool by pool, until the pool's slots are used."""
        yield from self._system_workloads()
        for pool in ("infra", "gpu", "memory", "compute", "arm", "spot", "general"):
            k = 0
            while True:
                hi = self.plan.remaining(pool)
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
