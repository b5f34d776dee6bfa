"""Reading snapshots: kubectl's List (YAML and JSON), multi-document YAML, indexes, unknown kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests import builders

from desched.cluster.file_source import load_snapshot_file, parse_snapshot_bytes, snapshot_from_objects
from desched.errors import SnapshotError
from desched.k8s.topologyspread import SYSTEM_DEFAULTS

ROOT = Path(__file__).resolve().parents[3]


def items() -> list[dict[str, object]]:
    return [
        builders.node_doc("n1", hostname_label=False, cpu=None, memory=None, pods=None, ready=None),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ignored"}},
        builders.service_doc("web", {"app": "web"}, namespace="x"),
        builders.replica_set_doc("rs", {"app": "web"}, namespace="x"),
        builders.pod_doc(
            "b", namespace="x", node="n1", owner=("ReplicaSet", "rs"), controller=None, phase=None
        ),
        builders.pod_doc("a", namespace="x", node="n1", phase=None, labels={"app": "web"}),
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": "e", "namespace": "x"},
            "regarding": {"kind": "Pod", "namespace": "x", "name": "a"},
            "reason": "FailedMount",
            "note": "boom",
            "series": {"count": 3, "lastObservedTime": "2026-01-01T00:00:00Z"},
        },
    ]


@pytest.mark.parametrize("fmt", ["yaml-list", "json-list", "multi-doc"])
def test_formats_give_the_same_snapshot(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "snap"
    doc = {"apiVersion": "v1", "kind": "List", "items": items()}
    if fmt == "yaml-list":
        path.write_text(yaml.safe_dump(doc))
    elif fmt == "json-list":
        path.write_text(json.dumps(doc))
    else:
        path.write_text(yaml.safe_dump_all(items()))
    snap = load_snapshot_file(path)
    assert [p.name for p in snap.pods_on_node("n1")] == ["a", "b"]  # canonical order, not file order
    assert [p.name for p in snap.pods_of_owner("x", "ReplicaSet", "rs")] == ["b"]
    events = snap.events_for("Pod", "x", "a")
    assert len(events) == 1 and events[0].message == "boom" and events[0].count == 3
    # the Service and the ReplicaSet are read: the Service makes a's default spread selector
    assert snap.workloads_known
    a, b = snap.pod("x", "a"), snap.pod("x", "b")
    assert a is not None and b is not None
    assert len(snap.default_spread_constraints(a, SYSTEM_DEFAULTS)) == 2
    assert snap.default_spread_constraints(b, SYSTEM_DEFAULTS) == []  # selected by nothing


def test_example_cluster_loads() -> None:
    snap = load_snapshot_file(ROOT / "examples" / "cluster.yaml")
    assert len(snap.nodes) == 7 and len(snap.pods) > 30 and snap.priority_classes


def test_remove_pod_keeps_indexes_in_step() -> None:
    objs = parse_snapshot_bytes(json.dumps({"kind": "List", "items": items()}).encode())
    snap = snapshot_from_objects(objs)
    pod = snap.pod("x", "b")
    assert pod is not None
    assert snap.remove_pod(pod) and not snap.remove_pod(pod)
    assert snap.pods_of_owner("x", "ReplicaSet", "rs") == [] and [
        p.name for p in snap.pods_on_node("n1")
    ] == ["a"]
    assert snap.was_removed(pod)


def test_usage_counts_requests_of_running_pods() -> None:
    pods = [
        builders.pod(n, namespace="d", node="n1", cpu="250m", memory="1Gi", phase=phase)
        for n, phase in (("a", "Running"), ("b", "Pending"), ("c", "Succeeded"))
    ]
    snap = snapshot_from_objects(pods)
    assert snap.requested_on("n1")["cpu"] == 500 and snap.pod_count_on("n1") == 2
    snap.remove_pod(pods[0])
    assert snap.requested_on("n1")["cpu"] == 250 and snap.pod_count_on("n1") == 1


def test_not_a_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(SnapshotError, match=r"expected a v1 List of the cluster.s objects, got a list"):
        load_snapshot_file(path)
