"""The evictionPolicy's memory as kept across restarts: a fresh Safety that restores what another
one saved decides as that one would (cooldown, rate limits, waitForReplacement); the document is
bounded (the oldest entries go first), expired entries are left out, merging is idempotent, and a
document of another shape is refused with a reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from tests.unit.framework.test_safety import NOW, cycle, framework, names, pod

from desched.api.evictionpolicy import Rate, RateScope
from desched.framework import safetystate
from desched.framework.framework import Framework
from desched.framework.safety import Safety

STATEFUL = {
    "cooldown": {"base": "10m", "window": "1h"},
    "rateLimits": {"namespace": {"evictionsPerMinute": 1, "burst": 1}},
}


def carried(fw: Framework, now: datetime, **policy: Any) -> Framework:
    """A new framework (a restarted desched) that restored what ``fw`` saved, through the JSON."""
    assert fw.safety is not None
    text = safetystate.encode(fw.safety.state(now), now).text
    clock = [now]
    fresh = framework(clock, **policy)
    assert fresh.safety is not None
    fresh.safety.restore(safetystate.decode(text), now)
    return fresh


def test_a_restored_state_decides_as_the_saved_one() -> None:
    clock = [NOW]
    fw = framework(clock, evictionPolicy=STATEFUL)
    assert fw.safety is not None and fw.safety.stateful
    first = cycle(fw, [pod("a"), pod("b", owner=("ReplicaSet", "api"))])
    assert names(first.evictions) == ["a"]  # the namespace's bucket holds one eviction
    later = NOW + timedelta(seconds=30)
    # without the saved state a restarted desched would evict at once
    clock[0] = later
    assert names(
        cycle(framework([later], evictionPolicy=STATEFUL), [pod("b", owner=("ReplicaSet", "api"))]).evictions
    ) == ["b"]
    # with it: the bucket is still empty (1/min, 30 s later), the ReplicaSet web cools down
    restored = carried(fw, later, evictionPolicy=STATEFUL)
    again = cycle(restored, [pod("a2"), pod("b", owner=("ReplicaSet", "api"))])
    assert again.evictions == []
    assert sorted((r.name, r.skip_reason) for r in again.skips) == [("a2", "cooldown"), ("b", "rate_limit")]
    # a minute on, the bucket has refilled: "b" goes; web still cools down (10 m)
    minute = NOW + timedelta(seconds=61)
    restored = carried(fw, minute, evictionPolicy=STATEFUL)
    again = cycle(restored, [pod("a2"), pod("b", owner=("ReplicaSet", "api"))])
    assert names(again.evictions) == ["b"]
    assert [(r.name, r.skip_reason) for r in again.skips] == [("a2", "cooldown")]


def test_a_restored_wait_for_replacement_holds_until_ready_or_timeout() -> None:
    clock = [NOW]
    policy = {"waitForReplacement": {"timeout": "5m"}}
    fw = framework(clock, evictionPolicy=policy)
    assert names(cycle(fw, [pod("a"), pod("b")]).evictions) == ["a"]
    later = NOW + timedelta(minutes=1)
    restored = carried(fw, later, evictionPolicy=policy)
    # the replacement is not Ready yet: b waits
    held = cycle(restored, [pod("b"), pod("z-new", ready=False)])
    assert held.evictions == [] and held.skips[0].skip_reason == "wait_for_replacement"
    # after the timeout it goes, even without the replacement
    past = NOW + timedelta(minutes=6)
    restored = carried(fw, past, evictionPolicy=policy)
    assert names(cycle(restored, [pod("b"), pod("z-new", ready=False)]).evictions) == ["b"]


def test_expired_entries_are_left_out() -> None:
    clock = [NOW]
    fw = framework(clock, evictionPolicy={**STATEFUL, "waitForReplacement": {"timeout": "5m"}})
    cycle(fw, [pod("a")])
    assert fw.safety is not None
    state = fw.safety.state(NOW)
    assert (len(state.moves), len(state.buckets), len(state.waiting)) == (1, 1, 1)
    # 2 minutes on: the bucket is full again (dropped), the wait and the move remain
    state = fw.safety.state(NOW + timedelta(minutes=2))
    assert (len(state.moves), len(state.buckets), len(state.waiting)) == (1, 0, 1)
    # past the wait's timeout and the cooldown's window: nothing is left to keep
    assert len(fw.safety.state(NOW + timedelta(hours=1))) == 0


def test_merging_the_same_state_twice_changes_nothing() -> None:
    clock = [NOW]
    fw = framework(clock, evictionPolicy={**STATEFUL, "waitForReplacement": {"timeout": "5m"}})
    cycle(fw, [pod("a"), pod("b", owner=("ReplicaSet", "api"))])
    safety = fw.safety
    assert safety is not None
    saved = safety.state(NOW)
    before = safetystate.encode(saved, NOW).text
    safety.restore(saved, NOW)
    safety.restore(safetystate.decode(before), NOW)
    assert safetystate.encode(safety.state(NOW), NOW).text == before


def test_of_two_buckets_the_emptier_wins_and_moves_are_united() -> None:
    clock = [NOW]
    fw = framework(clock, evictionPolicy=STATEFUL)
    safety = fw.safety
    assert safety is not None
    other = safetystate.SafetyState(
        moves=[safetystate.Move(("default", "ReplicaSet", "web"), (NOW - timedelta(minutes=20),))],
        buckets=[safetystate.Bucket(RateScope.NAMESPACE, "default", 0.0, NOW, Rate(1.0, 1))],
    )
    assert safety.restore(other, NOW) == 2
    result = cycle(fw, [pod("a")])
    # the bucket restored is empty: a rate-limit skip (the move 20 min ago has cooled down: 10 m)
    assert [(r.name, r.skip_reason) for r in result.skips] == [("a", "rate_limit")]
    assert safety.moves(("default", "ReplicaSet", "web")) == [NOW - timedelta(minutes=20)]


def test_rules_that_are_off_take_nothing() -> None:
    safety = Safety({})
    assert not safety.stateful
    fw = framework([NOW], evictionPolicy={"maxEvictionsPerWorkload": 1})
    assert fw.safety is not None and not fw.safety.stateful
    state = safetystate.SafetyState(
        moves=[safetystate.Move(("default", "ReplicaSet", "web"), (NOW,))],
        buckets=[safetystate.Bucket(RateScope.CLUSTER, "", 0.0, NOW, Rate(1.0, 1))],
        waiting=[safetystate.Waiting(("default", "ReplicaSet", "web"), NOW, "default/a", 3)],
    )
    assert fw.safety.restore(state, NOW) == 0
    assert len(fw.safety.state(NOW)) == 0


def test_the_document_is_bounded_and_keeps_the_newest() -> None:
    moves = [
        safetystate.Move(("ns", "ReplicaSet", f"rs-{i:04d}"), (NOW + timedelta(seconds=i),))
        for i in range(2000)
    ]
    full = safetystate.encode(safetystate.SafetyState(moves=moves), NOW)
    assert full.dropped == 0
    limit = len(full.text.encode()) // 4
    small = safetystate.encode(safetystate.SafetyState(moves=moves), NOW, limit=limit)
    assert len(small.text.encode()) <= limit
    kept = safetystate.decode(small.text).moves
    assert small.dropped == 2000 - len(kept) and 400 < len(kept) < 600
    # the newest are kept
    assert {m.workload[2] for m in kept} == {f"rs-{i:04d}" for i in range(2000 - len(kept), 2000)}


def test_the_default_bound_fits_a_configmap() -> None:
    assert safetystate.MAX_BYTES < 1024 * 1024 - 16 * 1024  # room for the object's metadata


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"version": 2}', "version 2, this desched reads 1"),
        ('{"moves": []}', "version null, this desched reads 1"),
        ('{"version": 1, "moves": [{"workload": ["a", "b"], "at": []}]}', "moves.0.workload"),
        (
            '{"version": 1, "waiting": [{"workload": ["a","b","c"], "since": "2026-01-01T00:00:00",'
            ' "pod": "a/b", "before": 1}]}',
            "waiting.0.since",
        ),
        ('{"version": 1, "surprise": 1}', "surprise"),
    ],
)
def test_a_foreign_document_is_refused_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(safetystate.StateError) as e:
        safetystate.decode(text)
    assert reason in str(e.value)


def test_the_document_reads_as_documented() -> None:
    state = safetystate.SafetyState(
        moves=[safetystate.Move(("ns", "ReplicaSet", "web-7d9"), (NOW,))],
        buckets=[safetystate.Bucket(RateScope.NAMESPACE, "ns", 0.0, NOW, Rate(1.0, 1))],
        waiting=[safetystate.Waiting(("ns", "ReplicaSet", "web-7d9"), NOW, "ns/web-7d9-abcde", 3)],
    )
    doc = json.loads(safetystate.encode(state, NOW).text)
    assert doc == {
        "version": 1,
        "savedAt": "2026-11-24T12:00:00Z",
        "moves": [{"workload": ["ns", "ReplicaSet", "web-7d9"], "at": ["2026-11-24T12:00:00Z"]}],
        "buckets": [
            {
                "scope": "namespace",
                "key": "ns",
                "tokens": 0.0,
                "updated": "2026-11-24T12:00:00Z",
                "evictionsPerMinute": 1.0,
                "burst": 1,
            }
        ],
        "waiting": [
            {
                "workload": ["ns", "ReplicaSet", "web-7d9"],
                "since": "2026-11-24T12:00:00Z",
                "pod": "ns/web-7d9-abcde",
                "before": 3,
            }
        ],
    }
    assert safetystate.decode(json.dumps(doc)).waiting[0].since == datetime(2026, 11, 24, 12, tzinfo=UTC)
