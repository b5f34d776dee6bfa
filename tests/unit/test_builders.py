"""tests/builders.py: the objects it builds are what the sources decode, with the asked fields."""

from __future__ import annotations

import json

from tests import builders as b

from desched.cluster.file_source import parse_snapshot_bytes
from desched.cluster.validation import validate_objects
from desched.k8s.nodes import is_node_ready, is_node_unschedulable
from desched.k8s.objects import Node, Pod
from desched.k8s.pods import controller_ref, is_pod_ready, is_terminating
from desched.k8s.taints import pod_tolerates_node_taints


def test_a_plain_pod_and_node() -> None:
    p = b.pod("web-1", node="n1", cpu="100m", memory="64Mi")
    assert (p.metadata.namespace, p.metadata.name, p.spec.node_name) == ("default", "web-1", "n1")
    assert p.status.phase == "Running" and controller_ref(p) is None and not is_terminating(p)
    n = b.node("n1", zone="a")
    assert n.metadata.labels == {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "a"}
    assert is_node_ready(n) and not is_node_unschedulable(n)
    snap = b.snapshot(nodes=[n], pods=[p])
    assert snap.requests(p) == {"cpu": 100, "memory": 64 << 20}
    assert snap.allocatable(n)["cpu"] == 4000 and snap.pods_on_node("n1") == [p]


def test_every_field_asked_for_is_set() -> None:
    p = b.pod(
        "a",
        namespace="ns",
        uid="u1",
        labels={"app": "web"},
        annotations={"x": "y"},
        created="2026-01-01T00:00:00Z",
        deleted="2026-01-01T00:01:00Z",
        owner=("ReplicaSet", "rs", "rs-uid"),
        priority=7,
        priority_class="high",
        node_selector={"disk": "ssd"},
        tolerations=[b.toleration("dedicated")],
        ready=False,
        restarts=3,
        phase="Pending",
    )
    ref = controller_ref(p)
    assert ref is not None and (ref.kind, ref.name, ref.uid) == ("ReplicaSet", "rs", "rs-uid")
    assert p.metadata.uid == "u1" and p.metadata.labels == {"app": "web"} and is_terminating(p)
    assert p.spec.priority == 7 and p.spec.priority_class_name == "high"
    assert p.spec.node_selector == {"disk": "ssd"} and not is_pod_ready(p)
    assert p.status.phase == "Pending" and p.status.container_statuses[0].restart_count == 3
    tainted = b.node("n", taints=[b.taint("dedicated", "x")], unschedulable=True, ready=False)
    assert pod_tolerates_node_taints(p, tainted) and not is_node_ready(tainted)
    assert is_node_unschedulable(tainted)
    assert not pod_tolerates_node_taints(b.pod("plain"), tainted)


def test_left_out_means_absent() -> None:
    doc = b.node_doc("n", hostname_label=False, cpu=None, memory=None, pods=None, ready=None)
    assert doc == {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    doc = b.pod_doc("p", namespace=None, phase=None)
    assert doc == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
    }


def test_extras_are_merged_last() -> None:
    p = b.pod(
        "p", cpu="1", spec={"schedulerName": "other"}, status={"phase": "Failed"}, metadata={"name": "q"}
    )
    assert p.metadata.name == "q" and p.status.phase == "Failed" and p.spec.scheduler_name == "other"


def test_a_list_of_docs_loads_as_a_snapshot_file_would() -> None:
    docs = b.list_doc(
        [b.node_doc(f"n{i}", capacity=True) for i in range(2)],
        b.pod_doc("a", node="n0", owner=("ReplicaSet", "rs"), ready=True),
        b.namespace_doc("default", labels={"team": "x"}),
        b.pdb_doc("web", min_available=1),
        b.priority_class_doc("high", 1000),
        b.event_doc("e", object_name="a", count=3),
    )
    objects = parse_snapshot_bytes(json.dumps(docs).encode())
    validate_objects(objects, "test")
    kinds = sorted(type(o).__name__ for o in objects)
    assert kinds == ["Event", "Namespace", "Node", "Node", "Pod", "PodDisruptionBudget", "PriorityClass"]
    assert [o for o in objects if isinstance(o, Pod)] == [
        b.pod("a", node="n0", owner=("ReplicaSet", "rs"), ready=True)
    ]
    assert [o for o in objects if isinstance(o, Node)] == [
        b.node("n0", capacity=True),
        b.node("n1", capacity=True),
    ]
    snap = b.snapshot(
        pods=[b.pod("a", labels={"app": "web"})],
        pdbs=[b.pdb("web", min_available=1)],
        namespaces=[b.namespace("default")],
        priority_classes=[b.priority_class("high", 1000)],
        events=[b.event("e", object_name="a")],
    )
    assert [d.metadata.name for d in snap.pdbs_for_pod(snap.pods[0])] == ["web"]
    assert snap.priority_classes["high"].value == 1000
    assert len(snap.events_for("Pod", "default", "a")) == 1
