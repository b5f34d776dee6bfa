"""The evictionPolicy against a real kube-apiserver: ``desched run`` skips the eviction a
per-workload budget forbids, says why on the pod (an ``EvictionSkipped`` Event) and in its log
(``--v=4``), and evicts what the budget allows; the same policy without the block evicts both.

Reuses tests/e2e/test_live_run.py's cluster (kwok nodes, desched under the deploy/ ServiceAccount
and ClusterRole only, so the Events prove the manifests allow them).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tests.e2e import test_live_run
from tests.e2e.support import wait_for
from tests.e2e.test_live_run import (
    Cluster,
    gone_or_terminating,
    new_namespace,
    policy,
    run_once,
    scenario,
)

#: the live-run module's cluster fixture (kwok nodes e2e-n1..3, desched's ServiceAccount kubeconfig)
cluster = test_live_run.cluster


def desched_events(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    items = cluster.cp.request("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
    return [e for e in items if e.get("reportingController") == "sigs.k8s.io.descheduler"]


def test_run_skips_what_the_workload_budget_forbids_and_says_why(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "budget")
    # four pods of one owner on e2e-n1: RemoveDuplicates wants two of them gone
    scenario(cp, ns)
    proc = run_once(cluster, policy(tmp_path, ns, evictionPolicy={"maxUnavailablePerWorkload": 1}), "--v=4")
    time.sleep(2)
    evicted = gone_or_terminating(cp, ns)
    dups = sorted(n for n in evicted if n.startswith("dup-"))
    assert len(dups) == 1, (evicted, proc.stderr)
    # the other workloads (one pod each, budget 1) are evicted as without the block
    assert {"anti-0", "gold-0"} <= evicted or {"anti-1", "gold-0"} <= evicted, evicted

    evs = wait_for(
        lambda: [e for e in desched_events(cluster, ns) if e["reason"] == "EvictionSkipped"],
        "an EvictionSkipped event",
        timeout=30,
    )
    assert len(evs) == 1, evs
    skipped = evs[0]
    assert skipped["type"] == "Normal" and skipped["action"] == "Descheduled"
    assert skipped["regarding"]["kind"] == "Pod"
    name = skipped["regarding"]["name"]
    assert name.startswith("dup-") and name not in evicted
    assert skipped["note"] == (
        f"pod eviction from e2e-n1 node by sigs.k8s.io/descheduler skipped (max_unavailable_per_workload): "
        f"ConfigMap {ns}/dup has 1 of 4 pod(s) unavailable; evicting this one would make 2 "
        "(maxUnavailablePerWorkload: 1 = 1)"
    )
    assert f"eviction of pod {ns}/{name} skipped (e2e/RemoveDuplicates)" in proc.stderr, proc.stderr


def test_run_without_the_block_evicts_both_duplicates(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "nobudget")
    scenario(cp, ns)
    proc = run_once(cluster, policy(tmp_path, ns))
    time.sleep(2)
    evicted = gone_or_terminating(cp, ns)
    assert len([n for n in evicted if n.startswith("dup-")]) == 2, (evicted, proc.stderr)
    assert not [e for e in desched_events(cluster, ns) if e["reason"] == "EvictionSkipped"]
