"""The known differences of allowances.json, each traced to the upstream rule that makes it
(docs/conformance.md, "Known differences"): the matrix's snapshot is changed so that the rule no
longer applies, and desched and upstream then decide alike."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.differential.envelope import Eviction, run_desched, run_upstream, upstream_binary
from tests.differential.matrix import POLICIES, snapshot

NOW = "2026-11-21T12:00:00Z"
RUNS = 10


@pytest.fixture(scope="module")
def upstream() -> str:
    return upstream_binary()


def _items(shape: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(snapshot(shape, 1).read_text())
    return doc


def _write(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _named(evictions: list[Eviction], prefix: str) -> list[str]:
    return sorted(e.name for e in evictions if e.name.startswith(prefix))


def test_topology_spread_pod_outside_node_inclusion_policy(upstream: str, tmp_path: Path) -> None:
    """many-s1: profile-bff spreads 5 pods over zones with DoNotSchedule and requires
    ``node-pool In [compute]``; one pod (m6lhf) sits in zone a on a node relabelled
    ``compute-retired``. Upstream's Balance counts it into zone a (its counting loop does not
    apply matchNodeInclusionPolicies): 1/2/2, balanced, nothing evicted. desched, as
    kube-scheduler, does not count it: 0/2/2, one pod of zone c goes (mgc98). Without that pod,
    upstream sees 0/2/2 too and evicts one pod of zone b or c in every run."""
    policy = POLICIES / "topology-spread.yaml"
    snap = snapshot("many", 1)
    app = "profile-bff-2tv4x6sxjc-"
    assert _named(run_desched(policy, snap, NOW), app) == [app + "mgc98"]
    assert all(_named(run, app) == [] for run in run_upstream(upstream, policy, snap, NOW, RUNS))

    doc = _items("many")
    doc["items"] = [i for i in doc["items"] if i["metadata"]["name"] != app + "m6lhf"]
    without = _write(doc, tmp_path / "without-m6lhf.json")
    assert _named(run_desched(policy, without, NOW), app) == [app + "mgc98"]
    runs = run_upstream(upstream, policy, without, NOW, RUNS)
    assert all(len(_named(run, app)) == 1 for run in runs), [_named(r, app) for r in runs]


@pytest.mark.parametrize("kind", ["DoNotSchedule", "ScheduleAnyway"])
def test_topology_spread_each_constraint_alone_as_upstream(upstream: str, tmp_path: Path, kind: str) -> None:
    """dense-s1: refund-renderer and tracking-ranker each declare a zone (DoNotSchedule) and a
    hostname (ScheduleAnyway) constraint. Balanced one kind at a time, desched evicts as many of
    their pods, from the same nodes, as upstream in every run; the differences of the matrix
    case come from planning the two together (upstream plans each on the original counts, and
    its random order picks overlap less than desched's)."""
    text = (POLICIES / "topology-spread.yaml").read_text()
    policy = tmp_path / f"only-{kind}.yaml"
    both = "      constraints:\n      - DoNotSchedule\n      - ScheduleAnyway\n"
    assert both in text
    policy.write_text(text.replace(both, f"      constraints: [{kind}]\n"))
    snap = snapshot("dense", 1)
    mine = run_desched(policy, snap, NOW)
    runs = run_upstream(upstream, policy, snap, NOW, RUNS)
    for app in ("refund-renderer-rrrd7zcmv-", "tracking-ranker-z7k4z7g6m-"):
        count = len(_named(mine, app))
        assert count > 0
        assert {len(_named(run, app)) for run in runs} == {count}, app
        if kind == "ScheduleAnyway":  # (one hostname domain per node: the same nodes give)
            nodes = Counter(e.node for e in mine if e.name.startswith(app))
            assert all(Counter(e.node for e in run if e.name.startswith(app)) == nodes for run in runs), app


def test_podlifetime_under_limits_follows_earlier_plugins_choices(upstream: str, tmp_path: Path) -> None:
    """wide-s1/nine-plugins-limits: desched's PodLifeTime evicts session-auth hf6cj because its
    NodeTaints and NodeAffinity evictions before it (ties broken by namespace and name) took no
    search-prod pod, leaving that namespace's limit of 4 for PodLifeTime's oldest-first list and
    session-auth's PDB budget unspent. Where upstream's pods on those four nodes are only the ones
    desched picks (the others made mirror pods, which no evictor takes), upstream makes the same
    choices and evicts hf6cj in every run."""
    policy = POLICIES / "nine-plugins-limits.yaml"
    pod = "session-auth-8jwd8x7th-hf6cj"
    mine = run_desched(policy, snapshot("wide", 1), NOW)
    assert pod in _named(mine, pod)
    earlier = {
        e.name
        for e in mine
        if e.plugin in ("RemovePodsViolatingNodeTaints", "RemovePodsViolatingNodeAffinity")
    }
    nodes = {e.node for e in mine if e.name in earlier}
    assert len(earlier) == 8 and len(nodes) == 4
    assert not any(e.namespace == "search-prod" for e in mine if e.name in earlier)

    doc = _items("wide")
    for item in doc["items"]:
        on_node = item["kind"] == "Pod" and item["spec"].get("nodeName") in nodes
        if on_node and item["metadata"]["name"] not in earlier:
            item["metadata"].setdefault("annotations", {})["kubernetes.io/config.mirror"] = "forced"
    forced = _write(doc, tmp_path / "forced.json")
    assert pod in _named(run_desched(policy, forced, NOW), pod)
    runs = run_upstream(upstream, policy, forced, NOW, RUNS)
    assert all(_named(run, pod) == [pod] for run in runs)
    assert all({e.name for e in run if e.name in earlier} == earlier for run in runs)
