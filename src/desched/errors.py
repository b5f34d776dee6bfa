"""Errors a user can cause. Each names where the problem is and why, in one line."""

from __future__ import annotations

import re
from collections.abc import Sequence


class UserError(Exception):
    """Bad input from the user (policy, snapshot, flags): one clear line, exit code 2."""

    exit_code = 2

    def __init__(self, path: str, reason: str) -> None:
        # never more than a short excerpt of a value the user wrote, however it was quoted
        self.path = _shorten(path)
        self.reason = _shorten(reason)
        path, reason = self.path, self.reason
        super().__init__(f"{path}: {reason}" if path else reason)


_LONG_QUOTED = re.compile(r"'([^'\n]{80,})'")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _shorten(text: str) -> str:
    # one line: a control character a user wrote (a newline in a key) is shown escaped
    text = _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], text)
    text = _LONG_QUOTED.sub(lambda m: f"'{m.group(1)[:30]}...{m.group(1)[-30:]}'", text)
    return text if len(text) <= 1000 else text[:997] + "..."


class PolicyError(UserError):
    """A policy that cannot be loaded, named by its field path."""


class SnapshotError(UserError):
    """A cluster snapshot that cannot be read, naming the object and field."""


def format_path(parts: Sequence[str | int]) -> str:
    """``("profiles", 0, "pluginConfig", 2, "args")`` -> ``profiles[0].pluginConfig[2].args``; a key
    that is not a plain name (a blank, a quote, a bracket, a colon, nothing) is quoted:
    ``profiles[0]['plugin Config']``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(part):
            out += f"[{_quote(part)}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def key_path(prefix: str, key: object) -> str:
    """``prefix.key`` as :func:`format_path` writes a key (quoted unless a plain name)."""
    return join_path(prefix, format_path([str(key)]))


#: What an error path shows as it is (``nvidia.com/gpu`` is a resource name, not a path).
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_./$-]+")


def _quote(key: str) -> str:
    text = repr(key)
    return text if len(text) <= 64 else f"{text[:30]}...{text[-30:]}"


def join_path(prefix: str, rest: str) -> str:
    if not rest:
        return prefix
    if not prefix:
        return rest
    return prefix + rest if rest.startswith("[") else f"{prefix}.{rest}"
