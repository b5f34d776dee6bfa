"""RemoveAnomalyPods against a real kube-apiserver: Events in, evictions and node downgrades out.

desched runs as a subprocess under a ServiceAccount bound to the ClusterRoles of
deploy/kubernetes/base (what every plugin needs) and deploy/kubernetes/anomaly (Events, nodes
patch), so the tests also prove those manifests sufficient.

The pods must stay Pending, as on a node whose CNI is broken: the nodes here are *not* managed by
kwok (no kwok annotation), the test writes their Ready status itself and keeps its heartbeat fresh
(a controller-manager started by another test would otherwise mark them NotReady), and kubelet's
FailedCreatePodSandBox Events are written through the API by the test, occurrence by occurrence.
Each test works in its own namespace and on its own nodes; policies use short TTLs and timeouts.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import DeschedProcess, free_port, run_desched, wait_for

EVERY_SECOND = ("--descheduling-interval", "1s")

ROOT = Path(__file__).resolve().parents[2]
BASE_RBAC = ROOT / "deploy" / "kubernetes" / "base" / "rbac.yaml"
ANOMALY_RBAC = ROOT / "deploy" / "kubernetes" / "anomaly" / "rbac.yaml"
SA_NAMESPACE, SA_NAME = "kube-system", "desched-anomaly-e2e"
KEY = "desched.io/anomalous-node"
ANNOTATION = "desched.io/downgrade"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def update_node(cp: ControlPlane, name: str, mutate: Callable[[dict[str, Any]], None]) -> None:
    """Read-modify-write a node, again on a conflict (a controller-manager may be writing it too)."""

    def attempt() -> bool:
        node = cp.request("GET", f"/api/v1/nodes/{name}")
        mutate(node)
        status, body = cp.raw_request("PUT", f"/api/v1/nodes/{name}", node)
        assert status in (200, 409), body
        return status == 200

    wait_for(attempt, f"an update of node {name}", timeout=10)


def apply(cp: ControlPlane, doc: dict[str, Any]) -> None:
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}[doc["kind"]]
    cp.request(
        "PATCH",
        f"/apis/rbac.authorization.k8s.io/v1/{plural}/{doc['metadata']['name']}?fieldManager=e2e&force=true",
        json.dumps(doc).encode(),
        content_type="application/apply-patch+yaml",
    )


# ----------------------------------------------------------------------------- the cluster


@dataclass
class Cluster:
    cp: ControlPlane
    kubeconfig: Path
    nodes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_node(self, name: str) -> None:
        """A Ready node that kwok does not manage: its pods stay Pending."""
        cp = self.cp
        capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        cp.request(
            "POST",
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "e2e": "anomaly"}},
                "spec": {},
            },
        )
        cp.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            {"status": {"capacity": capacity, "allocatable": capacity, "conditions": [self._ready()]}},
            content_type="application/strategic-merge-patch+json",
        )

        # node admission tainted it not-ready; lift that as the node-lifecycle controller would
        # (which, if a controller-manager runs, may be changing the node at the same time)
        def lift(node: dict[str, Any]) -> None:
            node["spec"]["taints"] = [
                t for t in node["spec"].get("taints") or [] if not t["key"].startswith("node.kubernetes.io/")
            ]

        update_node(cp, name, lift)
        with self.lock:
            self.nodes.append(name)

    @staticmethod
    def _ready() -> dict[str, str]:
        t = now_rfc3339()
        return {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "lastHeartbeatTime": t,
            "lastTransitionTime": t,
        }

    def heartbeat(self, stop: threading.Event) -> None:
        while not stop.wait(5.0):
            with self.lock:
                names = list(self.nodes)
            for name in names:
                # best effort; a test that needs the node notices
                with contextlib.suppress(Exception):
                    self.cp.request(
                        "PATCH",
                        f"/api/v1/nodes/{name}/status",
                        {
                            "status": {
                                "conditions": [
                                    {"type": "Ready", "status": "True", "lastHeartbeatTime": now_rfc3339()}
                                ]
                            }
                        },
                        content_type="application/strategic-merge-patch+json",
                    )

    def node(self, name: str) -> dict[str, Any]:
        return self.cp.request("GET", f"/api/v1/nodes/{name}")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def cluster(control_plane: Any) -> Iterator[Cluster]:
    if getattr(control_plane, "external", False):
        pytest.skip("these tests create unmanaged nodes and need the built-in control plane")
    cp: ControlPlane = control_plane
    roles = [d for d in yaml.safe_load_all(BASE_RBAC.read_text()) if d and d["kind"] == "ClusterRole"]
    roles += [d for d in yaml.safe_load_all(ANOMALY_RBAC.read_text()) if d and d["kind"] == "ClusterRole"]
    assert {r["metadata"]["name"] for r in roles} == {"desched", "desched-anomaly"}
    status, _ = cp.raw_request("GET", f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts/{SA_NAME}")
    if status == 404:
        cp.request(
            "POST",
            f"/api/v1/namespaces/{SA_NAMESPACE}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA_NAME}},
        )
    for role in roles:
        apply(cp, role)
        apply(
            cp,
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{SA_NAME}-{role['metadata']['name']}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role["metadata"]["name"],
                },
                "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": SA_NAMESPACE}],
            },
        )
    token = cp.service_account_token(SA_NAMESPACE, SA_NAME)
    c = Cluster(cp, cp.kubeconfig_for_token(token, name=SA_NAME))
    stop = threading.Event()
    beat = threading.Thread(target=c.heartbeat, args=(stop,), daemon=True)
    beat.start()
    try:
        yield c
    finally:
        stop.set()
        beat.join(timeout=10)
        for name in c.nodes:
            cp.raw_request("DELETE", f"/api/v1/nodes/{name}")


# ----------------------------------------------------------------------------- a test's world


class World:
    """A namespace, two unmanaged nodes, an owner for the pods, and Events written by hand."""

    def __init__(self, cluster: Cluster, prefix: str) -> None:
        self.cluster = cluster
        self.cp = cluster.cp
        suffix = uuid.uuid4().hex[:6]
        self.ns = f"{prefix}-{suffix}"
        self.nodes = (f"{prefix}-{suffix}-a", f"{prefix}-{suffix}-b")
        cp = self.cp
        cp.request(
            "POST",
            "/api/v1/namespaces",
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}},
        )
        # (a controller-manager, if another test started one, may have created it already)
        status, body = cp.raw_request(
            "POST",
            f"/api/v1/namespaces/{self.ns}/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        )
        assert status in (201, 409), body
        for n in self.nodes:
            cluster.add_node(n)
        # A real owner: the garbage collector (if a controller-manager runs) keeps the pods, and a
        # selector matching none of them keeps the ReplicaSet controller away.
        rs = cp.request(
            "POST",
            f"/apis/apps/v1/namespaces/{self.ns}/replicasets",
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": {"e2e-owner": "none"}},
                    "template": {
                        "metadata": {"labels": {"e2e-owner": "none"}},
                        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
                    },
                },
            },
        )
        self.owner = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web",
            "uid": rs["metadata"]["uid"],
        }
        self.event_counts: dict[str, int] = {}

    def pod(self, name: str, node: str) -> dict[str, Any]:
        return self.cp.request(  # type: ignore[no-any-return]
            "POST",
            f"/api/v1/namespaces/{self.ns}/pods",
            builders.pod_doc(
                name,
                namespace=None,
                labels={"app": "web"},
                owner=self.owner,
                node=node,
                containers=[{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                phase=None,
                spec={"automountServiceAccountToken": False},
            ),
        )

    def sandbox_failure(self, pod: dict[str, Any], times: int = 1) -> None:
        """kubelet's FailedCreatePodSandBox, ``times`` more occurrences (one Event, its count grows)."""
        name = pod["metadata"]["name"]
        count = self.event_counts.get(name, 0) + times
        self.event_counts[name] = count
        t = now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.sandbox", "namespace": self.ns},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": self.ns,
                "name": name,
                "uid": pod["metadata"]["uid"],
            },
            "reason": "FailedCreatePodSandBox",
            "message": "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup "
            'network for sandbox: plugin type="calico" failed (add): connection refused',
            "type": "Warning",
            "count": count,
            "firstTimestamp": t,
            "lastTimestamp": t,
            "source": {"component": "kubelet", "host": pod["spec"]["nodeName"]},
        }
        path = f"/api/v1/namespaces/{self.ns}/events"
        if count == times:
            self.cp.request("POST", path, body)
        else:
            current = self.cp.request("GET", f"{path}/{name}.sandbox")
            body["metadata"] = current["metadata"]
            body["firstTimestamp"] = current["firstTimestamp"]
            self.cp.request("PUT", f"{path}/{name}.sandbox", body)

    def recover(self, pod: dict[str, Any]) -> None:
        """The pod starts after all (what kubelet would write)."""
        current = self.cp.request("GET", f"/api/v1/namespaces/{self.ns}/pods/{pod['metadata']['name']}")
        t = now_rfc3339()
        current["status"] = {
            "phase": "Running",
            "startTime": t,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t}],
            "containerStatuses": [
                {
                    "name": "c",
                    "ready": True,
                    "restartCount": 0,
                    "image": "pause",
                    "imageID": "",
                    "state": {"running": {"startedAt": t}},
                }
            ],
        }
        self.cp.request("PUT", f"/api/v1/namespaces/{self.ns}/pods/{pod['metadata']['name']}/status", current)

    def evicted(self, name: str) -> bool:
        status, data = self.cp.raw_request("GET", f"/api/v1/namespaces/{self.ns}/pods/{name}")
        return status == 404 or (
            status == 200 and bool(json.loads(data)["metadata"].get("deletionTimestamp"))
        )

    def policy(self, tmp: Path, *, method: str, ttl: str, min_startup: int, abnormalities: int = 3) -> Path:
        doc = {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "gracePeriodSeconds": 0,
            "profiles": [
                {
                    "name": "anomaly",
                    "pluginConfig": [
                        {
                            "name": "RemoveAnomalyPods",
                            "args": {
                                "namespaces": {"include": [self.ns]},
                                "minPodStartupSeconds": min_startup,
                                "anomalyCondition": {
                                    "timeout": "30s",
                                    "consecutiveAbnormalities": abnormalities,
                                },
                                "nodeDowngradePolicy": {"method": method, "ttl": ttl},
                            },
                        }
                    ],
                    "plugins": {"deschedule": {"enabled": ["RemoveAnomalyPods"]}},
                }
            ],
        }
        path = tmp / f"policy-{self.ns}.yaml"
        path.write_text(yaml.safe_dump(doc))
        return path


def downgrade_of(node: dict[str, Any]) -> list[dict[str, Any]]:
    raw = (node["metadata"].get("annotations") or {}).get(ANNOTATION)
    return json.loads(raw) if raw else []


def has_label(node: dict[str, Any]) -> bool:
    return (node["metadata"].get("labels") or {}).get(KEY) == "true"


def has_taint(node: dict[str, Any]) -> bool:
    return any(t["key"] == KEY and t.get("effect") == "NoSchedule" for t in node["spec"].get("taints") or [])


def rfc3339_seconds(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def expires_at(node: dict[str, Any]) -> float:
    [entry] = downgrade_of(node)
    return rfc3339_seconds(entry["expiresAt"])


# ----------------------------------------------------------------------------- desched


def desched_once(cluster: Cluster, policy: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    proc = run_desched(
        "--v=2",
        "run",
        "--policy-config-file",
        str(policy),
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--descheduling-interval",
        "0",
        "--secure-port",
        "0",
        *extra,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


SUSPECTED = ("descheduler_anomaly_pods_suspected", '{profile="anomaly"}')


# ----------------------------------------------------------------------------- tests


def test_evicted_after_n_observations_not_before_label_downgrade_expires(
    cluster: Cluster, tmp_path: Path
) -> None:
    w = World(cluster, "anom-label")
    bad_node, other_node = w.nodes
    stuck = w.pod("stuck", bad_node)
    recovering = w.pod("recovering", other_node)
    pol = w.policy(tmp_path, method="label", ttl="5s", min_startup=1)
    d = DeschedProcess(cluster.kubeconfig, tmp_path, pol, *EVERY_SECOND)
    try:
        wait_for(lambda: d.cycles() >= 1, "the first cycle", timeout=60)
        # two occurrences each, one cycle apart: suspected, not anomalous
        for _ in range(2):
            w.sandbox_failure(stuck)
            w.sandbox_failure(recovering)
            d.wait_cycles(2)
        assert d.sample(*SUSPECTED) == 2, d.text()
        d.wait_cycles(3)  # no new occurrence: nothing changes however many cycles run
        assert not w.evicted("stuck") and not w.evicted("recovering"), d.text()
        assert not has_label(w.cluster.node(bad_node))
        # the recovering pod starts; the stuck one fails a third time
        w.recover(recovering)
        d.wait_cycles(2)
        assert d.sample(*SUSPECTED) == 1, d.text()
        w.sandbox_failure(stuck)
        wait_for(lambda: w.evicted("stuck"), "the stuck pod's eviction", timeout=15)
        node = w.cluster.node(bad_node)
        assert has_label(node), node["metadata"]
        [entry] = downgrade_of(node)
        assert (
            entry["method"] == "label" and entry["key"] == KEY and entry["by"] == "anomaly/RemoveAnomalyPods"
        )
        expiry = expires_at(node)
        assert (
            d.sample("descheduler_anomaly_total", '{profile="anomaly",reason="FailedCreatePodSandBox"}') == 1
        )
        wait_for(
            lambda: d.sample("descheduler_anomaly_nodes_downgraded") == 1, "nodes_downgraded 1", timeout=5
        )
        # the label goes on time: not before expiresAt, and soon after it
        removed = wait_for(
            lambda: not has_label(w.cluster.node(bad_node)) and time.time(), "label removal", timeout=20
        )
        assert expiry - 0.5 <= removed <= expiry + 3, (removed - expiry, d.text())
        assert ANNOTATION not in (w.cluster.node(bad_node)["metadata"].get("annotations") or {})
        wait_for(
            lambda: d.sample("descheduler_anomaly_nodes_downgraded") == 0, "nodes_downgraded 0", timeout=5
        )
        # the pod that recovered is still there, its node never downgraded
        d.wait_cycles(2)
        assert not w.evicted("recovering"), d.text()
        assert not downgrade_of(w.cluster.node(other_node)) and not has_label(w.cluster.node(other_node))
        assert "judged anomalous" in d.text() and "removed expired downgrade" in d.text()
    finally:
        assert d.stop() == 0, d.text()


def test_taint_downgrade_survives_a_restart_and_ends_on_time(cluster: Cluster, tmp_path: Path) -> None:
    w = World(cluster, "anom-taint")
    bad_node, _ = w.nodes
    pol = w.policy(tmp_path, method="taint", ttl="8s", min_startup=4)
    stuck = w.pod("stuck", bad_node)
    created = rfc3339_seconds(stuck["metadata"]["creationTimestamp"])
    w.sandbox_failure(stuck, times=3)  # already enough occurrences, but within the startup window
    first = DeschedProcess(cluster.kubeconfig, tmp_path, pol, *EVERY_SECOND, name="first")
    try:
        wait_for(lambda: w.evicted("stuck"), "the stuck pod's eviction", timeout=30)
        evicted_at = time.time()
        node = w.cluster.node(bad_node)
        assert has_taint(node), node["spec"]
        assert evicted_at - created >= 4, "evicted within minPodStartupSeconds"
    finally:
        assert first.stop() == 0, first.text()
    expiry = expires_at(node)
    assert expiry - time.time() > 3, "the test needs the restart to happen before expiry"
    # another desched takes over before expiry: it learns the expiry from the node, not from memory
    second = DeschedProcess(cluster.kubeconfig, tmp_path, pol, *EVERY_SECOND, name="second")
    try:
        wait_for(lambda: second.cycles() >= 1, "the second desched's first cycle", timeout=60)
        assert has_taint(w.cluster.node(bad_node)), "removed before its expiry"
        removed = wait_for(
            lambda: not has_taint(w.cluster.node(bad_node)) and time.time(), "taint removal", timeout=20
        )
        assert expiry - 0.5 <= removed <= expiry + 3, (removed - expiry, second.text())
        node = w.cluster.node(bad_node)
        assert ANNOTATION not in (node["metadata"].get("annotations") or {}), node["metadata"]
    finally:
        assert second.stop() == 0, second.text()


def test_expired_downgrade_is_removed_at_startup_and_only_desched_s_own(
    cluster: Cluster, tmp_path: Path
) -> None:
    w = World(cluster, "anom-start")
    bad_node, admin_node = w.nodes
    # an administrator's own label with desched's key, and an unrelated taint on the bad node
    w.cp.request(
        "PATCH",
        f"/api/v1/nodes/{admin_node}",
        {"metadata": {"labels": {KEY: "true"}}},
        content_type="application/merge-patch+json",
    )

    def maintenance(node: dict[str, Any]) -> None:
        node["spec"]["taints"] = [
            *(node["spec"].get("taints") or []),
            {"key": "example.com/maintenance", "value": "soon", "effect": "NoSchedule"},
        ]

    update_node(w.cp, bad_node, maintenance)
    pol = w.policy(tmp_path, method="label", ttl="3s", min_startup=0)
    stuck = w.pod("stuck", bad_node)
    w.sandbox_failure(stuck, times=3)
    proc = desched_once(cluster, pol)  # one cycle: evicts, labels, exits
    assert w.evicted("stuck"), proc.stderr
    node = w.cluster.node(bad_node)
    assert has_label(node), (node["metadata"], proc.stderr)
    expiry = expires_at(node)
    # nobody runs: the label outlives its expiry
    time.sleep(max(0.0, expiry - time.time()) + 1.5)
    assert has_label(w.cluster.node(bad_node))
    # the next run (a CronJob's next schedule) removes it first thing, and nothing else
    proc = desched_once(cluster, pol)
    node = w.cluster.node(bad_node)
    assert not has_label(node), proc.stderr
    assert ANNOTATION not in (node["metadata"].get("annotations") or {})
    assert any(t["key"] == "example.com/maintenance" for t in node["spec"].get("taints") or [])
    assert has_label(w.cluster.node(admin_node)), "desched removed a label it did not add"


def test_dry_run_writes_nothing(cluster: Cluster, tmp_path: Path) -> None:
    w = World(cluster, "anom-dry")
    bad_node, _ = w.nodes
    stuck = w.pod("stuck", bad_node)
    w.sandbox_failure(stuck, times=5)
    proc = desched_once(cluster, w.policy(tmp_path, method="taint", ttl="1m", min_startup=0), "--dry-run")
    assert "would evict pod=" in proc.stderr and "dryRun=true" in proc.stderr, proc.stderr
    time.sleep(1)
    assert not w.evicted("stuck")
    node = w.cluster.node(bad_node)
    assert not has_taint(node) and not downgrade_of(node)


def test_event_driven_cycle_follows_a_new_warning_event(cluster: Cluster, tmp_path: Path) -> None:
    """With --event-driven and a 10-minute interval, a new kubelet Warning runs a cycle within the
    debounce, and the pod is judged on the Event's occurrences; a Normal Event runs none."""
    w = World(cluster, "anom-evd")
    bad_node, _ = w.nodes
    stuck = w.pod("stuck", bad_node)
    pol = w.policy(tmp_path, method="label", ttl="1m", min_startup=0, abnormalities=3)
    d = DeschedProcess(
        cluster.kubeconfig,
        tmp_path,
        pol,
        "--descheduling-interval",
        "10m",
        "--event-driven",
        "--event-debounce",
        "500ms",
    )
    try:
        wait_for(lambda: d.cycles() >= 1, "the first cycle", timeout=60)
        time.sleep(2)
        assert d.cycles() == 1, d.text()
        # a Normal Event about the pod is not a reason for a cycle
        w.cp.request(
            "POST",
            f"/api/v1/namespaces/{w.ns}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "stuck.scheduled", "namespace": w.ns},
                "involvedObject": {"kind": "Pod", "namespace": w.ns, "name": "stuck"},
                "reason": "Scheduled",
                "message": "assigned",
                "type": "Normal",
                "count": 1,
            },
        )
        time.sleep(2)
        assert d.cycles() == 1, d.text()
        w.sandbox_failure(stuck)  # one occurrence: a cycle, the pod only suspected
        wait_for(lambda: d.cycles() >= 2, "a cycle after the Warning", timeout=15)
        wait_for(lambda: d.sample(*SUSPECTED) == 1, "the pod suspected", timeout=5)
        assert not w.evicted("stuck")
        w.sandbox_failure(stuck, times=2)  # the Event's count grows to 3: anomalous
        wait_for(lambda: w.evicted("stuck"), "the stuck pod's eviction", timeout=15)
        assert d.cycles() <= 4, d.text()  # cycles came from the Events, not the 10-minute interval
    finally:
        assert d.stop() == 0, d.text()


def test_persistent_volume_warning_reaches_a_live_event_driven_run(cluster: Cluster, tmp_path: Path) -> None:
    """A Warning about the PersistentVolume a pod's claim is bound to (recorded, as controllers
    record Events of cluster-scoped objects, in namespace default with no involvedObject
    namespace) runs a cycle with --event-driven and makes the pod anomalous in `desched run`; a
    Warning about another volume does neither."""
    w = World(cluster, "anom-pv")
    cp = w.cp
    bad_node, _ = w.nodes
    volume, other = f"pv-{w.ns}", f"pv-{w.ns}-other"
    for name in (volume, other):
        cp.request(
            "POST",
            "/api/v1/persistentvolumes",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": name},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "hostPath": {"path": f"/tmp/{name}"},
                },
            },
        )
    cp.request(
        "POST",
        f"/api/v1/namespaces/{w.ns}/persistentvolumeclaims",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-db-0"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": "",
                "volumeName": volume,
            },
        },
    )
    cp.request(
        "POST",
        f"/api/v1/namespaces/{w.ns}/pods",
        builders.pod_doc(
            "db-0",
            namespace=None,
            labels={"app": "web"},
            owner=w.owner,
            node=bad_node,
            containers=[{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            phase=None,
            spec={
                "automountServiceAccountToken": False,
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}],
            },
        ),
    )

    def volume_warning(name: str) -> None:
        t = now_rfc3339()
        cp.request(
            "POST",
            "/api/v1/namespaces/default/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.attach", "namespace": "default"},
                "involvedObject": {"apiVersion": "v1", "kind": "PersistentVolume", "name": name},
                "reason": "FailedAttachVolume",
                "message": f'AttachVolume.Attach failed for volume "{name}" : rpc error: timed out',
                "type": "Warning",
                "count": 3,
                "firstTimestamp": t,
                "lastTimestamp": t,
                "source": {"component": "attachdetach-controller"},
            },
        )

    pol = w.policy(tmp_path, method="label", ttl="1m", min_startup=0, abnormalities=3)
    d = DeschedProcess(
        cluster.kubeconfig,
        tmp_path,
        pol,
        "--descheduling-interval",
        "10m",
        "--event-driven",
        "--event-debounce",
        "500ms",
    )
    try:
        wait_for(lambda: d.cycles() >= 1, "the first cycle", timeout=60)
        volume_warning(other)  # another volume's trouble: a cycle, but this pod is not judged on it
        wait_for(lambda: d.cycles() >= 2, "a cycle after the other volume's Warning", timeout=15)
        assert not w.evicted("db-0"), d.text()
        volume_warning(volume)
        wait_for(lambda: w.evicted("db-0"), "the pod's eviction after its volume's Warning", timeout=15)
        assert d.cycles() <= 4, d.text()  # cycles came from the Events, not the 10-minute interval
        assert (
            d.sample("descheduler_anomaly_total", '{profile="anomaly",reason="FailedAttachVolume"}') == 1
        ), d.text()
    finally:
        assert d.stop() == 0, d.text()
        for name in (volume, other):
            cp.raw_request("DELETE", f"/api/v1/persistentvolumes/{name}")


SCHEDULER_CONFIG = ROOT / "examples" / "kube-scheduler-anomaly.yaml"


def test_documented_scheduler_config_steers_pods_off_a_label_downgraded_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    """kube-scheduler with examples/kube-scheduler-anomaly.yaml places new pods off the labelled node."""
    cp = cluster.cp
    assert cp.bin_dir is not None
    w = World(cluster, "anom-sched")
    bad_node, good_node = w.nodes
    for n in w.nodes:  # keep the candidates to this test's two nodes
        cp.request(
            "PATCH",
            f"/api/v1/nodes/{n}",
            {"metadata": {"labels": {"e2e-world": w.ns}}},
            content_type="application/merge-patch+json",
        )
    stuck = w.pod("stuck", bad_node)
    w.sandbox_failure(stuck, times=3)
    proc = desched_once(cluster, w.policy(tmp_path, method="label", ttl="10m", min_startup=0))
    assert has_label(w.cluster.node(bad_node)), proc.stderr

    cfg = yaml.safe_load(SCHEDULER_CONFIG.read_text())
    scheduler_name = f"anomaly-aware-{w.ns}"
    cfg["profiles"][0]["schedulerName"] = scheduler_name
    control_name = f"plain-{w.ns}"  # the same scheduler without the added affinity, for contrast
    cfg["profiles"].append({"schedulerName": control_name})
    cfg["clientConnection"] = {
        "kubeconfig": str(cp.kubeconfig_for_token(cp.scheduler_token, name="kube-scheduler"))
    }
    cfg["leaderElection"] = {"leaderElect": False}
    cfg_path = tmp_path / "kube-scheduler.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    log = (tmp_path / "kube-scheduler.log").open("w")
    sched = subprocess.Popen(
        [
            str(cp.bin_dir / "kube-scheduler"),
            f"--config={cfg_path}",
            f"--secure-port={free_port()}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={tmp_path / 'certs'}",
            "--v=2",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def create(names: list[str], scheduler: str) -> None:
        for name in names:
            cp.request(
                "POST",
                f"/api/v1/namespaces/{w.ns}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "ownerReferences": [w.owner]},
                    "spec": {
                        "schedulerName": scheduler,
                        "nodeSelector": {"e2e-world": w.ns},
                        "automountServiceAccountToken": False,
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "100m"}},
                            }
                        ],
                    },
                },
            )

    def placed(names: list[str]) -> dict[str, str]:
        def check() -> dict[str, str] | None:
            pods = cp.request("GET", f"/api/v1/namespaces/{w.ns}/pods")["items"]
            where = {
                p["metadata"]["name"]: p["spec"].get("nodeName", "")
                for p in pods
                if p["metadata"]["name"] in names
            }
            return where if all(where.values()) and len(where) == len(names) else None

        try:
            return wait_for(check, "the scheduler to bind the new pods", timeout=60, interval=0.25)  # type: ignore[no-any-return]
        except AssertionError as e:
            raise AssertionError(f"{e}\n{(tmp_path / 'kube-scheduler.log').read_text()[-3000:]}") from None

    try:
        steered = [f"new-{i}" for i in range(4)]
        create(steered, scheduler_name)
        assert set(placed(steered).values()) == {good_node}
        # without the added affinity the emptier, downgraded node is where pods go
        plain = [f"plain-{i}" for i in range(3)]
        create(plain, control_name)
        assert bad_node in placed(plain).values()
    finally:
        os.killpg(sched.pid, signal.SIGKILL)
        sched.wait(timeout=30)
        log.close()
