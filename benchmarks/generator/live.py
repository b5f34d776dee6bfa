"""The live clusters: small seeded clusters on which several descheduler plugins act and interact,
built on a real control plane (kwok nodes) rather than written as a snapshot; manifests.py turns
them into the objects to create.

A generated cluster is built in two phases (tests/e2e/test_simulate_predicts_run.py):

1. *crowd*: the nodes are created (three zones, two sizes, some labelled ``disk=ssd``), about
   half of them are cordoned, and the Deployments are created: kube-scheduler crowds their pods
   onto the open nodes (duplicates, over-used nodes, zones out of balance);
2. *disturb*: every node is opened again (the cordoned ones are now under-used:
   LowNodeUtilization), a few crowded nodes get a ``NoSchedule`` taint their pods do not tolerate
   (RemovePodsViolatingNodeTaints), a crowded ``disk=ssd`` node loses its label under pods that
   require it (RemovePodsViolatingNodeAffinity), and PodDisruptionBudgets cover some Deployments
   (``maxUnavailable: 1`` or ``minAvailable: replicas - 1``) so that evictions are refused.

The same seed always gives the same manifests; what kube-scheduler makes of them in phase 1 is
whatever it makes, and the comparison is made on the snapshot taken after phase 2.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from benchmarks.generator.nodes import Shape

ZONES = ("zone-a", "zone-b", "zone-c")
#: the two node sizes
SHAPES = (Shape("kwok-4x16", 4, 16), Shape("kwok-8x32", 8, 32))
#: Deployments' pod requests: cpu (m), memory (Mi)
REQUESTS = ((100, 128), (200, 256), (250, 512), (300, 384), (500, 768), (400, 1024))
TAINT_KEY = "e2e.desched.io/dedicated"
SSD = ("disk", "ssd")
PRIORITY_CLASS_NAME = "e2e-high"


@dataclass(frozen=True)
class GenNode:
    name: str
    zone: str
    shape: Shape
    ssd: bool
    cordoned: bool

    @property
    def cpu(self) -> int:
        return self.shape.cpu

    @property
    def memory_gi(self) -> int:
        return self.shape.memory_gi


@dataclass(frozen=True)
class GenDeployment:
    name: str
    replicas: int
    cpu_m: int
    memory_mi: int
    #: "plain", "zone-spread" (ScheduleAnyway over zones), "host-spread" (ScheduleAnyway over
    #: hostnames) or "ssd" (required node affinity disk=ssd)
    kind: str
    priority_class: str = ""
    #: "", "maxUnavailable" or "minAvailable"
    pdb: str = ""


@dataclass
class GenCluster:
    seed: int
    namespace: str
    nodes: list[GenNode] = field(default_factory=list)
    deployments: list[GenDeployment] = field(default_factory=list)
    #: phase 2: nodes tainted ``TAINT_KEY=special:NoSchedule`` and nodes losing ``disk=ssd``;
    #: chosen among the open nodes of phase 1 (where the pods are)
    tainted: list[str] = field(default_factory=list)
    unlabelled: list[str] = field(default_factory=list)

    @property
    def pods(self) -> int:
        return sum(d.replicas for d in self.deployments)


def generate(seed: int, *, nodes: int = 24, pods: int = 150) -> GenCluster:
    """A cluster of ``nodes`` nodes and about ``pods`` pods, the same for the same seed."""
    rng = random.Random(seed)
    c = GenCluster(seed, f"gen{seed}")
    per_zone = nodes // len(ZONES)
    for z, zone in enumerate(ZONES):
        for i in range(per_zone):
            shape = rng.choice(SHAPES)
            c.nodes.append(
                GenNode(
                    name=f"g{seed}-{'abc'[z]}{i:02d}",
                    zone=zone,
                    shape=shape,
                    ssd=i < per_zone // 2,
                    cordoned=False,
                )
            )
    # cordon about half, never all of a zone's ssd nodes
    open_names: set[str] = set()
    for zone in ZONES:
        in_zone = [n for n in c.nodes if n.zone == zone]
        ssd = [n for n in in_zone if n.ssd]
        other = [n for n in in_zone if not n.ssd]
        keep = rng.sample(ssd, max(1, len(ssd) // 2)) + rng.sample(other, max(1, len(other) // 2))
        open_names.update(n.name for n in keep)
    c.nodes = [GenNode(n.name, n.zone, n.shape, n.ssd, n.name not in open_names) for n in c.nodes]
    kinds = ["plain", "plain", "zone-spread", "host-spread", "ssd", "plain", "zone-spread", "ssd"]
    total = 0
    k = 0
    while total < pods:
        kind = kinds[k % len(kinds)]
        replicas = min(rng.randint(6, 16), pods - total) if pods - total >= 6 else pods - total
        cpu_m, mem_mi = rng.choice(REQUESTS)
        if kind == "ssd":
            replicas = min(replicas, 8)
            cpu_m, mem_mi = min(cpu_m, 250), min(mem_mi, 512)
        pdb = rng.choice(["", "", "maxUnavailable", "minAvailable"]) if replicas >= 4 else ""
        priority = PRIORITY_CLASS_NAME if k % 5 == 4 else ""
        c.deployments.append(GenDeployment(f"app{k:02d}", replicas, cpu_m, mem_mi, kind, priority, pdb))
        total += replicas
        k += 1
    opened = [n for n in c.nodes if not n.cordoned]
    c.tainted = [n.name for n in rng.sample([n for n in opened if not n.ssd], 2)]
    c.unlabelled = [rng.choice([n for n in opened if n.ssd]).name]
    return c


#: The policy the comparison runs: five plugins that act on generated clusters and interact.
POLICY = """\
apiVersion: "descheduler/v1alpha2"
kind: "DeschedulerPolicy"
maxNoOfPodsToEvictPerNode: 6
profiles:
  - name: gen
    pluginConfig:
      - name: DefaultEvictor
        args:
          nodeFit: true
      - name: RemovePodsViolatingNodeAffinity
        args:
          nodeAffinityType: ["requiredDuringSchedulingIgnoredDuringExecution"]
      - name: RemovePodsViolatingNodeTaints
      - name: RemoveDuplicates
      - name: RemovePodsViolatingTopologySpreadConstraint
        args:
          constraints: ["DoNotSchedule", "ScheduleAnyway"]
      - name: LowNodeUtilization
        args:
          thresholds: {cpu: 20, memory: 20, pods: 20}
          targetThresholds: {cpu: 45, memory: 45, pods: 45}
    plugins:
      deschedule:
        enabled:
          - RemovePodsViolatingNodeAffinity
          - RemovePodsViolatingNodeTaints
      balance:
        enabled:
          - RemoveDuplicates
          - RemovePodsViolatingTopologySpreadConstraint
          - LowNodeUtilization
"""
