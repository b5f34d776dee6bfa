"""The batched JSON decode of large snapshots gives exactly what decoding the whole file gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests import builders

from desched.cluster import file_source
from desched.cluster.file_source import load_snapshot_file, parse_snapshot_bytes
from desched.errors import SnapshotError


@pytest.fixture(autouse=True)
def tiny_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_source, "_STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(file_source, "_BATCH_BYTES", 700)
    monkeypatch.setattr(file_source, "_CUT_WINDOW", 200)
    monkeypatch.setattr(file_source, "_READ_BYTES", 97)  # many reads, matches cut by their ends


def _pod(i: int) -> dict[str, Any]:
    return builders.pod_doc(
        f"p{i}",
        namespace="ns",
        labels={"app": "a"},
        metadata={
            # (text that looks like the start of the next item, where the API server allows any)
            "annotations": {"text": '},{"apiVersion":"v1","kind":"Pod","metadata":{'},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs2"},
            ],
            "managedFields": [{"apiVersion": "v1", "fieldsType": "FieldsV1"}, {"apiVersion": "v1"}],
        },
        node=f"n{i % 3}",
        cpu="1",
        phase=None,
    )


def _items() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}} for i in range(3)
    ]
    for i in range(60):
        out.append(_pod(i))
        if i % 7 == 0:
            # an unknown kind holding a nested list of objects that look like listed items
            out.append(
                {
                    "apiVersion": "x/v1",
                    "kind": "Template",
                    "metadata": {"name": f"t{i}"},
                    "spec": {
                        "objects": [
                            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fake1"}},
                            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fake2"}},
                        ]
                    },
                }
            )
        if i % 11 == 0:
            out.append(
                {
                    "apiVersion": "events.k8s.io/v1",
                    "kind": "Event",
                    "metadata": {"name": f"e{i}", "namespace": "ns"},
                    "regarding": {"kind": "Pod", "namespace": "ns", "name": f"p{i}"},
                    "reason": "FailedMount",
                    "note": "boom",
                }
            )
    return out


def _doc(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


@pytest.mark.parametrize("indent", [None, 4])
def test_batches_decode_like_the_whole_file(tmp_path: Path, indent: int | None) -> None:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(_doc(_items()), indent=indent))
    streamed = file_source._load_json_streamed(path)
    assert streamed is not None
    assert streamed == parse_snapshot_bytes(path.read_bytes())
    assert len(load_snapshot_file(path).pods) == 60


def test_only_pods_known_kinds(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(_doc([_pod(i) for i in range(40)])))
    streamed = file_source._load_json_streamed(path)
    assert streamed is not None and len(streamed) == 40
    assert streamed == parse_snapshot_bytes(path.read_bytes())


def test_empty_and_small_lists(tmp_path: Path) -> None:
    for items in ([], [_pod(1)]):
        path = tmp_path / "snap.json"
        path.write_text(json.dumps(_doc(items)))
        assert file_source._load_json_streamed(path) == parse_snapshot_bytes(path.read_bytes())


def test_errors_name_the_same_item(tmp_path: Path) -> None:
    items = _items()
    bad = _pod(99)
    bad["spec"]["priority"] = "high"
    items.insert(50, bad)
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(_doc(items)))
    with pytest.raises(SnapshotError) as whole:
        parse_snapshot_bytes(path.read_bytes(), str(path))
    with pytest.raises(SnapshotError) as streamed:
        load_snapshot_file(path)
    assert str(streamed.value) == str(whole.value)
    assert "items[50]" in str(streamed.value)


def test_other_layouts_are_left_to_the_whole_file_decode(tmp_path: Path) -> None:
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"kind": "List", "metadata": {"items": []}}))
    assert file_source._load_json_streamed(path) is None  # "items" not at the top level
    path.write_text(json.dumps(_pod(1)))
    assert file_source._load_json_streamed(path) is None
    path.write_text("items: []\n")
    assert file_source._load_json_streamed(path) is None
    path.write_text(json.dumps(_doc(_items()))[:-40])  # cut short
    assert file_source._load_json_streamed(path) is None
    with pytest.raises(SnapshotError):
        load_snapshot_file(path)


def test_a_file_cut_short_while_it_is_read_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "snap.json"
    text = json.dumps(_doc(_items()))
    path.write_text(text)
    fill = file_source._Window.fill

    def fill_then_cut(self: Any, upto: int) -> None:
        fill(self, upto)
        if self.file.tell() > len(text) // 3:
            with path.open("r+b") as f:
                f.truncate(len(text) // 2)

    monkeypatch.setattr(file_source._Window, "fill", fill_then_cut)
    monkeypatch.setattr(file_source, "_ITEMS_KEY_WINDOW", 200)  # (read bit by bit)
    with pytest.raises(SnapshotError, match="not valid JSON"):
        load_snapshot_file(path)
