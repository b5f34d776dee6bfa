"""The evictionPolicy against a real kube-apiserver: ``desched run`` skips the eviction a
per-workload budget forbids, says why on the pod (an ``EvictionSkipped`` Event) and in its log
(``--v=4``), and evicts what the budget allows; the same policy without the block evicts both.

Reuses tests/e2e/test_live_run.py's cluster (kwok nodes, desched under the deploy/ ServiceAccount
and ClusterRole only, so the Events prove the manifests allow them).
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tests.e2e import test_live_run
from tests.e2e.support import DeschedProcess, lease_args, single_plugin_policy, wait_for
from tests.e2e.test_live_run import (
    CREATED,
    Cluster,
    gone_or_terminating,
    make_pod,
    new_namespace,
    policy,
    run_once,
    scenario,
    wait_running,
)

#: the live-run module's cluster fixture (kwok nodes e2e-n1..3, desched's ServiceAccount kubeconfig)
cluster = test_live_run.cluster


def desched_events(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    items = cluster.cp.request("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
    return [e for e in items if e.get("reportingController") == "sigs.k8s.io.descheduler"]


def test_run_skips_what_the_workload_budget_forbids_and_says_why(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "budget")
    # four pods of one owner on e2e-n1: RemoveDuplicates wants two of them gone
    scenario(cp, ns)
    proc = run_once(cluster, policy(tmp_path, ns, evictionPolicy={"maxUnavailablePerWorkload": 1}), "--v=4")
    time.sleep(2)
    evicted = gone_or_terminating(cp, ns)
    dups = sorted(n for n in evicted if n.startswith("dup-"))
    assert len(dups) == 1, (evicted, proc.stderr)
    # the other workloads (one pod each, budget 1) are evicted as without the block
    assert {"anti-0", "gold-0"} <= evicted or {"anti-1", "gold-0"} <= evicted, evicted

    evs = wait_for(
        lambda: [e for e in desched_events(cluster, ns) if e["reason"] == "EvictionSkipped"],
        "an EvictionSkipped event",
        timeout=30,
    )
    assert len(evs) == 1, evs
    skipped = evs[0]
    assert skipped["type"] == "Normal" and skipped["action"] == "Descheduled"
    assert skipped["regarding"]["kind"] == "Pod"
    name = skipped["regarding"]["name"]
    assert name.startswith("dup-") and name not in evicted
    assert skipped["note"] == (
        f"pod eviction from e2e-n1 node by sigs.k8s.io/descheduler skipped (max_unavailable_per_workload): "
        f"ConfigMap {ns}/dup has 1 of 4 pod(s) unavailable; evicting this one would make 2 "
        "(maxUnavailablePerWorkload: 1 = 1)"
    )
    assert (
        f"eviction skipped pod={ns}/{name} node=e2e-n1 profile=e2e plugin=RemoveDuplicates "
        "reason=max_unavailable_per_workload " in proc.stderr
    ), proc.stderr
    # and the cycle's summary line counts it
    assert re.search(r"cycle done .* evictionsSkipped=1 ", proc.stderr), proc.stderr


def test_run_without_the_block_evicts_both_duplicates(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "nobudget")
    scenario(cp, ns)
    proc = run_once(cluster, policy(tmp_path, ns))
    time.sleep(2)
    evicted = gone_or_terminating(cp, ns)
    assert len([n for n in evicted if n.startswith("dup-")]) == 2, (evicted, proc.stderr)
    assert not [e for e in desched_events(cluster, ns) if e["reason"] == "EvictionSkipped"]


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {"e2e/live": "true"},
                    "tolerations": [
                        {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "c",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def available(cp: Any, ns: str) -> int:
    pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    return sum(
        1
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and p.get("status", {}).get("phase") == "Running"
        and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
    )


def test_wait_for_replacement_evicts_a_deployment_one_pod_at_a_time(cluster: Cluster, tmp_path: Path) -> None:
    """kube-controller-manager re-creates each evicted pod, kube-scheduler binds it, kwok makes it
    Ready; desched (every 2 s, PodLifeTime evicting every pod older than 1 s) evicts the next pod
    of the Deployment only once the last one's replacement is Ready: never two in one cycle, never
    fewer than 2 of 3 pods available, and the sequence goes on."""
    cp = cluster.cp
    cp.start_scheduler()
    cp.start_controller_manager()
    ns = new_namespace(cp, "waitrepl")
    cp.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", deployment("web", 3))
    wait_for(lambda: available(cp, ns) == 3, "3 Ready pods of the Deployment", timeout=90)
    path = tmp_path / "wait.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "nodeSelector": "e2e/live=true",
                "evictionPolicy": {"waitForReplacement": {"timeout": "5m"}},
                "profiles": [
                    {
                        "name": "e2e",
                        "pluginConfig": [
                            {
                                "name": "PodLifeTime",
                                "args": {"maxPodLifeTimeSeconds": 1, "namespaces": {"include": [ns]}},
                            }
                        ],
                        "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
                    }
                ],
            }
        )
    )
    d = DeschedProcess(cluster.kubeconfig, tmp_path, path, "--descheduling-interval", "2s")
    lowest = 3
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            lowest = min(lowest, available(cp, ns))
            evictions = [e for e in desched_events(cluster, ns) if e["reason"] == "PodLifeTime"]
            if len(evictions) >= 4:
                break
            time.sleep(0.2)
        skipped = d.sample(
            "descheduler_evictions_skipped_total",
            f'{{namespace="{ns}",profile="e2e",reason="wait_for_replacement",strategy="PodLifeTime"}}',
        )
    finally:
        assert d.stop() == 0, d.text()
    evictions = [e for e in desched_events(cluster, ns) if e["reason"] == "PodLifeTime"]
    assert len(evictions) >= 4, (evictions, d.text()[-3000:])
    assert lowest >= 2, d.text()[-3000:]
    # one eviction per cycle at most: the cycles are 2 s apart, a cycle's evictions milliseconds
    times = sorted(datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")) for e in evictions)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert min(gaps) > 1.0, gaps
    assert skipped is not None and skipped >= 2, d.text()[-3000:]
    skips = [e for e in desched_events(cluster, ns) if e["reason"] == "EvictionSkipped"]
    assert skips
    assert all("(wait_for_replacement): ReplicaSet " in e["note"] for e in skips), skips[0]["note"]


def lifetime_policy(tmp: Path, ns: str, **top: Any) -> Path:
    return single_plugin_policy(
        tmp / f"lifetime-{ns}-{len(top)}.yaml", ns, "PodLifeTime", {"maxPodLifeTimeSeconds": 1}, **top
    )


def test_predictive_skips_a_pod_kube_scheduler_would_put_back_on_its_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A Deployment's pod that only e2e-n2 accepts (nodeSelector e2e/tier=gold): upstream-compatible
    mode evicts it and kube-scheduler binds the replacement to e2e-n2 again; predictive mode skips
    it, saying why."""
    cp = cluster.cp
    cp.start_scheduler()
    cp.start_controller_manager()
    ns = new_namespace(cp, "predict")
    gold = deployment("gold", 1)
    gold["spec"]["template"]["spec"]["nodeSelector"] = {"e2e/live": "true", "e2e/tier": "gold"}
    cp.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", gold)
    wait_for(lambda: available(cp, ns) == 1, "the gold pod Ready", timeout=90)

    def pods() -> list[dict[str, Any]]:
        items = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    (first,) = pods()
    assert first["spec"]["nodeName"] == "e2e-n2"
    time.sleep(1.5)  # older than maxPodLifeTimeSeconds

    proc = run_once(cluster, lifetime_policy(tmp_path, ns, evictionPolicy={"predictive": True}), "--v=4")
    evs = wait_for(
        lambda: [e for e in desched_events(cluster, ns) if e["reason"] == "EvictionSkipped"],
        "an EvictionSkipped event",
        timeout=30,
    )
    assert evs[0]["regarding"]["name"] == first["metadata"]["name"]
    assert evs[0]["note"].endswith("skipped (predicted_same_node): its replacement would land back on e2e-n2")
    assert [p["metadata"]["uid"] for p in pods()] == [first["metadata"]["uid"]], proc.stderr

    # upstream-compatible: evicted, and kube-scheduler puts the replacement back on e2e-n2
    run_once(cluster, lifetime_policy(tmp_path, ns))
    replacement = wait_for(
        lambda: [
            p
            for p in pods()
            if p["metadata"]["uid"] != first["metadata"]["uid"] and p["spec"].get("nodeName")
        ],
        "the replacement bound",
        timeout=60,
    )
    assert replacement[0]["spec"]["nodeName"] == "e2e-n2"


STATE = "/api/v1/namespaces/kube-system/configmaps/desched-safety-state"


def stored_state(cp: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(cp.request("GET", STATE)["data"]["state.json"])
    return doc


def kept(cp: Any, section: str) -> list[dict[str, Any]]:
    """A section of the kept state, [] while there is none."""
    status, body = cp.raw_request("GET", STATE)
    if status == 404:
        return []
    doc = json.loads(json.loads(body)["data"]["state.json"])
    entries: list[dict[str, Any]] = doc[section]
    return entries


def skip_reasons(cluster: Cluster, ns: str, but: frozenset[str] = frozenset()) -> dict[str, set[str]]:
    """pod name -> the reasons of its EvictionSkipped Events (but those named in ``but``)"""
    out: dict[str, set[str]] = {}
    for e in desched_events(cluster, ns):
        if e["reason"] == "EvictionSkipped" and e["metadata"]["name"] not in but:
            reason = e["note"].split("skipped (", 1)[1].split(")", 1)[0]
            out.setdefault(e["regarding"]["name"], set()).add(reason)
    return out


def event_names(cluster: Cluster, ns: str) -> frozenset[str]:
    return frozenset(e["metadata"]["name"] for e in desched_events(cluster, ns))


def test_a_restart_keeps_the_rate_limit_and_cooldown_state(cluster: Cluster, tmp_path: Path) -> None:
    """Three one-shot runs (a CronJob's; a dry run before them keeps nothing): the first evicts
    the one pod the namespace's bucket holds and saves the state in the ConfigMap; the second, a
    new process, evicts nothing (the bucket is still empty, the first pod's workload cools down);
    with the ConfigMap deleted the same run evicts again, so the state, and nothing else, held it
    back."""
    cp = cluster.cp
    ns = new_namespace(cp, "restart")
    # PodLifeTime evicts the oldest first: web-0, then web-1, then api-0
    make_pod(cp, ns, "web-0", "e2e-n1", owner="web")
    make_pod(cp, ns, "web-1", "e2e-n1", owner="web")
    time.sleep(1.1)
    make_pod(cp, ns, "api-0", "e2e-n3", owner="api")
    CREATED[ns] = {"web-0", "web-1", "api-0"}
    wait_running(cp, ns, 3)
    time.sleep(1.5)  # all older than maxPodLifeTimeSeconds
    cp.raw_request("DELETE", STATE)
    rules = {
        "cooldown": {"base": "10m"},
        "rateLimits": {"namespace": {"evictionsPerMinute": 0.2, "burst": 1}},
    }
    path = lifetime_policy(tmp_path, ns, evictionPolicy=rules)

    # a dry run evicts nothing, so it keeps nothing either
    dry = run_once(cluster, path, "--dry-run")
    assert "would evict" in dry.stderr and gone_or_terminating(cp, ns) == set(), dry.stderr
    assert cp.raw_request("GET", STATE)[0] == 404

    first = run_once(cluster, path)
    assert gone_or_terminating(cp, ns) == {"web-0"}, first.stderr
    assert "the safety state is kept in ConfigMap kube-system/desched-safety-state" in first.stderr
    state = stored_state(cp)
    assert state["version"] == 1
    assert [m["workload"] for m in state["moves"] if m["workload"][0] == ns] == [[ns, "ConfigMap", "web"]]
    (bucket,) = [b for b in state["buckets"] if b["key"] == ns]
    assert bucket["scope"] == "namespace" and bucket["tokens"] < 0.1, bucket

    # in that cycle the bucket held back the others (the cooldown counts earlier cycles only)
    assert skip_reasons(cluster, ns) == {"web-1": {"rate_limit"}, "api-0": {"rate_limit"}}
    before = event_names(cluster, ns)

    second = run_once(cluster, path)
    assert "loaded the safety state from ConfigMap kube-system/desched-safety-state" in second.stderr
    assert gone_or_terminating(cp, ns) == {"web-0"}, second.stderr
    reasons = wait_for(
        lambda: (r := skip_reasons(cluster, ns, before)) and len(r) == 2 and r,
        "the second run's skip events",
        timeout=30,
    )
    assert reasons == {"web-1": {"cooldown"}, "api-0": {"rate_limit"}}, reasons

    # without the kept state, the very same run evicts (web-1, the oldest; the bucket holds one)
    cp.request("DELETE", STATE)
    third = run_once(cluster, path)
    assert "no safety state in ConfigMap kube-system/desched-safety-state yet" in third.stderr
    assert gone_or_terminating(cp, ns) == {"web-0", "web-1"}, third.stderr


def test_a_replacement_that_never_becomes_ready_holds_the_sequence_until_the_timeout(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A 3-replica Deployment on nodes of its own; once its pods are Ready the nodes are tainted, so
    every replacement stays Pending (never Ready). With waitForReplacement (timeout 6 s) desched
    (every 2 s; PodLifeTime wants every pod gone) evicts one pod, then waits out the timeout before
    each next one: the evictions are at least ~6 s apart (without the rule: all three in the first
    cycle) and at most timeout + a couple of cycles; the waits are in the kept state."""
    cp = cluster.cp
    cp.start_scheduler()
    cp.start_controller_manager()
    ns = new_namespace(cp, "neverready")
    # two nodes of its own (desched skips a cycle with fewer than two ready nodes, as upstream)
    nodes = [f"wr-{ns.rsplit('-', 1)[1]}-{i}" for i in range(2)]
    for node in nodes:
        cp.create_fake_node(node, cpu="8", memory="32Gi", labels={"e2e/wr": ns})
    try:
        web = deployment("web", 3)
        web["spec"]["template"]["spec"]["nodeSelector"] = {"e2e/wr": ns}
        cp.request("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", web)
        wait_for(lambda: available(cp, ns) == 3, "3 Ready pods of the Deployment", timeout=90)
        for node in nodes:
            taint_node(cp, node, {"key": "e2e/full", "value": "true", "effect": "NoSchedule"})
        timeout = 6.0
        path = tmp_path / "never-ready.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "descheduler/v1alpha2",
                    "kind": "DeschedulerPolicy",
                    "nodeSelector": f"e2e/wr={ns}",
                    "evictionPolicy": {"waitForReplacement": {"timeout": "6s"}},
                    "profiles": [
                        {
                            "name": "e2e",
                            "pluginConfig": [
                                {
                                    "name": "PodLifeTime",
                                    "args": {"maxPodLifeTimeSeconds": 1, "namespaces": {"include": [ns]}},
                                }
                            ],
                            "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
                        }
                    ],
                }
            )
        )
        d = DeschedProcess(cluster.kubeconfig, tmp_path, path, "--descheduling-interval", "2s")
        waits: list[dict[str, Any]] = []
        try:

            def evictions() -> list[dict[str, Any]]:
                return [e for e in desched_events(cluster, ns) if e["reason"] == "PodLifeTime"]

            wait_for(lambda: len(evictions()) >= 1, "the first eviction", timeout=30)
            waits = wait_for(
                lambda: [w for w in kept(cp, "waiting") if w["workload"][0] == ns],
                "the wait in the kept state",
                timeout=10,
            )
            wait_for(lambda: len(evictions()) >= 3, "three evictions", timeout=45)
        finally:
            assert d.stop() == 0, d.text()
        times = sorted(datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")) for e in evictions())
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
        assert len(times) == 3, (times, d.text()[-3000:])
        # the timeout is measured between cycle starts; an Event follows its eviction by up to ~1 s
        assert all(timeout - 1.0 <= g <= timeout + 2 * 2.0 + 4.0 for g in gaps), (gaps, d.text()[-3000:])
        assert available(cp, ns) == 0  # no replacement ever became Ready
        (wait,) = waits
        assert wait["workload"][1] == "ReplicaSet" and wait["before"] == 3, wait
        skips = [e for e in desched_events(cluster, ns) if e["reason"] == "EvictionSkipped"]
        assert skips and all("(wait_for_replacement): ReplicaSet " in e["note"] for e in skips), skips
    finally:
        for node in nodes:
            cp.raw_request("DELETE", f"/api/v1/nodes/{node}")


def taint_node(cp: Any, name: str, taint: dict[str, str]) -> None:
    """GET, add the taint, PUT, again on 409 (kwok writes the node's status meanwhile)."""
    for _ in range(20):
        node = cp.request("GET", f"/api/v1/nodes/{name}")
        node["spec"]["taints"] = [*node["spec"].get("taints", []), taint]
        status, _ = cp.raw_request("PUT", f"/api/v1/nodes/{name}", node)
        if status == 200:
            return
        assert status == 409, status
        time.sleep(0.1)
    raise AssertionError(f"node {name}: could not add the taint (409 every time)")


def test_a_new_leader_keeps_the_cooldown_of_the_old_one(cluster: Cluster, tmp_path: Path) -> None:
    """Two replicas with leader election: the leader evicts one pod of a workload (cooldown 10m,
    one eviction per workload and cycle) and is killed; the other replica, which never evicted
    anything itself (its own memory is empty), takes the lease, loads the kept state and holds the
    workload's other pod back (cooldown) cycle after cycle."""
    cp = cluster.cp
    ns = new_namespace(cp, "newleader")
    path = lifetime_policy(
        tmp_path, ns, evictionPolicy={"cooldown": {"base": "10m"}, "maxEvictionsPerWorkload": 1}
    )
    lease = lease_args()
    a = DeschedProcess(
        cluster.kubeconfig, tmp_path, path, *lease, "--leader-elect-identity", "state-a", name="a"
    )
    started = [a]
    try:
        wait_for(lambda: "became the leader" in a.text(), "replica a to lead", timeout=60)
        b = DeschedProcess(
            cluster.kubeconfig, tmp_path, path, *lease, "--leader-elect-identity", "state-b", name="b"
        )
        started.append(b)
        wait_for(lambda: "serving" in b.text(), "replica b up", timeout=60)
        make_pod(cp, ns, "web-0", "e2e-n1", owner="web")
        make_pod(cp, ns, "web-1", "e2e-n3", owner="web")
        CREATED[ns] = {"web-0", "web-1"}
        wait_for(lambda: len(gone_or_terminating(cp, ns)) == 1, "replica a to evict one pod", timeout=60)
        wait_for(
            lambda: [m for m in kept(cp, "moves") if m["workload"] == [ns, "ConfigMap", "web"]],
            "the move in the kept state",
            timeout=20,
        )
        assert a.stop(signal.SIGKILL) != 0
        (left,) = {"web-0", "web-1"} - gone_or_terminating(cp, ns)
        wait_for(lambda: "became the leader" in b.text(), "replica b to take over", timeout=30)
        wait_for(
            lambda: "loaded the safety state from ConfigMap kube-system/desched-safety-state" in b.text(),
            "replica b to load the kept state",
            timeout=30,
        )
        b.wait_cycles(3)
        assert left not in gone_or_terminating(cp, ns), b.text()[-3000:]
        assert "evicted pod" not in b.text()
        skipped = b.sample(
            "descheduler_evictions_skipped_total",
            f'{{namespace="{ns}",profile="e2e",reason="cooldown",strategy="PodLifeTime"}}',
        )
        assert skipped is not None and skipped >= 3, b.text()[-3000:]
    finally:
        a.stop(signal.SIGKILL)
        if len(started) == 2:
            assert started[1].stop() == 0, started[1].text()
