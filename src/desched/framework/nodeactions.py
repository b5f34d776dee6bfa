"""Node actions: the one narrow way a plugin may change a node (RemoveAnomalyPods' node downgrade).

Plugins never call the API. A plugin that wants a node labelled or tainted for a while asks its
handle's :attr:`~desched.framework.framework.PluginHandle.node_actions`; the cycle's backend does
it, and records what it did:

- ``desched.backends.simulated_nodeactions.SimulatedNodeActions`` (``desched simulate``, unit
  tests) changes nothing and records what would be done;
- ``desched.backends.api_nodeactions.LiveNodeActions`` (``desched run``) patches the node;
- :class:`NoNodeActions`, a cycle's default when its caller names no backend, changes nothing
  and records every request as skipped (the framework does not pick a backend: that is the
  caller's choice, from ``desched.backends``).

A downgrade is recorded **on the node itself**, in the annotation :data:`DOWNGRADE_ANNOTATION`: a
JSON list of entries ``{"method", "key", "value", "effect" (taints), "expiresAt", "by",
"reason"}``. That record is what makes expiry independent of process memory: whichever desched
replica runs next (after a restart or a leader fail-over) reads it and removes the label or taint
once ``expiresAt`` has passed. desched only ever removes what an entry says it added, and only
while the node still carries exactly that label value or taint; a label or taint with the same key
that desched did not add is never touched (the downgrade is then skipped).

The planning functions here are pure (node state in, JSON merge patch out) and shared by both
backends, so ``desched simulate`` reports exactly what ``desched run`` would write.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import msgspec

from desched.k8s.objects import Node, Taint

#: The annotation holding desched's downgrade entries (a JSON list).
DOWNGRADE_ANNOTATION = "desched.io/downgrade"

METHOD_LABEL = "label"
METHOD_TAINT = "taint"

#: An entry is re-written to extend its expiry only when that moves it by at least this share
#: of the TTL (capped at one minute): a node that keeps producing anomalous pods is not patched
#: on every cycle.
EXTEND_MIN_SHARE = 0.1
EXTEND_MIN_CAP = timedelta(seconds=60)


class ActionResult(enum.StrEnum):
    #: The label or taint was added (or would be, in a dry run or simulation).
    DOWNGRADED = "downgraded"
    #: desched's own downgrade was already there: its expiry was moved later.
    EXTENDED = "extended"
    #: desched's own downgrade was already there and recent: nothing to write.
    UNCHANGED = "unchanged"
    #: A label or taint with this key that desched did not add is on the node: left alone.
    SKIPPED = "skipped"
    #: An expired downgrade was removed.
    RESTORED = "restored"
    #: The API refused or the request failed.
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class DowngradeRequest:
    """What a plugin asks for: mark ``node`` with a label or taint for ``ttl``."""

    method: str
    key: str
    value: str
    ttl: timedelta
    reason: str
    effect: str = "NoSchedule"
    #: ``<profile>/<plugin>``, filled in by the handle.
    by: str = ""
    #: The anomalous pods (``namespace/name``) that led to it, for the report.
    pods: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReleaseRequest:
    """What a plugin asks for: remove desched's own label or taint ``key`` from a node now."""

    method: str
    key: str
    effect: str
    reason: str
    #: ``<profile>/<plugin>``, filled in by the handle.
    by: str = ""


@dataclass(frozen=True, slots=True)
class DowngradeEntry:
    """One entry of the node's :data:`DOWNGRADE_ANNOTATION`."""

    method: str
    key: str
    value: str
    expires_at: datetime
    effect: str = ""
    by: str = ""
    reason: str = ""

    def to_json(self) -> dict[str, str]:
        out = {"method": self.method, "key": self.key, "value": self.value}
        if self.method == METHOD_TAINT:
            out["effect"] = self.effect
        out["expiresAt"] = format_time(self.expires_at)
        out["by"] = self.by
        if self.reason:
            out["reason"] = self.reason[:256]
        return out

    @classmethod
    def from_json(cls, obj: Any) -> DowngradeEntry | None:
        if not isinstance(obj, Mapping):
            return None
        method, key, value, expires = (obj.get(k) for k in ("method", "key", "value", "expiresAt"))
        if method not in (METHOD_LABEL, METHOD_TAINT) or not isinstance(key, str) or not key:
            return None
        if not isinstance(value, str) or not isinstance(expires, str):
            return None
        try:
            when = msgspec.convert(expires, datetime)
        except msgspec.ValidationError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        effect = obj.get("effect", "")
        if method == METHOD_TAINT and (not isinstance(effect, str) or not effect):
            return None
        by, reason = obj.get("by", ""), obj.get("reason", "")
        return cls(
            method,
            key,
            value,
            when.astimezone(UTC),
            effect if method == METHOD_TAINT else "",
            by if isinstance(by, str) else "",
            reason if isinstance(reason, str) else "",
        )

    def same_target(self, method: str, key: str, effect: str) -> bool:
        return self.method == method and self.key == key and (method != METHOD_TAINT or self.effect == effect)


@dataclass(frozen=True, slots=True)
class NodeActionRecord:
    """What a node action did (or would do): one line of the report."""

    node: str
    #: ``downgrade`` or ``restore``.
    action: str
    method: str
    key: str
    value: str
    effect: str
    expires_at: datetime | None
    result: ActionResult
    by: str = ""
    reason: str = ""
    pods: tuple[str, ...] = ()
    #: True when nothing was written (simulation, ``--dry-run``).
    dry_run: bool = False
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        profile, _, plugin = self.by.partition("/")
        return {
            "node": self.node,
            "action": self.action,
            "method": self.method,
            "key": self.key,
            "value": self.value,
            **({"effect": self.effect} if self.method == METHOD_TAINT else {}),
            "expiresAt": format_time(self.expires_at) if self.expires_at else None,
            "result": self.result.value,
            "profile": profile,
            "plugin": plugin,
            "reason": self.reason,
            "pods": list(self.pods),
            "dryRun": self.dry_run,
            **({"detail": self.detail} if self.detail else {}),
        }


# ----------------------------------------------------------------------------- node state


@dataclass(frozen=True)
class NodeState:
    """The parts of a node a downgrade reads and writes, as plain JSON values."""

    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, Any]] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_node(cls, node: Node) -> NodeState:
        taints = [msgspec.to_builtins(t) for t in node.spec.taints or ()]
        return cls(dict(node.metadata.labels or {}), taints, dict(node.metadata.annotations or {}))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> NodeState:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        return cls(
            dict(meta.get("labels") or {}),
            [dict(t) for t in spec.get("taints") or ()],
            dict(meta.get("annotations") or {}),
        )


def format_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ceil_second(value: datetime) -> datetime:
    """Round up to a whole second: expiry is written with second precision and never comes early."""
    if value.microsecond:
        value = value.replace(microsecond=0) + timedelta(seconds=1)
    return value


class UnreadableRecord(ValueError):
    """The node's downgrade annotation cannot be read."""


def read_entries(annotations: Mapping[str, str] | None) -> tuple[list[DowngradeEntry], list[Any]]:
    """desched's downgrade entries on a node, and the list elements it cannot read (kept verbatim).

    A single JSON object (not a list) is read as a one-element list. Raises :class:`UnreadableRecord`
    when the annotation is not JSON at all: desched then cannot know what it added, so it must
    touch nothing on that node.
    """
    raw = (annotations or {}).get(DOWNGRADE_ANNOTATION)
    if not raw:
        return [], []
    try:
        doc = json.loads(raw)
    except ValueError:
        raise UnreadableRecord(f"annotation {DOWNGRADE_ANNOTATION} is not JSON: {raw[:80]!r}") from None
    items = doc if isinstance(doc, list) else [doc]
    entries: list[DowngradeEntry] = []
    unknown: list[Any] = []
    for item in items:
        entry = DowngradeEntry.from_json(item)
        if entry is None:
            unknown.append(item)
        else:
            entries.append(entry)
    return entries, unknown


def encode_entries(entries: Sequence[DowngradeEntry], unknown: Sequence[Any] = ()) -> str | None:
    """The annotation value for these entries (None: remove the annotation)."""
    items: list[Any] = [e.to_json() for e in entries] + list(unknown)
    if not items:
        return None
    return json.dumps(items, separators=(",", ":"))


#: The plugins whose downgrades are softTaint's (issue 26): they do not count as anomaly downgrades
#: (RemoveAnomalyPods' ``maxDowngradedNodes``, ``descheduler_anomaly_nodes_downgraded``).
SOFT_TAINT_PLUGINS = frozenset({"LowNodeUtilization", "HighNodeUtilization"})


def is_soft_taint(entry: DowngradeEntry) -> bool:
    """Whether a downgrade entry is a soft taint of LowNodeUtilization or HighNodeUtilization."""
    return entry.by.partition("/")[2] in SOFT_TAINT_PLUGINS


def active_entries(annotations: Mapping[str, str] | None, now: datetime) -> list[DowngradeEntry]:
    """desched's downgrade entries on a node that have not expired at ``now`` (none if unreadable)."""
    try:
        entries, _ = read_entries(annotations)
    except UnreadableRecord:
        return []
    return [e for e in entries if e.expires_at > now]


@dataclass(frozen=True, slots=True)
class Plan:
    result: ActionResult
    #: JSON merge patch of the node (None: nothing to write).
    patch: dict[str, Any] | None
    expires_at: datetime | None
    detail: str = ""


def _find_taint(taints: Sequence[Mapping[str, Any]], key: str, effect: str) -> Mapping[str, Any] | None:
    for t in taints:
        if t.get("key") == key and t.get("effect") == effect:
            return t
    return None


def plan_downgrade(state: NodeState, req: DowngradeRequest, now: datetime) -> Plan:
    """How to add (or extend) ``req`` on a node in ``state``: a JSON merge patch, or why not."""
    try:
        entries, unknown = read_entries(state.annotations)
    except UnreadableRecord as e:
        return Plan(ActionResult.SKIPPED, None, None, f"{e}; not touching the node")
    effect = req.effect if req.method == METHOD_TAINT else ""
    mine = next((e for e in entries if e.same_target(req.method, req.key, effect)), None)
    expires = _ceil_second(now + req.ttl)
    if req.method == METHOD_LABEL:
        current: str | None = state.labels.get(req.key)
        present = current == req.value if mine is None else current == mine.value
        foreign = current is not None and not present
    else:
        taint = _find_taint(state.taints, req.key, effect)
        current = None if taint is None else str(taint.get("value", ""))
        present = current == (req.value if mine is None else mine.value)
        foreign = taint is not None and not present
    target = f"{req.method} {req.key}" + (f":{effect}" if effect else "")
    if mine is None and current is not None:
        return Plan(
            ActionResult.SKIPPED, None, None, f"{target} is already on the node and desched did not add it"
        )
    if mine is not None and foreign:
        return Plan(
            ActionResult.SKIPPED,
            None,
            mine.expires_at,
            f"{target} was changed by someone else (value {current!r}); leaving it alone",
        )
    if mine is not None and present and mine.value == req.value:
        refresh = min(req.ttl * EXTEND_MIN_SHARE, EXTEND_MIN_CAP)
        if expires - mine.expires_at < refresh:
            return Plan(ActionResult.UNCHANGED, None, mine.expires_at, "already downgraded by desched")
    new_entry = DowngradeEntry(req.method, req.key, req.value, expires, effect, req.by, req.reason)
    if mine is not None:
        new_entry = replace(new_entry, expires_at=max(expires, mine.expires_at))
    others = [e for e in entries if e is not mine]
    patch: dict[str, Any] = {
        "metadata": {"annotations": {DOWNGRADE_ANNOTATION: encode_entries([*others, new_entry], unknown)}}
    }
    if req.method == METHOD_LABEL:
        patch["metadata"]["labels"] = {req.key: req.value}
    else:
        taints = [t for t in state.taints if not (t.get("key") == req.key and t.get("effect") == effect)]
        taints.append({"key": req.key, "value": req.value, "effect": effect})
        patch["spec"] = {"taints": taints}
    result = ActionResult.EXTENDED if mine is not None and present else ActionResult.DOWNGRADED
    return Plan(result, patch, new_entry.expires_at)


@dataclass(frozen=True, slots=True)
class RestorePlan:
    #: Expired entries, each with what happens to its label or taint.
    expired: list[tuple[DowngradeEntry, ActionResult, str]]
    patch: dict[str, Any] | None


def plan_restore(state: NodeState, now: datetime) -> RestorePlan:
    """Remove every expired downgrade desched recorded on the node (and only those)."""
    try:
        entries, unknown = read_entries(state.annotations)
    except UnreadableRecord:
        return RestorePlan([], None)
    expired = [e for e in entries if e.expires_at <= now]
    if not expired:
        return RestorePlan([], None)
    keep = [e for e in entries if e.expires_at > now]
    outcomes: list[tuple[DowngradeEntry, ActionResult, str]] = []
    patch: dict[str, Any] = {
        "metadata": {"annotations": {DOWNGRADE_ANNOTATION: encode_entries(keep, unknown)}}
    }
    labels: dict[str, None] = {}
    taints = list(state.taints)
    taints_changed = False
    for e in expired:
        if e.method == METHOD_LABEL:
            if state.labels.get(e.key) == e.value:
                labels[e.key] = None
                outcomes.append((e, ActionResult.RESTORED, ""))
            else:
                outcomes.append((e, ActionResult.RESTORED, "label already gone or changed: left as is"))
        else:
            before = len(taints)
            taints = [
                t
                for t in taints
                if not (
                    t.get("key") == e.key
                    and t.get("effect") == e.effect
                    and str(t.get("value", "")) == e.value
                )
            ]
            if len(taints) != before:
                taints_changed = True
                outcomes.append((e, ActionResult.RESTORED, ""))
            else:
                outcomes.append((e, ActionResult.RESTORED, "taint already gone or changed: left as is"))
    if labels:
        patch["metadata"]["labels"] = labels
    if taints_changed:
        patch["spec"] = {"taints": taints}
    return RestorePlan(outcomes, patch)


def plan_release(state: NodeState, method: str, key: str, effect: str) -> RestorePlan:
    """Remove desched's own downgrade of this target from a node now, whatever its expiry (a soft
    taint on a node that no longer qualifies). Nothing is planned when desched has no entry for it:
    a label or taint desched did not add is never touched, nor any other taint or entry."""
    try:
        entries, unknown = read_entries(state.annotations)
    except UnreadableRecord:
        return RestorePlan([], None)
    effect = effect if method == METHOD_TAINT else ""
    mine = [e for e in entries if e.same_target(method, key, effect)]
    if not mine:
        return RestorePlan([], None)
    keep = [e for e in entries if not e.same_target(method, key, effect)]
    patch: dict[str, Any] = {
        "metadata": {"annotations": {DOWNGRADE_ANNOTATION: encode_entries(keep, unknown)}}
    }
    outcomes: list[tuple[DowngradeEntry, ActionResult, str]] = []
    taints = list(state.taints)
    labels: dict[str, None] = {}
    for e in mine:
        if e.method == METHOD_LABEL:
            gone = state.labels.get(e.key) != e.value
            if not gone:
                labels[e.key] = None
        else:
            left = [
                t
                for t in taints
                if not (
                    t.get("key") == e.key
                    and t.get("effect") == e.effect
                    and str(t.get("value", "")) == e.value
                )
            ]
            gone = len(left) == len(taints)
            taints = left
        what = "label" if e.method == METHOD_LABEL else "taint"
        outcomes.append(
            (e, ActionResult.RESTORED, f"{what} already gone or changed: left as is" if gone else "")
        )
    if labels:
        patch["metadata"]["labels"] = labels
    if len(taints) != len(state.taints):
        patch["spec"] = {"taints": taints}
    return RestorePlan(outcomes, patch)


def apply_patch(state: NodeState, patch: Mapping[str, Any]) -> NodeState:
    """``state`` after a JSON merge patch made by the planners above (labels, annotations, taints)."""
    meta = patch.get("metadata") or {}
    labels = dict(state.labels)
    for k, v in (meta.get("labels") or {}).items():
        if v is None:
            labels.pop(k, None)
        else:
            labels[k] = v
    annotations = dict(state.annotations)
    for k, v in (meta.get("annotations") or {}).items():
        if v is None:
            annotations.pop(k, None)
        else:
            annotations[k] = v
    spec = patch.get("spec") or {}
    taints = [dict(t) for t in spec["taints"]] if "taints" in spec else [dict(t) for t in state.taints]
    return NodeState(labels, taints, annotations)


def downgrade_record(
    node: str, req: DowngradeRequest, plan: Plan, *, dry_run: bool, detail: str = ""
) -> NodeActionRecord:
    return NodeActionRecord(
        node,
        "downgrade",
        req.method,
        req.key,
        req.value,
        req.effect if req.method == METHOD_TAINT else "",
        plan.expires_at,
        plan.result,
        req.by,
        req.reason,
        req.pods,
        dry_run,
        detail or plan.detail,
    )


def restore_records(
    node: str, plan: RestorePlan, *, dry_run: bool, failed: str = "", release: ReleaseRequest | None = None
) -> list[NodeActionRecord]:
    """The records of a restore (``release``: an early removal a plugin asked for, with its reason)."""
    return [
        NodeActionRecord(
            node,
            "restore",
            e.method,
            e.key,
            e.value,
            e.effect,
            e.expires_at,
            ActionResult.FAILED if failed else result,
            release.by if release is not None else e.by,
            release.reason if release is not None else e.reason,
            (),
            dry_run,
            failed or detail,
        )
        for e, result, detail in plan.expired
    ]


#: The results after which a node carries (or no longer carries) what the record names.
_TAKES_EFFECT = frozenset(
    (ActionResult.DOWNGRADED, ActionResult.EXTENDED, ActionResult.UNCHANGED, ActionResult.RESTORED)
)


def _record_after(annotations: Mapping[str, str] | None, a: NodeActionRecord) -> dict[str, str] | None:
    """The node's annotations with its downgrade record as ``a`` leaves it: the next simulated
    cycle then sees the label or taint as desched's own (to extend, or to remove)."""
    out = dict(annotations or {})
    if a.result is ActionResult.UNCHANGED:
        return out or None
    try:
        entries, unknown = read_entries(out)
    except UnreadableRecord:
        return out or None
    kept = [e for e in entries if not e.same_target(a.method, a.key, a.effect)]
    if a.action != "restore" and a.expires_at is not None:
        kept.append(DowngradeEntry(a.method, a.key, a.value, a.expires_at, a.effect, a.by, a.reason))
    value = encode_entries(kept, unknown)
    if value is None:
        out.pop(DOWNGRADE_ANNOTATION, None)
    else:
        out[DOWNGRADE_ANNOTATION] = value
    return out or None


def nodes_after_actions(nodes: Sequence[Node], actions: Sequence[NodeActionRecord]) -> list[Node] | None:
    """``nodes`` as these node actions (downgrades, restores) leave them; None when no action
    changes a node. Dry-run records count: a simulation or ``--dry-run`` predicts what a real run
    does (the placement of a cycle's replacements, and ``evictionPolicy.predictive``)."""
    changes = [a for a in actions if a.result in _TAKES_EFFECT]
    if not changes:
        return None
    by_name = {n.metadata.name: n for n in nodes}
    for a in changes:
        node = by_name.get(a.node)
        if node is None:
            continue
        taints = list(node.spec.taints or ())
        labels = dict(node.metadata.labels or {})
        annotations = _record_after(node.metadata.annotations, a)
        if a.action == "restore":
            if a.method == METHOD_TAINT:
                taints = [t for t in taints if not (t.key == a.key and t.effect == a.effect)]
            else:
                labels.pop(a.key, None)
        elif a.method == METHOD_TAINT:
            if not any(t.key == a.key and t.effect == a.effect for t in taints):
                taints.append(Taint(key=a.key, value=a.value, effect=a.effect))
        else:
            labels[a.key] = a.value
        by_name[a.node] = msgspec.structs.replace(
            node,
            metadata=msgspec.structs.replace(node.metadata, labels=labels, annotations=annotations),
            spec=msgspec.structs.replace(node.spec, taints=taints),
        )
    return list(by_name.values())


# ----------------------------------------------------------------------------- protocols


class NodeActionBackend(Protocol):
    """Carries out node actions for one cycle and keeps the records of what it did."""

    @property
    def records(self) -> list[NodeActionRecord]: ...

    def downgrade(self, node: Node, request: DowngradeRequest) -> NodeActionRecord: ...

    def release(self, node: Node, request: ReleaseRequest) -> list[NodeActionRecord]: ...


class NodeActions(Protocol):
    """What a plugin sees: downgrade a node for a while; the records of this cycle."""

    @property
    def records(self) -> list[NodeActionRecord]: ...

    def downgrade(
        self,
        node: Node,
        *,
        method: str,
        key: str,
        value: str,
        ttl: timedelta,
        reason: str,
        effect: str = "NoSchedule",
        pods: Sequence[str] = (),
    ) -> NodeActionRecord: ...

    def release(
        self, node: Node, *, method: str, key: str, reason: str, effect: str = "NoSchedule"
    ) -> list[NodeActionRecord]: ...


class PluginNodeActions:
    """One plugin's view of the cycle's node-action backend: stamps requests with who asked."""

    def __init__(self, backend: NodeActionBackend, by: str) -> None:
        self._backend = backend
        self._by = by

    @property
    def records(self) -> list[NodeActionRecord]:
        return [r for r in self._backend.records if r.by == self._by]

    def downgrade(
        self,
        node: Node,
        *,
        method: str,
        key: str,
        value: str,
        ttl: timedelta,
        reason: str,
        effect: str = "NoSchedule",
        pods: Sequence[str] = (),
    ) -> NodeActionRecord:
        request = DowngradeRequest(method, key, value, ttl, reason, effect, self._by, tuple(pods))
        return self._backend.downgrade(node, request)

    def release(
        self, node: Node, *, method: str, key: str, reason: str, effect: str = "NoSchedule"
    ) -> list[NodeActionRecord]:
        """Remove desched's own label or taint ``key`` from ``node`` now (nothing when desched did
        not add it): no records when there was nothing of desched's to remove."""
        return self._backend.release(node, ReleaseRequest(method, key, effect, reason, self._by))


class NoNodeActions:
    """A cycle without a node-action backend: every request is recorded as skipped, nothing changes."""

    def __init__(self) -> None:
        self._records: list[NodeActionRecord] = []

    @property
    def records(self) -> list[NodeActionRecord]:
        return self._records

    def downgrade(self, node: Node, request: DowngradeRequest) -> NodeActionRecord:
        plan = Plan(ActionResult.SKIPPED, None, None, "no node-action backend in this cycle")
        record = downgrade_record(node.metadata.name, request, plan, dry_run=True)
        self._records.append(record)
        return record

    def release(self, node: Node, request: ReleaseRequest) -> list[NodeActionRecord]:
        return []
