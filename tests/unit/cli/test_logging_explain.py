"""Logs (--logging-format text|json, -v, --vmodule) and explanations (simulate --explain)."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from desched import logs
from desched.framework.findings import log as findings_log

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cluster.yaml"
POLICY = ROOT / "examples" / "policy.yaml"
NOW = "2026-11-21T12:00:00Z"
SIM = ("simulate", str(EXAMPLE), "--policy", str(POLICY), "--now", NOW)


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    desched_level = logging.getLogger("desched").level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)
    logging.getLogger("desched").setLevel(desched_level)
    logs._vmodule = None


RECORD = SimpleNamespace(
    namespace="shop", name="web-1", node="node-a1", profile="default", plugin="PodLifeTime", reason="too old"
)


def test_text_lines_are_klog_like_with_key_value_fields(restore_logging: None) -> None:
    out = io.StringIO()
    logs.configure(0, "text", stream=out)
    log = logging.getLogger("desched.app.run")
    log.log(logs.V0, "would evict", extra=logs.eviction_fields(RECORD))
    log.info("a V(1) line, hidden at -v 0")
    line = out.getvalue().strip()
    assert "\n" not in line
    assert line.startswith("I") and "] would evict pod=shop/web-1 node=node-a1 " in line
    assert line.endswith('profile=default plugin=PodLifeTime reason="too old"')


def test_json_lines_carry_ts_level_msg_v_and_fields(restore_logging: None) -> None:
    out = io.StringIO()
    logs.configure(2, "json", stream=out)
    log = logging.getLogger("desched.app.run")
    log.log(logs.V0, "would evict", extra=logs.eviction_fields(RECORD))
    log.log(logs.V2, "shown at -v 2")
    log.log(logs.V3, "hidden at -v 2")
    log.warning("careful")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [d["msg"] for d in docs] == ["would evict", "shown at -v 2", "careful", "failed"]
    first = docs[0]
    assert isinstance(first["ts"], float) and first["level"] == "info" and first["v"] == 0
    assert first["pod"] == "shop/web-1" and first["plugin"] == "PodLifeTime" and first["reason"] == "too old"
    assert docs[1]["v"] == 2
    assert docs[2]["level"] == "warning" and "v" not in docs[2]
    assert docs[3]["level"] == "error" and docs[3]["err"] == "ValueError: boom"


def test_vmodule_raises_one_module_only(restore_logging: None) -> None:
    out = io.StringIO()
    logs.configure(0, "text", {"findings": 4}, stream=out)
    assert logs.v_enabled(findings_log, 4)
    loop = logging.getLogger("desched.app.run")
    assert not logs.v_enabled(loop, 1)
    loop.info("hidden")
    findings_log.debug("shown")
    assert "hidden" not in out.getvalue() and "shown" in out.getvalue()


def test_vmodule_names_a_plugin_by_its_folder(restore_logging: None) -> None:
    """A plugin logs under its folder's name (docs/design.md): ``--vmodule defaultevictor=4``
    raises DefaultEvictor and nothing else."""
    out = io.StringIO()
    logs.configure(0, "text", {"defaultevictor": 4}, stream=out)
    evictor = logging.getLogger("desched.plugins.defaultevictor")
    other = logging.getLogger("desched.plugins.podlifetime")
    assert logs.v_enabled(evictor, 4) and not logs.v_enabled(other, 1)
    from desched.plugins.defaultevictor import plugin

    assert plugin.log is evictor
    plugin.log.debug("shown")
    other.info("hidden")
    assert "shown" in out.getvalue() and "hidden" not in out.getvalue()


def test_verbosity_levels_round_trip() -> None:
    for v in range(10):
        assert logs.verbosity_of(logs.level_for(v)) == v
    assert logs.level_for(1) == logging.INFO and logs.level_for(4) == logging.DEBUG


def test_v0_simulate_logs_nothing() -> None:
    proc = desched(*SIM, "--no-placement", "-o", "json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_v4_json_names_every_candidate_left_with_reasons() -> None:
    proc = desched(*SIM, "--no-placement", "-o", "json", "--v=4", "--logging-format=json")
    assert proc.returncode == 0, proc.stderr
    docs = [json.loads(line) for line in proc.stderr.splitlines()]  # every line is one JSON object
    assert all({"ts", "level", "caller", "msg"} <= set(d) for d in docs)
    findings = [d for d in docs if d.get("verdict")]
    by_pod = {(d.get("pod"), d["plugin"], d["verdict"]): d["reason"] for d in findings}
    # DefaultEvictor's reasons, reported for the plugin that asked
    assert by_pod[("sandbox/scratch", "PodLifeTime", "filtered")] == (
        "DefaultEvictor: pod does not have any ownerRefs"
    )
    # a plugin's own reason, with its numbers
    assert by_pod[("shop/cart-0", "RemovePodsHavingTooManyRestarts", "left")] == "0 restarts < threshold 100"
    # node-level: LowNodeUtilization's classification, with percentages
    lnu = [d for d in findings if d["plugin"] == "LowNodeUtilization" and "pod" not in d]
    assert lnu and all("%" in d["reason"] for d in lnu)
    # every eviction of the simulation is among the findings
    evictions = json.loads(proc.stdout)["evictions"]
    evicted = {d["pod"] for d in findings if d["verdict"] == "evicted"}
    assert {f"{e['namespace']}/{e['name']}" for e in evictions} == evicted


def test_explain_tells_what_each_plugin_decided() -> None:
    proc = desched(*SIM, "--explain", "sandbox/scratch")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout[proc.stdout.index("Explain sandbox/scratch") :]
    lines = text.splitlines()
    assert "(on node node-c1)" in lines[0]
    row = {line.split()[2]: line for line in lines[1:] if line.strip()}
    assert "filtered" in row["sandbox-lifetime/PodLifeTime"]
    assert "DefaultEvictor: pod does not have any ownerRefs" in row["sandbox-lifetime/PodLifeTime"]
    assert "0 restarts < threshold 100" in row["default/RemovePodsHavingTooManyRestarts"]
    assert "nothing reported: not among the candidates" in row["default/RemoveFailedPods"]
    assert "node under-utilised" in row["default/LowNodeUtilization"]


def test_explain_json_and_explain_all() -> None:
    plain = desched(*SIM, "-o", "json")
    proc = desched(*SIM, "-o", "json", "--explain", "shop/cart-0", "--explain-all")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    decided = {(d["plugin"], d["verdict"]) for d in doc["explain"]["shop/cart-0"]}
    assert ("RemovePodsViolatingInterPodAntiAffinity", "evicted") in decided
    plugins = doc["summary"]["plugins"]
    assert all("considered" in p for p in plugins)
    restarts = next(p for p in plugins if p["plugin"] == "RemovePodsHavingTooManyRestarts")
    assert any(c["reason"].endswith("< threshold 100") for c in restarts["considered"])
    # the balancing plugins name the pods they leave, with their numbers
    left = {
        (p["plugin"], f"{c['namespace']}/{c['name']}"): c["reason"]
        for p in plugins
        for c in p["considered"]
        if c["verdict"] == "left"
    }
    assert left[("RemoveDuplicates", "shop/web-7d9f8b6c5-1")].startswith(
        "within the per-node share; node node-a1 holds 4 pods of owner ReplicaSet/web-7d9f8b6c5 "
        "(3 duplicates), 2 above the per-node share 2 (its 6 pods over 5 feasible nodes"
    )
    assert left[("RemovePodsViolatingInterPodAntiAffinity", "shop/cart-1")] == (
        "no other pod matches its anti-affinity term in its topology domain kubernetes.io/hostname=node-a2"
    )
    assert left[("RemovePodsViolatingTopologySpreadConstraint", "shop/api-6c8d7f9b4-0")].startswith(
        "topology topology.kubernetes.io/zone=zone-a has 2 pods, ideal average 0.67: it gives 1"
    )
    # without the flags, the document is what it was: no new keys
    base = json.loads(plain.stdout)
    assert "explain" not in base and all("considered" not in p for p in base["summary"]["plugins"])
    del doc["explain"]
    for p in doc["summary"]["plugins"]:
        del p["considered"]
    assert doc == base


def test_explain_unknown_pod_is_one_line_exit_2() -> None:
    proc = desched(*SIM, "--explain", "shop/nope")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "desched: error: --explain: no pod 'shop/nope' in the snapshot (write it as namespace/name)"
    )


def test_split_stream_sends_info_to_stdout_and_warnings_to_stderr(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure(0, "json", split_stream=True)
    log = logging.getLogger("desched.app.run")
    log.log(logs.V0, "would evict", extra=logs.eviction_fields(RECORD))
    log.warning("careful")
    out, err = capsys.readouterr()
    assert json.loads(out)["msg"] == "would evict" and json.loads(err)["msg"] == "careful"


def test_explain_all_table_lists_every_finding() -> None:
    proc = desched(*SIM, "--no-placement", "--explain-all")
    assert proc.returncode == 0, proc.stderr
    block = proc.stdout[proc.stdout.index("Considered (every candidate") :].splitlines()[1:]
    assert any(
        "sandbox-lifetime/PodLifeTime  filtered" in line and "sandbox/scratch: DefaultEvictor" in line
        for line in block
    )
    assert any("default/LowNodeUtilization  left" in line and "node node-" in line for line in block)


def test_v4_json_skip_lines_have_the_eviction_lines_fields() -> None:
    """A skipped eviction's line (--v=4) carries pod, node, profile, plugin and reason as structured
    fields, as the eviction line does, and they agree with simulate's ``evictionsSkipped``."""
    policy = str(ROOT / "examples" / "policy-safe.yaml")
    proc = desched(
        "simulate",
        str(EXAMPLE),
        "--policy",
        policy,
        "--now",
        NOW,
        "-o",
        "json",
        "--v=4",
        "--logging-format=json",
    )
    assert proc.returncode == 0, proc.stderr
    docs = [json.loads(line) for line in proc.stderr.splitlines()]
    lines = [d for d in docs if d["msg"] == "eviction skipped"]
    skipped = json.loads(proc.stdout)["evictionsSkipped"]
    assert len(skipped) >= 2
    assert [
        (d["pod"], d["node"], d["profile"], d["plugin"], d["reason"], d["detail"], d["v"]) for d in lines
    ] == [
        (f"{s['namespace']}/{s['name']}", s["node"], s["profile"], s["plugin"], s["reason"], s["detail"], 4)
        for s in skipped
    ]
