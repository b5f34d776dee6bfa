"""The cluster as the extender caches it: every node's allocatable and the running sums of the
requests of the pods bound to it, kept object by object from the watch (or a snapshot file), so
that a request costs a dictionary lookup (or one array indexing) per node, never a pass over pods.

:class:`NodeUsageIndex` is not :class:`desched.scheduling.placement.state.ClusterState` (the
placement model's view of a snapshot): it knows nodes and the sums of their pods' requests only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from desched.k8s import pods as k8s_pods
from desched.k8s import resources as k8s_resources
from desched.k8s.objects import Node, Pod
from desched.k8s.resources import Resources
from desched.scheduling.scorer import EXACT_IN_FLOAT, requesting_of

if TYPE_CHECKING:
    from desched.scheduling.scorer import Floats


class BoundPods:
    """The pods bound to a node: their non-zero requests (with ``pods``), their plain requests."""

    __slots__ = ("nonzero", "pods", "requested")

    def __init__(self) -> None:
        self.nonzero: Resources = {}
        self.requested: Resources = {}
        self.pods = 0


class _NodeEntry:
    __slots__ = ("allocatable", "node")

    def __init__(self, node: Node) -> None:
        self.node = node
        self.allocatable: Resources = k8s_resources.node_allocatable(node)


class Rows:
    """Amounts by name as rows of one float64 array (a column per resource in :attr:`resources`),
    kept up to date object by object so that a request takes its nodes' rows with one numpy
    indexing (:meth:`take`) instead of a dictionary lookup per node and resource.

    Row 0 stays all zeros: a name without a row reads as nothing. A name whose amounts are not
    exact in float64 (beyond :data:`EXACT_IN_FLOAT`) is remembered in :attr:`inexact`; its callers
    then score with the scorer's lists (exact integers).
    """

    __slots__ = ("array", "free", "inexact", "resources", "slots")

    def __init__(self, resources: tuple[str, ...]) -> None:
        self.resources = resources
        self.slots: dict[str, int] = {}
        self.free: list[int] = []
        self.inexact: set[str] = set()
        self.array: Floats = np.zeros((64, len(resources)))

    def set(self, name: str, amounts: Mapping[str, int]) -> None:
        slot = self.slots.get(name)
        if slot is None:
            slot = self.free.pop() if self.free else len(self.slots) + 1
            if slot >= len(self.array):
                grown = np.zeros((2 * len(self.array), len(self.resources)))
                grown[: len(self.array)] = self.array
                self.array = grown
            self.slots[name] = slot
        row = [amounts.get(r, 0) for r in self.resources]
        if exact(row):
            self.array[slot] = row
            self.inexact.discard(name)
        else:
            self.array[slot] = 0.0
            self.inexact.add(name)

    def drop(self, name: str) -> None:
        slot = self.slots.pop(name, None)
        if slot is not None:
            self.array[slot] = 0.0
            self.free.append(slot)
            self.inexact.discard(name)

    def take(self, names: list[str]) -> Floats | None:
        """The rows of ``names`` in order (zeros for a name without one); None when one of them
        is not exact in float64."""
        if self.inexact and not self.inexact.isdisjoint(names):
            return None
        slots = self.slots
        index = np.fromiter([slots.get(name, 0) for name in names], np.intp, len(names))
        rows: Floats = self.array[index]
        return rows


def exact(values: Iterable[int]) -> bool:
    return all(-EXACT_IN_FLOAT <= v <= EXACT_IN_FLOAT for v in values)


def _occupies(pod: Pod) -> bool:
    return bool(pod.spec.node_name) and k8s_pods.occupies_node(pod)


class NodeUsageIndex:
    """Nodes by name and the running pod usage of each node, fed object by object
    (:meth:`on_change` is a :class:`~desched.cluster.live_source.LiveCache` callback)."""

    def __init__(self) -> None:
        self.nodes: dict[str, _NodeEntry] = {}
        self.usage: dict[str, BoundPods] = {}
        #: pod key -> (node, non-zero requests, requests) it is counted with
        self._pods: dict[str, tuple[str, Resources, Resources]] = {}
        # equal amounts are shared (the replicas of a workload ask alike): ~5x less memory per pod
        self._amounts: dict[tuple[tuple[str, int], ...], Resources] = {}
        #: allocatable and non-zero usage of the nodes, as rows of arrays (see :meth:`track`)
        self.alloc_rows: Rows | None = None
        self.used_rows: Rows | None = None

    @classmethod
    def from_objects(cls, nodes: Iterable[Node], pods: Iterable[Pod]) -> NodeUsageIndex:
        state = cls()
        for node in nodes:
            state.set_node(node)
        for pod in pods:
            state.set_pod(pod)
        return state

    @property
    def pod_count(self) -> int:
        return len(self._pods)

    def track(self, resources: tuple[str, ...]) -> None:
        """Keep :attr:`alloc_rows` and :attr:`used_rows` for these resources from now on."""
        if self.alloc_rows is not None and self.alloc_rows.resources == resources:
            return
        self.alloc_rows = Rows(resources)
        self.used_rows = Rows(resources)
        for name, entry in self.nodes.items():
            self.alloc_rows.set(name, entry.allocatable)
        for name, usage in self.usage.items():
            self.used_rows.set(name, usage.nonzero)

    def set_node(self, node: Node) -> None:
        entry = self.nodes[node.metadata.name] = _NodeEntry(node)
        if self.alloc_rows is not None:
            self.alloc_rows.set(node.metadata.name, entry.allocatable)

    def delete_node(self, name: str) -> None:
        self.nodes.pop(name, None)
        if self.alloc_rows is not None:
            self.alloc_rows.drop(name)

    def set_pod(self, pod: Pod) -> None:
        key = pod.key
        self.delete_pod(key)
        if not _occupies(pod):
            return
        node = pod.spec.node_name
        nonzero = self._shared(requesting_of(pod))
        requested = self._shared(k8s_resources.pod_requests(pod))
        usage = self.usage.get(node)
        if usage is None:
            usage = self.usage[node] = BoundPods()
        _accumulate(usage.nonzero, nonzero, 1)
        _accumulate(usage.requested, requested, 1)
        usage.pods += 1
        self._pods[key] = (node, nonzero, requested)
        if self.used_rows is not None:
            self.used_rows.set(node, usage.nonzero)

    def _shared(self, amounts: Resources) -> Resources:
        key = tuple(sorted(amounts.items()))
        hit = self._amounts.get(key)
        if hit is None:
            if len(self._amounts) > 100_000:
                self._amounts.clear()  # pods keep theirs; only future sharing restarts
            self._amounts[key] = hit = amounts
        return hit

    def delete_pod(self, key: str) -> None:
        counted = self._pods.pop(key, None)
        if counted is None:
            return
        node, nonzero, requested = counted
        usage = self.usage[node]
        _accumulate(usage.nonzero, nonzero, -1)
        _accumulate(usage.requested, requested, -1)
        usage.pods -= 1
        if usage.pods == 0:
            del self.usage[node]
            if self.used_rows is not None:
                self.used_rows.drop(node)
        elif self.used_rows is not None:
            self.used_rows.set(node, usage.nonzero)

    def on_change(self, kind: str, event: str, old: Any, new: Any) -> None:
        """(kind, ADDED/MODIFIED/DELETED, old object or None, new object or None)."""
        if kind == "Pod":
            if new is None:
                if old is not None:
                    self.delete_pod(old.key)
            else:
                self.set_pod(new)
        elif kind == "Node":
            if new is None:
                if old is not None:
                    self.delete_node(old.metadata.name)
            else:
                self.set_node(new)


def _accumulate(into: Resources, amounts: Mapping[str, int], sign: int) -> None:
    for name, value in amounts.items():
        into[name] = into.get(name, 0) + sign * value
