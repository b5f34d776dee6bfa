"""``python -m benchmarks`` end to end on a small generated cluster: every figure the issue asks
for is measured and reported (load, cycle per plugin, peak RSS, evictions, `desched simulate`
with and without placement, the extender's latency)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_benchmark_command_reports_every_figure(tmp_path: Path) -> None:
    md = tmp_path / "bench.md"
    jsonl = tmp_path / "bench.jsonl"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--nodes",
            "20",
            "--policy",
            "all",
            "--extender-nodes",
            "20",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--markdown",
            str(md),
            "--jsonl",
            str(jsonl),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    sized = [r for r in rows if "size_nodes" in r]
    assert len(sized) == 1
    r = sized[0]
    assert r["nodes"] == 20 and r["pods"] > 500
    assert r["load_s"] > 0 and r["cycle_s"] > 0 and r["peak_rss_mib"] > 0
    assert r["evictions"] > 0
    # the end-to-end command agrees with the in-process cycle, with and without placement
    assert r["simulate_evictions"] == r["evictions"] == r["simulate_noplace_evictions"]
    assert r["simulate_placed"] > 0
    assert r["simulate_peak_rss_mib"] > 0 and r["simulate_noplace_peak_rss_mib"] > 0
    assert {p["plugin"] for p in r["plugins"]} >= {"LowNodeUtilization", "RemoveDuplicates"}
    ext = next(x["extender"] for x in rows if "extender" in x)
    assert ext["nodes"] == 20
    assert 0 < ext["prioritize"]["nodenames"]["p50_ms"] <= ext["prioritize"]["nodenames"]["p99_ms"]
    # the extender's own CPU (its thread's) is part of the process's, and the load is reported
    for verb in ("prioritize", "filter"):
        for mode in ("nodenames", "nodelist"):
            row = ext[verb][mode]
            assert 0 < row["server_cpu_ms"] <= row["cpu_ms"] * 1.05 + 0.05, (verb, mode, row)
    assert len(ext["load_average"]) == len(ext["load_average_after"]) == 3
    text = md.read_text()
    assert "`simulate --no-placement` s" in text
    assert "| prioritize, NodeNames (nodeCacheCapable) |" in text
    assert "| LowNodeUtilization |" in text
    assert "Placement cost curve" in text
    assert f"| 20 | all | {r['simulate_placed']:,} |" in text


def test_placement_cost_is_the_cpu_beyond_no_placement_per_replacement_and_log_nodes() -> None:
    from benchmarks.__main__ import placement_cost

    r = {"nodes": 1024, "simulate_cpu_s": 12.0, "simulate_noplace_cpu_s": 7.0, "simulate_placed": 5000}
    cost = placement_cost(r)
    assert cost == {
        "feasible_nodes_to_find": 430,  # kube-scheduler's adaptive 42% of 1,024 nodes
        "cpu_s": 5.0,
        "ms_per_replacement": 1.0,
        "us_per_replacement_log_nodes": 100.0,
    }
    # percentageOfNodesToScore 1: kube-scheduler's floor of 100 feasible nodes, at any size below
    # 10,000 nodes (the curve at a fixed search)
    for nodes in (100, 1024, 5000, 9999):
        fixed = placement_cost({**r, "nodes": nodes, "percentage_of_nodes_to_score": 1})
        assert fixed is not None and fixed["feasible_nodes_to_find"] == 100
    assert placement_cost({**r, "nodes": 5000})["feasible_nodes_to_find"] == 500  # type: ignore[index]
    assert placement_cost({**r, "simulate_placed": 0}) is None
    assert placement_cost({k: v for k, v in r.items() if k != "simulate_noplace_cpu_s"}) is None


def test_benchmark_places_with_a_fixed_percentage_of_nodes_to_score(tmp_path: Path) -> None:
    """``--percentage-of-nodes-to-score P`` reaches `desched simulate` (through a
    KubeSchedulerConfiguration) and the curve's table shows numFeasibleNodesToFind; a
    percentage out of range is refused before anything runs."""
    md = tmp_path / "bench.md"
    jsonl = tmp_path / "bench.jsonl"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    base = [sys.executable, "-m", "benchmarks", "--nodes", "20", "--policy", "all", "--extender-nodes", "0"]
    base += ["--cache-dir", str(tmp_path / "cache")]
    proc = subprocess.run(
        [*base, "--percentage-of-nodes-to-score", "1", "--markdown", str(md), "--jsonl", str(jsonl)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (r,) = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert r["percentage_of_nodes_to_score"] == 1
    assert r["simulate_percentage_of_nodes_to_score"] == 1
    assert r["simulate_placed"] > 0
    text = md.read_text()
    assert "| numFeasibleNodesToFind |" in text
    # (fewer than 100 nodes: kube-scheduler looks at every node)
    assert f"| 20 | all | {r['simulate_placed']:,} |" in text and text.count(" | 20 |\n") == 1
    for bad in ("0", "101"):
        proc = subprocess.run(
            [*base, "--percentage-of-nodes-to-score", bad],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 2 and "--percentage-of-nodes-to-score" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and proc.stdout == ""
