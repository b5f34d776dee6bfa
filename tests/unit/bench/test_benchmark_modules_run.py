"""The benchmark commands docs/performance.md and docs/policy.md name, run as a user runs them
(``python -m benchmarks.MODULE`` from the repository root) at a small size: each exits 0 and
prints every figure the docs quote from it. (``python -m benchmarks`` and ``benchmarks.live`` have
their own tests: test_benchmark_command.py and tests/e2e/test_live_benchmark.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_generator_then_thrash(tmp_path: Path) -> None:
    snapshot = tmp_path / "c20.json"
    gen = _run("benchmarks.generator", "--nodes", "20", "-o", str(snapshot))
    assert "20 Node" in gen.stderr + gen.stdout
    listed = json.loads(snapshot.read_bytes())
    kinds = {item["kind"] for item in listed["items"]}
    assert {"Node", "Pod", "Namespace", "PodDisruptionBudget"} <= kinds

    rows = _json_lines(_run("benchmarks.thrash", str(snapshot), "--cycles", "2").stdout)
    assert [r["policy"] for r in rows] == ["benchmarks/policy-lnu.yaml", "benchmarks/policy-lnu-safe.yaml"]
    for r in rows:
        assert r["cycles"] == 2
        assert {
            "evictions",
            "reEvicted",
            "sameNode",
            "workloadsMoved",
            "workloadsMovedTwice",
            "skipped",
        } <= set(r)
    plain, safe = rows
    # the cooldown of the safe policy never lets a replacement be evicted again
    assert safe["reEvicted"] == 0 and plain["evictions"] > 0


def test_extender_latency(tmp_path: Path) -> None:
    rows = _json_lines(_run("benchmarks.extender", "--nodes", "20", "--requests", "5").stdout)
    assert len(rows) == 1
    r = rows[0]
    assert r["nodes"] == 20 and r["requests"] == 5 and r["pods_in_cache"] > 0
    assert r["body_bytes"]["nodelist"] > r["body_bytes"]["nodenames"] > 0
    for verb in ("prioritize", "filter"):
        for mode in ("nodelist", "nodenames"):
            fig = r[verb][mode]
            assert 0 < fig["p50_ms"] <= fig["p99_ms"]
            assert fig["server_cpu_ms"] >= 0 and fig["cpu_ms"] >= 0
