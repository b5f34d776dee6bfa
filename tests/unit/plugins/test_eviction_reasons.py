"""Every plugin's eviction reason carries its numbers, and they are the snapshot's: a pod's age
against the limit, a failed pod's reason and exit code, the restart count against the threshold,
a node's utilisation against the thresholds per resource, the skew against maxSkew, the pods in
an anti-affinity domain. Checked on a generated 300-node cluster with the benchmark policy, in
the JSON, the table (-o wide) and --explain."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from benchmarks.generator import NOW, ClusterSpec, cached_snapshot

from desched import cli
from desched.cluster.file_source import load_snapshot_file
from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import pods as k8s_pods

ROOT = Path(__file__).resolve().parents[3]
POLICY = str(ROOT / "benchmarks" / "policy-all.yaml")


@pytest.fixture(scope="module")
def cluster() -> tuple[str, ClusterSnapshot, dict[str, Any]]:
    path = str(cached_snapshot(ClusterSpec(nodes=300))[0])
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(["simulate", path, "--policy", POLICY, "--now", NOW, "--no-placement", "-o", "json"])
    assert code == 0
    return path, load_snapshot_file(path), json.loads(out.getvalue())


def by_plugin(doc: dict[str, Any], plugin: str) -> list[dict[str, Any]]:
    found = [e for e in doc["evictions"] if e["plugin"] == plugin]
    assert found, plugin
    return found


def pod_of(snap: ClusterSnapshot, e: dict[str, Any]) -> Any:
    pod = snap.pod(e["namespace"], e["name"])
    assert pod is not None
    return pod


def seconds(text: str) -> int:
    return sum(
        int(n) * {"d": 86400, "h": 3600, "m": 60, "s": 1}[u] for n, u in re.findall(r"([0-9]+)([dhms])", text)
    )


def test_podlifetime_says_the_age_and_the_limit(cluster: tuple[str, ClusterSnapshot, dict[str, Any]]) -> None:
    _, snap, doc = cluster
    now = datetime.fromisoformat(NOW.replace("Z", "+00:00"))
    for e in by_plugin(doc, "PodLifeTime"):
        m = re.fullmatch(
            r"PodLifeTime: pod age (\S+) \(([0-9]+)s\) > maxPodLifeTimeSeconds 7d \(604800s\)", e["reason"]
        )
        assert m, e["reason"]
        age = int((now - k8s_pods.pod_creation_time(pod_of(snap, e))).total_seconds())
        assert int(m[2]) == age > 604800
        assert abs(seconds(m[1]) - age) < 86400  # the two largest units


def test_removefailedpods_says_why_the_pod_failed(
    cluster: tuple[str, ClusterSnapshot, dict[str, Any]],
) -> None:
    _, snap, doc = cluster
    for e in by_plugin(doc, "RemoveFailedPods"):
        pod = pod_of(snap, e)
        assert e["reason"].startswith("RemoveFailedPods: pod failed: "), e["reason"]
        codes = [
            (cs.name, cs.state.terminated.exit_code, cs.state.terminated.reason)
            for cs in k8s_pods.container_statuses(pod, init=True)
            if cs.state is not None and cs.state.terminated is not None and cs.state.terminated.exit_code
        ]
        assert codes or pod.status.reason
        for name, code, why in codes:
            assert f"container {name} exit code {code}" + (f" ({why})" if why else "") in e["reason"]
        if pod.status.reason:
            assert pod.status.reason in e["reason"]
        assert re.search(r"; age \S+ \([0-9]+s\) > minPodLifetimeSeconds 1h \(3600s\)$", e["reason"]), e[
            "reason"
        ]


def test_too_many_restarts_says_the_count(cluster: tuple[str, ClusterSnapshot, dict[str, Any]]) -> None:
    _, snap, doc = cluster
    for e in by_plugin(doc, "RemovePodsHavingTooManyRestarts"):
        m = re.fullmatch(
            r"RemovePodsHavingTooManyRestarts: ([0-9]+) restarts >= podRestartThreshold 100", e["reason"]
        )
        assert m, e["reason"]
        restarts = sum(cs.restart_count for cs in k8s_pods.container_statuses(pod_of(snap, e), init=True))
        assert int(m[1]) == restarts >= 100


PERCENT = r"([a-z]+) ([0-9.]+)% (>|<=) ([0-9.]+)%"


def test_node_utilization_says_each_resource_against_its_threshold(
    cluster: tuple[str, ClusterSnapshot, dict[str, Any]],
) -> None:
    _, _, doc = cluster
    for plugin, sign, thresholds, tail in (
        (
            "LowNodeUtilization",
            ">",
            {"cpu": 50, "memory": 50, "pods": 50},
            "moving pods to under-utilized nodes",
        ),
        ("HighNodeUtilization", "<=", None, "packing its pods onto other nodes"),
    ):
        for e in by_plugin(doc, plugin):
            word = "over" if sign == ">" else "under"
            m = re.fullmatch(rf"node is {word}-utilized: (.+); {tail}", e["reason"])
            assert m, e["reason"]
            parts = [re.fullmatch(PERCENT, p) for p in m[1].split(", ")]
            assert parts and all(p is not None and p[3] == sign for p in parts), e["reason"]
            for p in parts:
                assert p is not None
                value, limit = float(p[2]), float(p[4])
                assert value > limit if sign == ">" else value <= limit
                if thresholds is not None:
                    assert limit == thresholds[p[1]]


def test_topology_spread_says_the_skew_and_max_skew(
    cluster: tuple[str, ClusterSnapshot, dict[str, Any]],
) -> None:
    _, _, doc = cluster
    for e in by_plugin(doc, "RemovePodsViolatingTopologySpreadConstraint"):
        m = re.match(
            r"skew ([0-9]+) > maxSkew ([0-9]+): domain \S+ has ([0-9]+) matching pods, \S+ has ([0-9]+), "
            r"ideal [0-9.]+ \(topology spread constraint topologyKey=\S+ maxSkew=\2 \w+\)$",
            e["reason"],
        )
        assert m, e["reason"]
        assert int(m[1]) == int(m[3]) - int(m[4]) > int(m[2])


def test_anti_affinity_says_the_pods_in_the_domain(
    cluster: tuple[str, ClusterSnapshot, dict[str, Any]],
) -> None:
    _, snap, doc = cluster
    for e in by_plugin(doc, "RemovePodsViolatingInterPodAntiAffinity"):
        m = re.fullmatch(
            r"pod violates its required inter-pod anti-affinity: ([0-9]+) other matching pod\(s\) in its "
            r"topology domain (\S+)=(\S+)",
            e["reason"],
        )
        assert m, e["reason"]
        node = snap.node(e["node"])
        assert node is not None and (node.metadata.labels or {}).get(m[2]) == m[3]
        assert int(m[1]) >= 1


def test_table_and_explain_carry_the_same_numbers(
    cluster: tuple[str, ClusterSnapshot, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, _, doc = cluster
    restarts = by_plugin(doc, "RemovePodsHavingTooManyRestarts")[0]
    lnu = by_plugin(doc, "LowNodeUtilization")[0]
    key = f"{restarts['namespace']}/{restarts['name']}"
    args = [
        "simulate",
        path,
        "--policy",
        POLICY,
        "--now",
        NOW,
        "--no-placement",
        "-o",
        "wide",
        "--explain",
        key,
    ]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert f"   {restarts['reason']}\n" in out and f"   {lnu['reason']}\n" in out
    explain = out[out.index(f"Explain {key}") :]
    assert re.search(r"RemovePodsHavingTooManyRestarts +evicted +" + re.escape(restarts["reason"]), explain)
