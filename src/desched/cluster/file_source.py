"""Reading a cluster snapshot from a file.

Accepted: a ``kind: List`` in JSON or YAML (what ``kubectl get nodes,pods,namespaces,
poddisruptionbudgets,priorityclasses,events -A -o yaml`` prints), or multi-document YAML of the
same objects. Kinds desched does not use (Services, ...) are ignored.

JSON goes straight from bytes into the slim records (msgspec), with the garbage collector paused
during the decode; YAML is about 40 times slower to parse, so large snapshots should be JSON
(``desched snapshot`` writes JSON).
"""

from __future__ import annotations

import gc
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import yaml

from desched.api.errors import SnapshotError
from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import (
    KINDS,
    AnyObject,
    Container,
    Event,
    Node,
    ObjectMeta,
    ObjectReference,
    Pod,
)

log = logging.getLogger(__name__)


class _JsonList(msgspec.Struct):
    items: list[AnyObject]


class _RawList(msgspec.Struct):
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)
    kind: str = ""


class _Probe(msgspec.Struct, rename="camel"):
    kind: str = ""
    api_version: str = ""
    metadata: dict[str, Any] | None = None


def load_snapshot_file(path: str | Path) -> ClusterSnapshot:
    p = Path(path)
    # The snapshot's records are long-lived and many: the cyclic collector would rescan them again
    # and again while they are built (reference counting frees the garbage meanwhile).
    enabled = gc.isenabled()
    gc.disable()
    try:
        objects = _load_json_streamed(p)
        if objects is None:
            try:
                data = p.read_bytes()
            except OSError as e:
                raise SnapshotError(str(path), f"cannot read snapshot: {e.strerror or e}") from None
            objects = parse_snapshot_bytes(data, str(path))
            del data
        return snapshot_from_objects(objects)
    finally:
        if enabled:
            gc.enable()


def parse_snapshot_bytes(data: bytes, source: str = "snapshot") -> list[AnyObject]:
    """Decode a snapshot's objects (any order, unknown kinds dropped)."""
    head = data.lstrip()[:1]
    enabled = gc.isenabled()
    gc.disable()
    try:
        if head == b"{":
            return _decode_json(data, source)
        return _decode_yaml(data, source)
    finally:
        if enabled:
            gc.enable()


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
    )


# ---------------------------------------------------------------------------- JSON, streamed

#: Files smaller than this are simply read whole.
_STREAM_MIN_BYTES = 64 << 20
#: About this many bytes of the file are decoded at once: small enough to stay in the CPU's cache
#: (faster than one decode of the whole file, measured), large enough that per-batch costs vanish.
_BATCH_BYTES = 1 << 20
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
#: Where to look for the cut: this far before the end of what was read.
_CUT_WINDOW = 256 << 10
_item_list_decoder = msgspec.json.Decoder(list[AnyObject])
_EVENTS_API = b'"events.k8s.io/'
_raw_list_decoder = msgspec.json.Decoder(list[msgspec.Raw])


def _load_json_streamed(path: Path) -> list[AnyObject] | None:
    """Decode a large JSON ``List`` batch by batch as the file is read, so that the file's bytes
    are never all in memory next to the records built from them (at 150,000 pods the file is
    1.3 GB, the records about as much).

    Returns None when the file is small, not a JSON List, or laid out in a way this does not
    recognise; the caller then reads it whole (which also reports any error).
    """
    try:
        with path.open("rb") as f:
            if os.fstat(f.fileno()).st_size < _STREAM_MIN_BYTES:
                return None
            return _decode_json_batches(f, str(path))
    except OSError:
        return None


def _decode_json_batches(f: BinaryIO, source: str) -> list[AnyObject] | None:
    head = f.read(_ITEMS_KEY_WINDOW)
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
    interner = _Interner()
    # buf holds "[" and then the items not decoded yet, the first of them complete from its start
    buf = bytearray(b"[")
    buf += head[m.end() :]
    del head
    count = 0  # items decoded so far, for error messages
    search_from = 1
    cut_failed = False
    while True:
        if cut_failed or len(buf) < _BATCH_BYTES:
            data = f.read(_BATCH_BYTES)
            if not data:
                break
            buf += data
            del data
            cut_failed = False
            continue
        # cut at an item start near the end of what was read: everything before it is decoded now
        cut_failed = True
        pos = max(search_from, len(buf) - _CUT_WINDOW)
        for _ in range(_MAX_EXTENSIONS):
            found = _ITEM_START.search(buf, pos)
            if found is None and pos > search_from:
                found = _ITEM_START.search(buf, search_from)
            if found is None:
                break
            cut = found.start()
            pos = search_from = found.end()
            end = cut
            while end > 1 and buf[end - 1] in _WHITESPACE:
                end -= 1
            if end <= 1 or buf[end - 1] != 0x2C:  # ","
                continue
            buf[end - 1] = 0x5D  # "]": buf[:end] is now "[item,...,item]"
            batch = _decode_batch(buf, end, source, count)
            if batch is None:
                buf[end - 1] = 0x2C  # a match at the wrong depth: try the next one
                continue
            interner.objects(batch[0])
            out.extend(batch[0])
            count += batch[1]
            rest = buf[cut:]
            buf = bytearray(b"[")
            buf += rest
            del rest
            search_from = 1
            cut_failed = False
            break
    # the last items, the closing bracket and the rest of the top-level object
    buf[0:0] = b'{"items":'
    n_batched = len(out)
    try:
        if buf.find(_EVENTS_API) != -1:
            raise msgspec.ValidationError("events.k8s.io objects: item by item")
        out.extend(msgspec.json.decode(buf, type=_JsonList).items)
    except msgspec.ValidationError:  # (a DecodeError too: catch it first)
        try:
            _raw_list_decoder.decode(b"[" + buf + b"]")
        except msgspec.DecodeError:
            return None
        out.extend(_decode_json(bytes(buf), source, count))
    except msgspec.DecodeError:
        return None
    interner.objects(out[n_batched:])
    return out


def _decode_batch(buf: bytearray, end: int, source: str, base: int) -> tuple[list[AnyObject], int] | None:
    """The objects of the JSON array ``buf[:end]`` and how many items it has, or None when
    ``buf[:end]`` is not a JSON array (a cut in the wrong place)."""
    with memoryview(buf) as whole, whole[:end] as view:
        try:
            items = _item_list_decoder.decode(view)
            # an events.k8s.io Event decodes as a core one with most fields missing (see _decode_json)
            if not any(type(o) is Event for o in items) or buf.find(_EVENTS_API, 0, end) == -1:
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
    return _decode_json(wrapped, source, base), n


# ---------------------------------------------------------------------------- JSON


def _decode_json(data: bytes, source: str, index_base: int = 0) -> list[AnyObject]:
    # An events.k8s.io Event has the kind of a core one but other field names: the typed decode
    # would take it for a core Event with most fields missing.
    if _EVENTS_API not in data:
        try:
            return msgspec.json.decode(data, type=_JsonList).items
        except msgspec.DecodeError:
            pass  # unknown kinds, a single object, or a real error: go item by item
    try:
        top = msgspec.json.decode(data, type=_RawList)
    except msgspec.DecodeError as e:
        raise SnapshotError(source, f"not valid JSON: {e}") from None
    raws = top.items if top.items or top.kind == "List" else [msgspec.Raw(data)]
    out: list[AnyObject] = []
    for i, raw in enumerate(raws):
        probe = msgspec.json.decode(raw, type=_Probe)
        cls = KINDS.get(probe.kind)
        if cls is None:
            continue
        if probe.kind == "Event" and probe.api_version.startswith("events.k8s.io"):
            out.append(
                _convert(_event_from_events_api(msgspec.json.decode(raw)), index_base + i, probe, source)
            )
            continue
        try:
            out.append(msgspec.json.decode(raw, type=cls))  # type: ignore[arg-type]
        except msgspec.ValidationError as e:
            raise _object_error(source, index_base + i, probe.kind, probe.metadata, e) from None
    return out


# ---------------------------------------------------------------------------- YAML


def _iter_yaml_items(data: bytes, source: str) -> Iterator[dict[str, Any]]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        for doc in yaml.load_all(data, Loader=loader):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise SnapshotError(source, f"expected an object or a List, got {type(doc).__name__}")
            if doc.get("kind") == "List" or ("items" in doc and "kind" not in doc):
                items = doc.get("items") or []
                if not isinstance(items, list):
                    raise SnapshotError(f"{source}: items", "must be a list")
                yield from items
            elif str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
                kind = str(doc["kind"])[: -len("List")]
                for item in doc["items"]:
                    if isinstance(item, dict):
                        item.setdefault("kind", kind)
                    yield item
            else:
                yield doc
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise SnapshotError(source, f"not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None


def _decode_yaml(data: bytes, source: str) -> list[AnyObject]:
    out: list[AnyObject] = []
    for i, item in enumerate(_iter_yaml_items(data, source)):
        if not isinstance(item, dict):
            raise SnapshotError(f"{source}: items[{i}]", f"expected an object, got {type(item).__name__}")
        kind = item.get("kind")
        if kind not in KINDS:
            continue
        probe = _Probe(
            kind=str(kind), api_version=str(item.get("apiVersion", "")), metadata=item.get("metadata")
        )
        if kind == "Event" and probe.api_version.startswith("events.k8s.io"):
            item = _event_from_events_api(item)
        out.append(_convert(item, i, probe, source))
    return out


def _convert(item: dict[str, Any], index: int, probe: _Probe, source: str) -> AnyObject:
    cls = KINDS[probe.kind]
    try:
        obj: AnyObject = msgspec.convert(item, cls, strict=False)  # type: ignore[assignment]
    except msgspec.ValidationError as e:
        raise _object_error(source, index, probe.kind, probe.metadata, e) from None
    return obj


def _event_from_events_api(item: dict[str, Any]) -> dict[str, Any]:
    """An events.k8s.io/v1 Event in core/v1 field names (what the decision code reads)."""
    regarding = item.get("regarding") or {}
    series = item.get("series") or None
    return {
        "kind": "Event",
        "metadata": item.get("metadata") or {},
        "involvedObject": msgspec.to_builtins(msgspec.convert(regarding, ObjectReference, strict=False)),
        "reason": item.get("reason", ""),
        "message": item.get("note", ""),
        "type": item.get("type", ""),
        "count": (series or {}).get("count") or item.get("deprecatedCount") or 1,
        "firstTimestamp": item.get("deprecatedFirstTimestamp"),
        "lastTimestamp": (series or {}).get("lastObservedTime") or item.get("deprecatedLastTimestamp"),
        "eventTime": item.get("eventTime"),
        "reportingComponent": item.get("reportingController", ""),
    }


def _object_error(
    source: str, index: int, kind: str, metadata: dict[str, Any] | None, err: msgspec.ValidationError
) -> SnapshotError:
    meta = metadata if isinstance(metadata, dict) else {}
    name = str(meta.get("name", "?"))
    ns = meta.get("namespace")
    who = f"{kind} {ns}/{name}" if ns else f"{kind} {name}"
    text = str(err)
    field = ""
    if " - at `$" in text:
        text, _, at = text.partition(" - at `$")
        field = at.rstrip("`").lstrip(".")
    reason = text[:1].lower() + text[1:]
    return SnapshotError(f"{source}: items[{index}] ({who})", f"{field}: {reason}" if field else reason)


# ---------------------------------------------------------------------------- interning


class _Interner:
    """Makes the repeated short strings of a snapshot's records one object each.

    150,000 pods repeat the same namespaces, node names, label values, images, condition types,
    ... The decoder builds a fresh string for each occurrence (it already shares dict keys);
    replacing them by a canonical instance, batch by batch as they are decoded, saves about a third
    of the records' memory. Nothing compares these strings by identity, so this changes no
    decision. A pod's UTC timestamps equal to its creation or start time are shared too (others are
    left alone: equal instants in other zones print differently).
    """

    __slots__ = ("_table",)

    def __init__(self) -> None:
        self._table: dict[object, Any] = {}

    def objects(self, objects: list[AnyObject]) -> None:
        t = self._table.setdefault
        pod_kind = Pod
        for obj in objects:
            if type(obj) is pod_kind:
                _intern_pod(obj, t)
            elif type(obj) is Node:
                _intern_node(obj, t)


_Intern = Callable[[Any, Any], Any]


def _intern_meta(m: ObjectMeta, t: _Intern) -> None:
    m.namespace = t(m.namespace, m.namespace)
    d: dict[str, Any] | None = m.labels
    if d:
        for k, v in d.items():  # (replacing values of existing keys while iterating is allowed)
            d[k] = t(v, v)
    d = m.annotations
    if d:
        for k, v in d.items():
            d[k] = t(v, v)
    for ref in m.owner_references or ():
        ref.kind = t(ref.kind, ref.kind)
        ref.name = t(ref.name, ref.name)
        ref.api_version = t(ref.api_version, ref.api_version)


def _intern_quantities(d: dict[str, Any], t: _Intern) -> None:
    for k, v in d.items():
        if type(v) is str:  # (never an int for an equal float)
            d[k] = t(v, v)


def _intern_containers(containers: list[Container], t: _Intern) -> None:
    for c in containers:
        c.name = t(c.name, c.name)
        c.image = t(c.image, c.image)
        r = c.resources
        if r is not None:
            if r.requests:
                _intern_quantities(r.requests, t)
            if r.limits:
                _intern_quantities(r.limits, t)


def _intern_pod(pod: Pod, t: _Intern) -> None:
    _intern_meta(pod.metadata, t)
    spec = pod.spec
    spec.node_name = t(spec.node_name, spec.node_name)
    spec.priority_class_name = t(spec.priority_class_name, spec.priority_class_name)
    spec.scheduler_name = t(spec.scheduler_name, spec.scheduler_name)
    spec.restart_policy = t(spec.restart_policy, spec.restart_policy)
    s = spec.preemption_policy
    if s is not None:
        spec.preemption_policy = t(s, s)
    d = spec.node_selector
    if d:
        for k, v in d.items():
            d[k] = t(v, v)
    for tol in spec.tolerations or ():
        tol.key = t(tol.key, tol.key)
        tol.operator = t(tol.operator, tol.operator)
        tol.value = t(tol.value, tol.value)
        tol.effect = t(tol.effect, tol.effect)
    _intern_containers(spec.containers, t)
    if spec.init_containers:
        _intern_containers(spec.init_containers, t)
    for vol in spec.volumes or ():
        vol.name = t(vol.name, vol.name)
    status = pod.status
    status.phase = t(status.phase, status.phase)
    status.qos_class = t(status.qos_class, status.qos_class)
    # a pod's timestamps mostly repeat its own creation or start time (hashing timestamps for a
    # table would cost more than it saves)
    created = pod.metadata.creation_timestamp
    if created is not None and created.tzinfo is not UTC:
        created = None
    started = status.start_time
    if started is not None:
        if started.tzinfo is not UTC:
            started = None
        elif started == created:
            status.start_time = started = created
    for c in status.conditions or ():
        c.type = t(c.type, c.type)
        c.status = t(c.status, c.status)
        c.reason = t(c.reason, c.reason)
        ts = c.last_transition_time
        if ts is not None and ts.tzinfo is UTC:
            if ts == started:
                c.last_transition_time = started
            elif ts == created:
                c.last_transition_time = created
    for cs in status.container_statuses or ():
        cs.name = t(cs.name, cs.name)


def _intern_node(node: Node, t: _Intern) -> None:
    _intern_meta(node.metadata, t)
    st = node.status
    if st.capacity:
        _intern_quantities(st.capacity, t)
    if st.allocatable:
        _intern_quantities(st.allocatable, t)
    for c in st.conditions or ():
        c.type = t(c.type, c.type)
        c.status = t(c.status, c.status)
        c.reason = t(c.reason, c.reason)
