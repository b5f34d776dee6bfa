"""What ``desched simulate`` prints: a table for people, JSON for scripts."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
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
        "nodeActions": [a.to_json() for a in result.node_actions],
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


def write_json(
    result: CycleResult, out: TextIO, *, now: str, anomalies: list[dict[str, Any]] | None = None
) -> None:
    doc = result_to_json(result, now=now)
    if anomalies:
        doc["anomalies"] = anomalies
    json.dump(doc, out, indent=2)
    out.write("\n")


def anomaly_findings(profiles: Iterable[Any]) -> list[dict[str, Any]]:
    """What each RemoveAnomalyPods instance judged in the cycle: anomalous and suspected pods."""
    from desched.plugins.removeanomalypods import AnomalyStats

    out = []
    for profile in profiles:
        for inst in profile.instances.values():
            stats = getattr(inst, "anomaly_stats", None)
            if isinstance(stats, AnomalyStats):
                out.append(
                    {
                        "profile": profile.name,
                        "plugin": getattr(inst, "name", ""),
                        "anomalous": list(stats.anomalous_pods),
                        "suspected": dict(stats.suspected_pods),
                    }
                )
    return out


def write_table(
    result: CycleResult,
    out: TextIO,
    *,
    now: str,
    pods_total: int,
    anomalies: list[dict[str, Any]] | None = None,
) -> None:
    """Evictions grouped by profile and plugin, with pod, node and reason; totals last."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=max(100, Console(file=out).width), highlight=False)
    if result.skipped:
        console.print(f"[yellow]Cycle skipped:[/] {result.skipped}")
        _write_node_actions(console, result)
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
    for finding in anomalies or ():
        suspected = ", ".join(f"{k} ({n})" for k, n in sorted(finding["suspected"].items()))
        anomalous = ", ".join(finding["anomalous"]) or "none"
        console.print(
            f"{finding['profile']} / {finding['plugin']}: anomalous pods: {anomalous}; "
            f"suspected (abnormal observations): {suspected or 'none'}"
        )
    _write_node_actions(console, result)
    refused = Counter(r.result.value for r in result.failures)
    console.print(
        f"Total: {len(result.evictions)} pod(s) evicted of {pods_total}"
        + (f"; refused: {dict(refused)}" if refused else "")
    )


def _write_node_actions(console: Any, result: CycleResult) -> None:
    """Node downgrades (and expired ones removed) that the cycle made or, simulated, would make."""
    from rich.table import Table

    if not result.node_actions:
        return
    table = Table(title=f"Node actions: {len(result.node_actions)}", title_justify="left")
    table.add_column("node", no_wrap=True)
    table.add_column("change", overflow="fold")
    table.add_column("until", no_wrap=True)
    table.add_column("why", overflow="fold")
    for a in result.node_actions:
        target = f"{a.method} {a.key}={a.value}" + (f":{a.effect}" if a.effect else "")
        until = a.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ") if a.expires_at else ""
        why = a.reason + (f" [{', '.join(a.pods)}]" if a.pods else "")
        why += f" ({a.detail})" if a.detail else ""
        table.add_row(a.node, f"{a.action} {target}: {a.result.value}", until, why)
    console.print(table)


# ----------------------------------------------------------------------------- placement simulation
# ``desched simulate`` with placement (the default): every cycle's evictions, where the evicted
# pods' replacements would go, and the cluster before and after.


def merged_cycle_result(sim: Any) -> CycleResult:
    """The cycles of a simulation as one result: the first cycle's node count and skip reason,
    every cycle's eviction attempts, plugin runs and node actions, in order."""
    results: list[CycleResult] = [c.result for c in sim.cycles]
    first = results[0]
    return CycleResult(
        started=first.started,
        nodes=first.nodes,
        skipped=first.skipped,
        records=[r for res in results for r in res.records],
        plugin_runs=[run for res in results for run in res.plugin_runs],
        seconds=sum(res.seconds for res in results),
        node_actions=[a for res in results for a in res.node_actions],
    )


def _pct(value: float) -> float:
    return round(value, 2)


def picture_to_json(picture: Any) -> dict[str, Any]:
    """A :class:`desched.scheduling.placement.ClusterPicture` as JSON."""
    return {
        "utilisation": {
            resource: {
                "mean": _pct(s.mean),
                "stddev": _pct(s.stddev),
                "min": _pct(s.min),
                "max": _pct(s.max),
            }
            for resource in ("cpu", "memory", "pods")
            for s in (picture.stats(resource),)
        },
        "violations": {**picture.violations, "total": sum(picture.violations.values())},
        "skew": [
            {
                "id": k.id,
                "namespace": k.namespace,
                "topologyKey": k.topology_key,
                "maxSkew": k.max_skew,
                "whenUnsatisfiable": k.when_unsatisfiable,
                "selector": k.selector,
                "minDomains": k.min_domains,
                "declaredBy": k.declared_by,
                "domains": k.domains,
                "pods": k.pods,
                "skew": k.skew,
                "excess": k.excess,
            }
            for k in picture.skew
        ],
        "nodes": [
            {"name": u.name, "cpu": _pct(u.cpu), "memory": _pct(u.memory), "pods": _pct(u.pods)}
            for u in picture.nodes
        ],
    }


def _placement_json(p: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "cycle": p.cycle,
        "namespace": p.namespace,
        "name": p.name,
        "from": p.evicted_from,
    }
    if p.outcome != "gone":
        doc["replacement"] = p.replacement
    if p.outcome == "placed":
        doc["node"] = p.node
        doc["score"] = p.score
        doc["sameNode"] = p.same_node
    else:
        doc["reason"] = p.reason
    doc["priority"] = p.priority
    doc["evictedBy"] = p.evicted_by
    if p.retried:
        doc["retried"] = True
    return doc


def simulation_to_json(sim: Any, *, now: str) -> dict[str, Any]:
    """The JSON document of ``desched simulate``: the keys of :func:`result_to_json` over every
    cycle, plus where the evicted pods go and the before/after picture."""
    doc = result_to_json(merged_cycle_result(sim), now=now)
    if not sim.placement:
        return doc
    placements = sim.placements
    doc["placements"] = [_placement_json(p) for p in placements if p.outcome == "placed"]
    doc["pending"] = [_placement_json(p) for p in placements if p.outcome == "pending"]
    doc["gone"] = [_placement_json(p) for p in placements if p.outcome == "gone"]
    doc["thrashing"] = [
        {
            "cycle": t.cycle,
            "kind": t.kind,
            "namespace": t.namespace,
            "name": t.name,
            "node": t.node,
            "detail": t.detail,
        }
        for t in sim.thrashing
    ]
    doc["cycles"] = [
        {
            "cycle": c.cycle,
            "skipped": c.result.skipped,
            "evicted": len(c.result.evictions),
            "placed": len(c.outcomes("placed")),
            "pending": len(c.outcomes("pending")),
            "gone": len(c.outcomes("gone")),
            "thrashing": len(c.thrashing),
            "evictions": [
                {
                    "namespace": r.namespace,
                    "name": r.name,
                    "node": r.node,
                    "profile": r.profile,
                    "plugin": r.plugin,
                    "reason": r.reason,
                }
                for r in c.result.evictions
            ],
        }
        for c in sim.cycles
    ]
    doc["converged"] = sim.converged
    doc["stopReason"] = sim.stop_reason
    opts = sim.options
    doc["scoring"] = {
        "mode": opts.score,
        "weights": opts.weights(),
        "percentageOfNodesToScore": opts.percentage_of_nodes_to_score,
    }
    doc["before"] = picture_to_json(sim.before)
    doc["after"] = picture_to_json(sim.after)
    return doc


def write_simulation_json(
    sim: Any, out: TextIO, *, now: str, anomalies: list[dict[str, Any]] | None = None
) -> None:
    doc = simulation_to_json(sim, now=now)
    if anomalies:
        doc["anomalies"] = anomalies
    json.dump(doc, out, indent=2)
    out.write("\n")


def write_simulation_table(
    sim: Any,
    out: TextIO,
    *,
    now: str,
    pods_total: int,
    anomalies: list[dict[str, Any]] | None = None,
) -> None:
    """Each cycle's evictions (as :func:`write_table`) and where the pods go, then the cluster
    before and after: utilisation, remaining violations and topology skew."""
    from rich.console import Console

    console = Console(file=out, width=max(100, Console(file=out).width), highlight=False)
    many = len(sim.cycles) > 1
    for i, cycle in enumerate(sim.cycles):
        if many:
            console.rule(f"Cycle {cycle.cycle}")
        last = i == len(sim.cycles) - 1
        write_table(cycle.result, out, now=now, pods_total=pods_total, anomalies=anomalies if last else None)
        if sim.placement:
            _write_placements(console, cycle)
    if not sim.placement:
        _write_picture(console, sim)
        return
    if many:
        console.print(f"Stopped: {sim.stop_reason}" + (" (converged)" if sim.converged else ""))
    if sim.thrashing:
        console.print(
            f"[yellow]Thrashing: {len(sim.thrashing)} sign(s) that the policy does not converge.[/]"
        )
    _write_picture(console, sim)


def _write_placements(console: Any, cycle: Any) -> None:
    from rich.table import Table

    placed = cycle.outcomes("placed")
    pending = cycle.outcomes("pending")
    gone = cycle.outcomes("gone")
    if not (placed or pending or gone):
        return
    console.print(
        f"Placement (cycle {cycle.cycle}): {len(placed)} placed, {len(pending)} pending, {len(gone)} gone"
    )
    if placed:
        table = Table(title="Where the replacements land", title_justify="left")
        table.add_column("pod")
        table.add_column("from")
        table.add_column("to")
        table.add_column("replacement")
        table.add_column("score", justify="right")
        for p in placed:
            to = p.node + (" [yellow](same node)[/]" if p.same_node else "")
            pod = f"{p.namespace}/{p.name}" + (" (retried)" if p.retried else "")
            table.add_row(pod, p.evicted_from, to, p.replacement, "-" if p.score is None else str(p.score))
        console.print(table)
    if pending:
        table = Table(title="Pending: no node would take them", title_justify="left")
        table.add_column("pod", no_wrap=True)
        table.add_column("from", no_wrap=True)
        table.add_column("why (kube-scheduler's message)", overflow="fold")
        for p in pending:
            table.add_row(f"{p.namespace}/{p.name}", p.evicted_from, p.reason)
        console.print(table)
    if gone:
        table = Table(title="Gone: nothing re-creates them", title_justify="left")
        table.add_column("pod", no_wrap=True)
        table.add_column("from", no_wrap=True)
        table.add_column("why", overflow="fold")
        for p in gone:
            table.add_row(f"{p.namespace}/{p.name}", p.evicted_from, p.reason)
        console.print(table)
    for t in cycle.thrashing:
        console.print(f"[yellow]thrashing ({t.kind}):[/] {t.namespace}/{t.name}: {t.detail}")


#: Constraints shown in the terminal's skew table (all are in the JSON and the HTML report).
SKEW_ROWS = 15


def skew_pairs(sim: Any) -> list[tuple[Any, Any]]:
    """(before, after) per constraint, worst first: those over maxSkew, then by skew."""
    after = {k.id: k for k in sim.after.skew}
    pairs = [(b, after.get(b.id)) for b in sim.before.skew]
    seen = {b.id for b in sim.before.skew}
    pairs.extend((None, a) for a in sim.after.skew if a.id not in seen)

    def worst(pair: tuple[Any, Any]) -> tuple[int, int, str]:
        b, a = pair
        ref = b or a
        top = max(x.skew - x.max_skew for x in (b, a) if x is not None)
        return (-top, -max(x.skew for x in (b, a) if x is not None), ref.id)

    return sorted(pairs, key=worst)


def _write_picture(console: Any, sim: Any) -> None:
    from rich.table import Table

    table = Table(title="Node utilisation (requests, % of allocatable): before → after", title_justify="left")
    table.add_column("resource")
    for col in ("mean", "stddev", "min", "max"):
        table.add_column(col, justify="right")
    for resource in ("cpu", "memory", "pods"):
        b, a = sim.before.stats(resource), sim.after.stats(resource)
        table.add_row(
            resource,
            *(f"{getattr(b, f):.1f} → {getattr(a, f):.1f}" for f in ("mean", "stddev", "min", "max")),
        )
    console.print(table)
    table = Table(title="Pods still violating", title_justify="left")
    table.add_column("kind")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    for kind, count in sim.before.violations.items():
        table.add_row(kind, str(count), str(sim.after.violations.get(kind, 0)))
    console.print(table)
    pairs = skew_pairs(sim)
    if not pairs:
        return
    table = Table(
        title=f"Topology skew per constraint ({min(len(pairs), SKEW_ROWS)} of {len(pairs)}, worst first)",
        title_justify="left",
    )
    table.add_column("namespace / declared by", overflow="fold")
    table.add_column("topology key", overflow="fold")
    table.add_column("selector", overflow="fold")
    table.add_column("max", justify="right")
    table.add_column("skew", justify="right")
    for b, a in pairs[:SKEW_ROWS]:
        ref = b or a
        before = str(b.skew) if b is not None else "-"
        after = str(a.skew) if a is not None else "-"
        table.add_row(
            f"{ref.namespace} / {ref.declared_by}",
            f"{ref.topology_key} ({ref.when_unsatisfiable})",
            ref.selector,
            str(ref.max_skew),
            f"{before} → {after}",
        )
    console.print(table)
