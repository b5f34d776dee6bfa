"""PodLifeTime's includingUnscheduledPods against a real kube-apiserver: `desched run` (under the
deploy/ RBAC) sees a pod bound to no node through its informers and evicts it once it has been
unschedulable longer than the threshold; a recently unschedulable one stays.

The pods name a scheduler that does not run, so no kube-scheduler started by another test touches
them; the test writes the PodScheduled=False condition as kube-scheduler would, with the
lastTransitionTime of the first failure.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests import builders
from tests.e2e.controlplane import ControlPlane
from tests.e2e.test_live_run import (
    CREATED,
    Cluster,
    cluster,
    gone_or_terminating,
    new_namespace,
    owner_uid,
    run_once,
    single_plugin_policy,
)

__all__ = ["cluster"]  # the module-scoped fixture, shared with test_live_run


def rfc3339(delta: timedelta) -> str:
    return (datetime.now(UTC) - delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def unschedulable_pod(cp: ControlPlane, ns: str, name: str, since: timedelta) -> None:
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": name,
        "uid": owner_uid(cp, ns, name),
        "controller": True,
    }
    doc = builders.pod_doc(
        name,
        namespace=None,
        owner=owner,
        containers=[{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        phase=None,
        spec={"schedulerName": "e2e-no-such-scheduler", "automountServiceAccountToken": False},
    )
    cp.request("POST", f"/api/v1/namespaces/{ns}/pods", doc)
    pod: dict[str, Any] = cp.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    pod["status"]["conditions"] = [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
            "lastTransitionTime": rfc3339(since),
        }
    ]
    cp.request("PUT", f"/api/v1/namespaces/{ns}/pods/{name}/status", pod)


def test_pod_unschedulable_longer_than_the_threshold_is_evicted(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, f"pending-{uuid.uuid4().hex[:4]}")
    unschedulable_pod(cp, ns, "stuck", timedelta(hours=1))
    unschedulable_pod(cp, ns, "recent", timedelta(seconds=30))
    CREATED[ns] = {"stuck", "recent"}
    args = {
        "namespaces": {"include": [ns]},
        "includingUnscheduledPods": True,
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "minTimeSinceLastTransitionSeconds": 600,
            }
        ],
    }
    policy = single_plugin_policy(tmp_path, "PodLifeTime", args)
    proc = run_once(cluster, policy)
    assert gone_or_terminating(cp, ns) == {"stuck"}, proc.stderr[-3000:]

    # without the arg, as upstream, the unscheduled pod is not looked at
    unschedulable_pod(cp, ns, "stuck-2", timedelta(hours=1))
    CREATED[ns].add("stuck-2")
    policy = single_plugin_policy(tmp_path, "PodLifeTime", {**args, "includingUnscheduledPods": False})
    run_once(cluster, policy)
    assert gone_or_terminating(cp, ns) == {"stuck"}
