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
from desched.framework.evictor import (
    EvictionBackend,
    EvictionObserver,
    EvictionRecord,
    EvictionRequest,
    OutcomeUnknown,
    PodEvictor,
    ProfileEvictor,
    RemembersEvictions,
)
from desched.framework.findings import Findings, PluginFindings, log_sink
from desched.framework.findings import log as findings_log
from desched.framework.nodeactions import (
    NodeActionBackend,
    NodeActionRecord,
    PluginNodeActions,
    SimulatedNodeActions,
)
from desched.framework.registry import Registry
from desched.framework.types import (
    BalancePlugin,
    DeschedulePlugin,
    EvictResult,
    ExtensionPoint,
    FilterPlugin,
    PreEvictionFilterPlugin,
    PreSortPlugin,
    SortPlugin,
)
from desched.gcpause import gc_paused
from desched.k8s.objects import Node, Pod

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
MIN_READY_NODES = 2


def system_clock() -> datetime:
    return datetime.now(UTC)


class FrameworkError(Exception):
    """A plugin could not be built from its args (e.g. a priority class that does not exist)."""


class CycleContext:
    """What changes every cycle: the snapshot, the evictor, the node actions and the clock."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.snapshot = ClusterSnapshot()
        self.evictor = PodEvictor(_NoBackend())
        self.node_actions: NodeActionBackend = SimulatedNodeActions(clock)
        #: decision findings (what each plugin decided about a pod, and why): off until a sink listens
        self.findings = Findings()


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

    __slots__ = ("backend", "snapshot")

    def __init__(self, backend: EvictionBackend, snapshot: ClusterSnapshot) -> None:
        self.backend = backend
        self.snapshot = snapshot

    def already_evicted(self, pod: Pod) -> bool:
        """The wrapped backend's memory of earlier cycles (:class:`RemembersEvictions`), if any:
        the wrapper must not hide it, or a live run would evict a relisted pod a second time. A
        pod it remembers is leaving, so it leaves the working snapshot as an evicted pod does."""
        backend = self.backend
        if isinstance(backend, RemembersEvictions) and backend.already_evicted(pod):
            self.snapshot.remove_pod(pod)
            return True
        return False

    def evict(self, pod: Pod, request: EvictionRequest) -> str | OutcomeUnknown | None:
        failure = self.backend.evict(pod, request)
        # an eviction whose answer was lost may have happened: the cycle goes on as if it had, as
        # the limits count it (never a second plugin acting on a pod that may be leaving)
        if failure is None or isinstance(failure, OutcomeUnknown):
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
    def snapshot(self) -> ClusterSnapshot:
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

    def now(self) -> datetime:
        return self._ctx.clock()

    def sort_pods(self, pods: Sequence[Pod], key: Callable[[Pod], Any] | None = None) -> list[Pod]:
        sorters = self._profile.sorters
        return _ordered(pods, [s.less for s in sorters], key, [getattr(s, "sort_key", None) for s in sorters])

    def presort_pods(self, pods: Sequence[Pod], key: Callable[[Pod], Any] | None = None) -> list[Pod]:
        presorters = self._profile.presorters
        return _ordered(
            pods,
            [s.pre_less for s in presorters],
            key,
            [getattr(s, "presort_key", None) for s in presorters],
        )


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
        self.filters: list[FilterPlugin] = []
        self.pre_eviction_filters: list[PreEvictionFilterPlugin] = []
        self.sorters: list[SortPlugin] = []
        self.presorters: list[PreSortPlugin] = []
        self.deschedulers: list[DeschedulePlugin] = []
        self.balancers: list[BalancePlugin] = []
        for name, args in config.args.items():
            spec = registry.get(name)
            if spec is None:
                raise FrameworkError(f"profile {self.name}: {registry.why_missing(name)}")
            handle = PluginHandle(ctx, self, name)
            try:
                self.instances[name] = spec.factory(args, handle)
            except FrameworkError:
                raise
            except ValueError as e:
                raise FrameworkError(f"profile {self.name}: plugin {name}: {e}") from None
        for name in config.enabled(ExtensionPoint.FILTER):
            self.filters.append(self.instances[name])  # type: ignore[arg-type]
        for name in config.enabled(ExtensionPoint.PRE_EVICTION_FILTER):
            self.pre_eviction_filters.append(self.instances[name])  # type: ignore[arg-type]
        for name in config.enabled(ExtensionPoint.SORT):
            self.sorters.append(self.instances[name])  # type: ignore[arg-type]
        for name in config.enabled(ExtensionPoint.PRESORT):
            self.presorters.append(self.instances[name])  # type: ignore[arg-type]
        for name in config.enabled(ExtensionPoint.DESCHEDULE):
            self.deschedulers.append(self.instances[name])  # type: ignore[arg-type]
        for name in config.enabled(ExtensionPoint.BALANCE):
            self.balancers.append(self.instances[name])  # type: ignore[arg-type]


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

    @property
    def evictions(self) -> list[EvictionRecord]:
        return [r for r in self.records if r.result is EvictResult.EVICTED]

    @property
    def failures(self) -> list[EvictionRecord]:
        """Not evicted: refused, over a limit, or failed (not the outcome-unknown ones)."""
        return [r for r in self.records if not r.result.ok]

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

    def __init__(self, policy: Policy, registry: Registry, *, clock: Clock = system_clock) -> None:
        self.policy = policy
        self.ctx = CycleContext(clock)
        self.profiles = [Profile(cfg, registry, self.ctx) for cfg in policy.profiles]
        self.findings = self.ctx.findings
        #: set while a traced cycle runs: opens a span around each plugin run (profile, plugin, point)
        self.plugin_span: Callable[[str, str, str], contextlib.AbstractContextManager[None]] | None = None
        from desched.logs import v_enabled

        if v_enabled(findings_log, 4):  # --v=4: every candidate left, and why
            self.findings.attach(log_sink)

    def begin_cycle(
        self,
        snapshot: ClusterSnapshot,
        backend: EvictionBackend,
        *,
        observers: Sequence[EvictionObserver] = (),
        node_actions: NodeActionBackend | None = None,
    ) -> None:
        """Point every handle at this cycle's snapshot and a fresh evictor; call cycle hooks.

        ``node_actions`` carries out plugins' node actions; by default they are only recorded.
        """
        ctx = self.ctx
        ctx.snapshot = snapshot
        ctx.node_actions = node_actions if node_actions is not None else SimulatedNodeActions(ctx.clock)
        ctx.evictor = PodEvictor(
            _CycleBackend(backend, snapshot),
            self.policy.limits,
            grace_period_seconds=self.policy.grace_period_seconds,
            observers=observers,
        )
        for profile in self.profiles:
            for inst in profile.instances.values():
                hook = getattr(inst, "on_cycle_start", None)
                if callable(hook):
                    hook()

    def run_extension_point(
        self,
        point: ExtensionPoint,
        nodes: list[Node],
        on_plugin_run: Callable[[PluginRun], None] | None = None,
    ) -> list[PluginRun]:
        """Run one extension point (Deschedule or Balance) of every profile, in policy order."""
        runs: list[PluginRun] = []
        for profile in self.profiles:
            plugins: Sequence[DeschedulePlugin | BalancePlugin] = (
                profile.deschedulers if point is ExtensionPoint.DESCHEDULE else profile.balancers
            )
            for plugin in plugins:
                if self.ctx.evictor.total_limit_reached():
                    return runs
                run = self._run_plugin(profile, plugin, point, nodes)
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
        # the cyclic collector rescans the snapshot again and again (2-3x slower at 150k pods).
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
        result.seconds = time.perf_counter() - start
        return result

    def _run_plugin(
        self,
        profile: Profile,
        plugin: DeschedulePlugin | BalancePlugin,
        point: ExtensionPoint,
        nodes: list[Node],
    ) -> PluginRun:
        before = self.ctx.evictor.total
        t0 = time.perf_counter()
        error: str | None = None
        crashed = False
        span = self.plugin_span
        try:
            with span(profile.name, plugin.name, point.value) if span else contextlib.nullcontext():
                if point is ExtensionPoint.DESCHEDULE:
                    status = plugin.deschedule(nodes)  # type: ignore[union-attr]
                else:
                    status = plugin.balance(nodes)  # type: ignore[union-attr]
            if status is not None:
                error = status.error
        except Exception as e:  # one broken plugin must not end the cycle for the others
            error = f"{type(e).__name__}: {str(e)[:300]}{_object_of(e)}"
            crashed = True
            # one line; the traceback at -v 4 (a one-shot run and simulate then exit non-zero)
            log.error("plugin %s of profile %s failed: %s", plugin.name, profile.name, error)
            log.debug("plugin %s of profile %s failed", plugin.name, profile.name, exc_info=True)
        return PluginRun(
            profile.name,
            plugin.name,
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
