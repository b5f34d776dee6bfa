"""An out-of-tree plugin, pip-installed, is found through its entry point and runs from a policy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PLUGIN = ROOT / "examples" / "desched-example-plugin"


def test_example_plugin_installs_and_runs(tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(PLUGIN),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "simulate",
            str(ROOT / "examples" / "cluster.yaml"),
            "--policy",
            str(PLUGIN / "policy.yaml"),
            "--now",
            "2026-11-21T12:00:00Z",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    evictions = json.loads(proc.stdout)["evictions"]
    assert [(e["namespace"], e["name"], e["plugin"]) for e in evictions] == [
        ("shop", "promo-7f8c9d6b5-0", "AnnotatedExpiry")
    ]


def test_without_the_package_the_policy_names_the_unknown_plugin(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "desched.cli", "validate", str(PLUGIN / "policy.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "profiles[0].pluginConfig[0].name: unknown plugin 'AnnotatedExpiry'" in proc.stderr


def test_a_broken_package_is_reported_on_every_command_and_named_when_used(tmp_path: Path) -> None:
    """An installed package whose plugin fails to load is told in one warning line by every
    command, used or not (docs/design.md); a policy that uses it is refused naming why."""
    site = tmp_path / "site"
    dist = site / "brokenplug-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[desched.plugins]\nBroken = brokenplug_missing:Plugin\n")
    env = {**os.environ, "PYTHONPATH": str(site)}

    def desched(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "desched.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            cwd=tmp_path,
        )

    unused = desched("validate", str(ROOT / "examples" / "policy.yaml"))
    assert unused.returncode == 0, unused.stderr
    (line,) = [x for x in unused.stderr.splitlines() if "Broken" in x]
    assert "out-of-tree plugin Broken not loaded: No module named 'brokenplug_missing'" in line
    policy = tmp_path / "uses.yaml"
    policy.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n"
        "  plugins:\n    deschedule:\n      enabled: [Broken]\n"
    )
    used = desched("validate", str(policy))
    assert used.returncode == 2
    assert "entry point brokenplug_missing:Plugin failed to load: No module named 'brokenplug_missing'" in (
        used.stderr
    )
