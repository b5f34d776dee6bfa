"""``python -m benchmarks.thrash SNAPSHOT``: how much a policy thrashes over several cycles.

Runs ``desched simulate SNAPSHOT --policy P --cycles N -o json`` for each policy (default:
benchmarks/policy-lnu.yaml, plain LowNodeUtilization, and benchmarks/policy-lnu-safe.yaml, the same
with the evictionPolicy cooldown) and prints, per policy: evictions, cycles run, simulate's
thrashing signs (``re-evicted``, ``same-node``), the workloads (pod templates: a pod's controller)
moved, and those moved in two cycles or more. A replacement pod counts for the workload of the pod
it replaces (simulate's ``placements`` tell which). Figures: docs/policy.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOW = "2026-11-21T12:00:00Z"
Workload = tuple[str, str, str]


def owners(snapshot: dict[str, Any]) -> dict[tuple[str, str], Workload]:
    out: dict[tuple[str, str], Workload] = {}
    for item in snapshot.get("items", []):
        if item.get("kind") != "Pod":
            continue
        meta = item["metadata"]
        ns = meta.get("namespace", "")
        refs = meta.get("ownerReferences") or []
        ref = next((r for r in refs if r.get("controller")), refs[0] if refs else None)
        out[(ns, meta["name"])] = (ns, ref["kind"], ref["name"]) if ref else (ns, "Pod", meta["name"])
    return out


def measure(
    snapshot: Path, policy: Path, cycles: int, owner: dict[tuple[str, str], Workload]
) -> dict[str, Any]:
    desched = Path(sys.executable).with_name("desched")
    cmd = [str(desched), "simulate", str(snapshot), "--policy", str(policy), "--now", NOW]
    cmd.extend(["--cycles", str(cycles), "-o", "json"])
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"desched simulate failed ({proc.returncode}): {proc.stderr.strip()}")
    doc = json.loads(proc.stdout)
    of = dict(owner)
    for p in doc.get("placements", []) + doc.get("pending", []):
        if p.get("replacement") and (p["namespace"], p["name"]) in of:
            of[(p["namespace"], p["replacement"])] = of[(p["namespace"], p["name"])]
    moved: dict[Workload, set[int]] = {}
    for c in doc["cycles"]:
        for e in c["evictions"]:
            w = of.get((e["namespace"], e["name"]), (e["namespace"], "Pod", e["name"]))
            moved.setdefault(w, set()).add(c["cycle"])
    kinds = Counter(t["kind"] for t in doc.get("thrashing", []))
    return {
        "policy": str(policy.relative_to(ROOT) if policy.is_relative_to(ROOT) else policy),
        "cycles": len(doc["cycles"]),
        "evictions": doc["summary"]["evicted"],
        "reEvicted": kinds.get("re-evicted", 0),
        "sameNode": kinds.get("same-node", 0),
        "workloadsMoved": len(moved),
        "workloadsMovedTwice": sum(1 for cs in moved.values() if len(cs) >= 2),
        "skipped": doc["summary"].get("skipped", {}),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.thrash", description=__doc__.split("\n")[0])
    ap.add_argument("snapshot", type=Path)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument(
        "--policy",
        type=Path,
        action="append",
        help="repeatable (default: benchmarks/policy-lnu.yaml and benchmarks/policy-lnu-safe.yaml)",
    )
    args = ap.parse_args(argv)
    policies = args.policy or [ROOT / "benchmarks/policy-lnu.yaml", ROOT / "benchmarks/policy-lnu-safe.yaml"]
    owner = owners(json.loads(args.snapshot.read_text()))
    for policy in policies:
        print(json.dumps(measure(args.snapshot, policy, args.cycles, owner)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
