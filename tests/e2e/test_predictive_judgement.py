"""``evictionPolicy.predictive`` with a plugin's own judgement, against a real kube-apiserver,
kube-scheduler and kube-controller-manager: ``desched run`` skips a pod that
RemovePodsViolatingNodeTaints (``includePreferNoSchedule``) would move from one PreferNoSchedule
taint to another (every node has it; the pod's own node has a second one), says why on the pod (an
``EvictionSkipped`` Event with the plugin's reason), and the same policy without the block evicts
it, kube-scheduler then binding the replacement to another node with the same taint.

Reuses tests/e2e/test_live_run.py's cluster (kwok nodes e2e-n1..3, desched under the deploy/
ServiceAccount and ClusterRole only).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.e2e import test_live_run
from tests.e2e.controlplane import ApiError
from tests.e2e.support import single_plugin_policy, wait_for
from tests.e2e.test_live_run import NODES, Cluster, new_namespace, run_once
from tests.e2e.test_safe_disruption import available, deployment, desched_events

#: the live-run module's cluster fixture
cluster = test_live_run.cluster


def set_taint(cluster: Cluster, key: str, present: bool, nodes: tuple[str, ...] = NODES) -> None:
    """A PreferNoSchedule taint ``key=x`` on ``nodes``, or none (GET, change, PUT, again on 409:
    kwok updates the nodes' status meanwhile)."""
    for name in nodes:
        for _ in range(20):
            node = cluster.cp.request("GET", f"/api/v1/nodes/{name}")
            taints = [t for t in node["spec"].get("taints", []) if t["key"] != key]
            if present:
                taints.append({"key": key, "value": "x", "effect": "PreferNoSchedule"})
            node["spec"]["taints"] = taints
            try:
                cluster.cp.request("PUT", f"/api/v1/nodes/{name}", node)
                break
            except ApiError as e:
                if e.status != 409:
                    raise
                time.sleep(0.1)
        else:
            raise AssertionError(f"node {name}: taint {key} could not be changed (409 every time)")


def taints_policy(tmp: Path, ns: str, **top: Any) -> Path:
    return single_plugin_policy(
        tmp / f"taints-{len(top)}.yaml",
        ns,
        "RemovePodsViolatingNodeTaints",
        {"includePreferNoSchedule": True},
        **top,
    )


def test_predictive_skips_a_move_from_one_prefer_no_schedule_taint_to_another(
    cluster: Cluster, tmp_path: Path
) -> None:
    cp = cluster.cp
    cp.start_scheduler()
    cp.start_controller_manager()
    ns = new_namespace(cp, "judge")
    cp.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", deployment("pref", 1))
    wait_for(lambda: available(cp, ns) == 1, "the pod Ready", timeout=90)

    def pods() -> list[dict[str, Any]]:
        items = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    (first,) = pods()
    own = first["spec"]["nodeName"]
    key, extra = "e2e/predictive", "e2e/predictive-own"
    set_taint(cluster, key, True)
    # a second one on the pod's own node: kube-scheduler (TaintToleration) then prefers the others
    set_taint(cluster, extra, True, (own,))
    try:
        proc = run_once(cluster, taints_policy(tmp_path, ns, evictionPolicy={"predictive": True}), "--v=4")
        evs = wait_for(
            lambda: [e for e in desched_events(cluster, ns) if e["reason"] == "EvictionSkipped"],
            "an EvictionSkipped event",
            timeout=30,
        )
        assert evs[0]["regarding"]["name"] == first["metadata"]["name"]
        note = evs[0]["note"]
        assert (
            f"pod eviction from {own} node by sigs.k8s.io/descheduler skipped (predicted_untolerated_taint): "
            in note
        ), note
        assert note.endswith(f"whose taint {key}=x:PreferNoSchedule it does not tolerate either"), note
        assert (
            f"eviction skipped pod={ns}/{first['metadata']['name']} node={own} profile=e2e "
            "plugin=RemovePodsViolatingNodeTaints reason=predicted_untolerated_taint " in proc.stderr
        ), proc.stderr
        assert [p["metadata"]["uid"] for p in pods()] == [first["metadata"]["uid"]], proc.stderr

        # upstream-compatible: evicted; kube-scheduler binds the replacement to another tainted node
        run_once(cluster, taints_policy(tmp_path, ns))
        replacement = wait_for(
            lambda: [
                p
                for p in pods()
                if p["metadata"]["uid"] != first["metadata"]["uid"] and p["spec"].get("nodeName")
            ],
            "the replacement bound",
            timeout=60,
        )
        node = cp.request("GET", f"/api/v1/nodes/{replacement[0]['spec']['nodeName']}")
        assert any(t["key"] == key for t in node["spec"].get("taints", [])), node["spec"]
    finally:
        set_taint(cluster, key, False)
        set_taint(cluster, extra, False)
