"""The pod evictor: per-cycle limits, the profile's filters, and an eviction backend.

Counters are per cycle and shared by every profile and plugin. Limits are checked before each
eviction in upstream's order (total, then per node, then per namespace) and count the evictions
that succeeded and those whose outcome is unknown (the request may have been carried out but its
answer was lost: a limit is a promise, so a possible eviction is charged as one). Every eviction
passes the profile's Filter and PreEvictionFilter plugins first, whichever plugin asks for it.

A pod is never sent a second eviction: not if it is terminating (deletionTimestamp set: refused
as by a filter, even with the evict annotation), not if it was evicted, or its eviction's outcome
is unknown, earlier in this cycle (by uid, so a new object for the same pod after a relist is the
same pod), and not if the backend remembers sending one in an earlier cycle
(:class:`RemembersEvictions`).

A limit written as a percentage (``"10%"``) is resolved once per cycle against the pods at the
cycle's start: those bound to the pod's node, in its namespace, in the cluster. Finished pods
(Succeeded, Failed) are in that base because their evictions count against the limit as every
eviction does (upstream counts them too): a base without them gave a node of Failed pods no room
to clean them up.
After the limits, the profile's ``evictionPolicy`` rules (:mod:`desched.framework.safety`) may
skip the eviction: it is then recorded as :attr:`EvictResult.SKIPPED` (or, when ``predictive``
judged that the move would not help, :attr:`EvictResult.NO_GAIN`) with the reason, and not
charged against any limit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from desched.api.evictionpolicy import IntOrPercent, Surge, Webhook, resolve_amount
from desched.api.policy import EvictionLimits
from desched.cluster.view import ClusterView
from desched.framework.findings import PluginFindings, Verdict
from desched.framework.safety import MoveJudge, Safety, Skip
from desched.framework.types import (
    EvictResult,
    ExplainsFilter,
    ExplainsPreEvictionFilter,
    FilterPlugin,
    PreEvictionFilterPlugin,
)
from desched.k8s.objects import Pod

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    profile: str
    plugin: str
    reason: str
    grace_period_seconds: int | None = None
    #: the profile's ``evictionPolicy.surge``: a small Deployment's pod is surged, not evicted
    surge: Surge | None = None
    #: the profile's ``evictionPolicy.webhook``: the backend asks it before evicting
    webhook: Webhook | None = None


@dataclass(frozen=True, slots=True)
class EvictionRecord:
    """One eviction attempt that reached the limits check (filtered pods are not recorded)."""

    namespace: str
    name: str
    node: str
    profile: str
    plugin: str
    reason: str
    result: EvictResult
    error: str = ""
    uid: str = ""
    #: why the evictionPolicy skipped it (a :class:`desched.framework.safety.SkipReason` value)
    skip_reason: str = ""
    #: how the pod was moved: ``evict`` (the Eviction API) or ``surge`` (a rollout restart)
    method: str = "evict"
    #: what a surge restarted (``Deployment ns/name``)
    target: str = ""


@dataclass(frozen=True, slots=True)
class OutcomeUnknown:
    """A backend's answer when the request may have been carried out but its answer was lost."""

    error: str


@dataclass(frozen=True, slots=True)
class InBackground:
    """A backend's answer when the eviction goes on in background (``EvictionsInBackground``):
    the pod's controller took the request and the pod leaves later (a VM live-migrating away)."""

    message: str


@dataclass(frozen=True, slots=True)
class BackgroundCounts:
    """The evictions still going on in background from earlier cycles, by node and namespace."""

    total: int = 0
    by_node: Mapping[str, int] = field(default_factory=dict)
    by_namespace: Mapping[str, int] = field(default_factory=dict)


@runtime_checkable
class CountsBackgroundEvictions(Protocol):
    """A backend that tracks evictions in background; they count against every limit."""

    def background_counts(self) -> BackgroundCounts: ...


@dataclass(frozen=True, slots=True)
class Surged:
    """A backend's answer when it moved the pod by a rollout restart of its Deployment
    (``evictionPolicy.surge``) instead of evicting it: counted as one eviction everywhere."""

    #: the Deployment restarted (``Deployment ns/name``)
    target: str


#: What a backend answers an eviction (see :class:`EvictionBackend`).
EvictAnswer = str | OutcomeUnknown | InBackground | Skip | Surged | None


class EvictionBackend(Protocol):
    """Carries out an eviction. Returns ``None`` on success, why it failed (it did not happen),
    :class:`OutcomeUnknown` (it may have happened), :class:`InBackground` (it goes on) or a
    :class:`~desched.framework.safety.Skip` (held back before sending: recorded as skipped, not
    charged against any limit)."""

    def evict(self, pod: Pod, request: EvictionRequest) -> EvictAnswer: ...


@runtime_checkable
class RemembersEvictions(Protocol):
    """A backend that knows which pods it already evicted (or may have) in earlier cycles."""

    def already_evicted(self, pod: Pod) -> bool: ...


EvictionObserver = Callable[[EvictionRecord], None]


class PodEvictor:
    """Cycle-scoped: counts evictions across all profiles and enforces the policy's limits."""

    def __init__(
        self,
        backend: EvictionBackend,
        limits: EvictionLimits | None = None,
        *,
        grace_period_seconds: int | None = None,
        observers: Sequence[EvictionObserver] = (),
        population: ClusterView | None = None,
        safety: Safety | None = None,
    ) -> None:
        self.backend = backend
        self.limits = limits or EvictionLimits()
        self.safety = safety
        # the pods percentages are of, counted once at the cycle's start (see the module docstring)
        self._pods_by_node: dict[str, int] = {}
        self._pods_by_namespace: dict[str, int] = {}
        self._pods_total = 0
        if population is not None and self.limits.has_percent:
            # every pod, finished ones included: every eviction counts (see the module docstring)
            for p in population.iter_pods():
                self._pods_total += 1
                ns = p.metadata.namespace
                self._pods_by_namespace[ns] = self._pods_by_namespace.get(ns, 0) + 1
                if p.spec.node_name:
                    node = p.spec.node_name
                    self._pods_by_node[node] = self._pods_by_node.get(node, 0) + 1
        self.grace_period_seconds = grace_period_seconds
        self.observers = list(observers)
        self.records: list[EvictionRecord] = []
        self._total = 0
        self._by_node: dict[str, int] = {}
        self._by_namespace: dict[str, int] = {}
        self._evicted: set[str] = set()
        self._remembers = backend if isinstance(backend, RemembersEvictions) else None
        #: evictions in background still going on from earlier cycles (counted in every limit)
        self._background = (
            backend.background_counts()
            if isinstance(backend, CountsBackgroundEvictions)
            else BackgroundCounts()
        )

    def reset(self) -> None:
        self.records.clear()
        self._total = 0
        self._by_node.clear()
        self._by_namespace.clear()
        self._evicted.clear()

    @property
    def total(self) -> int:
        return self._total

    def evicted_on_node(self, node: str) -> int:
        return self._by_node.get(node, 0)

    def evicted_in_namespace(self, namespace: str) -> int:
        return self._by_namespace.get(namespace, 0)

    def was_evicted(self, pod: Pod) -> bool:
        """Evicted (or possibly evicted) in this cycle, or by this backend before: never again."""
        if _identity(pod) in self._evicted:
            return True
        return self._remembers is not None and self._remembers.already_evicted(pod)

    def total_limit_reached(self) -> bool:
        lim = _resolved(self.limits.total, self._pods_total)
        return lim is not None and self._total + self._background.total >= lim

    def node_limit_reached(self, node: str) -> bool:
        lim = _resolved(self.limits.per_node, self._pods_by_node.get(node, 0))
        return lim is not None and self._by_node.get(node, 0) + self._background.by_node.get(node, 0) >= lim

    def _limit_check(self, pod: Pod) -> EvictResult | None:
        lim = self.limits
        bg = self._background
        total = _resolved(lim.total, self._pods_total)
        if total is not None and self._total + bg.total + 1 > total:
            return EvictResult.TOTAL_LIMIT
        node = pod.spec.node_name
        per_node = _resolved(lim.per_node, self._pods_by_node.get(node, 0))
        if (
            node
            and per_node is not None
            and self._by_node.get(node, 0) + bg.by_node.get(node, 0) + 1 > per_node
        ):
            return EvictResult.NODE_LIMIT
        ns = pod.metadata.namespace
        per_ns = _resolved(lim.per_namespace, self._pods_by_namespace.get(ns, 0))
        if per_ns is not None and self._by_namespace.get(ns, 0) + bg.by_namespace.get(ns, 0) + 1 > per_ns:
            return EvictResult.NAMESPACE_LIMIT
        return None

    def evict(
        self, pod: Pod, profile: str, plugin: str, reason: str, judge: MoveJudge | None = None
    ) -> EvictResult:
        """Evict one pod that already passed its profile's filters (``judge``: the asking
        plugin's judgement of a predicted move, for ``evictionPolicy.predictive``)."""
        key = pod.key
        if self.was_evicted(pod):
            return EvictResult.ALREADY_EVICTED
        if pod.metadata.deletion_timestamp is not None:
            # terminating: its deletion is under way; whatever the filters said, never sent again
            return EvictResult.FILTERED
        result = self._limit_check(pod)
        error = ""
        skip_reason = ""
        method, target = "evict", ""
        if result is None and self.safety is not None:
            skip = self.safety.check(pod, profile, judge)
            if skip is not None:
                result = EvictResult.NO_GAIN if skip.no_gain else EvictResult.SKIPPED
                error, skip_reason = skip.detail, str(skip.reason)
        if result is None:
            surge = self.safety.surge(profile) if self.safety is not None else None
            webhook = self.safety.webhook(profile) if self.safety is not None else None
            request = EvictionRequest(profile, plugin, reason, self.grace_period_seconds, surge, webhook)
            answer = self.backend.evict(pod, request)
            if answer is None:
                result = EvictResult.EVICTED
            elif isinstance(answer, Surged):
                result = EvictResult.EVICTED  # a move like an eviction: charged as one
                method, target = "surge", answer.target
            elif isinstance(answer, Skip):
                result = EvictResult.SKIPPED
                error, skip_reason = answer.detail, str(answer.reason)
            elif isinstance(answer, InBackground):
                result = EvictResult.BACKGROUND
                error = answer.message
                log.info("eviction of pod %s (%s/%s) goes on in background: %s", key, profile, plugin, error)
            elif isinstance(answer, OutcomeUnknown):
                result = EvictResult.UNKNOWN
                error = answer.error
                log.warning(
                    "eviction of pod %s (%s/%s): outcome unknown, counted against the limits: %s",
                    key,
                    profile,
                    plugin,
                    error,
                )
            else:
                result = EvictResult.FAILED
                error = answer
                # refusals are the caller's to report (simulate lists them; run logs each after
                # the cycle): at default verbosity one line per refusal here would say it twice
                log.debug("eviction of pod %s failed (%s/%s): %s", key, profile, plugin, answer)
            if result is EvictResult.SKIPPED:
                pass  # held back by the backend (the eviction webhook): not charged, not refused
            elif result is not EvictResult.FAILED:
                self._charge(pod)
                if self.safety is not None:
                    self.safety.charge(pod, profile)
            elif self.safety is not None:
                self.safety.refused(pod)
        if skip_reason and log.isEnabledFor(logging.DEBUG):
            # --v=4, one line for every skip (the evictionPolicy's or the backend's, such as the
            # eviction webhook's denial); fields as the eviction line's
            fields = {"pod": key, "node": pod.spec.node_name, "profile": profile, "plugin": plugin}
            log.debug("eviction skipped", extra={**fields, "reason": skip_reason, "detail": error})
        record = EvictionRecord(
            pod.metadata.namespace,
            pod.metadata.name,
            pod.spec.node_name,
            profile,
            plugin,
            reason,
            result,
            error,
            pod.metadata.uid,
            skip_reason,
            method,
            target,
        )
        self.records.append(record)
        for observe in self.observers:
            observe(record)
        return result

    def _charge(self, pod: Pod) -> None:
        """Count an eviction (done or possibly done) against every limit, and never repeat it."""
        self._total += 1
        node = pod.spec.node_name
        if node:
            self._by_node[node] = self._by_node.get(node, 0) + 1
        ns = pod.metadata.namespace
        self._by_namespace[ns] = self._by_namespace.get(ns, 0) + 1
        self._evicted.add(_identity(pod))


def _resolved(limit: IntOrPercent | None, population: int) -> int | None:
    return None if limit is None else resolve_amount(limit, population)


def _identity(pod: Pod) -> str:
    """A pod's identity across relists: its uid (a snapshot file may have none: then its key)."""
    return pod.metadata.uid or pod.key


class ProfileEvictor:
    """What one plugin of one profile sees: the profile's filters in front of the shared evictor."""

    def __init__(
        self,
        pod_evictor: PodEvictor,
        profile: str,
        plugin: str,
        filters: Sequence[FilterPlugin],
        pre_eviction_filters: Sequence[PreEvictionFilterPlugin],
        findings: PluginFindings | None = None,
        judge: MoveJudge | None = None,
    ) -> None:
        self._evictor = pod_evictor
        #: the plugin's judgement of a predicted move (:class:`~desched.framework.types.JudgesMoves`)
        self._judge = judge
        self._profile = profile
        self._plugin = plugin
        self._filters = filters
        self._pre_filters = pre_eviction_filters
        # the filters that tell why they refuse a pod (for findings), found once
        self._filter_reasons = {id(f): f.filter_reasons for f in filters if isinstance(f, ExplainsFilter)}
        self._pre_filter_reasons = {
            id(f): f.pre_eviction_filter_reasons
            for f in pre_eviction_filters
            if isinstance(f, ExplainsPreEvictionFilter)
        }
        self._findings = findings

    def filter(self, pod: Pod) -> bool:
        for f in self._filters:
            if not f.filter(pod):
                findings = self._findings
                if findings is not None and findings.enabled:
                    explain = self._filter_reasons.get(id(f))
                    reasons = explain(pod) if explain is not None else []
                    findings.report(pod, Verdict.FILTERED, _refusal(f.name, reasons))
                return False
        return True

    def pre_eviction_filter(self, pod: Pod) -> bool:
        for f in self._pre_filters:
            if not f.pre_eviction_filter(pod):
                findings = self._findings
                if findings is not None and findings.enabled:
                    explain = self._pre_filter_reasons.get(id(f))
                    reasons = explain(pod) if explain is not None else []
                    findings.report(pod, Verdict.FILTERED, _refusal(f.name, reasons))
                return False
        return True

    def evict(self, pod: Pod, reason: str = "") -> EvictResult:
        if self._evictor.was_evicted(pod):
            result = EvictResult.ALREADY_EVICTED
        elif pod.metadata.deletion_timestamp is not None:  # as upstream's DefaultEvictor, always
            findings = self._findings
            if findings is not None and findings.enabled:
                findings.report(pod, Verdict.FILTERED, "pod is terminating (it has a deletionTimestamp)")
            return EvictResult.FILTERED
        elif not self.filter(pod) or not self.pre_eviction_filter(pod):
            return EvictResult.FILTERED  # reported by the filter that refused it
        else:
            result = self._evictor.evict(pod, self._profile, self._plugin, reason, self._judge)
        findings = self._findings
        if findings is not None and findings.enabled:
            if result is EvictResult.EVICTED:
                findings.report(pod, Verdict.EVICTED, reason)
            else:
                records = self._evictor.records
                error = (
                    records[-1].error if (result is EvictResult.FAILED or result.skipped) and records else ""
                )
                findings.report(pod, Verdict.NOT_EVICTED, error or result.value)
        return result

    def in_order(self, pods: Iterable[Pod], *, explain_node_limit: bool = False) -> InOrder:
        """See :class:`desched.framework.types.EvictionOrder`."""
        return InOrder(self, pods, self._findings if explain_node_limit else None)

    def evict_in_order(self, pods: Iterable[Pod], reason: str | Callable[[Pod], str]) -> bool:
        order = self.in_order(pods)
        for pod in order:
            order.evict(pod, reason if isinstance(reason, str) else reason(pod))
        return order.stopped

    def node_limit_reached(self, node_name: str) -> bool:
        return self._evictor.node_limit_reached(node_name)

    def total_limit_reached(self) -> bool:
        return self._evictor.total_limit_reached()


class InOrder:
    """Pods in a plugin's order, evicted through its :class:`ProfileEvictor` as far as the limits
    allow (:class:`desched.framework.types.EvictionOrder`)."""

    __slots__ = ("_evictor", "_findings", "_full_nodes", "_pods", "stopped")

    def __init__(self, evictor: ProfileEvictor, pods: Iterable[Pod], findings: PluginFindings | None) -> None:
        self._evictor = evictor
        self._pods = pods
        self._findings = findings
        self._full_nodes: set[str] = set()
        self.stopped = False

    def __iter__(self) -> Iterator[Pod]:
        full_nodes = self._full_nodes
        for pod in self._pods:
            if full_nodes and pod.spec.node_name in full_nodes:
                findings = self._findings
                if findings is not None and findings.enabled:
                    findings.left(pod, f"node {pod.spec.node_name} reached its eviction limit")
                continue
            yield pod
            if self.stopped:
                return  # (before the next pod is taken: ``pods`` may be lazy)

    def evict(self, pod: Pod, reason: str) -> EvictResult:
        result = self._evictor.evict(pod, reason=reason)
        if result is EvictResult.NODE_LIMIT:
            self._full_nodes.add(pod.spec.node_name)
        elif result is EvictResult.TOTAL_LIMIT:
            self.stopped = True
        return result


def _refusal(name: str, reasons: Sequence[str]) -> str:
    """Why a filter plugin refused a pod: its own reasons when it can tell them."""
    return f"{name}: {'; '.join(reasons)}" if reasons else f"refused by {name}"
