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

Everything is drawn from one ``random.Random(seed)``, so a spec always gives the same bytes
(tests/unit/bench/test_generator_digests.py pins them for every spec the repo uses).
``python -m benchmarks.generator --nodes 50 -o cluster.json`` writes one snapshot.

The package is split by concern, each part drawing from the one context (common.py) in the order
cluster.py calls them:

- ``nodes``: node pools and shapes, drift, pod slots, Node objects;
- ``workloads``: workloads and their owners (teams, platform, GPU, kube-system, DaemonSets, Jobs,
  previews, bare pods);
- ``templates``: pod templates; ``constraints``: pods' scheduling constraints (node affinity,
  topology spread), shared with the live clusters' manifests;
- ``pods``: placement, pod states and Pod objects; ``status``: a pod's status by its state;
- ``objects``: Namespaces, PriorityClasses, PDBs, PVCs (the PDB and PriorityClass builders are
  shared with the manifests);
- ``events``: Events and anomalies;
- ``cluster``: the parts in order; ``snapshot``: serialisation to a snapshot file, the cache, the CLI.

The same package makes the e2e tier's live clusters (``live``: 24 kwok nodes, Deployments that
kube-scheduler places, then drift; tests/e2e/test_simulate_predicts_run.py) and serialises them to
manifests for a real control plane (``manifests``) rather than to a snapshot.
"""

from benchmarks.generator.cluster import generate
from benchmarks.generator.common import (
    GENERATOR_VERSION,
    MIN_NODES,
    NOW,
    REGION,
    ZONES,
    ClusterSpec,
    GenerationStats,
    ts,
)
from benchmarks.generator.snapshot import cache_dir, cached_snapshot, main, snapshot_bytes, write_snapshot

__all__ = [
    "GENERATOR_VERSION",
    "MIN_NODES",
    "NOW",
    "REGION",
    "ZONES",
    "ClusterSpec",
    "GenerationStats",
    "cache_dir",
    "cached_snapshot",
    "generate",
    "main",
    "snapshot_bytes",
    "ts",
    "write_snapshot",
]
