"""HighNodeUtilization's compactWhenAllUnderutilized against a real kube-apiserver: on three kwok
nodes of its own, all under-utilised, `desched run` (under the deploy/ RBAC) empties the two
least-used nodes onto the fullest one, evicting exactly what `simulate` on a snapshot of the same
cluster predicts; without the arg (as upstream) nothing is evicted.

The policy's nodeSelector keeps the other e2e modules' nodes and pods out; the pods are owned by
ConfigMaps, so nothing re-creates them.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml

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
