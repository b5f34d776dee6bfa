"""The /metrics exposition text: upstream's names, labels and bucket boundaries; no ``_created``
series; ``process_*`` metrics; build info with the git SHA."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from desched.framework.evictor import EvictionRecord
from desched.framework.framework import PluginRun
from desched.framework.pluginmetrics import MetricsRegistryError
from desched.framework.types import EvictResult
from desched.runtime.metrics import Metrics

ROOT = Path(__file__).resolve().parents[3]

# upstream metrics/metrics.go (v0.36): LoopDuration and StrategyDuration
LOOP = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0)
UPSTREAM_LOOP_BUCKETS = [*map(str, LOOP), "+Inf"]
UPSTREAM_STRATEGY_BUCKETS = [*UPSTREAM_LOOP_BUCKETS[:13], "+Inf"]


def exposition(m: Metrics) -> str:
    return generate_latest(m.registry).decode()


def test_histograms_have_upstreams_bucket_boundaries() -> None:
    m = Metrics()
    m.observe_cycle(0.3)
    m.observe_plugin(
        PluginRun(
            profile="default", plugin="PodLifeTime", extension_point="deschedule", seconds=0.02, evicted=0
        )
    )
    text = exposition(m)
    loop = re.findall(r'^descheduler_loop_duration_seconds_bucket\{le="([^"]+)"\} (\S+)$', text, re.M)
    assert [le for le, _ in loop] == UPSTREAM_LOOP_BUCKETS
    assert dict(loop)["0.25"] == "0.0" and dict(loop)["0.5"] == "1.0"
    strategy = re.findall(
        r"^descheduler_strategy_duration_seconds_bucket"
        r'\{le="([^"]+)",profile="default",strategy="PodLifeTime"\} (\S+)$',
        text,
        re.M,
    )
    assert [le for le, _ in strategy] == UPSTREAM_STRATEGY_BUCKETS
    assert dict(strategy)["0.01"] == "0.0" and dict(strategy)["0.025"] == "1.0"
    assert "# TYPE descheduler_loop_duration_seconds histogram" in text
    assert "# TYPE descheduler_strategy_duration_seconds histogram" in text


def test_no_created_series_and_eviction_counter_labels() -> None:
    m = Metrics()
    for i, result in enumerate((EvictResult.EVICTED, EvictResult.EVICTED, EvictResult.FAILED)):
        m.observe_eviction(EvictionRecord("ns", f"p{i}", "n1", "prof", "RemoveDuplicates", "dup", result))
    m.observe_cycle(1.0)
    text = exposition(m)
    assert "_created" not in text
    assert "# TYPE descheduler_pods_evicted_total counter" in text
    assert (
        'descheduler_pods_evicted_total{namespace="ns",node="n1",profile="prof",result="success",'
        'strategy="RemoveDuplicates"} 2.0'
    ) in text
    assert 'result="error",strategy="RemoveDuplicates"} 1.0' in text
    # one sample per label set: no doubled series
    assert len(re.findall(r"^descheduler_pods_evicted_total\{", text, re.M)) == 2


def test_eviction_counter_series_are_kept_by_label_values() -> None:
    """The counter's children are looked up once per label set (Metrics keeps them): evictions and
    reconciled outcomes with the same labels count on one series, other labels on their own."""
    m = Metrics()

    def record(node: str, result: EvictResult = EvictResult.EVICTED) -> EvictionRecord:
        return EvictionRecord("ns", "p", node, "prof", "RemoveDuplicates", "dup", result)

    for node in ("n1", "n2", "n1", "n1"):
        m.observe_eviction(record(node))
    m.observe_reconciled(record("n2", EvictResult.UNKNOWN), "evicted")
    m.observe_reconciled(record("n2", EvictResult.UNKNOWN), "not evicted")

    def value(node: str, result: str) -> float | None:
        labels = {"result": result, "strategy": "RemoveDuplicates", "profile": "prof", "namespace": "ns"}
        return m.registry.get_sample_value("descheduler_pods_evicted_total", labels | {"node": node})

    assert (value("n1", "success"), value("n2", "success"), value("n2", "error")) == (3.0, 2.0, 1.0)
    assert value("n1", "error") is None
    assert len(re.findall(r"^descheduler_pods_evicted_total\{", exposition(m), re.M)) == 3


def test_process_metrics_on_linux() -> None:
    text = exposition(Metrics())
    for name, kind in (
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ):
        assert f"# TYPE {name} {kind}" in text, name
    rss = float(re.search(r"^process_resident_memory_bytes (\S+)$", text, re.M).group(1))  # type: ignore[union-attr]
    assert rss > 10 * 2**20  # a Python process with these imports holds more than 10 MiB


def test_build_info_carries_version_and_git_sha() -> None:
    text = exposition(Metrics())
    m = re.search(r"^descheduler_build_info\{(.*)\} 1\.0$", text, re.M)
    assert m is not None
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
    assert set(labels) == {"GoVersion", "AppVersion", "DeschedulerVersion", "GitBranch", "GitSha1"}
    assert labels["AppVersion"] == "0.1" and labels["DeschedulerVersion"] == "v0.1.0"
    assert labels["GoVersion"].startswith("python3.")
    # this test runs from a git checkout: the SHA is the checkout's HEAD
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    )
    assert labels["GitSha1"] == head.stdout.strip()


def test_build_info_from_the_image_build_args() -> None:
    # the image has no .git: deploy/Dockerfile bakes DESCHED_GIT_SHA/DESCHED_GIT_BRANCH in
    code = (
        "from prometheus_client import generate_latest; from desched.runtime.metrics import Metrics;"
        "print(generate_latest(Metrics().registry).decode())"
    )
    env = {"DESCHED_GIT_SHA": "0123abcd", "DESCHED_GIT_BRANCH": "release-0.1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert 'GitBranch="release-0.1",GitSha1="0123abcd"' in out


def test_plugins_register_their_own_metrics_beside_deschedulers() -> None:
    """``handle.metrics_registry`` of a live run: a plugin's metrics in /metrics, under its names."""
    m = Metrics(process=False)
    judged = m.plugins.counter("my_plugin_judged_total", "Pods my plugin judged", ["profile", "reason"])
    judged.labels("p", "Stuck").inc(2)
    # another profile's instance (or a reloaded policy's) asks again: the same metric
    m.plugins.counter("my_plugin_judged_total", "Pods my plugin judged", ["profile", "reason"]).labels(
        "p", "Stuck"
    ).inc()
    m.plugins.gauge("my_plugin_nodes", "Nodes my plugin watches").labels().set(4)
    text = exposition(m)
    assert "# HELP my_plugin_judged_total Pods my plugin judged\n# TYPE my_plugin_judged_total counter" in (
        text
    )
    assert 'my_plugin_judged_total{profile="p",reason="Stuck"} 3.0' in text
    assert "# TYPE my_plugin_nodes gauge\nmy_plugin_nodes 4.0" in text


def test_plugin_metrics_that_clash_are_refused() -> None:
    m = Metrics(process=False)
    m.plugins.gauge("my_plugin_nodes", "Nodes", ["profile"])
    with pytest.raises(MetricsRegistryError, match="already registered differently"):
        m.plugins.gauge("my_plugin_nodes", "Nodes", ["node"])
    with pytest.raises(MetricsRegistryError, match="ends in _total"):
        m.plugins.counter("my_plugin_nodes", "Nodes", ["profile"])
    with pytest.raises(ValueError, match="Duplicated timeseries"):  # desched's own names are taken
        m.plugins.counter("descheduler_pods_evicted_total", "Evicted", ["profile"])
    with pytest.raises(MetricsRegistryError, match="without labels"):
        m.plugins.gauge("my_plugin_up", "Up").labels("p")
