"""The external tools the tests run (helm, kustomize, promtool, actionlint, ...): the path
scripts/test.sh exported in an environment variable, else the cached one hack/e2e's build script
prints (building it once when it is not cached yet)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tool(env: str, script: str) -> str:
    """The path in ``env``, or the last line ``hack/e2e/<script>`` prints."""
    path = os.environ.get(env)
    if not path:
        out = subprocess.run(
            ["bash", str(ROOT / "hack" / "e2e" / script)], capture_output=True, text=True, check=True
        )
        path = out.stdout.strip().splitlines()[-1]
    return path
