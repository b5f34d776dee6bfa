"""desched.app.run is the composition root of ``desched run`` (issue 29): the plugin registry, the
policy's framework and the process services are built once, by app, and handed to the live loop;
the CLI hands over flag values only; the run hears of an eviction one way."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import builders

from desched.app import process
from desched.app import run as live
from desched.app.outcomes import EvictionOutcomes
from desched.framework.evictor import EvictionRecord
from desched.framework.framework import Framework
from desched.framework.types import EvictResult
from desched.plugins import default_registry
from desched.runtime.metrics import Metrics

TAINTS = "RemovePodsViolatingNodeTaints"


def write_policy(path: Path, *plugins: str) -> Path:
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {"name": "p", "pluginConfig": [], "plugins": {"deschedule": {"enabled": list(plugins)}}}
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


class Counted:
    """Counts the registries and frameworks made through desched.app.run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.registries: list[Any] = []
        self.frameworks: list[Framework] = []
        counted = self

        def registry() -> Any:
            made = default_registry()
            counted.registries.append(made)
            return made

        class CountedFramework(Framework):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                counted.frameworks.append(self)

        monkeypatch.setattr(live, "default_registry", registry)
        monkeypatch.setattr(live, "Framework", CountedFramework)


def handed_over(monkeypatch: pytest.MonkeyPatch, options: live.RunOptions) -> live.Descheduler:
    """Run ``desched run`` up to the moment its loop would start: the Descheduler it hands over."""
    seen: list[live.Descheduler] = []

    def loop_run(coro: Coroutine[Any, Any, int]) -> int:
        assert coro.cr_frame is not None
        seen.append(coro.cr_frame.f_locals["self"])
        coro.close()
        return 0

    monkeypatch.setattr(live.kube_loop, "run", loop_run)
    assert live.run(options) == 0
    (d,) = seen
    return d


def test_run_builds_the_registry_and_the_framework_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = Counted(monkeypatch)
    policy = write_policy(tmp_path / "policy.yaml", TAINTS)
    d = handed_over(monkeypatch, live.RunOptions(policy_file=str(policy), interval=60))
    assert len(counted.registries) == 1 and len(counted.frameworks) == 1
    # the loop is given what was built, not a registry or framework of its own
    assert d.registry is counted.registries[0]
    assert d.framework is counted.frameworks[0]
    # a cycle boundary with the policy file unchanged builds nothing
    asyncio.run(d._reload(forced=False))
    assert len(counted.registries) == 1 and len(counted.frameworks) == 1
    # a changed policy takes over with a framework of its own, on the same registry
    write_policy(policy, TAINTS, "RemovePodsViolatingInterPodAntiAffinity")
    asyncio.run(d._reload(forced=False))
    assert len(counted.registries) == 1 and len(counted.frameworks) == 2
    assert d.framework is counted.frameworks[1]


def test_run_builds_the_process_services_from_the_flag_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI hands over the serving and cron flags' values; app builds the TLS context (a
    self-signed certificate in --cert-dir) and the schedule, and gives them to the loop."""
    policy = write_policy(tmp_path / "policy.yaml", TAINTS)
    options = live.RunOptions(
        policy_file=str(policy),
        tls=process.ServingTLS(cert_dir=str(tmp_path), min_version="VersionTLS13"),
        cron=process.CronSpec("*/5 * * * *", "UTC"),
    )
    d = handed_over(monkeypatch, options)
    assert isinstance(d.tls, ssl.SSLContext) and d.tls.minimum_version is ssl.TLSVersion.TLSv1_3
    assert (tmp_path / "desched.crt").is_file()
    assert d.schedule is not None
    after = d.schedule.next_after(datetime(2026, 11, 29, 10, 1, tzinfo=UTC))
    assert after == datetime(2026, 11, 29, 10, 5, tzinfo=UTC)
    assert d.tracing is None
    assert not options.one_shot  # a cron schedule is not one cycle


def test_plain_http_builds_no_tls_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    policy = write_policy(tmp_path / "policy.yaml", TAINTS)
    options = live.RunOptions(
        policy_file=str(policy), tls=process.ServingTLS(cert_dir=str(tmp_path), secure=False)
    )
    assert handed_over(monkeypatch, options).tls is None
    assert not (tmp_path / "desched.crt").exists()


def record(result: EvictResult = EvictResult.EVICTED) -> EvictionRecord:
    pod = builders.pod("a", node="n1")
    return EvictionRecord(
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        node="n1",
        profile="p",
        plugin=TAINTS,
        reason="",
        result=result,
    )


class Events:
    def __init__(self) -> None:
        self.told: list[str] = []

    def observe(self, r: EvictionRecord) -> None:
        self.told.append(r.name)


@pytest.mark.parametrize("dry_run", [False, True])
def test_an_eviction_is_heard_once_by_the_metrics_and_the_events(dry_run: bool) -> None:
    metrics = Metrics()
    events = Events()
    outcomes = EvictionOutcomes(metrics, events, dry_run=dry_run)  # type: ignore[arg-type]
    outcomes.evicted(record())
    evicted = metrics.registry.get_sample_value(
        "descheduler_pods_evicted_total",
        {"result": "success", "strategy": TAINTS, "namespace": "default", "node": "n1", "profile": "p"},
    )
    assert evicted == 1
    assert events.told == ([] if dry_run else ["a"])  # a dry run records no Events


def test_the_cycle_has_one_observer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The framework is told of each eviction through the one EvictionOutcomes of the run."""
    policy = write_policy(tmp_path / "policy.yaml", TAINTS)
    d = handed_over(monkeypatch, live.RunOptions(policy_file=str(policy), interval=60))
    seen: dict[str, Any] = {}

    def run_cycle(snapshot: Any, backend: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise RuntimeError("stop here")

    assert d.framework is not None
    monkeypatch.setattr(d.framework, "run_cycle", run_cycle)
    cache: Any = type("Cache", (), {"snapshot": lambda self: builders.snapshot(nodes=[], pods=[])})()

    async def cycle() -> None:
        with pytest.raises(RuntimeError, match="stop here"):
            assert d.framework is not None
            await d._cycle(d.framework, live.CycleServices(api=None, cache=cache))

    asyncio.run(cycle())
    assert list(seen["observers"]) == [d.outcomes.evicted]
