"""simulate on a snapshot that lacks a kind it needs: no Node is an error naming them (a pods-only
``kubectl get pods -A -o yaml`` was read as a cluster of 0 ready nodes, exit 0); no
PodDisruptionBudget is a warning that refusals cannot be predicted (issue 25)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from desched.cli import main

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cluster.yaml"
POLICY = ROOT / "examples" / "policy.yaml"
NOW = "2026-11-21T12:00:00Z"


def _example_without(tmp_path: Path, *kinds: str) -> Path:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["items"] = [item for item in doc["items"] if item["kind"] not in kinds]
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _simulate(snapshot: Path) -> int:
    return main(["simulate", str(snapshot), "--policy", str(POLICY), "--now", NOW])


def test_a_snapshot_of_pods_only_names_the_missing_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = _example_without(tmp_path, "Node")
    assert _simulate(snapshot) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"desched: error: {snapshot}: the snapshot holds no Node")


def test_a_snapshot_without_pdbs_warns_that_refusals_cannot_be_predicted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = _example_without(tmp_path, "PodDisruptionBudget")
    assert _simulate(snapshot) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Simulated one descheduling cycle at") and "Total:" in out
    assert f"{snapshot} holds no PodDisruptionBudget" in err


def test_the_bundled_example_has_pdbs_and_no_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert _simulate(EXAMPLE) == 0
    assert "holds no PodDisruptionBudget" not in capsys.readouterr().err
