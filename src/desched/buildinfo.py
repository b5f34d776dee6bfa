"""The git commit desched was built from, when it can be known (for the User-Agent and build info).

In order: ``$DESCHED_GIT_SHA`` (set by an image build), the commit pip recorded when it installed
from a git URL (``direct_url.json``, PEP 610), or, for a checkout installed in editable mode, the
checkout's ``HEAD`` read from the ``.git`` directory (no ``git`` process is started). Otherwise
nothing: the version alone identifies the build.
"""

from __future__ import annotations

import functools
import json
import os
import re
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

_SHA = re.compile(r"^[0-9a-f]{40}$")


@functools.cache
def git_sha() -> str:
    """The full commit SHA, or ``""`` when unknown."""
    env = os.environ.get("DESCHED_GIT_SHA", "").strip().lower()
    if _SHA.match(env):
        return env
    try:
        text = metadata.distribution("desched").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    try:
        info = json.loads(text) if text else {}
    except ValueError:
        info = {}
    commit = str((info.get("vcs_info") or {}).get("commit_id", ""))
    if _SHA.match(commit):
        return commit
    url = str(info.get("url", ""))
    if url.startswith("file://"):
        return _checkout_head(Path(unquote(urlparse(url).path)))
    return _checkout_head(Path(__file__).resolve().parents[2])


def _checkout_head(root: Path) -> str:
    try:
        git = root / ".git"
        gitdir = git
        if git.is_file():  # a worktree or submodule: "gitdir: <path>"
            gitdir = Path(git.read_text().split(":", 1)[1].strip())
            if not gitdir.is_absolute():
                gitdir = root / gitdir
        head = (gitdir / "HEAD").read_text().strip()
        if _SHA.match(head):
            return head
        if not head.startswith("ref: "):
            return ""
        ref = head[5:]
        common = gitdir
        if (gitdir / "commondir").is_file():
            common = (gitdir / (gitdir / "commondir").read_text().strip()).resolve()
        for base in (gitdir, common):
            if (base / ref).is_file():
                value = (base / ref).read_text().strip()
                return value if _SHA.match(value) else ""
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                parts = line.split(" ")
                if len(parts) == 2 and parts[1] == ref and _SHA.match(parts[0]):
                    return parts[0]
    except (OSError, IndexError):
        return ""
    return ""
