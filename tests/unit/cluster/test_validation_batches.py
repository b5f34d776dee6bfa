"""Snapshot validation checked batch by batch as a file is decoded (cluster.validation.Validator):
it refuses exactly what the walk object by object refuses, with the same line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests import builders as b

from desched.cluster import file_source, validation
from desched.cluster.file_source import load_snapshot_file, parse_snapshot_bytes
from desched.cluster.validation import Validator, validate_objects
from desched.errors import SnapshotError
from desched.k8s.objects import AnyObject, Pod


def _objects() -> list[AnyObject]:
    out: list[AnyObject] = [b.node(f"n{i}") for i in range(3)]
    out += [b.pod(f"p{i}", node=f"n{i % 3}", cpu="100m", uid=f"u{i}") for i in range(12)]
    return out


def _renamed(pod: Pod, name: str = "", namespace: str = "", uid: str = "") -> Pod:
    meta = msgspec.structs.replace(
        pod.metadata,
        name=name or pod.metadata.name,
        namespace=namespace or pod.metadata.namespace,
        uid=uid or pod.metadata.uid,
    )
    return msgspec.structs.replace(pod, metadata=meta)


def _walk_error(objects: list[AnyObject]) -> str:
    with pytest.raises(SnapshotError) as e:
        validation._raise_first_problem(objects, "snap")
    return str(e.value)


def _batched_error(objects: list[AnyObject], size: int) -> str:
    check = Validator()
    for i in range(0, len(objects), size):
        check.add(objects[i : i + size])
    with pytest.raises(SnapshotError) as e:
        check.finish(objects, "snap")
    return str(e.value)


@pytest.mark.parametrize(
    "change",
    [
        {"name": "a\nb"},  # two valid names once the names are joined by newlines
        {"name": "Upper"},
        {"name": "x" * 254},
        {"namespace": "Bad_NS"},
        {"name": "p1"},  # listed twice (in another batch)
        {"uid": "u1"},  # another pod's uid (in another batch)
    ],
)
def test_pods_refused_in_batches_as_one_by_one(change: dict[str, str]) -> None:
    objects = _objects()
    pod = objects[-2]
    assert isinstance(pod, Pod)
    objects[-2] = _renamed(pod, **change)
    expected = _walk_error(objects)
    for size in (1, 4, len(objects)):
        assert _batched_error(objects, size) == expected
    with pytest.raises(SnapshotError) as e:
        validate_objects(objects, "snap")
    assert str(e.value) == expected


def test_valid_objects_are_not_walked_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def walked(objects: list[AnyObject], source: str) -> None:
        raise AssertionError("walked object by object")

    monkeypatch.setattr(validation, "_raise_first_problem", walked)
    validate_objects(_objects(), "snap")


def _doc(items: list[dict[str, Any]]) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode()


def _items() -> list[dict[str, Any]]:
    out = [b.node_doc(f"n{i}") for i in range(3)]
    return out + [b.pod_doc(f"p{i}", node=f"n{i % 3}", cpu="100m") for i in range(40)]


@pytest.fixture
def tiny_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_source, "_STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(file_source, "_BATCH_BYTES", 700)
    monkeypatch.setattr(file_source, "_CUT_WINDOW", 200)
    monkeypatch.setattr(file_source, "_READ_BYTES", 97)


@pytest.mark.usefixtures("tiny_batches")
def test_a_streamed_file_twice_listing_a_pod_far_apart(tmp_path: Path) -> None:
    items = _items()
    items.append(b.pod_doc("p2", node="n0", cpu="1"))
    path = tmp_path / "snap.json"
    path.write_bytes(_doc(items))
    with pytest.raises(SnapshotError) as streamed:
        load_snapshot_file(path)
    with pytest.raises(SnapshotError) as whole:
        validate_objects(parse_snapshot_bytes(path.read_bytes()), str(path))
    assert str(streamed.value) == str(whole.value)
    assert "metadata.name: listed twice" in str(streamed.value)


@pytest.mark.usefixtures("tiny_batches")
def test_a_file_streamed_in_part_is_checked_afresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The streamed decode may give up late (then the whole file is decoded): the batches it
    checked are not counted again (they would look like pods listed twice, and cost the walk
    object by object)."""
    real = file_source._decode_json_batches

    def walked(objects: list[AnyObject], source: str) -> None:
        raise AssertionError("walked object by object")

    monkeypatch.setattr(validation, "_raise_first_problem", walked)
    gave_up: list[int] = []

    def late_give_up(w: Any, source: str, check: Validator) -> None:
        gave_up.append(len(real(w, source, check) or ()))

    monkeypatch.setattr(file_source, "_decode_json_batches", late_give_up)
    path = tmp_path / "snap.json"
    path.write_bytes(_doc(_items()))
    snap = load_snapshot_file(path)
    assert gave_up == [43] and len(snap.pods) == 40


@pytest.mark.parametrize("labels", [{"app": "a", "-bad": "x"}, {"app": "a b"}, {"app": "x" * 64}])
def test_pod_labels_refused_in_batches_as_one_by_one(labels: dict[str, str]) -> None:
    objects = _objects()
    pod = objects[-2]
    assert isinstance(pod, Pod)
    objects[-2] = msgspec.structs.replace(pod, metadata=msgspec.structs.replace(pod.metadata, labels=labels))
    expected = _walk_error(objects)
    assert "metadata.labels" in expected
    for size in (1, 4, len(objects)):
        assert _batched_error(objects, size) == expected
