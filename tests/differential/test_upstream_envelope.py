"""The upstream differential tier (docs/conformance.md): desched's decisions against upstream
v0.36.0's own code run many times on the same snapshot and policy (hack/upstream-diff)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.builders import list_doc, namespace_doc, node_doc, pdb_doc, pod_doc, taint
from tests.differential import conftest
from tests.differential.__main__ import summary
from tests.differential.envelope import (
    Difference,
    Eviction,
    Verdict,
    judge,
    run_desched,
    run_upstream,
    upstream_binary,
)
from tests.differential.matrix import FAST, allowances, allowed_for, found, full_matrix, run_case, unlisted

NOW = "2026-11-21T12:00:00Z"
RS = ("ReplicaSet", "web")
DB = ("ReplicaSet", "db")


@pytest.fixture(scope="module")
def upstream() -> str:
    return upstream_binary()


def ev(name: str, node: str = "n1", plugin: str = "P", namespace: str = "default") -> Eviction:
    return Eviction(namespace, name, node, plugin, "p")


# ------------------------------------------------------------------------------ the judgement


def test_judge_without_limits_flags_never_and_missed() -> None:
    upstream = [[ev("a"), ev("b")], [ev("a"), ev("c")], [ev("a"), ev("b")]]
    verdict = judge("c", [ev("b"), ev("d")], upstream, {})
    assert [(d.kind, d.subject) for d in verdict.differences] == [
        ("never", "default/d"),  # upstream evicts d in no run
        ("missed", "default/a"),  # upstream evicts a in every run
    ]  # (and P's count, 2, is upstream's)
    assert (verdict.runs, verdict.desched, verdict.upstream_min, verdict.upstream_max) == (3, 2, 2, 2)
    # b and c are each evicted in some runs only: either choice is inside the envelope
    assert judge("c", [ev("a"), ev("c")], upstream, {}).differences == []
    # ... but not neither of them: the plugin evicts fewer pods than upstream's in any run
    verdict = judge("c", [ev("a")], upstream, {})
    assert [(d.kind, d.plugin, d.detail) for d in verdict.differences] == [
        ("count", "P", "desched 1, upstream 2..2")
    ]


def test_judge_with_limits_uses_the_unlimited_union_and_the_counts() -> None:
    limits = {"node": 1, "total": 2}
    limited = [[ev("a", "n1"), ev("b", "n2")], [ev("c", "n1"), ev("b", "n2")]]
    unlimited = [[ev("a", "n1"), ev("b", "n2"), ev("c", "n1"), ev("d", "n2")]]
    # d is never evicted under the limits, but is without them: inside the envelope
    assert judge("c", [ev("a", "n1"), ev("d", "n2")], limited, limits, unlimited).differences == []
    verdict = judge("c", [ev("a", "n1"), ev("c", "n1"), ev("e", "n2")], limited, limits, unlimited)
    assert sorted((d.kind, d.subject) for d in verdict.differences) == [
        ("count", "node n1"),  # two on n1 under a per-node limit of 1
        ("count", "total"),  # three where upstream makes two
        ("never", "default/e"),
    ]


# ------------------------------------------------------------------- the oracle's eviction API


def test_upstream_runner_answers_evictions_as_the_eviction_subresource(upstream: str, tmp_path: Path) -> None:
    """Three ready web pods on a tainted node under a PDB allowing one disruption, a Pending one
    (no PDB check), and one pod two PDBs select (500): upstream evicts one ready web pod and the
    Pending one; the rest are refused with the apiserver's codes."""

    def web(name: str) -> dict[str, object]:
        return pod_doc(name, node="n1", uid=f"uid-{name}", labels={"app": "web"}, ready=True, owner=RS)

    budget = {
        "observedGeneration": 1,
        "disruptionsAllowed": 1,
        "currentHealthy": 3,
        "desiredHealthy": 2,
        "expectedPods": 3,
    }
    doc = list_doc(
        namespace_doc("default"),
        node_doc("n1", taints=[taint("dedicated", "x")]),
        node_doc("n2"),
        web("w1"), web("w2"), web("w3"),
        pod_doc("pending", node="n1", uid="uid-pending", labels={"app": "web"}, phase="Pending", owner=RS),
        pod_doc("db", node="n1", uid="uid-db", labels={"app": "db", "tier": "x"}, ready=True, owner=DB),
        pdb_doc("web", generation=1, min_available=2, status=budget),
        pdb_doc("db1", generation=1, selector={"app": "db"}, max_unavailable=1, status=budget),
        pdb_doc("db2", generation=1, selector={"tier": "x"}, max_unavailable=1, status=budget),
    )  # fmt: skip
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(doc))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: t\n"
        "  pluginConfig:\n  - name: DefaultEvictor\n  - name: RemovePodsViolatingNodeTaints\n"
        "  plugins:\n    deschedule:\n      enabled: [RemovePodsViolatingNodeTaints]\n"
    )
    out = subprocess.run(
        [upstream, "--policy", str(policy), "--snapshot", str(snap), "--now", NOW, "--runs", "1"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    refused = json.loads(out.stdout)["runs"][0]["refused"]
    assert sorted((r["name"], r["code"]) for r in refused if r["name"] == "db") == [("db", 500)]
    assert sorted(r["code"] for r in refused if r["name"] != "db") == [429, 429]
    runs = run_upstream(upstream, policy, snap, NOW, 5)
    assert len(runs) == 5
    for run in runs:
        names = sorted(e.name for e in run)
        assert len(names) == 2 and "pending" in names, names
        assert {e.plugin for e in run} == {"RemovePodsViolatingNodeTaints"}
        assert {e.node for e in run} == {"n1"}
    # desched decides the same: one web pod within the budget, the Pending one
    mine = sorted(e.name for e in run_desched(policy, snap, NOW))
    assert len(mine) == 2 and "pending" in mine and {"w1", "w2", "w3"} & set(mine), mine
    assert judge("oracle", run_desched(policy, snap, NOW), runs, {}).differences == []


def test_upstream_runner_refuses_a_policy_upstream_cannot_run(upstream: str, tmp_path: Path) -> None:
    """An enabled plugin without pluginConfig is refused by upstream's profile builder: the runner
    says so in one line, exit 2, rather than reporting an empty cycle."""
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps(list_doc(node_doc("n1"), node_doc("n2"))))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: t\n"
        "  plugins:\n    deschedule:\n      enabled: [RemovePodsViolatingNodeTaints]\n"
    )
    with pytest.raises(RuntimeError, match='unable to find "RemovePodsViolatingNodeTaints" plugin config'):
        run_upstream(upstream, policy, snap, NOW, 1)


# --------------------------------------------------------------------------- the fast subset


def test_fast_matrix_inside_upstreams_envelope(upstream: str) -> None:
    """Every case of the fast subset: 0 decisions outside upstream's envelope beyond the known,
    documented ones of allowances.json (and each of those still found: a fixed one must go)."""
    verdicts = [run_case(upstream, case) for case in FAST]
    lines, _ = summary(verdicts, FAST)
    conftest.FIGURES.extend(lines)
    differences = [d for v in verdicts for d in v.differences]
    have, allowed, required = found(differences), allowed_for(FAST), allowed_for(FAST, required=True)
    assert unlisted(have, allowed) == [], "\n".join(d.line() for d in differences)
    assert required - have == set(), f"fixed, remove from allowances.json: {sorted(required - have)}"


def test_summary_counts_new_and_fixed_differences_against_allowances() -> None:
    """A difference allowances.json does not list is a mismatch; so is a listed one (not marked
    ``sometimes``) that is no longer found."""
    listed = next(a for a in allowances() if not a.get("sometimes"))
    case = next(c for c in full_matrix() if c.name == listed["case"])
    same = Difference(case.name, listed["kind"], listed["plugin"], listed["subject"], "")
    other = Difference(case.name, "never", "P", "default/x", "")
    required = {x for x in allowed_for([case], required=True)}

    def mismatches(differences: list[Difference]) -> int:
        verdict = Verdict(case.name, 10, 1, 1, 1, differences)
        return summary([verdict], [case])[1]

    assert mismatches([same]) == len(required) - 1
    assert mismatches([same, other]) == len(required)
    assert mismatches([]) == len(required)
