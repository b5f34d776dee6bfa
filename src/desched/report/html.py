"""The HTML report of ``desched simulate --report FILE.html`` (or ``--report DIR``: DIR/index.html).

One self-contained file to attach to a ticket or mail: inline CSS, the charts inlined as PNG data
URIs, no scripts, no web fonts, no local paths (the snapshot and policy by file name only). It
stays usable at 5,000 nodes: counts first, every per-pod and per-node list sorted by what matters
and folded in a ``<details>`` (closed, past a few rows), each cut at a bound with a line saying
``-o json`` has them all.
"""

from __future__ import annotations

import base64
import html
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from desched import __version__
from desched.report.charts import Chart, Threshold, render_charts
from desched.report.output import skew_pairs, skew_ref

if TYPE_CHECKING:
    from desched.simulation import PodPlacement, Simulation

__all__ = ["MAX_NODE_ROWS", "report_path", "write_report"]

#: Nodes listed (those whose utilisation changed most first); all of them are in ``-o json``.
MAX_NODE_ROWS = 300
#: Rows of each per-pod list (a plugin's evictions, the refusals, ...); all of them are in ``-o json``.
MAX_POD_ROWS = 1000
MAX_SKEW_ROWS = 200
#: Lists up to this long are shown open; longer ones folded.
OPEN_ROWS = 10
#: Constraints shown before the fold of the skew table.
SKEW_OPEN_ROWS = 20

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2933;
       margin: 0 auto; max-width: 1200px; padding: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin-top: 32px;
     border-bottom: 1px solid #d9e2ec; padding-bottom: 4px; } h3 { font-size: 15px; }
.meta { color: #52606d; margin-bottom: 16px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid #d9e2ec; border-radius: 6px; padding: 10px 14px; min-width: 110px; }
.card b { display: block; font-size: 22px; } .card span { color: #52606d; font-size: 12px; }
table { border-collapse: collapse; margin: 8px 0 16px; width: 100%; }
.scroll { overflow-x: auto; max-width: 100%; }
th, td { border-bottom: 1px solid #e4e7eb; padding: 4px 8px; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
details { margin: 6px 0; } summary { cursor: pointer; font-weight: 600; }
th { background: #f5f7fa; font-weight: 600; } td.num, th.num { text-align: right; white-space: nowrap; }
tr.warn td { background: #fff8e1; } .placed { color: #1f7a3a; } .pending { color: #b42318; }
.gone { color: #52606d; } .same { color: #b54708; font-weight: 600; }
figure { margin: 16px 0; } figure img { max-width: 100%; border: 1px solid #e4e7eb; }
figcaption { color: #52606d; font-size: 12px; } code { font-size: 12px; }
.note { color: #52606d; font-size: 12px; }
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    numeric: Sequence[int] = (),
    row_classes: Sequence[str] | None = None,
) -> str:
    """A table; cells are HTML already (escape text with :func:`_e`). Long cells wrap anywhere
    (names, messages), and a table still too wide scrolls inside its box, not the page."""
    head = "".join(
        f'<th class="num">{_e(h)}</th>' if i in numeric else f"<th>{_e(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for r, row in enumerate(rows):
        cls = f' class="{row_classes[r]}"' if row_classes and row_classes[r] else ""
        cells = "".join(
            f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def _folded(summary: str, body: str, *, rows: int) -> str:
    """``body`` under a ``<details>`` whose ``summary`` says what it holds; open when short."""
    opened = " open" if rows <= OPEN_ROWS else ""
    return f"<details{opened}><summary>{summary}</summary>{body}</details>"


def _cut_note(shown: int, total: int, what: str) -> str:
    if shown >= total:
        return ""
    return (
        f'<p class="note">The first {shown} of {total} {_e(what)}; <code>-o json</code> lists them all.</p>'
    )


def _card(value: object, label: str) -> str:
    return f'<div class="card"><b>{_e(value)}</b><span>{_e(label)}</span></div>'


def report_path(target: str | Path) -> Path:
    """The page ``--report`` writes: ``target`` itself when it names an ``.html``/``.htm`` file,
    else ``target/index.html`` (a directory, as before: made if missing)."""
    path = Path(target)
    if path.suffix.lower() in (".html", ".htm") and not path.is_dir():
        return path
    return path / "index.html"


def write_report(
    sim: Simulation,
    target: str | Path,
    *,
    now: str,
    snapshot: str = "",
    policy: str = "",
    pods_total: int = 0,
    thresholds: Sequence[Threshold] = (),
) -> Path:
    """Write the self-contained page for ``sim`` (a placement Simulation) at
    :func:`report_path` of ``target``; returns it."""
    page = report_path(target)
    page.parent.mkdir(parents=True, exist_ok=True)
    charts = render_charts(sim, thresholds)
    text = _page(sim, charts, now=now, snapshot=snapshot, policy=policy, pods_total=pods_total)
    page.write_text(text, encoding="utf-8")
    return page


def _name(path: str) -> str:
    """A file's name without its folders: the report is shared, the local paths stay here."""
    return PurePath(path).name if path else ""


def _page(
    sim: Simulation, charts: list[Chart], *, now: str, snapshot: str, policy: str, pods_total: int
) -> str:
    results = [c.result for c in sim.cycles]
    evictions = [r for res in results for r in res.evictions]
    refused = [r for res in results for r in res.failures]
    skipped = [r for res in results for r in res.skips]
    placements = sim.placements
    placed = [p for p in placements if p.outcome == "placed"]
    pending = [p for p in placements if p.outcome == "pending"]
    gone = [p for p in placements if p.outcome == "gone"]
    before_v = sum(sim.before.violations.values())
    after_v = sum(sim.after.violations.values())
    first = results[0]
    meta = [f"at {_e(now)}", f"{_e(first.nodes)} ready nodes", f"{_e(pods_total)} pods"]
    if snapshot:
        meta.append(f"snapshot <code>{_e(_name(snapshot))}</code>")
    if policy:
        meta.append(f"policy <code>{_e(_name(policy))}</code>")
    meta.append(f"scoring: {_e(sim.options.score)}")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>desched simulate report</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>desched simulate: what would be evicted, and where it would go</h1>",
        f'<div class="meta">{" · ".join(meta)}</div>',
    ]
    if first.skipped:
        parts.append(f"<p><b>Cycle skipped:</b> {_e(first.skipped)}</p>")
    cards = [
        _card(len(sim.cycles), "cycle(s) run"),
        _card(len(evictions), "pods evicted"),
        _card(len(refused), "refused"),
        _card(len(skipped), "skipped by evictionPolicy"),
    ]
    if sim.placement:
        cards += [
            _card(len(placed), "replacements placed"),
            _card(len(pending), "left Pending"),
            _card(len(gone), "gone (not re-created)"),
            _card(len(sim.thrashing), "thrashing signs"),
        ]
    cards.append(_card(f"{before_v} → {after_v}", "pods violating policy rules"))
    parts.append(f'<div class="cards">{"".join(cards)}</div>')
    stop = _e(sim.stop_reason) + (" — the policy converged." if sim.converged else ".")
    parts.append(f"<p>Stopped: {stop}</p>")

    parts.append("<h2>Charts</h2>")
    for chart in charts:
        data = base64.b64encode(chart.png).decode("ascii")
        parts.append(
            f'<figure><img src="data:image/png;base64,{data}" '
            f'alt="{_e(chart.title)}: {_e(chart.description)}">'
            f"<figcaption>{_e(chart.title)}: {_e(chart.description)}</figcaption></figure>"
        )
    parts.append(_plugins_section(sim))
    parts.append(_refusals_section(sim))
    parts.append(_skips_section(sim))
    parts.append(_evictions_section(sim))
    if sim.placement and pending:
        parts.append("<h2>Pending pods</h2>")
        parts.append(
            "<p>No node would take these replacements; kube-scheduler would say why in their "
            "<code>PodScheduled</code> condition. Highest priority first.</p>"
        )
        ordered = sorted(pending, key=lambda p: (-p.priority, p.cycle))
        shown = ordered[:MAX_POD_ROWS]
        table = _table(
            ["cycle", "pod", "replacement", "evicted from", "priority", "why"],
            (
                [
                    _e(p.cycle),
                    _e(f"{p.namespace}/{p.name}"),
                    _e(p.replacement),
                    _e(p.evicted_from),
                    _e(p.priority),
                    _e(p.reason),
                ]
                for p in shown
            ),
            numeric=(0, 4),
        )
        parts.append(
            _folded(
                f"{len(pending)} pending pod(s)",
                _cut_note(len(shown), len(pending), "pending pods") + table,
                rows=len(pending),
            )
        )
    if sim.placement and gone:
        parts.append("<h2>Gone: nothing re-creates them</h2>")
        shown_gone = gone[:MAX_POD_ROWS]
        table = _table(
            ["cycle", "pod", "evicted from", "why"],
            (
                [_e(p.cycle), _e(f"{p.namespace}/{p.name}"), _e(p.evicted_from), _e(p.reason)]
                for p in shown_gone
            ),
            numeric=(0,),
        )
        parts.append(
            _folded(
                f"{len(gone)} pod(s) gone",
                _cut_note(len(shown_gone), len(gone), "pods") + table,
                rows=len(gone),
            )
        )
    if sim.thrashing:
        parts.append("<h2>Thrashing</h2>")
        shown_t = sim.thrashing[:MAX_POD_ROWS]
        table = _table(
            ["cycle", "kind", "pod", "node", "detail"],
            (
                [_e(t.cycle), _e(t.kind), _e(f"{t.namespace}/{t.name}"), _e(t.node), _e(t.detail)]
                for t in shown_t
            ),
            numeric=(0,),
        )
        parts.append(
            _folded(
                f"{len(sim.thrashing)} sign(s) that the policy does not converge",
                _cut_note(len(shown_t), len(sim.thrashing), "signs") + table,
                rows=len(sim.thrashing),
            )
        )
    parts.append(_picture_section(sim))
    parts.append(
        f'<p class="note">desched {_e(__version__)}. Placement follows kube-scheduler\'s default profile '
        "(filters: NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit, PodTopologySpread, "
        "InterPodAffinity); not modelled: images, volumes, node ports, DRA, preemption. "
        "Utilisation is requests over allocatable. See docs/simulation.md.</p>"
    )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _plugins_section(sim: Simulation) -> str:
    """Each profile/plugin's evictions (per cycle when several), refusals and skips: most
    evictions first."""
    many = len(sim.cycles) > 1
    keys: list[tuple[str, str, str]] = []
    for c in sim.cycles:
        for run in c.result.plugin_runs:
            key = (run.profile, run.plugin, run.extension_point)
            if key not in keys:
                keys.append(key)
    evicted = {k: [0] * len(sim.cycles) for k in keys}
    refused: Counter[tuple[str, str]] = Counter()
    skipped: Counter[tuple[str, str]] = Counter()
    failed: dict[tuple[str, str], str] = {}
    for i, c in enumerate(sim.cycles):
        point = {(run.profile, run.plugin): run.extension_point for run in c.result.plugin_runs}
        for run in c.result.plugin_runs:
            if run.error:
                failed[(run.profile, run.plugin)] = run.error
        for r in c.result.evictions:
            key = (r.profile, r.plugin, point.get((r.profile, r.plugin), ""))
            evicted.setdefault(key, [0] * len(sim.cycles))[i] += 1
        refused.update((r.profile, r.plugin) for r in c.result.failures)
        skipped.update((r.profile, r.plugin) for r in c.result.skips)
    order = sorted(
        evicted, key=lambda k: (-sum(evicted[k]), -refused[k[:2]], keys.index(k) if k in keys else 0)
    )
    headers = ["profile", "plugin", "extension point"]
    if many:
        headers += [f"cycle {c.cycle}" for c in sim.cycles]
    headers += ["evicted", "refused", "skipped", "note"]
    rows = []
    for k in order:
        counts = [_e(n) for n in evicted[k]] if many else []
        note = f"plugin failed: {_e(failed[k[:2]])}" if k[:2] in failed else ""
        rows.append(
            [
                _e(k[0]),
                _e(k[1]),
                _e(k[2]),
                *counts,
                _e(sum(evicted[k])),
                _e(refused[k[:2]]),
                _e(skipped[k[:2]]),
                note,
            ]
        )
    first_num = 3
    numeric = tuple(range(first_num, len(headers) - 1))
    return "<h2>Per plugin</h2>" + _table(headers, rows, numeric=numeric)


def _grouped(
    records: Sequence[object], key: Callable[[object], tuple[str, str]], headers: Sequence[str]
) -> str:
    counts = Counter(key(r) for r in records)
    return _table(
        [*headers, "pods"],
        ([_e(a), _e(b), _e(n)] for (a, b), n in counts.most_common()),
        numeric=(2,),
    )


def _refusals_section(sim: Simulation) -> str:
    """Evictions the eviction API would refuse (PodDisruptionBudgets) or a limit stopped: counted
    by who asked and why (most first), then the pods."""
    records = [(c.cycle, r) for c in sim.cycles for r in c.result.failures]
    if not records:
        return "<h2>Refused</h2><p>No eviction would be refused.</p>"
    parts = [f"<h2>Refused: {len(records)}</h2>"]
    parts.append(
        _grouped(
            [r for _, r in records],
            lambda r: (f"{r.profile}/{r.plugin}", (r.error or r.result.value).split(" (", 1)[0]),  # type: ignore[attr-defined]
            ["asked by", "why"],
        )
    )
    shown = records[:MAX_POD_ROWS]
    table = _table(
        ["cycle", "pod", "node", "asked by", "why"],
        (
            [
                _e(k),
                _e(f"{r.namespace}/{r.name}"),
                _e(r.node),
                _e(f"{r.profile}/{r.plugin}"),
                _e(r.error or r.result.value),
            ]
            for k, r in shown
        ),
        numeric=(0,),
    )
    parts.append(
        _folded(
            f"the {len(records)} refused pod(s)",
            _cut_note(len(shown), len(records), "refusals") + table,
            rows=len(records),
        )
    )
    return "".join(parts)


def _skips_section(sim: Simulation) -> str:
    records = [(c.cycle, r) for c in sim.cycles for r in c.result.skips]
    if not records:
        return ""
    parts = [f"<h2>Skipped by evictionPolicy: {len(records)}</h2>"]
    parts.append(
        _grouped(
            [r for _, r in records],
            lambda r: (f"{r.profile}/{r.plugin}", r.skip_reason),  # type: ignore[attr-defined]
            ["asked by", "rule"],
        )
    )
    shown = records[:MAX_POD_ROWS]
    table = _table(
        ["cycle", "pod", "node", "asked by", "rule", "why"],
        (
            [
                _e(k),
                _e(f"{r.namespace}/{r.name}"),
                _e(r.node),
                _e(f"{r.profile}/{r.plugin}"),
                _e(r.skip_reason),
                _e(r.error),
            ]
            for k, r in shown
        ),
        numeric=(0,),
    )
    parts.append(
        _folded(
            f"the {len(records)} skipped pod(s)",
            _cut_note(len(shown), len(records), "skips") + table,
            rows=len(records),
        )
    )
    return "".join(parts)


def _evictions_section(sim: Simulation) -> str:
    """Per profile/plugin (most evictions first), its evictions with where each replacement
    goes: the ones that need a look (Pending, back on the same node) first, then in eviction
    order."""
    parts = ["<h2>Evictions and where the pods go</h2>"]
    rows_of: dict[str, list[tuple[bool, int, list[str]]]] = {}
    n = 0
    for cycle in sim.cycles:
        outcome_of: dict[tuple[str, str], PodPlacement] = {}
        for p in cycle.placements:
            if not p.retried:
                outcome_of[(p.namespace, p.name)] = p
        for r in cycle.result.evictions:
            n += 1
            outcome = outcome_of.get((r.namespace, r.name))
            if outcome is None:
                where = '<span class="gone">not simulated</span>'
            elif outcome.outcome == "placed":
                where = (
                    f'<span class="placed">→ {_e(outcome.node)}</span> <code>{_e(outcome.replacement)}</code>'
                )
                if outcome.same_node:
                    where += ' <span class="same">same node</span>'
            elif outcome.outcome == "pending":
                where = f'<span class="pending">Pending</span>: {_e(outcome.reason)}'
            else:
                where = f'<span class="gone">gone</span>: {_e(outcome.reason)}'
            warn = outcome is not None and (outcome.outcome == "pending" or outcome.same_node)
            row = [_e(n), _e(cycle.cycle), _e(f"{r.namespace}/{r.name}"), _e(r.node), _e(r.reason), where]
            rows_of.setdefault(f"{r.profile} / {r.plugin}", []).append((warn, n, row))
    if not rows_of:
        return "".join(parts) + "<p>Nothing evicted.</p>"
    for label in sorted(rows_of, key=lambda k: -len(rows_of[k])):
        entries = sorted(rows_of[label], key=lambda e: (not e[0], e[1]))
        shown = entries[:MAX_POD_ROWS]
        table = _table(
            ["#", "cycle", "pod", "node", "reason", "replacement"],
            [row for _, _, row in shown],
            numeric=(0, 1),
            row_classes=["warn" if warn else "" for warn, _, _ in shown],
        )
        warned = sum(1 for warn, _, _ in entries if warn)
        summary = f"{_e(label)}: {len(entries)} eviction(s)" + (f", {warned} to look at" if warned else "")
        parts.append(
            _folded(summary, _cut_note(len(shown), len(entries), "evictions") + table, rows=len(entries))
        )
    retried = [p for c in sim.cycles for p in c.placements if p.retried]
    if retried:
        table = _table(
            ["cycle", "pod", "replacement", "outcome"],
            (
                [
                    _e(p.cycle),
                    _e(f"{p.namespace}/{p.name}"),
                    _e(p.replacement),
                    _e(f"→ {p.node}" if p.outcome == "placed" else f"still Pending: {p.reason}"),
                ]
                for p in retried[:MAX_POD_ROWS]
            ),
            numeric=(0,),
        )
        parts.append(
            _folded(
                f"Pending replacements of earlier cycles, tried again: {len(retried)}",
                table,
                rows=len(retried),
            )
        )
    return "\n".join(parts)


def _picture_section(sim: Simulation) -> str:
    parts = ["<h2>Before and after</h2>", "<h3>Node utilisation (requests as % of allocatable)</h3>"]
    rows = []
    for resource in ("cpu", "memory", "pods"):
        stats_b, stats_a = sim.before.stats(resource), sim.after.stats(resource)
        rows.append(
            [_e(resource)]
            + [
                _e(f"{getattr(stats_b, f):.1f} → {getattr(stats_a, f):.1f}")
                for f in ("mean", "stddev", "min", "max")
            ]
        )
    parts.append(_table(["resource", "mean", "stddev", "min", "max"], rows, numeric=(1, 2, 3, 4)))

    parts.append("<h3>Pods still violating</h3>")
    parts.append(
        _table(
            ["kind", "before", "after"],
            (
                [_e(kind), _e(count), _e(sim.after.violations.get(kind, 0))]
                for kind, count in sim.before.violations.items()
            ),
            numeric=(1, 2),
        )
    )
    parts.append(
        '<p class="note">taints: pods on a node with a NoSchedule/NoExecute taint they do not tolerate; '
        "nodeAffinity: pods whose node no longer matches their nodeSelector or required node affinity; "
        "podAntiAffinity: pods sharing a topology domain with a pod their required anti-affinity "
        "excludes; topologySpread: pods above the global minimum + maxSkew of their DoNotSchedule "
        "constraint's domain.</p>"
    )

    pairs = skew_pairs(sim)
    if pairs:
        headers = [
            "namespace",
            "declared by",
            "topology key",
            "when unsatisfiable",
            "selector",
            "maxSkew",
            "skew before",
            "skew after",
            "domains",
        ]
        rows = []
        classes = []
        for b, a in pairs[:MAX_SKEW_ROWS]:
            ref = skew_ref(b, a)
            rows.append(
                [
                    _e(ref.namespace),
                    _e(ref.declared_by),
                    _e(ref.topology_key),
                    _e(ref.when_unsatisfiable),
                    f"<code>{_e(ref.selector)}</code>",
                    _e(ref.max_skew),
                    _e(b.skew if b is not None else "-"),
                    _e(a.skew if a is not None else "-"),
                    _e(a.domains if a is not None else ref.domains),
                ]
            )
            over = any(x is not None and x.skew > x.max_skew for x in (b, a))
            classes.append("warn" if over else "")
        top = SKEW_OPEN_ROWS
        parts.append(f"<h3>Topology skew per constraint, worst first ({len(pairs)} constraints)</h3>")
        parts.append(_table(headers, rows[:top], numeric=(5, 6, 7, 8), row_classes=classes[:top]))
        if len(rows) > top:
            rest = _cut_note(len(rows), len(pairs), "constraints") + _table(
                headers, rows[top:], numeric=(5, 6, 7, 8), row_classes=classes[top:]
            )
            parts.append(_folded(f"{len(pairs) - top} more constraint(s)", rest, rows=len(pairs)))

    before = {u.name: u for u in sim.before.nodes}
    after = {u.name: u for u in sim.after.nodes}

    def change(name: str) -> float:
        b, a = before.get(name), after.get(name)
        if b is None or a is None:
            return float("inf")
        return float(abs(a.cpu - b.cpu) + abs(a.memory - b.memory) + abs(a.pods - b.pods))

    every = sorted(set(before) | set(after))
    names = sorted(every, key=lambda name: (-change(name), name))[:MAX_NODE_ROWS]
    rows = []
    for name in names:
        node_b, node_a = before.get(name), after.get(name)
        rows.append(
            [_e(name)]
            + [
                _e(
                    f"{getattr(node_b, r):.1f} → {getattr(node_a, r):.1f}"
                    if node_b is not None and node_a is not None
                    else "-"
                )
                for r in ("cpu", "memory", "pods")
            ]
        )
    parts.append("<h3>Per node, the most changed first</h3>")
    table = _cut_note(len(names), len(every), "nodes") + _table(
        ["node", "cpu %", "memory %", "pods %"], rows, numeric=(1, 2, 3)
    )
    parts.append(_folded(f"{len(every)} node(s)", table, rows=len(every)))
    return "\n".join(parts)
