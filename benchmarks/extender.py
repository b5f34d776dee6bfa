"""Latency of ``desched extender`` for many candidate nodes, over real HTTP on loopback.

``python -m benchmarks.extender --nodes 1000 --requests 200`` (or :func:`bench_extender`).

The cluster is :mod:`benchmarks.generator`'s (realistic Node objects, with images, conditions and
managedFields, and ~30 pods per node feeding the extender's cache). The scorer is
deploy/extender/scorer.yaml (KEP-2143 story 2: an AbsoluteValue part and a ratio part, so scores
are min-max normalised over the candidates: the most work per node). The incoming pod is one of
the generated pods, unbound. For each verb and each ``nodeCacheCapable`` setting, the client sends
the same ``ExtenderArgs`` ``requests`` times on one keep-alive connection (as kube-scheduler's Go
HTTP client does) and records the time from sending the request to reading the whole answer:

- ``nodelist``  (``nodeCacheCapable: false``): ``Nodes`` carries every candidate Node in full;
- ``nodenames`` (``nodeCacheCapable: true``): ``NodeNames`` only, nodes read from the cache.

The server runs in a thread of the benchmarking process, on its own event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import http.client
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from benchmarks.generator import ClusterSpec, generate
from desched.app.extender import Extender, ExtenderServer, NodeUsageIndex
from desched.k8s.objects import Node, Pod
from desched.runtime.server import BackgroundServer
from desched.scheduling.scorer import GenericScorer, load_scorer_args

REPO = Path(__file__).resolve().parent.parent
SCORER = REPO / "deploy" / "extender" / "scorer.yaml"
WARMUP = 10


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _cluster(nodes: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    node_objs: list[dict[str, Any]] = []
    pod_objs: list[dict[str, Any]] = []
    for obj in generate(ClusterSpec(nodes=nodes, pods_per_node=30, seed=1)):
        if obj.get("kind") == "Node":
            node_objs.append(obj)
        elif obj.get("kind") == "Pod":
            pod_objs.append(obj)
    return node_objs, pod_objs


def _incoming_pod(pods: list[dict[str, Any]]) -> dict[str, Any]:
    """A generated Deployment pod with cpu and memory requests, unbound and Pending."""
    for pod in pods:
        spec = pod.get("spec", {})
        requests = (spec.get("containers") or [{}])[0].get("resources", {}).get("requests", {})
        if (
            "cpu" in requests
            and "memory" in requests
            and not spec.get("nodeSelector")
            and not spec.get("affinity")
        ):
            out: dict[str, Any] = json.loads(json.dumps(pod))
            out["spec"].pop("nodeName", None)
            out["metadata"]["name"] += "-incoming"
            out["status"] = {"phase": "Pending"}
            return out
    raise RuntimeError("no suitable pod in the generated cluster")


def _thread_clock(loop: asyncio.AbstractEventLoop) -> Callable[[], float]:
    """The CPU-time clock of the thread running ``loop`` (the server's)."""

    async def ident() -> int:
        return threading.get_ident()

    clock = time.pthread_getcpuclockid(asyncio.run_coroutine_threadsafe(ident(), loop).result(30))
    return lambda: time.clock_gettime(clock)


def _measure(
    conn: http.client.HTTPConnection,
    path: str,
    body: bytes,
    requests: int,
    server_cpu: Callable[[], float],
) -> tuple[list[float], float, float]:
    """Wall-clock latency of each request, the process's CPU seconds per request (server and
    client threads together: a figure that does not depend on what else the machine runs), and
    the server thread's CPU seconds per request (what the extender itself costs)."""
    headers = {"Content-Type": "application/json"}
    out: list[float] = []
    cpu0 = server0 = 0.0
    for i in range(WARMUP + requests):
        if i == WARMUP:
            cpu0 = time.process_time()
            server0 = server_cpu()
        t0 = time.perf_counter()
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        elapsed = time.perf_counter() - t0
        if resp.status != 200:
            raise RuntimeError(f"{path}: HTTP {resp.status}: {data[:300]!r}")
        if i >= WARMUP:
            out.append(elapsed)
    n = max(requests, 1)
    return out, (time.process_time() - cpu0) / n, (server_cpu() - server0) / n


def bench_extender(nodes: int = 1000, requests: int = 200) -> dict[str, Any]:
    """p50/p99 latency (ms) of filter and prioritize for ``nodes`` candidate nodes, sent as a full
    NodeList (``nodelist``) and as node names (``nodenames``)."""
    node_objs, pod_objs = _cluster(nodes)
    state = NodeUsageIndex.from_objects(
        (msgspec.convert(n, Node, strict=False) for n in node_objs),
        (msgspec.convert(p, Pod, strict=False) for p in pod_objs),
    )
    # as the live cache does once synced: the long-lived cache stays out of every collection
    gc.collect()
    gc.freeze()
    extender = Extender(GenericScorer(load_scorer_args(SCORER)), state)
    pod = _incoming_pod(pod_objs)
    bodies = {
        "nodelist": json.dumps(
            {
                "Pod": pod,
                "Nodes": {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": node_objs},
                "NodeNames": None,
            },
            separators=(",", ":"),
        ).encode(),
        "nodenames": json.dumps(
            {"Pod": pod, "Nodes": None, "NodeNames": [n["metadata"]["name"] for n in node_objs]},
            separators=(",", ":"),
        ).encode(),
    }
    result: dict[str, Any] = {
        "nodes": nodes,
        "pods_in_cache": state.pod_count,
        "requests": requests,
        "body_bytes": {mode: len(body) for mode, body in bodies.items()},
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    with BackgroundServer(ExtenderServer(extender, host="127.0.0.1", port=0)) as bg:
        conn = http.client.HTTPConnection("127.0.0.1", bg.server.port, timeout=60)
        server_cpu = _thread_clock(bg.loop)
        try:
            for verb in ("prioritize", "filter"):
                result[verb] = {}
                for mode, body in bodies.items():
                    samples, cpu, server = _measure(conn, f"/{verb}", body, requests, server_cpu)
                    result[verb][mode] = {
                        "p50_ms": round(_percentile(samples, 0.50) * 1000, 2),
                        "p99_ms": round(_percentile(samples, 0.99) * 1000, 2),
                        "mean_ms": round(statistics.fmean(samples) * 1000, 2),
                        "cpu_ms": round(cpu * 1000, 2),
                        "server_cpu_ms": round(server * 1000, 2),
                    }
        finally:
            conn.close()
    result["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.extender", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args(argv)
    for n in args.nodes:
        print(json.dumps(bench_extender(n, args.requests)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
