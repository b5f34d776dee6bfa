"""``simulate`` predicts ``evictionPolicy.surge`` (issue 26 item 2): on a snapshot that holds the
ReplicaSets and Deployments (``desched snapshot --workloads``), a pod ``run`` would surge is listed
with ``method: surge``, judged by the same rules as the live backend's (a StatefulSet's pod, a
``maxSurge: 0`` Deployment's and a paused one's are plain evictions), a Deployment surged once a
cycle, and the JSON passes the published schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from desched import cli

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = json.loads((ROOT / "docs" / "simulation-output.schema.json").read_text())
NOW = "2026-11-29T08:00:00Z"


def node(name: str, tainted: bool) -> dict[str, Any]:
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": "gone", "value": "x", "effect": "NoSchedule"}] if tainted else []},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, owner: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"u-{name}",
            "ownerReferences": [
                {"kind": owner[0], "name": owner[1], "controller": True, "apiVersion": "apps/v1"}
            ],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def replicaset(name: str, deployment: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "ownerReferences": [
                {"kind": "Deployment", "name": deployment, "controller": True, "apiVersion": "apps/v1"}
            ],
        },
        "spec": {"selector": {"matchLabels": {"app": deployment}}},
    }


def deployment(name: str, replicas: int = 1, max_surge: Any = "25%", paused: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop", "generation": 2},
        "spec": {
            "replicas": replicas,
            "paused": paused,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": max_surge}},
        },
        "status": {
            "observedGeneration": 2,
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
        },
    }


def cluster(tmp: Path, extra: list[dict[str, Any]] | None = None, drop: str = "", labelled: str = "") -> Path:
    items = [
        node("n1", tainted=True),
        node("n2", tainted=False),
        pod("web-1", ("ReplicaSet", "web-5f")),
        replicaset("web-5f", "web"),
        deployment("web"),
        pod("pair-1", ("ReplicaSet", "pair-7c")),
        pod("pair-2", ("ReplicaSet", "pair-7c")),
        replicaset("pair-7c", "pair"),
        deployment("pair", replicas=2),
        pod("nosurge-1", ("ReplicaSet", "nosurge-1a")),
        replicaset("nosurge-1a", "nosurge"),
        deployment("nosurge", max_surge=0),
        pod("paused-1", ("ReplicaSet", "paused-2b")),
        replicaset("paused-2b", "paused"),
        deployment("paused", paused=True),
        pod("db-0", ("StatefulSet", "db")),
        *(extra or []),
    ]
    items = [i for i in items if not (i["kind"] == "Deployment" and i["metadata"]["name"] == drop)]
    for i in items:
        if i["kind"] == "Pod" and i["metadata"]["name"] == labelled:
            i["metadata"]["labels"] = {"app": labelled.split("-")[0]}
    path = tmp / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(items))
    return path


def policy(tmp: Path, surge: dict[str, Any] | None) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": "DefaultEvictor", "args": {}}],
                "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}},
            }
        ],
    }
    if surge is not None:
        doc["evictionPolicy"] = {"surge": surge}
    path = tmp / f"policy-{surge is not None}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def simulate(
    capsys: pytest.CaptureFixture[str], tmp: Path, surge: dict[str, Any] | None, **kw: Any
) -> dict[str, Any]:
    code = cli.main(
        ["simulate", str(cluster(tmp, **kw)), "--policy", str(policy(tmp, surge)), "--now", NOW, "-o", "json"]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    return doc


def methods(doc: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("method", "evict") for e in doc["evictions"]}


def test_simulate_shows_the_surges_apart_from_the_evictions(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = simulate(capsys, tmp_path, {"maxReplicas": 2})
    assert methods(doc) == {
        "web-1": "surge",
        "pair-1": "surge",
        # a Deployment is surged once a cycle: its second pod is refused, not evicted
        "nosurge-1": "evict",
        "paused-1": "evict",
        "db-0": "evict",
    }
    assert [(r["name"], r["error"]) for r in doc["refused"]] == [
        ("pair-2", "not surged: Deployment shop/pair was already surged in this cycle")
    ]


def test_max_replicas_bounds_what_is_surged(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = simulate(capsys, tmp_path, {})  # maxReplicas 1: the two-replica Deployment is evicted
    assert methods(doc)["web-1"] == "surge"
    assert methods(doc)["pair-1"] == methods(doc)["pair-2"] == "evict"


def test_without_surge_every_pod_is_an_eviction(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc = simulate(capsys, tmp_path, None)
    assert set(methods(doc).values()) == {"evict"}
    assert len(doc["evictions"]) == 6


def test_a_pdb_without_budget_refuses_the_surge_as_an_eviction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 0},
    }
    doc = simulate(capsys, tmp_path, {}, extra=[pdb], labelled="web-1")
    assert "web-1" not in methods(doc)
    assert [r["name"] for r in doc["refused"]] == ["web-1"]


def test_a_deployment_the_snapshot_lacks_is_predicted_as_an_eviction(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    doc = simulate(capsys, tmp_path, {}, drop="web")
    assert methods(doc)["web-1"] == "evict"
