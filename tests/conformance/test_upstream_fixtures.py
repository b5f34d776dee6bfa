"""Upstream descheduler's own unit-test cases, replayed against desched (one test per fixture id).

Comparison rules (fixtures README, "Nondeterminism, and how to compare"):
1. the eviction count equals ``expectedCount`` (or is at least ``expectedMinCount``);
2. every name in ``expectedEvictedPods`` is among the evicted;
3. where upstream's evicted set was stable over 50 runs, ours is the same multiset, and where its
   order was stable too, the same order;
4. where it was not stable, ours has the same size (any set is legitimate: desched breaks
   upstream's map-order ties by name, deterministically);
5. DefaultEvictor: every Filter / PreEvictionFilter verdict matches.

Cases where desched deliberately differs are listed in DIVERGENCES with the reason, and their
test asserts desched's documented behaviour instead: nothing is skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from tests.conformance import harness

Check = Callable[[dict[str, Any], list[tuple[str, str]]], None]


def _each_pod_evicted_once(fixture: dict[str, Any], evicted: list[tuple[str, str]]) -> None:
    upstream = sorted({(e["namespace"], e["name"]) for e in fixture["evicted"]})
    assert len(set(evicted)) == len(evicted), f"a pod was evicted twice: {evicted}"
    if fixture["stability"]["sameEvictedSet"]:
        assert sorted(evicted) == upstream
    else:  # which pods upstream picks varies between runs; how many does not
        assert len(evicted) == len(upstream), f"evicted {evicted}, upstream (deduplicated) {upstream}"


#: fixture id -> (why desched differs, what desched does instead).
DIVERGENCES: dict[str, tuple[str, Check]] = {
    "RemoveDuplicates/TestRemoveDuplicatesUniformly/Evict_pods_uniformly_with_two_replica_sets": (
        "The pods have two ReplicaSet owner references, so upstream evicts two pods twice each "
        "(4 requests; the test's own comment says 2 evictions). desched never sends a second "
        "eviction for a pod it already evicted in the cycle, so it evicts the same two pods once.",
        _each_pod_evicted_once,
    ),
}


def _ids(plugin: str | None = None, *, strategy: bool) -> list[Any]:
    params = []
    for path in harness.fixture_paths(plugin):
        fixture = harness.load(path)
        if (fixture["plugin"] == "DefaultEvictor") == strategy:
            continue
        params.append(pytest.param(path, id=fixture["id"]))
    return params


@pytest.mark.parametrize("path", _ids(strategy=True))
def test_strategy_fixture(path: Any) -> None:
    fixture = harness.load(path)
    evicted = harness.run_strategy(fixture).evicted
    if fixture["id"] in DIVERGENCES:
        _, check = DIVERGENCES[fixture["id"]]
        check(fixture, evicted)
        return
    upstream = [(e["namespace"], e["name"]) for e in fixture["evicted"]]
    if fixture["expectedCount"] is not None:
        assert len(evicted) == fixture["expectedCount"], f"evicted {evicted}, upstream {upstream}"
    if "expectedMinCount" in fixture:
        assert len(evicted) >= fixture["expectedMinCount"], f"evicted {evicted}"
    names = [name for _, name in evicted]
    for name in fixture.get("expectedEvictedPods") or ():
        assert name in names, f"{name} not evicted; evicted {evicted}"
    stability = fixture["stability"]
    if stability["sameEvictedSet"]:
        assert Counter(evicted) == Counter(upstream), f"evicted {evicted}, upstream {upstream}"
        if stability["sameEvictionOrder"]:
            assert evicted == upstream
    else:
        assert len(evicted) == len(upstream), f"evicted {evicted}, upstream sets {stability}"


@pytest.mark.parametrize("path", _ids(strategy=False))
def test_default_evictor_fixture(path: Any) -> None:
    fixture = harness.load(path)
    expected = [c["result"] for c in fixture["checks"]]
    assert harness.run_default_evictor(fixture) == expected
