"""RemoveAnomalyPods: evict pods stuck after scheduling on a bad node, and downgrade that node.

A pod that was bound to a node but cannot start there (the sandbox cannot be created, a volume
cannot be attached or mounted, an image cannot be pulled, a container cannot be created) sits
Pending while new replicas keep landing on the same node. This plugin (after the "Remove Anomaly
Pods" proposal) watches such pods across cycles, judges them *anomalous* after a number of
consecutive abnormal observations, evicts them through the profile's evictor (so its filters,
the eviction limits, PDBs and ``--dry-run`` apply) and, when configured, downgrades their node
for a while: a label (for a kube-scheduler NodeAffinity preference) or a ``NoSchedule`` taint.

Detection sources (a pod is *abnormal* in a cycle when any of them matches):

- **Events** (core/v1) about the pod, its PersistentVolumeClaims and the PersistentVolumes they are
  bound to (the claim's ``spec.volumeName``), that are not of type
  ``Normal``: an Event matches when its ``reason`` is one of ``eventReasons`` (compared without
  regard to case) or its ``message`` matches one of ``reasons``;
- ``status.reason`` of the pod, and ``state.waiting.reason`` / ``state.terminated.reason`` of its
  containers (and of its init containers with ``includingInitContainers``), matched against
  ``reasons``;
- **annotation hints**: an annotation named in ``annotationHints`` with a non-empty value that
  matches one of ``reasons`` (any non-empty value when ``reasons`` is empty).

A pattern in ``reasons`` is a substring (case-sensitive), or a regular expression written between
slashes (``/OutOf(cpu|memory)/``).

Observations, precisely. An *observation* is one cycle's evaluation of one pod:

- *normal*: the pod is Running and Ready (whatever Events are left over from its start);
- *abnormal*, with a weight: the number of **new occurrences** of matching Events since this pod
  was last evaluated (an Event object seen for the first time brings its whole ``count``, or
  ``series.count``, at least 1; an Event seen before brings the increase of its count), or at
  least 1 when a status or annotation source matches. Occurrences whose Event was last seen more
  than ``anomalyCondition.timeout`` before now are stale and bring nothing. So one cycle over one
  snapshot (``desched simulate``) judges a pod whose Event has ``count >= consecutiveAbnormalities``
  and a ``lastTimestamp`` within ``timeout`` of ``--now``;
- *neutral*: neither (e.g. Pending with no new matching Event); it changes no counter.

Per pod (by UID), across cycles:

1. If the last abnormal observation is more than ``timeout`` old, the pod's counters and its
   anomalous judgment expire (abnormal observations are *consecutive* only while no gap between
   them exceeds ``timeout``; Event occurrences carry their own time, status matches the cycle's).
2. An abnormal observation adds its weight to the abnormal counter and zeroes the normal one; at
   ``consecutiveAbnormalities`` the pod is judged anomalous.
3. A normal observation adds one to the normal counter; ``consecutiveNormalities`` of them in a
   row reset the pod (abnormal counter, judgment). Neutral observations in between break neither
   streak.

Pods are not observed at all until ``minPodStartupSeconds`` after their start (the PodScheduled
condition's time, else ``status.startTime``, else creation), nor when they are Succeeded or
terminating, out of the plugin's ``namespaces`` / ``labelSelector``, owned by one of
``excludeOwnerKinds``, or on a node that is not ready. State lives in memory: after a restart the
Events' counts (within ``timeout``) rebuild it in one cycle.

Each cycle, nodes that hold pods judged anomalous are downgraded first (``nodeDowngradePolicy``,
off when not configured), so that the replacements of the pods evicted next do not land there;
then the anomalous pods are evicted, node by node, in the profile's Sort order then by namespace
and name. The downgrade is recorded on the node (see :mod:`desched.framework.nodeactions`), and
removed ``ttl`` after the node last produced an anomalous pod, by whichever desched runs then.

Each cycle's statistics go to the cycle result as a report (``handle.attach_report``, see
``report.py``), which simulate shows, and to the plugin's metrics (``handle.metrics_registry``),
which a live run exports. The plugin declares that it reads
Warning Events (``live_inputs``), so a live run watches them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, ClassVar

from desched.framework import (
    METHOD_TAINT,
    ActionResult,
    Handle,
    LiveInputs,
    Status,
    active_entries,
    is_soft_taint,
)
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Event, Node, Pod
from desched.plugins._shared import pod_selector
from desched.plugins.removeanomalypods.args import Pattern, RemoveAnomalyPodsArgs
from desched.plugins.removeanomalypods.report import AnomalyMetrics, AnomalyReport

#: Node names a "not downgrading" warning lists before it says "and N more".
_CAPPED_SHOWN = 5
log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder

PLUGIN_NAME = "RemoveAnomalyPods"


@dataclass
class AnomalyStats:
    """What the plugin saw in its last cycle (reported to the cycle result as an AnomalyReport)."""

    #: Pods currently judged anomalous (still present, not reset or expired).
    anomalous: int = 0
    #: Pods with abnormal observations that are not (yet) judged anomalous.
    suspected: int = 0
    #: Pods newly judged anomalous in the last cycle, by their main reason.
    judged_by_reason: dict[str, int] = field(default_factory=dict)
    #: The same, summed over every cycle so far.
    total_by_reason: dict[str, int] = field(default_factory=dict)
    #: ``namespace/name`` of the pods judged anomalous in the last cycle (newly or still).
    anomalous_pods: list[str] = field(default_factory=list)
    #: ``namespace/name`` of the suspected pods, with their abnormal observations so far.
    suspected_pods: dict[str, int] = field(default_factory=dict)
    #: Nodes downgraded (or extended) in the last cycle.
    downgraded_nodes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _PodState:
    key: str
    node: str
    abnormal: int = 0
    normal: int = 0
    last_abnormal: datetime | None = None
    anomalous: bool = False
    reasons: Counter[str] = field(default_factory=Counter)
    #: Event (uid or namespace/name) -> occurrences already counted.
    seen: dict[str, int] = field(default_factory=dict)

    def reset(self) -> None:
        self.abnormal = 0
        self.normal = 0
        self.last_abnormal = None
        self.anomalous = False
        self.reasons.clear()

    def main_reason(self) -> str:
        if not self.reasons:
            return "unknown"
        # most observations first; ties by name, so the label is deterministic
        return min(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def describe(self) -> str:
        parts = sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        return ", ".join(f"{reason} x{n}" for reason, n in parts)


def event_occurrences(ev: Event) -> int:
    """How many times the Event happened: ``count`` (core/v1) or ``series.count``, at least 1."""
    series = ev.series.count if ev.series is not None else 0
    return max(ev.count, series, 1)


def event_last_time(ev: Event) -> datetime | None:
    """When the Event last happened."""
    if ev.series is not None and ev.series.last_observed_time is not None:
        return ev.series.last_observed_time
    return ev.last_timestamp or ev.event_time or ev.first_timestamp or ev.metadata.creation_timestamp


def startup_time(pod: Pod) -> datetime:
    """When the pod's startup window opens: scheduled, else started, else created."""
    for cond in pod.status.conditions or ():
        if cond.type == "PodScheduled" and cond.status == "True" and cond.last_transition_time is not None:
            return cond.last_transition_time
    if pod.status.start_time is not None:
        return pod.status.start_time
    return k8s_pods.pod_creation_time(pod)


def _event_key(ev: Event) -> str:
    return ev.metadata.uid or f"{ev.metadata.namespace}/{ev.metadata.name}"


class RemoveAnomalyPods:
    """Deschedule: evict pods judged anomalous over consecutive cycles; downgrade their nodes."""

    name: ClassVar[str] = PLUGIN_NAME
    Args: ClassVar[type[RemoveAnomalyPodsArgs]] = RemoveAnomalyPodsArgs

    def __init__(self, args: RemoveAnomalyPodsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)
        self._exclude_kinds = frozenset(args.exclude_owner_kinds or ())
        self._event_reasons = {r.casefold(): r for r in args.event_reasons}
        self._patterns = [Pattern(p) for p in args.reasons or ()]
        self._hints = list(args.annotation_hints or ())
        cond = args.anomaly_condition
        self._timeout = cond.timeout_duration
        self._needed = cond.consecutive_abnormalities
        self._normal_needed = cond.consecutive_normalities
        self._min_startup = timedelta(seconds=args.min_pod_startup_seconds)
        self._states: dict[str, _PodState] = {}
        self.anomaly_stats = AnomalyStats()
        self._metrics = AnomalyMetrics(handle.metrics_registry, handle.profile_name)

    def live_inputs(self) -> LiveInputs:
        """The plugin reads Warning Events about pods, their claims and the volumes bound to them."""
        return LiveInputs(warning_events=True)

    # ------------------------------------------------------------------ the cycle

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        now = self.handle.now()
        snapshot = self.handle.snapshot
        stats = AnomalyStats(total_by_reason=self.anomaly_stats.total_by_reason)
        visited: set[str] = set()
        judged: dict[str, list[Pod]] = {}
        states = self._states
        findings = self.handle.findings
        left = findings.left if findings.enabled else None  # reasons only when someone listens
        for node in nodes:
            for pod in snapshot.pods_on_node(node.metadata.name):
                status = pod.status
                if status.phase == "Running":
                    # k8s_pods.is_pod_ready, inlined: this runs for every pod of the cluster
                    for cond in status.conditions or ():
                        if cond.type == "Ready":
                            ready = cond.status == "True"
                            break
                    else:
                        ready = False
                    if ready and (not states or (pod.metadata.uid or pod.key) not in states):
                        continue  # the common case, healthy and never suspected: nothing to track
                uid = pod.metadata.uid or pod.key
                if not self._in_scope(pod):
                    if left is not None:
                        left(pod, self._out_of_scope(pod))
                    continue
                visited.add(uid)
                state = self._observe(uid, pod, now, stats)
                if state is not None and state.anomalous:
                    judged.setdefault(node.metadata.name, []).append(pod)
                    stats.anomalous_pods.append(pod.key)
                elif left is not None:
                    left(pod, self._not_anomalous(pod, state, now))
        for uid in [u for u in self._states if u not in visited]:
            del self._states[uid]  # the pod is gone, finished, out of scope or on a node not ready
        stats.anomalous = sum(1 for s in self._states.values() if s.anomalous)
        stats.suspected_pods = {
            s.key: s.abnormal for s in self._states.values() if s.abnormal > 0 and not s.anomalous
        }
        stats.suspected = len(stats.suspected_pods)
        self.anomaly_stats = stats
        report = AnomalyReport(
            stats.anomalous,
            stats.suspected,
            dict(stats.judged_by_reason),
            list(stats.anomalous_pods),
            dict(stats.suspected_pods),
        )
        self.handle.attach_report(report)
        self._metrics.observe(report)
        if not judged:
            return None
        if self.args.node_downgrade_policy is not None:
            self._downgrade(nodes, judged, now, stats)
        self._evict(nodes, judged)
        return None

    def _in_scope(self, pod: Pod) -> bool:
        if not pod.spec.node_name or pod.status.phase == "Succeeded" or k8s_pods.is_terminating(pod):
            return False
        if self._exclude_kinds and any(ref.kind in self._exclude_kinds for ref in k8s_pods.owner_refs(pod)):
            return False
        return self._selected(pod)

    # ------------------------------------------------------------------ findings (when reported)

    def _out_of_scope(self, pod: Pod) -> str:
        """Why ``_in_scope`` refused the pod."""
        if not pod.spec.node_name:
            return "not bound to a node"
        if pod.status.phase == "Succeeded":
            return "pod has succeeded"
        if k8s_pods.is_terminating(pod):
            return "pod is terminating"
        kinds = sorted({ref.kind for ref in k8s_pods.owner_refs(pod)} & self._exclude_kinds)
        if kinds:
            return f"owned by a {', '.join(kinds)}, in excludeOwnerKinds"
        return "not selected by the plugin's namespaces/labelSelector"

    def _not_anomalous(self, pod: Pod, state: _PodState | None, now: datetime) -> str:
        """Why an observed pod is not (or not yet) judged anomalous."""
        started = now - startup_time(pod)
        if started < self._min_startup:
            return (
                f"started {int(started.total_seconds())}s ago, within minPodStartupSeconds "
                f"{int(self._min_startup.total_seconds())}"
            )
        if state is None:
            return (
                f"phase {pod.status.phase or 'unknown'} and not ready, but no matching Event, "
                "status reason or annotation hint"
            )
        seen = f" ({state.describe()})" if state.reasons else ""
        ready = "running and ready; " if pod.status.phase == "Running" and k8s_pods.is_pod_ready(pod) else ""
        return (
            f"{ready}{state.abnormal} abnormal observations below the anomaly threshold {self._needed}{seen}"
        )

    # ------------------------------------------------------------------ the state machine

    def _observe(self, uid: str, pod: Pod, now: datetime, stats: AnomalyStats) -> _PodState | None:
        if now - startup_time(pod) < self._min_startup:
            return None
        state = self._states.get(uid)
        if pod.status.phase == "Running" and k8s_pods.is_pod_ready(pod):
            if state is None:
                return None
            self._mark_events_seen(pod, state)
            self._expire(state, now)
            state.normal += 1
            if state.normal >= self._normal_needed:
                state.reset()
            return state

        hits: Counter[str] = Counter()
        latest: datetime | None = None
        new_seen: dict[str, int] = {}
        stale_before = now - self._timeout
        seen = state.seen if state is not None else {}
        for ev, label in self._matching_events(pod):
            key = _event_key(ev)
            occurrences = event_occurrences(ev)
            delta = occurrences - seen.get(key, 0)
            if delta <= 0:
                continue
            new_seen[key] = occurrences
            when = event_last_time(ev) or now
            if when < stale_before:
                continue
            hits[label] += delta
            latest = when if latest is None else max(latest, when)
        status_hits = self._status_hits(pod)
        if state is None:
            if not hits and not status_hits and not new_seen:
                return None
            state = _PodState(pod.key, pod.spec.node_name)
            self._states[uid] = state
        state.seen.update(new_seen)
        self._expire(state, now)
        weight = max(sum(hits.values()), 1 if status_hits else 0)
        if weight == 0:
            return state
        for label in status_hits:
            hits[label] += 1
        if status_hits:
            latest = now if latest is None else max(latest, now)
        state.abnormal += weight
        state.normal = 0
        state.last_abnormal = (
            latest if state.last_abnormal is None or latest is None else max(state.last_abnormal, latest)
        )
        state.reasons.update(hits)
        if not state.anomalous and state.abnormal >= self._needed:
            state.anomalous = True
            reason = state.main_reason()
            stats.judged_by_reason[reason] = stats.judged_by_reason.get(reason, 0) + 1
            stats.total_by_reason[reason] = stats.total_by_reason.get(reason, 0) + 1
            log.info(
                "pod %s on node %s judged anomalous after %d abnormal observations (%s)",
                pod.key,
                pod.spec.node_name,
                state.abnormal,
                state.describe(),
            )
        return state

    def _expire(self, state: _PodState, now: datetime) -> None:
        if state.last_abnormal is not None and now - state.last_abnormal > self._timeout:
            state.reset()

    def _mark_events_seen(self, pod: Pod, state: _PodState) -> None:
        for ev, _ in self._matching_events(pod):
            state.seen[_event_key(ev)] = max(state.seen.get(_event_key(ev), 0), event_occurrences(ev))

    # ------------------------------------------------------------------ detection sources

    def _matching_events(self, pod: Pod) -> list[tuple[Event, str]]:
        """Events about the pod (same UID when both carry one), its PVCs and their bound PVs, with the
        label matched."""
        snapshot = self.handle.snapshot
        ns, uid = pod.metadata.namespace, pod.metadata.uid
        out: list[tuple[Event, str]] = []
        for ev in snapshot.events_for("Pod", ns, pod.metadata.name):
            if uid and ev.involved_object.uid and ev.involved_object.uid != uid:
                continue  # about an earlier pod of the same name
            label = self._event_label(ev)
            if label is not None:
                out.append((ev, label))
        for claim in k8s_pods.pvc_claim_names(pod):
            events = snapshot.events_for("PersistentVolumeClaim", ns, claim)
            pvc = snapshot.pvc(ns, claim)
            if pvc is not None and pvc.spec.volume_name:
                # the PersistentVolume the claim is bound to (cluster-scoped: no namespace)
                events += snapshot.events_for("PersistentVolume", "", pvc.spec.volume_name)
            for ev in events:
                label = self._event_label(ev)
                if label is not None:
                    out.append((ev, label))
        return out

    def _event_label(self, ev: Event) -> str | None:
        if ev.type == "Normal":
            return None
        configured = self._event_reasons.get(ev.reason.casefold())
        if configured is not None:
            return configured
        for p in self._patterns:
            if p.matches(ev.message):
                return p.text
        return None

    def _status_hits(self, pod: Pod) -> list[str]:
        """Labels of the status and annotation sources that match (each at most once)."""
        out: list[str] = []
        if self._patterns:
            values = [pod.status.reason]
            for cs in k8s_pods.container_statuses(pod, init=self.args.including_init_containers):
                st = cs.state
                if st is None:
                    continue
                if st.waiting is not None:
                    values.append(st.waiting.reason)
                if st.terminated is not None:
                    values.append(st.terminated.reason)
            for p in self._patterns:
                if any(p.matches(v) for v in values) and p.text not in out:
                    out.append(p.text)
        annotations = pod.metadata.annotations or {}
        for key in self._hints:
            value = annotations.get(key)
            if not value:
                continue
            if not self._patterns:
                out.append(f"annotation:{key}")
                continue
            for p in self._patterns:
                if p.matches(value) and p.text not in out:
                    out.append(p.text)
        return out

    # ------------------------------------------------------------------ acting

    def _downgrade(
        self, nodes: Sequence[Node], judged: dict[str, list[Pod]], now: datetime, stats: AnomalyStats
    ) -> None:
        policy = self.args.node_downgrade_policy
        assert policy is not None
        actions = self.handle.node_actions
        effect = policy.effect if policy.method == METHOD_TAINT else ""
        limit = policy.max_downgraded_nodes
        # (a soft taint of LowNodeUtilization/HighNodeUtilization is no anomaly downgrade)
        downgraded = {
            n.metadata.name
            for n in self.handle.snapshot.nodes
            if any(not is_soft_taint(e) for e in active_entries(n.metadata.annotations, now))
        }
        capped: list[str] = []
        for node in nodes:
            pods = judged.get(node.metadata.name)
            if not pods:
                continue
            name = node.metadata.name
            mine = any(
                e.same_target(policy.method, policy.key, effect)
                for e in active_entries(node.metadata.annotations, now)
            )
            if limit is not None and not mine and name not in downgraded and len(downgraded) >= limit:
                capped.append(name)
                continue
            keys = sorted(p.key for p in pods)
            reasons = sorted({self._states[p.metadata.uid or p.key].main_reason() for p in pods})
            record = actions.downgrade(
                node,
                method=policy.method,
                key=policy.key,
                value=policy.value,
                ttl=policy.ttl_duration,
                effect=policy.effect,
                reason=f"{len(pods)} anomalous pod(s): {', '.join(reasons)}",
                pods=keys,
            )
            if record.result in (ActionResult.DOWNGRADED, ActionResult.EXTENDED, ActionResult.UNCHANGED):
                downgraded.add(name)
                stats.downgraded_nodes.append(name)
        if capped:
            # one line for all of them: at scale a line per node floods the log
            shown = ", ".join(capped[:_CAPPED_SHOWN])
            more = f" and {len(capped) - _CAPPED_SHOWN} more" if len(capped) > _CAPPED_SHOWN else ""
            log.warning(
                "not downgrading %d node(s) with anomalous pods (%s%s): %d node(s) already downgraded "
                "(maxDowngradedNodes %d)",
                len(capped),
                shown,
                more,
                len(downgraded),
                limit,
            )

    def _evict(self, nodes: Sequence[Node], judged: dict[str, list[Pod]]) -> None:
        ev = self.handle.evictor
        for node in nodes:
            pods = judged.get(node.metadata.name)
            if not pods:
                continue
            candidates = self.handle.sort_pods(
                [p for p in pods if ev.filter(p)], key=lambda p: (p.metadata.namespace, p.metadata.name)
            )
            if ev.evict_in_order(candidates, self._reason):
                return

    def _reason(self, pod: Pod) -> str:
        state = self._states[pod.metadata.uid or pod.key]
        return (
            f"{PLUGIN_NAME}: pod anomalous after {state.abnormal} consecutive abnormal "
            f"observations ({state.describe()})"
        )


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeclaresLiveInputs, DeschedulePlugin

    _deschedule_plugin: type[DeschedulePlugin] = RemoveAnomalyPods
    _declares_live_inputs: type[DeclaresLiveInputs] = RemoveAnomalyPods
