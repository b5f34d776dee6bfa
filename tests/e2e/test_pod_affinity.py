"""RemovePodsViolatingPodAffinity against a real kube-apiserver: a pod whose affinity peer is
deleted is evicted by `desched run` (under the deploy/ RBAC), and `simulate` on a snapshot of the
same cluster predicts it.

Uses test_live_run's kwok nodes (e2e-n1..n3, one zone each, label e2e/live=true) and helpers; the
pods are owned by ConfigMaps, so nothing re-creates them and an evicted pod stays gone.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from tests.e2e.support import wait_for
from tests.e2e.test_live_run import (
    CREATED,
    Cluster,
    cluster,
    gone_or_terminating,
    make_pod,
    new_namespace,
    run_once,
    simulate_on_snapshot,
    single_plugin_policy,
    wait_running,
)

__all__ = ["cluster"]  # the module-scoped fixture, shared with test_live_run

PLUGIN = "RemovePodsViolatingPodAffinity"
NEAR_CACHE = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
}


def test_pod_whose_affinity_peer_is_deleted_is_evicted(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, f"affinity-{uuid.uuid4().hex[:4]}")
    make_pod(cp, ns, "cache-1", "e2e-n1", owner="cache1", labels={"app": "cache"})
    make_pod(cp, ns, "cache-2", "e2e-n2", owner="cache2", labels={"app": "cache"})
    make_pod(cp, ns, "web", "e2e-n1", owner="web", labels={"app": "web"}, affinity=NEAR_CACHE)
    make_pod(cp, ns, "web-ok", "e2e-n2", owner="web-ok", labels={"app": "web"}, affinity=NEAR_CACHE)
    CREATED[ns] = {"cache-1", "cache-2", "web", "web-ok"}
    wait_running(cp, ns, 4)
    policy = single_plugin_policy(tmp_path, PLUGIN, {"namespaces": {"include": [ns]}})

    # both web pods have their cache on their node: nothing to do
    run_once(cluster, policy)
    assert gone_or_terminating(cp, ns) == set()

    # the peer of web leaves; cache-2 on e2e-n2 still offers web a place
    cp.request("DELETE", f"/api/v1/namespaces/{ns}/pods/cache-1?gracePeriodSeconds=0")

    def cache_1_gone() -> bool:
        names = {p["metadata"]["name"] for p in cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]}
        return "cache-1" not in names

    wait_for(cache_1_gone, "cache-1 to be deleted")
    CREATED[ns].discard("cache-1")

    assert simulate_on_snapshot(cluster, tmp_path, policy) & CREATED[ns] == {"web"}
    proc = run_once(cluster, policy)
    assert gone_or_terminating(cp, ns) == {"web"}, proc.stderr[-3000:]
    assert "pod violates its required pod affinity" in proc.stderr
