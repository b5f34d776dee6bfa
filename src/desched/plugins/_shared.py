"""Pieces many strategy plugins share: pod selection by namespace and labels, eviction orders,
content keys for the records pods share, and the lifetime criteria of PodLifeTime and
RemoveFailedPods (upstream runs RemoveFailedPods as a PodLifeTime with the phase fixed to Failed)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Protocol

from pydantic import Field

from desched.framework import Handle, LabelSelectorArg, Namespaces, Status
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s._compile_cache import ContentKeys
from desched.k8s.namespaces import namespace_rule
from desched.k8s.objects import ZERO_TIME, ContainerStatus, Node, Pod, PodCondition

PodPredicate = Callable[[Pod], bool]

__all__ = [
    "ConditionFilter",
    "ContentKeys",
    "Int32",
    "LifetimeCriteria",
    "PodPredicate",
    "evict_oldest_first",
    "oldest_first_key",
    "pod_selector",
    "priority_low_to_high_key",
    "priority_rank",
    "select_all",
    "spread_low_to_high_key",
]

_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


def select_all(pod: Pod) -> bool:
    """What :func:`pod_selector` returns when the args select every pod (hot loops test for it)."""
    return True


def pod_selector(namespaces: Namespaces | None, label_selector: LabelSelectorArg | None) -> PodPredicate:
    """A predicate for a plugin's ``namespaces`` (include or exclude) and ``labelSelector`` args;
    :func:`select_all` itself when they are not set."""
    allowed = namespace_rule(namespaces.include, namespaces.exclude) if namespaces else None
    match = (
        k8s_labels.compile_label_selector(label_selector.to_selector(), none_matches=True)
        if label_selector is not None
        else None
    )
    if allowed is None and match is None:
        return select_all

    def selected(pod: Pod) -> bool:
        if allowed is not None and not allowed(pod.metadata.namespace):
            return False
        return match is None or match(pod.metadata.labels or {})

    return selected


def priority_low_to_high_key(pod: Pod) -> tuple[int, int, int, int, str, str]:
    """Upstream's SortPodsBasedOnPriorityLowToHigh as a sort key, made total.

    Pods without a priority first, then by priority; among equals BestEffort, Burstable, Guaranteed,
    then pods without the prefer-no-eviction annotation before those with it. Upstream leaves further
    ties in listing order; desched breaks them by namespace and name, so decisions are reproducible.
    """
    prio = pod.spec.priority
    meta = pod.metadata
    annotations = meta.annotations
    prefer_keep = 1 if annotations and k8s_pods.PREFER_NO_EVICTION_ANNOTATION in annotations else 0
    return (
        0 if prio is None else 1,
        prio or 0,
        _QOS_RANK.get(pod.status.qos_class or k8s_pods.compute_qos_class(pod), 1),
        prefer_keep,
        meta.namespace,
        meta.name,
    )


def priority_rank(pod: Pod) -> tuple[int, int, int, int]:
    """:func:`priority_low_to_high_key` without the (namespace, name) tie-break."""
    prio = pod.spec.priority
    annotations = pod.metadata.annotations
    return (
        0 if prio is None else 1,
        prio or 0,
        _QOS_RANK.get(pod.status.qos_class or k8s_pods.compute_qos_class(pod), 1),
        1 if annotations and k8s_pods.PREFER_NO_EVICTION_ANNOTATION in annotations else 0,
    )


SpreadKey = tuple[int, int, int, int, float, str, str]


def spread_low_to_high_key(pods: Sequence[Pod]) -> Callable[[Pod], SpreadKey]:
    """:func:`priority_low_to_high_key` with its ties spread over the pods' workloads.

    Among pods of equal priority, QoS and prefer-no-eviction (upstream's order leaves them in Go
    map order, a random permutation), the pods of each owner (the controller reference, else the
    first owner reference; a pod without owners is its own) are spaced out in proportion to their
    number: the i-th of an owner's n pods (by name, from 0) ranks at (2i + 1) / 2n, further ties by
    namespace and name. Every prefix of the order then holds each owner's pods in proportion to
    its share of the tier, as a random order does on average, instead of all replicas of the
    first name before any other (which on a node of large and small workloads stops after a few
    large pods, where upstream's order mixes them). ``pods``: the pods to be ordered (the key is
    valid for these only).
    """
    groups: dict[tuple[tuple[int, int, int, int], str, str, str], list[Pod]] = {}
    for pod in pods:
        meta = pod.metadata
        ref = k8s_pods.controller_ref(pod)
        if ref is None and meta.owner_references:
            ref = meta.owner_references[0]
        owner = (ref.kind, ref.name) if ref is not None else ("", "\0" + meta.name)
        groups.setdefault((priority_rank(pod), meta.namespace, *owner), []).append(pod)
    # each pod's whole key, made here with the rank of its group (not ranked a second time)
    keys: dict[tuple[str, str], SpreadKey] = {}
    for (rank, *_), members in groups.items():
        members.sort(key=lambda p: p.metadata.name)
        n = len(members)
        for i, pod in enumerate(members):
            meta = pod.metadata
            # exact for equal ratios (correctly rounded division of small integers)
            keys[(meta.namespace, meta.name)] = (*rank, (2 * i + 1) / (2 * n), meta.namespace, meta.name)

    def key(pod: Pod) -> SpreadKey:
        meta = pod.metadata
        return keys[(meta.namespace, meta.name)]

    return key


def oldest_first_key(pod: Pod) -> tuple[datetime, str, str]:
    meta = pod.metadata
    created = meta.creation_timestamp
    return (ZERO_TIME if created is None else created, meta.namespace, meta.name)


# --------------------------------------------------------------------------- lifetime criteria

Int32 = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
#: Go's time.Duration saturates here: a pod created at the zero time is "only" this old.
_MAX_DURATION_SECONDS = (2**63 - 1) / 1e9


class ConditionFilter(Protocol):
    """One ``status.conditions`` filter of PodLifeTime's args (``PodConditionFilter``)."""

    @property
    def min_time_since_last_transition_seconds(self) -> int | None: ...

    def matches_fields(self, cond: PodCondition) -> bool: ...


def _go_seconds_since(now: datetime, then: datetime) -> float:
    """``now.Sub(then).Seconds()`` as Go computes it, saturating at time.Duration's range."""
    seconds = (now - then).total_seconds()
    return max(-_MAX_DURATION_SECONDS, min(_MAX_DURATION_SECONDS, seconds))


def _has_state(statuses: Iterable[ContainerStatus], states: frozenset[str]) -> bool:
    for cs in statuses:
        state = cs.state
        if state is None:
            continue
        if state.waiting is not None and state.waiting.reason in states:
            return True
        if state.terminated is not None and state.terminated.reason in states:
            return True
    return False


def _has_exit_code(statuses: Iterable[ContainerStatus], codes: frozenset[int]) -> bool:
    for cs in statuses:
        state = cs.state
        if state is not None and state.terminated is not None and state.terminated.exit_code in codes:
            return True
    return False


@dataclass(frozen=True, slots=True)
class LifetimeCriteria:
    """Compiled PodLifeTime (and RemoveFailedPods) criteria; ``None`` / empty: the criterion is not set."""

    max_age_seconds: int | None = None
    states: frozenset[str] = frozenset()
    conditions: tuple[ConditionFilter, ...] = ()
    exit_codes: frozenset[int] = frozenset()
    include_owner_kinds: frozenset[str] = frozenset()
    exclude_owner_kinds: frozenset[str] = frozenset()
    including_init: bool = False
    including_ephemeral: bool = False
    #: RemoveFailedPods: only pods in phase Failed.
    failed_only: bool = False

    def why_evicted(self, pod: Pod, now: datetime, limit_name: str) -> str:
        """What about the pod met the criteria, with its numbers: its age against the limit
        (``limit_name``: the arg that sets it), the state, exit code and condition it matched."""
        parts: list[str] = []
        if self.max_age_seconds is not None:
            age = int(_go_seconds_since(now, k8s_pods.pod_creation_time(pod)))
            parts.append(
                f"age {seconds_text(age)} ({age}s) > {limit_name} {seconds_text(self.max_age_seconds)} "
                f"({self.max_age_seconds}s)"
            )
        statuses = k8s_pods.container_statuses(
            pod, init=self.including_init, ephemeral=self.including_ephemeral
        )
        if self.states:
            status = pod.status
            matched = [x for x in (status.phase, status.reason) if x in self.states]
            for cs in statuses:
                state = cs.state
                for sub in (state.waiting, state.terminated) if state is not None else ():
                    if sub is not None and sub.reason in self.states:
                        matched.append(f"{sub.reason} (container {cs.name})")
            parts.append(f"in state {', '.join(matched[:3])}")
        if self.exit_codes:
            codes = [
                f"{cs.state.terminated.exit_code} (container {cs.name})"
                for cs in statuses
                if cs.state is not None
                and cs.state.terminated is not None
                and cs.state.terminated.exit_code in self.exit_codes
            ]
            parts.append(f"exit code {', '.join(codes[:3])}")
        if self.conditions:
            parts.append("matching a condition filter")
        return ", ".join(parts)

    def why_not(self, pod: Pod, now: datetime) -> str:
        """Why ``matches`` refuses the pod, with the numbers (for explanations, off the hot path)."""
        if self.failed_only and pod.status.phase != "Failed":
            return f"phase {pod.status.phase or 'unknown'}, not Failed"
        if self.max_age_seconds is not None:
            age = _go_seconds_since(now, k8s_pods.pod_creation_time(pod))
            if age < 0 or int(age) <= self.max_age_seconds:
                return f"age {int(age)}s, not above {self.max_age_seconds}s"
        if self.states and not self._matches_states(pod):
            return f"not in states {sorted(self.states)}"
        return "does not match the plugin's conditions, exitCodes or ownerKinds"

    def matches(self, pod: Pod, now: datetime) -> bool:
        status = pod.status
        if self.failed_only and status.phase != "Failed":
            return False
        if self.max_age_seconds is not None:
            age = _go_seconds_since(now, k8s_pods.pod_creation_time(pod))
            if age < 0 or int(age) <= self.max_age_seconds:
                return False
        if self.states and not self._matches_states(pod):
            return False
        if self.include_owner_kinds and not any(
            ref.kind in self.include_owner_kinds for ref in k8s_pods.owner_refs(pod)
        ):
            return False
        if self.exclude_owner_kinds and any(
            ref.kind in self.exclude_owner_kinds for ref in k8s_pods.owner_refs(pod)
        ):
            return False
        if self.conditions and not self._matches_conditions(pod, now):
            return False
        return not self.exit_codes or self._matches_exit_codes(pod)

    def _matches_exit_codes(self, pod: Pod) -> bool:
        status = pod.status
        if _has_exit_code(status.container_statuses or (), self.exit_codes):
            return True
        return self.including_init and _has_exit_code(status.init_container_statuses or (), self.exit_codes)

    def _matches_states(self, pod: Pod) -> bool:
        status = pod.status
        states = self.states
        if status.phase in states or status.reason in states:
            return True
        if _has_state(status.container_statuses or (), states):
            return True
        if self.including_init and _has_state(status.init_container_statuses or (), states):
            return True
        return self.including_ephemeral and _has_state(status.ephemeral_container_statuses or (), states)

    def _matches_conditions(self, pod: Pod, now: datetime) -> bool:
        conditions = pod.status.conditions or ()
        for flt in self.conditions:
            for cond in conditions:
                if not flt.matches_fields(cond):
                    continue
                min_idle = flt.min_time_since_last_transition_seconds
                if min_idle is not None:
                    changed = cond.last_transition_time
                    if changed is None or changed == ZERO_TIME:
                        continue
                    idle = _go_seconds_since(now, changed)
                    if idle < 0 or int(idle) < min_idle:
                        continue
                return True
        return False

    def relevant_time(self, pod: Pod) -> datetime:
        """The time a pod is "old" from: its latest matching transition, or its creation."""
        latest: datetime | None = None
        for flt in self.conditions:
            if flt.min_time_since_last_transition_seconds is None:
                continue
            for cond in pod.status.conditions or ():
                if cond.last_transition_time is None or not flt.matches_fields(cond):
                    continue
                changed = cond.last_transition_time
                if changed != ZERO_TIME and (latest is None or changed > latest):
                    latest = changed
        return latest if latest is not None else k8s_pods.pod_creation_time(pod)

    def oldest_first_key(self, pod: Pod) -> tuple[datetime, str, str]:
        return (self.relevant_time(pod), pod.metadata.namespace, pod.metadata.name)


def seconds_text(seconds: int) -> str:
    """``9d3h``, ``2h``, ``5m30s``, ``45s``: a duration for people, its two largest units."""
    if seconds < 0:
        return f"-{seconds_text(-seconds)}"
    values = []
    rest = seconds
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, rest = divmod(rest, size)
        values.append((n, unit))
    first = next((i for i, (n, _) in enumerate(values) if n), 3)
    text = f"{values[first][0]}{values[first][1]}"
    if first < 3 and values[first + 1][0]:
        text += f"{values[first + 1][0]}{values[first + 1][1]}"
    return text


def failure_text(pod: Pod, *, init: bool = False) -> str:
    """Why a Failed pod failed, from its status: the pod's reason and message (``Evicted: The node
    was low on resource: memory``), and each container that ended with a non-zero exit code
    (``container app exit code 137 (OOMKilled)``)."""
    status = pod.status
    parts = []
    if status.reason:
        message = status.message.split(". ", 1)[0][:100]  # its first sentence: an Event stays short
        parts.append(status.reason + (f": {message}" if message else ""))
    for cs in k8s_pods.container_statuses(pod, init=init):
        done = cs.state.terminated if cs.state is not None else None
        if done is not None and done.exit_code:
            parts.append(
                f"container {cs.name} exit code {done.exit_code}"
                + (f" ({done.reason})" if done.reason else "")
            )
    return "; ".join(parts) or "no reason or exit code recorded"


def evict_oldest_first(
    handle: Handle,
    nodes: Sequence[Node],
    selected: PodPredicate,
    criteria: LifetimeCriteria,
    reason: str | Callable[[Pod], str],
    *,
    namespaces: frozenset[str] | None = None,
    unscheduled: bool = False,
) -> Status | None:
    """Evict the matching pods of ``nodes``, oldest first (PodLifeTime's and RemoveFailedPods' loop).

    ``namespaces``, when ``selected`` only takes pods of those namespaces, lets the loop read only
    their pods; ``unscheduled`` adds the pods bound to no node. A node whose per-node limit is
    reached is skipped from then on; the total limit ends the run.
    """
    ev = handle.evictor
    snapshot = handle.snapshot
    now = handle.now()
    check = None if selected is select_all else selected
    failed_only = criteria.failed_only
    candidates: list[Pod] = []
    pods: Iterable[Pod]
    if namespaces is not None:
        names = {n.metadata.name for n in nodes}
        if unscheduled:
            names.add("")  # (a pod bound to no node has an empty spec.nodeName)
        # (any order will do: the candidates are sorted by a key that tells every pod apart)
        pods = [
            p
            for ns in sorted(namespaces)
            for p in snapshot.pods_in_namespace(ns)
            if p.spec.node_name in names
        ]
    else:
        node_names = [node.metadata.name for node in nodes]
        if unscheduled:
            node_names.append("")
        pods = (p for name in node_names for p in snapshot.pods_on_node(name))
    findings = handle.findings
    left = findings.left if findings.enabled else None  # reasons only when someone listens
    for pod in pods:
        if failed_only and pod.status.phase != "Failed":
            continue
        if check is not None and not check(pod):
            if left is not None:
                left(pod, "not selected by the plugin's namespaces/labelSelector")
            continue
        if not criteria.matches(pod, now):
            if left is not None:
                left(pod, criteria.why_not(pod, now))
            continue
        if ev.filter(pod):
            candidates.append(pod)
    ev.evict_in_order(handle.sort_pods(candidates, key=criteria.oldest_first_key), reason)
    return None
