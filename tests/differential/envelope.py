"""desched's decisions against upstream's envelope: what upstream v0.36.0's own code evicts on the
same snapshot and policy over many runs (upstream picks among equal pods in Go map order).

``hack/upstream-diff`` (Go, built by ``hack/e2e/build-upstream-diff.sh``) runs upstream's
LoadPolicyConfig and one RunDeschedulerStrategies cycle on a fake clientset; this module runs it
N times, runs ``desched simulate`` once (desched is deterministic) and judges:

- without eviction limits: a pod desched evicts that upstream evicts in no run (``never``), a
  pod upstream evicts in every run that desched leaves (``missed``), or a plugin evicting more or
  fewer pods than upstream's same plugin does in any run (``count``: where upstream's runs pick
  different pods, the pod-level judgement alone would let desched evict none of them), is a
  difference;
- with limits (``maxNoOfPodsToEvictPerNode``/``PerNamespace``/``Total``), which candidates get
  the budget depends on the order in which plugins meet nodes and pods, and upstream's node order
  is Go map order: the chance that N random runs include desched's order is small. So the envelope
  is wider: each pod desched evicts must be one that upstream evicts in some run of the same
  policy, with its limits or *without* them (``never``); desched's total must lie between
  upstream's fewest and most under the limits, and no node or namespace may exceed its limit
  (``count``); ``missed`` is not judged.

Where the runs disagree, more runs are made (the union grows, the always-set shrinks), and where
a difference is found, more again, before it is reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "hack" / "e2e" / "build-upstream-diff.sh"
ENV = "DESCHED_UPSTREAM_DIFF"

PodKey = tuple[str, str]


def upstream_binary() -> str:
    """The upstream runner: ``$DESCHED_UPSTREAM_DIFF`` (scripts/test.sh exports it), else built
    (or taken from the cache) by the build script."""
    path = os.environ.get(ENV)
    if path:
        if not os.access(path, os.X_OK):
            raise RuntimeError(f"{ENV}={path} is not an executable")
        return path
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT.name} failed:\n{out.stderr[-3000:]}")
    return out.stdout.strip().splitlines()[-1]


@dataclass(frozen=True)
class Eviction:
    namespace: str
    name: str
    node: str
    plugin: str
    profile: str

    @property
    def key(self) -> PodKey:
        return (self.namespace, self.name)


def _evictions(items: Sequence[Mapping[str, Any]]) -> list[Eviction]:
    return [
        Eviction(
            str(e["namespace"]),
            str(e["name"]),
            str(e.get("node") or ""),
            str(e.get("plugin") or ""),
            str(e.get("profile") or ""),
        )
        for e in items
    ]


def run_upstream(binary: str, policy: Path, snapshot: Path, now: str, runs: int) -> list[list[Eviction]]:
    out = subprocess.run(
        [binary, "--policy", str(policy), "--snapshot", str(snapshot), "--now", now, "--runs", str(runs)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"upstream-diff on {policy.name}, {snapshot.name}: {out.stderr.strip()}")
    doc = json.loads(out.stdout)
    return [_evictions(r["evicted"]) for r in doc["runs"]]


def run_desched(policy: Path, snapshot: Path, now: str) -> list[Eviction]:
    desched = Path(sys.executable).parent / "desched"
    cmd = [str(desched), "simulate", "--policy", str(policy), "--now", now, "--no-placement", "-o", "json"]
    out = subprocess.run([*cmd, str(snapshot)], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"desched simulate on {policy.name}, {snapshot.name}: {out.stderr.strip()}")
    return _evictions(json.loads(out.stdout)["evictions"])


LIMIT_FIELDS = {
    "maxNoOfPodsToEvictPerNode": "node",
    "maxNoOfPodsToEvictPerNamespace": "namespace",
    "maxNoOfPodsToEvictTotal": "total",
}


def policy_limits(policy: Path) -> dict[str, int]:
    """The eviction limits a policy sets: ``node``, ``namespace``, ``total`` (absent: unlimited)."""
    doc = yaml.safe_load(policy.read_text()) or {}
    return {scope: int(doc[name]) for name, scope in LIMIT_FIELDS.items() if doc.get(name) is not None}


def without_limits(policy: Path, directory: Path) -> Path:
    """A copy of ``policy`` in ``directory`` with its eviction limits removed."""
    doc = yaml.safe_load(policy.read_text()) or {}
    for name in LIMIT_FIELDS:
        doc.pop(name, None)
    out = directory / f"{policy.stem}-unlimited.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


@dataclass(frozen=True)
class Difference:
    """One decision outside upstream's envelope. ``kind``: ``never`` (desched evicts, upstream in
    no run), ``missed`` (upstream evicts in every run, desched does not), ``count`` (desched's
    count in a limited scope outside upstream's range)."""

    case: str
    kind: str
    plugin: str
    subject: str
    detail: str

    def line(self) -> str:
        return f"{self.case}: {self.kind} {self.plugin} {self.subject} ({self.detail})"

    def allowance(self) -> dict[str, str]:
        return {"case": self.case, "kind": self.kind, "plugin": self.plugin, "subject": self.subject}


@dataclass
class Verdict:
    case: str
    runs: int
    desched: int
    upstream_min: int
    upstream_max: int
    differences: list[Difference] = field(default_factory=list)


def _scopes(evictions: Sequence[Eviction], limits: Mapping[str, int]) -> Counter[str]:
    """Evictions per node and per namespace, where the policy limits them."""
    counts: Counter[str] = Counter()
    for e in evictions:
        if "node" in limits:
            counts[f"node {e.node}"] += 1
        if "namespace" in limits:
            counts[f"namespace {e.namespace}"] += 1
    return counts


def judge(
    case: str,
    desched: Sequence[Eviction],
    upstream: Sequence[Sequence[Eviction]],
    limits: Mapping[str, int],
    unlimited: Sequence[Sequence[Eviction]] = (),
) -> Verdict:
    """The differences between desched's evictions and upstream's runs (see the module doc);
    with ``limits``, ``unlimited`` are upstream's runs of the same policy without them."""
    n = len(upstream)
    seen: Counter[PodKey] = Counter()
    by_key: dict[PodKey, Eviction] = {}
    for run in upstream:
        for key in {e.key for e in run}:
            seen[key] += 1
        for e in run:
            by_key.setdefault(e.key, e)
    mine = {e.key: e for e in desched}
    sizes = [len({e.key for e in run}) for run in upstream]
    verdict = Verdict(case, n, len(mine), min(sizes, default=0), max(sizes, default=0))
    diffs = verdict.differences
    if limits:
        # Under the limits or without them: fewer evictions can leave a PDB budget for a pod
        # that the unlimited cycle's earlier evictions would have used up.
        anywhere = {e.key for run in [*unlimited, *upstream] for e in run}
        n_all = len(unlimited) + n
        for key, e in sorted(mine.items()):
            if key not in anywhere:
                subject = f"{key[0]}/{key[1]}"
                diffs.append(
                    Difference(case, "never", e.plugin, subject, f"0 of {n_all} runs, limited or not")
                )
        lo, hi = verdict.upstream_min, verdict.upstream_max
        if not lo <= len(mine) <= hi:
            diffs.append(Difference(case, "count", "-", "total", f"desched {len(mine)}, upstream {lo}..{hi}"))
        for scope, count in sorted(_scopes(list(mine.values()), limits).items()):
            kind = scope.split(" ", 1)[0]
            if count > limits[kind]:
                diffs.append(Difference(case, "count", "-", scope, f"desched {count}, limit {limits[kind]}"))
        return verdict
    for key, e in sorted(mine.items()):
        if seen[key] == 0:
            diffs.append(Difference(case, "never", e.plugin, f"{key[0]}/{key[1]}", f"0 of {n} upstream runs"))
    for key, count in sorted(seen.items()):
        if count == n and key not in mine:
            subject, e = f"{key[0]}/{key[1]}", by_key[key]
            diffs.append(Difference(case, "missed", e.plugin, subject, f"upstream {n} of {n} runs"))
    per_run = [Counter(e.plugin for e in {e.key: e for e in run}.values()) for run in upstream]
    mine_per_plugin = Counter(e.plugin for e in mine.values())
    for plugin in sorted(set(mine_per_plugin).union(*per_run)):
        counts = [c[plugin] for c in per_run]
        lo, hi = min(counts), max(counts)
        if not lo <= mine_per_plugin[plugin] <= hi:
            detail = f"desched {mine_per_plugin[plugin]}, upstream {lo}..{hi}"
            diffs.append(Difference(case, "count", plugin, "evictions", detail))
    return verdict


def agree(upstream: Sequence[Sequence[Eviction]]) -> bool:
    """Every run evicted the same pods."""
    sets = [frozenset(e.key for e in run) for run in upstream]
    return len(set(sets)) <= 1
