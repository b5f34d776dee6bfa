"""What the API server would have validated, checked on a snapshot read from a file.

A live cache holds only objects the API server accepted; a snapshot file may hold anything (it was
edited by hand, generated, or cut). Decisions on an object the API would have refused are not
decisions on a cluster, and can change what happens to the valid objects around it: a nameless
Node counts as a ready node and shifts RemoveDuplicates' per-node average, a second pod with an
existing uid counts as a replica, a taint with an empty key evicts every pod of its node. So a
snapshot with such an object is refused (exit 2), with one line naming the object and the field;
nothing is skipped silently, and nothing is skipped with a warning either: skipping an object
changes the decisions on the others just as keeping it does (see docs/simulation.md).

Checked here (types, int32/int64 ranges and zone-less timestamps are refused earlier, when the
records are decoded: see :mod:`desched.k8s.objects`):

- every object has a name, valid for its kind (DNS-1123 subdomain; a Namespace's a DNS label);
  a namespaced object has a valid namespace;
- no two objects of one kind share a namespace/name, and no two pods share a uid;
- a Pod has containers (a Pod without ``spec`` has none), quantities in its requests, limits and
  overhead that parse, are not negative and fit an int64; topology spread constraints have
  ``maxSkew`` and ``minDomains`` (when set) above 0;
- a Node's capacity and allocatable parse, are not negative and fit an int64; its taints have a
  valid key and one of the three effects;
- every object's labels have valid keys (qualified names) and values, as has a Pod's
  ``nodeSelector``; the label selectors the API server validates are valid: a
  PodDisruptionBudget's ``spec.selector``, a Pod's pod (anti-)affinity terms' ``labelSelector``
  and ``namespaceSelector`` and its topology spread constraints' ``labelSelector`` (an invalid
  one made every plugin that reads it fail, or be skipped pod by pod, while the others evicted).
  A node affinity term desched cannot parse matches no node, as in kube-scheduler; it is not
  refused here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from desched.api.documents import excerpt
from desched.errors import SnapshotError
from desched.k8s import labels as k8s_labels
from desched.k8s import quantity as k8s_quantity
from desched.k8s.objects import (
    AnyObject,
    Container,
    LabelSelector,
    Node,
    Pod,
    PodAffinity,
    PodDisruptionBudget,
    PodSpec,
)

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
#: Lines of DNS-1123 subdomains, each ended by a newline (names never hold one).
_DNS_SUBDOMAINS = re.compile(r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\n)*")
_NAMESPACED = frozenset(
    {
        "Pod",
        "PodDisruptionBudget",
        "PersistentVolumeClaim",
        "Event",
        "Service",
        "ReplicationController",
        "ReplicaSet",
        "StatefulSet",
        "Deployment",
    }
)
_TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
#: The largest quantity desched takes (Kubernetes keeps amounts as int64).
_MAX_QUANTITY_NANO = ((1 << 63) - 1) * k8s_quantity.NANO


def validate_objects(objects: Iterable[AnyObject], source: str) -> None:
    """Raise one :class:`SnapshotError` for the first object the API server would have refused."""
    listed = objects if isinstance(objects, list) else list(objects)
    check = Validator()
    check.add(listed)
    check.finish(listed, source)


class Validator:
    """:func:`validate_objects` in two steps: :meth:`add` the objects as they are decoded (a batch
    at a time, while their records are still in the CPU's cache: a second walk over 150,000 pods'
    records afterwards costs twice as much), then :meth:`finish`.

    :meth:`add` checks faster than the walk object by object: the pods' names, namespaces, keys
    and uids in bulk. It only notes whether anything might be wrong; :meth:`finish` then walks the
    objects one by one, in the listed order, to say which is and why (so the first problem is
    reported, as always)."""

    __slots__ = ("doubt", "named", "pod_keys", "pods", "seen", "state", "uids", "uids_seen")

    def __init__(self) -> None:
        self.state = _State()
        self.doubt = False
        self.seen: set[tuple[str, str, str]] = set()
        self.named = 0
        #: the pods' names by namespace (sets of the records' own strings: no key is made)
        self.pod_keys: dict[str, set[str]] = {}
        self.pods = 0
        self.uids: set[str] = set()
        self.uids_seen = 0

    def add(self, objects: list[AnyObject]) -> None:
        if self.doubt:
            return
        state = self.state
        pods: list[Pod] = []
        for obj in objects:
            if type(obj) is Pod:
                pods.append(obj)
                continue
            kind = type(obj).__name__
            meta = obj.metadata
            name, ns = meta.name, meta.namespace
            if _object_problem(obj, kind, name, ns, state) is not None:
                self.doubt = True
                return
            if name:
                self.seen.add((kind, ns, name))
                self.named += 1
        if pods and not self._pods_valid(pods):
            self.doubt = True

    def _pods_valid(self, pods: list[Pod]) -> bool:
        state = self.state
        metas = [p.metadata for p in pods]
        names = [m.name for m in metas]
        namespaces = [m.namespace for m in metas]
        # every name a DNS-1123 subdomain: one match over all of them, one per line
        if not all(names) or max(map(len, names)) > 253:
            return False
        text = "\n".join(names)
        if text.count("\n") != len(names) - 1 or _DNS_SUBDOMAINS.fullmatch(text + "\n") is None:
            return False
        for ns in set(namespaces) - state.namespaces:
            if not ns or len(ns) > 63 or _DNS_LABEL.fullmatch(ns) is None:
                return False
            state.namespaces.add(ns)
        if len(set(namespaces)) == 1:  # (mostly: pods are listed by namespace)
            self.pod_keys.setdefault(namespaces[0], set()).update(names)
        else:
            for ns, name in zip(namespaces, names, strict=True):
                self.pod_keys.setdefault(ns, set()).add(name)
        self.pods += len(pods)
        uids = [m.uid for m in metas if m.uid]
        self.uids.update(uids)
        self.uids_seen += len(uids)
        # the labels' keys and values, each distinct string once (replicas share theirs)
        keys: set[str] = set()
        values: set[str] = set()
        for m in metas:
            if m.labels:
                keys.update(m.labels)
                values.update(m.labels.values())
        if not _label_strings_valid(keys, values, state):
            return False
        # (_pod_spec_problem, for the pods whose spec has nothing it would not skip or pass)
        checked = state.containers
        for p in pods:
            spec = p.spec
            containers = spec.containers
            init = spec.init_containers
            if (
                not containers
                or id(containers) not in checked
                or (init and id(init) not in checked)
                or spec.ephemeral_containers
                or spec.overhead
                or spec.resources is not None
                or spec.topology_spread_constraints
                or spec.node_selector
                or (spec.affinity is not None and id(spec.affinity) not in checked)
            ) and _pod_spec_problem(spec, state) is not None:
                return False
        return True

    def finish(self, objects: list[AnyObject], source: str) -> None:
        """Raise for the first of ``objects`` (all that were added, in order) that is refused."""
        if (
            self.doubt
            or len(self.seen) != self.named  # (an object listed twice)
            or sum(map(len, self.pod_keys.values())) != self.pods
            or len(self.uids) != self.uids_seen
        ):
            _raise_first_problem(objects, source)


def _raise_first_problem(objects: list[AnyObject], source: str) -> None:
    """The check object by object, in the listed order: raises for the first problem found."""
    seen: dict[tuple[str, str, str], int] = {}
    uids: dict[str, str] = {}
    ordinal: dict[str, int] = {}
    state = _State()
    for obj in objects:
        kind = type(obj).__name__
        n = ordinal[kind] = ordinal.get(kind, 0) + 1
        meta = obj.metadata
        name, ns = meta.name, meta.namespace
        problem = _object_problem(obj, kind, name, ns, state)
        if problem is None and name:
            key = (kind, ns, name)
            first = seen.get(key)
            if first is not None:
                problem = "metadata.name", f"listed twice (also the {_nth(first)} {kind} listed)"
            seen[key] = n
        if problem is None and type(obj) is Pod and meta.uid:
            other = uids.get(meta.uid)
            if other is not None:
                problem = "metadata.uid", f"{excerpt(meta.uid)} is also the uid of pod {other}"
            uids[meta.uid] = obj.key
        if problem is not None:
            raise SnapshotError(f"{source}: {_who(kind, ns, name, n)}", f"{problem[0]}: {problem[1]}")


class _State:
    """What was found valid already (pods share namespaces, container lists and quantities)."""

    __slots__ = ("containers", "label_keys", "label_values", "namespaces", "quantities")

    def __init__(self) -> None:
        self.namespaces: set[str] = set()
        #: the ids of container lists and affinities found valid (the objects stay listed, so
        #: their ids are not reused while the snapshot is checked)
        self.containers: set[int] = set()
        self.quantities: set[object] = set()
        self.label_keys: set[str] = set()
        self.label_values: set[str] = set()


def _object_problem(obj: AnyObject, kind: str, name: str, ns: str, state: _State) -> tuple[str, str] | None:
    if not name:
        if kind != "Event":
            return "metadata.name", "required (the API server refuses an object without a name)"
    elif kind != "Event":
        why = _name_problem(kind, name)
        if why:
            return "metadata.name", why
    if kind in _NAMESPACED and ns not in state.namespaces:
        if not ns:
            return "metadata.namespace", "required for a namespaced object"
        if len(ns) > 63 or _DNS_LABEL.fullmatch(ns) is None:
            return "metadata.namespace", f"{excerpt(ns)} is not a valid namespace name (a DNS label)"
        state.namespaces.add(ns)
    labels_why = _labels_problem("metadata.labels", obj.metadata.labels, state)
    if labels_why is not None:
        return labels_why
    if type(obj) is Pod:
        return _pod_spec_problem(obj.spec, state)
    if type(obj) is Node:
        return _node_problem(obj, state)
    if type(obj) is PodDisruptionBudget:
        return _selector_problem("spec.selector", obj.spec.selector)
    return None


def _label_strings_valid(keys: set[str], values: set[str], state: _State) -> bool:
    """Whether every label key and value is valid (those found valid are remembered)."""
    for key in keys - state.label_keys:
        if k8s_labels.validate_label_key(key) is not None:
            return False
        state.label_keys.add(key)
    for value in values - state.label_values:
        if k8s_labels.validate_label_value(value) is not None:
            return False
        state.label_values.add(value)
    return True


def _labels_problem(field: str, labels: Mapping[str, str] | None, state: _State) -> tuple[str, str] | None:
    if not labels:
        return None
    for key, value in labels.items():
        if key not in state.label_keys:
            why = k8s_labels.validate_label_key(key)
            if why is not None:
                return field, f"key {excerpt(key)}: {why}"
            state.label_keys.add(key)
        if value not in state.label_values:
            why = k8s_labels.validate_label_value(value)
            if why is not None:
                return f"{field}.{excerpt(key)[1:-1]}", f"{excerpt(value)}: {why}"
            state.label_values.add(value)
    return None


def _selector_problem(field: str, selector: LabelSelector | None) -> tuple[str, str] | None:
    try:
        k8s_labels.validate_label_selector(selector)
    except k8s_labels.SelectorError as e:
        return field, str(e)
    return None


def _pod_affinity_problem(field: str, affinity: PodAffinity | None) -> tuple[str, str] | None:
    if affinity is None:
        return None
    required = affinity.required_during_scheduling_ignored_during_execution or ()
    preferred = affinity.preferred_during_scheduling_ignored_during_execution or ()
    terms = [
        (f"{field}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", t) for i, t in enumerate(required)
    ]
    terms += [
        (f"{field}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm", w.pod_affinity_term)
        for i, w in enumerate(preferred)
    ]
    for where, term in terms:
        why = _selector_problem(f"{where}.labelSelector", term.label_selector) or _selector_problem(
            f"{where}.namespaceSelector", term.namespace_selector
        )
        if why is not None:
            return why
    return None


def _who(kind: str, ns: str, name: str, n: int) -> str:
    if not name:
        return f"the {_nth(n)} {kind} listed"
    shown = excerpt(name)[1:-1]
    return f"{kind} {excerpt(ns)[1:-1]}/{shown}" if ns else f"{kind} {shown}"


def _nth(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _name_problem(kind: str, name: str) -> str | None:
    if kind == "Namespace":
        if len(name) > 63 or _DNS_LABEL.fullmatch(name) is None:
            return f"{excerpt(name)} is not a valid namespace name (a DNS label)"
        return None
    if len(name) > 253 or _DNS_SUBDOMAIN.fullmatch(name) is None:
        return (
            f"{excerpt(name)} is not a valid name (a DNS-1123 subdomain: lower case alphanumerics, "
            "'-' and '.', starting and ending with an alphanumeric)"
        )
    return None


def _quantities_problem(
    field: str, resources: Mapping[str, object] | None, state: _State
) -> tuple[str, str] | None:
    if not resources:
        return None
    good = state.quantities
    for resource, value in resources.items():
        if value in good and type(value) is str:
            continue
        try:
            nano = k8s_quantity.nano_value(value)  # type: ignore[arg-type]
        except k8s_quantity.QuantityError:
            return f"{field}.{excerpt(resource)[1:-1]}", f"{excerpt(value)} is not a valid quantity"
        if nano < 0:
            return f"{field}.{excerpt(resource)[1:-1]}", f"must not be negative, got {excerpt(value)}"
        if nano > _MAX_QUANTITY_NANO:
            return (
                f"{field}.{excerpt(resource)[1:-1]}",
                f"{excerpt(value)} is out of range (more than 2^63-1)",
            )
        if type(value) is str:
            good.add(value)
    return None


def _containers_problem(
    field: str, containers: list[Container] | None, state: _State
) -> tuple[str, str] | None:
    for i, c in enumerate(containers or ()):
        r = c.resources
        if r is None:
            continue
        why = _quantities_problem(
            f"{field}[{i}].resources.requests", r.requests, state
        ) or _quantities_problem(f"{field}[{i}].resources.limits", r.limits, state)
        if why is not None:
            return why
    return None


def _pod_spec_problem(spec: PodSpec, state: _State) -> tuple[str, str] | None:
    if not spec.containers:
        return "spec.containers", "required (a pod without spec or without containers is not a pod)"
    # pods of one workload share their container lists (see cluster.compact): check each once
    checked = state.containers
    for field, containers in (
        ("spec.containers", spec.containers),
        ("spec.initContainers", spec.init_containers),
        ("spec.ephemeralContainers", spec.ephemeral_containers),
    ):
        if containers and id(containers) not in checked:
            why = _containers_problem(field, containers, state)
            if why is not None:
                return why
            checked.add(id(containers))
    if spec.overhead:
        why = _quantities_problem("spec.overhead", spec.overhead, state)
        if why is not None:
            return why
    if spec.resources is not None:
        why = _quantities_problem(
            "spec.resources.requests", spec.resources.requests, state
        ) or _quantities_problem("spec.resources.limits", spec.resources.limits, state)
        if why is not None:
            return why
    for i, tsc in enumerate(spec.topology_spread_constraints or ()):
        if tsc.max_skew <= 0:
            return (
                f"spec.topologySpreadConstraints[{i}].maxSkew",
                f"must be greater than 0, got {tsc.max_skew}",
            )
        if tsc.min_domains is not None and tsc.min_domains <= 0:
            return (
                f"spec.topologySpreadConstraints[{i}].minDomains",
                f"must be greater than 0, got {tsc.min_domains}",
            )
        why = _selector_problem(f"spec.topologySpreadConstraints[{i}].labelSelector", tsc.label_selector)
        if why is not None:
            return why
    why = _labels_problem("spec.nodeSelector", spec.node_selector, state)
    if why is not None:
        return why
    affinity = spec.affinity
    if affinity is not None and id(affinity) not in checked:
        why = _pod_affinity_problem(
            "spec.affinity.podAffinity", affinity.pod_affinity
        ) or _pod_affinity_problem("spec.affinity.podAntiAffinity", affinity.pod_anti_affinity)
        if why is not None:
            return why
        checked.add(id(affinity))
    return None


def _node_problem(node: Node, state: _State) -> tuple[str, str] | None:
    status = node.status
    why = _quantities_problem("status.capacity", status.capacity, state) or _quantities_problem(
        "status.allocatable", status.allocatable, state
    )
    if why is not None:
        return why
    for i, taint in enumerate(node.spec.taints or ()):
        if not taint.key:
            return f"spec.taints[{i}].key", "required (a taint with an empty key)"
        key_problem = k8s_labels.validate_label_key(taint.key)
        if key_problem:
            return f"spec.taints[{i}].key", f"{excerpt(taint.key)}: {key_problem}"
        if taint.effect not in _TAINT_EFFECTS:
            return (
                f"spec.taints[{i}].effect",
                f"must be NoSchedule, PreferNoSchedule or NoExecute, got {excerpt(taint.effect)}",
            )
    return None
