"""Compact records: decoding pods so that repeated values are one object each.

Most of a pod's record repeats other pods': the pods of one workload have the same containers,
affinity, tolerations, volumes, labels, owner references, ... and every pod repeats a few short
strings (its namespace, node name, phase, condition types).

:class:`CompactDecoder` first takes those sub-structures of a pod as raw JSON bytes: bytes seen
before (most often the previous pod's: the pods of a workload are mostly listed together) give the
record decoded the first time, one object shared by every pod that wrote the same bytes; only new
bytes are decoded. Equal bytes decode to equal records, with the same key order and number types
(1 stays 1, 1.0 stays 1.0), so sharing changes no value; it saves most of the work of building the
records and keeps one copy of each distinct value. The short strings left in each pod are
interned (:class:`Interner`).

Sharing is safe because records are never changed in place: desched derives a changed pod with
``msgspec.structs.replace`` (a new object for each changed level, the rest shared). Code that
changes a record must keep doing so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC
from typing import Any, Final

import msgspec

from desched.k8s.objects import (
    Container,
    ContainerState,
    Deployment,
    Event,
    Namespace,
    Node,
    ObjectMeta,
    OwnerReference,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodSpec,
    PriorityClass,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
    Toleration,
    Volume,
)

Intern = Callable[[Any, Any], Any]
"""``dict.setdefault`` of an interning table: ``t(s, s)`` is the canonical instance of ``s``."""

_ABSENT: Final = msgspec.Raw()
"""A raw field the JSON did not have (``bytes(_ABSENT) == b""``)."""
_MISSING: Final = object()
_EMPTY_STATE: Final = ContainerState()
"""The one record of an empty container state (what ``lastState: {}`` decodes to)."""
_NEVER: Final = msgspec.Raw(b"\0")
"""Equal to no raw field (not JSON)."""


# ---------------------------------------------------------------------------- interning


class Interner:
    """Makes the repeated short strings of records one object each.

    The decoder builds a fresh string for each occurrence (it already shares dict keys); replacing
    them by a canonical instance saves about a third of the records' memory. Nothing compares these
    strings by identity, so this changes no decision. A pod's UTC timestamps equal to its creation
    or start time are shared too (others are left alone: equal instants in other zones print
    differently).
    """

    __slots__ = ("table",)

    def __init__(self) -> None:
        self.table: dict[object, Any] = {}

    def objects(self, objects: Iterable[object]) -> None:
        """Intern the pods and nodes among ``objects`` (in place; other kinds are left alone)."""
        t = self.table.setdefault
        for obj in objects:
            if type(obj) is Pod:
                _intern_meta(obj.metadata, t)
                _intern_pod_spec(obj.spec, t)
                _intern_pod_rest(obj, t)
            elif type(obj) is Node:
                _intern_node(obj, t)


def _intern_values(d: dict[str, Any] | None, t: Intern) -> None:
    if d:
        for k, v in d.items():  # (replacing values of existing keys while iterating is allowed)
            d[k] = t(v, v)


def _intern_owner_references(refs: list[OwnerReference] | None, t: Intern) -> None:
    for ref in refs or ():
        ref.kind = t(ref.kind, ref.kind)
        ref.name = t(ref.name, ref.name)
        ref.api_version = t(ref.api_version, ref.api_version)


def _intern_meta(m: ObjectMeta, t: Intern) -> None:
    m.namespace = t(m.namespace, m.namespace)
    _intern_values(m.labels, t)
    _intern_values(m.annotations, t)
    _intern_owner_references(m.owner_references, t)


def _intern_quantities(d: dict[str, Any], t: Intern) -> None:
    for k, v in d.items():
        if type(v) is str:  # (never an int for an equal float)
            d[k] = t(v, v)


def _intern_containers(containers: list[Container] | None, t: Intern) -> None:
    for c in containers or ():
        c.name = t(c.name, c.name)
        c.image = t(c.image, c.image)
        r = c.resources
        if r is not None:
            if r.requests:
                _intern_quantities(r.requests, t)
            if r.limits:
                _intern_quantities(r.limits, t)


def _intern_tolerations(tolerations: list[Toleration] | None, t: Intern) -> None:
    for tol in tolerations or ():
        tol.key = t(tol.key, tol.key)
        tol.operator = t(tol.operator, tol.operator)
        tol.value = t(tol.value, tol.value)
        tol.effect = t(tol.effect, tol.effect)


def _intern_volumes(volumes: list[Volume] | None, t: Intern) -> None:
    for vol in volumes or ():
        vol.name = t(vol.name, vol.name)


def _intern_pod_spec(spec: PodSpec, t: Intern) -> None:
    """The parts of a pod's spec that :class:`CompactDecoder` shares."""
    _intern_values(spec.node_selector, t)
    _intern_tolerations(spec.tolerations, t)
    _intern_containers(spec.containers, t)
    _intern_containers(spec.init_containers, t)
    _intern_volumes(spec.volumes, t)


def _intern_pod_rest(pod: Pod, t: Intern) -> None:
    """The parts of a pod that :class:`CompactDecoder` does not share (but ``metadata.namespace``)."""
    spec = pod.spec
    spec.node_name = t(spec.node_name, spec.node_name)
    spec.priority_class_name = t(spec.priority_class_name, spec.priority_class_name)
    spec.scheduler_name = t(spec.scheduler_name, spec.scheduler_name)
    spec.restart_policy = t(spec.restart_policy, spec.restart_policy)
    n = spec.priority
    if n is not None:
        spec.priority = t(n, n)  # (an int: never equal to a string of the table)
    s = spec.preemption_policy
    if s is not None:
        spec.preemption_policy = t(s, s)
    status = pod.status
    status.phase = t(status.phase, status.phase)
    status.qos_class = t(status.qos_class, status.qos_class)
    # a pod's timestamps mostly repeat its own creation or start time (hashing timestamps for a
    # table would cost more than it saves)
    created = pod.metadata.creation_timestamp
    if created is not None and created.tzinfo is not UTC:
        created = None
    started = status.start_time
    if started is not None:
        if started.tzinfo is not UTC:
            started = None
        elif started == created:
            status.start_time = started = created
    for c in status.conditions or ():
        c.type = t(c.type, c.type)
        c.status = t(c.status, c.status)
        if c.reason:  # (mostly "", one object already)
            c.reason = t(c.reason, c.reason)
        ts = c.last_transition_time
        if ts is not None and ts.tzinfo is UTC:
            if ts == started:
                c.last_transition_time = started
            elif ts == created:
                c.last_transition_time = created
    empty = _EMPTY_STATE
    for cs in status.container_statuses or ():
        cs.name = t(cs.name, cs.name)
        if cs.last_state == empty:  # (``lastState: {}``: most containers never restarted)
            cs.last_state = empty
    for cs in status.init_container_statuses or ():
        cs.name = t(cs.name, cs.name)
        if cs.last_state == empty:
            cs.last_state = empty
        done = cs.state.terminated if cs.state is not None else None
        if done is not None and done.reason:  # ("Completed": an init container that ran)
            done.reason = t(done.reason, done.reason)


def _intern_node(node: Node, t: Intern) -> None:
    _intern_meta(node.metadata, t)
    st = node.status
    if st.capacity:
        _intern_quantities(st.capacity, t)
    if st.allocatable:
        _intern_quantities(st.allocatable, t)
    for c in st.conditions or ():
        c.type = t(c.type, c.type)
        c.status = t(c.status, c.status)
        c.reason = t(c.reason, c.reason)


# ---------------------------------------------------------------------------- sharing

#: The fields taken raw and shared, with what interns a newly decoded value (None: nothing).
_SHARED_META: dict[str, Callable[[Any, Intern], None] | None] = {
    "labels": _intern_values,
    "annotations": _intern_values,
    "owner_references": _intern_owner_references,
}
_SHARED_SPEC: dict[str, Callable[[Any, Intern], None] | None] = {
    "node_selector": _intern_values,
    "tolerations": _intern_tolerations,
    "affinity": None,
    "topology_spread_constraints": None,
    "containers": _intern_containers,
    "init_containers": _intern_containers,
    "volumes": _intern_volumes,
}


def _wire_type(cls: type[msgspec.Struct], raw: Iterable[str], nested: dict[str, Any]) -> Any:
    """``cls`` with the fields ``raw`` kept as raw JSON and those of ``nested`` of another type
    (same field names, order, wire names, defaults and tag)."""
    raw = set(raw)
    fields: list[tuple[str, Any, Any]] = []
    for f in msgspec.structs.fields(cls):
        if f.name in raw:
            fields.append((f.name, msgspec.Raw, msgspec.field(default=_ABSENT, name=f.encode_name)))
        elif f.name in nested:
            sub = nested[f.name]
            fields.append((f.name, sub, msgspec.field(default_factory=sub, name=f.encode_name)))
        elif f.default_factory is not msgspec.NODEFAULT:
            fields.append(
                (f.name, f.type, msgspec.field(default_factory=f.default_factory, name=f.encode_name))
            )
        else:
            fields.append((f.name, f.type, msgspec.field(default=f.default, name=f.encode_name)))
    config = cls.__struct_config__
    return msgspec.defstruct(
        f"_Wire{cls.__name__}", fields, tag_field=config.tag_field, tag=config.tag, gc=False
    )


_WireMeta = _wire_type(ObjectMeta, _SHARED_META, {})
_WireSpec = _wire_type(PodSpec, _SHARED_SPEC, {})
_WirePod = _wire_type(Pod, (), {"metadata": _WireMeta, "spec": _WireSpec})
_NAMESPACE = [f.name for f in msgspec.structs.fields(ObjectMeta)].index("namespace")
if [f.name for f in msgspec.structs.fields(Pod)] != ["metadata", "spec", "status"]:
    raise RuntimeError("CompactDecoder._pod builds a Pod from its metadata, spec and status only")
_WireObject: Any = (
    _WirePod
    | Node
    | Namespace
    | PodDisruptionBudget
    | PriorityClass
    | PersistentVolumeClaim
    | Event
    | Service
    | ReplicationController
    | ReplicaSet
    | StatefulSet
    | Deployment
)
_WireList: Any = msgspec.defstruct("_WireList", [("items", list[_WireObject])], gc=False)


class _Shared:
    """One shared field: where it is in its struct, and the values seen, by their JSON bytes."""

    __slots__ = ("decoder", "index", "intern", "table")

    def __init__(self, cls: type[msgspec.Struct], name: str, intern: Callable[[Any, Intern], None] | None):
        fields = msgspec.structs.fields(cls)
        self.index = next(i for i, f in enumerate(fields) if f.name == name)
        f = fields[self.index]
        self.decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder(f.type)
        self.intern = intern
        # an absent field: the field's default (one list for every pod that has no containers)
        default = f.default_factory() if f.default_factory is not msgspec.NODEFAULT else f.default
        self.table: dict[bytes, Any] = {b"": default}


class CompactDecoder:
    """Decodes listed objects from JSON, sharing the values pods repeat (see the module's doc).

    ``max_bytes`` bounds the tables of values seen (the JSON bytes kept as keys, plus the interned
    strings counted at 64 bytes each): past it they start afresh, and only sharing with the pods
    decoded before is lost. A long-lived cache (the live informer) sets it; a one-off load need not.
    """

    def __init__(self, *, max_bytes: int | None = None) -> None:
        self.interner = Interner()
        self._meta = tuple(_Shared(ObjectMeta, name, f) for name, f in _SHARED_META.items())
        self._spec = tuple(_Shared(PodSpec, name, f) for name, f in _SHARED_SPEC.items())
        # (field's place in its struct, its place in the previous pod's lists, the field)
        self._meta_plan = tuple((f.index, j, f) for j, f in enumerate(self._meta))
        self._spec_plan = tuple((f.index, len(self._meta) + j, f) for j, f in enumerate(self._spec))
        self._max_bytes = max_bytes
        self._bytes = 0
        # the previous pod's raw fields and their records: the next pod most often repeats them
        self._never = [_NEVER] * (len(self._meta) + len(self._spec))
        self._prev_raw: list[msgspec.Raw] = list(self._never)
        self._prev_value: list[Any] = [None] * len(self._never)
        self._array_decoder = msgspec.json.Decoder(list[_WireObject])
        self._list_decoder = msgspec.json.Decoder(_WireList)
        self._pod_decoder = msgspec.json.Decoder(_WirePod)
        self._plain_pod_decoder = msgspec.json.Decoder(Pod)

    def decode_array(self, data: bytes | memoryview) -> list[Any]:
        """The objects of a JSON array of listed objects (each with its ``kind``).

        Raises msgspec's errors as a typed decode would, but a ValidationError may not say where:
        decode again with the plain types to report it.
        """
        return self._finish(self._array_decoder.decode(data))

    def decode_list(self, data: bytes) -> list[Any]:
        """The ``items`` of a JSON object (a ``kind: List``); raises like :meth:`decode_array`."""
        return self._finish(self._list_decoder.decode(data).items)

    def decode_pod(self, data: bytes | msgspec.Raw) -> Pod:
        """One pod; raises msgspec's errors as a typed decode would, saying where."""
        try:
            pod = self._pod(self._pod_decoder.decode(data), self.interner.table.setdefault)
        except msgspec.ValidationError:
            return self._plain_pod_decoder.decode(data)  # (raises, saying where)
        finally:
            self._prev_raw[:] = self._never  # (they would keep ``data`` alive)
        self._check_size()
        return pod

    def _finish(self, objects: list[Any]) -> list[Any]:
        t = self.interner.table.setdefault
        pod = self._pod
        wire_pod = _WirePod
        for i, obj in enumerate(objects):
            if type(obj) is wire_pod:
                objects[i] = pod(obj, t)
            elif type(obj) is Node:
                _intern_node(obj, t)
        # (so that the previous pod's raw fields do not keep the data alive)
        self._prev_raw = [msgspec.Raw(bytes(raw)) for raw in self._prev_raw]
        self._check_size()
        return objects

    def _pod(self, wire: Any, t: Intern) -> Pod:
        prev_raw = self._prev_raw
        prev_value = self._prev_value
        missing = _MISSING
        m = list(msgspec.structs.astuple(wire.metadata))
        ns = m[_NAMESPACE]
        m[_NAMESPACE] = t(ns, ns)
        # Each shared field: the previous pod's (pods of one workload are mostly listed one after
        # the other), else the one decoded before from the same JSON, else a new one.
        for i, j, f in self._meta_plan:
            raw = m[i]
            if raw == prev_raw[j]:
                m[i] = prev_value[j]
            else:
                key = bytes(raw)
                value = f.table.get(key, missing)
                m[i] = prev_value[j] = self._new(f, key, t) if value is missing else value
                prev_raw[j] = raw
        s = list(msgspec.structs.astuple(wire.spec))
        for i, j, f in self._spec_plan:
            raw = s[i]
            if raw == prev_raw[j]:
                s[i] = prev_value[j]
            else:
                key = bytes(raw)
                value = f.table.get(key, missing)
                s[i] = prev_value[j] = self._new(f, key, t) if value is missing else value
                prev_raw[j] = raw
        pod = Pod(ObjectMeta(*m), PodSpec(*s), wire.status)
        _intern_pod_rest(pod, t)
        return pod

    def _new(self, f: _Shared, key: bytes, t: Intern) -> Any:
        """A value not seen before: decoded, interned and kept."""
        value = f.decoder.decode(key)
        if f.intern is not None:
            f.intern(value, t)
        f.table[key] = value
        self._bytes += len(key)
        return value

    def _check_size(self) -> None:
        if self._max_bytes is not None and self._bytes + 64 * len(self.interner.table) > self._max_bytes:
            self.interner.table.clear()
            for f in (*self._meta, *self._spec):
                f.table = {b"": f.table[b""]}
            self._bytes = 0
