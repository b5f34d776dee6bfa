"""``desched simulate``: descheduling cycles on a cluster snapshot, evicting nothing.

Load the policy and the snapshot, run one cycle (``--no-placement``: evictions answered as the
eviction API would, PodDisruptionBudgets included; node downgrades recorded, never applied) or up
to ``cycles`` cycles with every evicted pod's replacement placed again as kube-scheduler would
(:mod:`desched.simulation`), then write the table or JSON document and, asked for, the HTML
report. The command line only parses flags into a :class:`SimulateRequest` and calls
:func:`run_simulate`; the benchmarks run their in-process cycle with :func:`new_framework` and
:func:`single_cycle`, as this command does.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from desched.api.schedulerconfig import load_scheduler_config
from desched.backends.simulated_eviction import SimulatedEvictionApi
from desched.backends.simulated_nodeactions import SimulatedNodeActions
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError, SnapshotError, UserError
from desched.framework.evictor import EvictionBackend
from desched.framework.framework import CycleResult, Framework, FrameworkError, PluginRun
from desched.framework.registry import Registry
from desched.framework.reports import PluginReport
from desched.k8s.topologyspread import SYSTEM_DEFAULTS
from desched.plugins import default_registry
from desched.scheduling.placement import SCORE_DEFAULT, SCORE_GENERIC, PlacementOptions
from desched.simulation import ProgressFn, Simulation, simulate

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from desched.api.policy import Policy
    from desched.backends.eviction_webhook import EvictionWebhooks
    from desched.report.explain import Explainer

__all__ = [
    "EXIT_PLUGIN_FAILED",
    "SimulateRequest",
    "new_framework",
    "placement_options",
    "run_simulate",
    "simulate_cycles",
    "single_cycle",
]

#: Exit status when a plugin raised: the output is incomplete (not a user error, which is 2).
EXIT_PLUGIN_FAILED = 1

#: Above this, loading and simulating show a progress bar (when stderr is a terminal).
_BIG_SNAPSHOT_BYTES = 32 * 1024 * 1024
_BIG_SNAPSHOT_PODS = 20_000

OnPluginRun = Callable[[PluginRun], None]


@dataclass(frozen=True)
class SimulateRequest:
    """What ``desched simulate`` was asked for (its flags, parsed)."""

    snapshot: str
    policy: str
    now: datetime
    #: ``table``, ``wide`` (the table with every row, nothing cut) or ``json``.
    output: str = "table"
    #: ``--namespace``: show only these namespaces' pods (the simulation still covers them all).
    namespaces: tuple[str, ...] = ()
    cycles: int = 1
    #: Place the evicted pods' replacements (``--placement``, the default).
    placement: bool = True
    #: ``--score``: ``default``, ``generic`` or None (generic when a scorer config is given).
    score: str | None = None
    scorer_config: str | None = None
    placement_order: str = "interleaved"
    terminating_pods: str = "hold"
    #: ``--kube-scheduler-config``: the default spread constraints placement applies.
    kube_scheduler_config: str | None = None
    explain: tuple[str, ...] = ()
    explain_all: bool = False
    #: ``--report``: the HTML file to write, or a directory for its index.html.
    report: str | None = None
    #: ``--webhook``: ask the profiles' ``evictionPolicy.webhook`` (dryRun true) before each eviction.
    webhook: bool = False


class _Progress:
    """Progress on stderr for long runs; does nothing unless enabled. On a terminal, a rich bar
    showing the current step and its own count (a new bar for each step, so one step's total
    never shows under the next); elsewhere (a file, a CI log) one plain line at most every
    ``every`` seconds: ``desched: simulate: cycle 1: placing pods 500/1036 (12 s)``."""

    def __init__(self, enabled: bool, *, terminal: bool | None = None, every: float = 5.0) -> None:
        self.enabled = enabled
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.every = every
        self._progress: Any = None
        self._task: Any = None
        self._phase = ""
        self._t0 = 0.0
        self._last = 0.0
        self._started = False

    def start(self, description: str) -> None:
        if not self.enabled or self._started:
            return
        self._started = True
        self._t0 = self._last = time.monotonic()
        self._phase = description
        if not self.terminal:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(description, total=None)

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self._started:
            return
        counted = total if total > 1 else None
        if self._progress is not None:
            if phase != self._phase:  # a new step: a new bar, with this step's total only
                self._progress.remove_task(self._task)
                self._task = self._progress.add_task(phase, total=counted, completed=done)
            else:
                self._progress.update(self._task, completed=done, total=counted)
        else:
            now = time.monotonic()
            if now - self._last >= self.every:
                self._last = now
                count = f" {done}/{total}" if counted else ""
                print(
                    f"desched: simulate: {phase}{count} ({now - self._t0:.0f} s)", file=sys.stderr, flush=True
                )
        self._phase = phase

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
        self._started = False


def _format_now(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def placement_options(request: SimulateRequest) -> PlacementOptions:
    """The placement options of ``--score``, ``--scorer-config``, ``--placement-order``,
    ``--terminating-pods`` and ``--kube-scheduler-config``. Raises UserError for a contradiction
    or an unreadable scorer or kube-scheduler config."""
    from desched.scheduling.scorer import load_scorer_args

    score = request.score or (SCORE_GENERIC if request.scorer_config else SCORE_DEFAULT)
    if score == SCORE_DEFAULT and request.scorer_config:
        raise UserError("--scorer-config", "only applies with --score generic")
    if score == SCORE_GENERIC and not request.scorer_config:
        raise UserError("--score", "generic needs --scorer-config FILE (the generic scorer's args)")
    generic = load_scorer_args(request.scorer_config) if request.scorer_config else None
    defaults = SYSTEM_DEFAULTS
    percentage: int | None = None
    if request.kube_scheduler_config is not None:
        try:
            config = load_scheduler_config(request.kube_scheduler_config)
        except PolicyError as e:
            raise UserError("--kube-scheduler-config", str(e)) from None
        defaults, percentage = config.default_constraints, config.percentage_of_nodes_to_score
    return PlacementOptions(
        score=score,
        generic=generic,
        percentage_of_nodes_to_score=percentage,
        order=request.placement_order,
        terminating=request.terminating_pods,
        default_constraints=defaults,
    )


def new_framework(policy: Policy, registry: Registry, now: datetime) -> Framework:
    """The framework of a loaded policy, its clock stopped at ``now``. Raises UserError."""
    try:
        return Framework(policy, registry, clock=lambda: now)
    except FrameworkError as e:
        raise UserError("policy", str(e)) from None


def single_cycle(
    framework: Framework,
    snapshot: ClusterSnapshot,
    now: datetime,
    *,
    then: EvictionBackend | None = None,
    restore_expired: bool = True,
    on_plugin_run: OnPluginRun | None = None,
    webhooks: EvictionWebhooks | None = None,
) -> CycleResult:
    """One cycle on the snapshot: evictions answered as the eviction API would (PDBs), then passed
    to ``then`` (the placement driver's recorder); node downgrades recorded, never applied, the
    expired ones a live run would remove first (``restore_expired``). With ``webhooks``
    (``--webhook``), each profile's eviction webhook is asked first, as ``run`` asks it before the
    eviction API: a pod it denies is skipped and spends no disruption budget."""
    node_actions = SimulatedNodeActions(lambda: now)
    if restore_expired:
        node_actions.restore_expired(snapshot.nodes)
    backend: EvictionBackend = (
        SimulatedEvictionApi(snapshot) if then is None else SimulatedEvictionApi(snapshot, then=then)
    )
    if webhooks is not None:
        from desched.backends.eviction_webhook import WebhookGate  # (aiohttp: only with --webhook)

        backend = WebhookGate(webhooks, backend)
    return framework.run_cycle(
        snapshot,
        backend,
        node_actions=node_actions,
        on_plugin_run=on_plugin_run,
    )


def simulate_cycles(
    framework: Framework,
    snapshot: ClusterSnapshot,
    now: datetime,
    *,
    cycles: int = 1,
    options: PlacementOptions | None = None,
    placement: bool = True,
    on_plugin_run: OnPluginRun | None = None,
    on_cycle: Callable[[int], None] | None = None,
    on_progress: ProgressFn | None = None,
    webhooks: EvictionWebhooks | None = None,
) -> tuple[Simulation, list[PluginRun], list[PluginReport]]:
    """Up to ``cycles`` cycles, each one's evicted pods placed again before the next
    (:func:`desched.simulation.simulate`); the simulation, the plugin runs that raised, and each
    plugin's last report over the cycles (what the output shows of them)."""
    crashes: list[PluginRun] = []
    reports: dict[tuple[str, str], PluginReport] = {}

    def run_cycle(snap: ClusterSnapshot, backend: EvictionBackend, cycle: int) -> CycleResult:
        if on_cycle is not None:
            on_cycle(cycle)
        # the eviction API's answers (PDBs) first; the placement simulator hears of what it allows
        result = single_cycle(
            framework,
            snap,
            now,
            then=backend,
            restore_expired=cycle == 1,
            on_plugin_run=on_plugin_run,
            webhooks=webhooks,
        )
        crashes.extend(result.crashes)
        reports.update(((r.profile, r.plugin), r) for r in result.reports)
        return result

    sim = simulate(
        snapshot,
        run_cycle,
        now=now,
        cycles=cycles,
        options=options or PlacementOptions(),
        placement=placement,
        on_progress=on_progress,
    )
    return sim, crashes, list(reports.values())


def _check_kinds(snapshot: ClusterSnapshot, source: str) -> None:
    """A snapshot without Nodes cannot be simulated (every pod would sit on an unknown node, and
    the cycle would be skipped as if the cluster had no ready node): an error naming them. One
    without PodDisruptionBudgets may be a cluster without any, or a ``kubectl get`` that left them
    out: a warning that refusals cannot be predicted then."""
    if not snapshot.nodes:
        raise SnapshotError(
            source,
            "the snapshot holds no Node (save one with `desched snapshot -o FILE`, or "
            "`kubectl get nodes,pods,namespaces,poddisruptionbudgets,priorityclasses,events -A -o yaml`)",
        )
    if not snapshot.pdbs:
        log.warning(
            "%s holds no PodDisruptionBudget: if the cluster has some, add poddisruptionbudgets to "
            "the snapshot, or the eviction API's refusals cannot be predicted",
            source,
        )


def _explainer(request: SimulateRequest, snapshot: ClusterSnapshot) -> Explainer | None:
    """The listener for --explain / --explain-all, or None; every asked pod must exist."""
    if not request.explain and not request.explain_all:
        return None
    from desched.report.explain import Explainer

    explainer = Explainer(list(request.explain), everything=request.explain_all)
    for key in request.explain:
        namespace, _, name = key.partition("/")
        pod = snapshot.pod(namespace, name) if namespace and name else None
        if pod is None:
            raise UserError("--explain", f"no pod {key!r} in the snapshot (write it as namespace/name)")
        explainer.nodes[key] = pod.spec.node_name
    return explainer


def _plugin_failures(crashes: Sequence[PluginRun]) -> int:
    """The exit status: :data:`EXIT_PLUGIN_FAILED` when a plugin raised (the framework logged one
    line naming the plugin, its profile and the object where known), else 0."""
    return EXIT_PLUGIN_FAILED if crashes else 0


def run_simulate(request: SimulateRequest, out: TextIO | None = None) -> int:
    """``desched simulate``: the exit status (0, or :data:`EXIT_PLUGIN_FAILED`). Raises UserError."""
    from desched.api.policy import load_policy_file

    out = out or sys.stdout
    if request.cycles < 1:
        raise UserError("--cycles", f"must be at least 1, got {request.cycles}")
    if request.cycles > 1 and not request.placement:
        raise UserError("--cycles", "more than one cycle needs placement (drop --no-placement)")
    options = placement_options(request) if request.placement else None
    if request.report:
        from desched.report.charts import require_matplotlib

        require_matplotlib()
    registry = default_registry()
    policy = load_policy_file(request.policy, registry)
    try:
        size = os.path.getsize(request.snapshot)
    except (OSError, ValueError):  # (ValueError: a NUL in the path; the loader says so below)
        size = 0
    progress = _Progress(size >= _BIG_SNAPSHOT_BYTES)
    progress.start("loading the snapshot")
    # --webhook: the profiles' eviction webhooks are asked (dryRun true); else simulate stays
    # offline (and does not import the HTTP client)
    if not request.webhook:
        return _simulate(request, out, policy, registry, options, progress, None)
    from desched.backends.eviction_webhook import webhooks_on_a_thread

    with webhooks_on_a_thread() as hooks:
        return _simulate(request, out, policy, registry, options, progress, hooks)


def _simulate(
    request: SimulateRequest,
    out: TextIO,
    policy: Policy,
    registry: Registry,
    options: PlacementOptions | None,
    progress: _Progress,
    hooks: EvictionWebhooks | None,
) -> int:
    from desched.cluster.file_source import load_snapshot_file
    from desched.report.output import (
        View,
        write_json,
        write_simulation_json,
        write_simulation_table,
        write_table,
    )

    now = request.now
    view = View(wide=request.output == "wide", namespaces=frozenset(request.namespaces))
    try:
        snapshot = load_snapshot_file(request.snapshot)
        _check_kinds(snapshot, str(request.snapshot))
        pods_total = len(snapshot.pods)
        if pods_total >= _BIG_SNAPSHOT_PODS:
            progress.enabled = True
            progress.start("simulating")
        framework = new_framework(policy, registry, now)
        explainer = _explainer(request, snapshot)
        on_plugin_run = None
        amend = None
        if explainer is not None:
            framework.findings.attach(explainer.sink)
            on_plugin_run = explainer.on_plugin_run
            amend = explainer.amend
        if not request.placement and not request.report:
            progress("descheduling", 0, 1)
            result = single_cycle(framework, snapshot, now, on_plugin_run=on_plugin_run, webhooks=hooks)
            progress.stop()
            if request.output == "json":
                write_json(result, out, now=_format_now(now), reports=result.reports, amend=amend, view=view)
            else:
                write_table(
                    result,
                    out,
                    now=_format_now(now),
                    pods_total=pods_total,
                    reports=result.reports,
                    view=view,
                )
                if explainer is not None:
                    explainer.write_text(out)
            return _plugin_failures(result.crashes)

        def on_cycle(cycle: int) -> None:
            if explainer is not None:
                explainer.cycle = cycle

        sim, crashes, reports = simulate_cycles(
            framework,
            snapshot,
            now,
            cycles=request.cycles,
            options=options,
            placement=request.placement,
            on_plugin_run=on_plugin_run,
            on_cycle=on_cycle,
            on_progress=progress,
            webhooks=hooks,
        )
    finally:
        progress.stop()
    if request.output == "json":
        write_simulation_json(sim, out, now=_format_now(now), reports=reports, amend=amend, view=view)
    else:
        write_simulation_table(
            sim, out, now=_format_now(now), pods_total=pods_total, reports=reports, view=view
        )
        if explainer is not None:
            explainer.write_text(out)
    if request.report:
        from desched.report.charts import policy_thresholds
        from desched.report.html import write_report

        try:
            page = write_report(
                sim,
                request.report,
                now=_format_now(now),
                snapshot=request.snapshot,
                policy=request.policy,
                pods_total=pods_total,
                thresholds=policy_thresholds(policy.profiles),
            )
        except OSError as e:
            raise UserError("--report", f"cannot write the report: {e.strerror or e}") from None
        print(f"desched: report written to {page}", file=sys.stderr)
    return _plugin_failures(crashes)
