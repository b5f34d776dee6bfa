"""What ``desched simulate`` prints: a table for people, JSON for scripts."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import msgspec

from desched.framework.findings import PluginReport
from desched.framework.framework import CycleResult
from desched.gcpause import gc_paused

if TYPE_CHECKING:
    from desched.simulation import ClusterPicture, ConstraintSkew, PodPlacement, Simulation


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
    doc: dict[str, Any] = {
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
    skips = result.skips
    if skips:  # (only then: a policy without evictionPolicy prints exactly what it printed before)
        doc["evictionsSkipped"] = [
            {
                "namespace": r.namespace,
                "name": r.name,
                "node": r.node,
                "profile": r.profile,
                "plugin": r.plugin,
                "reason": r.skip_reason,
                "detail": r.error,
            }
            for r in skips
        ]
        doc["summary"]["skipped"] = dict(Counter(r.skip_reason for r in skips))
    return doc


@gc_paused()
def write_json(
    result: CycleResult,
    out: TextIO,
    *,
    now: str,
    anomalies: list[dict[str, Any]] | None = None,
    amend: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    doc = result_to_json(result, now=now)
    if anomalies:
        doc["anomalies"] = anomalies
    if amend is not None:  # e.g. simulate --explain adds what each plugin decided
        amend(doc)
    _write_json_doc(doc, out)


def _write_json_doc(doc: dict[str, Any], out: TextIO) -> None:
    """``json.dump(doc, out, indent=2)`` and a newline, byte for byte, but fast: the C encoder writes
    each top-level value compact and msgspec re-indents it, keeping every token's text (``json.dump``
    with an indent runs the pure-Python encoder, one write per token: millions on a large cluster).
    One value at a time keeps the text in memory small (figures: docs/performance.md)."""
    _write_indented(doc, out, "")
    out.write("\n")


#: Items of a long list encoded in one call (a few hundred KiB of text at most).
_CHUNK = 256
#: Lists up to this long are written item by item, each as its own value (a cycle's record).
_FEW = 8


def _write_indented(value: Any, out: TextIO, pad: str) -> None:
    """Write ``json.dumps(value, indent=2)`` with every line after the first indented by ``pad``,
    a piece at a time: a dict key by key, a short list item by item, a long one ``_CHUNK`` items
    per encoding. The whole text of a large list (4 MB for 12,000 evictions, three copies while
    it is re-indented) never is in memory at once."""
    if isinstance(value, dict) and value:
        inner = pad + "  "
        sep = "\n" + inner
        out.write("{")
        for key, item in value.items():
            out.write(f"{sep}{json.dumps(key)}: ")
            _write_indented(item, out, inner)
            sep = ",\n" + inner
        out.write(f"\n{pad}}}")
    elif isinstance(value, list) and value:
        inner = pad + "  "
        out.write("[")
        if len(value) <= _FEW:
            sep = "\n" + inner
            for item in value:
                out.write(sep)
                _write_indented(item, out, inner)
                sep = ",\n" + inner
        else:
            sep = "\n" + inner
            for k in range(0, len(value), _CHUNK):
                # "[\n  a,\n  b\n]": its items, each line one level down from ``pad``
                text = _formatted(value[k : k + _CHUNK])
                out.write(sep + text[4:-2].replace("\n", "\n" + pad))
                sep = ",\n" + inner
        out.write(f"\n{pad}]")
    else:
        out.write(_formatted(value).replace("\n", "\n" + pad) if pad else _formatted(value))


def _formatted(value: Any) -> str:
    """``json.dumps(value, indent=2)``, by the C encoder and msgspec's re-indenting."""
    text = json.dumps(value)
    try:
        return msgspec.json.format(text, indent=2)
    except msgspec.DecodeError:  # NaN or Infinity, which json writes and msgspec does not read
        return json.dumps(value, indent=2)


def anomaly_findings(reports: Iterable[PluginReport]) -> list[dict[str, Any]]:
    """What plugins judged in a cycle (its ``CycleResult.reports``): anomalous and suspected pods."""
    return [
        {
            "profile": r.profile,
            "plugin": r.plugin,
            "anomalous": list(r.anomalies.anomalous_pods),
            "suspected": dict(r.anomalies.suspected_pods),
        }
        for r in reports
    ]


class _Lines:
    """Where the table output goes: plain text, nothing wrapped or cut, so that it reads the same on
    a terminal, in a file or through grep. On a terminal, rich colours a few one-line notices."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.console: Any = None
        isatty = getattr(out, "isatty", None)
        if isatty is not None and isatty():
            from rich.console import Console

            self.console = Console(file=out, highlight=False, soft_wrap=True)

    def line(self, text: str = "", style: str | None = None) -> None:
        if style and self.console is not None:
            from rich.text import Text

            self.console.print(Text(text, style=style))
        else:
            self.out.write(text + "\n")

    def table(
        self,
        title: str,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        right: Collection[int] = (),
    ) -> None:
        """The title, then the columns as ``kubectl get`` prints them: each as wide as its widest
        cell, three spaces apart, no borders; ``right`` are the right-aligned columns. A blank
        line follows."""
        widths = [max(map(len, column)) for column in zip(header, *rows, strict=True)]
        last = len(widths) - 1
        fmt = "   ".join(
            f"{{:>{w}}}" if i in right else ("{}" if i == last else f"{{:<{w}}}")
            for i, w in enumerate(widths)
        )
        lines = [title, fmt.format(*header).rstrip()]
        lines.extend([fmt.format(*row).rstrip() for row in rows])
        self.out.write("\n".join(lines) + "\n\n")


@gc_paused()
def write_table(
    result: CycleResult,
    out: TextIO,
    *,
    now: str,
    pods_total: int,
    anomalies: list[dict[str, Any]] | None = None,
) -> None:
    """Evictions grouped by profile and plugin, with pod, node and reason; totals last."""
    lines = _Lines(out)
    if result.skipped:
        lines.line(f"Cycle skipped: {result.skipped}", "yellow")
        _write_node_actions(lines, result)
        return
    lines.line(f"Simulated one descheduling cycle at {now} over {result.nodes} ready nodes.")
    by_plugin: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {}
    for i, r in enumerate(result.evictions, 1):
        by_plugin.setdefault((r.profile, r.plugin), []).append(
            (str(i), f"{r.namespace}/{r.name}", r.node, r.reason)
        )
    for run in result.plugin_runs:
        rows = by_plugin.get((run.profile, run.plugin), [])
        title = f"{run.profile} / {run.plugin} ({run.extension_point}): {len(rows)} eviction(s)"
        if run.error:
            lines.line(f"{title}: plugin failed: {run.error}", "red")
        elif not rows:
            lines.line(title, "dim")
        else:
            lines.table(title, ("#", "pod", "node", "reason"), rows, right=(0,))
    for finding in anomalies or ():
        suspected = ", ".join(f"{k} ({n})" for k, n in sorted(finding["suspected"].items()))
        anomalous = ", ".join(finding["anomalous"]) or "none"
        lines.line(
            f"{finding['profile']} / {finding['plugin']}: anomalous pods: {anomalous}; "
            f"suspected (abnormal observations): {suspected or 'none'}"
        )
    _write_node_actions(lines, result)
    _write_refusals(lines, result)
    _write_skips(lines, result)
    refused = Counter(r.result.value for r in result.failures)
    skipped = Counter(r.skip_reason for r in result.skips)
    lines.line(
        f"Total: {len(result.evictions)} pod(s) evicted of {pods_total}"
        + (f"; refused: {dict(refused)}" if refused else "")
        + (f"; skipped by evictionPolicy: {dict(skipped)}" if skipped else "")
    )


def _write_refusals(lines: _Lines, result: CycleResult) -> None:
    """Evictions the API would refuse (a PodDisruptionBudget: 429, two of them: 500) or a limit
    stopped, in the order they were asked for."""
    failures = result.failures
    if not failures:
        return
    rows = [
        (f"{r.namespace}/{r.name}", r.node, f"{r.profile}/{r.plugin}", r.error or r.result.value)
        for r in failures
    ]
    lines.table(f"Refused: {len(rows)}", ("pod", "node", "asked by", "why"), rows)


def _write_skips(lines: _Lines, result: CycleResult) -> None:
    """Evictions the profile's evictionPolicy skipped, in the order they were asked for."""
    skips = result.skips
    if not skips:
        return
    rows = [
        (f"{r.namespace}/{r.name}", r.node, f"{r.profile}/{r.plugin}", r.skip_reason, r.error) for r in skips
    ]
    lines.table(f"Skipped by evictionPolicy: {len(rows)}", ("pod", "node", "asked by", "reason", "why"), rows)


def _write_node_actions(lines: _Lines, result: CycleResult) -> None:
    """Node downgrades (and expired ones removed) that the cycle made or, simulated, would make."""
    if not result.node_actions:
        return
    rows = []
    for a in result.node_actions:
        target = f"{a.method} {a.key}={a.value}" + (f":{a.effect}" if a.effect else "")
        until = a.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ") if a.expires_at else ""
        why = a.reason + (f" [{', '.join(a.pods)}]" if a.pods else "")
        why += f" ({a.detail})" if a.detail else ""
        rows.append((a.node, f"{a.action} {target}: {a.result.value}", until, why))
    lines.table(f"Node actions: {len(rows)}", ("node", "change", "until", "why"), rows)


# ----------------------------------------------------------------------------- placement simulation
# ``desched simulate`` with placement (the default): every cycle's evictions, where the evicted
# pods' replacements would go, and the cluster before and after.


def merged_cycle_result(sim: Simulation) -> CycleResult:
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


def picture_to_json(picture: ClusterPicture) -> dict[str, Any]:
    """A :class:`desched.simulation.ClusterPicture` as JSON."""
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


def _placement_json(p: PodPlacement) -> dict[str, Any]:
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


def _number_cycles(doc: dict[str, Any], sim: Simulation) -> None:
    """Give each entry of the lists merged over the cycles (``evictions``, ``refused``,
    ``evictionsSkipped``, ``nodeActions``) its ``cycle``, first, as ``placements`` have it: the
    merged lists are the cycles' lists one after the other."""
    per_list = {
        "evictions": [c.cycle for c in sim.cycles for _ in c.result.evictions],
        "refused": [c.cycle for c in sim.cycles for _ in c.result.failures],
        "evictionsSkipped": [c.cycle for c in sim.cycles for _ in c.result.skips],
        "nodeActions": [c.cycle for c in sim.cycles for _ in c.result.node_actions],
    }
    for key, cycles in per_list.items():
        if key in doc:
            doc[key] = [{"cycle": k, **entry} for k, entry in zip(cycles, doc[key], strict=True)]


def simulation_to_json(sim: Simulation, *, now: str) -> dict[str, Any]:
    """The JSON document of ``desched simulate``: the keys of :func:`result_to_json` over every
    cycle, plus where the evicted pods go and the before/after picture."""
    doc = result_to_json(merged_cycle_result(sim), now=now)
    if not sim.placement:  # (one cycle: --cycles needs placement)
        return doc
    _number_cycles(doc, sim)
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
        "placementOrder": opts.order,
        "terminatingPods": opts.terminating,
    }
    doc["before"] = picture_to_json(sim.before)
    doc["after"] = picture_to_json(sim.after)
    return doc


@gc_paused()
def write_simulation_json(
    sim: Simulation,
    out: TextIO,
    *,
    now: str,
    anomalies: list[dict[str, Any]] | None = None,
    amend: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    doc = simulation_to_json(sim, now=now)
    if anomalies:
        doc["anomalies"] = anomalies
    if amend is not None:
        amend(doc)
    _write_json_doc(doc, out)


@gc_paused()
def write_simulation_table(
    sim: Simulation,
    out: TextIO,
    *,
    now: str,
    pods_total: int,
    anomalies: list[dict[str, Any]] | None = None,
) -> None:
    """Each cycle's evictions (as :func:`write_table`) and where the pods go, then the cluster
    before and after: utilisation, remaining violations and topology skew."""
    lines = _Lines(out)
    many = len(sim.cycles) > 1
    for i, cycle in enumerate(sim.cycles):
        if many:
            lines.line(f"──── Cycle {cycle.cycle} ────", "bold")
        last = i == len(sim.cycles) - 1
        write_table(cycle.result, out, now=now, pods_total=pods_total, anomalies=anomalies if last else None)
        if sim.placement:
            _write_placements(lines, cycle)
    if not sim.placement:
        _write_picture(lines, sim)
        return
    if many:
        lines.line(f"Stopped: {sim.stop_reason}" + (" (converged)" if sim.converged else ""))
    if sim.thrashing:
        lines.line(f"Thrashing: {len(sim.thrashing)} sign(s) that the policy does not converge.", "yellow")
    _write_picture(lines, sim)


def _write_placements(lines: _Lines, cycle: Any) -> None:
    placed = cycle.outcomes("placed")
    pending = cycle.outcomes("pending")
    gone = cycle.outcomes("gone")
    if not (placed or pending or gone):
        return
    lines.line(
        f"Placement (cycle {cycle.cycle}): {len(placed)} placed, {len(pending)} pending, {len(gone)} gone"
    )
    if placed:
        lines.table(
            "Where the replacements land",
            ("pod", "from", "to", "replacement", "score"),
            [
                (
                    f"{p.namespace}/{p.name}" + (" (retried)" if p.retried else ""),
                    p.evicted_from,
                    p.node + (" (same node)" if p.same_node else ""),
                    p.replacement,
                    "-" if p.score is None else str(p.score),
                )
                for p in placed
            ],
            right=(4,),
        )
    if pending:
        lines.table(
            "Pending: no node would take them",
            ("pod", "from", "why (kube-scheduler's message)"),
            [(f"{p.namespace}/{p.name}", p.evicted_from, p.reason) for p in pending],
        )
    if gone:
        lines.table(
            "Gone: nothing re-creates them",
            ("pod", "from", "why"),
            [(f"{p.namespace}/{p.name}", p.evicted_from, p.reason) for p in gone],
        )
    for t in cycle.thrashing:
        lines.line(f"thrashing ({t.kind}): {t.namespace}/{t.name}: {t.detail}", "yellow")


#: A constraint's skew before and after (None: not declared then).
SkewPair = tuple["ConstraintSkew | None", "ConstraintSkew | None"]

#: Constraints shown in the terminal's skew table (all are in the JSON and the HTML report).
SKEW_ROWS = 15


def skew_pairs(sim: Simulation) -> list[SkewPair]:
    """(before, after) per constraint, worst first: those over maxSkew, then by skew."""
    after = {k.id: k for k in sim.after.skew}
    pairs: list[SkewPair] = [(b, after.get(b.id)) for b in sim.before.skew]
    seen = {b.id for b in sim.before.skew}
    pairs.extend((None, a) for a in sim.after.skew if a.id not in seen)

    def worst(pair: SkewPair) -> tuple[int, int, str]:
        b, a = pair
        ref = skew_ref(b, a)
        top = max(x.skew - x.max_skew for x in (b, a) if x is not None)
        return (-top, -max(x.skew for x in (b, a) if x is not None), ref.id)

    return sorted(pairs, key=worst)


def skew_ref(b: ConstraintSkew | None, a: ConstraintSkew | None) -> ConstraintSkew:
    """The constraint a (before, after) pair of :func:`skew_pairs` is about (one side at least)."""
    ref = b or a
    assert ref is not None
    return ref


def _write_picture(lines: _Lines, sim: Simulation) -> None:
    rows = []
    for resource in ("cpu", "memory", "pods"):
        stats_b, stats_a = sim.before.stats(resource), sim.after.stats(resource)
        rows.append(
            (
                resource,
                *(
                    f"{getattr(stats_b, f):.1f} → {getattr(stats_a, f):.1f}"
                    for f in ("mean", "stddev", "min", "max")
                ),
            )
        )
    lines.table(
        "Node utilisation (requests, % of allocatable): before → after",
        ("resource", "mean", "stddev", "min", "max"),
        rows,
        right=(1, 2, 3, 4),
    )
    lines.table(
        "Pods still violating",
        ("kind", "before", "after"),
        [
            (kind, str(count), str(sim.after.violations.get(kind, 0)))
            for kind, count in sim.before.violations.items()
        ],
        right=(1, 2),
    )
    pairs = skew_pairs(sim)
    if not pairs:
        return
    rows = []
    for b, a in pairs[:SKEW_ROWS]:
        ref = skew_ref(b, a)
        before = str(b.skew) if b is not None else "-"
        after = str(a.skew) if a is not None else "-"
        rows.append(
            (
                f"{ref.namespace} / {ref.declared_by}",
                f"{ref.topology_key} ({ref.when_unsatisfiable})",
                ref.selector,
                str(ref.max_skew),
                f"{before} → {after}",
            )
        )
    lines.table(
        f"Topology skew per constraint ({len(rows)} of {len(pairs)}, worst first)",
        ("namespace / declared by", "topology key", "selector", "max", "skew"),
        rows,
        right=(3, 4),
    )
