"""What a cycle sees after an eviction is decided by the framework, not by the backend.

A backend shaped like the eviction API (it only records the request and leaves the snapshot alone,
as ``ApiEvictionBackend`` does) and the simulated backend make the same evictions on the same
snapshot; the live cache a snapshot is taken from is never changed by a cycle.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

import msgspec
import yaml
from tests import builders

from desched.api.policy import load_policy
from desched.backends.simulated_eviction import RecordingBackend, SimulatedBackend, SimulatedEvictionApi
from desched.cluster.file_source import load_snapshot_file
from desched.cluster.live_source import LiveCache
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import Framework
from desched.framework.types import EvictResult
from desched.k8s.objects import Node, Pod, PodDisruptionBudget
from desched.plugins import default_registry

REGISTRY = default_registry(entry_points=False)
REPO = Path(__file__).resolve().parents[3]


def node(name: str, *, taint: bool = False) -> Node:
    return builders.node(name, memory="16Gi", taints=[builders.taint("dedicated", "x")] if taint else None)


def pod(name: str, node_name: str, *, tolerates: bool = False, owner: str = "rs") -> Pod:
    return builders.pod(
        name,
        node=node_name,
        uid=f"uid-{name}",
        owner=("ReplicaSet", owner, f"uid-{owner}"),
        controller=None,
        cpu="400m",
        memory="128Mi",
        tolerations=[builders.toleration("dedicated")] if tolerates else None,
        ready=True,
    )


def cluster_objects() -> tuple[list[Node], list[Pod]]:
    """n1 is tainted and 80% requested (cpu): four pods tolerate the taint, four do not. n2 and
    n3 are empty. RemovePodsViolatingNodeTaints takes n1 to 40%, below LowNodeUtilization's 50%
    target: LowNodeUtilization then has nothing left to do."""
    nodes = [node("n1", taint=True), node("n2"), node("n3")]
    pods = [pod(f"keep-{i}", "n1", tolerates=True, owner="tolerant") for i in range(4)]
    pods += [pod(f"evict-{i}", "n1", owner="intolerant") for i in range(4)]
    return nodes, pods


POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "p",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {}},
                {"name": "RemovePodsViolatingNodeTaints", "args": {}},
                {
                    "name": "LowNodeUtilization",
                    "args": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}},
                },
            ],
            "plugins": {
                "deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]},
                "balance": {"enabled": ["LowNodeUtilization"]},
            },
        }
    ],
}


def run(snapshot: ClusterSnapshot, backend: Any) -> list[tuple[str, str]]:
    framework = Framework(load_policy(POLICY, REGISTRY), REGISTRY)
    result = framework.run_cycle(snapshot, backend)
    return [(f"{r.namespace}/{r.name}", r.plugin) for r in result.evictions]


def test_api_shaped_and_simulated_backends_evict_the_same_pods() -> None:
    nodes, pods = cluster_objects()
    simulated_snapshot = ClusterSnapshot(nodes=nodes, pods=pods)
    simulated = run(simulated_snapshot, SimulatedBackend(simulated_snapshot))
    api = RecordingBackend()
    live = run(ClusterSnapshot(nodes=nodes, pods=pods), api)
    assert live == simulated
    assert [p.key for p, _ in api.requests] == [key for key, _ in live]
    # the four intolerant pods, and nothing more: LowNodeUtilization sees n1 at 40%, under its
    # 50% target, because the framework took the evicted pods out of the cycle's snapshot
    assert live == [(f"default/evict-{i}", "RemovePodsViolatingNodeTaints") for i in range(4)]


def test_low_node_utilization_stops_at_its_target_after_other_plugins_evictions() -> None:
    """Two more tolerating pods on n1 (100%): after the taint evictions n1 is at 60%, so
    LowNodeUtilization moves exactly one 10% pod to reach 50%, in both modes."""
    nodes, pods = cluster_objects()
    pods += [pod(f"keep-{i}", "n1", tolerates=True, owner="tolerant") for i in (4, 5)]
    for backend_kind in ("api", "simulated"):
        snapshot = ClusterSnapshot(nodes=nodes, pods=pods)
        backend = RecordingBackend() if backend_kind == "api" else SimulatedBackend(snapshot)
        evicted = run(snapshot, backend)
        by_plugin = [plugin for _, plugin in evicted]
        assert by_plugin.count("RemovePodsViolatingNodeTaints") == 4, backend_kind
        assert by_plugin.count("LowNodeUtilization") == 1, backend_kind
        assert snapshot.requested_on("n1")["cpu"] == 2000  # 50% of 4 cpu: not below the target


def test_a_cycle_does_not_change_the_live_cache_it_was_taken_from() -> None:
    nodes, pods = cluster_objects()
    cache = LiveCache(cast(Any, None), ("Node", "Pod"))
    cache.informers["Node"].objects = {n.metadata.name: n for n in nodes}
    cache.informers["Pod"].objects = {p.key: p for p in pods}
    before = dict(cache.informers["Pod"].objects)
    snapshot = cache.snapshot()
    evicted = run(snapshot, RecordingBackend())
    assert len(evicted) == 4
    assert len(snapshot.pods) == len(pods) - 4  # the cycle's working copy lost them
    assert cache.informers["Pod"].objects == before  # the cache did not
    again = cache.snapshot()
    assert len(again.pods) == len(pods)
    assert again.requested_on("n1")["cpu"] == 3200


def test_every_plugin_on_a_generated_cluster_evicts_the_same_pods_with_either_backend() -> None:
    """The benchmark generator's cluster (every plugin has work) and its every-plugin policy:
    the API-shaped backend, which leaves the snapshot alone, and the simulated one agree pod for
    pod and in order, so what the cycle sees is the framework's doing."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from benchmarks import POLICIES, drop_unregistered
    from benchmarks.generator import NOW, ClusterSpec, generate

    doc, _ = drop_unregistered(yaml.safe_load(POLICIES["all"].read_text()), REGISTRY)
    policy = load_policy(doc, REGISTRY)
    spec = ClusterSpec(nodes=20, pods_per_node=30, seed=7)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(generate(spec))}))
        results = []
        for kind in ("api", "simulated"):
            snapshot = load_snapshot_file(path)
            backend: Any = RecordingBackend() if kind == "api" else SimulatedBackend(snapshot)
            result = Framework(policy, REGISTRY, clock=lambda: NOW).run_cycle(snapshot, backend)
            results.append([(r.namespace, r.name, r.plugin) for r in result.evictions])
    api, simulated = results
    assert api == simulated
    assert len({plugin for _, _, plugin in api}) >= 4, api


def test_a_refused_eviction_stays_in_the_snapshot_and_costs_no_limit() -> None:
    """A PDB refusal (429) in the middle of a plugin: the pod stays in the cycle's snapshot, the
    refusal does not count against maxNoOfPodsToEvictTotal, and the plugin goes on."""
    nodes, _ = cluster_objects()
    guarded = pod("a-guarded", "n1", owner="guarded")
    free = pod("b-free", "n1", owner="free")
    budget = msgspec.convert(
        {
            "metadata": {"name": "guarded", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"pdb": "yes"}}},
        },
        PodDisruptionBudget,
    )
    guarded = msgspec.structs.replace(
        guarded, metadata=msgspec.structs.replace(guarded.metadata, labels={"pdb": "yes"})
    )
    snapshot = ClusterSnapshot(nodes=nodes, pods=[guarded, free], pdbs=[budget])
    doc = dict(POLICY, maxNoOfPodsToEvictTotal=1)
    framework = Framework(load_policy(doc, REGISTRY), REGISTRY)
    result = framework.run_cycle(snapshot, SimulatedEvictionApi(snapshot))
    assert [(r.name, r.result, r.error.split(" ", 1)[0]) for r in result.records] == [
        ("a-guarded", EvictResult.FAILED, "429"),
        ("b-free", EvictResult.EVICTED, ""),
    ]
    assert snapshot.pod("default", "a-guarded") is not None
    assert snapshot.pod("default", "b-free") is None


def test_the_cycle_asks_a_backend_that_remembers_earlier_cycles() -> None:
    """The framework's wrapper around the backend must not hide the live backend's memory of
    what it evicted in earlier cycles (after a relist the same pods come back as new objects)."""

    class RememberingBackend(RecordingBackend):
        def already_evicted(self, pod: Pod) -> bool:
            return pod.metadata.name in ("evict-0", "evict-1")

    nodes, pods = cluster_objects()
    api = RememberingBackend()
    evicted = run(ClusterSnapshot(nodes=nodes, pods=pods), api)
    assert [p.key for p, _ in api.requests] == ["default/evict-2", "default/evict-3"]
    assert evicted == [(f"default/evict-{i}", "RemovePodsViolatingNodeTaints") for i in (2, 3)]
