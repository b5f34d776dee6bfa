"""``desched version [-o json]``: the version, the git commit, the build date, Python and the platform."""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from desched import __version__
from desched.buildinfo import git_sha


def build_date() -> str:
    """``$DESCHED_BUILD_DATE`` (an image build sets it), else when this copy of desched was
    installed (its distribution's metadata file), RFC 3339 in UTC; ``""`` when neither is known."""
    env = os.environ.get("DESCHED_BUILD_DATE", "").strip()
    if env:
        return env
    try:
        files = metadata.distribution("desched").files or []
        record = next((f for f in files if f.name == "METADATA"), None)
        if record is None:
            return ""
        stamp = Path(str(record.locate())).stat().st_mtime
    except (metadata.PackageNotFoundError, OSError):
        return ""
    return datetime.fromtimestamp(int(stamp), UTC).isoformat().replace("+00:00", "Z")


def info() -> dict[str, Any]:
    return {
        "version": __version__,
        "gitCommit": git_sha(),
        "buildDate": build_date(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": f"{platform.system().lower()}/{platform.machine().lower()}",
    }


def text(doc: dict[str, Any]) -> str:
    """One line, the version first (``desched 0.1.0 (...)``): scripts that read the first word keep
    working."""
    parts = [f"git {doc['gitCommit'] or 'unknown'}"]
    if doc["buildDate"]:
        parts.append(f"built {doc['buildDate']}")
    parts.append(f"{doc['implementation']} {doc['python']}")
    parts.append(doc["platform"])
    return f"desched {doc['version']} ({', '.join(parts)})"


def render(output: str) -> str:
    doc = info()
    return json.dumps(doc, indent=2) if output == "json" else text(doc)
