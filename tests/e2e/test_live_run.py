"""desched run against a real kube-apiserver (issue: live clusters).

desched runs as a subprocess under the deploy/ ServiceAccount and ClusterRole only, so every test
also proves the manifests' permissions are sufficient. Each test works in its own namespace and
scopes its policy to it, so tests do not see each other's pods.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from tests.e2e.controlplane import ApiError, ControlPlane
from tests.e2e.support import DeschedProcess, apply_manifest, lease_args, run_desched, wait_for

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "deploy" / "kubernetes" / "base" / "rbac.yaml"
NODES = ("e2e-n1", "e2e-n2", "e2e-n3")


@dataclass
class Cluster:
    cp: ControlPlane
    kubeconfig: Path  # the desched ServiceAccount's


@pytest.fixture(scope="module")
def cluster(control_plane: Any) -> Iterator[Cluster]:
    if getattr(control_plane, "external", False):
        pytest.skip(
            "these tests start and stop control-plane processes; they need the built-in control plane"
        )
    cp: ControlPlane = control_plane
    cp.start_kwok()
    for doc in yaml.safe_load_all(RBAC.read_text()):
        apply_manifest(cp, doc)
    token = cp.service_account_token("kube-system", "desched-sa")
    kubeconfig = cp.kubeconfig_for_token(token, name="desched-sa")
    for i, name in enumerate(NODES):
        status, _ = cp.raw_request("GET", f"/api/v1/nodes/{name}")
        if status == 404:
            labels = {"topology.kubernetes.io/zone": f"zone-{i}", "e2e/live": "true"}
            if name == "e2e-n2":
                labels["e2e/tier"] = "gold"
            cp.request("POST", "/api/v1/nodes", cp.fake_node(name, cpu="8", memory="32Gi", labels=labels))

    def ready() -> bool:
        for name in NODES:
            node = cp.request("GET", f"/api/v1/nodes/{name}")
            conds = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
            if conds.get("Ready") != "True":
                return False
        return True

    wait_for(ready, "kwok nodes to be Ready")
    # No node-lifecycle controller runs here, so nothing lifts the not-ready taint that node
    # admission puts on new nodes: lift it as that controller would once the node is Ready.
    for name in NODES:
        lift_not_ready_taint(cp, name)
    yield Cluster(cp, kubeconfig)


def lift_not_ready_taint(cp: ControlPlane, name: str) -> None:
    """GET, change, PUT, again on 409: kwok updates the node's status while we write its spec."""
    for _ in range(20):
        node = cp.request("GET", f"/api/v1/nodes/{name}")
        taints = [t for t in node["spec"].get("taints", []) if t["key"] != "node.kubernetes.io/not-ready"]
        if taints == node["spec"].get("taints", []):
            return
        node["spec"]["taints"] = taints
        try:
            cp.request("PUT", f"/api/v1/nodes/{name}", node)
            return
        except ApiError as e:
            if e.status != 409:
                raise
            time.sleep(0.1)
    raise AssertionError(f"node {name}: the not-ready taint could not be lifted (409 every time)")


def new_namespace(cp: ControlPlane, prefix: str) -> str:
    ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
    cp.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    # kube-controller-manager creates it when it runs (another test may have started it)
    cp.raw_request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
    )
    return ns


def owner_uid(cp: ControlPlane, ns: str, name: str) -> str:
    """A real object to own test pods: a ConfigMap, which no controller acts on, so the garbage
    collector (if a test started kube-controller-manager) keeps the pods and nothing re-creates them.
    """
    status, data = cp.raw_request(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
    )
    if status >= 400:
        data = json.dumps(cp.request("GET", f"/api/v1/namespaces/{ns}/configmaps/{name}")).encode()
    obj = json.loads(data)
    return str(obj["metadata"]["uid"])


def make_pod(
    cp: ControlPlane,
    ns: str,
    name: str,
    node: str,
    *,
    owner: str | None = None,
    labels: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
) -> None:
    owner_ref = None
    if owner:
        owner_ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": owner,
            "uid": owner_uid(cp, ns, owner),
            "controller": True,
        }
    doc = builders.pod_doc(
        name,
        namespace=None,
        node=node,
        labels=labels or {},
        owner=owner_ref,
        containers=[
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }
        ],
        tolerations=[
            {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
            *(tolerations or []),
        ],
        affinity=affinity or None,
        phase=None,
        spec={"automountServiceAccountToken": False},
    )
    cp.request("POST", f"/api/v1/namespaces/{ns}/pods", doc)


def wait_running(cp: ControlPlane, ns: str, count: int) -> None:
    def running() -> bool:
        pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        return len(pods) == count and all(p.get("status", {}).get("phase") == "Running" for p in pods)

    wait_for(running, f"{count} pods of {ns} to run")


def gone_or_terminating(cp: ControlPlane, ns: str) -> set[str]:
    """Names of the pods of ns the test created that were evicted (deleted or being deleted)."""
    pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    alive = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    created = CREATED.get(ns, set())
    return created - alive


CREATED: dict[str, set[str]] = {}


def scenario(cp: ControlPlane, ns: str) -> None:
    """Duplicates on e2e-n1, an anti-affinity pair on e2e-n2, a pod off its required affinity."""
    names = []
    for i in range(4):
        make_pod(cp, ns, f"dup-{i}", "e2e-n1", owner="dup", labels={"app": "dup"})
        names.append(f"dup-{i}")
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "anti"}}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    for i in range(2):
        make_pod(cp, ns, f"anti-{i}", "e2e-n2", owner=f"anti{i}", labels={"app": "anti"}, affinity=anti)
        names.append(f"anti-{i}")
    gold = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "e2e/tier", "operator": "In", "values": ["gold"]}]}
                ]
            }
        }
    }
    make_pod(cp, ns, "gold-0", "e2e-n3", owner="gold", labels={"app": "gold"}, affinity=gold)
    names.append("gold-0")
    CREATED[ns] = set(names)
    wait_running(cp, ns, len(names))


def policy(tmp: Path, ns: str, **top: Any) -> Path:
    scope = {"namespaces": {"include": [ns]}}
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        # only this module's nodes: other e2e tests add nodes to the shared control plane
        "nodeSelector": "e2e/live=true",
        **top,
        "profiles": [
            {
                "name": "e2e",
                "pluginConfig": [
                    {"name": "RemoveDuplicates", "args": scope},
                    {"name": "RemovePodsViolatingInterPodAntiAffinity", "args": scope},
                    {
                        "name": "RemovePodsViolatingNodeAffinity",
                        "args": {
                            **scope,
                            "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"],
                        },
                    },
                ],
                "plugins": {
                    "deschedule": {
                        "enabled": [
                            "RemovePodsViolatingInterPodAntiAffinity",
                            "RemovePodsViolatingNodeAffinity",
                        ]
                    },
                    "balance": {"enabled": ["RemoveDuplicates"]},
                },
            }
        ],
    }
    path = tmp / f"policy-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def run_once(cluster: Cluster, policy_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    proc = run_desched(
        "--v=2",
        "run",
        "--policy-config-file",
        str(policy_path),
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


def simulate_on_snapshot(cluster: Cluster, tmp: Path, policy_path: Path) -> set[str]:
    snap = tmp / "snap.json"
    proc = run_desched("snapshot", "-o", str(snap), "--kubeconfig", str(cluster.cp.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    proc = run_desched("simulate", str(snap), "--policy", str(policy_path), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return {e["name"] for e in json.loads(proc.stdout)["evictions"]}


def single_plugin_policy(tmp: Path, plugin: str, args: dict[str, Any]) -> Path:
    """A policy running one Deschedule plugin on this module's nodes."""
    path = tmp / f"{plugin}-{uuid.uuid4().hex[:6]}.yaml"
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/live=true",
        "profiles": [
            {
                "name": "e2e",
                "pluginConfig": [{"name": plugin, "args": args}],
                "plugins": {"deschedule": {"enabled": [plugin]}},
            }
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_cycle_evicts_what_simulate_predicts(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "parity")
    scenario(cp, ns)
    pol = policy(tmp_path, ns)
    predicted = simulate_on_snapshot(cluster, tmp_path, pol)
    assert len(predicted) == 4, predicted  # 2 duplicates, 1 of the anti pair, the gold pod
    proc = run_once(cluster, pol)
    try:
        wait_for(lambda: gone_or_terminating(cp, ns) == predicted, "evictions", timeout=30)
    except AssertionError as e:
        raise AssertionError(f"{e}\ndesched said:\n{proc.stderr}") from None


def test_cron_expression_runs_the_first_cycle_at_its_time_not_at_start(
    cluster: Cluster, tmp_path: Path
) -> None:
    """--descheduling-interval-cron-expression (Volcano's flag) in a live run: the process starts,
    serves, says when its first cycle is, runs nothing before then and evicts at that time."""
    cp = cluster.cp
    ns = new_namespace(cp, "cron")
    scenario(cp, ns)
    d = DeschedProcess(
        cluster.kubeconfig,
        tmp_path,
        policy(tmp_path, ns),
        "--descheduling-interval-cron-expression",
        "* * * * *",
        "--descheduling-interval-cron-time-zone",
        "Europe/Paris",
    )
    try:
        found = wait_for(
            lambda: re.search(r"next cycle at (\S+) \('\* \* \* \* \*' \(Europe/Paris\)\)", d.text()),
            "the announced time of the first cycle",
            timeout=60,
        )
        when = datetime.fromisoformat(found.group(1))
        assert when.second == 0 and when.utcoffset() in (timedelta(hours=1), timedelta(hours=2)), when
        # nothing before the time (checked until a second before it)
        while datetime.now(UTC) < when - timedelta(seconds=1):
            assert d.cycles() == 0 and gone_or_terminating(cp, ns) == set(), d.text()
            time.sleep(0.5)
        wait_for(lambda: d.cycles() >= 1, "the first cycle, at its time", timeout=75)
        assert datetime.now(UTC) >= when
        wait_for(lambda: len(gone_or_terminating(cp, ns)) == 4, "its evictions", timeout=30)
        # and it announces the next one, a minute on
        nxt = re.findall(r"next cycle at (\S+) ", d.text())
        assert len(nxt) >= 2 and datetime.fromisoformat(nxt[1]) - when == timedelta(minutes=1), nxt
    finally:
        assert d.stop() == 0, d.text()


def test_dry_run_changes_nothing(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "dry")
    scenario(cp, ns)
    proc = run_once(cluster, policy(tmp_path, ns), "--dry-run")
    assert proc.stderr.count("would evict pod") == 4, proc.stderr
    time.sleep(2)
    assert gone_or_terminating(cp, ns) == set()


def test_pdb_blocks_its_pods_and_nothing_else_breaks(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "pdb")
    scenario(cp, ns)
    cp.request(
        "POST",
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "dup"},
            "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "dup"}}},
        },
    )
    path = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/dup"

    def status_written() -> bool:
        # the disruption controller writes this when kube-controller-manager runs; else the test does
        pdb = cp.request("GET", path)
        st = pdb.get("status", {})
        current = st.get("observedGeneration") == pdb["metadata"].get("generation")
        if current and st.get("disruptionsAllowed") == 0:
            return True
        pdb["status"] = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "disruptionsAllowed": 0,
            "currentHealthy": 4,
            "desiredHealthy": 4,
            "expectedPods": 4,
        }
        status, _ = cp.raw_request("PUT", f"{path}/status", pdb)
        return status == 200

    wait_for(status_written, "the PDB's status", timeout=30)
    # simulate on a snapshot of the same cluster predicts the API's answers: the same evictions,
    # the same pods refused with 429
    snap = tmp_path / "pdb-snap.json"
    pol = policy(tmp_path, ns)
    assert run_desched("snapshot", "-o", str(snap), "--kubeconfig", str(cp.kubeconfig)).returncode == 0
    sim = run_desched("simulate", str(snap), "--policy", str(pol), "-o", "json", "--no-placement")
    assert sim.returncode == 0, sim.stderr
    doc = json.loads(sim.stdout)
    predicted = {e["name"] for e in doc["evictions"] if e["namespace"] == ns}
    predicted_refused = {r["name"] for r in doc["refused"] if r["namespace"] == ns}
    assert all(r["error"].startswith("429 ") for r in doc["refused"] if r["namespace"] == ns), doc
    proc = run_once(cluster, pol)
    assert "429" in proc.stderr and "disruption budget" in proc.stderr, proc.stderr
    evicted = wait_for(lambda: gone_or_terminating(cp, ns) or None, "evictions", timeout=30)
    time.sleep(1)
    evicted = gone_or_terminating(cp, ns)
    assert not any(n.startswith("dup-") for n in evicted)
    assert evicted == {"anti-0", "gold-0"} or evicted == {"anti-1", "gold-0"}, evicted
    assert predicted == evicted
    refused = {
        line.split(f"did not evict pod {ns}/", 1)[1].split(" ", 1)[0]
        for line in proc.stderr.splitlines()
        if f"did not evict pod {ns}/" in line and "429" in line
    }
    assert refused and predicted_refused == refused, (predicted_refused, refused)


def test_limits_hold(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "limits")
    scenario(cp, ns)
    proc = run_once(cluster, policy(tmp_path, ns, maxNoOfPodsToEvictPerNode=1, maxNoOfPodsToEvictTotal=2))
    time.sleep(2)
    evicted = gone_or_terminating(cp, ns)
    assert len(evicted) == 2, (evicted, proc.stderr)
    nodes = {"dup": "e2e-n1", "anti": "e2e-n2", "gold": "e2e-n3"}
    per_node = [nodes[n.split("-")[0]] for n in evicted]
    assert len(set(per_node)) == len(per_node), evicted


def test_metrics_and_events_use_upstream_names(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "metrics")
    scenario(cp, ns)
    d = DeschedProcess(cluster.kubeconfig, tmp_path, policy(tmp_path, ns), "--descheduling-interval", "1h")
    try:
        wait_for(lambda: d.cycles() >= 1, "one cycle", timeout=60)
        body = d.metrics()
        assert re.search(
            rf'descheduler_pods_evicted_total\{{namespace="{ns}",node="e2e-n1",profile="e2e",'
            r'result="success",strategy="RemoveDuplicates"\} 2\.0',
            body,
        ), body
        assert "descheduler_strategy_duration_seconds_bucket" in body and "descheduler_build_info" in body

        def events() -> list[dict[str, Any]]:
            items = cp.request("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
            return [e for e in items if e.get("reportingController") == "sigs.k8s.io.descheduler"]

        evs = wait_for(lambda: len(events()) >= 4 and events(), "eviction events", timeout=30)
        assert {e["reason"] for e in evs} == {
            "RemoveDuplicates",
            "RemovePodsViolatingInterPodAntiAffinity",
            "RemovePodsViolatingNodeAffinity",
        }
        assert all(e["action"] == "Descheduled" and e["type"] == "Normal" for e in evs)
        assert all(e["regarding"]["kind"] == "Pod" and "by sigs.k8s.io/descheduler" in e["note"] for e in evs)
    finally:
        assert d.stop() == 0, d.text()


def test_apiserver_restart_mid_watch_cache_recovers(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "restart")
    pol = single_plugin_policy(tmp_path, "RemovePodsViolatingNodeTaints", {"namespaces": {"include": [ns]}})
    d = DeschedProcess(cluster.kubeconfig, tmp_path, pol, "--descheduling-interval", "1s")
    try:
        wait_for(lambda: d.cycles() >= 1, "first cycle", timeout=60)
        cp.restart_apiserver()
        make_pod(cp, ns, "victim", "e2e-n3", owner="victim")
        make_pod(
            cp,
            ns,
            "tolerant",
            "e2e-n3",
            owner="tolerant",
            tolerations=[{"key": f"e2e-{ns}", "operator": "Exists", "effect": "NoSchedule"}],
        )
        CREATED[ns] = {"victim", "tolerant"}
        wait_running(cp, ns, 2)
        node = cp.request("GET", "/api/v1/nodes/e2e-n3")
        node["spec"].setdefault("taints", []).append({"key": f"e2e-{ns}", "effect": "NoSchedule"})
        cp.request("PUT", "/api/v1/nodes/e2e-n3", node)
        try:
            wait_for(lambda: gone_or_terminating(cp, ns) == {"victim"}, "the victim's eviction", timeout=60)
        finally:
            node = cp.request("GET", "/api/v1/nodes/e2e-n3")
            node["spec"]["taints"] = [t for t in node["spec"].get("taints", []) if t["key"] != f"e2e-{ns}"]
            cp.request("PUT", "/api/v1/nodes/e2e-n3", node)
        assert d.proc.poll() is None, d.text()
    finally:
        assert d.stop() == 0, d.text()


def test_leader_election_only_the_leader_evicts(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "leader")
    pol = single_plugin_policy(
        tmp_path, "PodLifeTime", {"namespaces": {"include": [ns]}, "maxPodLifeTimeSeconds": 1}
    )
    lease = lease_args()
    a = DeschedProcess(
        cluster.kubeconfig, tmp_path, pol, *lease, "--leader-elect-identity", "replica-a", name="a"
    )
    wait_for(lambda: "became the leader" in a.text(), "replica-a to lead", timeout=60)
    b = DeschedProcess(
        cluster.kubeconfig, tmp_path, pol, *lease, "--leader-elect-identity", "replica-b", name="b"
    )
    created = 0

    def feed(n: int) -> None:
        nonlocal created
        for _ in range(n):
            make_pod(cp, ns, f"p-{created}", NODES[created % 3], owner="feed")
            created += 1

    try:
        wait_for(lambda: b.cycles() == 0 and "serving" in b.text(), "replica-b up", timeout=60)
        feed(3)
        wait_for(lambda: a.text().count("evicted pod") >= 3, "replica-a to evict", timeout=60)
        assert "evicted pod" not in b.text()
        killed_at = time.time()
        assert a.stop(signal.SIGKILL) != 0
        feed(3)
        wait_for(lambda: "became the leader" in b.text(), "replica-b to take over", timeout=30)
        took_over = time.time() - killed_at
        assert took_over < 6 + 4, f"hand-over took {took_over:.1f}s, lease duration is 6s"
        wait_for(lambda: b.text().count("evicted pod") >= 3, "replica-b to evict", timeout=60)
        lease_obj = cp.request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/descheduler"
        )
        assert lease_obj["spec"]["holderIdentity"] == "replica-b"
        # never two at once: a's evictions all precede b's first one
        a_times = [line.split(" ")[1] for line in a.text().splitlines() if "evicted pod" in line]
        b_times = [line.split(" ")[1] for line in b.text().splitlines() if "evicted pod" in line]
        assert max(a_times) < min(b_times), (a_times, b_times)
    finally:
        a.stop(signal.SIGKILL)
        assert b.stop() == 0, b.text()
    lease_obj = cp.request("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/descheduler")
    assert not lease_obj["spec"].get("holderIdentity"), "a stopped leader releases the lease"


def test_deploy_manifests_are_valid(cluster: Cluster) -> None:
    """Every deploy/kubernetes manifest passes the apiserver's validation (server-side dry run)."""
    checked: set[tuple[str, str]] = set()
    for path in sorted((ROOT / "deploy" / "kubernetes").rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                try:
                    apply_manifest(cluster.cp, doc, dry_run=True)
                except ApiError as e:
                    raise AssertionError(
                        f"{path.relative_to(ROOT)}: {doc['kind']} {doc['metadata']['name']}: {e}"
                    ) from None
                checked.add((doc["kind"], doc["metadata"]["name"]))
    # the base, the three workloads and the three Components (anomaly, prometheus, workloads)
    assert {
        ("Job", "desched-job"),
        ("ClusterRole", "desched"),
        ("ClusterRole", "desched-workloads"),
    } <= checked
    assert len(checked) >= 15, sorted(checked)
