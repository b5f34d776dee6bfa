"""Keeping the evictionPolicy's memory in a ConfigMap: the load/merge/save rules of
:class:`desched.runtime.statestore.SafetyPersistence` (a conflict merges and retries, a foreign or
corrupted object is one warning and a fresh start, a failure is logged, counted and retried, every
save is bounded in time) and where the ConfigMap lives. The apiserver round trip itself (and the
RBAC) is proven in tests/e2e/test_safe_disruption.py; here the store is an in-memory one with the
apiserver's resourceVersion rule, so the failure paths can be driven."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.unit.framework.test_safety import NOW, cycle, framework, names, pod

from desched.framework import safetystate
from desched.framework.framework import Framework
from desched.kube.client import ApiError
from desched.runtime import statestore
from desched.runtime.statestore import SafetyPersistence, StateStore, state_location

RULES = {
    "cooldown": {"base": "10m"},
    "rateLimits": {"namespace": {"evictionsPerMinute": 1, "burst": 1}},
}


class MemoryStore(StateStore):
    """The ConfigMap as the apiserver keeps it: a write must name the current resourceVersion."""

    def __init__(self) -> None:
        super().__init__(None, "ops", "desched-safety-state")
        self.text: str | None = None
        self.version = 0
        self.exists = False
        self.fail: ApiError | None = None
        self.hang = False
        #: run before a write lands (another writer sneaking in)
        self.before_write: list[Any] = []
        self.writes = 0

    async def read(self) -> statestore._Object | None:
        if self.hang:
            await asyncio.sleep(3600)
        if self.fail is not None:
            raise self.fail
        return statestore._Object(str(self.version), self.text) if self.exists else None

    async def write(self, text: str, resource_version: str | None) -> str:
        if self.before_write:
            self.before_write.pop(0)()
        if (resource_version is None) == self.exists or (
            resource_version is not None and resource_version != str(self.version)
        ):
            raise ApiError(409, "the object has been modified")
        self.text, self.exists = text, True
        self.version += 1
        self.writes += 1
        return str(self.version)


def persisted(fw: Framework, store: MemoryStore, results: list[str] | None = None) -> SafetyPersistence:
    assert fw.safety is not None
    return SafetyPersistence(
        fw.safety, store, fw.ctx.clock, on_save=(results if results is not None else []).append
    )


def test_saved_then_loaded_by_a_new_process() -> None:
    store = MemoryStore()
    fw = framework([NOW], evictionPolicy=RULES)
    keeper = persisted(fw, store)
    asyncio.run(keeper.load())
    assert keeper.loaded and not store.exists
    assert names(cycle(fw, [pod("a")]).evictions) == ["a"]
    assert asyncio.run(keeper.save())
    assert store.writes == 1
    assert asyncio.run(keeper.save()) and store.writes == 1  # nothing changed: nothing written

    later = NOW + timedelta(seconds=20)
    restarted = framework([later], evictionPolicy=RULES)
    asyncio.run(persisted(restarted, store).load())
    result = cycle(restarted, [pod("b", owner=("ReplicaSet", "api")), pod("a2")])
    assert sorted((r.name, r.skip_reason) for r in result.skips) == [("a2", "cooldown"), ("b", "rate_limit")]


def test_a_cycle_that_changes_nothing_writes_nothing() -> None:
    """Not even the first cycle: the ConfigMap is written only when the state changed (issue 24)."""
    store = MemoryStore()
    fw = framework([NOW], evictionPolicy=RULES)
    results: list[str] = []
    keeper = persisted(fw, store, results)
    asyncio.run(keeper.load())
    assert cycle(fw, []).records == []  # nothing to evict
    assert not keeper.dirty
    assert asyncio.run(keeper.save())
    assert (store.writes, store.exists, results) == (0, False, [])
    assert names(cycle(fw, [pod("b")]).evictions) == ["b"]
    assert keeper.dirty and asyncio.run(keeper.save())
    assert (store.writes, results) == (1, ["saved"])


def test_a_conflict_merges_the_other_writers_entries_and_retries() -> None:
    store = MemoryStore()
    fw = framework([NOW], evictionPolicy=RULES)
    keeper = persisted(fw, store)
    asyncio.run(keeper.load())
    cycle(fw, [pod("a")])

    # a former leader's last save lands between our read and our write
    other = framework([NOW], evictionPolicy=RULES)
    cycle(other, [pod("x", owner=("ReplicaSet", "other"), namespace="team")])
    assert other.safety is not None
    theirs = safetystate.encode(other.safety.state(NOW), NOW).text

    def sneak_in() -> None:
        store.text, store.exists = theirs, True
        store.version += 1

    store.before_write.append(sneak_in)
    results: list[str] = []
    keeper.on_save = results.append
    assert asyncio.run(keeper.save())
    assert results == ["saved"]
    doc = json.loads(store.text or "")
    assert sorted(m["workload"][2] for m in doc["moves"]) == ["other", "web"]
    assert sorted(b["key"] for b in doc["buckets"]) == ["default", "team"]


def test_conflicts_every_time_give_up_after_the_attempts_and_retry_next_cycle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    store.text = safetystate.encode(safetystate.SafetyState(), NOW).text
    store.exists = True
    fw = framework([NOW], evictionPolicy=RULES)
    results: list[str] = []
    keeper = persisted(fw, store, results)
    cycle(fw, [pod("a")])

    def bump() -> None:
        store.version += 1

    store.before_write.extend([bump] * statestore.ATTEMPTS)
    with caplog.at_level(logging.WARNING):
        assert not asyncio.run(keeper.save())
    assert results == ["failed"] and keeper.dirty
    assert "could not save the safety state to ConfigMap ops/desched-safety-state (409" in caplog.text
    assert asyncio.run(keeper.save()) and results == ["failed", "saved"] and not keeper.dirty


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (None, "no state.json key"),
        ("{garbage", "not JSON"),
        ('{"version": 7}', "version 7, this desched reads 1"),
        ('{"version": 1, "moves": [{"workload": 3}]}', "moves.0.workload"),
    ],
)
def test_a_foreign_or_corrupted_object_is_one_warning_and_a_fresh_start(
    text: str | None, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = MemoryStore()
    store.text, store.exists, store.version = text, True, 5
    fw = framework([NOW], evictionPolicy=RULES)
    keeper = persisted(fw, store)
    with caplog.at_level(logging.WARNING):
        asyncio.run(keeper.load())
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and not warnings[0].exc_info
    message = warnings[0].getMessage()
    assert message.startswith(
        f"ConfigMap ops/desched-safety-state does not hold a desched safety state ({reason}"
    )
    assert message.endswith("): ignoring it; the next save replaces it")
    assert names(cycle(fw, [pod("a")]).evictions) == ["a"]
    assert asyncio.run(keeper.save())
    assert safetystate.decode(store.text or "").moves[0].workload == ("default", "ReplicaSet", "web")


def test_an_unreadable_object_does_not_stop_the_run_and_is_merged_at_the_next_save(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    earlier = framework([NOW], evictionPolicy=RULES)
    cycle(earlier, [pod("x", owner=("ReplicaSet", "other"))])
    assert earlier.safety is not None
    store.text = safetystate.encode(earlier.safety.state(NOW), NOW).text
    store.exists = True
    store.fail = ApiError(403, 'configmaps "desched-safety-state" is forbidden')
    fw = framework([NOW], evictionPolicy=RULES)
    results: list[str] = []
    keeper = persisted(fw, store, results)
    with caplog.at_level(logging.WARNING):
        asyncio.run(keeper.load())
    assert not keeper.loaded
    assert (
        "could not read the safety state from ConfigMap ops/desched-safety-state (403 configmaps"
        in caplog.text
    )
    cycle(fw, [pod("a")])
    assert not asyncio.run(keeper.save()) and results == ["failed"]
    store.fail = None
    assert asyncio.run(keeper.save())
    # what the unreadable object held was merged in, not overwritten
    assert sorted(m.workload[2] for m in safetystate.decode(store.text or "").moves) == ["other", "web"]


def test_a_save_is_bounded_in_time(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(statestore, "SAVE_SECONDS", 0.2)
    store = MemoryStore()
    store.hang = True
    fw = framework([NOW], evictionPolicy=RULES)
    results: list[str] = []
    keeper = persisted(fw, store, results)
    cycle(fw, [pod("a")])
    with caplog.at_level(logging.WARNING):
        asyncio.run(keeper.load())
        assert not asyncio.run(keeper.save())
    assert results == ["failed"]
    assert "(no answer within 0.2s)" in caplog.text


def test_forget_merges_again_when_leadership_returns() -> None:
    store = MemoryStore()
    fw = framework([NOW], evictionPolicy=RULES)
    keeper = persisted(fw, store)
    asyncio.run(keeper.load())
    cycle(fw, [pod("a")])
    asyncio.run(keeper.save())
    keeper.forget()
    assert not keeper.loaded
    asyncio.run(keeper.load())
    assert keeper.loaded


def test_where_the_configmap_lives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sa = tmp_path / "namespace"
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert state_location("team/state", "kube-system", sa_file=sa) == ("team", "state")
    assert state_location("desched-safety-state", "kube-system", sa_file=sa) == (
        "kube-system",
        "desched-safety-state",
    )
    sa.write_text("from-sa\n")
    assert state_location("desched-safety-state", "kube-system", sa_file=sa) == (
        "from-sa",
        "desched-safety-state",
    )
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    assert state_location("s", "kube-system", sa_file=sa) == ("from-env", "s")
    assert state_location("explicit/s", "kube-system", sa_file=sa) == ("explicit", "s")


def test_a_policy_without_remembering_rules_keeps_nothing() -> None:
    for rules in ({}, {"maxEvictionsPerWorkload": 1, "predictive": True}):
        fw = framework([NOW], evictionPolicy=rules)
        assert fw.safety is None or not fw.safety.stateful
    for rules in RULES.items():
        fw = framework([NOW], evictionPolicy=dict([rules]))
        assert fw.safety is not None and fw.safety.stateful
    fw = framework([NOW], evictionPolicy={"waitForReplacement": {}})
    assert fw.safety is not None and fw.safety.stateful
