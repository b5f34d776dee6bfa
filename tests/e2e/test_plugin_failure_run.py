"""A one-shot ``desched run`` against a real kube-apiserver exits 1 when a plugin raises, with one
error line naming the plugin and the pod, and still evicts what the other plugins decide (issue 17:
"a plugin silently aborted for the cycle with exit 0").

The failing plugin is an out-of-tree plugin found through its entry point, as a pip-installed one.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.e2e.support import desched_env, wait_for
from tests.e2e.test_live_run import NODES, Cluster, cluster, make_pod, new_namespace, wait_running
from tests.unit.cli.test_plugin_failure import install_plugin

__all__ = ["cluster"]  # (the module-scoped fixture, shared with test_live_run)


def policy(tmp: Path, ns: str, *, explode: bool) -> Path:
    profiles = [
        {
            "name": "lifetime",
            "pluginConfig": [
                {"name": "DefaultEvictor", "args": {"evictLocalStoragePods": True}},
                {
                    "name": "PodLifeTime",
                    "args": {"maxPodLifeTimeSeconds": 1, "namespaces": {"include": [ns]}},
                },
            ],
            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
        }
    ]
    if explode:
        profiles.insert(0, {"name": "broken", "plugins": {"deschedule": {"enabled": ["Explode"]}}})
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/live=true",
        "profiles": profiles,
    }
    path = tmp / f"policy-{'explode' if explode else 'ok'}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def run_once(cluster: Cluster, policy_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "run",
            "--policy-config-file",
            str(policy_path),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--descheduling-interval",
            "0",
            "--secure-port",
            "0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )


def test_a_one_shot_run_exits_1_when_a_plugin_raises(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "explode")
    make_pod(cp, ns, "web-0", NODES[0], owner="web")
    wait_running(cp, ns, 1)
    time.sleep(1.5)  # older than PodLifeTime's maxPodLifeTimeSeconds
    env = {**desched_env(), "PYTHONPATH": install_plugin(tmp_path)["PYTHONPATH"]}

    proc = run_once(cluster, policy(tmp_path, ns, explode=True), env)
    assert proc.returncode == 1, proc.stderr
    # klog-like text lines: an error line starts with E and the date (docs/operations.md, "Logs")
    errors = [line for line in proc.stderr.splitlines() if re.match(r"E\d{4} ", line)]
    assert len(errors) == 1, proc.stderr
    assert "plugin Explode of profile broken failed: ValueError: cannot judge this pod" in errors[0]
    assert "(at Pod " in errors[0] and "/web-0)" in errors[0], errors[0]
    assert "Traceback" not in proc.stderr

    # the other profile still ran: the pod was evicted
    def evicted() -> bool:
        pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        return all(p["metadata"].get("deletionTimestamp") for p in pods)

    wait_for(evicted, "PodLifeTime's eviction despite the failing plugin")


def test_a_one_shot_run_without_failures_exits_0(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "noexplode")
    make_pod(cp, ns, "web-0", NODES[0], owner="web")
    wait_running(cp, ns, 1)
    env = {**desched_env(), "PYTHONPATH": install_plugin(tmp_path)["PYTHONPATH"]}
    proc = run_once(cluster, policy(tmp_path, ns, explode=False), env)
    assert proc.returncode == 0, proc.stderr
