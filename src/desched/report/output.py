"""What ``desched simulate`` prints: a table for people, JSON for scripts."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, TextIO

from desched.framework.framework import CycleResult


def result_to_json(result: CycleResult, *, now: str) -> dict[str, Any]:
    """The JSON document of one simulated cycle; evictions are listed in eviction order."""
    evictions = [
        {
            "namespace": r.namespace,
            "name": r.name,
            "node": r.node,
            "profile": r.profile,
            "plugin": r.plugin,
            "reason": r.reason,
        }
        for r in result.evictions
    ]
    refused = [
        {
            "namespace": r.namespace,
            "name": r.name,
            "node": r.node,
            "profile": r.profile,
            "plugin": r.plugin,
            "result": r.result.value,
            "error": r.error,
        }
        for r in result.failures
    ]
    per_plugin = Counter(f"{r.profile}/{r.plugin}" for r in result.evictions)
    return {
        "now": now,
        "nodes": result.nodes,
        "skipped": result.skipped,
        "evictions": evictions,
        "refused": refused,
        "summary": {
            "evicted": len(evictions),
            "refused": len(refused),
            "byPlugin": dict(per_plugin),
            "plugins": [
                {
                    "profile": run.profile,
                    "plugin": run.plugin,
                    "extensionPoint": run.extension_point,
                    "evicted": run.evicted,
                    "error": run.error,
                }
                for run in result.plugin_runs
            ],
        },
    }


def write_json(result: CycleResult, out: TextIO, *, now: str) -> None:
    json.dump(result_to_json(result, now=now), out, indent=2)
    out.write("\n")


def write_table(result: CycleResult, out: TextIO, *, now: str, pods_total: int) -> None:
    """Evictions grouped by profile and plugin, with pod, node and reason; totals last."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=max(100, Console(file=out).width), highlight=False)
    if result.skipped:
        console.print(f"[yellow]Cycle skipped:[/] {result.skipped}")
        return
    console.print(f"Simulated one descheduling cycle at {now} over {result.nodes} ready nodes.")
    position = {id(r): i + 1 for i, r in enumerate(result.evictions)}
    for run in result.plugin_runs:
        rows = [r for r in result.evictions if r.profile == run.profile and r.plugin == run.plugin]
        title = f"{run.profile} / {run.plugin} ({run.extension_point}): {len(rows)} eviction(s)"
        if run.error:
            console.print(f"[red]{title}: plugin failed: {run.error}[/]")
            continue
        if not rows:
            console.print(f"[dim]{title}[/]")
            continue
        table = Table(title=title, title_justify="left", show_lines=False)
        table.add_column("#", justify="right")
        table.add_column("pod")
        table.add_column("node")
        table.add_column("reason")
        for r in rows:
            table.add_row(str(position[id(r)]), f"{r.namespace}/{r.name}", r.node, r.reason)
        console.print(table)
    refused = Counter(r.result.value for r in result.failures)
    console.print(
        f"Total: {len(result.evictions)} pod(s) evicted of {pods_total}"
        + (f"; refused: {dict(refused)}" if refused else "")
    )
