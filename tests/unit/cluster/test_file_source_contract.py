"""One decoder contract for JSON and YAML snapshots (issue 30 item 2): the same types, checks and
messages in both formats, and a file that holds no List of objects is refused, not read as an
empty cluster."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.builders import list_doc, node_doc, pod_doc

from desched.cluster.file_source import load_snapshot_file
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import SnapshotError


def _error(path: Path) -> str:
    with pytest.raises(SnapshotError) as e:
        load_snapshot_file(path)
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: ")
    return text[len(str(path)) :]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("null.json", "null", ": holds no object, only null"),
        ("null.yaml", "null\n", ": holds no object, only null"),
        ("docs.yaml", "---\n---\n", ": holds no object, only null"),
        ("empty-object.json", "{}", ": an object with neither kind nor items"),
        ("empty-object.yaml", "{}\n", ": an object with neither kind nor items"),
        ("list.json", '{"apiVersion": "v1", "kind": "List"}', ": items: required field is missing"),
        ("list.yaml", "apiVersion: v1\nkind: List\n", ": items: required field is missing"),
        (
            "null-items.json",
            '{"kind": "List", "items": null}',
            ": items: must be a list of objects, got null",
        ),
        ("null-items.yaml", "kind: List\nitems:\n", ": items: must be a list of objects, got null"),
        (
            "object-items.json",
            '{"kind": "List", "items": {}}',
            ": items: must be a list of objects, got an object",
        ),
        ("object-items.yaml", "kind: List\nitems: {}\n", ": items: must be a list of objects, got an object"),
        ("scalar.yaml", "5\n", ": expected a v1 List of the cluster's objects, got a number"),
        (
            "kindless.json",
            '{"kind": "List", "items": [{"metadata": {"name": "a"}}]}',
            ": items[0]: kind: required",
        ),
        ("kindless.yaml", "kind: List\nitems:\n- metadata: {name: a}\n", ": items[0]: kind: required"),
        ("kind-number.json", '{"kind": 5, "items": []}', ": kind: must be a string, got 5"),
    ],
)
def test_a_file_without_a_list_of_objects_is_refused(
    tmp_path: Path, name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert _error(path).startswith(expected)


@pytest.mark.parametrize(
    "text",
    [
        '{"apiVersion": "v1", "kind": "List", "items": []}',
        "apiVersion: v1\nkind: List\nitems: []\n",
    ],
)
def test_an_explicit_empty_list_is_an_empty_cluster(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    snap = load_snapshot_file(path)
    assert snap.nodes == [] and snap.pods == []


def _valid() -> dict[str, Any]:
    return list_doc(
        node_doc("node-a"),
        pod_doc("web-1", node="node-a", cpu="100m", labels={"app": "web"}, created="2025-05-01T00:00:00Z"),
    )


def _objects(snap: ClusterSnapshot) -> tuple[list[Any], list[Any]]:
    return list(snap.nodes), list(snap.pods)


def _both(tmp_path: Path, doc: Any) -> tuple[Path, Path]:
    as_json = tmp_path / "snap.json"
    as_json.write_text(json.dumps(doc))
    as_yaml = tmp_path / "snap.yaml"
    as_yaml.write_text(yaml.safe_dump(doc))
    return as_json, as_yaml


MUTATIONS: list[tuple[str, Any]] = [
    ("items.0.spec.unschedulable", "false"),
    ("items.1.metadata.deletionTimestamp", 12345),
    ("items.1.metadata.creationTimestamp", 12345),
    ("items.1.metadata.creationTimestamp", "2025-05-01T00:00:00"),
    ("items.1.metadata.labels.app", 5),
    ("items.1.metadata.labels.app", True),
    ("items.1.spec.priority", "1000"),
    ("items.1.spec.priority", 1.5),
    ("items.1.spec.containers", {"name": "c"}),
    ("items.1.metadata.name", 7),
    ("items.0.status.allocatable.cpu", [1]),
    ("items.1.kind", None),
    ("items.1", "a pod"),
]


def _set(doc: Any, dotted: str, value: Any) -> Any:
    doc = copy.deepcopy(doc)
    *parents, leaf = dotted.split(".")
    target = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
    if isinstance(target, list):
        target[int(leaf)] = value
    else:
        target[leaf] = value
    return doc


@pytest.mark.parametrize(("field", "value"), MUTATIONS)
def test_yaml_and_json_refuse_the_same_types_with_the_same_message(
    tmp_path: Path, field: str, value: Any
) -> None:
    as_json, as_yaml = _both(tmp_path, _set(_valid(), field, value))
    from_json = _error(as_json)
    assert _error(as_yaml) == from_json


def test_yaml_and_json_read_the_same_objects(tmp_path: Path) -> None:
    as_json, as_yaml = _both(tmp_path, _valid())
    assert _objects(load_snapshot_file(as_yaml)) == _objects(load_snapshot_file(as_json))


def test_an_unquoted_yaml_timestamp_is_the_timestamp_it_spells(tmp_path: Path) -> None:
    as_json, as_yaml = _both(tmp_path, _valid())
    as_yaml.write_text(as_yaml.read_text().replace("'2025-05-01T00:00:00Z'", "2025-05-01T00:00:00Z"))
    assert "creationTimestamp: 2025-05-01T00:00:00Z" in as_yaml.read_text()
    assert _objects(load_snapshot_file(as_yaml)) == _objects(load_snapshot_file(as_json))


def test_a_typed_list_names_its_items_kind_in_both_formats(tmp_path: Path) -> None:
    pods = [pod_doc(n, node="node-a", cpu="100m") for n in ("a", "b")]
    for p in pods:
        del p["kind"]
    as_json, as_yaml = _both(tmp_path, {"apiVersion": "v1", "kind": "PodList", "items": pods})
    for path in (as_json, as_yaml):
        assert sorted(p.metadata.name for p in load_snapshot_file(path).pods) == ["a", "b"]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ("{1: x}", ": items[0] (Pod default/p): metadata.labels: a key must be a string, got 1"),
        ("{a: .nan}", ": items[0] (Pod default/p): metadata.labels.a: nan is not a number JSON can hold"),
    ],
)
def test_what_json_cannot_hold_is_refused_from_yaml(tmp_path: Path, labels: str, expected: str) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata:\n"
        f"    name: p\n    namespace: default\n    labels: {labels}\n"
    )
    assert _error(path).startswith(expected)
