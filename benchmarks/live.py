"""Live-mode benchmark: desched run against a real kube-apiserver holding many pods.

    python -m benchmarks.live --nodes 100 --pods 10000

Starts the e2e control plane (etcd + kube-apiserver + kwok, built by hack/e2e/build-control-plane.sh),
creates kwok nodes and pods bound to them, then runs ``desched run --dry-run
--descheduling-interval 0`` with every plugin enabled (benchmarks/policy-all.yaml) and reports:
the time to list the cluster into the cache, the cycle time, and the process's peak RSS, next to
its RSS before connecting (so the difference is the cache plus one cycle's working set).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.controlplane import ControlPlane  # noqa: E402

POLICY = ROOT / "benchmarks" / "policy-all.yaml"


def make_pod(ns: str, i: int, node: str) -> dict[str, Any]:
    app = f"app-{i % 97}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p-{i}",
            "namespace": ns,
            "labels": {"app": app, "tier": ["web", "api", "worker"][i % 3]},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": app,
                    "uid": f"00000000-0000-0000-0000-{i % 97:012d}",
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "main",
                    "image": f"registry.example/{app}:1.{i % 7}",
                    "resources": {
                        "requests": {"cpu": f"{50 + (i % 8) * 25}m", "memory": f"{64 + (i % 5) * 64}Mi"}
                    },
                }
            ],
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=16)
    args = parser.parse_args()

    cp = ControlPlane(
        apiserver_args=["--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000"]
    )
    cp.start()
    try:
        cp.start_kwok()
        for n in range(args.nodes):
            cp.request(
                "POST", "/api/v1/nodes", cp.fake_node(f"node-{n:05d}", cpu="32", memory="128Gi", pods="250")
            )
        # no node-lifecycle controller runs: lift the not-ready taint node admission added, as it would
        time.sleep(2)
        for n in range(args.nodes):
            for _ in range(10):
                node = cp.request("GET", f"/api/v1/nodes/node-{n:05d}")
                node["spec"]["taints"] = [
                    t for t in node["spec"].get("taints", []) if t["key"] != "node.kubernetes.io/not-ready"
                ]
                status, _ = cp.raw_request("PUT", f"/api/v1/nodes/node-{n:05d}", node)
                if status == 200:
                    break
        ns = "bench"
        cp.request(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        )
        cp.raw_request(
            "POST",
            f"/api/v1/namespaces/{ns}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        )
        t0 = time.monotonic()

        def create(i: int) -> None:
            cp.request("POST", f"/api/v1/namespaces/{ns}/pods", make_pod(ns, i, f"node-{i % args.nodes:05d}"))

        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool:
            list(pool.map(create, range(args.pods)))
        created = time.monotonic() - t0

        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t1 = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "desched.cli",
                "--v=2",
                "run",
                "--policy-config-file",
                str(POLICY),
                "--kubeconfig",
                str(cp.kubeconfig),
                "--dry-run",
                "--descheduling-interval",
                "0",
                "--secure-port",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        total = time.monotonic() - t1
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if proc.returncode != 0 or before > resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss:
            print(proc.stderr[-3000:], file=sys.stderr)
        m = re.search(r"cycle 1: (\d+) pods on (\d+) ready nodes, (\d+) evicted.*?, ([\d.]+)s", proc.stderr)
        result = {
            "nodes": args.nodes,
            "pods": args.pods,
            "create_pods_s": round(created, 1),
            "desched_run_wall_s": round(total, 2),
            "cycle_s": float(m.group(4)) if m else None,
            "would_evict": int(m.group(3)) if m else None,
            "desched_peak_rss_mib": round(peak_mib, 1),
            "returncode": proc.returncode,
            "by_plugin": dict(
                sorted(
                    __import__("collections")
                    .Counter(re.findall(r"would evict pod \S+ from node \S+ \(\S+/(\S+)\)", proc.stderr))
                    .items()
                )
            ),
        }
        print(json.dumps(result))
        return 0 if proc.returncode == 0 else 1
    finally:
        cp.stop()


if __name__ == "__main__":
    sys.exit(main())
