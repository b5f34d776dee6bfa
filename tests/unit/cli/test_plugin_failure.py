"""A plugin that raises makes ``simulate`` exit non-zero, naming the plugin and the pod (issue 17,
"Worse than a traceback: a plugin silently aborted ... with exit 0").

The failing plugin is a real out-of-tree plugin: a module and its entry point on PYTHONPATH, found
the way ``pip install`` would make desched find it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NOW = "2026-11-21T12:00:00Z"

PLUGIN = """
from typing import ClassVar

from desched.k8s.objects import Node


class Explode:
    name: ClassVar[str] = "Explode"

    def __init__(self, args, handle):
        self.handle = handle

    def deschedule(self, nodes):
        for node in nodes:
            for pod in self.handle.snapshot.pods_on_node(node.metadata.name):
                if pod.metadata.name.startswith("web-"):
                    raise ValueError("cannot judge this pod")
        return None
"""

POLICY = """apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
  - name: broken
    plugins:
      deschedule:
        enabled: [Explode]
  - name: working
    pluginConfig:
      - name: PodLifeTime
        args: {maxPodLifeTimeSeconds: 86400}
    plugins:
      deschedule:
        enabled: [PodLifeTime]
"""


def install_plugin(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "explode_plugin.py").write_text(PLUGIN)
    info = site / "explode_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: explode-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[desched.plugins]\nExplode = explode_plugin:Explode\n")
    return {**os.environ, "PYTHONPATH": str(site)}


def simulate(tmp_path: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "simulate",
            str(ROOT / "examples" / "cluster.yaml"),
            "--policy",
            str(policy),
            "--now",
            NOW,
            "-o",
            "json",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )


def test_a_plugin_that_raises_fails_the_simulation(tmp_path: Path) -> None:
    env = install_plugin(tmp_path)
    for extra in ((), ("--no-placement",)):
        proc = simulate(tmp_path, env, *extra)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        # an error line in klog's text format: E<date> <time> <pid> <file:line>] <message>
        assert re.match(r"E\d{4} [\d:.]+ +\d+ framework\.py:\d+\] ", lines[0]), lines[0]
        assert "plugin Explode of profile broken failed: " in lines[0]
        assert "ValueError: cannot judge this pod (at Pod shop/web-7d9f8b6c5-" in lines[0], lines[0]
        # the other profile still ran, and its decisions are in the output
        doc = json.loads(proc.stdout)
        assert {e["plugin"] for e in doc["evictions"]} == {"PodLifeTime"}


def test_the_traceback_is_there_at_high_verbosity(tmp_path: Path) -> None:
    env = install_plugin(tmp_path)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "-v",
            "4",
            "simulate",
            str(ROOT / "examples" / "cluster.yaml"),
            "--policy",
            str(policy),
            "--now",
            NOW,
            "--no-placement",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "cannot judge this pod" in proc.stderr


def test_a_long_running_run_counts_plugin_failures_in_a_metric() -> None:
    from desched.framework.framework import PluginRun
    from desched.runtime.metrics import Metrics

    metrics = Metrics()
    metrics.observe_plugin(PluginRun("broken", "Explode", "deschedule", 0.1, 0, "ValueError: x", True))
    metrics.observe_plugin(PluginRun("working", "PodLifeTime", "deschedule", 0.1, 2))
    value = metrics.registry.get_sample_value(
        "descheduler_plugin_failures_total", {"strategy": "Explode", "profile": "broken"}
    )
    assert value == 1.0
    assert (
        metrics.registry.get_sample_value(
            "descheduler_plugin_failures_total", {"strategy": "PodLifeTime", "profile": "working"}
        )
        is None
    )
