"""The streamed loader shares repeated strings, a pod's repeated timestamps and the sub-structures
pods repeat between records without changing any value."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests import builders

from desched.cluster import file_source
from desched.cluster.file_source import load_snapshot_file, parse_snapshot_bytes
from desched.k8s.objects import Pod


@pytest.fixture(autouse=True)
def tiny_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_source, "_STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(file_source, "_BATCH_BYTES", 700)
    monkeypatch.setattr(file_source, "_CUT_WINDOW", 200)


def _pod(i: int, created: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return builders.pod_doc(
        f"web-{i}",
        namespace="shop",
        created=created,
        labels={"app": "web", "tier": "front"},
        owner={"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1"},
        node="node-1",
        # numbers, not strings: they must stay what they were (1 is not 1.0)
        containers=[
            {"name": "c", "image": "registry/web:1", "resources": {"requests": {"cpu": 1, "memory": 1.5}}}
        ],
        status={
            "startTime": created,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": created}],
        },
    )


def test_streamed_records_share_strings_and_keep_values(tmp_path: Path) -> None:
    items = [_pod(i) for i in range(30)] + [_pod(99, "2026-01-01T02:00:00+02:00")]
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode()
    path = tmp_path / "snap.json"
    path.write_bytes(data)
    pods = sorted(load_snapshot_file(path).pods, key=lambda p: p.metadata.name)
    whole = sorted(
        (o for o in parse_snapshot_bytes(data) if isinstance(o, Pod)), key=lambda p: p.metadata.name
    )
    assert msgspec.to_builtins(pods) == msgspec.to_builtins(whole)
    first, last = pods[0], pods[-2]
    assert first.metadata.name != last.metadata.name
    assert first.metadata.namespace is last.metadata.namespace
    assert first.spec.node_name is last.spec.node_name
    assert first.metadata.labels is last.metadata.labels  # equal JSON: one record
    assert first.spec.containers is last.spec.containers
    assert first.status.conditions is not last.status.conditions  # (never shared)
    assert first.metadata.labels["app"] is pods[-1].metadata.labels["app"]  # type: ignore[index]
    conds = first.status.conditions or []
    assert conds[0].last_transition_time is first.metadata.creation_timestamp
    # numbers stay what they were (1 is not 1.0), timestamps keep their zone
    assert first.spec.containers[0].resources.requests == {"cpu": 1, "memory": 1.5}  # type: ignore[union-attr]
    assert type(first.spec.containers[0].resources.requests["cpu"]) is int  # type: ignore[union-attr]
    other = pods[-1]
    assert other.metadata.name == "web-99"
    assert other.metadata.creation_timestamp.utcoffset() == timedelta(hours=2)  # type: ignore[union-attr]
    assert other.status.start_time.utcoffset() == timedelta(hours=2)  # type: ignore[union-attr]


def test_empty_last_states_are_one_record(tmp_path: Path) -> None:
    """``lastState: {}`` (a container that never restarted) decodes to one shared empty record;
    a container that did restart keeps its own."""
    items = []
    for i in range(4):
        doc = _pod(i)
        last: dict[str, Any] = {"terminated": {"exitCode": 1, "reason": "Error"}} if i == 3 else {}
        doc["status"]["containerStatuses"] = [
            {"name": "c", "ready": True, "restartCount": 1 if i == 3 else 0, "state": {}, "lastState": last}
        ]
        doc["status"]["initContainerStatuses"] = [
            {"name": "init", "lastState": {}, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]
        items.append(doc)
    data = json.dumps({"apiVersion": "v1", "kind": "List", "items": items}).encode()
    path = tmp_path / "snap.json"
    path.write_bytes(data)
    pods = sorted(load_snapshot_file(path).pods, key=lambda p: p.metadata.name)
    whole = sorted(
        (o for o in parse_snapshot_bytes(data) if isinstance(o, Pod)), key=lambda p: p.metadata.name
    )
    assert msgspec.to_builtins(pods) == msgspec.to_builtins(whole)

    def last_state(pod: Pod, init: bool = False) -> object:
        statuses = (pod.status.init_container_statuses if init else pod.status.container_statuses) or []
        return statuses[0].last_state

    assert last_state(pods[0]) is last_state(pods[1]) is last_state(pods[2])
    assert last_state(pods[0]) is last_state(pods[0], init=True) is last_state(pods[3], init=True)
    assert last_state(pods[3]) is not last_state(pods[0])
    assert last_state(pods[3]).terminated.exit_code == 1  # type: ignore[attr-defined]
    # an init container's name and the reason it ended: one string each
    inits = [(p.status.init_container_statuses or [])[0] for p in pods]
    assert inits[0].name is inits[3].name
    assert inits[0].state.terminated.reason is inits[3].state.terminated.reason  # type: ignore[union-attr]
    assert inits[0].state is not inits[3].state  # (their own records)
