"""The HTML report of ``desched simulate --report DIR``: DIR/index.html and the PNG charts next to it.

The page is self-contained apart from those PNGs (inline CSS, no scripts, no web fonts), so the
directory can be archived, attached to a ticket or served as static files.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from desched import __version__
from desched.report.charts import Chart, write_charts
from desched.report.output import skew_pairs, skew_ref

if TYPE_CHECKING:
    from desched.simulation import PodPlacement, Simulation

__all__ = ["MAX_NODE_ROWS", "write_report"]

#: Nodes listed one by one; beyond, the nodes whose utilisation changed most.
MAX_NODE_ROWS = 300
#: Evictions (and pending pods) listed per cycle; all of them are in ``-o json``.
MAX_POD_ROWS = 2000
MAX_SKEW_ROWS = 200

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
th, td { border-bottom: 1px solid #e4e7eb; padding: 4px 8px; text-align: left; vertical-align: top; }
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
    """A table; cells are HTML already (escape text with :func:`_e`)."""
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
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _card(value: object, label: str) -> str:
    return f'<div class="card"><b>{_e(value)}</b><span>{_e(label)}</span></div>'


def write_report(
    sim: Simulation,
    directory: str | Path,
    *,
    now: str,
    snapshot: str = "",
    policy: str = "",
    pods_total: int = 0,
) -> Path:
    """Write the charts and DIR/index.html for ``sim`` (a placement Simulation); returns the page."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    charts = write_charts(sim, out)
    page = out / "index.html"
    page.write_text(
        _page(sim, charts, now=now, snapshot=snapshot, policy=policy, pods_total=pods_total), encoding="utf-8"
    )
    return page


def _page(
    sim: Simulation, charts: list[Chart], *, now: str, snapshot: str, policy: str, pods_total: int
) -> str:
    evictions = [r for c in sim.cycles for r in c.result.evictions]
    placements = sim.placements
    placed = [p for p in placements if p.outcome == "placed"]
    pending = [p for p in placements if p.outcome == "pending"]
    gone = [p for p in placements if p.outcome == "gone"]
    before_v = sum(sim.before.violations.values())
    after_v = sum(sim.after.violations.values())
    first = sim.cycles[0].result
    meta = [f"at {_e(now)}", f"{_e(first.nodes)} ready nodes", f"{_e(pods_total)} pods"]
    if snapshot:
        meta.append(f"snapshot <code>{_e(snapshot)}</code>")
    if policy:
        meta.append(f"policy <code>{_e(policy)}</code>")
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
        parts.append(
            f'<figure><img src="{_e(chart.file)}" alt="{_e(chart.title)}: {_e(chart.description)}">'
            f"<figcaption>{_e(chart.title)}: {_e(chart.description)}</figcaption></figure>"
        )

    parts.append(_cycles_section(sim))
    if sim.placement and pending:
        parts.append("<h2>Pending pods</h2>")
        parts.append(
            "<p>No node would take these replacements; kube-scheduler would say why in their "
            "<code>PodScheduled</code> condition.</p>"
        )
        if len(pending) > MAX_POD_ROWS:
            parts.append(
                f"<p>The first {MAX_POD_ROWS} of {len(pending)}; <code>-o json</code> lists them all.</p>"
            )
            pending = pending[:MAX_POD_ROWS]
        parts.append(
            _table(
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
                    for p in pending
                ),
                numeric=(0, 4),
            )
        )
    if sim.thrashing:
        parts.append("<h2>Thrashing</h2>")
        parts.append(
            _table(
                ["cycle", "kind", "pod", "node", "detail"],
                (
                    [_e(t.cycle), _e(t.kind), _e(f"{t.namespace}/{t.name}"), _e(t.node), _e(t.detail)]
                    for t in sim.thrashing
                ),
                numeric=(0,),
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


def _cycles_section(sim: Simulation) -> str:
    parts = ["<h2>Evictions and where the pods go</h2>"]
    for cycle in sim.cycles:
        result = cycle.result
        outcome_of: dict[tuple[str, str], PodPlacement] = {}
        for p in cycle.placements:
            if not p.retried:
                outcome_of[(p.namespace, p.name)] = p
        if len(sim.cycles) > 1:
            parts.append(f"<h3>Cycle {cycle.cycle}: {len(result.evictions)} eviction(s)</h3>")
        if result.skipped:
            parts.append(f"<p>Skipped: {_e(result.skipped)}</p>")
            continue
        if result.skips:
            skips = result.skips[:MAX_POD_ROWS]
            parts.append(f"<p>Skipped by evictionPolicy: {len(result.skips)}</p>")
            parts.append(
                _table(
                    ("pod", "node", "asked by", "reason", "why"),
                    [
                        (
                            _e(f"{r.namespace}/{r.name}"),
                            _e(r.node),
                            _e(f"{r.profile}/{r.plugin}"),
                            _e(r.skip_reason),
                            _e(r.error),
                        )
                        for r in skips
                    ],
                )
            )
        if not result.evictions:
            parts.append("<p>Nothing evicted.</p>")
            continue
        rows = []
        classes = []
        shown = result.evictions[:MAX_POD_ROWS]
        if len(result.evictions) > len(shown):
            parts.append(
                f"<p>The first {len(shown)} of {len(result.evictions)} evictions; "
                "<code>-o json</code> lists them all.</p>"
            )
        for n, r in enumerate(shown, 1):
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
            rows.append(
                [
                    _e(n),
                    _e(f"{r.namespace}/{r.name}"),
                    _e(r.node),
                    _e(f"{r.profile} / {r.plugin}"),
                    _e(r.reason),
                    where,
                ]
            )
            warn = outcome is not None and (outcome.outcome == "pending" or outcome.same_node)
            classes.append("warn" if warn else "")
        parts.append(
            _table(
                ["#", "pod", "node", "evicted by", "reason", "replacement"],
                rows,
                numeric=(0,),
                row_classes=classes,
            )
        )
        retried = [p for p in cycle.placements if p.retried]
        if retried:
            parts.append("<p>Pending replacements of earlier cycles, tried again:</p>")
            parts.append(
                _table(
                    ["pod", "replacement", "outcome"],
                    (
                        [
                            _e(f"{p.namespace}/{p.name}"),
                            _e(p.replacement),
                            _e(f"→ {p.node}" if p.outcome == "placed" else f"still Pending: {p.reason}"),
                        ]
                        for p in retried
                    ),
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
        parts.append(f"<h3>Topology skew ({min(len(pairs), MAX_SKEW_ROWS)} of {len(pairs)} constraints)</h3>")
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
        parts.append(
            _table(
                [
                    "namespace",
                    "declared by",
                    "topology key",
                    "when unsatisfiable",
                    "selector",
                    "maxSkew",
                    "skew before",
                    "skew after",
                    "domains",
                ],
                rows,
                numeric=(5, 6, 7, 8),
                row_classes=classes,
            )
        )

    before = {u.name: u for u in sim.before.nodes}
    after = {u.name: u for u in sim.after.nodes}
    names = sorted(set(before) | set(after))
    title = "Per node"
    if len(names) > MAX_NODE_ROWS:

        def change(name: str) -> float:
            b, a = before.get(name), after.get(name)
            if b is None or a is None:
                return float("inf")
            return float(abs(a.cpu - b.cpu) + abs(a.memory - b.memory) + abs(a.pods - b.pods))

        names = sorted(sorted(names, key=change, reverse=True)[:MAX_NODE_ROWS])
        title = f"Per node ({MAX_NODE_ROWS} whose utilisation changed most)"
    parts.append(f"<h3>{_e(title)}</h3>")
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
    parts.append(_table(["node", "cpu %", "memory %", "pods %"], rows, numeric=(1, 2, 3)))
    return "\n".join(parts)
