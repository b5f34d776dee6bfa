"""The differential matrix: generated clusters x policies, each case judged against upstream's
envelope (envelope.py). Clusters come from benchmarks/generator/ (node pools of several shapes
over three zones, spot and GPU pools, tainted, cordoned and relabelled nodes, PDBs, PVCs, priority
classes); the policies are the YAML files beside this module.

``python -m tests.differential`` runs the whole matrix and prints its figures
(docs/conformance.md quotes them); ``FAST`` is the subset the pytest suite runs.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from benchmarks.generator import NOW, ClusterSpec, cached_snapshot

from tests.differential.envelope import (
    Difference,
    Verdict,
    agree,
    judge,
    policy_limits,
    run_desched,
    run_upstream,
    without_limits,
)

HERE = Path(__file__).resolve().parent
POLICIES = HERE / "policies"
ALLOWANCES = HERE / "allowances.json"

#: upstream runs per case; where they disagree, EXTRA_RUNS more
RUNS = 10
EXTRA_RUNS = 20
#: runs in all before a difference is reported, where upstream's runs disagree
CONFIRM_RUNS = 50


@dataclass(frozen=True)
class Shape:
    """A cluster shape: ``nodes`` nodes with about ``pods_per_node`` pods each."""

    name: str
    nodes: int
    pods_per_node: int

    def spec(self, seed: int) -> ClusterSpec:
        return ClusterSpec(nodes=self.nodes, pods_per_node=self.pods_per_node, seed=seed)


SHAPES = {
    s.name: s
    for s in (
        Shape("small", 20, 10),  # few pods per node: utilisation plugins see mostly empty nodes
        Shape("dense", 20, 40),  # few nodes, crowded: PDBs bind, duplicates pile up
        Shape("wide", 40, 15),  # 40 nodes (issue 24's LowNodeUtilization nodeFit class)
        Shape("many", 80, 8),  # many small nodes (the topology-spread class)
    )
}

SEEDS = (1,)
#: the LowNodeUtilization policies also run on a second seed's clusters (issue 24 classes 1 and 2:
#: how many evictions bring a node under its target depends on which pods go first)
LNU_POLICIES = ("lnu-nodefit", "lnu-deviation-second-profile")
LNU_SEEDS = (1, 2)


@dataclass(frozen=True)
class Case:
    shape: str
    seed: int
    policy: str

    @property
    def name(self) -> str:
        return f"{self.shape}-s{self.seed}/{self.policy}"


def policies() -> list[str]:
    return sorted(p.stem for p in POLICIES.glob("*.yaml"))


def seeds(policy: str) -> tuple[int, ...]:
    return LNU_SEEDS if policy in LNU_POLICIES else SEEDS


def full_matrix() -> list[Case]:
    every = sorted({*SEEDS, *LNU_SEEDS})
    return [
        Case(shape, seed, policy)
        for shape in SHAPES
        for seed in every
        for policy in policies()
        if seed in seeds(policy)
    ]


#: the subset the pytest suite runs (tests/differential/test_upstream_envelope.py): every policy on
#: a small cluster, two on a dense one
FAST = [Case("small", 1, policy) for policy in policies()] + [
    Case("dense", 1, policy) for policy in ("nine-plugins", "hnu")
]


def snapshot(shape: str, seed: int) -> Path:
    path, _ = cached_snapshot(SHAPES[shape].spec(seed))
    return path


def run_case(binary: str, case: Case, runs: int = RUNS, extra: int = EXTRA_RUNS) -> Verdict:
    """Judge one case: ``runs`` upstream runs, ``extra`` more where they disagree, and where a
    difference is found with disagreeing runs, ``CONFIRM_RUNS`` in all before it is reported."""
    policy = POLICIES / f"{case.policy}.yaml"
    snap = snapshot(case.shape, case.seed)
    mine = run_desched(policy, snap, NOW)
    limits = policy_limits(policy)
    with tempfile.TemporaryDirectory(prefix="desched-diff-") as tmp:
        free_policy = without_limits(policy, Path(tmp)) if limits else policy
        upstream = run_upstream(binary, policy, snap, NOW, runs)
        unlimited = run_upstream(binary, free_policy, snap, NOW, runs) if limits else []
        if not agree(upstream) or (limits and not agree(unlimited)):
            upstream += run_upstream(binary, policy, snap, NOW, extra)
            if limits:
                unlimited += run_upstream(binary, free_policy, snap, NOW, extra)
        verdict = judge(case.name, mine, upstream, limits, unlimited)
        more = CONFIRM_RUNS - len(upstream)
        if verdict.differences and more > 0 and not (agree(upstream) and agree(unlimited)):
            upstream += run_upstream(binary, policy, snap, NOW, more)
            if limits:
                unlimited += run_upstream(binary, free_policy, snap, NOW, more)
            verdict = judge(case.name, mine, upstream, limits, unlimited)
    return verdict


def run_cases(binary: str, cases: Iterable[Case]) -> Iterator[Verdict]:
    for case in cases:
        yield run_case(binary, case)


def allowances() -> list[dict[str, str]]:
    """Known differences (each explained in docs/conformance.md); the tests require the found
    differences of the cases they run to be exactly these, so a new one fails and a fixed one
    must be removed."""
    data: list[dict[str, str]] = json.loads(ALLOWANCES.read_text())["allowances"]
    return data


def allowed_for(cases: Iterable[Case], *, required: bool = False) -> set[tuple[str, str, str, str]]:
    """The allowances of these cases; ``required``: only those that must be found (an allowance
    marked ``"sometimes": true`` is at the edge of upstream's sampled range: desched's count equals
    the fewest or most upstream makes in some batches of runs and not in others)."""
    names = {c.name for c in cases}
    return {
        (a["case"], a["kind"], a["plugin"], a["subject"])
        for a in allowances()
        if a["case"] in names and not (required and a.get("sometimes"))
    }


def found(differences: Iterable[Difference]) -> set[tuple[str, str, str, str]]:
    return {(d.case, d.kind, d.plugin, d.subject) for d in differences}


def unlisted(
    have: set[tuple[str, str, str, str]], allowed: set[tuple[str, str, str, str]]
) -> list[tuple[str, str, str, str]]:
    """The differences found that no allowance lists (an allowance's subject ``*`` stands for
    any subject of its case, kind and plugin)."""
    return sorted(x for x in have if x not in allowed and (*x[:3], "*") not in allowed)
