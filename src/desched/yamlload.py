"""The one YAML loader: libyaml (when built in) composes each document into its node graph, the
graph is measured before any Python object is built, and only then is the document constructed.

Measured: the size *as expanded* (an alias counts as a copy of what it names, so a "billion laughs"
alias bomb is refused at a few KB), the depth, and alias cycles. A graph past a bound ends in
``fail(source, reason)``, the caller's way of raising its own error type; YAML syntax errors
propagate as ``yaml.YAMLError`` for the caller to word (:func:`yaml_error_position` says where,
:func:`yaml_problem` what).

Policies, scorer args (through :mod:`desched.api.documents`), snapshots and kubeconfig files all
read YAML here. Hand-written rather than a library: PyYAML offers no limit on alias expansion or
depth, and the check is a walk over the composed graph. This module imports nothing from desched,
so every layer can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NoReturn

import yaml

__all__ = ["Fail", "yaml_documents", "yaml_error_position", "yaml_problem"]

#: ``fail(source, reason)`` raises the caller's error; it never returns.
Fail = Callable[[str, str], NoReturn]


def yaml_documents(
    data: str | bytes, source: str, fail: Fail, *, max_nodes: int, max_depth: int, single: bool = False
) -> Generator[Any, None, None]:
    """The documents of a YAML stream, each measured before it is built (an empty document
    between two others is ``None``; an empty stream has none). With ``single``, the stream must
    hold at most one document (``yaml.safe_load``'s rule). Raises ``yaml.YAMLError`` for text
    that is not YAML; ``RecursionError`` may escape the constructor on pathological nesting the
    bounds did not catch."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(data)
    try:
        if single:
            node = loader.get_single_node()
            if node is not None:
                _check_graph(node, source, fail, max_nodes, max_depth)
                yield loader.construct_document(node)
            return
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_graph(node, source, fail, max_nodes, max_depth)
            yield loader.construct_document(node)
    finally:
        loader.dispose()


def yaml_error_position(e: yaml.YAMLError, data: str | bytes | None = None) -> str:
    """`` at line L, column C`` where the parser stopped, or ``""`` if it does not say. A reader
    error (a character YAML does not allow) says only its offset in the UTF-8 text: with ``data``
    it is turned into a line and column too."""
    mark = getattr(e, "problem_mark", None)
    if mark is not None:
        return f" at line {mark.line + 1}, column {mark.column + 1}"
    position = getattr(e, "position", None)
    if isinstance(e, yaml.reader.ReaderError) and isinstance(position, int) and data is not None:
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        start = raw.rfind(b"\n", 0, position) + 1
        line = raw.count(b"\n", 0, position) + 1
        column = len(raw[start:position].decode("utf-8", "replace")) + 1
        return f" at line {line}, column {column}"
    return ""


def yaml_problem(e: yaml.YAMLError) -> str:
    """What is wrong, without PyYAML's own rendering of where (``in "<byte string>", position 36``,
    the context lines): :func:`yaml_error_position` says where."""
    if isinstance(e, yaml.reader.ReaderError):
        character = e.character
        if isinstance(character, int):
            return f"unacceptable character #x{character:04x}: {e.reason}"
        return str(e.reason)
    problem = getattr(e, "problem", None)
    if problem:
        return str(problem)
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        out: list[yaml.Node] = []
        for k, v in node.value:
            out.append(k)
            out.append(v)
        return out
    return []


def where_nested(labels: list[str | int]) -> str:
    """Where a too deep value is, for its error: the keys down to the last mapping key on the way
    (``evictionPolicy.cooldown[...]``), ``""`` when there is none (a list nested in lists)."""
    last = max((i for i, label in enumerate(labels) if isinstance(label, str)), default=-1)
    if last < 0:
        return ""
    out = ""
    for label in labels[: last + 1]:
        out += f"[{label}]" if isinstance(label, int) else (f".{label}" if out else label)
    return out + ("[...]" if last + 1 < len(labels) else "")


def _too_deep(source: str, fail: Fail, max_depth: int, labels: list[str | int]) -> None:
    where = where_nested(labels)
    fail(
        source,
        f"{where}: nested more than {max_depth} levels deep"
        if where
        else f"nested more than {max_depth} levels deep",
    )


def _check_graph(root: yaml.Node, source: str, fail: Fail, max_nodes: int, max_depth: int) -> None:
    # Post-order over the DAG (aliases are shared nodes), iteratively: size and height per node,
    # memoised by identity, so that an alias bomb costs its compact size to measure. ``trail``
    # holds the keys (indexes) from the root to the node being walked, for a depth error.
    done: dict[int, tuple[int, int]] = {}
    on_path: set[int] = set()
    trail: list[str | int] = []
    stack: list[tuple[yaml.Node, bool, str | int]] = [(root, False, "")]
    while stack:
        node, expanded, label = stack.pop()
        key = id(node)
        if expanded:
            on_path.discard(key)
            size, height = 1, 0
            for child in _children(node):
                s, h = done[id(child)]
                size += s
                height = max(height, h)
            height += 1
            if size > max_nodes:
                fail(source, f"YAML expands to more than {max_nodes} values (aliases are copies)")
            if height > max_depth:
                _too_deep(source, fail, max_depth, trail[1:])
            done[key] = (size, height)
            trail.pop()
            continue
        if key in done:
            continue
        if key in on_path:
            fail(source, "a YAML alias refers to a value that contains it")
        if len(on_path) > max_depth:
            _too_deep(source, fail, max_depth, trail[1:])
        on_path.add(key)
        trail.append(label)
        stack.append((node, True, label))
        for child_label, child in _labelled_children(node):
            cid = id(child)
            if cid in on_path:
                fail(source, "a YAML alias refers to a value that contains it")
            if cid not in done:
                stack.append((child, False, child_label))


def _labelled_children(node: yaml.Node) -> list[tuple[str | int, yaml.Node]]:
    """The children of a node, each with its place: a list index, or its mapping key's text."""
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    if isinstance(node, yaml.MappingNode):
        out: list[tuple[str | int, yaml.Node]] = []
        for k, v in node.value:
            text = k.value if isinstance(k, yaml.ScalarNode) else "?"
            out.append((text, k))
            out.append((text, v))
        return out
    return []
