"""NodeScorer's array pass (many feasible nodes: the other scores by signature, every feasible
node's resource score at once, the winner among the highest totals) picks what its list pass
picks, node and score, over a simulator kept across binds and removals: the arrays it keeps of
the node table's columns must follow every change (a stale one would score a node as it was).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from tests.unit.scheduling.objects import node, pod, snap

from desched.k8s.objects import Node, Pod
from desched.scheduling.placement import PlacementSimulator
from desched.scheduling.placement import scores as scores_module
from desched.scheduling.placement.classes import PreFilter
from desched.scheduling.placement.scores import ARRAY_MIN_FEASIBLE, NodeScorer

HOST = "kubernetes.io/hostname"
N_NODES = 300


def cluster_nodes() -> list[Node]:
    out = []
    for k in range(N_NODES):
        cpu = ("2", "4", "8", "16")[k % 4]
        memory = ("4Gi", "8Gi", "16Gi", "32Gi", "8Gi")[k % 5]
        if k % 97 == 5:
            memory = "0"  # no memory allocatable: scored by the list pass inside the array one
        if k % 89 == 7:
            memory = "9Pi"  # beyond exact floats (2**52 bytes): the same
        taints = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}] if k % 7 == 0 else None
        out.append(node(f"n{k:03d}", cpu=cpu, memory=memory, pods="40", zone="abc"[k % 3], taints=taints))
    return out


def replica(
    name: str, app: str, cpu: str | None, memory: str | None, spec: dict[str, Any] | None = None
) -> Pod:
    return pod(name, cpu=cpu, memory=memory, labels={"app": app}, spec=spec)


def workload() -> Iterator[Pod]:
    """Replicas of a few workloads, interleaved: plain requests, best-effort ones, preferred
    anti-affinity by hostname (counts per node) and a soft zone spread."""
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "spread"}},
            }
        ]
    }
    prefer_apart = {
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": "apart"}},
                            "topologyKey": HOST,
                        },
                    }
                ]
            }
        }
    }
    for k in range(60):
        yield replica(f"web-{k}", "web", "700m", "1500Mi")
        yield replica(f"batch-{k}", "batch", None, None)
        yield replica(f"apart-{k}", "apart", "300m", "3Gi", prefer_apart)
        yield replica(f"spread-{k}", "spread", "1", "512Mi", spread)


def bound(p: Pod, on: str) -> Pod:
    return msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, node_name=on))


def test_the_array_pass_picks_what_the_list_pass_picks_across_binds_and_removals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sim = PlacementSimulator(snap(cluster_nodes()))
    array_pass = NodeScorer._best_arrays
    compared = 0

    def checked(self: NodeScorer, pre: PreFilter, feasible: list[int], start: int) -> tuple[int, int]:
        nonlocal compared
        got = array_pass(self, pre, feasible, start)
        with monkeypatch.context() as m:
            m.setattr(scores_module, "ARRAY_MIN_FEASIBLE", N_NODES + 1)  # the list pass
            want = self.best(pre.cls.pod, pre, feasible, start)
        assert got == want, (len(feasible), start)
        compared += 1
        return got

    monkeypatch.setattr(NodeScorer, "_best_arrays", checked)
    placed: list[Pod] = []
    for k, p in enumerate(workload()):
        decision = sim.decide(p)
        assert decision.node, decision.reason
        assert decision.feasible >= ARRAY_MIN_FEASIBLE
        b = bound(p, decision.node)
        sim.bind(b)
        placed.append(b)
        if k % 5 == 4:
            # a pod gone: its node has more room again
            sim.unbind(placed.pop(0))
    assert compared == 240


def test_a_small_cluster_does_not_import_numpy() -> None:
    """The list pass below ARRAY_MIN_FEASIBLE feasible nodes: a small cluster's simulate does
    not pay NumPy's import."""
    code = (
        "import sys\n"
        "from tests.unit.scheduling.objects import node, pod, snap\n"
        "from desched.scheduling.placement import PlacementSimulator\n"
        "sim = PlacementSimulator(snap([node(f'n{k}') for k in range(50)]))\n"
        "assert sim.decide(pod('p')).node\n"
        "print('numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
