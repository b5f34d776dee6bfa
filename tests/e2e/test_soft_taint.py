"""``softTaint`` of LowNodeUtilization against a real kube-apiserver, kube-scheduler and kwok: the
over-utilised node gets desched's PreferNoSchedule taint (nothing under ``--dry-run``), another
taint on it is untouched, kube-scheduler then places a new pod on another node first (before the
taint it picked the over-utilised node), and the taint goes once the node is no longer
over-utilised. desched runs under the deploy/ ServiceAccount and ClusterRole plus the kustomize
Component deploy/kubernetes/softtaint (nodes patch), so the test also proves that Component.

Reuses tests/e2e/test_live_run.py's cluster fixture (kwok, desched's ServiceAccount); the nodes
here are the test's own (label ``e2e/soft=true``, pods capacity 10)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from tests import builders
from tests.e2e import test_live_run
from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import apply_manifest, wait_for
from tests.e2e.test_live_run import ROOT, Cluster, new_namespace, run_once

cluster = test_live_run.cluster

SOFTTAINT_RBAC = ROOT / "deploy" / "kubernetes" / "softtaint" / "rbac.yaml"
NODES = ("soft-n1", "soft-n2", "soft-n3")
KEY = "desched.io/overutilized"
OTHER = {"key": "e2e/other", "value": "x", "effect": "NoSchedule"}
TOLERATE = [{"key": "e2e/other", "operator": "Exists", "effect": "NoSchedule"}]


def pod_doc(name: str, node: str | None, cpu: str) -> dict[str, Any]:
    return builders.pod_doc(
        name,
        namespace=None,
        node=node,
        labels={},
        containers=[
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
            }
        ],
        tolerations=TOLERATE,
        phase=None,
        spec={
            "automountServiceAccountToken": False,
            **({} if node else {"nodeSelector": {"e2e/soft": "true"}}),
        },
    )


def taints(cp: ControlPlane, node: str) -> list[dict[str, Any]]:
    return list(cp.request("GET", f"/api/v1/nodes/{node}")["spec"].get("taints") or [])


def scheduled_to(cp: ControlPlane, ns: str, name: str) -> str:
    cp.request("POST", f"/api/v1/namespaces/{ns}/pods", pod_doc(name, None, "100m"))

    def bound() -> str | None:
        return cp.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")["spec"].get("nodeName") or None

    return str(wait_for(bound, f"pod {name} scheduled", timeout=60))


def delete_pods(cp: ControlPlane, ns: str, names: list[str]) -> None:
    for name in names:
        cp.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}?gracePeriodSeconds=0")

    def gone() -> bool:
        left = {p["metadata"]["name"] for p in cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]}
        return not left & set(names)

    wait_for(gone, "pods deleted", timeout=60)


def policy(tmp: Path) -> Path:
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/soft=true",
        "profiles": [
            {
                "name": "soft",
                "pluginConfig": [
                    {
                        "name": "LowNodeUtilization",
                        "args": {
                            "thresholds": {"pods": 30},
                            "targetThresholds": {"pods": 50},
                            "softTaint": {"taintOnly": True},
                        },
                    }
                ],
                "plugins": {"balance": {"enabled": ["LowNodeUtilization"]}},
            }
        ],
    }
    path = tmp / "softtaint.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_an_over_utilised_node_is_soft_tainted_and_kube_scheduler_goes_elsewhere(
    cluster: Cluster, tmp_path: Path
) -> None:
    cp = cluster.cp
    cp.start_scheduler()
    for doc in yaml.safe_load_all(SOFTTAINT_RBAC.read_text()):
        apply_manifest(cp, doc)
    for name in NODES:
        status, _ = cp.raw_request("GET", f"/api/v1/nodes/{name}")
        if status == 404:
            cp.create_fake_node(
                name,
                cpu="8",
                memory="32Gi",
                pods="10",
                labels={"e2e/soft": "true"},
                taints=[OTHER] if name == "soft-n1" else [],
            )
    ns = new_namespace(cp, "soft")
    # soft-n1: 6 of 10 pods (over the 50% target) but almost no cpu; soft-n2/n3: 1 pod, half the cpu
    busy = [f"b{i}" for i in range(6)]
    for name in busy:
        cp.request("POST", f"/api/v1/namespaces/{ns}/pods", pod_doc(name, "soft-n1", "10m"))
    for node in NODES[1:]:
        cp.request("POST", f"/api/v1/namespaces/{ns}/pods", pod_doc(f"big-{node}", node, "4"))
    # before any taint kube-scheduler prefers soft-n1 (LeastAllocated: the least cpu requested)
    assert scheduled_to(cp, ns, "probe-before") == "soft-n1"
    delete_pods(cp, ns, ["probe-before"])

    # --dry-run taints nothing and says what it would do
    dry = run_once(cluster, policy(tmp_path), "--dry-run")
    assert "would downgrade node soft-n1 with taint " + KEY in dry.stderr, dry.stderr[-3000:]
    assert taints(cp, "soft-n1") == [OTHER]

    proc = run_once(cluster, policy(tmp_path))
    assert taints(cp, "soft-n1") == [OTHER, {"key": KEY, "effect": "PreferNoSchedule"}], proc.stderr[-3000:]
    assert taints(cp, "soft-n2") == taints(cp, "soft-n3") == []
    record = json.loads(
        cp.request("GET", "/api/v1/nodes/soft-n1")["metadata"]["annotations"]["desched.io/downgrade"]
    )
    assert [(r["key"], r["by"]) for r in record] == [(KEY, "soft/LowNodeUtilization")]
    # taint only: nothing evicted
    assert len(cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]) == 8

    # kube-scheduler now places a new pod elsewhere first
    assert scheduled_to(cp, ns, "probe-after") in ("soft-n2", "soft-n3")

    # no longer over-utilised (3 of 10 pods): desched's taint goes, the other stays
    delete_pods(cp, ns, busy[:3])
    time.sleep(0.5)
    proc = run_once(cluster, policy(tmp_path))
    assert taints(cp, "soft-n1") == [OTHER], proc.stderr[-3000:]
    annotations = cp.request("GET", "/api/v1/nodes/soft-n1")["metadata"].get("annotations") or {}
    assert "desched.io/downgrade" not in annotations
