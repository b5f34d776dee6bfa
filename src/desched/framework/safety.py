"""The ``evictionPolicy`` rules, applied at the one door every eviction passes.

:class:`desched.framework.evictor.PodEvictor` asks :meth:`Safety.check` right before it hands a pod
to the eviction backend (after the profile's filters and the policy's limits), whichever plugin
asks and whether the cycle runs live (``desched run``) or simulated (``desched simulate``): both
decide the same. A rule that refuses returns a :class:`Skip` (a reason from :class:`SkipReason`,
the metric's label, and a sentence for people); the evictor records the pod as skipped and the
plugin goes on with its next pod.

The rules, in the order they are checked (the first that refuses names the skip):

1. opt-outs: ``karpenter.sh/do-not-disrupt: "true"`` and
   ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` (each switched on separately);
2. disruption windows: evictions only inside an ``Allow`` window (when the profile has one), never
   inside a ``Forbid`` window; judged once per cycle, at the cycle's clock;
3. cooldown: a workload moved in an earlier cycle is not moved again for ``base``, doubled for each
   earlier move within ``window``, at most ``max``;
4. ``waitForReplacement``: after a workload's pod is evicted, its next one waits until the
   workload has as many available pods as it had before that eviction (the replacement is
   Ready), or until ``timeout`` has passed since the eviction; across cycles;
5. ``maxEvictionsPerWorkload``: evictions of one workload in one cycle (all profiles together);
6. ``rateLimits``: a token bucket per workload, per namespace and for the cluster (each scope
   switched on separately) holds at most ``burst`` evictions and refills at
   ``evictionsPerMinute``, on the cycle's clock (so one cycle takes at most ``burst``); the
   buckets are shared by the profiles, each refilling them at its own rate;
7. ``maxUnavailablePerWorkload``: the workload's pods that are not available (not Running and
   Ready, or terminating) plus those evicted in this cycle (finished pods aside: see below) may not
   exceed the budget after this eviction; a pod that is already unavailable may always go (it
   adds nothing). A percentage is of the workload's replicas, rounded down: with ``"50%"`` a
   single-replica workload is never evicted (losing its one pod is 100% unavailable).
8. ``predictive``: the placement model ``desched simulate`` uses (kube-scheduler 1.36's default
   profile, :mod:`desched.scheduling.placement`), kept in step with the cycle's evictions, is asked
   where the pod's replacement would land, with the pod still terminating on its node and the
   replacements of the cycle's earlier evictions bound where it put them, and the nodes as the
   cycle's node actions (RemoveAnomalyPods' downgrades, the expired ones removed before the cycle)
   left them at that moment: the eviction is skipped
   when the replacement would stay Pending or land back on the pod's node. A pod nothing re-creates
   (bare) is judged the same way: it must fit some other node. Finished pods are not judged. A
   StatefulSet's pod is re-created under its name once it is gone (simulate places it after the
   cycle's other replacements): it is judged with the pod gone, against the cluster as the cycle
   has it at that moment, an approximation of what simulate then does. Then the plugin that asked
   (if it declares :class:`~desched.framework.types.JudgesMoves`; not for a bare pod) judges the
   move: the eviction is skipped, with the plugin's reason, when it would not reduce the
   violation the plugin acts on. A predictive skip is ``no_gain``: the evictor answers
   ``EvictResult.NO_GAIN``, which the plugin counts as moved.

A workload is a pod's controller (its ``ownerReferences`` entry with ``controller: true``, else
its first owner): a ReplicaSet is one pod template, so a Deployment's rollout starts afresh. A pod
without owners is its own workload. A workload's replicas are its pods in the cycle's cluster that
have not finished, plus those evicted in this cycle: a Succeeded or Failed pod (a kubelet-evicted
one left behind) is neither a replica nor unavailable, as the disruption controller counts a
workload's pods (:mod:`desched.k8s.disruption`); the snapshot holds no ReplicaSet objects, so
``spec.replicas`` is not read: a replica not yet re-created is not counted.

State across cycles (the moves the cooldown remembers, the token buckets, the workloads waiting for
a replacement) lives in this object, which the framework keeps for its lifetime. :meth:`Safety.state`
and :meth:`Safety.restore` hand it out and take it back as a
:class:`desched.framework.safetystate.SafetyState`, so that ``desched run`` keeps it across restarts
and leader changes (in a ConfigMap, :mod:`desched.runtime.statestore`); ``simulate`` keeps it in
memory only.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import cronsim

from desched.api.evictionpolicy import (
    DisruptionWindow,
    EvictionPolicy,
    Rate,
    RateScope,
    Surge,
    Webhook,
    WindowAction,
    format_duration,
    resolve_amount,
)
from desched.cluster.snapshot import ClusterSnapshot
from desched.cluster.view import ClusterView
from desched.framework import safetystate
from desched.framework.nodeactions import NodeActionBackend, nodes_after_actions
from desched.framework.types import NoGain, PredictedMove
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Node, Pod
from desched.k8s.replacements import bound_replacement, make_replacement, terminating_pod
from desched.scheduling.placement import Decision, PlacementSimulator

KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CLUSTER_AUTOSCALER_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"

#: (namespace, owner kind, owner name); a bare pod is ("ns", "Pod", its name).
WorkloadKey = tuple[str, str, str]
#: a plugin's judgement of a predicted move (:meth:`desched.framework.types.JudgesMoves.judge_move`)
MoveJudge = Callable[[PredictedMove], NoGain | None]


class SkipReason(enum.StrEnum):
    """Why an eviction was skipped: the ``reason`` label of ``descheduler_evictions_skipped_total``."""

    OPT_OUT = "opt_out"
    DISRUPTION_WINDOW = "disruption_window"
    COOLDOWN = "cooldown"
    MAX_EVICTIONS_PER_WORKLOAD = "max_evictions_per_workload"
    MAX_UNAVAILABLE_PER_WORKLOAD = "max_unavailable_per_workload"
    RATE_LIMIT = "rate_limit"
    WAIT_FOR_REPLACEMENT = "wait_for_replacement"
    PREDICTED_PENDING = "predicted_pending"
    PREDICTED_SAME_NODE = "predicted_same_node"
    #: not the evictionPolicy's: a live run's settling guard held it back (desched.backends.settling)
    SETTLING = "settling"
    #: the profile's ``evictionPolicy.webhook`` denied it (desched.backends.eviction_webhook)
    WEBHOOK_DENIED = "webhook_denied"
    #: the webhook gave no usable answer and its ``failurePolicy`` is ``Fail``
    WEBHOOK_ERROR = "webhook_error"


@dataclass(frozen=True, slots=True)
class Skip:
    #: a :class:`SkipReason`, or the label a plugin's judgement gave (:class:`NoGain`)
    reason: str
    detail: str
    #: ``predictive`` skipped it: the move would not help (the plugin counts the pod as moved)
    no_gain: bool = False


class TokenBucket:
    """``burst`` tokens at most, refilled continuously at ``rate.per_minute`` a minute; starts full.

    Hand-written: a bucket is a few lines, and the clock must be the cycle's (injected), which the
    rate-limit libraries found (their own monotonic clocks, async waits) do not take.
    """

    __slots__ = ("rate", "tokens", "updated")

    def __init__(self, rate: Rate, now: datetime) -> None:
        self.tokens = float(rate.burst)
        self.updated = now
        #: the rate of the last take (a bucket refilled to it is as good as none: it is dropped)
        self.rate = rate

    def refill(self, rate: Rate, now: datetime) -> None:
        elapsed = (now - self.updated).total_seconds()
        if elapsed > 0:
            self.tokens = min(float(rate.burst), self.tokens + elapsed * rate.per_minute / 60.0)
            self.updated = now

    def available(self, rate: Rate, now: datetime) -> bool:
        self.refill(rate, now)
        return self.tokens >= 1.0 - 1e-9

    def take(self, rate: Rate, now: datetime) -> None:
        self.refill(rate, now)
        self.tokens -= 1.0
        self.rate = rate

    def full(self, now: datetime) -> bool:
        self.refill(self.rate, now)
        return self.tokens >= self.rate.burst


def workload_of(pod: Pod) -> WorkloadKey:
    ns = pod.metadata.namespace
    ref = k8s_pods.controller_ref(pod)
    if ref is None:
        refs = k8s_pods.owner_refs(pod)
        ref = refs[0] if refs else None
    return (ns, ref.kind, ref.name) if ref is not None else (ns, "Pod", pod.metadata.name)


def describe(key: WorkloadKey) -> str:
    return f"{key[1]} {key[0]}/{key[2]}"


def is_available(pod: Pod) -> bool:
    """Running, Ready and not terminating: what a budget counts as available."""
    return pod.status.phase == "Running" and k8s_pods.is_pod_ready(pod) and not k8s_pods.is_terminating(pod)


def window_open(window: DisruptionWindow, now: datetime) -> bool:
    """``now`` lies in ``[start, start + duration)`` of some start the window's schedule gives."""
    local = now.astimezone(ZoneInfo(window.time_zone))
    # the latest start at or before ``now`` (cron has minutes: from the next whole second back)
    start_from = local.replace(microsecond=0) + timedelta(seconds=1)
    latest = next(iter(cronsim.CronSim(window.schedule, start_from, reverse=True)), None)
    return latest is not None and latest <= local < latest + window.duration


class Safety:
    """The rules of every profile that has some, and the memory they need across cycles."""

    def __init__(self, policies: Mapping[str, EvictionPolicy]) -> None:
        self._policies = {name: p for name, p in policies.items() if p.active}
        #: (cycle number, cycle start) of every cycle that moved a workload, oldest first
        self._moves: dict[WorkloadKey, list[tuple[int, datetime]]] = {}
        self._cycle = 0
        self._remember = any(p.cooldown is not None for p in self._policies.values())
        self._keep = max(
            (p.cooldown.window for p in self._policies.values() if p.cooldown is not None),
            default=timedelta(0),
        )
        self._view: ClusterView | None = None
        self._now = datetime.min
        self._cycle_evictions: dict[WorkloadKey, int] = {}
        #: of those, the evictions of pods that had not finished (what maxUnavailablePerWorkload adds)
        self._cycle_disrupted: dict[WorkloadKey, int] = {}
        self._closed: dict[str, Skip | None] = {}
        self._buckets: dict[tuple[RateScope, str], TokenBucket] = {}
        #: workloads waiting for a replacement: (when, evicted pod, available pods before it)
        self._waiting: dict[WorkloadKey, tuple[datetime, str, int]] = {}
        self._wait = any(p.wait_for_replacement is not None for p in self._policies.values())
        self._predict = any(p.predictive for p in self._policies.values())
        #: the placement model of the cycle (predictive only)
        self._model: PlacementSimulator | None = None
        self._rates = any(p.rate_limits for p in self._policies.values())
        self._max_wait = max(
            (p.wait_for_replacement for p in self._policies.values() if p.wait_for_replacement),
            default=timedelta(0),
        )
        #: how many times the state worth keeping changed (a saver compares it with its last save)
        self.changes = 0
        #: pods the model shows terminating while their eviction is under way: (pod, terminating)
        self._probed: dict[str, tuple[Pod, Pod]] = {}
        #: the nodes as the model has them, the cycle's node actions and how many it has followed
        self._nodes: list[Node] = []
        self._node_actions: NodeActionBackend | None = None
        self._actions_seen = 0

    @property
    def active(self) -> bool:
        return bool(self._policies)

    def begin_cycle(
        self, view: ClusterSnapshot, now: datetime, node_actions: NodeActionBackend | None = None
    ) -> None:
        """A new cycle on ``view`` at ``now``; ``node_actions`` is the cycle's node-action backend,
        whose records (downgrades and restores, those before the cycle too) the placement model
        follows (``predictive``)."""
        self._view = view
        self._now = now
        self._cycle += 1
        self._probed = {}
        # the model changes its own copy: the cycle's snapshot is the plugins' to see
        self._model = None
        if self._predict:
            # (the node actions before the cycle: the expired downgrades a live cycle removes first)
            records = node_actions.records if node_actions is not None else []
            self._nodes = nodes_after_actions(view.nodes, records) or list(view.nodes)
            self._node_actions, self._actions_seen = node_actions, len(records)
            self._model = PlacementSimulator(view.copy(), nodes=self._nodes)
        self._cycle_evictions = {}
        self._cycle_disrupted = {}
        self._closed = {name: _window_skip(p, now) for name, p in self._policies.items()}
        for bucket_key in [k for k, b in self._buckets.items() if b.full(now)]:
            del self._buckets[bucket_key]
        if self._remember:
            for key in list(self._moves):
                kept = [m for m in self._moves[key] if now - m[1] < self._keep]
                if kept:
                    self._moves[key] = kept
                else:
                    del self._moves[key]

    def surge(self, profile: str) -> Surge | None:
        """The profile's ``evictionPolicy.surge`` (None: its pods are evicted)."""
        policy = self._policies.get(profile)
        return policy.surge if policy is not None else None

    def webhook(self, profile: str) -> Webhook | None:
        """The profile's ``evictionPolicy.webhook`` (None: no service is asked)."""
        policy = self._policies.get(profile)
        return policy.webhook if policy is not None else None

    def awaits(self, pod: Pod) -> bool:
        """The pod's workload waits for a replacement (``waitForReplacement``) and the pod is
        available: what it waited for may have come (event-driven runs start a cycle then)."""
        return bool(self._waiting) and is_available(pod) and workload_of(pod) in self._waiting

    def moves(self, key: WorkloadKey) -> list[datetime]:
        """When the workload was moved (one entry per cycle that evicted some of its pods)."""
        return [t for _, t in self._moves.get(key, ())]

    def check(self, pod: Pod, profile: str, judge: MoveJudge | None = None) -> Skip | None:
        """The first rule of ``profile``'s policy that refuses ``pod`` (None: none does).
        ``judge`` is the asking plugin's judgement of a predicted move (``predictive``)."""
        policy = self._policies.get(profile)
        if policy is None:
            return None
        annotations = pod.metadata.annotations or {}
        if policy.karpenter_do_not_disrupt and annotations.get(KARPENTER_DO_NOT_DISRUPT) == "true":
            return Skip(SkipReason.OPT_OUT, f'the pod has {KARPENTER_DO_NOT_DISRUPT}: "true"')
        if (
            policy.cluster_autoscaler_safe_to_evict
            and annotations.get(CLUSTER_AUTOSCALER_SAFE_TO_EVICT) == "false"
        ):
            return Skip(SkipReason.OPT_OUT, f'the pod has {CLUSTER_AUTOSCALER_SAFE_TO_EVICT}: "false"')
        closed = self._closed.get(profile)
        if closed is not None:
            return closed
        key = workload_of(pod)
        if policy.cooldown is not None:
            skip = self._cooldown(key, policy)
            if skip is not None:
                return skip
        if policy.wait_for_replacement is not None:
            skip = self._wait_skip(key, policy.wait_for_replacement)
            if skip is not None:
                return skip
        done = self._cycle_evictions.get(key, 0)
        limit = policy.max_evictions_per_workload
        if limit is not None and done + 1 > limit:
            return Skip(
                SkipReason.MAX_EVICTIONS_PER_WORKLOAD,
                f"{describe(key)} already had {done} eviction(s) in this cycle "
                f"(maxEvictionsPerWorkload: {limit})",
            )
        for scope, rate in policy.rate_limits:
            bucket = self._buckets.get(_bucket_key(scope, key))
            if bucket is not None and not bucket.available(rate, self._now):
                what = {
                    RateScope.WORKLOAD: describe(key),
                    RateScope.NAMESPACE: f"namespace {key[0]}",
                    RateScope.CLUSTER: "the cluster",
                }[scope]
                return Skip(
                    SkipReason.RATE_LIMIT,
                    f"{what} has no eviction left in its {scope.value} rate limit "
                    f"({rate.per_minute:g}/min, burst {rate.burst})",
                )
        budget = policy.max_unavailable_per_workload
        # a pod that is not available already costs the workload nothing more when it goes
        if budget is not None and self._view is not None and is_available(pod):
            if key[1] == "Pod":
                present = [p for p in (self._view.pod(key[0], key[2]),) if p is not None]
            else:
                # a finished pod (a kubelet-evicted one: Failed) is neither a replica nor
                # unavailable, as the disruption controller counts a workload's pods
                present = [p for p in self._view.pods_of_owner(*key) if k8s_pods.occupies_node(p)]
            gone = self._cycle_disrupted.get(key, 0)  # (evicted pods have left the cycle's view)
            unavailable = sum(1 for p in present if not is_available(p)) + gone
            replicas = len(present) + gone
            allowed = resolve_amount(budget, replicas)
            after = unavailable + 1
            if after > allowed:
                return Skip(
                    SkipReason.MAX_UNAVAILABLE_PER_WORKLOAD,
                    f"{describe(key)} has {unavailable} of {replicas} pod(s) unavailable; evicting this "
                    f"one would make {after} (maxUnavailablePerWorkload: {budget} = {allowed})",
                )
        if (
            policy.predictive
            and self._model is not None
            and k8s_pods.occupies_node(pod)
            and pod.spec.node_name
        ):
            self._follow_node_actions()
            return self._predict_skip(self._model, pod, judge)
        return None

    def _follow_node_actions(self) -> None:
        """The model takes the node actions recorded since it last looked (a node RemoveAnomalyPods
        downgraded earlier in the cycle is tainted or labelled for the replacements after it, as
        simulate and kube-scheduler then see it)."""
        model, backend = self._model, self._node_actions
        if model is None or backend is None:
            return
        records = backend.records
        if len(records) == self._actions_seen:
            return
        fresh = records[self._actions_seen :]
        self._actions_seen = len(records)
        nodes = nodes_after_actions(self._nodes, fresh)
        if nodes is not None:
            self._nodes = nodes
            self._model = model.with_nodes(nodes)

    def _predict_skip(self, model: PlacementSimulator, pod: Pod, judge: MoveJudge | None) -> Skip | None:
        node = pod.spec.node_name
        if _keeps_its_name(pod):
            # a StatefulSet re-creates the pod once the old one is gone (simulate places it after
            # the cycle): judged with the pod gone, against the cycle's cluster as it is now
            model.unbind(pod)
            try:
                decision = model.decide(self._replacement(pod), probe=True)
                return _placement_skip(decision, node) or self._judged(model, pod, decision.node, judge)
            finally:
                model.bind(pod)  # (also when the plugin's judgement raised)
        gone = terminating_pod(pod, self._now)
        model.terminate(pod, gone)
        skip: Skip | None = None
        try:
            decision = model.decide(self._replacement(pod), probe=True)
            skip = _placement_skip(decision, node)
            # a bare pod has no replacement: it only has to fit some other node
            if skip is None and not k8s_pods.is_bare_pod(pod):
                skip = self._judged(model, pod, decision.node, judge)
        except BaseException:
            model.unterminate(gone, pod)  # the plugin's judgement raised: the model forgets the probe
            raise
        if skip is None:
            self._probed[pod.key] = (pod, gone)
        else:
            model.unterminate(gone, pod)
        return skip

    def _judged(
        self, model: PlacementSimulator, pod: Pod, destination: str, judge: MoveJudge | None
    ) -> Skip | None:
        """The asking plugin's judgement of the move (None: no judgement, or it helps)."""
        if judge is None:
            return None
        view = model.snapshot
        source, target = view.node(pod.spec.node_name), view.node(destination)
        if source is None or target is None:
            return None
        verdict = judge(PredictedMove(pod, source, target, view))
        if verdict is None:
            return None
        return Skip(verdict.reason, verdict.detail, no_gain=True)

    def _replacement(self, pod: Pod) -> Pod:
        return make_replacement(pod, f"{pod.metadata.name}-predicted", self._now, self._cycle)

    def refused(self, pod: Pod) -> None:
        """The eviction of a pod that passed the checks did not happen: the model forgets it."""
        probed = self._probed.pop(pod.key, None)
        if probed is not None and self._model is not None:
            self._model.unterminate(probed[1], probed[0])

    def _model_evicted(self, pod: Pod) -> None:
        """The model follows an eviction as ``desched simulate`` places it: the pod terminating on
        its node, its replacement (if a controller makes one) bound where kube-scheduler puts it."""
        self._follow_node_actions()
        model = self._model
        assert model is not None
        if self._probed.pop(pod.key, None) is None:
            model.terminate(pod, terminating_pod(pod, self._now))
        if k8s_pods.is_bare_pod(pod) or not k8s_pods.occupies_node(pod) or _keeps_its_name(pod):
            return
        replacement = self._replacement(pod)
        decision = model.decide(replacement)
        if decision.node:
            model.bind(bound_replacement(replacement, decision.node, self._now))

    def _available(self, key: WorkloadKey, but: str = "") -> int:
        """The workload's available pods in the cycle's cluster (but not the pod keyed ``but``)."""
        if self._view is None:
            return 0
        if key[1] == "Pod":
            pods = [p for p in (self._view.pod(key[0], key[2]),) if p is not None]
        else:
            pods = self._view.pods_of_owner(*key)
        return sum(1 for p in pods if p.key != but and is_available(p))

    def _wait_skip(self, key: WorkloadKey, timeout: timedelta) -> Skip | None:
        waiting = self._waiting.get(key)
        if waiting is None:
            return None
        since, evicted, before = waiting
        now_available = self._available(key)
        if now_available >= before or self._now >= since + timeout:
            del self._waiting[key]
            return None
        return Skip(
            SkipReason.WAIT_FOR_REPLACEMENT,
            f"{describe(key)} waits for the replacement of {evicted} (evicted at {_ts(since)}): "
            f"{now_available} of {before} pod(s) available; at most until {_ts(since + timeout)}",
        )

    def _cooldown(self, key: WorkloadKey, policy: EvictionPolicy) -> Skip | None:
        cooldown = policy.cooldown
        assert cooldown is not None
        now = self._now
        # moves in earlier cycles only: this cycle's own are maxEvictionsPerWorkload's business
        earlier = [
            t for cycle, t in self._moves.get(key, ()) if cycle != self._cycle and now - t < cooldown.window
        ]
        if not earlier:
            return None
        wait = cooldown.after_moves(len(earlier))
        until = earlier[-1] + wait
        if now < until:
            return Skip(
                SkipReason.COOLDOWN,
                f"{describe(key)} was moved {len(earlier)} time(s) within "
                f"{format_duration(cooldown.window)}, last at "
                f"{_ts(earlier[-1])}: cooling down for {format_duration(wait)}, until {_ts(until)}",
            )
        return None

    def charge(self, pod: Pod, profile: str) -> None:
        """A pod was evicted (or may have been): count it against its workload and the buckets."""
        if not self._policies:
            return
        key = workload_of(pod)
        self._cycle_evictions[key] = self._cycle_evictions.get(key, 0) + 1
        if k8s_pods.occupies_node(pod):
            self._cycle_disrupted[key] = self._cycle_disrupted.get(key, 0) + 1
        self.changes += 1
        if self._model is not None:
            self._model_evicted(pod)
        if self._wait and key not in self._waiting:
            # (whether the evicted pod has left the cycle's snapshot yet or not)
            before = self._available(key, but=pod.key) + (1 if is_available(pod) else 0)
            self._waiting[key] = (self._now, pod.key, before)
        policy = self._policies.get(profile)
        for scope, rate in policy.rate_limits if policy is not None else ():
            bucket_key = _bucket_key(scope, key)
            bucket = self._buckets.get(bucket_key)
            if bucket is None:
                bucket = self._buckets[bucket_key] = TokenBucket(rate, self._now)
            bucket.take(rate, self._now)
        if self._remember:
            moves = self._moves.setdefault(key, [])
            if not moves or moves[-1][0] != self._cycle:
                moves.append((self._cycle, self._now))

    # ------------------------------------------------------------ memory across restarts

    @property
    def stateful(self) -> bool:
        """A rule that remembers across cycles is on: ``cooldown``, ``rateLimits`` or
        ``waitForReplacement`` (what :meth:`state` hands out is worth keeping)."""
        return self._remember or self._rates or self._wait

    def state(self, now: datetime) -> safetystate.SafetyState:
        """What the rules remember, without what has expired at ``now``: moves older than the
        cooldown's window, buckets refilled to full, waits past the longest timeout."""
        moves = [
            safetystate.Move(key, tuple(t for _, t in kept))
            for key, ms in self._moves.items()
            if (kept := [m for m in ms if now - m[1] < self._keep])
        ]
        buckets = [
            safetystate.Bucket(scope, name, b.tokens, b.updated, b.rate)
            for (scope, name), b in self._buckets.items()
            if not b.full(now)
        ]
        waiting = [
            safetystate.Waiting(key, since, pod, before)
            for key, (since, pod, before) in self._waiting.items()
            if now < since + self._max_wait
        ]
        return safetystate.SafetyState(moves, buckets, waiting)

    def restore(self, state: safetystate.SafetyState, now: datetime) -> int:
        """Merge a kept state into this one (the rules this policy has on only); returns the
        entries taken. A move is kept once (by its time); of two buckets the emptier wins; a
        workload already waiting keeps its own wait. Merging the same state twice changes nothing."""
        taken = 0
        if self._remember:
            for m in state.moves:
                moves = self._moves.setdefault(m.workload, [])
                known = {t for _, t in moves}
                fresh = [(0, t) for t in m.at if t not in known and now - t < self._keep]
                if fresh:
                    moves[:] = sorted(moves + fresh, key=lambda x: x[1])
                    taken += 1
                elif not moves:
                    del self._moves[m.workload]
        if self._rates:
            for b in state.buckets:
                bucket = TokenBucket(b.rate, b.updated)
                bucket.tokens = min(float(b.rate.burst), b.tokens)
                if bucket.full(now):
                    continue
                mine = self._buckets.get((b.scope, b.key))
                if mine is None or (mine.full(now) or bucket.tokens < mine.tokens):
                    self._buckets[(b.scope, b.key)] = bucket
                    taken += 1
        if self._wait:
            for w in state.waiting:
                if w.workload not in self._waiting and now < w.since + self._max_wait:
                    self._waiting[w.workload] = (w.since, w.pod, w.before)
                    taken += 1
        return taken


def _placement_skip(decision: Decision, node: str) -> Skip | None:
    """The replacement would stay Pending, or land back on ``node``."""
    if not decision.node:
        return Skip(
            SkipReason.PREDICTED_PENDING,
            f"its replacement would stay Pending: {decision.reason}",
            no_gain=True,
        )
    if decision.node == node:
        return Skip(
            SkipReason.PREDICTED_SAME_NODE, f"its replacement would land back on {node}", no_gain=True
        )
    return None


def _keeps_its_name(pod: Pod) -> bool:
    """A StatefulSet's pod: its replacement has its name, so it comes once the pod is gone."""
    ref = k8s_pods.controller_ref(pod)
    return ref is not None and ref.kind == "StatefulSet"


def _bucket_key(scope: RateScope, key: WorkloadKey) -> tuple[RateScope, str]:
    if scope is RateScope.WORKLOAD:
        return scope, "/".join(key)
    return scope, key[0] if scope is RateScope.NAMESPACE else ""


def _window_skip(policy: EvictionPolicy, now: datetime) -> Skip | None:
    windows = policy.disruption_windows
    if not windows:
        return None
    for w in windows:
        if w.action is WindowAction.FORBID and window_open(w, now):
            return Skip(SkipReason.DISRUPTION_WINDOW, f"inside the {w.describe()} at {_ts(now)}")
    allows = [w for w in windows if w.action is WindowAction.ALLOW]
    if allows and not any(window_open(w, now) for w in allows):
        names = "; ".join(w.describe() for w in allows)
        return Skip(SkipReason.DISRUPTION_WINDOW, f"outside every allow window at {_ts(now)} ({names})")
    return None


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ") if t.utcoffset() == timedelta(0) else t.isoformat()
