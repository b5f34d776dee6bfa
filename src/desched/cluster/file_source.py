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
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import yaml

from desched.api.errors import SnapshotError
from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import KINDS, AnyObject, ObjectReference

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
    try:
        data = p.read_bytes()
    except OSError as e:
        raise SnapshotError(str(path), f"cannot read snapshot: {e.strerror or e}") from None
    return snapshot_from_objects(parse_snapshot_bytes(data, str(path)))


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


# ---------------------------------------------------------------------------- JSON


def _decode_json(data: bytes, source: str) -> list[AnyObject]:
    try:
        return msgspec.json.decode(data, type=_JsonList).items
    except msgspec.DecodeError:
        pass  # unknown kinds, a single object, events.k8s.io events, or a real error: go item by item
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
            out.append(_convert(_event_from_events_api(msgspec.json.decode(raw)), i, probe, source))
            continue
        try:
            out.append(msgspec.json.decode(raw, type=cls))  # type: ignore[arg-type]
        except msgspec.ValidationError as e:
            raise _object_error(source, i, probe.kind, probe.metadata, e) from None
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
