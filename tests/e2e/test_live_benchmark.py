"""The live benchmark's command (docs/performance.md, "Live") runs on a small cluster and reports
every figure the docs quote, from a real kube-apiserver that streams initial events."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import desched_env

ROOT = Path(__file__).resolve().parents[2]


def test_live_benchmark_reports_every_figure(control_plane: Any) -> None:
    if getattr(control_plane, "external", False):
        pytest.skip("the benchmark starts its own control plane from the built binaries")
    args = ["--nodes", "4", "--pods", "40", "--trials", "2", "--burst", "20", "--event-debounce", "10s"]
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.live", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=desched_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["watchlist_supported"] is True and result["watchlist_events"] == 40
    assert result["list_pages"] == 1 and result["apiserver_list_s"] > 0
    # the unpaged LISTs came in the encoding asked for, protobuf smaller than JSON
    assert result["apiserver_list_rv0_json_served"] == "application/json"
    assert result["apiserver_list_rv0_protobuf_served"] == "application/vnd.kubernetes.protobuf"
    assert 0 < result["apiserver_list_rv0_protobuf_mb"] < result["apiserver_list_rv0_json_mb"]
    assert result["apiserver_list_rv0_json_s"] > 0 and result["apiserver_list_rv0_protobuf_s"] > 0
    for mode in ("watch-list", "list"):
        assert "cache synced: 4 Node, 40 Pod" in result[f"{mode}:synced_line"]
        assert 0 < result[f"{mode}:synced_s"] <= result[f"{mode}:first_cycle_done_s"]
        assert 50 < result[f"{mode}:steady_rss_mib"] <= result[f"{mode}:peak_rss_after_burst_mib"]
        # 20 updates may cost less than the kernel's CPU-time tick (10 ms): zero is a figure too
        assert result[f"{mode}:cpu_us_per_event"] >= 0 and result[f"{mode}:burst_events"] == 20
        assert result[f"{mode}:background_cpu_us_per_update"] >= 0
    # the taint makes the evictions; each comes to a quiet cluster, so its cycle starts at once
    # instead of after the (here 10 s) debounce window
    assert result["reaction_trials"] == 2
    assert 0 < result["reaction_p50_s"] <= result["reaction_p99_s"] < 10
