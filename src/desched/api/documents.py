"""Reading user documents (policies, snapshots, scorer args) with bounds on every dimension.

One place decodes the bytes a user hands desched, so that no input reaches a traceback or an
unbounded amount of memory or time:

- a policy path must be a regular file of at most :data:`MAX_POLICY_BYTES` (``/dev/zero``, a FIFO
  or a directory is refused before it is opened, so nothing hangs);
- the text must be UTF-8, and not empty;
- YAML is read by the one YAML loader, :mod:`desched.yamlload`: each document's node graph is
  measured before any Python object is built (size as expanded, so alias bombs are refused at a
  few KB; depth; alias cycles);
- JSON is decoded by msgspec (in C, without recursion limits being hit in Python), then measured
  for depth the same way;
- an error message quotes at most a short excerpt of a bad value (:func:`excerpt`).

Hand-written rather than a library: no library bounds a document's size and depth before it is
built (see :mod:`desched.yamlload` for YAML).
"""

from __future__ import annotations

import os
import reprlib
import stat
from pathlib import Path
from typing import Any, NoReturn

import msgspec
import yaml

from desched.errors import UserError
from desched.yamlload import Fail, where_nested, yaml_documents, yaml_error_position, yaml_problem

#: A policy is a few KB; anything past this is not a policy.
MAX_POLICY_BYTES = 4 << 20
#: Nodes of a policy's YAML graph once aliases are expanded.
MAX_POLICY_NODES = 100_000
#: Nesting of a policy (the deepest real one is about 10 levels).
MAX_POLICY_DEPTH = 64
#: Nesting of a snapshot's objects (a pod's managedFields reach about 20 levels).
MAX_SNAPSHOT_DEPTH = 128

_Raise = Fail

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlong = 40
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4
_repr.maxlevel = 2


def excerpt(value: Any) -> str:
    """``repr(value)``, cut short: never more than about 100 characters of a user's value."""
    text = _repr.repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def read_regular_file(path: str | Path, what: str, limit: int, fail: _Raise) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes."""
    name = str(path)
    if not name:
        fail("", f"cannot read {what}: the path is empty (expected the path of a {what})")
    if "\x00" in name:  # (os.stat would raise ValueError)
        fail(name, f"cannot read {what}: a path cannot hold a NUL character")
    try:
        st = os.stat(name)
    except OSError as e:
        fail(name, f"cannot read {what}: {e.strerror or e}")
    if stat.S_ISDIR(st.st_mode):
        fail(name, f"cannot read {what}: is a directory")
    if not stat.S_ISREG(st.st_mode):
        fail(name, f"cannot read {what}: not a regular file")
    if st.st_size > limit:
        fail(name, f"{what} is {st.st_size} bytes, more than the {limit} a {what} may have")
    try:
        with open(name, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        fail(name, f"cannot read {what}: {e.strerror or e}")
    if len(data) > limit:  # (grew since stat)
        fail(name, f"{what} is more than {limit} bytes")
    return data


def decode_utf8(data: bytes, source: str, fail: _Raise) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(source, f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})")
    return text.removeprefix("\ufeff")


def load_yaml_or_json(text: str, source: str, fail: _Raise, *, max_nodes: int, max_depth: int) -> Any:
    """One YAML (or JSON) document, bounded in expanded size and depth; ``None`` when empty."""
    stripped = text.lstrip()
    if not stripped:
        return None
    if stripped.startswith(("{", "[")):
        try:
            value = msgspec.json.decode(text.encode("utf-8"))
        except (msgspec.DecodeError, RecursionError):
            pass  # YAML flow style, or not valid: YAML says where
        else:
            depth = measure_depth(value, max_depth)
            if depth > max_depth:
                where = where_nested(deep_path(value, max_depth))
                fail(
                    source,
                    f"{where}: nested more than {max_depth} levels deep"
                    if where
                    else f"nested more than {max_depth} levels deep",
                )
            return value
    documents = yaml_documents(text, source, fail, max_nodes=max_nodes, max_depth=max_depth, single=True)
    try:
        return next(documents, None)
    except yaml.YAMLError as e:
        fail(source, describe_yaml_error(e, text))
    except RecursionError:
        fail(source, f"nested more than {max_depth} levels deep")
    finally:
        documents.close()


def describe_yaml_error(e: yaml.YAMLError, text: str | bytes | None = None) -> str:
    problem = yaml_problem(e)
    where = yaml_error_position(e, text)
    return f"not valid YAML or JSON{where}: {excerpt(problem)[1:-1] if len(problem) > 100 else problem}"


def measure_depth(value: Any, limit: int) -> int:
    """How deeply lists and dicts nest in ``value`` (stops counting past ``limit``)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def deep_path(value: Any, limit: int) -> list[str | int]:
    """The keys and indexes down to the first place where ``value`` nests past ``limit``."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if len(path) >= limit:
            return path
        if isinstance(item, dict):
            stack.extend((v, [*path, str(k)]) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, [*path, i]) for i, v in enumerate(item))
    return []


def user_error(cls: type[UserError]) -> _Raise:
    """A ``fail`` callback raising ``cls(path, reason)``."""

    def fail(path: str, reason: str) -> NoReturn:
        raise cls(path, reason)

    return fail
