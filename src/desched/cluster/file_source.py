"""Reading a cluster snapshot from a file.

Accepted: a ``kind: List`` in JSON or YAML (what ``kubectl get nodes,pods,namespaces,
poddisruptionbudgets,priorityclasses,events -A -o yaml`` prints), or multi-document YAML of the
same objects, plus the Services, ReplicaSets, StatefulSets and ReplicationControllers whose
selectors make kube-scheduler's default spread selector (optional). Kinds desched does not use
(Deployments, ConfigMaps, ...) are ignored.

JSON goes straight from bytes into the slim records (msgspec; what pods repeat is decoded once and
shared, see :mod:`desched.cluster.compact`), a batch at a time as the file is read, with the garbage
collector paused during the decode; YAML is about 40 times slower to parse, so large snapshots
should be JSON (``desched snapshot`` writes JSON).
"""

from __future__ import annotations

import io
import logging
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import yaml

from desched.api.documents import MAX_SNAPSHOT_DEPTH, excerpt, user_error
from desched.cluster.compact import CompactDecoder
from desched.cluster.snapshot import ClusterSnapshot
from desched.cluster.validation import Validator
from desched.errors import SnapshotError, key_path
from desched.gcpause import gc_paused
from desched.k8s.objects import KINDS, AnyObject, Event, ObjectReference, Pod
from desched.yamlload import yaml_documents, yaml_error_position, yaml_problem

log = logging.getLogger(__name__)

_TOO_DEEP = "nested too deeply (arrays or objects inside one another about a thousand levels deep)"
#: A YAML snapshot may expand (aliases being copies) to this many values, or 4 per byte.
_MIN_YAML_NODES = 1_000_000


class _Top(msgspec.Struct):
    """A JSON snapshot's top-level object, as far as telling a List from a single object needs."""

    kind: Any = ""
    items: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _Probe(msgspec.Struct, rename="camel"):
    kind: str = ""
    api_version: str = ""
    metadata: dict[str, Any] | None = None


def load_snapshot_file(path: str | Path) -> ClusterSnapshot:
    if not str(path):  # (Path("") is the current directory)
        raise SnapshotError(
            "", "cannot read snapshot: the path is empty (expected the path of a snapshot file)"
        )
    if "\x00" in str(path):  # (os.stat would raise ValueError)
        raise SnapshotError(str(path), "cannot read snapshot: a path cannot hold a NUL character")
    p = Path(path)
    _check_readable(p)
    # The snapshot's records are long-lived and many: the cyclic collector would rescan them again
    # and again while they are built (reference counting frees the garbage meanwhile).
    check = Validator()  # (the records of a streamed file are checked batch by batch)
    with gc_paused():
        try:
            objects = _load_json_streamed(p, check)
        except RecursionError:
            raise SnapshotError(str(path), _TOO_DEEP) from None
        if objects is None:
            try:
                data = p.read_bytes()
            except OSError as e:
                raise SnapshotError(str(path), f"cannot read snapshot: {e.strerror or e}") from None
            objects = parse_snapshot_bytes(data, str(path))
            del data
            check = Validator()  # (afresh: a file not streamed to the end was given in part)
            check.add(objects)
        check.finish(objects, str(path))
        return snapshot_from_objects(objects)


def _check_readable(path: Path) -> None:
    """A regular file or a pipe (``simulate <(kubectl get ... -o json)``); not a directory or a
    device such as /dev/zero, which would be read forever."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise SnapshotError(str(path), f"cannot read snapshot: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise SnapshotError(str(path), "cannot read snapshot: is a directory")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise SnapshotError(str(path), "cannot read snapshot: not a regular file or a pipe")


def parse_snapshot_bytes(data: bytes, source: str = "snapshot") -> list[AnyObject]:
    """Decode a snapshot's objects (any order, unknown kinds dropped)."""
    head = data.lstrip()[:1]
    if not head:
        raise SnapshotError(source, "empty file (expected a v1 List of the cluster's objects)")
    try:
        with gc_paused():
            if head != b"{":
                # YAML is turned into the JSON of a List and read by the JSON decoder: one decoder
                # contract (same types, same checks, same errors) for both formats
                data = _yaml_as_json(data, source)
            return _decode_json(data, source, CompactDecoder())
    except RecursionError:
        raise SnapshotError(source, _TOO_DEEP) from None


def snapshot_from_objects(objects: Iterable[AnyObject]) -> ClusterSnapshot:
    by_kind: dict[str, list[Any]] = {k: [] for k in KINDS}
    for obj in objects:
        by_kind[type(obj).__name__].append(obj)
    return ClusterSnapshot(
        nodes=by_kind["Node"],
        pods=by_kind["Pod"],
        namespaces=by_kind["Namespace"],
        pdbs=by_kind["PodDisruptionBudget"],
        priority_classes=by_kind["PriorityClass"],
        pvcs=by_kind["PersistentVolumeClaim"],
        events=by_kind["Event"],
        workloads=[
            *by_kind["Service"],
            *by_kind["ReplicationController"],
            *by_kind["ReplicaSet"],
            *by_kind["StatefulSet"],
        ],
        deployments=by_kind["Deployment"],
    )


# ---------------------------------------------------------------------------- JSON, streamed

#: Files smaller than this are simply read whole.
_STREAM_MIN_BYTES = 64 << 20
#: About this many bytes of the file are decoded at once: small enough to stay in the CPU's cache
#: with the records built from them (faster than one decode of the whole file, and than larger
#: batches: docs/performance.md), large enough that per-batch costs vanish.
_BATCH_BYTES = 512 << 10
#: The file is read this many bytes at a time (at least).
_READ_BYTES = 64 << 10
#: The top-level ``"items"`` key of a List, searched for in the first bytes of the file.
_ITEMS_KEY = re.compile(rb'"items"\s*:\s*\[\s*')
_ITEMS_KEY_WINDOW = 1 << 16
#: The start of a listed object: ``{"apiVersion":"..","kind":"..","metadata":`` (either key first,
#: any whitespace). A JSON string cannot hold an unescaped quote, so this never matches inside a
#: string; nested lists (ownerReferences, managedFields) lack one of the three keys. A match at the
#: wrong depth would still be caught: the batch it ends would not be valid JSON (see below).
_ITEM_START = re.compile(
    rb'\{\s*"(?:apiVersion"\s*:\s*"[^"\\]*"\s*,\s*"kind|kind"\s*:\s*"[^"\\]*"\s*,\s*"apiVersion)"'
    rb'\s*:\s*"[^"\\]*"\s*,\s*"metadata"\s*:'
)
_WHITESPACE = b" \t\r\n"
_MAX_EXTENSIONS = 16
#: Where to look for the cut: from this far before the batch's end.
_CUT_WINDOW = 256 << 10
_EVENTS_API = b'"events.k8s.io/'
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])


def _load_json_streamed(path: Path, check: Validator | None = None) -> list[AnyObject] | None:
    """Decode a large JSON ``List`` batch by batch as the file is read, so that the file's bytes
    are never all in memory next to the records built from them (a large cluster's file is bigger
    than its records: docs/performance.md): a batch is read into a buffer used again for the next.

    Returns None when the file is small, not a JSON List, laid out in a way this does not
    recognise, or cannot be read; the caller then reads it whole (which also reports any error).
    A file cut short while it is read (by another process) is not a JSON List either.
    The objects decoded are given to ``check`` as they are (a batch at a time).
    """
    try:
        with path.open("rb", buffering=0) as f:
            if os.fstat(f.fileno()).st_size < _STREAM_MIN_BYTES:
                return None
            return _decode_json_batches(_Window(f), str(path), check or Validator())
    except (OSError, ValueError):
        return None


class _Window:
    """The bytes of a file read so far but not dropped: ``data[:size]``, read sequentially."""

    __slots__ = ("data", "eof", "file", "size")

    def __init__(self, file: io.FileIO) -> None:
        self.file = file
        self.data = bytearray(_BATCH_BYTES + _READ_BYTES)
        self.size = 0
        self.eof = False

    def fill(self, upto: int) -> None:
        """Read until ``data[:size]`` holds ``upto`` bytes or the whole rest of the file."""
        while self.size < upto and not self.eof:
            want = max(upto, self.size + _READ_BYTES)
            if want > len(self.data):
                # a new buffer, rather than a resize (raw parts may still refer to this one)
                grown = bytearray(max(want, 2 * len(self.data)))
                grown[: self.size] = memoryview(self.data)[: self.size]
                self.data = grown
            n = self.file.readinto(memoryview(self.data)[self.size : want])
            if not n:
                self.eof = True
            else:
                self.size += n

    def drop(self, n: int) -> None:
        """Forget the first ``n`` bytes."""
        rest = self.size - n
        self.data[:rest] = self.data[n : self.size]  # (a copy first: the ranges may overlap)
        self.size = rest

    def search(self, pos: int) -> re.Match[bytes] | None:
        """The first ``_ITEM_START`` from ``pos`` in the rest of the file (read as needed)."""
        while True:
            found = _ITEM_START.search(self.data, pos, self.size)
            if found is not None or self.eof:
                return found
            # (a match cut by the end of what is read is found again once the rest is read)
            pos = max(pos, self.size - _READ_BYTES)
            self.fill(self.size + _READ_BYTES)

    def rest(self, start: int) -> bytes:
        """The bytes from ``start`` to the file's end."""
        return bytes(memoryview(self.data)[start : self.size]) + self.file.read()


def _decode_json_batches(w: _Window, source: str, check: Validator) -> list[AnyObject] | None:
    w.fill(_ITEMS_KEY_WINDOW)
    head = bytes(w.data[: min(w.size, _ITEMS_KEY_WINDOW)])
    if head.lstrip()[:1] != b"{":
        return None
    m = _ITEMS_KEY.search(head)
    if m is None:
        return None
    try:  # "items" must be a key of the top-level object, not of something nested
        msgspec.json.decode(head[: m.start()] + b'"items":null}')
    except msgspec.DecodeError:
        return None
    out: list[AnyObject] = []
    records = CompactDecoder()
    # Positions are in ``w.data``. The items not decoded yet start at ``start``, the first of them
    # complete from its start; the byte before it ("[", a space or the "," after the previous item)
    # becomes the "[" of a batch.
    start = m.end()
    del head
    count = 0  # items decoded so far, for error messages
    search_from = start + 1
    target = start + _BATCH_BYTES  # cut near here
    while True:
        w.fill(target + 1)
        if target >= w.size:
            break
        window = max(search_from, target - _CUT_WINDOW)
        found = w.search(window)
        if found is None:  # none after (items of a kind laid out otherwise): the last one before
            found = _last_item_start(w.data, search_from, window)
        cut = -1
        for _ in range(_MAX_EXTENSIONS):
            if found is None:
                break
            buf = w.data
            search_from = found.end()
            end = found.start()
            while end > start and buf[end - 1] in _WHITESPACE:
                end -= 1
            if end > start and buf[end - 1] == 0x2C:  # ","
                buf[start - 1] = 0x5B  # "["
                buf[end - 1] = 0x5D  # "]": buf[start - 1 : end] is now "[item,...,item]"
                batch = _decode_batch(buf, start - 1, end, source, count, records)
                if batch is not None:
                    out.extend(batch[0])
                    check.add(batch[0])
                    count += batch[1]
                    cut = found.start()
                    break
                buf[end - 1] = 0x2C  # a match at the wrong depth: try the next one
            found = w.search(search_from)
        if cut < 0:  # decode more at once; what is before the window is not searched again
            search_from = max(search_from, window)
            target += _BATCH_BYTES
            continue
        # what is before the next batch's "[" is done with
        w.drop(cut - 1)
        start = 1
        search_from = start + 1
        target = start + _BATCH_BYTES
    # the last items, the closing bracket and the rest of the top-level object
    data = b'{"items":[' + w.rest(start)
    try:
        if data.find(_EVENTS_API) != -1:
            raise msgspec.ValidationError("events.k8s.io objects: item by item")
        last = records.decode_list(data)
    except msgspec.ValidationError:  # (a DecodeError too: catch it first)
        try:
            _raw_list_decoder.decode(b"[" + data + b"]")
        except msgspec.DecodeError:
            return None
        last = _decode_json(data, source, records, count)
    except msgspec.DecodeError:
        return None
    out.extend(last)
    check.add(last)
    return out


def _last_item_start(data: bytearray, start: int, end: int) -> re.Match[bytes] | None:
    """The last match of ``_ITEM_START`` from ``start`` that begins before ``end``."""
    last = None
    found = _ITEM_START.search(data, start)
    while found is not None and found.start() < end:
        last = found
        found = _ITEM_START.search(data, found.end())
    return last


def _decode_batch(
    data: bytearray, start: int, end: int, source: str, base: int, records: CompactDecoder
) -> tuple[list[AnyObject], int] | None:
    """The objects of the JSON array ``data[start:end]`` and how many items it has, or None when
    it is not a JSON array (a cut in the wrong place)."""
    view = memoryview(data)[start:end]  # (not released explicitly: raw parts may still refer to it)
    try:
        items = records.decode_array(view)
        # an events.k8s.io Event decodes as a core one with most fields missing (see _decode_json)
        if not any(type(o) is Event for o in items) or data.find(_EVENTS_API, start, end) == -1:
            return items, len(items)
    except msgspec.ValidationError:  # (a DecodeError too: catch it first)
        pass  # unknown kinds, a bad field, or a bad cut found late
    except msgspec.DecodeError:
        return None
    try:
        n = len(_raw_list_decoder.decode(view))
    except msgspec.DecodeError:
        return None
    wrapped = b'{"kind":"List","items":' + bytes(view) + b"}"
    return _decode_json(wrapped, source, records, base), n


# ---------------------------------------------------------------------------- JSON


def _decode_json(data: bytes, source: str, records: CompactDecoder, index_base: int = 0) -> list[AnyObject]:
    # An events.k8s.io Event has the kind of a core one but other field names: the typed decode
    # would take it for a core Event with most fields missing.
    if _EVENTS_API not in data:
        try:
            objects = records.decode_list(data)
            if objects:  # (none: an empty List, or no List at all: see below)
                return objects
        except msgspec.DecodeError:
            pass  # unknown kinds, a single object, or a real error: go item by item
    try:
        top = msgspec.json.decode(data, type=_Top)
    except msgspec.ValidationError as e:
        raise SnapshotError(
            source, f"expected a v1 List of the cluster's objects, got {_json_type(e)}"
        ) from None
    except msgspec.DecodeError as e:
        raise SnapshotError(source, f"not valid JSON: {e}") from None
    raws: list[msgspec.Raw]
    item_kind = _listed_kind(top.kind, top.items is not msgspec.UNSET, source)
    if item_kind is None:
        raws = [msgspec.Raw(data)]
    else:
        assert not isinstance(top.items, msgspec.UnsetType)
        try:
            listed = msgspec.json.decode(top.items, type=list[msgspec.Raw] | None)
        except msgspec.ValidationError as e:
            raise SnapshotError(
                f"{source}: items", f"must be a list of objects, got {_json_type(e)}"
            ) from None
        if listed is None:
            raise SnapshotError(f"{source}: items", "must be a list of objects, got null")
        raws = listed
    out: list[AnyObject] = []
    for i, raw in enumerate(raws):
        try:
            probe = msgspec.json.decode(raw, type=_Probe)
        except msgspec.ValidationError as e:
            raise _item_error(source, index_base + i, e) from None
        if not probe.kind:
            if not item_kind:
                raise SnapshotError(
                    f"{source}: items[{index_base + i}]", "kind: required (each listed object names its kind)"
                )
            probe.kind = item_kind  # (the items of a PodList, NodeList, ... need not say it)
        cls = KINDS.get(probe.kind)
        if cls is None:
            _refuse_policy(probe.kind, source)
            continue
        if probe.kind == "Event" and probe.api_version.startswith("events.k8s.io"):
            event = _event_from_events_api(msgspec.json.decode(raw), index_base + i, probe, source)
            out.append(_convert(event, index_base + i, probe, source))
            continue
        try:
            if cls is Pod:
                out.append(records.decode_pod(raw))
                continue
            obj = msgspec.json.decode(raw, type=cls)
        except msgspec.ValidationError as e:
            raise _object_error(source, index_base + i, probe.kind, probe.metadata, e) from None
        records.interner.objects((obj,))
        out.append(obj)  # type: ignore[arg-type]
    return out


def _listed_kind(kind: Any, has_items: bool, source: str) -> str | None:
    """How a top-level object holds the snapshot's objects, the one rule of both formats: None for
    a single object; for a list, the kind its items are of when they need not say it (``Pod`` for
    a ``PodList``), else "". A ``List`` without ``items`` is not an empty cluster: it is refused,
    as is an object that is neither a list nor a Kubernetes object."""
    if not isinstance(kind, str):
        raise SnapshotError(f"{source}: kind", f"must be a string, got {excerpt(kind)}")
    if not has_items:
        if kind == "List":
            raise SnapshotError(
                f"{source}: items",
                "required field is missing (a List holds the cluster's objects in items; "
                "an empty cluster is items: [])",
            )
        if not kind:
            raise SnapshotError(
                source, "an object with neither kind nor items (expected a v1 List of the cluster's objects)"
            )
        return None
    if kind == "List" or not kind:
        return ""
    return kind[: -len("List")] if kind.endswith("List") else None


def _json_type(err: msgspec.ValidationError) -> str:
    """``null``, ``an array`` ... from msgspec's "Expected `object`, got `null`"."""
    got = str(err).partition("got `")[2].partition("`")[0]
    return {
        "null": "null",
        "array": "a list",
        "object": "an object",
        "str": "a string",
        "int": "a number",
        "float": "a number",
        "bool": "a boolean",
    }.get(got, got or "something else")


# ---------------------------------------------------------------------------- YAML


def _yaml_documents(data: bytes, source: str) -> Iterator[Any]:
    """The documents of a YAML stream, each measured before it is built (alias expansion, depth:
    see :mod:`desched.api.documents`)."""
    max_nodes = max(_MIN_YAML_NODES, 4 * len(data))
    return yaml_documents(
        data, source, user_error(SnapshotError), max_nodes=max_nodes, max_depth=MAX_SNAPSHOT_DEPTH
    )


def _iter_yaml_items(data: bytes, source: str) -> Iterator[Any]:
    """The listed objects of every document (a List's items, or the document itself), by the rule
    of :func:`_listed_kind`; a stream of no document at all, or only of empty ones, is refused."""
    documents = 0
    try:
        for doc in _yaml_documents(data, source):
            if doc is None:
                continue
            documents += 1
            if not isinstance(doc, dict):
                names: dict[type, str] = {
                    list: "a list",
                    str: "a string",
                    int: "a number",
                    float: "a number",
                    bool: "a boolean",
                }
                what = names.get(type(doc), type(doc).__name__)
                raise SnapshotError(source, f"expected a v1 List of the cluster's objects, got {what}")
            if isinstance(doc.get("kind"), str):
                _refuse_policy(doc["kind"], source)
            item_kind = _listed_kind(doc.get("kind", ""), "items" in doc, source)
            if item_kind is None:
                yield doc
                continue
            items = doc["items"]
            if not isinstance(items, list):
                got = "null" if items is None else "an object" if isinstance(items, dict) else excerpt(items)
                raise SnapshotError(f"{source}: items", f"must be a list of objects, got {got}")
            for item in items:
                if item_kind and isinstance(item, dict) and not item.get("kind"):
                    item["kind"] = item_kind
                yield item
    except yaml.YAMLError as e:
        raise SnapshotError(
            source, f"not valid YAML{yaml_error_position(e, data)}: {yaml_problem(e)}"
        ) from None
    if not documents:
        raise SnapshotError(
            source, "holds no object, only null (expected a v1 List of the cluster's objects)"
        )


def _yaml_as_json(data: bytes, source: str) -> bytes:
    """A YAML snapshot as the JSON of a List of its objects. What JSON cannot hold is refused here,
    naming the object and the field: a key that is not a string, a number that is not finite.
    (A timestamp YAML read as a date is written back as its RFC 3339 text.)"""
    items = list(_iter_yaml_items(data, source))
    for i, item in enumerate(items):
        problem = _not_json(item)
        if problem is not None:
            meta = item.get("metadata") if isinstance(item, dict) else None
            who = _object_who(str(item.get("kind", "?")), meta if isinstance(meta, dict) else {})
            raise SnapshotError(f"{source}: items[{i}] ({who})", problem)
    return msgspec.json.encode({"kind": "List", "items": items})


def _not_json(value: Any) -> str | None:
    """Why ``value`` has no JSON form (``field: reason``), or None."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if not isinstance(k, str):
                    return f"{path or 'key'}: a key must be a string, got {excerpt(k)} (quote it)"
                stack.append((v, key_path(path, k)))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{j}]") for j, v in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            return f"{path}: {item} is not a number JSON can hold"
    return None


def _convert(item: dict[str, Any], index: int, probe: _Probe, source: str) -> AnyObject:
    cls = KINDS[probe.kind]
    try:
        obj: AnyObject = msgspec.convert(item, cls, strict=False)  # type: ignore[assignment]
    except msgspec.ValidationError as e:
        raise _object_error(source, index, probe.kind, probe.metadata, e) from None
    return obj


def _event_from_events_api(item: Any, index: int, probe: _Probe, source: str) -> dict[str, Any]:
    """An events.k8s.io/v1 Event in core/v1 field names (what the decision code reads)."""
    for key in ("regarding", "series"):
        value = item.get(key)
        if value is not None and not isinstance(value, dict):
            meta = probe.metadata if isinstance(probe.metadata, dict) else {}
            who = _object_who(probe.kind, meta)
            raise SnapshotError(
                f"{source}: items[{index}] ({who})", f"{key}: must be an object, got {excerpt(value)}"
            )
    regarding = item.get("regarding") or {}
    series = item.get("series") or None
    try:
        involved = msgspec.to_builtins(msgspec.convert(regarding, ObjectReference, strict=False))
    except msgspec.ValidationError as e:
        raise _object_error(source, index, probe.kind, probe.metadata, e, "regarding") from None
    return {
        "kind": "Event",
        "metadata": item.get("metadata") or {},
        "involvedObject": involved,
        "reason": item.get("reason", ""),
        "message": item.get("note", ""),
        "type": item.get("type", ""),
        "count": (series or {}).get("count") or item.get("deprecatedCount") or 1,
        "firstTimestamp": item.get("deprecatedFirstTimestamp"),
        "lastTimestamp": (series or {}).get("lastObservedTime") or item.get("deprecatedLastTimestamp"),
        "eventTime": item.get("eventTime"),
        "reportingComponent": item.get("reportingController", ""),
    }


def _object_who(kind: str, meta: dict[str, Any]) -> str:
    name = excerpt(str(meta.get("name", "?")))[1:-1]
    ns = meta.get("namespace")
    return f"{kind} {excerpt(str(ns))[1:-1]}/{name}" if ns else f"{kind} {name}"


def _object_error(
    source: str,
    index: int,
    kind: str,
    metadata: dict[str, Any] | None,
    err: msgspec.ValidationError,
    prefix: str = "",
) -> SnapshotError:
    meta = metadata if isinstance(metadata, dict) else {}
    who = _object_who(kind, meta)
    text = str(err)
    field = ""
    if " - at `$" in text:
        text, _, at = text.partition(" - at `$")
        field = at.rstrip("`").lstrip(".")
    if prefix:
        field = f"{prefix}.{field}" if field else prefix
    reason = text[:1].lower() + text[1:]
    return SnapshotError(f"{source}: items[{index}] ({who})", f"{field}: {reason}" if field else reason)


def _item_error(source: str, index: int, err: msgspec.ValidationError) -> SnapshotError:
    """An item whose kind, apiVersion or metadata is not even of the right type."""
    text = str(err)
    field = ""
    if " - at `$" in text:
        text, _, at = text.partition(" - at `$")
        field = at.rstrip("`").lstrip(".")
    reason = text[:1].lower() + text[1:]
    return SnapshotError(f"{source}: items[{index}]", f"{field}: {reason}" if field else reason)


def _refuse_policy(kind: str, source: str) -> None:
    if kind == "DeschedulerPolicy":
        raise SnapshotError(
            source,
            "this is a DeschedulerPolicy, not a cluster snapshot (the policy goes to --policy; "
            "the snapshot is a v1 List of the cluster's objects)",
        )
