"""The desched command: simulate on the example, JSON output, determinism, one-line errors, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cluster.yaml"
POLICY = ROOT / "examples" / "policy.yaml"
NOW = "2026-11-21T12:00:00Z"


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_simulate_example_evicts_from_several_plugins() -> None:
    proc = desched("simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", NOW, "--output", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["now"] == NOW
    plugins = {e["plugin"] for e in doc["evictions"]}
    assert len(plugins) >= 3, plugins
    for e in doc["evictions"]:
        assert set(e) == {"cycle", "namespace", "name", "node", "profile", "plugin", "reason"}
    names = {f"{e['namespace']}/{e['name']}" for e in doc["evictions"]}
    # protected by DefaultEvictor: DaemonSet, system-critical, bare and local-storage pods
    assert not any(n.startswith("kube-system/") for n in names)
    assert "sandbox/scratch" not in names and "shop/session-cache-0" not in names


def test_simulate_json_is_deterministic() -> None:
    args = ("simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", NOW, "--output", "json")
    assert desched(*args).stdout == desched(*args).stdout


def test_simulate_table_output() -> None:
    proc = desched("simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", NOW)
    assert proc.returncode == 0, proc.stderr
    assert "Total:" in proc.stdout and "RemoveFailedPods" in proc.stdout


def test_validate_prints_normalised_policy() -> None:
    proc = desched("validate", str(POLICY), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["apiVersion"] == "descheduler/v1alpha2"
    assert doc["profiles"][0]["plugins"]["filter"]["enabled"] == ["DefaultEvictor"]


def test_validate_tells_each_warning_once(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: [{name: p, pluginConfig: "
        "[{name: PodLifeTime, args: {maxPodLifeTimeSeconds: 60}}], plugins: {presort: {enabled: "
        "[PodAgeSort]}, deschedule: {enabled: [PodLifeTime]}, filter: {disabled: [DefaultEvictor]}}}]\n"
    )
    proc = desched("validate", str(policy))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert sum("does not disable DefaultEvictor" in line for line in lines) == 1
    assert sum("PodAgeSort does not change the order" in line for line in lines) == 1


def test_version() -> None:
    assert desched("version").stdout.startswith("desched ")


@pytest.mark.parametrize(
    ("policy", "snapshot", "needle"),
    [
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: [{name: a, plugins: "
            "{deschedule: {enabled: [Nope]}}}]\n",
            None,
            "profiles[0].plugins.deschedule.enabled[0]: unknown plugin",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: [{name: a, pluginConfig: "
            "[{name: RemovePodsHavingTooManyRestarts, args: {podRestartThreshold: abc}}]}]\n",
            None,
            "profiles[0].pluginConfig[0].args.podRestartThreshold",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: [{name: a\n",
            None,
            "not valid YAML",
        ),
        (
            None,
            "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n"
            "  metadata: {name: p, namespace: d, labels: {a: [1]}}\n",
            "items[0] (Pod d/p): metadata.labels[...]: expected `str`, got `array`",
        ),
        (
            None,
            "apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: n}\n  spec: {taints: 3}\n",
            "items[0] (Node n): spec.taints:",
        ),
        (
            None,
            '{"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": 5}}]}',
            "items[0] (Pod 5): metadata.name",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(
    tmp_path: Path, policy: str | None, snapshot: str | None, needle: str
) -> None:
    pol = POLICY
    snap = EXAMPLE
    if policy is not None:
        pol = tmp_path / "policy.yaml"
        pol.write_text(policy)
    if snapshot is not None:
        snap = tmp_path / "snap.yaml"
        snap.write_text(snapshot)
    proc = desched("simulate", str(snap), "--policy", str(pol), "--now", NOW)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert needle in lines[0]


def test_bad_flags_exit_2() -> None:
    proc = desched("simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", "yesterday")
    assert proc.returncode == 2 and "--now" in proc.stderr
    proc = desched("simulate", str(EXAMPLE))
    assert proc.returncode == 2
    proc = desched("simulate", "/nonexistent.yaml", "--policy", str(POLICY))
    assert proc.returncode == 2 and "cannot read snapshot" in proc.stderr


def test_example_makes_every_balance_plugin_act() -> None:
    doc = json.loads(
        desched("simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", NOW, "-o", "json").stdout
    )
    acted = {e["plugin"] for e in doc["evictions"]}
    assert {"RemoveDuplicates", "LowNodeUtilization", "RemovePodsViolatingTopologySpreadConstraint"} <= acted
    binpacking = ROOT / "examples" / "policy-binpacking.yaml"
    doc = json.loads(
        desched("simulate", str(EXAMPLE), "--policy", str(binpacking), "--now", NOW, "-o", "json").stdout
    )
    assert {e["plugin"] for e in doc["evictions"]} == {"HighNodeUtilization"}


def test_simulate_imports_no_http_client_unless_asked() -> None:
    """``desched simulate`` is offline unless ``--webhook`` (issue 28: imports deferred until
    needed): aiohttp, and the eviction webhook client that needs it, are not imported."""
    args = ["simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", NOW, "-o", "json"]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "desched.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = {
        line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")
    }
    assert "desched.scheduling.placement" in imported  # (the listing is complete)
    assert "aiohttp" not in imported
    assert "desched.backends.eviction_webhook" not in imported


#: What ``desched simulate`` on the bundled example must not import (issue 28: "imports deferred
#: until needed"): the live path (transport, API client, the run loop, its servers and backends),
#: the HTML report and its charts, the v1alpha1 converter, and NumPy (the placement model's
#: vectorised passes import it only on clusters large enough to use them).
SIMULATE_NEVER_IMPORTS = (
    "numpy",
    "kubernetes_asyncio",
    "aiohttp",
    "matplotlib",
    "desched.kube",
    "desched.runtime",
    "desched.app.run",
    "desched.app.process",
    "desched.app.extender",
    "desched.cluster.live_source",
    "desched.backends.api_eviction",
    "desched.backends.api_nodeactions",
    "desched.backends.eviction_webhook",
    "desched.backends.usage_metrics",
    "desched.report.html",
    "desched.report.charts",
    "desched.report.explain",
    "desched.api.v1alpha1",
)


@pytest.mark.parametrize("output", ["table", "json"])
def test_simulate_on_the_example_imports_nothing_it_does_not_need(output: str) -> None:
    """The modules loaded when ``desched simulate`` on the bundled example exits (sys.modules,
    read at exit in the process itself): none of :data:`SIMULATE_NEVER_IMPORTS`, nor any module
    below them; the output is the command's own (the probe writes only to stderr)."""
    probe = (
        "import atexit, runpy, sys\n"
        "atexit.register(lambda: print('MODULES', *sorted(sys.modules), file=sys.stderr))\n"
        "sys.argv = ['desched', *sys.argv[1:]]\n"
        "runpy.run_module('desched.cli', run_name='__main__')\n"
    )
    args = ["simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", NOW, "-o", output]
    proc = subprocess.run(
        [sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == desched(*args).stdout
    line = next(ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES "))
    loaded = set(line.split()[1:])
    assert {"desched.scheduling.placement.simulator", "desched.report.output", "pydantic"} <= loaded
    unwanted = sorted(
        m for m in loaded if any(m == top or m.startswith(top + ".") for top in SIMULATE_NEVER_IMPORTS)
    )
    assert unwanted == []


def test_simulate_places_with_the_kube_scheduler_configs_percentage_of_nodes_to_score(tmp_path: Path) -> None:
    config = tmp_path / "sched.yaml"
    head = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    args = ("simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", NOW, "-o", "json")
    config.write_text(head + "percentageOfNodesToScore: 1\n")
    proc = desched(*args, "--kube-scheduler-config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["scoring"]["percentageOfNodesToScore"] == 1
    assert json.loads(desched(*args).stdout)["scoring"]["percentageOfNodesToScore"] is None
    profile = "profiles:\n- schedulerName: default-scheduler\n  percentageOfNodesToScore: 200\n"
    config.write_text(head + profile)
    proc = desched(*args, "--kube-scheduler-config", str(config))
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--kube-scheduler-config" in lines[0] and "profiles[0].percentageOfNodesToScore" in lines[0]
