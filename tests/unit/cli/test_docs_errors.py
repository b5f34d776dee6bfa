"""The error messages README.md and docs/policy.md quote are what desched prints (issue 15)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run(command: str) -> subprocess.CompletedProcess[str]:
    assert command.startswith("desched ")
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", *command.split()[1:]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_policy_md_shows_real_output() -> None:
    text = (ROOT / "docs" / "policy.md").read_text()
    blocks = re.findall(r"```\n\s*\$ (desched validate [^\n]+)\n\s*(desched: error: [^\n]+)\n", text)
    assert blocks, "docs/policy.md shows no 'desched validate' example"
    for command, shown in blocks:
        proc = run(command)
        assert proc.returncode == 2
        assert proc.stderr.strip() == shown.strip()


def test_readme_quotes_real_output() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    m = re.search(r"`(desched validate [^`]+)` prints `(desched: error: [^`]+)`", text)
    assert m is not None, "README.md no longer quotes a validation error"
    proc = run(m.group(1))
    assert proc.returncode == 2
    assert proc.stderr.strip() == m.group(2)
