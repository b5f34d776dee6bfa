"""The multi-cycle driver: run a descheduling cycle on the snapshot, place its evicted pods'
replacements as kube-scheduler would (:class:`~desched.scheduling.placement.PlacementSimulator`),
then the next cycle, and picture the cluster before the first and after the last."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import EvictionRequest
from desched.framework.framework import CycleResult
from desched.framework.nodeactions import nodes_after_actions
from desched.gcpause import gc_paused
from desched.k8s import pods as k8s_pods
from desched.k8s import priority as k8s_priority
from desched.k8s.objects import Pod
from desched.k8s.replacements import (
    bound_replacement,
    make_replacement,
    pending_replacement,
    terminating_pod,
)
from desched.scheduling.placement import (
    ORDER_AFTER_CYCLE,
    ORDER_INTERLEAVED,
    TERMINATING_HOLD,
    PlacementOptions,
    PlacementSimulator,
    queue_order,
)
from desched.simulation.picture import cluster_picture
from desched.simulation.replacements import replacement_name
from desched.simulation.results import (
    GONE,
    PENDING,
    PLACED,
    THRASH_RE_EVICTED,
    THRASH_SAME_NODE,
    CyclePlacement,
    PodPlacement,
    Simulation,
    Thrash,
)

ProgressFn = Callable[[str, int, int], None]
#: Pods placed between two progress reports.
_PROGRESS_EVERY: Final = 64


class EvictionRecorder:
    """The simulated eviction backend, remembering the evicted pods for placement."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self.pods: dict[str, Pod] = {}

    def evict(self, pod: Pod, request: EvictionRequest) -> str | None:
        self.snapshot.remove_pod(pod)
        self.pods[pod.key] = pod
        return None


class _Placer:
    """One cycle's placements: kube-scheduler's view of the cluster while the cycle evicts (see
    :class:`PlacementOptions` ``order`` and ``terminating``) and the outcome of every replacement."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        options: PlacementOptions,
        result: CycleResult,
        now: datetime,
        cycle: int,
        run: CyclePlacement,
        replacement_of: dict[str, tuple[str, int]],
    ) -> None:
        self.snapshot = snapshot
        self.options = options
        self.nodes = nodes_after_actions(snapshot.nodes, result.node_actions)
        self.now = now
        self.cycle = cycle
        self.run = run
        self.replacement_of = replacement_of
        #: the replacements still Pending after the cycle (tried again after the next one)
        self.carried: list[_Queued] = []
        # each placed or pending replacement's outcome, in the order first tried
        self._outcomes: list[PodPlacement] = []
        self._at: dict[int, int] = {}
        self._done = 0
        self._progress: Callable[[], None] = lambda: None

    def replay(
        self,
        retried: list[_Queued],
        evicted: list[tuple[Pod, _Queued | None]],
        progress: ProgressFn,
    ) -> None:
        """Place the Pending replacements of earlier cycles, then the replacements of this
        cycle's ``evicted`` pods (in eviction order), as the options say."""
        snapshot, options, k = self.snapshot, self.options, self.cycle
        total = len(retried) + sum(q is not None for _, q in evicted)
        self._progress = lambda: progress(f"cycle {k}: placing pods", self._done, total)
        hold = options.terminating == TERMINATING_HOLD
        if options.order == ORDER_AFTER_CYCLE and not hold:
            # every evicted pod gone, then the scheduling queue: higher priority first, then
            # first queued first
            at_once = retried + [q for _, q in evicted if q is not None]
            at_once = queue_order(at_once)
            sim = PlacementSimulator(snapshot, options, nodes=self.nodes)
            for q in at_once:
                self._place(sim, q)
            self._finish()
            return
        # kube-scheduler's view: the evicted pods are still there until deleted (or terminated)
        for pod, _ in evicted:
            snapshot.add_pod(pod)
        sim = PlacementSimulator(snapshot, options, nodes=self.nodes)
        for q in queue_order(retried):
            self._place(sim, q)
        terminating: list[Pod] = []
        # a StatefulSet re-creates its pod under the same name only once the old one is gone
        later: list[_Queued] = []
        queue: list[_Queued] = []
        for pod, maybe in evicted:
            if hold:
                gone = terminating_pod(pod, self.now)
                sim.terminate(pod, gone)
                terminating.append(gone)
            else:
                sim.unbind(pod)
            if maybe is None:
                continue
            if hold and maybe.pod.metadata.name == pod.metadata.name:
                later.append(maybe)
            elif options.order == ORDER_INTERLEAVED:
                self._place(sim, maybe)
            else:
                queue.append(maybe)
        for q in queue_order(queue):
            self._place(sim, q)
        # the terminating pods are gone; kube-scheduler tries the Pending replacements again
        # (a deleted pod is a cluster event that requeues them), higher priority first
        again = self.carried + later
        self.carried = []
        if not again:
            for gone in terminating:
                snapshot.remove_pod(gone)
            self._finish()
            return
        # the model follows the deletions (the same state as a model made afresh from the
        # snapshot without them, at a fraction of the cost), and its search starts at the
        # first node as a fresh model's would
        sim.remove_gone(terminating)
        sim.restart_search()
        for q in queue_order(again):
            self._place(sim, q)
        self._finish()

    def _place(self, sim: PlacementSimulator, q: _Queued) -> None:
        k, now, run = self.cycle, self.now, self.run
        if not self._done % _PROGRESS_EVERY:
            self._progress()
        self._done += 1
        pod = q.pod
        decision = sim.decide(pod)
        ns, rname = pod.metadata.namespace, pod.metadata.name
        if decision.node:
            sim.bind(bound_replacement(pod, decision.node, now))
            outcome = PodPlacement(
                k,
                ns,
                q.original,
                q.evicted_from,
                PLACED,
                rname,
                decision.node,
                priority=q.priority,
                score=decision.score,
                evicted_by=q.evicted_by,
                retried=q.retried,
            )
            if outcome.same_node:
                run.thrashing.append(
                    Thrash(
                        k,
                        THRASH_SAME_NODE,
                        ns,
                        q.original,
                        decision.node,
                        f"replacement {rname} lands back on {decision.node}, where {q.original} was "
                        "evicted from",
                    )
                )
        else:
            self.snapshot.add_pod(pending_replacement(pod, decision.reason, now))
            self.carried.append(q)
            outcome = PodPlacement(
                k,
                ns,
                q.original,
                q.evicted_from,
                PENDING,
                rname,
                reason=decision.reason,
                priority=q.priority,
                evicted_by=q.evicted_by,
                retried=q.retried,
            )
        at = self._at.get(id(q))
        if at is None:
            self._at[id(q)] = len(self._outcomes)
            self._outcomes.append(outcome)
        else:
            self._outcomes[at] = outcome  # tried again: the last attempt is the outcome
        self.replacement_of[f"{ns}/{rname}"] = (f"{ns}/{q.original}", k)

    def _finish(self) -> None:
        self.run.placements.extend(self._outcomes)
        self._progress()


@dataclass
class _Queued:
    pod: Pod  # the replacement, unbound
    original: str  # the evicted pod's name
    evicted_from: str
    evicted_by: str
    priority: int
    retried: bool


def simulate(
    snapshot: ClusterSnapshot,
    run_cycle: Callable[[ClusterSnapshot, EvictionRecorder, int], CycleResult],
    *,
    now: datetime,
    cycles: int = 1,
    options: PlacementOptions | None = None,
    placement: bool = True,
    on_progress: ProgressFn | None = None,
) -> Simulation:
    """Run up to ``cycles`` descheduling cycles on ``snapshot`` (mutated), placing each cycle's
    evicted pods again before the next one; stop early when a cycle evicts nothing.

    ``run_cycle(snapshot, backend, k)`` runs cycle ``k`` with ``backend`` as its eviction backend.
    """
    if cycles < 1:
        raise ValueError(f"cycles must be at least 1, got {cycles}")
    # as Framework.run_cycle: many short-lived objects next to a large live snapshot would make
    # the cyclic collector rescan the snapshot again and again; reference counting frees the rest
    with gc_paused():
        return _simulate(
            snapshot, run_cycle, now, cycles, options or PlacementOptions(), placement, on_progress
        )


def _simulate(
    snapshot: ClusterSnapshot,
    run_cycle: Callable[[ClusterSnapshot, EvictionRecorder, int], CycleResult],
    now: datetime,
    cycles: int,
    options: PlacementOptions,
    placement: bool,
    on_progress: ProgressFn | None,
) -> Simulation:
    progress: ProgressFn = on_progress or (lambda phase, done, total: None)
    progress("measuring the cluster", 0, 1)
    before = cluster_picture(snapshot)
    classes = snapshot.priority_classes
    default_class = k8s_priority.global_default_class(classes)
    runs: list[CyclePlacement] = []
    replacement_of: dict[str, tuple[str, int]] = {}
    carried: list[_Queued] = []
    stop_reason = f"ran the {cycles} cycle(s) asked for"
    converged = False
    for k in range(1, cycles + 1):
        progress(f"cycle {k}: descheduling", 0, 1)
        if k > 1:
            # the next cycle reads the cluster as run's next cycle reads it: a fresh listing
            snapshot.reorder()
            # with the nodes as the last cycle's node actions left them (a soft taint or a
            # downgrade, and its record: the next cycle extends or removes it as its own)
            changed = nodes_after_actions(snapshot.nodes, runs[-1].result.node_actions)
            if changed is not None:
                snapshot.replace_nodes(changed)
        recorder = EvictionRecorder(snapshot)
        result = run_cycle(snapshot, recorder, k)
        run = CyclePlacement(k, result)
        runs.append(run)
        evictions = list(result.evictions)
        for e in evictions:
            key = f"{e.namespace}/{e.name}"
            earlier = replacement_of.get(key)
            if earlier is not None:
                original, cycle = earlier
                run.thrashing.append(
                    Thrash(
                        k,
                        THRASH_RE_EVICTED,
                        e.namespace,
                        e.name,
                        e.node,
                        f"replacement of {original} (evicted in cycle {cycle}) evicted again by "
                        f"{e.profile}/{e.plugin}",
                    )
                )
        if result.skipped:
            stop_reason = f"cycle {k} was skipped: {result.skipped}"
            break
        if not evictions:
            stop_reason = f"cycle {k} evicted nothing"
            converged = True
            break
        if not placement:
            continue
        t0 = time.perf_counter()
        retried: list[_Queued] = []
        for q in carried:
            current = snapshot.pod(q.pod.metadata.namespace, q.pod.metadata.name)
            if current is not None and not current.spec.node_name and k8s_pods.occupies_node(current):
                retried.append(_Queued(current, q.original, q.evicted_from, "", q.priority, True))
        carried = []
        # the evicted pods in eviction order, each with its replacement (None: gone)
        evicted: list[tuple[Pod, _Queued | None]] = []
        for e in evictions:
            pod = recorder.pods.get(f"{e.namespace}/{e.name}")
            by = f"{e.profile}/{e.plugin}"
            if pod is None:
                continue
            priority = k8s_priority.resolve_pod_priority(pod, classes, default_class)
            gone_reason = ""
            if k8s_pods.is_bare_pod(pod):
                gone_reason = "bare pod: nothing re-creates it"
            elif not k8s_pods.occupies_node(pod):
                gone_reason = (
                    f"{pod.status.phase} pod: its controller already counted it as finished "
                    "and does not re-create it"
                )
            if gone_reason:
                run.placements.append(
                    PodPlacement(
                        k,
                        e.namespace,
                        e.name,
                        e.node,
                        GONE,
                        reason=gone_reason,
                        priority=priority,
                        evicted_by=by,
                    )
                )
                evicted.append((pod, None))
                continue
            name = replacement_name(snapshot, pod, k)
            queued = _Queued(make_replacement(pod, name, now, k), e.name, e.node, by, priority, False)
            evicted.append((pod, queued))
        placer = _Placer(snapshot, options, result, now, k, run, replacement_of)
        placer.replay(retried, evicted, progress)
        carried = placer.carried
        run.seconds = time.perf_counter() - t0
    progress("measuring the cluster", 0, 1)
    after = cluster_picture(snapshot, before.specs, since=before)
    after.state = None
    return Simulation(runs, before, after, options, placement, stop_reason, converged)
