"""desched run against a real kube-apiserver: what it logs at -v 0 and --v=4, as text and JSON, and the
traces it sends to an OTLP receiver (issue 11).

The cluster, namespaces and pods come from test_live_run's helpers; desched runs as a subprocess
under the deploy/ ServiceAccount, with upstream's flags written where upstream's users write them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.support import run_desched
from tests.e2e.test_live_run import (  # noqa: F401 -- cluster is a fixture
    CREATED,
    Cluster,
    cluster,
    make_pod,
    new_namespace,
    policy,
    scenario,
    wait_running,
)
from tests.otlp import OtlpReceiver


def run(cluster: Cluster, pol: Path, *args: str) -> Any:  # noqa: F811
    proc = run_desched(
        "run",
        f"--policy-config-file={pol}",
        f"--kubeconfig={cluster.kubeconfig}",
        "--descheduling-interval=0",
        "--secure-port=0",
        *args,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def test_dry_run_at_v0_says_what_it_would_evict(cluster: Cluster, tmp_path: Path) -> None:  # noqa: F811
    cp = cluster.cp
    ns = new_namespace(cp, "v0")
    scenario(cp, ns)
    proc = run(cluster, policy(tmp_path, ns), "--dry-run")  # no -v: verbosity 0
    lines = proc.stderr.splitlines()
    would = [line for line in lines if "] would evict pod=" in line]
    assert len(would) == 4, proc.stderr
    for line in would:
        assert f"pod={ns}/" in line and " node=e2e-n" in line and " plugin=" in line and " reason=" in line
    summary = [line for line in lines if "] cycle done " in line]
    assert len(summary) == 1 and " evicted=4 " in summary[0] and " dryRun=true " in summary[0], proc.stderr
    # nothing else at -v 0 on a healthy run: no V(1) chatter
    assert len(lines) == 5, proc.stderr


def observability_policy(tmp: Path, ns: str) -> Path:
    scope = {"namespaces": {"include": [ns]}}
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/live=true",
        "profiles": [
            {
                "name": "obs",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {}},
                    {"name": "RemovePodsHavingTooManyRestarts", "args": {**scope, "podRestartThreshold": 5}},
                    {"name": "PodLifeTime", "args": {**scope, "maxPodLifeTimeSeconds": 1}},
                ],
                "plugins": {
                    "filter": {"enabled": ["DefaultEvictor"]},
                    "deschedule": {"enabled": ["RemovePodsHavingTooManyRestarts", "PodLifeTime"]},
                },
            }
        ],
    }
    path = tmp / "observability.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_v4_json_names_every_candidate_and_traces_reach_the_collector(
    cluster: Cluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "obs")
    make_pod(cp, ns, "owned-0", "e2e-n1", owner="owned", labels={"app": "owned"})
    make_pod(cp, ns, "owned-1", "e2e-n2", owner="owned", labels={"app": "owned"})
    make_pod(cp, ns, "bare-0", "e2e-n3", labels={"app": "bare"})  # no owner: DefaultEvictor keeps it
    CREATED[ns] = {"owned-0", "owned-1", "bare-0"}
    wait_running(cp, ns, 3)
    time.sleep(2)  # older than maxPodLifeTimeSeconds
    with OtlpReceiver() as receiver:
        proc = run(
            cluster,
            observability_policy(tmp_path, ns),
            "--dry-run",
            "--v=4",
            "--logging-format=json",
            f"--otel-collector-endpoint={receiver.url}",
            "--otel-service-name=desched-e2e",
        )
        docs = [json.loads(line) for line in proc.stderr.splitlines()]  # every line is JSON
        assert all({"ts", "level", "msg"} <= set(d) for d in docs)
        mine = [d for d in docs if str(d.get("pod", "")).startswith(f"{ns}/")]
        by = {(d["pod"].split("/")[1], d.get("plugin"), d.get("verdict")): d for d in mine if "verdict" in d}
        # every pod was a candidate of both plugins, and each decision has its reason
        for pod in ("owned-0", "owned-1", "bare-0"):
            left = by[(pod, "RemovePodsHavingTooManyRestarts", "left")]
            assert left["reason"] == "0 restarts < threshold 5" and left["v"] == 4
        assert by[("bare-0", "PodLifeTime", "filtered")]["reason"] == (
            "DefaultEvictor: pod does not have any ownerRefs"
        )
        for pod in ("owned-0", "owned-1"):
            assert by[(pod, "PodLifeTime", "evicted")]["profile"] == "obs"
        would = [d for d in mine if d["msg"] == "would evict"]
        assert sorted(d["pod"] for d in would) == [f"{ns}/owned-0", f"{ns}/owned-1"]
        assert all(d["v"] == 0 and d["plugin"] == "PodLifeTime" for d in would)

        # the traces: one cycle span, one child per plugin, the evictions under PodLifeTime
        (cycle,) = receiver.wait_for("runDeschedulerLoop")
        assert cycle.resource["service.name"] == "desched-e2e"
        children = receiver.children(cycle)
        assert [s.name for s in children] == ["RemovePodsHavingTooManyRestarts", "PodLifeTime"]
        lifetime = children[1]
        assert lifetime.attributes == {"profile": "obs", "plugin": "PodLifeTime", "operation": "deschedule"}
        evicts = receiver.children(lifetime)
        assert {e.name for e in evicts} == {"EvictPod"}  # upstream's span and keys
        assert sorted(f"{e.attributes['podNamespace']}/{e.attributes['podName']}" for e in evicts) == [
            f"{ns}/owned-0",
            f"{ns}/owned-1",
        ]
        assert all(e.attributes["operation"] == "evict" for e in evicts)
        assert receiver.children(children[0]) == []
