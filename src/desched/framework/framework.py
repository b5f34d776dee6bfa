"""Profiles, handles and the descheduling cycle.

Plugins are built once per profile (they may keep state across cycles, as RemoveAnomalyPods
does) and reach the current cycle's snapshot, evictor and clock through their :class:`PluginHandle`.
A cycle runs every Deschedule extension point of every profile in policy order, then every Balance
one (KEP-753), on one snapshot.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from desched.api.policy import Policy, ProfileConfig
from desched.cluster.snapshot import ClusterSnapshot
from desched.cluster.view import ClusterView
from desched.framework.evictor import (
    BackgroundCounts,
    CountsBackgroundEvictions,
    EvictAnswer,
    EvictionBackend,
    EvictionObserver,
    EvictionRecord,
    EvictionRequest,
    InBackground,
    OutcomeUnknown,
    PodEvictor,
    ProfileEvictor,
    RemembersEvictions,
)
from desched.framework.findings import Findings, PluginFindings, log_sink
from desched.framework.findings import log as findings_log
from desched.framework.metrics import MetricsProviders
from desched.framework.nodeactions import (
    NodeActionBackend,
    NodeActionRecord,
    NoNodeActions,
    PluginNodeActions,
)
from desched.framework.pluginmetrics import MetricsRegistry, NoMetricsRegistry
from desched.framework.registry import Registry
from desched.framework.reports import CycleReport, PluginReport
from desched.framework.safety import Safety
from desched.framework.types import (
    EXTENSION_PROTOCOLS,
    BalancePlugin,
    CycleEndHook,
    CycleStartHook,
    DeclaresLiveInputs,
    DeschedulePlugin,
    EvictResult,
    ExtensionPoint,
    FilterPlugin,
    Handle,
    JudgesMoves,
    LiveInputs,
    PreEvictionFilterPlugin,
    PreSortKeyPlugin,
    PreSortPlugin,
    SortKeyPlugin,
    SortPlugin,
    Status,
)
from desched.gcpause import gc_paused
from desched.k8s.objects import Node, Pod
from desched.scheduling import nodefit

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
MIN_READY_NODES = 2


def system_clock() -> datetime:
    return datetime.now(UTC)


class FrameworkError(Exception):
    """A plugin could not be built from its args (e.g. a priority class that does not exist)."""


class CycleContext:
    """What changes every cycle: the snapshot, the evictor, the node actions and the clock."""

    def __init__(self, clock: Clock, metrics_registry: MetricsRegistry | None = None) -> None:
        self.clock = clock
        self.snapshot = ClusterSnapshot()
        self.evictor = PodEvictor(_NoBackend())
        self.node_actions: NodeActionBackend = NoNodeActions()
        #: decision findings (what each plugin decided about a pod, and why): off until a sink listens
        self.findings = Findings()
        #: what plugins reported in this cycle (``handle.attach_report``), for the cycle result
        self.reports: list[PluginReport] = []
        #: the metrics providers of the run (the runtime, a simulation or a test hands them over)
        self.metrics = MetricsProviders()
        #: where plugins register the metrics they export (a live run's: exposed on /metrics)
        self.metrics_registry: MetricsRegistry = metrics_registry or NoMetricsRegistry()


class _NoBackend:
    def evict(self, pod: Pod, request: object) -> str | None:
        return "no eviction backend: no cycle is running"


class _CycleBackend:
    """The cycle's one rule for what it sees after an eviction, whichever backend carries it out.

    A pod the backend evicted leaves the cycle's working snapshot at once, so every plugin after it
    (and the rest of the plugin that evicted it) decides as if it were gone: the live API backend
    and the simulated one make the same decisions on the same snapshot. In a live run the snapshot
    is the cycle's own copy of the informer cache (``LiveCache.snapshot`` builds new indexes over
    the cached records, which are never changed in place), so the cache is not touched.
    See docs/design.md, "What a cycle sees after an eviction".
    """

    __slots__ = ("_remembers", "backend", "snapshot")

    def __init__(self, backend: EvictionBackend, snapshot: ClusterSnapshot) -> None:
        self.backend = backend
        self.snapshot = snapshot
        # checked once: isinstance against a runtime-checkable Protocol costs tens of
        # microseconds, and this is asked for every pod a plugin considers
        self._remembers = backend.already_evicted if isinstance(backend, RemembersEvictions) else None

    def already_evicted(self, pod: Pod) -> bool:
        """The wrapped backend's memory of earlier cycles (:class:`RemembersEvictions`), if any:
        the wrapper must not hide it, or a live run would evict a relisted pod a second time. A
        pod it remembers is leaving, so it leaves the working snapshot as an evicted pod does."""
        remembers = self._remembers
        if remembers is not None and remembers(pod):
            self.snapshot.remove_pod(pod)
            return True
        return False

    def background_counts(self) -> BackgroundCounts:
        """The wrapped backend's evictions in background (:class:`CountsBackgroundEvictions`)."""
        backend = self.backend
        return (
            backend.background_counts()
            if isinstance(backend, CountsBackgroundEvictions)
            else BackgroundCounts()
        )

    def evict(self, pod: Pod, request: EvictionRequest) -> EvictAnswer:
        failure = self.backend.evict(pod, request)
        # an eviction whose answer was lost may have happened: the cycle goes on as if it had, as
        # the limits count it (never a second plugin acting on a pod that may be leaving); one
        # going on in background leaves too
        if failure is None or isinstance(failure, OutcomeUnknown | InBackground):
            self.snapshot.remove_pod(pod)
        return failure


class PluginHandle:
    """The Handle of KEP-753, for one plugin instance of one profile."""

    def __init__(self, ctx: CycleContext, profile: Profile, plugin_name: str) -> None:
        self._ctx = ctx
        self._profile = profile
        self._plugin_name = plugin_name
        self._evictor: ProfileEvictor | None = None
        self._evictor_for: PodEvictor | None = None
        self._node_actions: PluginNodeActions | None = None
        self._node_actions_for: NodeActionBackend | None = None
        self._findings = PluginFindings(ctx.findings, profile.name, plugin_name)

    @property
    def findings(self) -> PluginFindings:
        """Where the plugin reports the candidates it considered and left, and why."""
        return self._findings

    @property
    def snapshot(self) -> ClusterView:
        """The cycle's cluster, read-only for the plugin."""
        return self._ctx.snapshot

    @property
    def evictor(self) -> ProfileEvictor:
        shared = self._ctx.evictor
        if self._evictor is None or self._evictor_for is not shared:
            self._evictor = ProfileEvictor(
                shared,
                self._profile.name,
                self._plugin_name,
                self._profile.filters,
                self._profile.pre_eviction_filters,
                self._findings,
                self._profile.judges.get(self._plugin_name),
            )
            self._evictor_for = shared
        return self._evictor

    @property
    def node_actions(self) -> PluginNodeActions:
        """Node actions (a timed downgrade of a node), carried out by the cycle's backend."""
        shared = self._ctx.node_actions
        if self._node_actions is None or self._node_actions_for is not shared:
            self._node_actions = PluginNodeActions(shared, f"{self._profile.name}/{self._plugin_name}")
            self._node_actions_for = shared
        return self._node_actions

    @property
    def profile_name(self) -> str:
        return self._profile.name

    @property
    def plugin_name(self) -> str:
        return self._plugin_name

    @property
    def metrics(self) -> MetricsProviders:
        """The run's metrics providers (``metrics.k8s.io``, Prometheus): each ``None`` if absent."""
        return self._ctx.metrics

    @property
    def metrics_registry(self) -> MetricsRegistry:
        """Where the plugin registers the metrics it exports (a live run's ``/metrics``)."""
        return self._ctx.metrics_registry

    def now(self) -> datetime:
        return self._ctx.clock()

    def attach_report(self, report: CycleReport) -> None:
        """Attach this cycle's report to the cycle result, with the profile and plugin names."""
        self._ctx.reports.append(PluginReport(self._profile.name, self._plugin_name, report))

    def fits_other_node(self, pod: Pod, nodes: Sequence[Node]) -> bool:
        """The pod fits one of ``nodes`` other than its own (descheduler's NodeFit,
        ``PodFitsAnyOtherNode``)."""
        return nodefit.pod_fits_any_other_node(self._ctx.snapshot, pod, nodes)

    def fits_node(self, pod: Pod, node: Node) -> bool:
        """The pod fits ``node`` (``PodFitsCurrentNode``: its own node's resources are not
        checked, where it is already counted)."""
        return nodefit.pod_fits_current_node(self._ctx.snapshot, pod, node)

    def node_fit_failures(self, pod: Pod, node: Node) -> list[str]:
        """Why the pod would not fit ``node`` ([]: it fits), the first failing check only."""
        return nodefit.node_fit_failures(self._ctx.snapshot, pod, node)

    def sort_pods(self, pods: Sequence[Pod], key: Callable[[Pod], Any] | None = None) -> list[Pod]:
        profile = self._profile
        return _ordered(pods, profile.sort_less, key, profile.sort_keys)

    def presort_pods(self, pods: Sequence[Pod], key: Callable[[Pod], Any] | None = None) -> list[Pod]:
        profile = self._profile
        return _ordered(pods, profile.presort_less, key, profile.presort_keys)


def _ordered(
    pods: Sequence[Pod],
    less_fns: Sequence[Callable[[Pod, Pod], bool]],
    key: Callable[[Pod], Any] | None,
    key_fns: Sequence[Callable[[Pod], Any] | None] = (),
) -> list[Pod]:
    """A stable sort: configured sorters decide first, in order; the plugin's key breaks ties.

    When every sorter also offers a key consistent with its ``less`` (``less(a, b)`` exactly when
    ``key(a) < key(b)``: a Sort plugin's optional ``sort_key``, a PreSort plugin's
    ``presort_key``), the pods are sorted by the tuple of those keys instead of pairwise
    comparisons: the same order, several times faster.
    """
    if not less_fns:
        return sorted(pods, key=key) if key is not None else list(pods)
    if key_fns and all(k is not None for k in key_fns):
        fns = [k for k in key_fns if k is not None]
        if key is not None:
            fns.append(key)
        if len(fns) == 1:
            return sorted(pods, key=fns[0])
        if len(fns) == 2:
            k0, k1 = fns
            return sorted(pods, key=lambda p: (k0(p), k1(p)))
        if len(fns) == 3:
            k0, k1, k2 = fns
            return sorted(pods, key=lambda p: (k0(p), k1(p), k2(p)))
        return sorted(pods, key=lambda p: tuple([k(p) for k in fns]))

    def compare(a: Pod, b: Pod) -> int:
        for less in less_fns:
            if less(a, b):
                return -1
            if less(b, a):
                return 1
        if key is not None:
            ka, kb = key(a), key(b)
            if ka < kb:
                return -1
            if kb < ka:
                return 1
        return 0

    return sorted(pods, key=functools.cmp_to_key(compare))


class Profile:
    """One profile's plugin instances, by extension point, in policy order."""

    def __init__(self, config: ProfileConfig, registry: Registry, ctx: CycleContext) -> None:
        self.name = config.name
        self.config = config
        self.instances: dict[str, object] = {}
        for name, args in config.args.items():
            spec = registry.get(name)
            if spec is None:
                raise FrameworkError(f"profile {self.name}: {registry.why_missing(name)}")
            handle: Handle = PluginHandle(ctx, self, name)  # (mypy checks it implements Handle)
            try:
                self.instances[name] = spec.factory(args, handle)
            except FrameworkError:
                raise
            except ValueError as e:
                raise FrameworkError(f"profile {self.name}: plugin {name}: {e}") from None
        # each enabled extension point and each optional hook is checked once, here (``_enabled``
        # makes sure every instance serves its point: the isinstance filters below drop none)
        self.filters = [p for p in self._enabled(ExtensionPoint.FILTER) if isinstance(p, FilterPlugin)]
        self.pre_eviction_filters = [
            p
            for p in self._enabled(ExtensionPoint.PRE_EVICTION_FILTER)
            if isinstance(p, PreEvictionFilterPlugin)
        ]
        self.sorters = [p for p in self._enabled(ExtensionPoint.SORT) if isinstance(p, SortPlugin)]
        self.presorters = [p for p in self._enabled(ExtensionPoint.PRESORT) if isinstance(p, PreSortPlugin)]
        self.deschedulers = [
            p for p in self._enabled(ExtensionPoint.DESCHEDULE) if isinstance(p, DeschedulePlugin)
        ]
        self.balancers = [p for p in self._enabled(ExtensionPoint.BALANCE) if isinstance(p, BalancePlugin)]
        self.cycle_hooks = [inst for inst in self.instances.values() if isinstance(inst, CycleStartHook)]
        self.cycle_end_hooks = [inst for inst in self.instances.values() if isinstance(inst, CycleEndHook)]
        #: each plugin's judgement of a predicted move, by plugin name (``predictive``)
        self.judges = {name: i.judge_move for name, i in self.instances.items() if isinstance(i, JudgesMoves)}
        self.sort_less = [s.less for s in self.sorters]
        self.presort_less = [s.pre_less for s in self.presorters]
        #: the sorters' keys, when every one offers one (see :func:`_ordered`)
        self.sort_keys = [s.sort_key for s in self.sorters if isinstance(s, SortKeyPlugin)]
        if len(self.sort_keys) < len(self.sorters):
            self.sort_keys = []
        self.presort_keys = [s.presort_key for s in self.presorters if isinstance(s, PreSortKeyPlugin)]
        if len(self.presort_keys) < len(self.presorters):
            self.presort_keys = []

    def _enabled(self, point: ExtensionPoint) -> list[object]:
        """The instances the policy enables at ``point``, in policy order (each must serve it)."""
        out = []
        for name in self.config.enabled(point):
            inst = self.instances[name]
            if not isinstance(inst, EXTENSION_PROTOCOLS[point]):
                raise FrameworkError(f"profile {self.name}: plugin {name} does not implement {point.value}")
            out.append(inst)
        return out


@dataclass(frozen=True, slots=True)
class PluginRun:
    profile: str
    plugin: str
    extension_point: str
    seconds: float
    evicted: int
    error: str | None = None
    #: True when the plugin raised (``error`` then names the exception), False when it returned
    #: an error Status or succeeded.
    crashed: bool = False


@dataclass
class CycleResult:
    started: datetime
    nodes: int
    skipped: str | None = None
    records: list[EvictionRecord] = field(default_factory=list)
    plugin_runs: list[PluginRun] = field(default_factory=list)
    seconds: float = 0.0
    #: What the cycle's node-action backend did (or, simulated, would do) to nodes.
    node_actions: list[NodeActionRecord] = field(default_factory=list)
    #: What plugins reported in this cycle (``handle.attach_report``), in the order they ran.
    reports: list[PluginReport] = field(default_factory=list)

    @property
    def evictions(self) -> list[EvictionRecord]:
        return [r for r in self.records if r.result is EvictResult.EVICTED]

    @property
    def failures(self) -> list[EvictionRecord]:
        """Not evicted: refused, over a limit, or failed (not the outcome-unknown ones, nor the
        ones the evictionPolicy skipped: :attr:`skips`)."""
        return [r for r in self.records if not r.result.ok and not r.result.skipped]

    @property
    def skips(self) -> list[EvictionRecord]:
        """Skipped by the profile's ``evictionPolicy`` (the record's ``error`` says why)."""
        return [r for r in self.records if r.result.skipped]

    @property
    def unknown(self) -> list[EvictionRecord]:
        """Sent, but the answer was lost: maybe evicted (counted against the limits as evicted)."""
        return [r for r in self.records if r.result is EvictResult.UNKNOWN]

    @property
    def crashes(self) -> list[PluginRun]:
        """The plugin runs that raised: a one-shot run or a simulation then exits non-zero."""
        return [r for r in self.plugin_runs if r.crashed]


class Framework:
    """Profiles built from a policy; ``run_cycle`` runs one descheduling cycle on a snapshot."""

    def __init__(
        self,
        policy: Policy,
        registry: Registry,
        *,
        clock: Clock = system_clock,
        metrics_registry: MetricsRegistry | None = None,
    ) -> None:
        """``metrics_registry``: where plugins register the metrics they export (none: they are
        kept nowhere)."""
        self.policy = policy
        self.ctx = CycleContext(clock, metrics_registry)
        self.profiles = [Profile(cfg, registry, self.ctx) for cfg in policy.profiles]
        self.findings = self.ctx.findings
        #: the profiles' evictionPolicy rules and their memory across cycles (None: no rule is on)
        self.safety = (
            Safety({cfg.name: cfg.eviction_policy for cfg in policy.profiles})
            if policy.safety_active
            else None
        )
        #: set while a traced cycle runs: opens a span around each plugin run (profile, plugin, point)
        self.plugin_span: Callable[[str, str, str], contextlib.AbstractContextManager[None]] | None = None
        from desched.logs import v_enabled

        if v_enabled(findings_log, 4):  # --v=4: every candidate left, and why
            self.findings.attach(log_sink)

    def use_metrics(self, providers: MetricsProviders) -> None:
        """The metrics providers plugins reach through ``handle.metrics`` from now on."""
        self.ctx.metrics = providers

    def live_inputs(self) -> LiveInputs:
        """What the profiles' plugins need from a live run beyond the snapshot (they declare it)."""
        needs = LiveInputs()
        for profile in self.profiles:
            for inst in profile.instances.values():
                if isinstance(inst, DeclaresLiveInputs):
                    needs = needs | inst.live_inputs()
        return needs

    def begin_cycle(
        self,
        snapshot: ClusterSnapshot,
        backend: EvictionBackend,
        *,
        observers: Sequence[EvictionObserver] = (),
        node_actions: NodeActionBackend | None = None,
    ) -> None:
        """Point every handle at this cycle's snapshot and a fresh evictor; call cycle hooks.

        ``node_actions`` carries out plugins' node actions (the caller picks the backend); without
        one, every request is recorded as skipped.
        """
        ctx = self.ctx
        ctx.snapshot = snapshot
        ctx.reports = []
        ctx.node_actions = node_actions if node_actions is not None else NoNodeActions()
        if self.safety is not None:
            self.safety.begin_cycle(snapshot, ctx.clock(), ctx.node_actions)
        ctx.evictor = PodEvictor(
            _CycleBackend(backend, snapshot),
            self.policy.limits,
            grace_period_seconds=self.policy.grace_period_seconds,
            observers=observers,
            population=snapshot,
            safety=self.safety,
        )
        for profile in self.profiles:
            for hook in profile.cycle_hooks:
                hook.on_cycle_start()

    def run_extension_point(
        self,
        point: ExtensionPoint,
        nodes: list[Node],
        on_plugin_run: Callable[[PluginRun], None] | None = None,
    ) -> list[PluginRun]:
        """Run one extension point (Deschedule or Balance) of every profile, in policy order."""
        runs: list[PluginRun] = []
        for profile in self.profiles:
            plugins: Sequence[tuple[str, Callable[[Sequence[Node]], Status | None]]] = (
                [(p.name, p.deschedule) for p in profile.deschedulers]
                if point is ExtensionPoint.DESCHEDULE
                else [(p.name, p.balance) for p in profile.balancers]
            )
            for name, extension in plugins:
                if self.ctx.evictor.total_limit_reached():
                    return runs
                run = self._run_plugin(profile, name, extension, point, nodes)
                runs.append(run)
                if on_plugin_run is not None:
                    on_plugin_run(run)
        return runs

    def run_cycle(
        self,
        snapshot: ClusterSnapshot,
        backend: EvictionBackend,
        *,
        observers: Sequence[EvictionObserver] = (),
        on_plugin_run: Callable[[PluginRun], None] | None = None,
        node_actions: NodeActionBackend | None = None,
    ) -> CycleResult:
        start = time.perf_counter()
        result = CycleResult(started=self.ctx.clock(), nodes=0)
        # A cycle allocates many short-lived objects next to a large live snapshot: without this,
        # the cyclic collector rescans the snapshot again and again (docs/performance.md).
        # Reference counting still frees everything acyclic.
        with gc_paused():
            nodes = snapshot.ready_nodes(self.policy.node_selector)
            result.nodes = len(nodes)
            if len(nodes) < MIN_READY_NODES:
                result.skipped = (
                    f"only {len(nodes)} ready node(s) match: evicting would disrupt service, cycle skipped"
                )
                log.warning(result.skipped)
                result.node_actions = list(node_actions.records) if node_actions is not None else []
                result.seconds = time.perf_counter() - start
                return result
            self.begin_cycle(snapshot, backend, observers=observers, node_actions=node_actions)
            for point in (ExtensionPoint.DESCHEDULE, ExtensionPoint.BALANCE):
                result.plugin_runs.extend(self.run_extension_point(point, nodes, on_plugin_run))
        result.records = list(self.ctx.evictor.records)
        result.node_actions = list(self.ctx.node_actions.records)
        result.reports = list(self.ctx.reports)
        for profile in self.profiles:
            for end in profile.cycle_end_hooks:
                end.on_cycle_end()
        result.seconds = time.perf_counter() - start
        return result

    def _run_plugin(
        self,
        profile: Profile,
        name: str,
        extension: Callable[[Sequence[Node]], Status | None],
        point: ExtensionPoint,
        nodes: list[Node],
    ) -> PluginRun:
        before = self.ctx.evictor.total
        t0 = time.perf_counter()
        error: str | None = None
        crashed = False
        span = self.plugin_span
        try:
            with span(profile.name, name, point.value) if span else contextlib.nullcontext():
                status = extension(nodes)
            if status is not None:
                error = status.error
        except Exception as e:  # one broken plugin must not end the cycle for the others
            error = f"{type(e).__name__}: {str(e)[:300]}{_object_of(e)}"
            crashed = True
            # one line; the traceback at -v 4 (a one-shot run and simulate then exit non-zero)
            log.error("plugin %s of profile %s failed: %s", name, profile.name, error)
            log.debug("plugin %s of profile %s failed", name, profile.name, exc_info=True)
        return PluginRun(
            profile.name,
            name,
            point.value,
            time.perf_counter() - t0,
            self.ctx.evictor.total - before,
            error,
            crashed,
        )


def _object_of(error: BaseException) -> str:
    """`` (at Pod ns/name)``: the pod or node the failing code was working on, found among the
    local variables of the traceback's frames, innermost first ("" when none is)."""
    frames = []
    tb = error.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        values = list(frame.f_locals.values())
        pod = next((v for v in values if type(v) is Pod), None)
        if pod is not None:
            return f" (at Pod {pod.key})"
        node = next((v for v in values if type(v) is Node), None)
        if node is not None:
            return f" (at Node {node.name})"
    return ""
