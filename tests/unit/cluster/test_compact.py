"""Pods decoded by CompactDecoder share the sub-structures whose JSON they repeat, and are otherwise
exactly what a plain decode gives."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from desched.cli import main
from desched.cluster import file_source
from desched.cluster.compact import CompactDecoder
from desched.cluster.file_source import parse_snapshot_bytes
from desched.errors import SnapshotError
from desched.k8s.objects import Pod

ROOT = Path(__file__).resolve().parents[3]


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "annotations": {"checksum/config": "0123"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-abc",
                    "uid": "rs",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": "node-1",
            "priority": 1000,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            },
            "containers": [
                {
                    "name": "web",
                    "image": "registry/web:1",
                    "env": [{"name": "X", "value": "ignored"}],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "128Mi"},
                    },
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}],
            **spec,
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}],
        },
    }


def _decode(*pods: dict[str, Any]) -> list[Pod]:
    decoded = CompactDecoder().decode_array(json.dumps(list(pods)).encode())
    plain = msgspec.json.decode(json.dumps(list(pods)).encode(), type=list[Pod])
    # exactly the plain records: values, number types, key order, time zones
    assert msgspec.json.encode(decoded) == msgspec.json.encode(plain)
    assert decoded == plain
    return decoded


def test_pods_of_one_replicaset_share_their_spec_parts() -> None:
    a, b = _decode(_pod("web-1"), _pod("web-2"))
    assert a.spec.containers is b.spec.containers
    assert a.spec.affinity is b.spec.affinity
    assert a.spec.tolerations is b.spec.tolerations
    assert a.spec.volumes is b.spec.volumes
    assert a.metadata.labels is b.metadata.labels
    assert a.metadata.annotations is b.metadata.annotations
    assert a.metadata.owner_references is b.metadata.owner_references
    # what is the pod's own is not shared, its repeated strings are
    assert a.metadata is not b.metadata and a.spec is not b.spec and a.status is not b.status
    assert a.status.conditions is not b.status.conditions
    assert a.spec.node_name is b.spec.node_name
    assert a.status.conditions[0].type is b.status.conditions[0].type  # type: ignore[index]


def test_pods_listed_apart_share_too() -> None:
    other = _pod("db-1")
    other["spec"]["containers"][0]["image"] = "registry/db:1"
    a, _, c = _decode(_pod("web-1"), other, _pod("web-2"))
    assert a.spec.containers is c.spec.containers
    assert a.metadata.labels is c.metadata.labels


def test_a_different_spec_is_not_shared() -> None:
    other = _pod("db-1")
    other["spec"]["containers"][0]["image"] = "registry/db:1"
    a, b = _decode(_pod("web-1"), other)
    assert a.spec.containers is not b.spec.containers
    assert b.spec.containers[0].image == "registry/db:1"
    assert a.spec.tolerations is b.spec.tolerations  # the parts still equal are shared


def test_equal_but_not_identical_json_is_not_shared() -> None:
    """1 and 1.0 decode equal, and so do dicts in another key order: each pod keeps its own."""
    first, second = _pod("web-1"), _pod("web-2")
    first["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 1
    second["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 1.0
    second["metadata"]["labels"] = {"pod-template-hash": "abc", "app": "web"}
    a, b = _decode(first, second)  # (checks every value against a plain decode)
    assert a.spec.containers is not b.spec.containers
    assert type(a.spec.containers[0].resources.requests["cpu"]) is int  # type: ignore[union-attr, index]
    assert type(b.spec.containers[0].resources.requests["cpu"]) is float  # type: ignore[union-attr, index]
    assert a.metadata.labels is not b.metadata.labels
    assert list(b.metadata.labels or ()) == ["pod-template-hash", "app"]


def test_absent_null_and_empty_fields() -> None:
    bare = {"kind": "Pod", "metadata": {"name": "bare"}}
    nulls = _pod("nulls", affinity=None, tolerations=None, volumes=[])
    a, _, c = _decode(bare, copy.deepcopy(bare) | {"metadata": {"name": "bare2"}}, nulls)
    assert a.spec.containers == [] and a.spec.affinity is None and a.metadata.labels is None
    assert c.spec.affinity is None and c.spec.volumes == []


def test_a_bad_field_is_reported_where_it_is() -> None:
    bad = _pod("web-1")
    bad["spec"]["containers"] = 5
    with pytest.raises(msgspec.ValidationError, match=r"spec\.containers"):
        CompactDecoder().decode_pod(json.dumps(bad).encode())
    data = json.dumps({"kind": "List", "items": [_pod("web-0"), bad]}).encode()
    with pytest.raises(SnapshotError, match=r"items\[1\] \(Pod shop/web-1\).*spec\.containers"):
        parse_snapshot_bytes(data)


def test_tables_start_afresh_past_their_bound() -> None:
    dec = CompactDecoder(max_bytes=1)
    a = dec.decode_pod(json.dumps(_pod("web-1")).encode())
    b = dec.decode_pod(json.dumps(_pod("web-2")).encode())
    assert a == msgspec.json.decode(json.dumps(_pod("web-1")).encode(), type=Pod)
    assert a.spec.containers is not b.spec.containers and a.spec.containers == b.spec.containers
    dec = CompactDecoder(max_bytes=1 << 20)
    a = dec.decode_pod(json.dumps(_pod("web-1")).encode())
    b = dec.decode_pod(json.dumps(_pod("web-2")).encode())
    assert a.spec.containers is b.spec.containers


def test_the_live_informer_shares_too() -> None:
    from desched.cluster.live_source import RESOURCES, Informer

    inf = Informer(None, RESOURCES["Pod"])  # type: ignore[arg-type]
    for name in ("web-1", "web-2"):
        inf._apply(json.dumps({"type": "ADDED", "object": _pod(name)}).encode())
    a, b = inf.objects["shop/web-1"], inf.objects["shop/web-2"]
    assert a.spec.containers is b.spec.containers
    assert a == msgspec.json.decode(json.dumps(_pod("web-1")).encode(), type=Pod)


def test_a_whole_simulation_leaves_shared_records_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing changes a record in place: evictions, replacements and their binding derive new ones."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.generator import NOW, ClusterSpec, write_snapshot

    path = tmp_path / "cluster.json"
    with path.open("wb") as f:
        write_snapshot(ClusterSpec(nodes=20, pods_per_node=15, seed=3), f)
    snap = file_source.load_snapshot_file(path)
    assert len({id(p.spec.containers) for p in snap.pods}) < len(snap.pods) / 2  # workloads share
    parts: dict[int, tuple[object, bytes]] = {}
    for pod in snap.pods:
        for part in (pod.spec.containers, pod.spec.affinity, pod.spec.tolerations, pod.metadata.labels):
            parts[id(part)] = (part, msgspec.json.encode(part))
    monkeypatch.setattr(file_source, "load_snapshot_file", lambda _: snap)
    policy = str(ROOT / "benchmarks" / "policy-all.yaml")
    assert main(["simulate", str(path), "-o", "json", "--policy", policy, "--now", NOW]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["evictions"]
    for shared, encoded in parts.values():
        assert msgspec.json.encode(shared) == encoded
