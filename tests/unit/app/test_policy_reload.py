"""Live policy reload (issue 27 item 1): what changed between two policies, a ConfigMap update
seen through kubelet's atomic ``..data`` symlink swap (by content, not mtime), a broken policy
that leaves the running one in place, the evictionPolicy's memory carried over, SIGHUP."""

from __future__ import annotations

import asyncio
import copy
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest
from tests import builders

from desched.api.policy import ExtensionPoint, load_policy
from desched.app import run as live
from desched.app.process import CronSpec
from desched.app.reload import content_hash, describe_changes, read_policy
from desched.framework import safetystate
from desched.framework.framework import Framework
from desched.plugins import default_registry
from desched.runtime.metrics import Metrics
from desched.runtime.schedule import parse_schedule

TAINTS = "RemovePodsViolatingNodeTaints"
LIFETIME = "PodLifeTime"


def policy_doc(*plugins: tuple[str, dict[str, Any] | None], cooldown: str | None = None) -> dict[str, Any]:
    cfg: list[dict[str, Any]] = [{"name": "DefaultEvictor", "args": {"evictLocalStoragePods": True}}]
    cfg += [{"name": name, **({"args": args} if args is not None else {})} for name, args in plugins]
    profile: dict[str, Any] = {
        "name": "p",
        "pluginConfig": cfg,
        "plugins": {"deschedule": {"enabled": [name for name, _ in plugins]}},
    }
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [profile],
    }
    if cooldown is not None:
        doc["evictionPolicy"] = {"cooldown": {"base": cooldown}}
    return doc


def test_describe_changes_names_profiles_and_plugins_added_removed_and_args_changed() -> None:
    reg = default_registry()
    old = load_policy(policy_doc((TAINTS, None), (LIFETIME, {"maxPodLifeTimeSeconds": 60})), reg)
    new_doc = policy_doc((LIFETIME, {"maxPodLifeTimeSeconds": 120}), ("RemoveFailedPods", None))
    extra = copy.deepcopy(new_doc["profiles"][0])
    extra["name"] = "q"
    new_doc["profiles"].append(extra)
    new = load_policy(new_doc, reg)
    assert describe_changes(old, new) == [
        "profile q added",
        "plugin p/RemoveFailedPods added",
        f"plugin p/{TAINTS} removed",
        f"plugin p/{LIFETIME} args changed",
    ]
    assert describe_changes(new, old) == [
        "profile q removed",
        f"plugin p/{TAINTS} added",
        "plugin p/RemoveFailedPods removed",
        f"plugin p/{LIFETIME} args changed",
    ]
    assert describe_changes(old, old) == []


# ------------------------------------------------------------------- a ConfigMap volume, as kubelet


class ConfigMapVolume:
    """A ConfigMap mounted as kubelet mounts it: ``policy.yaml -> ..data/policy.yaml``, ``..data ->
    ..<timestamp>``; an update writes a new timestamped directory and renames a new ``..data``
    symlink over the old one (one atomic step), then removes the old directory."""

    def __init__(self, root: Path, doc: Any) -> None:
        self.root = root
        self.generation = 0
        self.current = self._write(doc)
        os.symlink(self.current.name, root / "..data")
        os.symlink("..data/policy.yaml", root / "policy.yaml")
        self.path = root / "policy.yaml"

    def _write(self, doc: Any) -> Path:
        self.generation += 1
        d = self.root / f"..2026_11_29_08_00_00.{self.generation:09d}"
        d.mkdir()
        text = doc if isinstance(doc, str) else yaml.safe_dump(doc)
        (d / "policy.yaml").write_text(text)
        return d

    def update(self, doc: Any) -> None:
        old = self.current
        mtime = os.stat(old / "policy.yaml").st_mtime_ns
        new = self._write(doc)
        # the same mtime as before: only the content tells the change
        os.utime(new / "policy.yaml", ns=(mtime, mtime))
        os.symlink(new.name, self.root / "..data_tmp")
        os.rename(self.root / "..data_tmp", self.root / "..data")
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
        self.current = new


def started(path: Path, *, reload_policy: bool = True) -> live.Descheduler:
    """A Descheduler as run() leaves it before its first cycle (no cluster: the reload needs none)."""
    policy, digest = read_policy(path, default_registry())
    options = live.RunOptions(policy_file=str(path), interval=3600, reload_policy=reload_policy)
    d = live.Descheduler(options, policy, digest)
    d.framework = Framework(policy, d.registry)
    d._watched = d.framework.live_inputs()
    return d


def reloads(metrics: Metrics | None, result: str) -> float:
    assert metrics is not None
    value = metrics.registry.get_sample_value("desched_policy_reloads_total", {"result": result})
    return value or 0.0


def running_hash(metrics: Metrics | None) -> list[str]:
    assert metrics is not None
    return [
        s.labels["hash"]
        for m in metrics.registry.collect()
        if m.name == "desched_policy_info"
        for s in m.samples
        if s.value == 1
    ]


def test_a_symlink_swap_with_the_same_mtime_is_seen_and_applied(tmp_path: Path) -> None:
    vol = ConfigMapVolume(tmp_path, policy_doc((TAINTS, None)))
    d = started(vol.path)
    old_framework = d.framework
    asyncio.run(d._reload(forced=False))  # nothing changed: nothing reloaded
    assert d.framework is old_framework and reloads(d.metrics, "success") == 0
    new_doc = policy_doc((TAINTS, None), (LIFETIME, {"maxPodLifeTimeSeconds": 60}))
    vol.update(new_doc)
    asyncio.run(d._reload(forced=False))
    assert d.framework is not old_framework
    assert [p.enabled(ExtensionPoint.DESCHEDULE) for p in d.policy.profiles] == [(TAINTS, LIFETIME)]
    assert d.policy_hash == content_hash(yaml.safe_dump(new_doc).encode())
    assert reloads(d.metrics, "success") == 1
    assert running_hash(d.metrics) == [d.policy_hash]


def test_a_broken_policy_keeps_the_running_one_with_one_line_naming_the_field(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    vol = ConfigMapVolume(tmp_path, policy_doc((TAINTS, None)))
    d = started(vol.path)
    assert d.metrics is not None
    d.metrics.observe_policy(d.policy_hash)
    running, digest = d.framework, d.policy_hash
    broken = policy_doc((LIFETIME, {"maxPodLifeTimeSeconds": "soon"}))
    vol.update(broken)
    with caplog.at_level(logging.INFO, logger="desched.app.run"):
        asyncio.run(d._reload(forced=False))
        asyncio.run(d._reload(forced=False))  # the same broken content: told once
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, errors
    assert "profiles[0].pluginConfig[1].args.maxPodLifeTimeSeconds" in errors[0]
    assert "\n" not in errors[0]
    assert d.framework is running and d.policy_hash == digest
    assert reloads(d.metrics, "error") == 1 and reloads(d.metrics, "success") == 0
    assert running_hash(d.metrics) == [digest]
    vol.update("not: [a policy")  # a YAML error: another bad content, told again
    asyncio.run(d._reload(forced=False))
    assert reloads(d.metrics, "error") == 2 and d.framework is running
    fixed = policy_doc((LIFETIME, {"maxPodLifeTimeSeconds": 60}))
    vol.update(fixed)
    asyncio.run(d._reload(forced=False))
    assert d.framework is not running and reloads(d.metrics, "success") == 1


def test_the_eviction_policy_memory_carries_over_a_reload(tmp_path: Path) -> None:
    vol = ConfigMapVolume(tmp_path, policy_doc((TAINTS, None), cooldown="10m"))
    d = started(vol.path)
    assert d.framework is not None and d.framework.safety is not None
    now = datetime.now(UTC)
    moved = safetystate.Move(("ns", "ReplicaSet", "web"), (now,))
    d.framework.safety.restore(safetystate.SafetyState(moves=[moved]), now)
    vol.update(policy_doc((TAINTS, None), (LIFETIME, {"maxPodLifeTimeSeconds": 60}), cooldown="10m"))
    old = d.framework
    asyncio.run(d._reload(forced=False))
    assert d.framework is not old and d.framework.safety is not None
    assert d.framework.safety.state(now).moves == [moved]


def test_reload_off_ignores_a_changed_file(tmp_path: Path) -> None:
    vol = ConfigMapVolume(tmp_path, policy_doc((TAINTS, None)))
    d = started(vol.path, reload_policy=False)
    running = d.framework
    vol.update(policy_doc((LIFETIME, {"maxPodLifeTimeSeconds": 60})))
    asyncio.run(d._reload(forced=True))
    assert d.framework is running and reloads(d.metrics, "success") == 0


def test_a_sighup_reloads_between_cycles_without_waiting_for_the_interval(tmp_path: Path) -> None:
    vol = ConfigMapVolume(tmp_path, policy_doc((TAINTS, None)))
    d = started(vol.path)  # interval: an hour

    async def scenario() -> None:
        waiting = asyncio.create_task(d._wait_next())
        await asyncio.sleep(0.1)
        vol.update(policy_doc((LIFETIME, {"maxPodLifeTimeSeconds": 60})))
        d._on_hup()
        for _ in range(100):
            if reloads(d.metrics, "success"):
                break
            await asyncio.sleep(0.02)
        assert not waiting.done()  # the reload does not start a cycle: the wait goes on
        d.stop.set()
        await asyncio.wait_for(waiting, 5)

    asyncio.run(scenario())
    assert reloads(d.metrics, "success") == 1
    assert [p.enabled(ExtensionPoint.DESCHEDULE) for p in d.policy.profiles] == [(LIFETIME,)]


def test_event_driven_triggers_follow_the_reloaded_policy(tmp_path: Path) -> None:
    """An awaited replacement becoming Ready starts an early cycle (waitForReplacement, event-driven)
    under the policy that waits; once a reload drops the rule, the same change starts none."""
    waiting = policy_doc((TAINTS, None))
    waiting["evictionPolicy"] = {"waitForReplacement": {"timeout": "10m"}}
    vol = ConfigMapVolume(tmp_path, waiting)
    policy, digest = read_policy(vol.path, default_registry())
    options = live.RunOptions(policy_file=str(vol.path), interval=3600, event_driven=True)
    d = live.Descheduler(options, policy, digest)
    d.framework = Framework(policy, d.registry)
    d.ready = True
    assert d.framework.safety is not None
    now = datetime.now(UTC)
    awaited = safetystate.Waiting(("default", "ReplicaSet", "web"), now, "web-0", 2)
    d.framework.safety.restore(safetystate.SafetyState(waiting=[awaited]), now)
    starting = builders.pod("web-1", owner=("ReplicaSet", "web"), ready=False)
    ready = builders.pod("web-1", owner=("ReplicaSet", "web"), ready=True)

    d._on_change("Pod", "MODIFIED", starting, ready)
    assert d.trigger.is_set()  # the policy that waits: an early cycle

    d.trigger.clear()
    vol.update(policy_doc((TAINTS, None)))  # no waitForReplacement any more
    asyncio.run(d._reload(forced=False))
    assert reloads(d.metrics, "success") == 1
    d._on_change("Pod", "MODIFIED", starting, ready)
    assert not d.trigger.is_set()


def test_a_sighup_reloads_while_waiting_for_a_cron_schedules_next_time(tmp_path: Path) -> None:
    vol = ConfigMapVolume(tmp_path, policy_doc((TAINTS, None)))
    policy, digest = read_policy(vol.path, default_registry())
    cron = parse_schedule("0 2 * * *", "UTC", environ={}, localtime=Path("/nonexistent/localtime"))
    options = live.RunOptions(policy_file=str(vol.path), cron=CronSpec("0 2 * * *", "UTC"))
    d = live.Descheduler(options, policy, digest, schedule=cron)
    d.framework = Framework(policy, d.registry)

    async def scenario() -> None:
        waiting = asyncio.create_task(d._wait_next())  # the next 02:00, hours away at most
        await asyncio.sleep(0.1)
        vol.update(policy_doc((LIFETIME, {"maxPodLifeTimeSeconds": 60})))
        d._on_hup()
        for _ in range(100):
            if reloads(d.metrics, "success"):
                break
            await asyncio.sleep(0.02)
        assert not waiting.done()
        d.stop.set()
        await asyncio.wait_for(waiting, 5)

    asyncio.run(scenario())
    assert reloads(d.metrics, "success") == 1
    assert [p.enabled(ExtensionPoint.DESCHEDULE) for p in d.policy.profiles] == [(LIFETIME,)]


def test_a_reload_that_needs_a_restart_keeps_the_running_policy(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """metricsProviders, or a plugin reading objects the running cache does not watch (Warning
    Events for RemoveAnomalyPods), apply only at a start: refused as a broken policy is."""
    vol = ConfigMapVolume(tmp_path, policy_doc((TAINTS, None)))
    d = started(vol.path)
    running = d.framework
    with_metrics = policy_doc((TAINTS, None))
    with_metrics["metricsProviders"] = [{"source": "KubernetesMetrics"}]
    vol.update(with_metrics)
    with caplog.at_level(logging.ERROR, logger="desched.app.run"):
        asyncio.run(d._reload(forced=False))
        vol.update(policy_doc((TAINTS, None), ("RemoveAnomalyPods", None)))
        asyncio.run(d._reload(forced=False))
    errors = [r.getMessage() for r in caplog.records]
    assert len(errors) == 2 and "metricsProviders: changed: a restart applies it" in errors[0]
    assert "profiles: a plugin now reads Warning Events" in errors[1]
    assert d.framework is running and reloads(d.metrics, "error") == 2 and reloads(d.metrics, "success") == 0


def test_plugins_register_their_metrics_in_the_runs_registry_across_a_reload(tmp_path: Path) -> None:
    """A plugin's own metrics (RemoveAnomalyPods' gauges) are in /metrics from the start of a run
    whose policy enables it, and a reloaded policy's instance keeps reporting to the same series."""
    anomaly = ("RemoveAnomalyPods", {"minPodStartupSeconds": 60})
    vol = ConfigMapVolume(tmp_path, policy_doc(anomaly))
    d = started(vol.path)
    assert d.metrics is not None
    d.framework = d._framework(d.policy)  # as run() builds it
    d._watched = d.framework.live_inputs()
    assert d.framework.ctx.metrics_registry is d.metrics.plugins
    text = generate_latest(d.metrics.registry).decode()
    assert "# TYPE descheduler_anomaly_pods_anomalous gauge" in text
    assert "# TYPE descheduler_anomaly_total counter" in text
    vol.update(policy_doc(("RemoveAnomalyPods", {"minPodStartupSeconds": 120})))
    old = d.framework
    asyncio.run(d._reload(forced=False))
    assert d.framework is not old and reloads(d.metrics, "success") == 1
    assert d.framework.ctx.metrics_registry is d.metrics.plugins
