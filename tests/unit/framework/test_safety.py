"""The evictionPolicy at the evictor's door: each rule skips with its reason (recorded, counted in
``descheduler_evictions_skipped_total``, listed by simulate), limits as percentages, and the
properties the issue asks for (a workload never has more than its budget unavailable; cooldowns
grow as specified)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import generate_latest
from tests import builders

from desched.api.policy import load_policy
from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import CycleResult, Framework, PluginHandle
from desched.framework.registry import Registry
from desched.framework.safety import is_available
from desched.framework.types import EvictResult, Status
from desched.k8s.objects import Node, Pod
from desched.report.output import result_to_json, write_table
from desched.runtime.metrics import Metrics

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


class EvictEvery:
    """Deschedule: every pod of the cluster, in name order, through ``evict_in_order``."""

    name: ClassVar[str] = "EvictEvery"

    def __init__(self, args: Any, handle: PluginHandle) -> None:
        self.handle = handle

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        pods = sorted(self.handle.snapshot.pods, key=lambda p: p.metadata.name)
        self.handle.evictor.evict_in_order(pods, "test")
        return None


def registry() -> Registry:
    reg = Registry()
    reg.register_all([EvictEvery])
    return reg


def framework(
    clock: list[datetime] | None = None, profile: dict[str, Any] | None = None, **top: Any
) -> Framework:
    reg = registry()
    prof = {
        "name": "p",
        "allowDisablingDefaultEvictor": True,
        "plugins": {
            "deschedule": {"enabled": ["EvictEvery"]},
            "filter": {"disabled": ["DefaultEvictor"]},
            "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
        },
        **(profile or {}),
    }
    policy = load_policy(
        {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [prof], **top}, reg
    )
    times = clock if clock is not None else [NOW]
    return Framework(policy, reg, clock=lambda: times[0])


def pod(name: str, node: str = "n1", owner: tuple[str, str] | None = ("ReplicaSet", "web"), **kw: Any) -> Pod:
    kw.setdefault("ready", True)
    return builders.pod(name, node=node, uid=name, owner=owner, **kw)


def cluster(pods: Sequence[Pod]) -> ClusterSnapshot:
    return builders.snapshot(nodes=[builders.node("n1"), builders.node("n2")], pods=pods)


def cycle(fw: Framework, pods: Sequence[Pod]) -> CycleResult:
    snap = cluster(pods)
    return fw.run_cycle(snap, SimulatedBackend(snap))


def names(records: Sequence[Any]) -> list[str]:
    return [r.name for r in records]


def test_no_block_evicts_as_before() -> None:
    fw = framework()
    assert fw.safety is None
    pods = [pod("a", annotations={"karpenter.sh/do-not-disrupt": "true"}), pod("b"), pod("c")]
    assert names(cycle(fw, pods).evictions) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("switch", "annotation", "value"),
    [
        ("karpenterDoNotDisrupt", "karpenter.sh/do-not-disrupt", "true"),
        ("clusterAutoscalerSafeToEvict", "cluster-autoscaler.kubernetes.io/safe-to-evict", "false"),
    ],
)
def test_opt_outs_each_switched_on_alone(switch: str, annotation: str, value: str) -> None:
    pods = [pod("a", annotations={annotation: value}), pod("b", annotations={annotation: "other"}), pod("c")]
    result = cycle(framework(evictionPolicy={"optOuts": {switch: True}}), pods)
    assert names(result.evictions) == ["b", "c"]
    assert [(r.name, r.skip_reason, r.result) for r in result.skips] == [
        ("a", "opt_out", EvictResult.SKIPPED)
    ]
    assert annotation in result.skips[0].error
    assert result.failures == []  # a skip is not a refusal
    # the other switch does not honour this annotation
    other = "clusterAutoscalerSafeToEvict" if switch == "karpenterDoNotDisrupt" else "karpenterDoNotDisrupt"
    assert names(cycle(framework(evictionPolicy={"optOuts": {other: True}}), pods).evictions) == [
        "a",
        "b",
        "c",
    ]


def test_max_evictions_per_workload_per_cycle() -> None:
    pods = [pod("a"), pod("b"), pod("c"), pod("x", owner=("ReplicaSet", "other")), pod("y", owner=None)]
    result = cycle(framework(evictionPolicy={"maxEvictionsPerWorkload": 1}), pods)
    assert names(result.evictions) == ["a", "x", "y"]
    assert [(r.name, r.skip_reason) for r in result.skips] == [
        ("b", "max_evictions_per_workload"),
        ("c", "max_evictions_per_workload"),
    ]
    assert result.skips[0].error == (
        "ReplicaSet default/web already had 1 eviction(s) in this cycle (maxEvictionsPerWorkload: 1)"
    )


def test_max_unavailable_counts_pods_already_not_ready() -> None:
    pods = [pod("a"), pod("b", ready=False), pod("c"), pod("d")]
    result = cycle(framework(evictionPolicy={"maxUnavailablePerWorkload": 1}), pods)
    # b is unavailable already: a and c would make 2; evicting b itself adds nothing
    assert names(result.evictions) == ["b"]
    assert [r.name for r in result.skips] == ["a", "c", "d"]
    assert result.skips[0].error == (
        "ReplicaSet default/web has 1 of 4 pod(s) unavailable; evicting this one would make 2 "
        "(maxUnavailablePerWorkload: 1 = 1)"
    )


def test_a_pod_already_unavailable_may_always_go() -> None:
    pods = [pod("a", phase="Failed", ready=False), pod("b", owner=("Job", "j"), phase="Pending", ready=False)]
    result = cycle(framework(evictionPolicy={"maxUnavailablePerWorkload": 0}), pods)
    assert names(result.evictions) == ["a", "b"]


@pytest.mark.parametrize("failed_first", [True, False])
def test_max_unavailable_leaves_finished_pods_out_of_replicas_and_unavailable(failed_first: bool) -> None:
    """A ReplicaSet with Failed pods left behind (kubelet-evicted) is counted as the disruption
    controller counts it: 4 replicas, none unavailable, so 50% lets two go, whether the Failed
    pods are evicted before the others (then they add nothing) or after (issue 24, d4)."""
    prefix = "a" if failed_first else "z"
    failed = [pod(f"{prefix}{i}", phase="Failed", ready=False) for i in range(4)]
    running = [pod(f"u{i}") for i in range(4)]
    result = cycle(framework(evictionPolicy={"maxUnavailablePerWorkload": "50%"}), running + failed)
    assert sorted(names(result.evictions)) == sorted(["u0", "u1", *names(failed)])
    assert [r.name for r in result.skips] == ["u2", "u3"]
    assert result.skips[0].error == (
        "ReplicaSet default/web has 2 of 4 pod(s) unavailable; evicting this one would make 3 "
        "(maxUnavailablePerWorkload: 50% = 2)"
    )


def test_max_unavailable_as_percentage_rounds_down() -> None:
    pods = [pod(f"p{i}") for i in range(7)]
    # 30% of 7 is 2.1: 2
    result = cycle(framework(evictionPolicy={"maxUnavailablePerWorkload": "30%"}), pods)
    assert names(result.evictions) == ["p0", "p1"]
    assert {r.skip_reason for r in result.skips} == {"max_unavailable_per_workload"}
    # 10% of 7 is 0: nothing of this workload is evicted
    assert cycle(framework(evictionPolicy={"maxUnavailablePerWorkload": "10%"}), pods).evictions == []


def test_terminating_pods_count_as_unavailable() -> None:
    pods = [pod("a"), pod("b", deleted="2026-11-24T11:59:00Z"), pod("c")]
    result = cycle(framework(evictionPolicy={"maxUnavailablePerWorkload": 1}), pods)
    assert result.evictions == []
    assert [r.name for r in result.skips] == ["a", "c"]  # b: terminating, never sent again


def test_profile_override_applies_to_that_profile_only() -> None:
    fw = framework(
        evictionPolicy={"maxEvictionsPerWorkload": 1},
        profile={"evictionPolicy": {"maxEvictionsPerWorkload": 2}},
    )
    assert names(cycle(fw, [pod("a"), pod("b"), pod("c")]).evictions) == ["a", "b"]


def test_cooldown_doubles_on_each_repeat_within_the_window() -> None:
    clock = [NOW]
    fw = framework(clock, evictionPolicy={"cooldown": {"base": "10m", "max": "30m", "window": "2h"}})
    pods = [pod("a")]

    def at(minutes: int) -> list[str]:
        clock[0] = NOW + timedelta(minutes=minutes)
        result = cycle(fw, pods)
        if result.skips:
            assert result.skips[0].skip_reason == "cooldown"
        return names(result.evictions)

    assert at(0) == ["a"]  # move 1: 10m cooldown
    assert at(9) == []
    assert at(10) == ["a"]  # move 2: 20m
    assert at(29) == []
    assert at(30) == ["a"]  # move 3: 40m, capped at 30m
    assert at(59) == []
    assert at(60) == ["a"]
    # the window forgets moves older than 2h: after a long pause the cooldown is base again
    assert at(60 + 121) == ["a"]
    assert at(60 + 121 + 10) == ["a"]
    assert fw.safety is not None
    assert len(fw.safety.moves(("default", "ReplicaSet", "web"))) == 2


def test_cooldown_does_not_block_a_second_pod_in_the_same_cycle() -> None:
    fw = framework(evictionPolicy={"cooldown": {"base": "10m"}})
    assert names(cycle(fw, [pod("a"), pod("b")]).evictions) == ["a", "b"]
    result = cycle(fw, [pod("c"), pod("d")])  # clock stopped: the next cycle is within the cooldown
    assert result.evictions == []
    assert "cooling down for 10m" in result.skips[0].error


@pytest.mark.parametrize(
    ("windows", "hour", "evicted"),
    [
        # allowed 22:00-02:00 Berlin (UTC+1 in November)
        ([{"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}], 21, True),
        ([{"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}], 20, False),
        ([{"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}], 1, False),
        ([{"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}], 0, True),
        # forbidden on weekdays 09:00-17:00 UTC (2026-11-24 is a Tuesday)
        ([{"schedule": "0 9 * * 1-5", "duration": "8h", "action": "Forbid"}], 12, False),
        ([{"schedule": "0 9 * * 1-5", "duration": "8h", "action": "Forbid"}], 17, True),
    ],
)
def test_disruption_windows(windows: list[dict[str, str]], hour: int, evicted: bool) -> None:
    clock = [NOW.replace(hour=hour)]
    result = cycle(framework(clock, evictionPolicy={"disruptionWindows": windows}), [pod("a")])
    assert names(result.evictions) == (["a"] if evicted else [])
    assert [r.skip_reason for r in result.skips] == ([] if evicted else ["disruption_window"])


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"maxNoOfPodsToEvictTotal": "50%"}, ["a", "b", "c"]),  # 50% of 6 pods
        ({"maxNoOfPodsToEvictPerNode": "50%"}, ["a", "b", "x"]),  # n1: 4 pods -> 2, n2: 2 -> 1
        ({"maxNoOfPodsToEvictPerNamespace": "40%"}, ["a", "b"]),  # default: 5 pods -> 2, other: 1 -> 0
        ({"maxNoOfPodsToEvictPerNode": "20%"}, []),  # 0.8 and 0.4: 0
    ],
)
def test_limits_as_percentages_of_the_pods_at_the_cycle_start(
    limits: dict[str, str], expected: list[str]
) -> None:
    pods = [
        pod("a"),
        pod("b"),
        pod("c"),
        pod("d", namespace="other"),
        pod("x", node="n2"),
        pod("y", node="n2"),
    ]
    assert names(cycle(framework(**limits), pods).evictions) == expected


def test_percentage_limits_count_finished_pods_in_their_base_as_in_their_count() -> None:
    """A node of 4 Failed pods and 1 running one under "50%": 5 pods, 2 evictions (a base of the
    running pod alone gave 0, and the Failed pods could never be cleaned: issue 24, d5)."""
    failed = [pod(f"f{i}", phase="Failed", ready=False) for i in range(4)]
    # n1: 4 Failed and s, 5 pods -> 2; n2: r alone, 1 pod -> 0
    result = cycle(framework(maxNoOfPodsToEvictPerNode="50%"), [*failed, pod("s"), pod("r", node="n2")])
    assert names(result.evictions) == ["f0", "f1"]
    assert {r.name for r in result.failures} == {"f2", "r"}  # (a node over its limit is left)
    assert {r.result for r in result.failures} == {EvictResult.NODE_LIMIT}
    # and the total: 6 pods, "50%" -> 3, whichever finished
    result = cycle(framework(maxNoOfPodsToEvictTotal="50%"), [*failed, pod("s"), pod("r", node="n2")])
    assert names(result.evictions) == ["f0", "f1", "f2"]


def test_skips_are_listed_by_simulate_and_counted_in_the_metric() -> None:
    result = cycle(framework(evictionPolicy={"maxEvictionsPerWorkload": 1}), [pod("a"), pod("b")])
    doc = result_to_json(result, now="t")
    assert doc["evictionsSkipped"] == [
        {
            "namespace": "default",
            "name": "b",
            "node": "n1",
            "profile": "p",
            "plugin": "EvictEvery",
            "reason": "max_evictions_per_workload",
            "detail": "ReplicaSet default/web already had 1 eviction(s) in this cycle "
            "(maxEvictionsPerWorkload: 1)",
        }
    ]
    assert doc["summary"]["skipped"] == {"max_evictions_per_workload": 1}
    assert doc["refused"] == []
    json.dumps(doc)
    metrics = Metrics(process=False)
    for r in result.records:
        metrics.observe_eviction(r)
    text = generate_latest(metrics.registry).decode()
    assert (
        'descheduler_evictions_skipped_total{namespace="default",profile="p",'
        'reason="max_evictions_per_workload",strategy="EvictEvery"} 1.0'
    ) in text
    assert 'descheduler_pods_evicted_total{namespace="default",node="n1",profile="p",result="success"' in text
    assert 'result="skipped"' not in text


def test_table_output_lists_the_skips() -> None:
    import io

    result = cycle(framework(evictionPolicy={"maxEvictionsPerWorkload": 1}), [pod("a"), pod("b")])
    out = io.StringIO()
    write_table(result, out, now="t", pods_total=2)
    text = out.getvalue()
    assert "Skipped by evictionPolicy: 1" in text
    assert "default/b" in text
    assert "Total: 1 pod evicted of 2; skipped by evictionPolicy 1 (max_evictions_per_workload 1)" in text


# ------------------------------------------------------------------------------------- properties


@st.composite
def workloads(draw: st.DrawFn) -> list[Pod]:
    pods: list[Pod] = []
    for w in range(draw(st.integers(1, 4))):
        for i in range(draw(st.integers(1, 8))):
            state = draw(
                st.sampled_from(["ready", "notready", "pending", "terminating", "failed", "succeeded"])
            )
            phase = {"pending": "Pending", "failed": "Failed", "succeeded": "Succeeded"}.get(state, "Running")
            pods.append(
                pod(
                    f"w{w}-{i}",
                    node=draw(st.sampled_from(["n1", "n2"])),
                    owner=("ReplicaSet", f"w{w}"),
                    ready=state not in ("notready", "failed", "succeeded"),
                    phase=phase,
                    deleted="2026-11-24T11:00:00Z" if state == "terminating" else None,
                )
            )
    return pods


@settings(max_examples=150, deadline=None)
@given(workloads(), st.one_of(st.integers(0, 5), st.integers(0, 100).map(lambda n: f"{n}%")))
def test_a_workload_never_has_more_than_its_budget_unavailable(pods: list[Pod], budget: int | str) -> None:
    result = cycle(framework(evictionPolicy={"maxUnavailablePerWorkload": budget}), pods)
    evicted = set(names(result.evictions))
    by_workload: dict[str, list[Pod]] = {}
    for p in pods:
        by_workload.setdefault(p.metadata.name.split("-")[0], []).append(p)
    for everyone in by_workload.values():
        # as the disruption controller: a finished pod is neither a replica nor unavailable
        members = [p for p in everyone if p.status.phase not in ("Succeeded", "Failed")]
        replicas = len(members)
        allowed = budget if isinstance(budget, int) else int(budget[:-1]) * replicas // 100
        before = sum(1 for p in members if not is_available(p))
        after = sum(1 for p in members if not is_available(p) or p.metadata.name in evicted)
        # evicting an available pod only ever stops at the budget; unavailable ones may always go
        assert after <= max(allowed, before)
        available_evicted = [p for p in members if is_available(p) and p.metadata.name in evicted]
        if available_evicted:
            assert after <= allowed


# ------------------------------------------------------------------------------------- rate limits


def test_rate_limits_per_workload_namespace_and_cluster() -> None:
    clock = [NOW]
    fw = framework(
        clock,
        evictionPolicy={
            "rateLimits": {
                "workload": {"evictionsPerMinute": 1, "burst": 2},
                "cluster": {"evictionsPerMinute": 6, "burst": 3},
            }
        },
    )
    pods = [pod("a"), pod("b"), pod("c"), pod("x", owner=("ReplicaSet", "other")), pod("y", owner=None)]
    result = cycle(fw, pods)
    # web: burst 2 (a, b); c skipped by its workload bucket; x takes the cluster's last token
    assert names(result.evictions) == ["a", "b", "x"]
    assert [(r.name, r.skip_reason) for r in result.skips] == [("c", "rate_limit"), ("y", "rate_limit")]
    assert "ReplicaSet default/web has no eviction left in its workload rate limit (1/min, burst 2)" in (
        result.skips[0].error
    )
    assert result.skips[1].error.startswith("the cluster has no eviction left in its cluster rate limit")
    clock[0] = NOW + timedelta(seconds=30)  # the cluster bucket refilled 3 tokens, web's half a token
    assert names(cycle(fw, pods).evictions) == ["x", "y"]
    clock[0] = NOW + timedelta(seconds=60)  # web: 1 token, other: 1, the cluster: 3 again
    assert names(cycle(fw, pods).evictions) == ["a", "x", "y"]


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.1, 120),
    st.integers(1, 10),
    st.lists(st.integers(0, 3600), min_size=1, max_size=40).map(sorted),
)
def test_token_bucket_never_exceeds_its_rate_over_any_window(
    per_minute: float, burst: int, seconds: list[int]
) -> None:
    from desched.api.evictionpolicy import Rate
    from desched.framework.safety import TokenBucket

    rate = Rate(per_minute, burst)
    bucket = TokenBucket(rate, NOW)
    taken: list[float] = []
    for s in seconds:  # at each instant, take all the bucket allows
        now = NOW + timedelta(seconds=s)
        while bucket.available(rate, now):
            bucket.take(rate, now)
            taken.append(s)
    for i, start in enumerate(taken):
        for j in range(i, len(taken)):
            window = taken[j] - start
            # over any window of w seconds: at most burst + rate * w evictions
            assert j - i + 1 <= burst + per_minute * window / 60.0 + 1e-6


# ------------------------------------------------------------------------------- waitForReplacement


def test_wait_for_replacement_one_pod_at_a_time_across_cycles() -> None:
    clock = [NOW]
    fw = framework(clock, evictionPolicy={"waitForReplacement": {"timeout": "10m"}})
    web = [pod("web-a"), pod("web-b"), pod("web-c")]
    result = cycle(fw, web)
    assert names(result.evictions) == ["web-a"]
    assert [r.skip_reason for r in result.skips] == ["wait_for_replacement"] * 2
    assert result.skips[0].error == (
        "ReplicaSet default/web waits for the replacement of default/web-a (evicted at "
        "2026-11-24T12:00:00Z): 2 of 3 pod(s) available; at most until 2026-11-24T12:10:00Z"
    )
    # a minute later the replacement exists but is not Ready: still waiting
    clock[0] = NOW + timedelta(minutes=1)
    pending = [pod("web-b"), pod("web-c"), pod("web-r1", ready=False)]
    assert names(cycle(fw, pending).evictions) == []
    # once it is Ready, the next pod goes (and the workload waits again)
    clock[0] = NOW + timedelta(minutes=2)
    ready = [pod("web-b"), pod("web-c"), pod("web-r1")]
    assert names(cycle(fw, ready).evictions) == ["web-b"]
    # a replacement that never becomes Ready stops the sequence until the timeout
    stuck = [pod("web-c"), pod("web-r1"), pod("web-r2", phase="Pending", ready=False)]
    clock[0] = NOW + timedelta(minutes=11)
    assert names(cycle(fw, stuck).evictions) == []
    clock[0] = NOW + timedelta(minutes=12)
    assert names(cycle(fw, stuck).evictions) == ["web-c"]


def test_wait_for_replacement_is_per_workload() -> None:
    fw = framework(evictionPolicy={"waitForReplacement": {}})
    pods = [pod("a"), pod("b"), pod("x", owner=("ReplicaSet", "other")), pod("y", owner=None)]
    assert names(cycle(fw, pods).evictions) == ["a", "x", "y"]


# -------------------------------------------------------------------------------------- predictive


def test_predictive_skips_same_node_and_pending_replacements() -> None:
    from desched.app.simulate import simulate_cycles

    nodes = [
        builders.node("n1", cpu="8"),
        builders.node("n2", cpu="4", taints=[builders.taint("dedicated", "gpu")]),
        builders.node("n3", cpu="1500m"),
    ]
    pods = [
        # fits only n1 (n2 tainted, n3 too small): its replacement would come back to n1
        pod("big", node="n1", cpu="2", owner=("ReplicaSet", "big")),
        # fits n3 as well: evicted
        pod("small", node="n1", cpu="500m", owner=("ReplicaSet", "small")),
        # its node selector matches no node any more: Pending
        pod("lost", node="n1", cpu="100m", owner=("ReplicaSet", "lost"), node_selector={"pool": "gone"}),
        # a bare pod that fits elsewhere: evicted (nothing re-creates it)
        pod("bare", node="n1", cpu="100m", owner=None),
    ]
    snap = builders.snapshot(nodes=nodes, pods=pods)
    upstream = cycle(framework(), pods)
    assert names(upstream.evictions) == ["bare", "big", "lost", "small"]
    fw = framework(evictionPolicy={"predictive": True})
    sim, _, _ = simulate_cycles(fw, snap, NOW)
    result = sim.cycles[0].result
    assert names(result.evictions) == ["bare", "small"]
    assert [(r.name, r.skip_reason) for r in result.skips] == [
        ("big", "predicted_same_node"),
        ("lost", "predicted_pending"),
    ]
    assert result.skips[0].error == "its replacement would land back on n1"
    assert result.skips[1].error.startswith("its replacement would stay Pending: 0/3 nodes are available")
    # and simulate's own placement agrees: small's replacement lands elsewhere
    placed = {p.name: p for p in sim.cycles[0].placements}
    assert placed["small"].outcome == "placed" and not placed["small"].same_node


@st.composite
def placement_clusters(draw: st.DrawFn) -> tuple[list[Node], list[Pod]]:
    n = draw(st.integers(2, 5))
    nodes = []
    for i in range(n):
        taints = [builders.taint("dedicated", "x")] if draw(st.booleans()) and i else None
        nodes.append(builders.node(f"n{i}", cpu=str(draw(st.integers(1, 4))), taints=taints))
    pods = []
    for j in range(draw(st.integers(1, 12))):
        node = f"n{draw(st.integers(0, n - 1))}"
        owner = draw(st.sampled_from([("ReplicaSet", "a"), ("ReplicaSet", "b"), ("ReplicaSet", "c"), None]))
        pods.append(pod(f"p{j:02d}", node=node, cpu=f"{draw(st.integers(1, 20)) * 100}m", owner=owner))
    return nodes, pods


@settings(max_examples=80, deadline=None)
@given(placement_clusters())
def test_with_predictive_no_eviction_has_a_pending_or_same_node_replacement(
    cluster_: tuple[list[Node], list[Pod]],
) -> None:
    from desched.app.simulate import simulate_cycles

    nodes, pods = cluster_
    snap = builders.snapshot(nodes=nodes, pods=pods)
    sim, _, _ = simulate_cycles(framework(evictionPolicy={"predictive": True}), snap, NOW)
    for placement in sim.cycles[0].placements:
        assert placement.outcome != "pending", placement
        assert not placement.same_node, placement


def test_the_model_forgets_a_refused_eviction() -> None:
    """terminate then unterminate leaves the placement model as it was (spread counts included)."""
    from desched.k8s.replacements import make_replacement, terminating_pod
    from desched.scheduling.placement import PlacementSimulator

    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }
    nodes = [builders.node(f"n{i}", cpu="8") for i in range(3)]
    # n0: 2 pods, n1 and n2: 1; maxSkew 1 keeps a new one off n0 while w0 counts there
    where = {"w0": "n0", "w1": "n1", "w2": "n0", "w3": "n2"}
    pods = [
        pod(name, node=node, cpu="100m", labels={"app": "web"}, spec=spread) for name, node in where.items()
    ]
    snap = builders.snapshot(nodes=nodes, pods=pods)
    probe = make_replacement(pods[0], "probe", NOW, 1)
    fresh = PlacementSimulator(snap.copy()).decide(probe)
    sim = PlacementSimulator(snap.copy())
    gone = terminating_pod(pods[0], NOW)
    sim.terminate(pods[0], gone)
    assert (fresh.feasible, sim.decide(probe, probe=True).feasible) == (2, 3)  # w0 no longer counts
    sim.unterminate(gone, pods[0])
    assert sim.decide(probe) == fresh
    assert sim.snapshot.pod("default", "w0") == pods[0]


def test_the_html_report_lists_the_skips(tmp_path: Any) -> None:
    from desched.app.simulate import simulate_cycles
    from desched.report.html import write_report

    pods = [pod("a", cpu="100m"), pod("b", cpu="100m")]
    snap = builders.snapshot(nodes=[builders.node("n1"), builders.node("n2")], pods=pods)
    sim, _, _ = simulate_cycles(framework(evictionPolicy={"maxEvictionsPerWorkload": 1}), snap, NOW)
    page = write_report(sim, tmp_path, now="t").read_text()
    assert "Skipped by evictionPolicy: 1" in page
    assert "max_evictions_per_workload" in page and "default/b" in page
