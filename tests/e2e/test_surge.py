"""``evictionPolicy.surge`` (make before break) against a real kube-apiserver, kube-scheduler,
kube-controller-manager and kwok: a single-replica RollingUpdate Deployment whose node gets a
NoSchedule taint is moved by ``desched run`` (once, RemovePodsViolatingNodeTaints) with a rollout
restart: a watch on the Deployment never sees it without an available replica, the old pod goes
only after the new one is Ready, there is exactly one rollout, and the Events and log say so. The
same Deployment without ``surge`` is evicted and has no available replica for a while: the
difference is what the test proves. A ``maxSurge: 0`` Deployment and a StatefulSet are evicted as
today; a surge whose new pod fits no node is reported failed after its timeout, once, and the old
pod keeps serving.

Reuses tests/e2e/test_live_run.py's cluster (kwok nodes e2e-n1..3, desched under the deploy/
ServiceAccount and ClusterRole) plus the kustomize Component deploy/kubernetes/surge.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e import test_live_run
from tests.e2e.controlplane import ApiError, ControlPlane
from tests.e2e.support import apply_manifest, run_desched, single_plugin_policy, wait_for
from tests.e2e.test_live_run import NODES, ROOT, Cluster, new_namespace, run_once
from tests.e2e.test_safe_disruption import available, deployment, desched_events

#: the live-run module's cluster fixture
cluster = test_live_run.cluster

SURGE_RBAC = ROOT / "deploy" / "kubernetes" / "surge" / "rbac.yaml"
TAINT = "e2e/surge"


def set_taint(cp: ControlPlane, node: str, present: bool) -> None:
    """A NoSchedule taint ``e2e/surge=x`` on ``node``, or none (again on 409: kwok writes too)."""
    for _ in range(40):
        obj = cp.request("GET", f"/api/v1/nodes/{node}")
        taints = [t for t in obj["spec"].get("taints", []) if t["key"] != TAINT]
        if present:
            taints.append({"key": TAINT, "value": "x", "effect": "NoSchedule"})
        obj["spec"]["taints"] = taints
        try:
            cp.request("PUT", f"/api/v1/nodes/{node}", obj)
            return
        except ApiError as e:
            if e.status != 409:
                raise
            time.sleep(0.1)
    raise AssertionError(f"node {node}: taint {TAINT} could not be changed (409 every time)")


def scheduler_sees_taint(cp: ControlPlane, node: str) -> None:
    """Wait until kube-scheduler's cache has the taint on ``node``: a probe pod that fits only that
    node and does not tolerate ``TAINT`` is reported unschedulable for an untolerated taint.

    The taint is a PUT to the apiserver; kube-scheduler learns of it through its node watch. A run
    that starts before the scheduler has it could see the replacement bound to the tainted node
    (CI saw that once: the surged pod landed back on its node), which would say nothing about
    desched. The probe makes the test's precondition a fact instead of a race; a scheduler that
    never sees the taint fails here, with its log, rather than later as a misleading placement.
    """
    ns = new_namespace(cp, "taintprobe")
    probe = deployment("probe", 1)["spec"]["template"]
    probe["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    cp.request(
        "POST",
        f"/api/v1/namespaces/{ns}/pods",
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": probe["spec"]},
    )

    def refused() -> str | None:
        pod = cp.request("GET", f"/api/v1/namespaces/{ns}/pods/probe")
        if pod["spec"].get("nodeName"):
            raise AssertionError(
                f"kube-scheduler bound a pod that does not tolerate {TAINT} to {node}: its cache "
                f"lacks the taint\n{cp.logs('kube-scheduler')}"
            )
        for c in pod.get("status", {}).get("conditions", []):
            # kube-scheduler 1.36 names the count, not the taint ("1 node(s) had untolerated
            # taint(s)"): on the only node the probe may use, that is this taint
            if (
                c["type"] == "PodScheduled"
                and c["status"] == "False"
                and "untolerated taint" in c.get("message", "")
            ):
                return str(c["message"])
        return None

    try:
        wait_for(refused, f"kube-scheduler to see taint {TAINT} on {node}", timeout=60)
    finally:  # an unbound pod goes at once; then its namespace
        cp.raw_request("DELETE", f"/api/v1/namespaces/{ns}/pods/probe?gracePeriodSeconds=0")
        cp.raw_request("DELETE", f"/api/v1/namespaces/{ns}")


def _ready(pod: dict[str, Any]) -> bool:
    return (
        not pod["metadata"].get("deletionTimestamp")
        and pod.get("status", {}).get("phase") == "Running"
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod.get("status", {}).get("conditions", [])
        )
    )


@dataclass
class Watcher:
    """Watches a namespace's Deployments and pods while a run goes on (two daemon threads)."""

    cp: ControlPlane
    ns: str
    #: (time, availableReplicas) of every Deployment event
    deployment_seen: list[tuple[float, int]] = field(default_factory=list)
    #: uid -> when first seen Ready, when first seen terminating or deleted
    ready_at: dict[str, float] = field(default_factory=dict)
    gone_at: dict[str, float] = field(default_factory=dict)
    #: (time, Ready pods) after every pod event
    ready_counts: list[tuple[float, int]] = field(default_factory=list)

    def start(self) -> Watcher:
        deps = self.cp.watch(f"/apis/apps/v1/namespaces/{self.ns}/deployments", timeout=240)
        pods = self.cp.watch(f"/api/v1/namespaces/{self.ns}/pods", timeout=240)
        ready: dict[str, bool] = {p["metadata"]["uid"]: _ready(p) for p in self._pods()}
        self.ready_counts.append((time.monotonic(), sum(ready.values())))

        def follow_deployments() -> None:
            for t, ev in deps:
                obj = ev["object"]
                self.deployment_seen.append((t, int(obj.get("status", {}).get("availableReplicas") or 0)))

        def follow_pods() -> None:
            for t, ev in pods:
                pod = ev["object"]
                uid = pod["metadata"]["uid"]
                is_ready = ev["type"] != "DELETED" and _ready(pod)
                if is_ready:
                    self.ready_at.setdefault(uid, t)
                if ev["type"] == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                    self.gone_at.setdefault(uid, t)
                ready[uid] = is_ready
                self.ready_counts.append((t, sum(ready.values())))

        for target in (follow_deployments, follow_pods):
            threading.Thread(target=target, daemon=True).start()
        return self

    def _pods(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.cp.request("GET", f"/api/v1/namespaces/{self.ns}/pods")["items"]
        return items

    def seconds_without_a_ready_pod(self) -> float:
        total, since = 0.0, None
        for t, count in self.ready_counts:
            if count == 0 and since is None:
                since = t
            elif count > 0 and since is not None:
                total, since = total + (t - since), None
        return total


def pods(cp: ControlPlane, ns: str) -> list[dict[str, Any]]:
    items = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def nodes_ready(cp: ControlPlane) -> None:
    """Every node Ready and without the node controller's not-ready/unreachable taints: the scene
    the runs assume (a node that is not Ready is left alone by desched, and simulate then predicts
    nothing; CI saw that once, after the modules that restart the apiserver)."""

    def ready() -> bool | str:
        for name in NODES:
            node = cp.request("GET", f"/api/v1/nodes/{name}")
            conds = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
            keys = {t["key"] for t in node["spec"].get("taints", [])}
            if conds.get("Ready") != "True" or keys & {
                "node.kubernetes.io/not-ready",
                "node.kubernetes.io/unreachable",
            }:
                return False
        return True

    wait_for(ready, "the nodes Ready, without not-ready/unreachable taints", timeout=120, interval=1.0)


def start_one(cluster: Cluster, prefix: str, **strategy: Any) -> tuple[str, dict[str, Any]]:
    """A namespace with a Ready single-replica Deployment ``web`` (``strategy`` overrides the
    default RollingUpdate: maxSurge 25% = 1 pod); returns the namespace and its pod."""
    cp = cluster.cp
    nodes_ready(cp)
    ns = new_namespace(cp, prefix)
    dep = deployment("web", 1)
    if strategy:
        dep["spec"]["strategy"] = strategy
    cp.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", dep)
    wait_for(lambda: available(cp, ns) == 1, "the pod Ready", timeout=90)
    wait_for(
        lambda: (
            (cp.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web").get("status") or {}).get(
                "availableReplicas"
            )
            == 1
        ),
        "the Deployment available",
        timeout=60,
    )
    (pod,) = pods(cp, ns)
    return ns, pod


def policy(tmp: Path, ns: str, surge: bool) -> Path:
    top: dict[str, Any] = {"evictionPolicy": {"surge": {"maxReplicas": 1, "timeout": "60s"}}} if surge else {}
    return single_plugin_policy(tmp / f"surge-{surge}.yaml", ns, "RemovePodsViolatingNodeTaints", {}, **top)


def simulate_on_snapshot(tmp: Path, cluster: Cluster, policy_path: Path) -> list[tuple[str, str]]:
    """(pod, method) of each eviction ``simulate`` predicts on a ``desched snapshot --workloads``."""
    snap = tmp / "snap.json"
    proc = run_desched("snapshot", "--workloads", "-o", str(snap), "--kubeconfig", str(cluster.cp.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    proc = run_desched("simulate", str(snap), "--policy", str(policy_path), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return [(e["name"], e.get("method", "evict")) for e in json.loads(proc.stdout)["evictions"]]


def moved(cp: ControlPlane, ns: str, old: dict[str, Any]) -> dict[str, Any]:
    """The Deployment's new pod, Ready on another node, once the old one is gone."""

    def check() -> dict[str, Any] | None:
        now = pods(cp, ns)
        if any(p["metadata"]["uid"] == old["metadata"]["uid"] for p in now) or len(now) != 1:
            return None
        return now[0] if _ready(now[0]) else None

    return wait_for(check, "the pod moved", timeout=90)  # type: ignore[no-any-return]


def test_surge_moves_a_single_replica_deployment_without_downtime(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    cp.start_scheduler()
    cp.start_controller_manager()
    for doc in yaml.safe_load_all(SURGE_RBAC.read_text()):
        apply_manifest(cp, doc)

    # ---- with surge
    ns, old = start_one(cluster, "surge")
    node = old["spec"]["nodeName"]
    generation = cp.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web")["metadata"]["generation"]
    watch = Watcher(cp, ns).start()
    set_taint(cp, node, True)
    try:
        scheduler_sees_taint(cp, node)
        # simulate, on a snapshot taken just before the run, predicts the surge
        predicted = simulate_on_snapshot(tmp_path, cluster, policy(tmp_path, ns, surge=True))
        assert predicted == [(old["metadata"]["name"], "surge")], predicted
        proc = run_once(cluster, policy(tmp_path, ns, surge=True))
        new = moved(cp, ns, old)
    finally:
        set_taint(cp, node, False)
    assert new["spec"]["nodeName"] != node, (proc.stderr, cp.logs("kube-scheduler"))
    time.sleep(1)  # the last watch events in
    old_uid, new_uid = old["metadata"]["uid"], new["metadata"]["uid"]
    # make before break: never without an available replica, the old pod gone after the new Ready
    surge_min = min(a for _, a in watch.deployment_seen)
    assert watch.deployment_seen and surge_min >= 1, watch.deployment_seen
    assert watch.ready_at[new_uid] <= watch.gone_at[old_uid], (watch.ready_at, watch.gone_at)
    surge_down = watch.seconds_without_a_ready_pod()
    assert surge_down == 0.0, watch.ready_counts
    # exactly one rollout: one restart (generation + 1), one new ReplicaSet
    dep = cp.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web")
    assert dep["metadata"]["generation"] == generation + 1
    assert "kubectl.kubernetes.io/restartedAt" in dep["spec"]["template"]["metadata"]["annotations"]
    rss = cp.request("GET", f"/apis/apps/v1/namespaces/{ns}/replicasets")["items"]
    assert len(rss) == 2, [r["metadata"]["name"] for r in rss]
    # told: the log line, Events on the pod and on the Deployment, the follow-up's end
    assert "method=surge" in proc.stderr and "surge done" in proc.stderr, proc.stderr

    def surge_events() -> list[dict[str, Any]] | None:
        evs = desched_events(cluster, ns)
        wanted = {"RemovePodsViolatingNodeTaints", "SurgeStarted", "SurgeSucceeded"}
        return evs if {e["reason"] for e in evs} >= wanted else None

    evs = wait_for(surge_events, "the surge's Events", timeout=30)
    on_pod = [e for e in evs if e["reason"] == "RemovePodsViolatingNodeTaints"]
    assert [e["regarding"]["name"] for e in on_pod] == [old["metadata"]["name"]]
    assert "pod surged from" in on_pod[0]["note"] and "Deployment" in on_pod[0]["note"]
    started = [e for e in evs if e["reason"] == "SurgeStarted"]
    assert [(e["regarding"]["kind"], e["regarding"]["name"]) for e in started] == [("Deployment", "web")]

    # ---- the same without surge: an eviction, and the Deployment has no available replica a while
    ns2, old2 = start_one(cluster, "nosurge")
    node2 = old2["spec"]["nodeName"]
    watch2 = Watcher(cp, ns2).start()
    set_taint(cp, node2, True)
    try:
        scheduler_sees_taint(cp, node2)
        proc2 = run_once(cluster, policy(tmp_path, ns2, surge=False))
        moved(cp, ns2, old2)
    finally:
        set_taint(cp, node2, False)
    time.sleep(1)
    evict_min = min(a for _, a in watch2.deployment_seen)
    evict_down = watch2.seconds_without_a_ready_pod()
    print(
        f"availability: surge min availableReplicas {surge_min}, {surge_down:.2f}s without a Ready pod; "
        f"eviction min availableReplicas {evict_min}, {evict_down:.2f}s without a Ready pod"
    )
    assert evict_min == 0, watch2.deployment_seen
    assert evict_down > 0.0, watch2.ready_counts
    assert "method=surge" not in proc2.stderr


def test_a_deployment_that_cannot_surge_is_evicted_as_today(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    cp.start_scheduler()
    cp.start_controller_manager()
    for doc in yaml.safe_load_all(SURGE_RBAC.read_text()):
        apply_manifest(cp, doc)
    ns, old = start_one(
        cluster, "nosurgeable", type="RollingUpdate", rollingUpdate={"maxSurge": 0, "maxUnavailable": 1}
    )
    node = old["spec"]["nodeName"]
    generation = cp.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web")["metadata"]["generation"]
    set_taint(cp, node, True)
    try:
        scheduler_sees_taint(cp, node)
        proc = run_once(cluster, policy(tmp_path, ns, surge=True))
        moved(cp, ns, old)
    finally:
        set_taint(cp, node, False)
    dep = cp.request("GET", f"/apis/apps/v1/namespaces/{ns}/deployments/web")
    assert dep["metadata"]["generation"] == generation  # not restarted: evicted
    assert "method=surge" not in proc.stderr, proc.stderr
    assert f"pod={ns}/{old['metadata']['name']}" in proc.stderr, proc.stderr


def test_a_surge_that_cannot_finish_is_reported_failed_after_its_timeout(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Every node tainted: the new pod fits nowhere, the rollout cannot finish; desched reports the
    surge failed after its timeout (once), and the old pod keeps serving."""
    cp = cluster.cp
    cp.start_scheduler()
    cp.start_controller_manager()
    for doc in yaml.safe_load_all(SURGE_RBAC.read_text()):
        apply_manifest(cp, doc)
    ns, old = start_one(cluster, "surgefail")
    path = single_plugin_policy(
        tmp_path / "fail.yaml",
        ns,
        "RemovePodsViolatingNodeTaints",
        {},
        evictionPolicy={"surge": {"timeout": "8s"}},
    )
    for node in NODES:
        set_taint(cp, node, True)
    try:
        for node in NODES:
            scheduler_sees_taint(cp, node)
        started = time.monotonic()
        proc = run_once(cluster, path)
        took = time.monotonic() - started
        assert "surge failed" in proc.stderr and "surge done" not in proc.stderr, proc.stderr
        assert proc.stderr.count("method=surge") == 2, proc.stderr  # the eviction line, the failure
        assert "not done after 8s" in proc.stderr and "is still there" in proc.stderr, proc.stderr
        assert took >= 8, took
        # the old pod still serves; the new one waits for a node
        now = {p["metadata"]["uid"]: p for p in pods(cp, ns)}
        assert old["metadata"]["uid"] in now and _ready(now[old["metadata"]["uid"]])
        pending = [p for uid, p in now.items() if uid != old["metadata"]["uid"]]
        assert len(pending) == 1 and not pending[0]["spec"].get("nodeName"), pending
        evs = wait_for(
            lambda: [e for e in desched_events(cluster, ns) if e["reason"] == "SurgeFailed"],
            "the SurgeFailed Events",
            timeout=30,
        )
        assert sorted(e["regarding"]["kind"] for e in evs) == ["Deployment", "Pod"], evs
        assert all(e["type"] == "Warning" for e in evs)
    finally:
        for node in NODES:
            set_taint(cp, node, False)


def test_a_statefulset_pod_is_evicted_not_surged(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    cp.start_scheduler()
    cp.start_controller_manager()
    ns = new_namespace(cp, "surgests")
    sts = deployment("db", 1)
    sts["kind"] = "StatefulSet"
    sts["spec"]["serviceName"] = "db"
    cp.request("POST", f"/apis/apps/v1/namespaces/{ns}/statefulsets", sts)
    wait_for(lambda: available(cp, ns) == 1, "the pod Ready", timeout=90)
    (old,) = pods(cp, ns)
    node = old["spec"]["nodeName"]
    set_taint(cp, node, True)
    try:
        scheduler_sees_taint(cp, node)
        proc = run_once(cluster, policy(tmp_path, ns, surge=True))
        wait_for(
            lambda: [p for p in pods(cp, ns) if p["metadata"]["uid"] != old["metadata"]["uid"]],
            "the pod re-created",
            timeout=60,
        )
    finally:
        set_taint(cp, node, False)
    assert "method=surge" not in proc.stderr, proc.stderr
    assert f"pod={ns}/db-0" in proc.stderr, proc.stderr
    assert not [e for e in desched_events(cluster, ns) if e["reason"].startswith("Surge")]
