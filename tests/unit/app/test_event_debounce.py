"""Event-driven mode's debounce: a change after a quiet period starts a cycle at once; a change
within ``--event-debounce`` of the one before (a burst) waits the window, so a burst runs one
more cycle, not one per change; a change that comes while a cycle runs is not lost."""

from __future__ import annotations

import asyncio
import time

from tests import builders

from desched.api.policy import load_policy
from desched.app import run as live
from desched.plugins import default_registry

POLICY = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerPolicy",
    "profiles": [
        {
            "name": "p",
            "pluginConfig": [{"name": "RemovePodsViolatingNodeTaints"}],
            "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}},
        }
    ],
}
DEBOUNCE = 0.5


def descheduler() -> live.Descheduler:
    policy = load_policy(POLICY, default_registry())
    options = live.RunOptions(policy_file="-", event_driven=True, debounce=DEBOUNCE, interval=3600)
    d = live.Descheduler(options, policy)
    d.ready = True
    return d


def taint(d: live.Descheduler, key: str) -> None:
    """A node gets a taint (a relevant change)."""
    before = builders.node("n1")
    after = builders.node("n1", taints=[builders.taint(key, "x")])
    d._on_change("Node", "MODIFIED", before, after)


async def waited(d: live.Descheduler) -> float:
    t0 = time.monotonic()
    await asyncio.wait_for(d._wait_next(), 10)
    return time.monotonic() - t0


def test_a_change_after_a_quiet_period_starts_a_cycle_at_once_and_a_burst_waits() -> None:
    async def scenario() -> None:
        d = descheduler()
        taint(d, "a")  # the first change: nothing came before it
        assert d.trigger.is_set() and not d.in_burst
        assert await waited(d) < DEBOUNCE / 2
        d.trigger.clear()  # what the cycle does when it takes its snapshot
        taint(d, "b")  # right after the first one: a burst
        assert d.in_burst
        taint(d, "c")  # more of the burst: the same pending cycle
        assert DEBOUNCE <= await waited(d) < 5
        d.trigger.clear()
        await asyncio.sleep(DEBOUNCE * 1.2)  # the cluster is quiet again
        taint(d, "d")
        assert not d.in_burst
        assert await waited(d) < DEBOUNCE / 2

    asyncio.run(scenario())


def test_irrelevant_changes_do_not_start_a_cycle_nor_make_a_burst() -> None:
    async def scenario() -> None:
        d = descheduler()
        node = builders.node("n1")
        d._on_change("Node", "MODIFIED", node, node)  # a heartbeat: nothing a plugin reads
        assert not d.trigger.is_set()
        taint(d, "a")
        assert not d.in_burst

    asyncio.run(scenario())
