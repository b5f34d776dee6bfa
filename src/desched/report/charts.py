"""PNG charts of a ``desched simulate`` run (matplotlib, Agg backend, imported only when used).

matplotlib is the optional extra ``report`` (``pip install 'desched[report]'``); without it,
:func:`require_matplotlib` raises a :class:`~desched.errors.UserError` naming the extra.

Charts (PNG images the HTML page inlines as data URIs; :func:`write_charts` also writes them as
files):

- ``utilisation-<resource>.png``: requests as % of allocatable per node, before and after (bars
  per node up to :data:`MAX_NODE_BARS` nodes; a histogram of nodes per 5% band beyond), with the
  policy's utilisation thresholds of that resource drawn across (those plugin args give as
  :class:`~desched.framework.DrawsThresholds`);
- ``evictions-by-plugin.png``: evictions per profile/plugin, stacked per cycle;
- ``topology-skew.png``: skew before and after of the worst constraints, against their maxSkew.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from desched.errors import UserError
from desched.framework import DrawsThresholds

if TYPE_CHECKING:
    from desched.simulation import Simulation

__all__ = [
    "MAX_NODE_BARS",
    "MISSING_MATPLOTLIB",
    "Chart",
    "Threshold",
    "render_charts",
    "require_matplotlib",
    "write_charts",
]

MISSING_MATPLOTLIB = "needs matplotlib, which is not installed: pip install 'desched[report]'"

#: Up to this many nodes the utilisation charts show one bar pair per node.
MAX_NODE_BARS = 40
#: Constraints in the skew chart.
MAX_SKEW_ROWS = 20

BEFORE_COLOUR = "#9aa5b1"
AFTER_COLOUR = "#2b7bb9"
LIMIT_COLOUR = "#d62728"
CYCLE_COLOURS = ("#2b7bb9", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7")
RESOURCES = ("cpu", "memory", "pods")
THRESHOLD_COLOURS = ("#e8a33d", "#7b3fa0", "#2a9d8f", "#c0392b")


THRESHOLD_STYLES = ("--", "-.", ":")


@dataclass(frozen=True, slots=True)
class Chart:
    file: str
    title: str
    description: str
    #: The PNG image.
    png: bytes = b""


@dataclass(frozen=True, slots=True)
class Threshold:
    """A utilisation threshold of the policy, drawn across the utilisation chart of its resource:
    e.g. ``Threshold("cpu", 20.0, "default/LowNodeUtilization thresholds")``."""

    resource: str
    value: float
    label: str


def policy_thresholds(profiles: Sequence[Any]) -> list[Threshold]:
    """The utilisation thresholds of a policy's profiles (``Policy.profiles``) that apply to
    requests as % of allocatable: what each plugin's args give as
    :class:`~desched.framework.DrawsThresholds` (LowNodeUtilization's ``thresholds`` and
    ``targetThresholds``, HighNodeUtilization's ``thresholds``), each resource the charts draw."""
    out: list[Threshold] = []
    for profile in profiles:
        for plugin, args in profile.args.items():
            if not isinstance(args, DrawsThresholds):
                continue
            for resource, value, word in args.chart_thresholds():
                if resource in RESOURCES:
                    out.append(Threshold(resource, value, f"{profile.name}/{plugin} {word}"))
    return out


def require_matplotlib() -> None:
    """Fail with one clear line if the ``report`` extra is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError("--report", MISSING_MATPLOTLIB) from None


def _pyplot() -> Any:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "font.size": 10,
            "axes.titlesize": 12,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "figure.dpi": 100,
        }
    )
    return plt


def render_charts(sim: Simulation, thresholds: Sequence[Threshold] = ()) -> list[Chart]:
    """Draw every chart of ``sim`` (a :class:`desched.simulation.Simulation`) as PNG, in page
    order; ``thresholds`` are drawn on the utilisation chart of their resource."""
    plt = _pyplot()
    charts = [
        _utilisation(plt, sim, resource, [t for t in thresholds if t.resource == resource])
        for resource in RESOURCES
    ]
    charts.append(_evictions(plt, sim))
    charts.append(_skew(plt, sim))
    return charts


def write_charts(sim: Simulation, directory: Path, thresholds: Sequence[Threshold] = ()) -> list[Chart]:
    """:func:`render_charts`, each PNG also written into ``directory`` under its file name."""
    directory.mkdir(parents=True, exist_ok=True)
    charts = render_charts(sim, thresholds)
    for chart in charts:
        (directory / chart.file).write_bytes(chart.png)
    return charts


def _save(plt: Any, fig: Any) -> bytes:
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": "desched"})
    plt.close(fig)
    return buffer.getvalue()


def _utilisation(plt: Any, sim: Simulation, resource: str, thresholds: Sequence[Threshold]) -> Chart:
    name = f"utilisation-{resource}.png"
    before = {u.name: getattr(u, resource) for u in sim.before.nodes}
    after = {u.name: getattr(u, resource) for u in sim.after.nodes}
    nodes = sorted(set(before) | set(after))
    b_stats, a_stats = sim.before.stats(resource), sim.after.stats(resource)
    title = f"{resource}: requests as % of allocatable, per node"
    if len(nodes) <= MAX_NODE_BARS:
        legend = 3.2 if thresholds else 0.0  # room for the thresholds' names beside the plot
        fig, ax = plt.subplots(figsize=(max(7.0, 0.45 * len(nodes) + 3) + legend, 4.2))
        xs = list(range(len(nodes)))
        width = 0.4
        ax.bar(
            [x - width / 2 for x in xs],
            [before.get(n, 0.0) for n in nodes],
            width,
            label="before",
            color=BEFORE_COLOUR,
        )
        ax.bar(
            [x + width / 2 for x in xs],
            [after.get(n, 0.0) for n in nodes],
            width,
            label="after",
            color=AFTER_COLOUR,
        )
        ax.set_xticks(xs)
        tilt = len(nodes) > 6
        ax.set_xticklabels(nodes, rotation=45 if tilt else 0, ha="right" if tilt else "center")
        ax.set_ylabel("% of allocatable")
        top = max([100.0, *before.values(), *after.values()])
        ax.set_ylim(0, top * 1.08)
        ax.axhline(100, color=LIMIT_COLOUR, linewidth=0.8, linestyle=":")
        for k, t in enumerate(thresholds):
            ax.axhline(
                t.value,
                color=THRESHOLD_COLOURS[k % len(THRESHOLD_COLOURS)],
                linewidth=1.4,
                linestyle=THRESHOLD_STYLES[k % len(THRESHOLD_STYLES)],
                label=f"{t.label} {t.value:g}%",
            )
        description = f"one pair of bars per node ({len(nodes)} nodes): grey before, blue after"
    else:
        fig, ax = plt.subplots(figsize=(8.0 + (3.2 if thresholds else 0.0), 4.2))
        top = max([100.0, *before.values(), *after.values()])
        edges = [5.0 * k for k in range(int(top // 5) + 2)]
        ax.hist(
            [list(before.values()), list(after.values())],
            bins=edges,
            label=["before", "after"],
            color=[BEFORE_COLOUR, AFTER_COLOUR],
        )
        for k, t in enumerate(thresholds):
            ax.axvline(
                t.value,
                color=THRESHOLD_COLOURS[k % len(THRESHOLD_COLOURS)],
                linewidth=1.4,
                linestyle=THRESHOLD_STYLES[k % len(THRESHOLD_STYLES)],
                label=f"{t.label} {t.value:g}%",
            )
        ax.set_xlabel("% of allocatable requested")
        ax.set_ylabel("nodes")
        title = f"{resource}: nodes per 5% utilisation band"
        description = f"histogram of {len(nodes)} nodes per 5% band: grey before, blue after"
    ax.set_title(
        f"{title}\nmean {b_stats.mean:.1f}% → {a_stats.mean:.1f}%, "
        f"stddev {b_stats.stddev:.1f} → {a_stats.stddev:.1f}, max {b_stats.max:.1f}% → {a_stats.max:.1f}%"
    )
    if thresholds:
        description += "; the policy's thresholds: " + ", ".join(
            f"{t.label} {t.value:g}%" for t in thresholds
        )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return Chart(name, f"Node utilisation: {resource}", description, _save(plt, fig))


def _evictions(plt: Any, sim: Simulation) -> Chart:
    name = "evictions-by-plugin.png"
    labels: list[str] = []
    for cycle in sim.cycles:
        for run in cycle.result.plugin_runs:
            label = f"{run.profile} / {run.plugin}"
            if label not in labels:
                labels.append(label)
    per_cycle: list[dict[str, int]] = []
    for cycle in sim.cycles:
        counts: dict[str, int] = {}
        for r in cycle.result.evictions:
            label = f"{r.profile} / {r.plugin}"
            counts[label] = counts.get(label, 0) + 1
            if label not in labels:
                labels.append(label)
        per_cycle.append(counts)
    fig, ax = plt.subplots(figsize=(8.0, max(2.5, 0.42 * len(labels) + 1.4)))
    ys = list(range(len(labels)))
    left = [0] * len(labels)
    for k, counts in enumerate(per_cycle):
        values = [counts.get(label, 0) for label in labels]
        ax.barh(
            ys,
            values,
            left=left,
            color=CYCLE_COLOURS[k % len(CYCLE_COLOURS)],
            label=f"cycle {k + 1}" if len(per_cycle) > 1 else "evicted",
        )
        left = [a + b for a, b in zip(left, values, strict=True)]
    for y, total in zip(ys, left, strict=True):
        ax.text(total + 0.05, y, str(total), va="center", fontsize=9)
    ax.set_yticks(ys)
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("pods evicted")
    ax.set_xlim(0, max([1, *left]) * 1.15)
    ax.xaxis.get_major_locator().set_params(integer=True)
    total = sum(left)
    ax.set_title(f"Evictions per plugin ({total} in {len(sim.cycles)} cycle(s))")
    if len(per_cycle) > 1:
        ax.legend(loc="lower right", fontsize=9)
    return Chart(
        name,
        "Evictions per plugin",
        "pods evicted by each profile / plugin" + (", stacked per cycle" if len(per_cycle) > 1 else ""),
        _save(plt, fig),
    )


def _skew(plt: Any, sim: Simulation) -> Chart:
    from desched.report.output import skew_pairs, skew_ref

    name = "topology-skew.png"
    pairs = skew_pairs(sim)[:MAX_SKEW_ROWS]
    if not pairs:
        fig, ax = plt.subplots(figsize=(8.0, 2.0))
        ax.axis("off")
        ax.text(0.5, 0.5, "No pod declares a topology spread constraint.", ha="center", va="center")
        return Chart(name, "Topology skew", "no topology spread constraints", _save(plt, fig))
    labels = []
    for b, a in pairs:
        ref = skew_ref(b, a)
        key = ref.topology_key.rsplit("/", 1)[-1]
        labels.append(f"{ref.namespace}/{ref.declared_by.split('/', 1)[-1]}\n{key}, {ref.when_unsatisfiable}")
    fig, ax = plt.subplots(figsize=(8.5, max(2.8, 0.62 * len(pairs) + 1.4)))
    ys = list(range(len(pairs)))
    height = 0.38
    before = [b.skew if b is not None else 0 for b, _ in pairs]
    after = [a.skew if a is not None else 0 for _, a in pairs]
    ax.barh([y - height / 2 for y in ys], before, height, color=BEFORE_COLOUR, label="before")
    ax.barh([y + height / 2 for y in ys], after, height, color=AFTER_COLOUR, label="after")
    for y, b_value, a_value in zip(ys, before, after, strict=True):
        ax.text(b_value + 0.05, y - height / 2, str(b_value), va="center", fontsize=8)
        ax.text(a_value + 0.05, y + height / 2, str(a_value), va="center", fontsize=8)
    for y, (b, a) in zip(ys, pairs, strict=True):
        ref = skew_ref(b, a)
        ax.plot([ref.max_skew, ref.max_skew], [y - 0.45, y + 0.45], color=LIMIT_COLOUR, linewidth=1.6)
    ax.plot([], [], color=LIMIT_COLOUR, linewidth=1.6, label="maxSkew")
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("skew (largest domain minus the global minimum)")
    ax.set_xlim(0, max([1, *before, *after, *(skew_ref(b, a).max_skew for b, a in pairs)]) * 1.15)
    ax.xaxis.get_major_locator().set_params(integer=True)
    total = len(sim.before.skew)
    ax.set_title(f"Topology skew, worst {len(pairs)} of {max(total, len(pairs))} constraint(s)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
    return Chart(
        name,
        "Topology skew",
        "skew per constraint before (grey) and after (blue); red: maxSkew",
        _save(plt, fig),
    )
