"""Recovery from an apiserver restart under load and mixed faults, and the settling guard (issue 30).

``desched run`` (a cycle every 10 s, limits 5 per cycle and 2 per node, PodLifeTime evicting
every pod older than 1 s) works through :class:`tests.e2e.faultproxy.FaultProxy` in ``mixed`` mode
(evictions refused, lost before or after the apiserver acted, reset, slowed; watches cut or
expired) on a backlog of 18 pods, beside 3 pods under a PodDisruptionBudget whose ``minAvailable``
is their count. The real kube-apiserver is killed and kept down for 35 s (longer than
``--client-connection-timeout``: the cycle due meanwhile is skipped); desched sees the outage
through the proxy (``down``: 503 at once) until the test has played what the kubelets do after
such an outage: the guarded pods reported NotReady (their nodes' heartbeats lapsed). "Back" is
when desched can reach the restarted apiserver again. The budget's status, still "3 healthy of 3
desired" from before the outage, is recounted (the disruption controller, played by the test)
only 25 s later. In between, the eviction API lets those unhealthy pods go (``IfHealthyBudget``):
201.

With the settling guard (default ``--settling-window 40s``) no guarded pod is evicted, and the
held-back evictions are logged; with ``--settling-window 0s`` (the guard off) the same scene
evicts guarded pods, which shows the scene is the dangerous one. A third run recounts the budget
only 60 s after (a disruption controller slower than the window): the guard holds the guarded pods
past the window, for their budget's status is behind their pods, until the recount. The runs
measure, from the moment the apiserver is ready again: the first cycle (target: within 10 s), the
first eviction (target: within one interval after the settling window) and the backlog cleared; the
figures are printed at the end of the module (``pytest tests/e2e/test_recovery.py -q``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.faultproxy import FaultProxy, token_of
from tests.e2e.support import DeschedProcess, wait_for
from tests.e2e.test_fault_injection import PER_NODE, TOTAL, Scene, _stamp, check, measure, stop
from tests.e2e.test_live_run import NODES, Cluster, cluster, make_pod, new_namespace, wait_running

__all__ = ["cluster"]

INTERVAL = 10.0
SETTLING = 40.0
OUTAGE = 35.0
#: when, after the apiserver is back, the test plays the disruption controller recounting the budget
PDB_RECOUNT_AFTER = 25.0
#: a disruption controller slower than the settling window (its own watches re-listing)
LATE_RECOUNT_AFTER = 60.0
LOAD_PER_NODE = 6
GUARDED = ("g0", "g1", "g2")
FIGURES: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def without_controller_manager(cluster: Cluster) -> Iterator[None]:
    """The scene plays the disruption controller and the kubelets itself, at chosen moments: no
    kube-controller-manager may run beside it. The control plane is shared by the session, and an
    earlier module may have started one; its disruption controller would recount the budget from its
    own cache whenever the test writes the PDB's status (after the outage, from a cache still
    re-listing), and its node controller would mark the load pods NotReady when the outage outlasts
    the kwok nodes' leases: the scene the assertions describe would not be the one that ran. It is
    stopped for the module and started again afterwards if it ran."""
    was_running = cluster.cp.stop_component("kube-controller-manager")
    yield
    # kwok lived through the outages; a fresh one renews its nodes' leases from now on, so that a
    # node controller started next does not find them lapsed and mark the nodes NotReady
    cluster.cp.stop_component("kwok")
    cluster.cp.start_kwok()
    if was_running:
        cluster.cp.start_controller_manager()


@pytest.fixture(scope="module")
def proxy(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[FaultProxy]:
    with FaultProxy(cluster.cp.server, cluster.cp.ca_file, delay=2.0) as p:
        yield p
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and FIGURES:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in FIGURES:
                reporter.write_line(line)


def pdb_path(ns: str) -> str:
    return f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/guarded"


def write_pdb_status(cluster: Cluster, ns: str, healthy: int) -> None:
    """What the disruption controller would write (no kube-controller-manager runs here)."""
    cp = cluster.cp

    def written() -> bool:
        pdb = cp.request("GET", pdb_path(ns))
        pdb["status"] = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "disruptionsAllowed": max(0, healthy - len(GUARDED)),
            "currentHealthy": healthy,
            "desiredHealthy": len(GUARDED),
            "expectedPods": len(GUARDED),
        }
        status, _ = cp.raw_request("PUT", f"{pdb_path(ns)}/status", pdb)
        return status == 200

    wait_for(written, "the PDB's status", timeout=30)


def prepare(cluster: Cluster, tmp: Path) -> Scene:
    cp = cluster.cp
    ns = new_namespace(cp, "recover")
    nodes: dict[str, str] = {}
    # the guarded pods first: PodLifeTime tries the oldest first, so every cycle asks for them
    # before the per-node limit is reached
    for n, node in enumerate(NODES):
        make_pod(cp, ns, GUARDED[n], node, owner="guarded", labels={"app": "guarded"})
        nodes[GUARDED[n]] = node
    time.sleep(1.1)  # creation times are whole seconds
    for n, node in enumerate(NODES):
        for i in range(LOAD_PER_NODE):
            make_pod(cp, ns, f"p{n}{i}", node, owner="load")
            nodes[f"p{n}{i}"] = node
    cp.request(
        "POST",
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "guarded"},
            "spec": {"minAvailable": len(GUARDED), "selector": {"matchLabels": {"app": "guarded"}}},
        },
    )
    wait_running(cp, ns, len(nodes))
    write_pdb_status(cluster, ns, healthy=len(GUARDED))
    time.sleep(2.5)  # every pod older than PodLifeTime's 1 s
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/live=true",
        "maxNoOfPodsToEvictTotal": TOTAL,
        "maxNoOfPodsToEvictPerNode": PER_NODE,
        "profiles": [
            {
                "name": "recovery",
                "pluginConfig": [
                    {
                        "name": "PodLifeTime",
                        "args": {"namespaces": {"include": [ns]}, "maxPodLifeTimeSeconds": 1},
                    }
                ],
                "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
            }
        ],
    }
    policy = tmp / "recovery-policy.yaml"
    policy.write_text(yaml.safe_dump(doc))
    return Scene(ns, nodes, policy)


def not_ready(cluster: Cluster, ns: str, name: str) -> None:
    """What the kubelet reports once it reaches the apiserver again after its heartbeats lapsed."""
    cp = cluster.cp
    path = f"/api/v1/namespaces/{ns}/pods/{name}"

    def written() -> bool:
        pod = cp.request("GET", path)
        status = pod["status"]
        status["conditions"] = [
            {**c, "status": "False", "reason": "NodeNotReady"}
            if c["type"] in ("Ready", "ContainersReady")
            else c
            for c in status.get("conditions", [])
        ]
        for c in status.get("containerStatuses", []):
            c["ready"] = False
        code, _ = cp.raw_request("PUT", f"{path}/status", pod)
        return code == 200

    wait_for(written, f"pod {name} reported NotReady", timeout=30)


def is_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


@pytest.mark.parametrize(
    ("window", "recount_after"),
    [("default", PDB_RECOUNT_AFTER), ("0s", PDB_RECOUNT_AFTER), ("default", LATE_RECOUNT_AFTER)],
    ids=["default", "0s", "late-recount"],
)
def test_apiserver_restart_under_mixed_faults(
    cluster: Cluster, proxy: FaultProxy, tmp_path: Path, window: str, recount_after: float
) -> None:
    cp = cluster.cp
    scene = prepare(cluster, tmp_path)
    kubeconfig = proxy.kubeconfig(tmp_path / "via-proxy.kubeconfig", token_of(cluster.kubeconfig))
    since = len(proxy.records())
    proxy.set_mode("mixed")
    extra = ("--settling-window", window) if window != "default" else ()
    d = DeschedProcess(
        kubeconfig,
        tmp_path,
        scene.policy,
        "--descheduling-interval",
        f"{INTERVAL:g}s",
        *extra,
        name="recover",
    )
    load = {name for name in scene.nodes if name not in GUARDED}
    try:
        wait_for(lambda: d.cycles() >= 1, "the first cycle", timeout=60)
        time.sleep(1.0)
        # desched reaches the apiserver through the proxy: what it sees of the outage is the
        # proxy's "down" (503 at once, as a load balancer), from the kill until the kubelets have
        # reported, so the kubelets' reports are in before desched's re-list, as after a real
        # outage of a cluster with many nodes (and no cycle races the test's writes)
        proxy.set_mode("down")
        cp.stop_apiserver(graceful=False)
        time.sleep(OUTAGE)
        cp.start_apiserver()
        for name in GUARDED:
            not_ready(cluster, scene.ns, name)
        pods = cp.request("GET", f"/api/v1/namespaces/{scene.ns}/pods")["items"]
        assert not any(is_ready(p) for p in pods if p["metadata"]["name"] in GUARDED), pods
        proxy.set_mode("mixed")
        back = time.time()
        time.sleep(max(0.0, back + recount_after - time.time()))
        write_pdb_status(cluster, scene.ns, healthy=0)  # the disruption controller caught up

        def backlog_cleared() -> bool:
            items = cp.request("GET", f"/api/v1/namespaces/{scene.ns}/pods")["items"]
            alive = {p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")}
            return not (load & alive)

        wait_for(backlog_cleared, "every load pod evicted", timeout=240, interval=1.0)
        cleared = time.time() - back
        # past the settling window (and the recount), a cycle more: a held pod would be tried again now
        time.sleep(max(0.0, back + max(SETTLING, recount_after) + INTERVAL + 2 - time.time()))
    finally:
        rc = stop(d)
        proxy.set_mode("pass")
    log = d.text()
    assert rc == 0, log
    requests = [r for r in proxy.records()[since:] if r.namespace == scene.ns]
    after = [r for r in requests if r.arrived > back]
    # each cycle's (start, end): its summary line's time, less the seconds it took
    cycles = [
        (_stamp(line) - float(m.group(1)), _stamp(line))
        for line in log.splitlines()
        if re.search(r"\] cycle done cycle=\d+ ", line) and (m := re.search(r" seconds=(\S+)", line))
    ]
    first_cycle, first_cycle_done = min(
        ((start - back, end - back) for start, end in cycles if start > back), default=(float("inf"),) * 2
    )
    first_eviction = min((r.arrived for r in after if r.done and r.name in load), default=float("inf")) - back
    guarded_evicted = sorted({r.name for r in requests if r.done and r.name in GUARDED})
    held = sorted(set(re.findall(rf"settling: not evicting pod {re.escape(scene.ns)}/(\S+):", log)))
    faults = sorted({r.mode for r in requests})
    outcome = measure(cp, scene, proxy, since, log, set())
    check("mixed+restart", f"window {window}", outcome, log, expected=len(scene.nodes), exact=False)
    FIGURES.append(
        f"apiserver restart under mixed faults ({', '.join(faults)}), --settling-window {window}, "
        f"outage {OUTAGE:g}s, interval {INTERVAL:g}s: after the apiserver was back, first cycle "
        f"started {first_cycle:.1f}s (done {first_cycle_done:.1f}s), first eviction "
        f"{first_eviction:.1f}s, backlog of {len(load)} pods cleared {cleared:.1f}s; "
        f"PDB recounted at "
        f"{recount_after:g}s; guarded pods evicted: {guarded_evicted or 'none'}; held back: "
        f"{held or 'none'}"
    )
    said = (FIGURES[-1], excerpt(log))
    assert "Traceback" not in log, log
    assert first_cycle <= 10.0, said
    if window == "0s":
        # the guard off: the scene is the dangerous one: the stale budget lets the unhealthy pods
        # go, every guarded eviction that reached the apiserver before the recount was a 201
        stale = [r for r in after if r.name in GUARDED and r.forwarded and r.arrived < back + recount_after]
        assert stale and all(r.done for r in stale if r.upstream_status is not None), (stale, said)
        assert guarded_evicted, said
        return
    assert not guarded_evicted, said
    # every guarded pod was held back, and only those: nothing else changed readiness (no node
    # controller runs in this module, see without_controller_manager)
    assert set(held) == set(GUARDED), said
    if recount_after > SETTLING:
        # the window ended before the disruption controller recounted: the guarded pods were held
        # for their budget's status, behind their pods, until the recount
        assert "the budget's status is behind its pods" in log, said
    assert first_eviction <= SETTLING + INTERVAL, said


def excerpt(log: str, lines: int = 120) -> str:
    """desched's log without the per-pod eviction lines: the cycles, the cache, the guard."""
    keep = [line for line in log.splitlines() if "] evicted pod=" not in line and "did not evict" not in line]
    return "\n".join(keep[-lines:])
