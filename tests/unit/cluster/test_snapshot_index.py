"""ClusterSnapshot's indexes: canonical pod order, and requests computed once per resource spec
(by the identity of shared containers lists) while each pod still gets its own dict."""

from __future__ import annotations

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import (
    Container,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodSpec,
    PodStatus,
    ResourceRequirements,
)


def _pod(ns: str, name: str, containers: list[Container], node: str = "n1", phase: str = "Running") -> Pod:
    return Pod(
        metadata=ObjectMeta(
            name=name, namespace=ns, owner_references=[OwnerReference(kind="ReplicaSet", name="rs")]
        ),
        spec=PodSpec(node_name=node, containers=containers),
        status=PodStatus(phase=phase),
    )


def _containers(cpu: str) -> list[Container]:
    return [Container(name="c", resources=ResourceRequirements(requests={"cpu": cpu, "memory": "1Gi"}))]


def test_pods_are_ordered_by_namespace_then_name() -> None:
    shared = _containers("1")
    names = [("a-b", "x"), ("a", "z"), ("a", "y-1"), ("a", "y"), ("b", "a"), ("a", "y.1")]
    snap = ClusterSnapshot(pods=[_pod(ns, n, shared) for ns, n in names])
    assert [(p.namespace, p.name) for p in snap.pods] == sorted(names)  # ("a", ...) before ("a-b", ...)


def test_requests_once_per_spec_each_pod_its_own_dict() -> None:
    shared = _containers("500m")
    other = _containers("2")
    pods = [_pod("ns", f"p{i}", shared) for i in range(3)] + [_pod("ns", "q", other, node="n2")]
    pods.append(_pod("ns", "done", shared, phase="Succeeded"))
    snap = ClusterSnapshot(pods=pods)
    assert snap.requested_on("n1") == {"cpu": 1500, "memory": 3 * 1024**3}
    assert snap.pod_count_on("n1") == 3
    assert snap.requested_on("n2") == {"cpu": 2000, "memory": 1024**3}
    a, b = snap.requests(pods[0]), snap.requests(pods[1])
    assert a == b == {"cpu": 500, "memory": 1024**3}
    assert a is not b and snap.requests(pods[0]) is a  # its own, and the same each time
    snap.remove_pod(pods[0])
    assert snap.requested_on("n1") == {"cpu": 1000, "memory": 2 * 1024**3}
    snap.add_pod(pods[0])
    assert snap.requested_on("n1") == {"cpu": 1500, "memory": 3 * 1024**3}
    # an equal but distinct containers list gives the same requests
    twin = _pod("ns", "twin", _containers("500m"), node="n3")
    snap.add_pod(twin)
    assert snap.requests(twin) == a and snap.requested_on("n3") == a


def test_shared_requests_are_the_specs_dict_and_no_pod_keeps_a_copy() -> None:
    """What the placement simulator and the snapshot's own bookkeeping read: equal to
    :meth:`requests`, one dict per resource spec, and nothing kept per pod (a removed pod's
    requests taken off its node without a copy of them)."""
    shared = _containers("500m")
    pods = [_pod("ns", f"p{i}", shared) for i in range(3)]
    snap = ClusterSnapshot(pods=pods)
    a, b = snap.shared_requests(pods[0]), snap.shared_requests(pods[1])
    assert a is b and a == {"cpu": 500, "memory": 1024**3}
    snap.remove_pod(pods[0])
    snap.add_pod(pods[0])
    assert snap._requests == {}
    assert snap.requests(pods[0]) == a and snap.requests(pods[0]) is not a


def test_pods_of_one_key_the_last_one_stays_indexed_once() -> None:
    first = _pod("ns", "p", _containers("1"), node="n1")
    last = _pod("ns", "p", _containers("2"), node="n2")
    snap = ClusterSnapshot(
        pods=[_pod("ns", "a", _containers("1")), first, last, _pod("ns", "z", _containers("1"))]
    )
    assert [p.name for p in snap.pods] == ["a", "p", "z"]
    assert snap.pod("ns", "p") is last
    assert [p.name for p in snap.pods_on_node("n1")] == ["a", "z"]
    assert snap.pods_on_node("n2") == [last]
    assert snap.pod_count_on("n1") == 2 and snap.pod_count_on("n2") == 1
    assert snap.requested_on("n2") == {"cpu": 2000, "memory": 1024**3}
    assert snap.owner_pod_count("ns", "ReplicaSet", "rs") == 3
    assert len(snap.pods_in_namespace("ns")) == 3


def _indexes(snap: ClusterSnapshot) -> list[object]:
    """Every pod index, with its order (dicts compare without it)."""

    def ordered(d: dict[str, Pod]) -> list[tuple[str, Pod]]:
        return list(d.items())

    return [
        ordered(snap._pods),
        [(k, ordered(v)) for k, v in snap._by_node.items()],
        [(k, ordered(v)) for k, v in snap._by_namespace.items()],
        [(k, ordered(v)) for k, v in snap._by_owner.items()],
        [(k, list(u.requested.items()), u.pod_count) for k, u in snap._usage.items()],
        list(snap._nodes.items()),
    ]


def _mixed_pods() -> list[Pod]:
    a, b = _containers("1"), _containers("250m")
    pods = [_pod("ns2", f"p{i}", a, node=f"n{i % 3}") for i in range(7)]
    pods += [_pod("ns1", f"q{i}", b, node=f"n{(i + 1) % 4}") for i in range(5)]
    pods.append(_pod("ns1", "done", a, phase="Succeeded"))
    pods.append(_pod("ns0", "solo", b, node="n7"))  # (alone on its node)
    return pods


def test_copy_of_a_snapshot_as_built_copies_its_indexes() -> None:
    snap = ClusterSnapshot(pods=_mixed_pods())
    copied = snap.copy()
    assert _indexes(copied) == _indexes(snap._rebuilt())
    # copied, not built again: the key strings are the snapshot's own, the dicts are not
    original_key = next(iter(snap._pods))
    assert next(iter(copied._pods)) is original_key
    assert copied._by_node["n1"] is not snap._by_node["n1"]
    assert copied._usage["n1"].requested is not snap._usage["n1"].requested


def test_copy_is_independent_of_its_snapshot() -> None:
    snap = ClusterSnapshot(pods=_mixed_pods())
    before = _indexes(snap)
    copied = snap.copy()
    gone = copied.pods[0]
    copied.remove_pod(gone)
    copied.add_pod(_pod("ns0", "new", _containers("2"), node="n1"))
    assert _indexes(snap) == before
    assert snap.requested_on("n1") != copied.requested_on("n1")


def test_copy_after_changes_indexes_as_a_fresh_snapshot_would() -> None:
    """Once pods were removed, added or reordered, the indexes' orders differ from a fresh
    build's: copy builds them again."""
    for change in ("remove", "add", "reorder"):
        snap = ClusterSnapshot(pods=_mixed_pods())
        if change == "remove":
            solo = snap.pod("ns0", "solo")
            assert solo is not None
            snap.remove_pod(solo)
        elif change == "add":
            snap.add_pod(_pod("ns0", "first", _containers("2"), node="n9"))
        else:
            snap.add_pod(_pod("ns0", "first", _containers("2"), node="n9"))
            snap.reorder()
        fresh = ClusterSnapshot(pods=snap.pods, nodes=snap.nodes)
        assert _indexes(snap.copy()) == _indexes(fresh), change
