"""HighNodeUtilization's compactWhenAllUnderutilized against a real kube-apiserver: on three kwok
nodes of its own, all under-utilised, `desched run` (under the deploy/ RBAC) empties the two
least-used nodes onto the fullest one, evicting exactly what `simulate` on a snapshot of the same
cluster predicts; without the arg (as upstream) nothing is evicted. And, against a control plane
of its own with kube-scheduler packing (MostAllocated) and ReplicaSets re-creating the pods: of
nodes that tie, compaction keeps the one kube-scheduler binds to, so every replacement lands on
it, none back on the node it left, as `simulate` predicts.

The policy's nodeSelector keeps the other e2e modules' nodes and pods out; the pods are owned by
ConfigMaps, so nothing re-creates them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import run_desched, wait_for
from tests.e2e.test_live_run import (
    CREATED,
    Cluster,
    cluster,
    gone_or_terminating,
    make_pod,
    new_namespace,
    run_once,
    simulate_on_snapshot,
    wait_running,
)
from tests.e2e.test_simulate_predicts_run import _kubelet_like_stages

__all__ = ["cluster"]  # the module-scoped fixture, shared with test_live_run

NODES = {"e2e-compact-1": 1, "e2e-compact-2": 2, "e2e-compact-3": 3}  # node -> its pods


def policy(tmp: Path, compact: bool) -> Path:
    args = {"thresholds": {"cpu": 50, "memory": 50}, "compactWhenAllUnderutilized": compact}
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/compact=true",
        "profiles": [
            {
                "name": "compact",
                "pluginConfig": [{"name": "HighNodeUtilization", "args": args}],
                "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}},
            }
        ],
    }
    path = tmp / f"compact-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_all_under_utilised_nodes_are_compacted(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    for name in NODES:
        status, _ = cp.raw_request("GET", f"/api/v1/nodes/{name}")
        if status == 404:
            cp.create_fake_node(name, cpu="4", memory="16Gi", labels={"e2e/compact": "true"})
    ns = new_namespace(cp, f"compact-{uuid.uuid4().hex[:4]}")
    CREATED[ns] = set()
    for node, count in NODES.items():
        for i in range(count):
            name = f"{node.rsplit('-', 1)[1]}-{i}"
            make_pod(cp, ns, name, node, owner=name, labels={"app": "compact"})
            CREATED[ns].add(name)
    wait_running(cp, ns, len(CREATED[ns]))

    # as upstream: every node under the thresholds, nothing to pack onto
    run_once(cluster, policy(tmp_path, compact=False))
    assert gone_or_terminating(cp, ns) == set()

    on = policy(tmp_path, compact=True)
    predicted = simulate_on_snapshot(cluster, tmp_path, on) & CREATED[ns]
    proc = run_once(cluster, on)
    # least used first: node 1's pod, then node 2's two, all planned onto node 3 (the fullest)
    assert gone_or_terminating(cp, ns) == {"1-0", "2-0", "2-1"} == predicted, proc.stderr[-3000:]


# ----------------------------------------------------------------------------- ties, against kube-scheduler

#: kube-scheduler packing: NodeResourcesFit's MostAllocated (BalancedAllocation off, so it alone
#: ranks the nodes), one goroutine so its feasible list is its node order (the heap over that list
#: breaks ties: docs/simulation.md, "Ties")
MOST_ALLOCATED = {
    "parallelism": 1,
    "profiles": [
        {
            "schedulerName": "default-scheduler",
            "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "MostAllocated",
                            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
                        }
                    },
                }
            ],
        }
    ],
}
#: simulate's stand-in for it (the generic scorer: docs/scorer.md)
MOST_ALLOCATED_SCORER = {
    "allocated": {"values": "RatioToAllocatable", "prefer": "Most", "resources": {"cpu": 1, "memory": 1}}
}
#: n0 and n1 hold two pods each (a tie), n2 and n3 one each (another)
TIE = {"p0": "n0", "p1": "n1", "p2": "n2", "p3": "n3", "p4": "n0", "p5": "n1"}


@pytest.fixture(scope="module")
def packing() -> Iterator[ControlPlane]:
    """A control plane of its own: kube-scheduler (MostAllocated) sees only this test's nodes;
    kube-controller-manager re-creates the ReplicaSets' pods; an evicted pod takes 20 s to go, as
    under a kubelet, so it holds its room while the replacements are placed."""
    plane = ControlPlane()
    try:
        plane.start()
        plane.start_kwok(stages=_kubelet_like_stages(plane))
        plane.start_controller_manager()
        config = plane.workdir / "kube-scheduler-most-allocated.yaml"
        config.write_text(yaml.safe_dump(MOST_ALLOCATED))
        plane.start_scheduler(config)
    except Exception as e:  # never skip: the tier must not pass by not running
        plane.stop(keep_logs=True)
        pytest.fail(f"the e2e control plane did not start: {e}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


def _replica_set(ns: str, name: str) -> dict[str, Any]:
    container = {
        "name": "c",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": f"r{name}", "namespace": ns},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "automountServiceAccountToken": False},
            },
        },
    }


def test_of_nodes_that_tie_the_one_kube_scheduler_picks_is_kept(
    packing: ControlPlane, tmp_path: Path
) -> None:
    """Two ties of usage (n0 = n1, n2 = n3): compaction keeps n0, the node kube-scheduler binds to
    among equals, and empties n2, n3 and n1 onto it; with MostAllocated every replacement then
    lands on n0, none back on the node it left, as `simulate --scorer-config` predicts. Emptying n0
    instead (ties by name) sent the replacements of n0's own pods back onto n0 (issue 24)."""
    cp = packing
    for name in sorted(set(TIE.values())):  # created in name order: kube-scheduler's node tree order
        cp.create_fake_node(name, cpu="4", memory="16Gi")
    ns = "tie"
    cp.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    for name, node in TIE.items():
        # the pod first, bound where the test wants it; its ReplicaSet then adopts it
        template = _replica_set(ns, name)["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": template["metadata"]["labels"]},
            "spec": {**template["spec"], "nodeName": node},
        }
        cp.request("POST", f"/api/v1/namespaces/{ns}/pods", pod)
        cp.request("POST", f"/apis/apps/v1/namespaces/{ns}/replicasets", _replica_set(ns, name))

    def pods() -> list[dict[str, Any]]:
        return list(cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"])

    def adopted() -> bool:
        items = pods()
        return len(items) == len(TIE) and all(
            p["status"].get("phase") == "Running" and p["metadata"].get("ownerReferences") for p in items
        )

    wait_for(adopted, "the six pods running, adopted by their ReplicaSets", timeout=120, interval=0.5)

    policy_path = tmp_path / "compact.yaml"
    args = {"thresholds": {"cpu": 50, "memory": 50}, "compactWhenAllUnderutilized": True}
    policy_path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "profiles": [
                    {
                        "name": "compact",
                        "pluginConfig": [{"name": "HighNodeUtilization", "args": args}],
                        "plugins": {"balance": {"enabled": ["HighNodeUtilization"]}},
                    }
                ],
            }
        )
    )
    scorer = tmp_path / "most-allocated.yaml"
    scorer.write_text(yaml.safe_dump(MOST_ALLOCATED_SCORER))
    snap = tmp_path / "snap.json"
    proc = run_desched("snapshot", "-o", str(snap), "--kubeconfig", str(cp.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    proc = run_desched(
        "simulate", str(snap), "--policy", str(policy_path), "--scorer-config", str(scorer), "-o", "json"
    )
    assert proc.returncode == 0, proc.stderr
    sim = json.loads(proc.stdout)
    predicted = {p["name"]: p["node"] for p in sim["placements"]}

    proc = run_desched(
        "--v=2",
        "run",
        "--policy-config-file",
        str(policy_path),
        "--kubeconfig",
        str(cp.kubeconfig),
        "--descheduling-interval",
        "0",
        "--secure-port",
        "0",
    )
    assert proc.returncode == 0, proc.stderr
    evicted = {
        p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods() if p["metadata"].get("deletionTimestamp")
    }

    def placed() -> dict[str, str] | None:
        new = [p for p in pods() if p["metadata"]["name"] not in TIE]
        if len(new) < len(evicted) or not all(p["spec"].get("nodeName") for p in new):
            return None
        return {p["metadata"]["labels"]["app"]: p["spec"]["nodeName"] for p in new}

    landed = wait_for(placed, "kube-scheduler placing the replacements", timeout=120, interval=0.5)
    # what kube-scheduler did: no replacement back on the node its pod left, all on the one kept
    back = sorted(name for name, node in landed.items() if node == evicted[name])
    assert back == [], f"replacements back on the node being emptied: {back} ({landed}, from {evicted})"
    assert evicted == {"p2": "n2", "p3": "n3", "p1": "n1", "p5": "n1"}, proc.stderr[-3000:]
    assert set(landed.values()) == {"n0"}
    # and simulate said so beforehand
    assert {e["name"]: e["node"] for e in sim["evictions"]} == evicted
    assert predicted == landed
