"""The simulation's cycle driver (desched.simulation): replacements of evicted pods placed by the
scheduling queue between cycles, terminating pods, thrashing, node downgrades, and the before/after
picture."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec
import pytest
from tests.unit.scheduling.objects import NOW, anti, node, pod, snap

from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import EvictionRecord, EvictionRequest
from desched.framework.framework import CycleResult
from desched.framework.nodeactions import ActionResult, NodeActionRecord
from desched.framework.types import EvictResult
from desched.scheduling.placement import (
    ORDER_AFTER_CYCLE,
    ORDER_INTERLEAVED,
    TERMINATING_GONE,
    PlacementOptions,
    PlacementSimulator,
)
from desched.simulation import (
    GONE,
    PENDING,
    PLACED,
    THRASH_RE_EVICTED,
    THRASH_SAME_NODE,
    EvictionRecorder,
    cluster_picture,
    simulate,
)

# ----------------------------------------------------------------------------- the cycle driver


#: What the simulated cycles ask the eviction backend.
REQUEST = EvictionRequest("p", "Test", "test")


def cycle_result(
    evicted: Sequence[tuple[str, str, str]] = (),
    *,
    skipped: str | None = None,
    node_actions: Sequence[NodeActionRecord] = (),
) -> CycleResult:
    """A framework cycle result evicting ``evicted`` (namespace, name, node) by p/Test."""
    return CycleResult(
        started=NOW,
        nodes=0,
        skipped=skipped,
        records=[
            EvictionRecord(ns, name, at, "p", "Test", "", EvictResult.EVICTED) for ns, name, at in evicted
        ],
        node_actions=list(node_actions),
    )


def evicting(plan: dict[int, list[str]]) -> Callable[[ClusterSnapshot, EvictionRecorder, int], CycleResult]:
    """A cycle runner evicting, in cycle k, the pods named in plan[k] (namespace default)."""

    def run(s: ClusterSnapshot, backend: EvictionRecorder, k: int) -> CycleResult:
        evicted = []
        for name in plan.get(k, []):
            p = s.pod("default", name)
            assert p is not None, name
            backend.evict(p, REQUEST)
            evicted.append(("default", name, p.spec.node_name))
        return cycle_result(evicted)

    return run


def test_replacements_bare_and_finished_pods() -> None:
    s = snap(
        [node("n1"), node("n2")],
        [
            pod("web-abc", "n1", owner=("ReplicaSet", "web")),
            pod("db-0", "n1", owner=("StatefulSet", "db")),
            pod("bare", "n1", owner=None),
            pod("job-x", "n1", owner=("Job", "job"), phase="Failed"),
        ],
    )
    sim = simulate(s, evicting({1: ["web-abc", "db-0", "bare", "job-x"]}), now=NOW)
    outcome = {p.name: p for p in sim.placements}
    assert outcome["bare"].outcome == GONE and "bare pod" in outcome["bare"].reason
    assert outcome["job-x"].outcome == GONE and "Failed" in outcome["job-x"].reason
    web = outcome["web-abc"]
    assert web.outcome == PLACED and web.replacement.startswith("web-") and web.replacement != "web-abc"
    assert outcome["db-0"].replacement == "db-0"
    placed = s.pod("default", web.replacement)
    assert placed is not None and placed.spec.node_name == web.node and placed.status.phase == "Running"
    assert placed.metadata.creation_timestamp == NOW
    # deterministic names
    s2 = snap([node("n1"), node("n2")], [pod("web-abc", "n1", owner=("ReplicaSet", "web"))])
    assert simulate(s2, evicting({1: ["web-abc"]}), now=NOW).placements[0].replacement == web.replacement


def test_higher_priority_is_placed_first() -> None:
    s = snap(
        [node("n1", cpu="1"), node("n2", cpu="1")],
        [
            pod("low", "n1", cpu="800m", priority=1),
            pod("high", "n2", cpu="800m", priority=1000),
            pod("filler", "n1", cpu="100m", owner=None),
        ],
    )
    # both evicted and both fit again: after the cycle, the higher priority is scheduled first
    sim = simulate(s, evicting({1: ["low", "high"]}), now=NOW, options=AFTER_CYCLE)
    assert [p.name for p in sim.placements] == ["high", "low"]
    s2 = snap(
        [node("n1", cpu="1")],
        [
            pod("low", "n1", cpu="800m", priority=1),
            pod("high", "n1", cpu="800m", priority=1000, owner=("ReplicaSet", "h")),
        ],
    )
    sim2 = simulate(s2, evicting({1: ["low", "high"]}), now=NOW, options=AFTER_CYCLE)
    by = {p.name: p for p in sim2.placements}
    assert by["high"].outcome == PLACED and by["low"].outcome == PENDING
    assert by["low"].reason == "0/1 nodes are available: 1 Insufficient cpu."
    pending = s2.pod("default", by["low"].replacement)
    assert pending is not None and pending.spec.node_name == "" and pending.status.phase == "Pending"
    assert pending.status.conditions and pending.status.conditions[0].reason == "Unschedulable"


AFTER_CYCLE = PlacementOptions(order=ORDER_AFTER_CYCLE, terminating=TERMINATING_GONE)


def test_interleaved_places_each_replacement_as_its_pod_is_evicted() -> None:
    s = snap(
        [node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="1")],
        [
            pod("low", "n1", cpu="800m", priority=1),
            pod("high", "n2", cpu="800m", priority=1000),
            pod("x", "n3", cpu="300m", owner=None),
        ],
    )
    # after the cycle: both nodes are free, high goes first and takes n1 (the first of the tie)
    after = simulate(s.copy(), evicting({1: ["low", "high"]}), now=NOW, options=AFTER_CYCLE)
    assert [(p.name, p.node) for p in after.placements] == [("high", "n1"), ("low", "n2")]
    # interleaved: low's replacement is placed while high still runs on n2: only n1 has room
    gone = PlacementOptions(order=ORDER_INTERLEAVED, terminating=TERMINATING_GONE)
    inter = simulate(s.copy(), evicting({1: ["low", "high"]}), now=NOW, options=gone)
    assert [(p.name, p.node) for p in inter.placements] == [("low", "n1"), ("high", "n2")]


def test_terminating_pods_hold_their_room_and_pending_pods_are_tried_again() -> None:
    s = snap(
        [node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="1")],
        [pod("a", "n1", cpu="800m"), pod("b", "n2", cpu="800m")],
    )
    sim = simulate(s, evicting({1: ["a", "b"]}), now=NOW)  # the default: interleaved, hold
    by = {p.name: p for p in sim.placements}
    # a terminates on n1 holding 800m: its replacement takes n3; b's finds no room (a and b
    # terminating, a's replacement on n3) until the terminating pods are gone, then n1
    assert by["a"].node == "n3"
    assert (by["b"].outcome, by["b"].node) == (PLACED, "n1")
    assert {p.metadata.name for p in s.pods} == {by["a"].replacement, by["b"].replacement}
    # gone at once: each replacement takes its pod's room back
    s = snap(
        [node("n1", cpu="1"), node("n2", cpu="1"), node("n3", cpu="1")],
        [pod("a", "n1", cpu="800m"), pod("b", "n2", cpu="800m")],
    )
    gone = PlacementOptions(terminating=TERMINATING_GONE)
    assert [p.node for p in simulate(s, evicting({1: ["a", "b"]}), now=NOW, options=gone).placements] == [
        "n1",
        "n2",
    ]


def test_a_terminating_pod_keeps_its_anti_affinity_but_not_its_spread_count() -> None:
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "s"}},
            }
        ]
    }
    s = snap(
        [node("n1"), node("n2")],
        [
            pod("a", "n1", labels={"app": "x"}, spec=anti("x")),
            pod("s1", "n1", labels={"app": "s"}, spec=spread),
            pod("s2", "n2", labels={"app": "s"}, spec=spread),
            pod("s3", "n2", labels={"app": "s"}, spec=spread),
        ],
    )
    sim = PlacementSimulator(s)
    new_s = pod("p", labels={"app": "s"}, spec=spread)
    new_a = pod("a2", labels={"app": "x"}, spec=anti("x"))
    assert sim.decide(new_s).feasible == 1  # n2 has 2 of app=s, n1 1: only n1
    assert sim.decide(new_a).node == "n2"
    for name in ("a", "s2"):
        old = s.pod("default", name)
        assert old is not None
        sim.terminate(
            old,
            msgspec.structs.replace(
                old, metadata=msgspec.structs.replace(old.metadata, deletion_timestamp=NOW)
            ),
        )
    # s2 terminating no longer counts on n2 (1 and 1): both nodes take the new pod
    assert sim.decide(new_s).feasible == 2
    # a terminating still repels its like from n1, and still holds its requests
    assert sim.decide(new_a).node == "n2"
    assert sim.free_cpu[sim.cluster.index["n1"]] == 4000 - 200
    # once gone (unbound), n1 takes it again and its room is back
    for name in ("a", "s1"):
        gone = s.pod("default", name)
        assert gone is not None
        sim.unbind(gone)
    assert sim.decide(new_a).node == "n1"
    assert sim.free_cpu[sim.cluster.index["n1"]] == 4000
    assert s.pod("default", "a") is None


def test_a_replacement_landing_where_it_was_is_thrashing() -> None:
    s = snap(
        [node("n1", cpu="1")],
        [
            pod("a", "n1", cpu="800m"),
            pod("b", "n1", cpu="100m", owner=None),
            pod("big", "n1", cpu="100m", owner=("ReplicaSet", "x")),
        ],
    )
    # cycle 1 evicts a: its replacement fits only where it was
    sim = simulate(s, evicting({1: ["a"], 2: ["b"]}), now=NOW, cycles=3)
    first = sim.cycles[0].placements[0]
    assert first.outcome == PLACED and first.same_node
    assert [t.kind for t in sim.thrashing] == [THRASH_SAME_NODE]
    assert sim.stop_reason == "cycle 3 evicted nothing" and sim.converged


def test_retry_after_room_is_freed() -> None:
    s = snap([node("n1", cpu="1")], [pod("a", "n1", cpu="800m"), pod("b", "n1", cpu="300m", owner=None)])
    run = evicting({1: ["a"], 2: ["b"]})
    sim = simulate(s, run, now=NOW, cycles=2)
    c1, c2 = sim.cycles
    assert c1.placements[0].outcome == PENDING
    retried = [p for p in c2.placements if p.retried]
    assert len(retried) == 1 and retried[0].outcome == PLACED and retried[0].name == "a"
    assert [p.outcome for p in c2.placements if not p.retried] == [GONE]


def test_re_evicting_a_replacement_is_thrashing() -> None:
    s = snap([node("n1"), node("n2")], [pod("db-0", "n1", owner=("StatefulSet", "db"))])
    sim = simulate(s, evicting({1: ["db-0"], 2: ["db-0"]}), now=NOW, cycles=2)
    kinds = [t.kind for t in sim.thrashing]
    assert THRASH_RE_EVICTED in kinds
    re = next(t for t in sim.thrashing if t.kind == THRASH_RE_EVICTED)
    assert re.cycle == 2 and "evicted in cycle 1" in re.detail


def test_skipped_cycle_stops() -> None:
    def run(s: ClusterSnapshot, backend: EvictionRecorder, k: int) -> CycleResult:
        return cycle_result(skipped="only 1 ready node(s) match")

    sim = simulate(snap([node("n1")]), run, now=NOW, cycles=3)
    assert len(sim.cycles) == 1 and sim.stop_reason.startswith("cycle 1 was skipped")
    with pytest.raises(ValueError, match="cycles"):
        simulate(snap([node("n1")]), run, now=NOW, cycles=0)


def test_node_downgrades_apply_to_placement() -> None:
    downgrade = NodeActionRecord(
        "n2",
        "downgrade",
        "taint",
        "desched.io/anomalous-node",
        "true",
        "NoSchedule",
        None,
        ActionResult.DOWNGRADED,
    )

    def run(s: ClusterSnapshot, backend: EvictionRecorder, k: int) -> CycleResult:
        p = s.pod("default", "web-1")
        assert p is not None
        backend.evict(p, REQUEST)
        return cycle_result([("default", "web-1", "n1")], node_actions=[downgrade])

    s = snap([node("n1", cpu="1"), node("n2")], [pod("web-1", "n1", cpu="900m"), pod("x", "n1", cpu="200m")])
    sim = simulate(s, run, now=NOW)
    assert sim.placements[0].outcome == PENDING
    assert "{desched.io/anomalous-node: true}" in sim.placements[0].reason
    # the snapshot's node itself is left as it was
    n2 = s.node("n2")
    assert n2 is not None and not n2.spec.taints


# ----------------------------------------------------------------------------- the picture


def test_picture_utilisation_violations_and_skew() -> None:
    tsc = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "api"}},
            }
        ]
    }
    nodes = [
        node("a1", zone="a", cpu="2", memory="2Gi", pods="10", taints=[{"key": "k", "effect": "NoSchedule"}]),
        node("b1", zone="b", cpu="2", memory="2Gi", pods="10"),
    ]
    pods = [
        pod(f"api-{i}", "a1", labels={"app": "api"}, cpu="500m", memory="512Mi", spec=tsc) for i in range(3)
    ] + [
        pod("sel", "b1", spec={"nodeSelector": {"disk": "ssd"}}, cpu="0", memory="0"),
        pod(
            "w1",
            "b1",
            labels={"app": "w"},
            spec=anti("w", "topology.kubernetes.io/zone"),
            cpu="0",
            memory="0",
        ),
        pod("w2", "b1", labels={"app": "w"}, cpu="0", memory="0"),
    ]
    pic = cluster_picture(snap(nodes, pods))
    a1 = next(u for u in pic.nodes if u.name == "a1")
    assert (a1.cpu, a1.memory, a1.pods) == (75.0, 75.0, 30.0)
    assert pic.stats("cpu").mean == 37.5 and pic.stats("cpu").max == 75.0
    assert pic.violations == {"taints": 3, "nodeAffinity": 1, "podAntiAffinity": 1, "topologySpread": 2}
    [skew] = pic.skew
    assert (skew.skew, skew.domains, skew.pods, skew.excess, skew.selector) == (3, 2, 3, 2, "app=api")
    assert skew.declared_by == "ReplicaSet/rs"


def test_a_bind_takes_room_from_the_next_pod_of_the_same_request_class() -> None:
    # two replicas with equal requests: the first takes the room the second would need
    for resource in ("cpu", "memory", "pods"):
        sizes = {
            "cpu": ("600m", "128Mi", "10"),
            "memory": ("100m", "600Mi", "10"),
            "pods": ("100m", "128Mi", "1"),
        }
        cpu, memory, pods = sizes[resource]
        s = snap(
            [node("n1", cpu="1", memory="1Gi", pods=pods)],
            [pod("web-a", "n1", cpu=cpu, memory=memory), pod("web-b", "n1", cpu=cpu, memory=memory)],
        )
        sim = simulate(s, evicting({1: ["web-a", "web-b"]}), now=NOW)
        assert [p.outcome for p in sim.placements] == [PLACED, PENDING], resource
        expected = "1 Too many pods" if resource == "pods" else f"1 Insufficient {resource}"
        assert sim.placements[1].reason == f"0/1 nodes are available: {expected}."


def test_a_cycle_makes_one_model_and_places_the_held_back_replacements_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replacements a terminating pod held back (a StatefulSet's, re-created under the same
    name) are placed on the cycle's own model once its terminating pods are removed from it: no
    second model per cycle (its set-up cost 0.7 s at 5,000 nodes, and two models at once would
    add one model's memory to the peak)."""
    from desched.simulation import driver

    made: list[PlacementSimulator] = []

    class Recorded(PlacementSimulator):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            made.append(self)

    monkeypatch.setattr(driver, "PlacementSimulator", Recorded)
    s = snap([node("n1"), node("n2")], [pod("db-0", "n1", owner=("StatefulSet", "db"))])
    sim = simulate(s, evicting({1: ["db-0"]}), now=NOW)
    assert sim.placements[0].replacement == "db-0"
    assert sim.placements[0].outcome == "placed"
    assert len(made) == 1
    # the model followed the deletion: the old db-0 is gone from it, the new one bound
    assert [p.metadata.name for p in made[0].snapshot.pods_on_node(sim.placements[0].node)] == ["db-0"]
    assert all(p.metadata.deletion_timestamp is None for p in made[0].snapshot.pods)
