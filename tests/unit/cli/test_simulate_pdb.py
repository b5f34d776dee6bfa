"""``desched simulate`` answers evictions as the eviction API does: PodDisruptionBudgets refuse."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import builders

from desched.framework.types import EvictResult

ROOT = Path(__file__).resolve().parents[3]
NOW = "2026-11-21T12:00:00Z"

POLICY = """\
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: taints
  pluginConfig:
  - name: DefaultEvictor
  - name: RemovePodsViolatingNodeTaints
  plugins:
    deschedule:
      enabled: [RemovePodsViolatingNodeTaints]
"""


def _node(name: str, taint: bool) -> dict[str, Any]:
    return builders.node_doc(
        name,
        hostname_label=False,
        cpu="8",
        memory="16Gi",
        taints=[{"key": "maint", "effect": "NoSchedule"}] if taint else None,
    )


def _pod(name: str, app: str) -> dict[str, Any]:
    return builders.pod_doc(
        name,
        namespace="shop",
        labels={"app": app},
        owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app, "uid": app, "controller": True},
        node="n1",
        containers=[{"name": "c", "image": "x"}],
        ready=True,
    )


def snapshot_text() -> str:
    """Three web pods (minAvailable 2, no status: 1 disruption allowed, computed) and two api pods
    (a live PDB's status: 0 allowed) on a tainted node; one worker pod no PDB covers."""
    api_status = {
        "disruptionsAllowed": 0,
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 2,
        "observedGeneration": 1,
    }
    items = builders.list_doc(
        _node("n1", True),
        _node("n2", False),
        [_pod(f"web-{i}", "web") for i in range(3)],
        [_pod(f"api-{i}", "api") for i in range(2)],
        _pod("worker-0", "worker"),
        builders.pdb_doc("web", namespace="shop", min_available=2),
        builders.pdb_doc("api", namespace="shop", generation=1, max_unavailable=1, status=api_status),
    )
    return yaml.safe_dump(items, sort_keys=False)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(snapshot_text())
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return snapshot, policy


def simulate(files: tuple[Path, Path], *extra: str) -> subprocess.CompletedProcess[str]:
    snapshot, policy = files
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", "simulate", str(snapshot), "--policy", str(policy), *extra],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


@pytest.mark.parametrize("placement", ["--placement", "--no-placement"])
def test_simulate_refuses_what_the_budgets_forbid(files: tuple[Path, Path], placement: str) -> None:
    proc = simulate(files, "--now", NOW, "-o", "json", placement)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    # the pods are taken in name order: api-* refused (0 allowed), web-0 spends web's one
    # disruption, web-1 and web-2 are refused, worker-0 has no PDB
    assert [e["name"] for e in doc["evictions"]] == ["web-0", "worker-0"]
    refused = {(r["name"], r["error"].split(" ", 1)[0]) for r in doc["refused"]}
    assert refused == {("api-0", "429"), ("api-1", "429"), ("web-1", "429"), ("web-2", "429")}
    assert doc["summary"]["refused"] == 4
    for r in doc["refused"]:
        assert r["result"] == EvictResult.FAILED.value
        assert "violate the pod's disruption budget" in r["error"]


def test_simulate_table_lists_the_refusals(files: tuple[Path, Path]) -> None:
    proc = simulate(files, "--now", NOW, "--no-placement", "-o", "wide")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "Refused: 4" in lines
    assert any(line.endswith("; refused 4 (by the eviction API 4)") for line in lines), lines[:20]
    refused = [line for line in lines if line.startswith("shop/") and "429" in line]
    assert [line.split()[0] for line in refused] == ["shop/api-0", "shop/api-1", "shop/web-1", "shop/web-2"]
    assert "The disruption budget web needs 2 healthy pods and has 3 currently" in proc.stdout
