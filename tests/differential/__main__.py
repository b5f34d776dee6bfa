"""``python -m tests.differential [--fast] [--case SUBSTRING]``: desched against upstream v0.36.0's
envelope on the whole matrix (matrix.py), with its figures; exit 1 when a difference is found that
allowances.json does not list, or a listed one is no longer found."""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from tests.differential.envelope import Verdict, upstream_binary
from tests.differential.matrix import FAST, RUNS, Case, allowed_for, found, full_matrix, run_case, unlisted


def summary(verdicts: list[Verdict], cases: list[Case]) -> tuple[list[str], int]:
    """The figures' lines, and the number of mismatches with the allowance list."""
    snapshots = {(c.shape, c.seed) for c in cases}
    diffs = [d for v in verdicts for d in v.differences]
    lines = [
        f"cases: {len(verdicts)} ({len(snapshots)} snapshots, {len({c.policy for c in cases})} policies)",
        f"upstream runs: {sum(v.runs for v in verdicts)}",
        f"evictions by desched: {sum(v.desched for v in verdicts)}",
        f"upstream evictions per run: {sum(v.upstream_min for v in verdicts)}"
        f"..{sum(v.upstream_max for v in verdicts)}",
        f"cases where upstream's runs disagree: {sum(1 for v in verdicts if v.runs > RUNS)}",
        f"outside the envelope: {len(diffs)}",
    ]
    by_class = Counter((d.plugin, d.kind) for d in diffs)
    for (plugin, kind), n in sorted(by_class.items()):
        lines.append(f"  {plugin} {kind}: {n}")
    have = found(diffs)
    allowed = allowed_for(cases)
    new = unlisted(have, allowed)
    gone = sorted(allowed_for(cases, required=True) - have)
    lines.append(f"not in allowances.json: {len(new)}")
    lines.extend(f"  NEW {' '.join(x)}" for x in new)
    lines.append(f"in allowances.json, no longer found: {len(gone)}")
    lines.extend(f"  FIXED {' '.join(x)}" for x in gone)
    return lines, len(new) + len(gone)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.differential", description=__doc__)
    parser.add_argument("--fast", action="store_true", help="only the subset the pytest suite runs")
    parser.add_argument("--case", default="", help="only the cases whose name contains this")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = parser.parse_args(argv)
    cases = [c for c in (FAST if args.fast else full_matrix()) if args.case in c.name]
    binary = upstream_binary()
    t0 = time.monotonic()
    verdicts = []
    for case in cases:
        v = run_case(binary, case)
        verdicts.append(v)
        if args.verbose or v.differences:
            print(
                f"{case.name}: desched {v.desched}, upstream {v.upstream_min}..{v.upstream_max} "
                f"in {v.runs} runs, {len(v.differences)} outside",
                flush=True,
            )
        for d in v.differences:
            print(f"  {d.line()}", flush=True)
    lines, mismatches = summary(verdicts, cases)
    print("\n".join(lines))
    print(f"({time.monotonic() - t0:.0f} s)")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
