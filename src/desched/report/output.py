"""What ``desched simulate`` prints: a table for people, JSON for scripts."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TextIO

import msgspec

from desched.framework.framework import CycleResult
from desched.framework.reports import PluginReport
from desched.framework.types import EvictResult
from desched.gcpause import gc_paused

if TYPE_CHECKING:
    from desched.simulation import ClusterPicture, ConstraintSkew, PodPlacement, Simulation


#: The ``apiVersion`` and ``kind`` of ``desched simulate -o json``; its JSON Schema is
#: docs/simulation-output.schema.json.
API_VERSION = "desched.io/v1alpha1"
KIND = "SimulationResult"


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
            # a pod run moves by a rollout restart (evictionPolicy.surge); absent: an eviction
            **({"method": r.method} if r.method != "evict" else {}),
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
        "apiVersion": API_VERSION,
        "kind": KIND,
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
    reports: Sequence[PluginReport] = (),
    amend: Callable[[dict[str, Any]], None] | None = None,
    view: View | None = None,
) -> None:
    view = view or View()
    doc = result_to_json(filter_result(result, view), now=now)
    _note_namespaces(doc, view)
    doc.update(reports_to_json(reports, view))
    if amend is not None:  # e.g. simulate --explain adds what each plugin decided
        amend(doc)
    _write_json_doc(doc, out)


def _note_namespaces(doc: dict[str, Any], view: View) -> None:
    """``--namespace``: the document says whose pods it lists (right after ``now``)."""
    if view.namespaces:
        items = list(doc.items())
        doc.clear()
        for key, value in items:
            doc[key] = value
            if key == "now":
                doc["namespaces"] = sorted(view.namespaces)


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


def reports_to_json(
    reports: Iterable[PluginReport], view: View | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The reports plugins attached to a cycle (its ``CycleResult.reports``), each listed under its
    kind's key (``anomalies``: ``[{profile, plugin, ...its fields}]``), with what the view shows."""
    shows = (view or View()).shows
    out: dict[str, list[dict[str, Any]]] = {}
    for r in reports:
        out.setdefault(r.report.kind, []).append(
            {"profile": r.profile, "plugin": r.plugin, **r.report.to_json(shows)}
        )
    return out


#: Rows of each list the summary table shows; ``-o wide`` shows them all.
TOP_ROWS = 5
#: Characters of free text (reasons, messages) in a cell of the summary; ``-o wide`` cuts nothing.
CELL = 64
WIDE_HINT = "-o wide lists them all"


@dataclass(frozen=True)
class View:
    """How much of a result the table shows: the summary (default) or everything (``-o wide``),
    and whose pods (``--namespace``; empty: every namespace)."""

    wide: bool = False
    namespaces: frozenset[str] = frozenset()

    def rows(self, rows: Sequence[Any]) -> Sequence[Any]:
        return rows if self.wide else rows[:TOP_ROWS]

    def cut(self, text: str, width: int = CELL) -> str:
        """Free text (a reason, a message) cut to ``width`` characters in the summary."""
        if self.wide or len(text) <= width:
            return text
        return text[: width - 1] + "…"

    def shows(self, namespace: str) -> bool:
        return not self.namespaces or namespace in self.namespaces


class _Lines:
    """Where the table output goes: plain text, nothing wrapped, so that it reads the same on a
    terminal, in a file or through grep. On a terminal, rich colours a few one-line notices. The
    summary shows the first :data:`TOP_ROWS` rows of each list and cuts free text at :data:`CELL`
    characters (with "…"); names are never cut."""

    def __init__(self, out: TextIO, view: View | None = None) -> None:
        self.out = out
        self.view = view or View()
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
        *,
        what: str = "",
        more: int = 0,
    ) -> None:
        """The title, then the columns as ``kubectl get`` prints them: each as wide as its widest
        cell, three spaces apart, no borders; ``right`` are the right-aligned columns. With
        ``what`` (e.g. "evictions"), a long list is cut to the view's first rows and a line says
        how many more there are and how to see them. A blank line follows."""
        shown = self.view.rows(rows) if what else rows
        widths = [max(map(len, column)) for column in zip(header, *shown, strict=True)]
        last = len(widths) - 1
        fmt = "   ".join(
            f"{{:>{w}}}" if i in right else ("{}" if i == last else f"{{:<{w}}}")
            for i, w in enumerate(widths)
        )
        lines = [title, fmt.format(*header).rstrip()]
        lines.extend([fmt.format(*row).rstrip() for row in shown])
        more += len(rows) - len(shown)
        if more:
            lines.append(f"... {more} more {what} ({WIDE_HINT})")
        self.out.write("\n".join(lines) + "\n\n")


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def filter_result(result: CycleResult, view: View) -> CycleResult:
    """The result with only the records of the view's namespaces (all of them without a filter)."""
    if not view.namespaces:
        return result
    return replace(result, records=[r for r in result.records if view.shows(r.namespace)])


def _plugin_rows(
    results: Sequence[CycleResult],
) -> list[tuple[str, str, str, list[int], list[int], list[int]]]:
    """(profile, plugin, extension point, evicted, refused, skipped per result), in run order."""
    index: dict[tuple[str, str, str], int] = {}
    rows: list[tuple[str, str, str, list[int], list[int], list[int]]] = []
    n = len(results)
    for i, result in enumerate(results):
        for run in result.plugin_runs:
            key = (run.profile, run.plugin, run.extension_point)
            if key not in index:
                index[key] = len(rows)
                rows.append((*key, [0] * n, [0] * n, [0] * n))
        points = {(run.profile, run.plugin): run.extension_point for run in result.plugin_runs}
        for r in result.records:
            at = index.get((r.profile, r.plugin, points.get((r.profile, r.plugin), "")))
            if at is None:
                continue
            if r.result is EvictResult.EVICTED:
                rows[at][3][i] += 1
            elif r.result.skipped:
                rows[at][5][i] += 1
            elif not r.result.ok:
                rows[at][4][i] += 1
    return rows


def _total_line(results: Sequence[CycleResult], pods_total: int, label: str = "Total") -> str:
    evicted = sum(len(r.evictions) for r in results)
    # (a refusal's result is "error" when the eviction API said no: a PDB's 429, a 404, ...)
    refused = Counter(
        "by the eviction API" if r.result is EvictResult.FAILED else r.result.value
        for res in results
        for r in res.failures
    )
    skipped = Counter(r.skip_reason for res in results for r in res.skips)
    text = f"{label}: {plural(evicted, 'pod')} evicted of {pods_total}"
    if refused:
        text += f"; refused {refused.total()} ({_counts(refused)})"
    if skipped:
        text += f"; skipped by evictionPolicy {skipped.total()} ({_counts(skipped)})"
    return text


def _counts(counter: Counter[str]) -> str:
    """``a 3, b 1``: most first, then by name."""
    return ", ".join(f"{k} {n}" for k, n in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))


@gc_paused()
def write_table(
    result: CycleResult,
    out: TextIO,
    *,
    now: str,
    pods_total: int,
    reports: Sequence[PluginReport] = (),
    view: View | None = None,
    heading: str = "Simulated one descheduling cycle",
) -> None:
    """One cycle: the per-plugin counts and the total first, then each plugin's evictions, the
    plugins' reports, node actions, refusals and skips (the first rows of each list, all of them
    with ``-o wide``)."""
    lines = _Lines(out, view)
    _write_cycle(lines, filter_result(result, lines.view), now, pods_total, reports, heading)


def _write_cycle(
    lines: _Lines,
    result: CycleResult,
    now: str,
    pods_total: int,
    reports: Sequence[PluginReport],
    heading: str,
) -> None:
    view = lines.view
    if result.skipped:
        lines.line(f"{heading}: skipped: {result.skipped}", "yellow")
        _write_node_actions(lines, result)
        return
    where = f" (namespaces {', '.join(sorted(view.namespaces))})" if view.namespaces else ""
    lines.line(f"{heading} at {now} over {result.nodes} ready nodes{where}.")
    lines.table(
        "Per plugin",
        ("profile", "plugin", "extension point", "evicted", "refused", "skipped"),
        [
            (profile, plugin, point, str(ev[0]), str(rf[0]), str(sk[0]))
            for profile, plugin, point, ev, rf, sk in _plugin_rows([result])
        ],
        right=(3, 4, 5),
    )
    for run in result.plugin_runs:
        if run.error:
            lines.line(
                f"{run.profile} / {run.plugin} ({run.extension_point}): plugin failed: "
                f"{view.cut(run.error, 2 * CELL)}",
                "red",
            )
    lines.line(_total_line([result], pods_total))
    lines.line()
    by_plugin: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {}
    for i, r in enumerate(result.evictions, 1):
        by_plugin.setdefault((r.profile, r.plugin), []).append(
            (str(i), f"{r.namespace}/{r.name}", r.node, view.cut(r.reason, 80))
        )
    for run in result.plugin_runs:
        rows = by_plugin.get((run.profile, run.plugin), [])
        if rows:
            lines.table(
                f"Evicted by {run.profile} / {run.plugin}: {len(rows)}",
                ("#", "pod", "node", "reason"),
                rows,
                right=(0,),
                what="evictions",
            )
    for report in reports:
        _write_report(lines, report)
    _write_node_actions(lines, result)
    _write_refusals(lines, result)
    _write_skips(lines, result)


def _write_report(lines: _Lines, report: PluginReport) -> None:
    """A plugin's report as it reads as a table: ``<profile> / <plugin>: <summary>``, then its rows."""
    table = report.report.to_table(lines.view.shows)
    title = f"{report.profile} / {report.plugin}: {table.summary}"
    if not table.rows:
        lines.line(title)
        return
    lines.table(title, table.header, table.rows, right=table.right, what=table.what)


def _write_refusals(lines: _Lines, result: CycleResult) -> None:
    """Evictions the API would refuse (a PodDisruptionBudget: 429, two of them: 500) or a limit
    stopped: counted by who asked and why, then the pods in the order they were asked for."""
    failures = result.failures
    if not failures:
        return
    view = lines.view
    groups = Counter((f"{r.profile}/{r.plugin}", _why(r)) for r in failures)
    lines.table(
        f"Refused: {len(failures)}",
        ("asked by", "why", "pods"),
        [(by, view.cut(why), str(n)) for (by, why), n in groups.most_common()],
        right=(2,),
    )
    lines.table(
        "Refused pods",
        ("pod", "node", "asked by", "why") if view.wide else ("pod", "asked by", "why"),
        [
            (f"{r.namespace}/{r.name}", r.node, f"{r.profile}/{r.plugin}", r.error or r.result.value)
            if view.wide
            else (f"{r.namespace}/{r.name}", f"{r.profile}/{r.plugin}", view.cut(r.error or r.result.value))
            for r in failures
        ],
        what="refused pods",
    )


def _why(r: Any) -> str:
    """A refusal's reason without its per-pod detail (the budget's name and counts)."""
    text: str = r.error or r.result.value
    return text.split(" (", 1)[0]


def _write_skips(lines: _Lines, result: CycleResult) -> None:
    """Evictions the profile's evictionPolicy skipped: counted by who asked and the rule, then
    the pods in the order they were asked for."""
    skips = result.skips
    if not skips:
        return
    view = lines.view
    groups = Counter((f"{r.profile}/{r.plugin}", r.skip_reason) for r in skips)
    lines.table(
        f"Skipped by evictionPolicy: {len(skips)}",
        ("asked by", "rule", "pods"),
        [(by, rule, str(n)) for (by, rule), n in groups.most_common()],
        right=(2,),
    )
    lines.table(
        "Skipped pods",
        ("pod", "node", "asked by", "reason", "why"),
        [
            (f"{r.namespace}/{r.name}", r.node, f"{r.profile}/{r.plugin}", r.skip_reason, view.cut(r.error))
            for r in skips
        ],
        what="skipped pods",
    )


def _write_node_actions(lines: _Lines, result: CycleResult) -> None:
    """Node downgrades (and expired ones removed) that the cycle made or, simulated, would make."""
    if not result.node_actions:
        return
    view = lines.view
    rows = []
    for a in result.node_actions:
        target = f"{a.method} {a.key}={a.value}" + (f":{a.effect}" if a.effect else "")
        until = a.expires_at.strftime("%Y-%m-%dT%H:%M:%SZ") if a.expires_at else ""
        why = a.reason + (f" [{', '.join(a.pods)}]" if a.pods else "")
        why += f" ({a.detail})" if a.detail else ""
        rows.append((a.node, f"{a.action} {target}: {a.result.value}", until, view.cut(why, 40)))
    lines.table(f"Node actions: {len(rows)}", ("node", "change", "until", "why"), rows, what="node actions")


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
                    **({"method": r.method} if r.method != "evict" else {}),
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
    reports: Sequence[PluginReport] = (),
    amend: Callable[[dict[str, Any]], None] | None = None,
    view: View | None = None,
) -> None:
    view = view or View()
    doc = simulation_to_json(filter_simulation(sim, view), now=now)
    _note_namespaces(doc, view)
    doc.update(reports_to_json(reports, view))
    if amend is not None:
        amend(doc)
    _write_json_doc(doc, out)


def filter_simulation(sim: Simulation, view: View) -> Simulation:
    """The simulation with only the pods of the view's namespaces (every namespace without a
    filter): their eviction attempts, placements and thrashing; the before/after picture stays
    the whole cluster's, its skew only the constraints of those namespaces."""
    if not view.namespaces:
        return sim
    shows = view.shows
    cycles = [
        replace(
            c,
            result=filter_result(c.result, view),
            placements=[p for p in c.placements if shows(p.namespace)],
            thrashing=[t for t in c.thrashing if shows(t.namespace)],
        )
        for c in sim.cycles
    ]
    before = replace(sim.before, skew=[k for k in sim.before.skew if shows(k.namespace)])
    after = replace(sim.after, skew=[k for k in sim.after.skew if shows(k.namespace)])
    return replace(sim, cycles=cycles, before=before, after=after)


@gc_paused()
def write_simulation_table(
    sim: Simulation,
    out: TextIO,
    *,
    now: str,
    pods_total: int,
    reports: Sequence[PluginReport] = (),
    view: View | None = None,
) -> None:
    """Each cycle (headed with its number when there are several) as :func:`write_table` and
    where its pods go; with several cycles, the totals over all of them; then the cluster before
    and after: utilisation, remaining violations and topology skew."""
    lines = _Lines(out, view)
    sim = filter_simulation(sim, lines.view)
    count = len(sim.cycles)
    for i, cycle in enumerate(sim.cycles):
        heading = "Simulated one descheduling cycle"
        if count > 1:
            lines.line(f"──── Cycle {cycle.cycle} of {count} ────", "bold")
            heading = f"Cycle {cycle.cycle} of {count}: simulated"
        last = i == count - 1
        _write_cycle(lines, cycle.result, now, pods_total, reports if last else (), heading)
        if sim.placement:
            _write_placements(lines, cycle)
    if count > 1:
        _write_cycle_totals(lines, sim, pods_total)
    if not sim.placement:
        _write_picture(lines, sim)
        return
    if count > 1:
        lines.line(f"Stopped: {sim.stop_reason}" + (" (converged)" if sim.converged else ""))
        lines.line()
    if sim.thrashing:
        lines.line(f"Thrashing: {len(sim.thrashing)} sign(s) that the policy does not converge.", "yellow")
        lines.line()
    _write_picture(lines, sim)


def _write_cycle_totals(lines: _Lines, sim: Simulation, pods_total: int) -> None:
    """Evictions per plugin in each cycle and over all of them, and the total line."""
    results = [c.result for c in sim.cycles]
    count = len(results)
    lines.line(f"──── All {count} cycles ────", "bold")
    header = ("profile", "plugin", *(f"cycle {c.cycle}" for c in sim.cycles), "evicted", "refused", "skipped")
    rows = [
        (profile, plugin, *(str(n) for n in ev), str(sum(ev)), str(sum(rf)), str(sum(sk)))
        for profile, plugin, _, ev, rf, sk in _plugin_rows(results)
    ]
    lines.table("Evicted per plugin and cycle", header, rows, right=range(2, len(header)))
    placed = sum(len(c.outcomes("placed")) for c in sim.cycles)
    pending = sum(len(c.outcomes("pending")) for c in sim.cycles)
    gone = sum(len(c.outcomes("gone")) for c in sim.cycles)
    text = _total_line(results, pods_total, f"Total over {count} cycles")
    if sim.placement:
        text += f"; placed {placed}, pending {pending}, gone {gone}"
    lines.line(text)


def _write_placements(lines: _Lines, cycle: Any) -> None:
    placed = cycle.outcomes("placed")
    pending = cycle.outcomes("pending")
    gone = cycle.outcomes("gone")
    if not (placed or pending or gone):
        return
    view = lines.view
    lines.line(
        f"Placement (cycle {cycle.cycle}): {len(placed)} placed, {len(pending)} pending, {len(gone)} gone"
    )
    if placed:
        # the replacement's name only in -o wide (and the JSON): the summary stays narrow
        header = (
            ("pod", "from", "to", "replacement", "score") if view.wide else ("pod", "from", "to", "score")
        )
        rows: list[tuple[str, ...]] = [
            (
                f"{p.namespace}/{p.name}" + (" (retried)" if p.retried else ""),
                p.evicted_from,
                p.node + (" (same node)" if p.same_node else ""),
                *((p.replacement,) if view.wide else ()),
                "-" if p.score is None else str(p.score),
            )
            for p in placed
        ]
        lines.table("Where the replacements land", header, rows, right=(len(header) - 1,), what="placed pods")
    if pending:
        lines.table(
            "Pending: no node would take them",
            ("pod", "from", "why (kube-scheduler's message)"),
            [(f"{p.namespace}/{p.name}", p.evicted_from, view.cut(p.reason)) for p in pending],
            what="pending pods",
        )
    if gone:
        lines.table(
            "Gone: nothing re-creates them",
            ("pod", "from", "why"),
            [(f"{p.namespace}/{p.name}", p.evicted_from, view.cut(p.reason)) for p in gone],
            what="gone pods",
        )
    if cycle.thrashing:
        lines.table(
            f"Thrashing (cycle {cycle.cycle}): {len(cycle.thrashing)}",
            ("kind", "pod", "detail"),
            [(t.kind, f"{t.namespace}/{t.name}", view.cut(t.detail)) for t in cycle.thrashing],
            what="signs",
        )


#: A constraint's skew before and after (None: not declared then).
SkewPair = tuple["ConstraintSkew | None", "ConstraintSkew | None"]


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
    view = lines.view
    shown = view.rows(pairs)
    rows = []
    for b, a in shown:
        ref = skew_ref(b, a)
        before = str(b.skew) if b is not None else "-"
        after = str(a.skew) if a is not None else "-"
        rows.append(
            (
                f"{ref.namespace} / {ref.declared_by}",
                f"{ref.topology_key} ({ref.when_unsatisfiable})",
                view.cut(ref.selector, 40),
                str(ref.max_skew),
                f"{before} → {after}",
            )
        )
    lines.table(
        f"Topology skew per constraint ({len(rows)} of {len(pairs)}, worst first)",
        ("namespace / declared by", "topology key", "selector", "max", "skew"),
        rows,
        right=(3, 4),
        what="constraints",
        more=len(pairs) - len(rows),
    )
