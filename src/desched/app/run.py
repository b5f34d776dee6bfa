"""``desched run``: the live loop.

Startup: load the policy, connect, check the server (version skew, ``pods/eviction``), fill the
cache (list+watch), serve health and metrics, and (with ``--leader-elect``) wait for the lease.
Connecting and filling the cache are bounded by ``--client-connection-timeout`` and end at once
on SIGTERM/SIGINT, with one line naming the cause (:mod:`desched.kube.connect`). A cycle whose
cache is not in sync with the server (a watch failing, a re-list after 410 Gone) waits for it up to
the same bound, else is skipped and reported: it never decides on stale data.

Every cycle takes one consistent snapshot of the cache and runs the framework in a worker thread
while the event loop keeps the watches, the lease and the evictions going.
``--descheduling-interval 0`` runs one cycle and exits (Job/CronJob);
``--descheduling-interval-cron-expression`` runs cycles at fixed wall-clock times instead
(:mod:`desched.runtime.schedule`), the first one at the schedule's first time. With
``--event-driven`` a relevant change in the cluster (a node added or removed, relabelled, tainted or
cordoned; a pod failing or crash-looping; with a plugin that reads them, a new Warning Event about a pod
or its claim; a pod becoming Ready whose workload waits for a replacement, with the
evictionPolicy's waitForReplacement) also starts a cycle, after a debounce window so a burst
of changes runs one cycle. SIGTERM stops new evictions at once, lets an in-flight one finish,
releases the lease and exits. With ``metricsProviders`` in the policy, actual usage for
the plugins (``handle.metrics``) is polled (metrics.k8s.io) or queried (Prometheus) on the event loop
(:mod:`desched.backends.usage_metrics`). With an evictionPolicy rule that remembers across cycles
(cooldown, rateLimits, waitForReplacement) that memory is loaded from its ConfigMap before the
first cycle (and on becoming the leader) and saved after each cycle that changed it, never in
dry-run (:mod:`desched.runtime.statestore`). With ``--reload-policy`` (on by default) the policy
file is read again before each cycle and at once on SIGHUP, and a changed one takes over between
two cycles, never during one (:mod:`desched.app.reload`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from desched.api.policy import Policy, load_policy_bytes, read_policy_file
from desched.app import process
from desched.app.outcomes import EvictionOutcomes
from desched.app.process import CronSpec, ServingTLS, TracingOptions
from desched.app.reload import carry_over, content_hash, describe_changes, read_policy, restart_needed
from desched.backends import surge as surging
from desched.backends.api_eviction import (
    RECONCILE_WINDOW_SECONDS,
    ApiEvictionBackend,
    EventRecorder,
    EvictionLedger,
    reconcile,
)
from desched.backends.api_nodeactions import NodeDowngrades
from desched.backends.background_evictions import BackgroundEvictions
from desched.backends.eviction_webhook import EvictionWebhooks
from desched.backends.settling import DEFAULT_SETTLING_WINDOW, SettlingGuard
from desched.backends.usage_metrics import UsageMetrics
from desched.cluster.live_source import DEFAULT_KINDS, WORKLOAD_KINDS, LiveCache
from desched.errors import UserError
from desched.framework.evictor import EvictionRecord
from desched.framework.framework import Framework, FrameworkError
from desched.framework.registry import Registry
from desched.framework.safety import is_available
from desched.framework.types import EvictResult, LiveInputs
from desched.k8s.objects import Event, Node, Pod
from desched.kube import loop as kube_loop
from desched.kube.client import RateLimiter, api_client, rate_limiter
from desched.kube.connect import (
    DEFAULT_CONNECT_TIMEOUT,
    ConnectionMonitor,
    discover,
    keep_credentials_fresh,
    load_config_bounded,
)
from desched.logs import V0, cycle_fields, eviction_fields, log_each
from desched.plugins import default_registry
from desched.runtime.leader import LeaderConfig, LeaderElector
from desched.runtime.metrics import Metrics
from desched.runtime.schedule import CronSchedule, sleep_until
from desched.runtime.server import HealthServer
from desched.runtime.statestore import DEFAULT_NAME, SafetyPersistence, StateStore, state_location
from desched.runtime.tracing import Tracing

#: Exit status of a one-shot run in which a plugin raised (as ``desched simulate``'s).
EXIT_PLUGIN_FAILED = 1

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOptions:
    policy_file: str
    interval: float = 0.0
    dry_run: bool = False
    kubeconfig: str | None = None
    context: str | None = None
    qps: float = 0.0
    burst: int = 0
    leader_elect: bool = False
    leader: LeaderConfig = field(default_factory=LeaderConfig)
    bind_address: str = "0.0.0.0"
    port: int = 10258
    #: the serving port's certificate and TLS settings (None: nothing served over TLS)
    tls: ServingTLS | None = None
    #: --permit-port-sharing: bind the serving port with SO_REUSEPORT
    reuse_port: bool = False
    disable_metrics: bool = False
    disable_serving: bool = False
    event_driven: bool = False
    debounce: float = 5.0
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    max_cycles: int = 0
    #: --otel-*: with an endpoint, cycles are traced
    tracing: TracingOptions | None = None
    #: --descheduling-interval-cron-expression: cycles at these wall-clock times (not with interval)
    cron: CronSpec | None = None
    #: the wall clock (tests give a fake one)
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    @property
    def one_shot(self) -> bool:
        """One cycle, then exit: no interval and no cron schedule."""
        return self.interval <= 0 and self.cron is None

    #: --feature-gates EvictionsInBackground=true (upstream's alpha gate, for KubeVirt)
    evictions_in_background: bool = False
    #: --safety-state-configmap: where the evictionPolicy's memory is kept ([namespace/]name)
    safety_state: str = DEFAULT_NAME
    #: --settling-window: seconds (0: off) the settling guard holds back pods whose readiness changed
    settling_window: float = DEFAULT_SETTLING_WINDOW
    #: --reload-policy: a changed policy file (or SIGHUP) reloads the policy between two cycles
    reload_policy: bool = True


def relevant_change(kind: str, kind_event: str, old: Any, new: Any) -> bool:
    """Does this cluster change warrant an early cycle in event-driven mode?"""
    if kind == "Node":
        if kind_event in ("ADDED", "DELETED"):
            return True
        if isinstance(old, Node) and isinstance(new, Node):
            return (
                old.metadata.labels != new.metadata.labels
                or old.spec.taints != new.spec.taints
                or old.spec.unschedulable != new.spec.unschedulable
            )
        return False
    if kind == "Pod" and kind_event == "MODIFIED" and isinstance(old, Pod) and isinstance(new, Pod):
        if new.status.phase == "Failed" and old.status.phase != "Failed":
            return True
        old_restarts = sum(s.restart_count for s in old.status.container_statuses or ())
        new_restarts = sum(s.restart_count for s in new.status.container_statuses or ())
        return new_restarts > old_restarts
    if kind == "Event" and kind_event in ("ADDED", "MODIFIED") and isinstance(new, Event):
        # a new occurrence of a Warning about a pod, its claim or volume (only watched when a plugin declares
        # it reads them; it counts occurrences, not cycles); a re-sent Event with no new occurrence
        # is not one
        if new.type != "Warning" or new.involved_object.kind not in _EVENT_SUBJECTS:
            return False
        return not isinstance(old, Event) or _occurrences(new) > _occurrences(old)
    return False


#: The objects whose Warning Events plugins read (``LiveInputs.warning_events``): pods, their
#: claims and the volumes those claims are bound to.
_EVENT_SUBJECTS = ("Pod", "PersistentVolumeClaim", "PersistentVolume")


#: How often a skipped cycle looks whether the cache is in sync again.
RESYNC_POLL_SECONDS = 0.2


def _occurrences(event: Event) -> int:
    series = event.series.count if event.series is not None else 0
    return max(event.count, series, 1)


@dataclass
class CycleServices:
    """What every cycle of a run works with, built once by :meth:`Descheduler.run` (which owns
    their lifetimes) and handed to each cycle as one object."""

    #: the API client (kubernetes_asyncio's, used to move bytes)
    api: Any
    #: the informers' cache the cycle's snapshot is taken from
    cache: LiveCache
    limiter: RateLimiter | None = None
    #: with --leader-elect: the lease (evictions and node writes only while it is held)
    elector: LeaderElector | None = None
    #: the plugins' node downgrades, read back from the nodes at every cycle's start
    downgrades: NodeDowngrades | None = None
    #: the actual usage of the nodes (metricsProviders)
    usage: UsageMetrics | None = None


def plugin_framework(policy: Policy, registry: Registry, metrics: Metrics | None) -> Framework:
    """The profiles of ``policy``, whose plugins register their own metrics in ``metrics``."""
    return Framework(policy, registry, metrics_registry=metrics.plugins if metrics is not None else None)


class Descheduler:
    """The live loop. :func:`run` builds its registry, framework and process services once and
    hands them over; a test may build one with the policy only (the rest is made here)."""

    def __init__(
        self,
        options: RunOptions,
        policy: Policy,
        policy_hash: str = "",
        *,
        registry: Registry | None = None,
        framework: Framework | None = None,
        schedule: CronSchedule | None = None,
        tls: ssl.SSLContext | None = None,
        tracing: Tracing | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.options = options
        self.policy = policy
        #: the content hash of the policy file that runs (desched.app.reload.content_hash)
        self.policy_hash = policy_hash
        #: the last policy file content (or read error) that failed to reload: told once, not every cycle
        self._failed: str | None = None
        #: set by SIGHUP: read the policy file now (between cycles) or once the running cycle ends
        self.hup = asyncio.Event()
        #: what a reload needs to apply (set by run())
        self._api: Any = None
        self._elector: LeaderElector | None = None
        self._watched = LiveInputs()
        self.persistence: SafetyPersistence | None = None
        self.registry = registry if registry is not None else default_registry()
        #: --descheduling-interval-cron-expression's schedule, the serving TLS context, the tracer
        self.schedule = schedule if schedule is not None else process.cron_schedule(options.cron)
        self.tls = tls
        self.tracing = tracing
        self.stop = asyncio.Event()
        self.trigger = asyncio.Event()
        #: when the last relevant change came, and whether it came within --event-debounce of the
        #: one before it (a burst, whose next cycle waits the window) or after a quiet period
        self.last_change = -float("inf")
        self.in_burst = False
        #: /metrics: desched's own, and the plugins' (``handle.metrics_registry``)
        self.metrics = None if options.disable_metrics else (metrics or Metrics())
        #: the one way the run hears of an eviction (metrics and Events; the recorder joins at start)
        self.outcomes = EvictionOutcomes(self.metrics, dry_run=options.dry_run)
        self.ready = False
        self.cycles = 0
        self.skipped_cycles = 0
        self.signals: list[str] = []
        #: pods this process evicted or may have evicted, by uid, across cycles
        self.ledger = EvictionLedger()
        #: evictions going on in background (EvictionsInBackground), across cycles
        self.background = BackgroundEvictions() if options.evictions_in_background else None
        #: Plugin runs that raised, over all cycles (a one-shot run then exits non-zero).
        self.plugin_crashes = 0
        #: outcome-unknown evictions reconciliation could not tell yet, retried after each cycle
        self.unresolved: list[tuple[EvictionRecord, float]] = []
        #: the profiles and their state across cycles (built by run() when not given)
        self.framework: Framework | None = framework
        #: holds back pods whose readiness just changed while the cluster comes back
        self.settling = SettlingGuard(options.settling_window)
        #: asks the profiles' evictionPolicy.webhook (made at the first cycle whose policy has one)
        self.webhooks: EvictionWebhooks | None = None
        #: the surges (evictionPolicy.surge) being followed until their rollouts end
        self.surge_follows: set[asyncio.Task[None]] = set()

    def _on_change(self, kind: str, event: str, old: Any, new: Any) -> None:
        self.settling.observe(kind, event, old, new)
        if not (self.ready and self.options.event_driven):
            return
        if relevant_change(kind, event, old, new) or self._replacement_ready(kind, old, new):
            now = time.monotonic()
            if not self.trigger.is_set():
                self.in_burst = now - self.last_change < self.options.debounce
            self.last_change = now
            self.trigger.set()

    def _replacement_ready(self, kind: str, old: Any, new: Any) -> bool:
        """A pod became available whose workload waits for a replacement (waitForReplacement):
        the next pod of that workload may go now."""
        safety = self.framework.safety if self.framework is not None else None
        if safety is None or kind != "Pod" or not isinstance(new, Pod):
            return False
        was_available = isinstance(old, Pod) and is_available(old)
        return not was_available and safety.awaits(new)

    def _framework(self, policy: Policy) -> Framework:
        """The profiles of ``policy``; their plugins' metrics go to /metrics."""
        return plugin_framework(policy, self.registry, self.metrics)

    async def run(self) -> int:
        opts = self.options
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._shutdown, sig)
        loop.add_signal_handler(signal.SIGHUP, self._on_hup)
        if self.metrics is not None and self.policy_hash:
            self.metrics.observe_policy(self.policy_hash)
        # the kubeconfig (and an exec credential plugin) may hang too: bound it with the rest
        cfg, source = await load_config_bounded(
            opts.kubeconfig, opts.context, opts.connect_timeout, self.stop, self.signals
        )
        monitor = ConnectionMonitor(source, bound=opts.connect_timeout)
        if self.framework is None:
            self.framework = self._framework(self.policy)
        framework = self.framework
        # What the run opens is closed in the reverse order, after its tasks have ended (_running):
        # the Events flushed, the lease released, the usage pollers, webhooks, watches, the
        # serving port and the API client closed.
        async with contextlib.AsyncExitStack() as resources:
            api = self._api = api_client(cfg)
            resources.push_async_callback(api.close)
            limiter = rate_limiter(opts.qps, opts.burst)
            self.persistence = self._persistence(framework, api)
            # what the plugins declare they read beyond the default kinds (e.g. Warning Events)
            inputs = self._watched = framework.live_inputs()
            kinds = DEFAULT_KINDS + (("Event",) if inputs.warning_events else ())
            kinds += WORKLOAD_KINDS if inputs.workloads else ()
            cache = LiveCache(
                api,
                kinds,
                limiter=limiter,
                on_change=self._on_change,
                monitor=monitor,
                on_resume=self.settling.resumed,
            )
            server = self._serve()
            if server is not None:
                resources.callback(server.stop)
            resources.push_async_callback(cache.stop)
            resources.push_async_callback(self._close_webhooks)
            usage = UsageMetrics.for_policy(self.policy, framework, api, loop, limiter=limiter)
            if usage is not None:
                resources.push_async_callback(usage.close)
            tasks: list[asyncio.Task[None]] = []
            async with self._running(tasks):
                # an exec credential plugin's token is replaced before it expires, for as long as we run
                tasks.append(
                    asyncio.create_task(keep_credentials_fresh(source, opts.connect_timeout, self.stop))
                )

                async def connect() -> None:
                    await discover(api, monitor, need_eviction=True)
                    cache.start()
                    await cache.wait_synced()

                started = time.monotonic()
                await monitor.start(connect(), self.stop, self.signals)
                log.info(
                    "cache synced: %s in %.2fs",
                    ", ".join(f"{len(i.objects)} {k}" for k, i in cache.informers.items()),
                    time.monotonic() - started,
                )
                if usage is not None:
                    await usage.start(self.stop)
                self.ready = True
                elector: LeaderElector | None = None
                if opts.leader_elect and not opts.dry_run:
                    elector = self._elector = LeaderElector(api, opts.leader)
                    resources.push_async_callback(elector.release)
                    tasks.append(asyncio.create_task(elector.run(self.stop)))
                events = self.outcomes.events = EventRecorder(
                    api, loop, failures=self.policy.eviction_failure_event_notification
                )
                resources.push_async_callback(events.flush)
                # node downgrades (plugins' node actions): expiry is read from the nodes, at every
                # cycle's start and when the earliest one is due, never from memory
                downgrades = NodeDowngrades(
                    api,
                    loop,
                    dry_run=opts.dry_run,
                    may_write=lambda: not self.stop.is_set() and (elector is None or elector.is_leader()),
                    limiter=limiter,
                )
                if not opts.one_shot:
                    timer = downgrades.run_timer(self.stop, lambda: _cached_nodes(cache))
                    tasks.append(asyncio.create_task(timer))
                services = CycleServices(api, cache, limiter, elector, downgrades, usage)
                if not await self._cycles(services):
                    return 1  # a one-shot run that could not run its cycle failed
        if opts.one_shot and self.plugin_crashes:
            return EXIT_PLUGIN_FAILED
        return 0

    async def _cycles(self, services: CycleServices) -> bool:
        """Run cycles until a stop (or the one cycle of a one-shot run); False: the one-shot
        run's cycle could not run (its cache out of sync)."""
        opts = self.options
        elector = services.elector
        if self.schedule is not None:
            await self._wait_next()  # a cron schedule's first cycle is at its first time
        skipped = False
        while not self.stop.is_set():
            if elector is not None and not elector.is_leader():
                if self.persistence is not None:
                    self.persistence.forget()  # a leader elsewhere may write it meanwhile
                await self._wait_any(elector.became_leader.wait(), None)
                if self.stop.is_set():
                    break
            # a cycle boundary: a changed policy file (or a SIGHUP) takes over here
            await self._reload(forced=self.hup.is_set())
            if await self._cache_in_sync(services.cache):
                persistence = self.persistence
                if persistence is not None and not persistence.loaded:
                    await persistence.load()
                await self._resolve_before_cycle(services)
                assert self.framework is not None  # (run() made it; a reload replaces it)
                await self._cycle(self.framework, services)
                # dry-run evicted nothing: it keeps what it charged in memory only
                if persistence is not None and not opts.dry_run and (elector is None or elector.is_leader()):
                    await persistence.save()
            elif opts.one_shot:
                return False
            else:
                self.trigger.clear()  # skipped: the next try waits for the interval or a change
                skipped = True
            if opts.one_shot or (opts.max_cycles and self.cycles >= opts.max_cycles):
                if self.surge_follows:  # the run's surges are told before it ends (each bounded)
                    await self._wait_any(asyncio.gather(*self.surge_follows), None)
                break
            # a skipped cycle runs as soon as the cache is back, not an interval later
            await self._wait_next(resync=services.cache if skipped else None)
            skipped = False
        return True

    @contextlib.asynccontextmanager
    async def _running(self, tasks: list[asyncio.Task[None]]) -> AsyncIterator[None]:
        """The run's background tasks (and the surges followed) end before what they use is closed:
        no new eviction starts, an in-flight one finishes, then every task is cancelled."""
        try:
            yield
        finally:
            self.stop.set()
            for t in (*tasks, *self.surge_follows):
                t.cancel()
            await asyncio.gather(*tasks, *self.surge_follows, return_exceptions=True)

    def _serve(self) -> HealthServer | None:
        """Serve /healthz, /readyz and /metrics (None: --secure-port 0)."""
        opts = self.options
        if opts.disable_serving:
            return None
        server = HealthServer(
            opts.bind_address,
            opts.port,
            registry=self.metrics.registry if self.metrics else None,
            ready=lambda: self.ready,
            tls=self.tls,
            reuse_port=opts.reuse_port,
        )
        server.start()
        log.info(
            "serving /healthz /readyz%s on %s:%d",
            "" if opts.disable_metrics else " /metrics",
            opts.bind_address,
            server.port,
        )
        return server

    async def _close_webhooks(self) -> None:
        if self.webhooks is not None:
            await self.webhooks.close()

    def _persistence(self, framework: Framework, api: Any) -> SafetyPersistence | None:
        """The keeper of the evictionPolicy's memory across restarts (desched.runtime.statestore),
        when the policy has a rule that remembers (cooldown, rateLimits, waitForReplacement)."""
        safety = framework.safety
        if safety is None or not safety.stateful:
            return None
        namespace, name = state_location(self.options.safety_state, self.options.leader.namespace)
        log.info("the safety state is kept in ConfigMap %s/%s", namespace, name)
        return SafetyPersistence(
            safety,
            StateStore(api, namespace, name),
            framework.ctx.clock,
            on_save=self.metrics.observe_state_save if self.metrics is not None else None,
        )

    async def _cache_in_sync(self, cache: LiveCache) -> bool:
        """Wait (up to --client-connection-timeout) for every informer to reflect the server."""
        deadline = time.monotonic() + self.options.connect_timeout
        while not self.stop.is_set():
            problems = cache.unsynced()
            if not problems:
                return True
            if time.monotonic() >= deadline:
                self.skipped_cycles += 1
                log.error(
                    "cycle skipped: the cache is not in sync with the API server (%s); "
                    "nothing is decided on stale data (%d cycles skipped so far)",
                    "; ".join(problems),
                    self.skipped_cycles,
                )
                return False
            await self._wait_any(asyncio.sleep(0.2), None)
        return False

    def _on_hup(self) -> None:
        if not self.options.reload_policy:
            log.info("received SIGHUP: ignored (--reload-policy=false; a restart applies a new policy)")
            return
        log.info("received SIGHUP: reading the policy file again")
        self.hup.set()

    def _own_object(self) -> dict[str, str] | None:
        """What a PolicyReloadFailed Event is about: desched's pod ($POD_NAME in $POD_NAMESPACE, the
        downward API), else the Lease it holds with --leader-elect, else nothing."""
        name, namespace = os.environ.get("POD_NAME", "").strip(), os.environ.get("POD_NAMESPACE", "").strip()
        if name and namespace:
            return {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name}
        if self._elector is not None:
            lease = self.options.leader
            return {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "namespace": lease.namespace,
                "name": lease.name,
            }
        return None

    async def _reload(self, *, forced: bool) -> None:
        """At a cycle boundary: load the policy file again if its content changed (or on SIGHUP).
        A new policy that does not load, or that changes what only a restart applies, leaves the
        running one in place: one error line naming the field, a Warning Event, the metric."""
        self.hup.clear()
        opts = self.options
        old = self.framework
        if not opts.reload_policy or old is None:
            return
        try:
            data = read_policy_file(opts.policy_file)
        except UserError as e:
            self._reload_failed(f"unreadable: {e}", str(e))
            return
        digest = content_hash(data)
        if digest == self.policy_hash:
            if forced:
                log.info("policy file unchanged (hash %s): nothing to reload", digest)
            self._failed = None  # (back to the running policy: a later bad one is told again)
            return
        if digest == self._failed and not forced:
            return  # this content failed already: told once
        try:
            policy = load_policy_bytes(data, opts.policy_file, self.registry)
            framework = self._framework(policy)
        except UserError as e:
            self._reload_failed(digest, str(e))
            return
        except FrameworkError as e:
            self._reload_failed(digest, str(UserError("policy", str(e))))
            return
        problem = restart_needed(self.policy, policy, self._watched, framework.live_inputs())
        if problem is not None:
            self._reload_failed(digest, str(UserError(*problem)))
            return
        carry_over(old, framework)
        changes = describe_changes(self.policy, policy)
        previous = self.policy_hash
        self.policy, self.framework, self.policy_hash, self._failed = policy, framework, digest, None
        if self.persistence is not None:
            self.persistence.forget()
        self.persistence = self._persistence(framework, self._api)
        if self.outcomes.events is not None:
            self.outcomes.events.failures = policy.eviction_failure_event_notification
        if self.metrics is not None:
            self.metrics.observe_policy_reload("success")
            self.metrics.observe_policy(digest)
        log.info(
            "policy reloaded (hash %s -> %s): %s",
            previous,
            digest,
            "; ".join(changes) or "nothing that changes decisions (formatting, comments)",
        )

    def _reload_failed(self, key: str, error: str) -> None:
        if key == self._failed:
            return
        self._failed = key
        log.error("policy reload failed, the running policy (hash %s) stays: %s", self.policy_hash, error)
        if self.metrics is not None:
            self.metrics.observe_policy_reload("error")
        regarding = self._own_object()
        events = self.outcomes.events
        if events is None or self.options.dry_run:  # (a dry run records no Events)
            return
        if regarding is None:
            log.info("no PolicyReloadFailed Event: POD_NAME/POD_NAMESPACE are not set and no lease is held")
            return
        events.observe_policy_reload_failed(
            regarding, f"{self.options.policy_file}: the running policy stays: {error}"
        )

    def _shutdown(self, sig: int) -> None:
        self.signals.append(signal.Signals(sig).name)
        log.info("received %s: stopping new evictions and shutting down", signal.Signals(sig).name)
        self.stop.set()

    async def _wait_any(self, coro: Any, timeout: float | None) -> None:
        waiter = asyncio.ensure_future(coro)
        stopper = asyncio.ensure_future(self.stop.wait())
        try:
            await asyncio.wait({waiter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for f in (waiter, stopper):
                f.cancel()

    async def _wait_next(self, resync: LiveCache | None = None) -> None:
        """Sleep until the interval passes (or the cron schedule's next time comes), or
        (event-driven) a relevant change: at once after a quiet period, debounced in a burst. A
        change that came during the cycle (after its snapshot) counts. With ``resync`` (the cycle
        was skipped, its cache out of sync), also until that cache is in sync again: the skipped
        cycle then runs at once (within :data:`RESYNC_POLL_SECONDS`), not an interval later."""
        schedule = self.schedule
        if schedule is not None:
            clock = self.options.clock
            when = schedule.next_after(clock())
            log.info("next cycle at %s (%s)", when.isoformat(), schedule.describe())
            if await sleep_until(when, now=clock, wait=self._wait_trigger) and not self.stop.is_set():
                await self._debounce()
            return
        deadline = time.monotonic() + self.options.interval
        while not self.stop.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if resync is not None:
                if not resync.unsynced():
                    log.info("the cache is in sync again: running the skipped cycle")
                    return
                remaining = min(remaining, RESYNC_POLL_SECONDS)
            await self._wait_any(self._trigger_or_hup(), remaining)
            if self.hup.is_set():  # between cycles: the reload happens now, the wait goes on
                await self._reload(forced=True)
                continue
            if self.trigger.is_set():
                await self._debounce()
                return

    async def _trigger_or_hup(self) -> None:
        waits = {asyncio.ensure_future(self.trigger.wait()), asyncio.ensure_future(self.hup.wait())}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _debounce(self) -> None:
        """A change after a quiet period runs a cycle at once; in a burst (a change within
        --event-debounce of the one before), wait the window so the burst runs one cycle."""
        if self.in_burst:
            await self._wait_any(asyncio.sleep(self.options.debounce), None)
            log.info("cluster changed: running a cycle early (a burst of changes, debounced)")
        else:
            log.info("cluster changed: running a cycle early")

    async def _wait_trigger(self, seconds: float) -> bool:
        """Wait ``seconds``; True when a stop or (event-driven) a change came first. A SIGHUP
        meanwhile reloads the policy (between cycles) and the wait goes on."""
        await self._wait_any(self._trigger_or_hup(), seconds)
        if self.hup.is_set() and not self.stop.is_set():
            await self._reload(forced=True)
        return self.stop.is_set() or self.trigger.is_set()

    async def _cycle(self, framework: Framework, services: CycleServices) -> None:
        opts = self.options
        loop = asyncio.get_running_loop()
        cache, downgrades, elector, usage = (
            services.cache,
            services.downgrades,
            services.elector,
            services.usage,
        )
        node_actions = None
        if downgrades is not None:
            node_actions = downgrades.cycle_actions()
            node_actions.add_records(await downgrades.reconcile(_cached_nodes(cache)))
        self.trigger.clear()  # the snapshot sees every change so far; later ones start another cycle
        snapshot = cache.snapshot()
        pods = len(snapshot.pods)  # the cycle's evictions take pods out of the snapshot
        self.settling.begin_cycle(snapshot)  # before the evictions change the snapshot
        if self.background is not None:
            self.background.sync(snapshot.pods)
        if usage is not None:
            await usage.begin_cycle()

        def may_evict() -> bool:
            return not self.stop.is_set() and (elector is None or elector.is_leader())

        if self.webhooks is None:  # opens no connection until a profile's webhook is asked
            on_error = self.metrics.observe_webhook_error if self.metrics is not None else None
            self.webhooks = EvictionWebhooks(loop, on_error=on_error)
        backend = ApiEvictionBackend(
            services.api,
            loop,
            dry_run=opts.dry_run,
            may_evict=may_evict,
            limiter=services.limiter,
            lease_time_left=elector.time_left if elector is not None else lambda: None,
            ledger=self.ledger,
            background=self.background,
            hold=self.settling.check if self.settling.enabled else None,
            webhooks=self.webhooks,
        )
        run_cycle = framework.run_cycle if self.tracing is None else self.tracing.run_cycle(framework)
        result = await asyncio.to_thread(
            run_cycle,
            snapshot,
            backend,
            observers=(self.outcomes.evicted,),
            on_plugin_run=self.metrics.observe_plugin if self.metrics else None,
            node_actions=node_actions,
        )
        self.cycles += 1
        self.plugin_crashes += len(result.crashes)
        if self.metrics is not None:
            self.metrics.observe_cycle(result.seconds)
            if downgrades is not None:
                self.metrics.observe_downgraded_nodes(downgrades.downgraded_count())
        verb = "would evict" if opts.dry_run else "evicted"  # one line per eviction, in batches
        log_each(log, V0, verb, map(eviction_fields, result.evictions))
        for r in result.records:
            if r.result is EvictResult.BACKGROUND:
                log.log(V0, "eviction goes on in background", extra=eviction_fields(r))
        for run in result.plugin_runs:
            if run.error is not None and not run.crashed:  # a crash is logged where it happens
                log.error("plugin %s of profile %s: %s", run.plugin, run.profile, run.error)
        for r in result.failures:
            log.warning(
                "did not evict pod %s/%s (%s/%s): %s",
                r.namespace,
                r.name,
                r.profile,
                r.plugin,
                r.error or r.result.value,
            )
        log.log(
            V0,
            "cycle done",
            extra=cycle_fields(self.cycles, pods, result, dry_run=opts.dry_run),
        )
        for surge in backend.surges:
            if not surge.dry_run:
                task = asyncio.create_task(self._follow_surge(services.api, surge))
                self.surge_follows.add(task)
                task.add_done_callback(self.surge_follows.discard)
        if result.unknown or self.unresolved:
            await self._reconcile(result.unknown, services, final=opts.one_shot)

    async def _follow_surge(self, api: Any, surge: surging.Started) -> None:
        """Follow one surge's rollout to its end (at most its timeout), then tell how it ended."""
        done = await surging.follow_surge(api, surge)
        fields = {
            "pod": f"{surge.namespace}/{surge.pod}",
            "node": surge.node,
            "profile": surge.profile,
            "plugin": surge.plugin,
            "method": "surge",
            "target": surge.target,
            "seconds": round(done.seconds, 1),
            "detail": done.detail,
        }
        if done.succeeded:
            log.log(V0, "surge done", extra=fields)
        else:
            log.warning("surge failed", extra=fields)
        self.outcomes.surge_done(done)

    async def _resolve_before_cycle(self, services: CycleServices) -> None:
        """Tell, before the cycle, what became of the evictions whose outcome was still unknown
        (their answers lost while the apiserver was down): a pod found not evicted is forgotten by
        the ledger and evicted by this cycle, not skipped until the next one (after an outage that
        was an interval more for each such pod)."""
        if self.unresolved:
            await self._reconcile([], services, final=False)

    async def _reconcile(
        self, records: list[EvictionRecord], services: CycleServices, *, final: bool
    ) -> None:
        """Tell what became of outcome-unknown evictions: log, metric, event. Those it cannot tell
        yet (the apiserver unreachable) are tried again after the next cycles, until the ledger
        forgets them; reported as unknown then, or at once when ``final`` (no next cycle)."""
        pods = services.cache.informers.get("Pod")

        def cached_pod(namespace: str, name: str) -> Pod | None:
            obj = pods.objects.get(f"{namespace}/{name}") if pods is not None else None
            return obj if isinstance(obj, Pod) else None

        now = time.monotonic()
        since = {id(r): t for r, t in self.unresolved}
        since.update((id(r), now) for r in records)
        todo = [r for r, _ in self.unresolved] + records
        # only this cycle's evictions need the window in which the cache catches up
        window = RECONCILE_WINDOW_SECONDS if records else 0.0
        self.unresolved = []
        reconciled = await reconcile(
            todo, cached_pod, services.api, window=window, stop=self.stop, ledger=self.ledger
        )
        for done in reconciled:
            r = done.record
            first_seen = since[id(r)]
            retry = not final and not self.stop.is_set() and now - first_seen < self.ledger.ttl
            if done.outcome == "unknown" and retry:
                self.unresolved.append((r, first_seen))
                log.info(
                    "eviction of pod %s/%s: outcome still unknown (%s)",
                    r.namespace,
                    r.name,
                    done.evidence,
                )
                continue
            log.info(
                "eviction of pod %s/%s (outcome unknown: %s) reconciled: %s (%s)",
                r.namespace,
                r.name,
                r.error,
                done.outcome,
                done.evidence,
            )
            self.outcomes.reconciled(done)


def run(options: RunOptions) -> int:
    """``desched run``, the composition root: the process services, the plugin registry, the
    policy and its framework are built here, once each, and handed to the live loop, which owns
    what it opens (:meth:`Descheduler.run`); the tracer is flushed when the run ends."""
    tracing = process.tracing(options.tracing)
    try:
        return _run(options, tracing)
    finally:
        if tracing is not None:
            tracing.shutdown()


def _run(options: RunOptions, tracing: Tracing | None) -> int:
    tls = process.serving_tls(options.tls)
    schedule = process.cron_schedule(options.cron)
    registry = default_registry()
    policy, digest = read_policy(options.policy_file, registry)
    if options.leader_elect and options.one_shot and not options.dry_run:
        raise UserError(
            "--leader-elect",
            "needs --descheduling-interval > 0 or --descheduling-interval-cron-expression "
            "(a one-shot run has nothing to lead)",
        )
    metrics = None if options.disable_metrics else Metrics()
    try:
        framework = plugin_framework(policy, registry, metrics)
    except FrameworkError as e:
        raise UserError("policy", str(e)) from None
    log.info("policy %s loaded (hash %s)", options.policy_file, digest)
    descheduler = Descheduler(
        options,
        policy,
        digest,
        registry=registry,
        framework=framework,
        schedule=schedule,
        tls=tls,
        tracing=tracing,
        metrics=metrics,
    )
    return kube_loop.run(descheduler.run())


def _cached_nodes(cache: LiveCache) -> list[Node]:
    inf = cache.informers.get("Node")
    return list(inf.objects.values()) if inf is not None else []


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"
