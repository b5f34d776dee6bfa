"""The placement model's structure (issue 28 item 1): its parts take the state they read, so a
simulator holds no reference cycle and is freed as soon as it is dropped, even with the cyclic
collector paused (as the simulation driver pauses it)."""

from __future__ import annotations

import gc
import sys
import weakref
from pathlib import Path

import msgspec
import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.generator import ClusterSpec, write_snapshot  # noqa: E402

from desched.cluster.file_source import load_snapshot_file  # noqa: E402
from desched.cluster.snapshot import ClusterSnapshot  # noqa: E402
from desched.k8s import pods as k8s_pods  # noqa: E402
from desched.scheduling.placement import PlacementSimulator  # noqa: E402


@pytest.fixture(scope="module")
def snapshot_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("structure") / "cluster.json"
    with path.open("wb") as f:
        write_snapshot(ClusterSpec(nodes=120, pods_per_node=8, seed=5), f)
    return path


def _exercise(snapshot: ClusterSnapshot) -> tuple[list[weakref.ref[object]], int]:
    """A simulator that moves 60 pods (every kind of constraint the generator makes: spread,
    anti-affinity, preferred affinity, taints), and weak references to it and its parts."""
    sim = PlacementSimulator(snapshot)
    moved = 0
    for pod in list(snapshot.iter_pods()):
        if moved == 60:
            break
        if not pod.spec.node_name or not k8s_pods.occupies_node(pod):
            continue
        sim.unbind(pod)
        loose = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=""))
        decision = sim.decide(loose)
        if decision.node:
            sim.bind(
                msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=decision.node))
            )
        moved += 1
    parts: list[object] = [sim, sim.cluster, sim.scorer, sim.table, sim.fits, sim.anti]
    return [weakref.ref(p) for p in parts], moved


def test_a_dropped_simulator_is_freed_without_the_cyclic_collector(snapshot_path: Path) -> None:
    snapshot = load_snapshot_file(snapshot_path)
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        refs, moved = _exercise(snapshot)
        assert moved == 60
        alive = [type(r()).__name__ for r in refs if r() is not None]
        assert alive == []  # freed by reference counting alone: no cycle holds them
    finally:
        if was:
            gc.enable()
