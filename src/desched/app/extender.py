"""``desched extender``: a kube-scheduler HTTP extender scoring nodes with the generic
node-resources scorer (:mod:`desched.scheduling.scorer`).

The protocol is ``k8s.io/kube-scheduler/extender/v1``: kube-scheduler POSTs an ``ExtenderArgs``
(``{"Pod": <v1.Pod>, "Nodes": <v1.NodeList>|null, "NodeNames": [..]|null}``; the Go structs have
no json tags, hence the capitalised keys) to ``<urlPrefix>/<verb>``:

- ``filter`` answers an ``ExtenderFilterResult`` (``Nodes``, ``NodeNames``, ``FailedNodes``,
  ``FailedAndUnresolvableNodes``, ``Error``): the nodes the pod fits, as kube-scheduler's own
  filters judge it (node unschedulable, node selector and required node affinity, NoSchedule and
  NoExecute taints, resource requests and pod count). The pod is *not* on any node yet, so its
  requests are checked against what is left on every node. A node failing a static check goes
  to ``FailedAndUnresolvableNodes`` (preemption would not help), a node short of resources to
  ``FailedNodes``.
- ``prioritize`` answers a ``HostPriorityList`` (``[{"Host": .., "Score": 0..10}]``); kube-scheduler
  adds ``Score * weight * 10`` to its own 0..100 scores.

The verb is the last path segment (``filter``/``predicates``, ``prioritize``/``priorities``), so
any ``urlPrefix`` works. ``GET /healthz`` (also ``/livez``), ``/readyz`` (200 once the cache has
synced) and ``/metrics`` (Prometheus) are served on the same port.

Where the nodes come from: with ``nodeCacheCapable: false`` kube-scheduler sends the full Node
objects and the filter answer carries the passing ones back (byte for byte); with ``true`` it
sends names only, and the extender takes the nodes from its own cache. Either way the *pods* on
each node come from the extender's cache: a :class:`desched.cluster.live_source.LiveCache` of Nodes
and Pods (or a snapshot file, for offline use) feeding :class:`ClusterState`, which keeps every
node's allocatable and the running sums of its pods' requests, so a request costs a dictionary
lookup per node, never a pass over pods; for prioritize the same amounts of the scorer's resources
are kept as rows of numpy arrays, so a request costs one array indexing and the scorer runs on
columns (``GenericScorer.score_arrays``, the same floats as its lists). A pod counts on its node
from the moment the cache sees it bound until it finishes (Succeeded, Failed) or is deleted.
kube-scheduler's *assumed* pods (bound a moment ago, not yet seen through the watch) are not
known to the extender: between pods scheduled in quick succession the extender may lag by a few
milliseconds of watch latency.

A node kube-scheduler names but the cache has not seen yet passes the filter (kube-scheduler's
own filters have already checked it) and scores 0.

Time budget: kube-scheduler gives an extender ``httpTimeout`` (default 5 s); a filter call that
times out fails the pod's scheduling attempt. The extender checks its budget (``--timeout-budget``,
default 4 s, counted from the request's arrival) between chunks of nodes: over budget, the nodes
not yet looked at pass the filter, and score 0 in prioritize, and the answer goes out at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import msgspec
import numpy as np
from aiohttp import web
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
)

from desched.errors import UserError
from desched.k8s import pods as k8s_pods
from desched.k8s import resources as k8s_resources
from desched.k8s.objects import Node, NodeSpec, ObjectMeta, Pod, ResourceList
from desched.k8s.resources import PODS, Resources
from desched.kube import loop as kube_loop
from desched.runtime.server import HttpServer
from desched.runtime.signals import stop_on_signals
from desched.runtime.tls import server_context
from desched.scheduling.placement.filters import (
    resource_failures,
    static_failure,
    taint_failure,
    tolerates_cordon,
)
from desched.scheduling.scorer import (
    EXACT_IN_FLOAT,
    MAX_EXTENDER_SCORE,
    MAX_NODE_SCORE,
    GenericScorer,
    GenericScorerArgs,
    requesting_of,
)

if TYPE_CHECKING:
    from desched.scheduling.scorer import Floats

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_TIMEOUT_BUDGET",
    "BadRequest",
    "ClusterState",
    "Extender",
    "ExtenderArgs",
    "ExtenderFilterResult",
    "ExtenderMetrics",
    "ExtenderOptions",
    "ExtenderServer",
    "HostPriority",
    "Reply",
    "run_extender",
]

log = logging.getLogger(__name__)

DEFAULT_PORT: Final = 8888
DEFAULT_TIMEOUT_BUDGET: Final = 4.0
#: Nodes handled between two looks at the clock.
CHUNK: Final = 256
#: The largest request body accepted (a NodeList of thousands of nodes with images is big).
MAX_BODY: Final = 512 * 1024 * 1024
#: Request buffers kept between requests (kube-scheduler sends one request at a time; a request
#: read while the buffer is in use gets a buffer of its own, dropped after unless the pool has room).
POOLED_BUFFERS: Final = 1

FILTER: Final = "filter"
PRIORITIZE: Final = "prioritize"
#: Path segment -> verb. ``predicates``/``priorities`` are the names older examples use.
VERBS: Final[Mapping[str, str]] = {
    "filter": FILTER,
    "predicates": FILTER,
    "prioritize": PRIORITIZE,
    "priorities": PRIORITIZE,
}

_EMPTY: Final[Mapping[str, int]] = {}


# --------------------------------------------------------------------------- the wire


class _NodeListIn(msgspec.Struct):
    items: list[msgspec.Raw] | None = None


class ExtenderArgs(msgspec.Struct, rename="pascal"):
    """``extenderv1.ExtenderArgs``; node items stay raw so that filter can return them as sent."""

    pod: Pod | None = None
    nodes: _NodeListIn | None = None
    node_names: list[str] | None = None


# What the verbs read of a Node sent in full: decoding only these fields (not conditions,
# images, annotations, managedFields) is most of the cost of a request with 1,000 nodes.
class _WireMeta(msgspec.Struct, rename="camel"):
    name: str = ""
    resource_version: str = ""
    labels: dict[str, str] | None = None


class _WireStatus(msgspec.Struct):
    allocatable: ResourceList | None = None
    capacity: ResourceList | None = None


class _WireNode(msgspec.Struct):
    metadata: _WireMeta = msgspec.field(default_factory=_WireMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: _WireStatus = msgspec.field(default_factory=_WireStatus)


class _ScoreMeta(msgspec.Struct, rename="camel", gc=False):
    name: str = ""
    resource_version: str = ""


class _ScoreNode(msgspec.Struct, gc=False):  # strings and Raw only: no cycles to collect
    metadata: _ScoreMeta = msgspec.field(default_factory=_ScoreMeta)
    # decoded (allocatable) only when the node's resourceVersion is not cached: parsing the
    # quantities of 1,000 nodes was a third of a prioritize call
    status: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class _ScoreNodeList(msgspec.Struct):
    items: list[_ScoreNode] | None = None


class _PrioritizeArgs(msgspec.Struct, rename="pascal"):
    """ExtenderArgs as prioritize reads it: one pass, and only names and allocatable of nodes."""

    pod: Pod | None = None
    nodes: _ScoreNodeList | None = None
    node_names: list[str] | None = None


class _NodeListOut(msgspec.Struct, rename="camel"):
    items: list[msgspec.Raw]
    api_version: str = "v1"
    kind: str = "NodeList"
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class ExtenderFilterResult(msgspec.Struct, rename="pascal"):
    """``extenderv1.ExtenderFilterResult``."""

    nodes: _NodeListOut | None = None
    node_names: list[str] | None = None
    failed_nodes: dict[str, str] = msgspec.field(default_factory=dict)
    failed_and_unresolvable_nodes: dict[str, str] = msgspec.field(default_factory=dict)
    error: str = ""


class HostPriority(msgspec.Struct, rename="pascal", gc=False):  # a str and an int: no cycles
    """``extenderv1.HostPriority``: Score is 0..10."""

    host: str
    score: int


_filter_decoder = msgspec.json.Decoder(ExtenderArgs)
_prioritize_decoder = msgspec.json.Decoder(_PrioritizeArgs)
_node_decoder = msgspec.json.Decoder(_WireNode)
_status_decoder = msgspec.json.Decoder(_WireStatus | None)
_encoder = msgspec.json.Encoder()


class BadRequest(Exception):
    """The request body is not an ExtenderArgs."""


@dataclass(frozen=True)
class Reply:
    body: bytes
    nodes: int
    over_budget: bool


# --------------------------------------------------------------------------- the cluster, as cached


class _Usage:
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


class _Rows:
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
        if _exact(row):
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


def _exact(values: Iterable[int]) -> bool:
    return all(-EXACT_IN_FLOAT <= v <= EXACT_IN_FLOAT for v in values)


def _occupies(pod: Pod) -> bool:
    return bool(pod.spec.node_name) and k8s_pods.occupies_node(pod)


class ClusterState:
    """Nodes by name and the running pod usage of each node, fed object by object
    (:meth:`on_change` is a :class:`~desched.cluster.live_source.LiveCache` callback)."""

    def __init__(self) -> None:
        self.nodes: dict[str, _NodeEntry] = {}
        self.usage: dict[str, _Usage] = {}
        #: pod key -> (node, non-zero requests, requests) it is counted with
        self._pods: dict[str, tuple[str, Resources, Resources]] = {}
        # equal amounts are shared (the replicas of a workload ask alike): ~5x less memory per pod
        self._amounts: dict[tuple[tuple[str, int], ...], Resources] = {}
        #: allocatable and non-zero usage of the nodes, as rows of arrays (see :meth:`track`)
        self.alloc_rows: _Rows | None = None
        self.used_rows: _Rows | None = None

    @classmethod
    def from_objects(cls, nodes: Iterable[Node], pods: Iterable[Pod]) -> ClusterState:
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
        self.alloc_rows = _Rows(resources)
        self.used_rows = _Rows(resources)
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
            usage = self.usage[node] = _Usage()
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


# --------------------------------------------------------------------------- the verbs


class _PodFacts:
    __slots__ = ("pod", "requesting", "requests", "tolerates_unschedulable")

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        self.requesting = requesting_of(pod)
        self.requests: list[tuple[str, int]] = [
            (name, value) for name, value in sorted(k8s_resources.pod_requests(pod).items()) if value > 0
        ]
        self.tolerates_unschedulable = tolerates_cordon(pod.spec.tolerations)


def _fit_failure(
    facts: _PodFacts, node: Node, alloc: Mapping[str, int], usage: _Usage | None
) -> tuple[str, bool] | None:
    """Why the pod does not fit the node, in kube-scheduler's words (its filters, shared with the
    placement simulator), and whether preemption could not help; None: it fits."""
    pod = facts.pod
    why = static_failure(
        pod,
        node,
        cordon_tolerated=facts.tolerates_unschedulable,
        untolerated=taint_failure(node.spec.taints, pod.spec.tolerations),
    )
    if why:
        return why, True
    used = usage.requested if usage is not None else _EMPTY
    free_pods = alloc.get(PODS, 0) - (usage.pods if usage is not None else 0)
    short = resource_failures(free_pods, facts.requests, lambda n: alloc.get(n, 0) - used.get(n, 0))
    if short:
        return ", ".join(short), False
    return None


class Extender:
    """The two verbs, from request bytes to answer bytes (no I/O: the HTTP layer is apart)."""

    def __init__(
        self,
        scorer: GenericScorer,
        state: ClusterState,
        *,
        budget: float = DEFAULT_TIMEOUT_BUDGET,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.scorer = scorer
        self.state = state
        self.budget = budget
        self.clock = clock
        # allocatable of nodes sent in full, by name: (resourceVersion, amounts), and as rows
        self._allocatable: dict[str, tuple[str, Resources]] = {}
        self._wire_rows = _Rows(scorer.resources)
        state.track(scorer.resources)

    def _allocatable_of(self, meta: _WireMeta | _ScoreMeta, status: _WireStatus | msgspec.Raw) -> Resources:
        rv = meta.resource_version
        hit = self._allocatable.get(meta.name)
        if hit is not None and rv and hit[0] == rv:
            return hit[1]
        if not isinstance(status, _WireStatus):
            try:
                status = (len(status) and _status_decoder.decode(status)) or _WireStatus()
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise BadRequest(f"not an ExtenderArgs: node {meta.name!r}: status: {e}") from None
        amounts = k8s_resources.resource_list(status.allocatable or status.capacity)
        if len(self._allocatable) > 100_000:
            self._allocatable.clear()
            self._wire_rows = _Rows(self.scorer.resources)
        self._allocatable[meta.name] = (rv, amounts)
        self._wire_rows.set(meta.name, amounts)
        return amounts

    # ---------------------------------------------------------------- filter

    def filter(self, body: bytes | memoryview, started: float | None = None) -> Reply:
        deadline = (self.clock() if started is None else started) + self.budget
        try:
            args = _filter_decoder.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise BadRequest(f"not an ExtenderArgs: {e}") from None
        if args.pod is None:
            raise BadRequest("not an ExtenderArgs: Pod is missing")
        facts = _PodFacts(args.pod)
        usage = self.state.usage
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
        over = False

        if args.node_names is not None:
            names = args.node_names
            nodes = self.state.nodes
            passed_names: list[str] = []
            for start in range(0, len(names), CHUNK):
                if start and self.clock() > deadline:
                    over = True
                    passed_names.extend(names[start:])  # not looked at; kube-scheduler's filters have been
                    break
                for name in names[start : start + CHUNK]:
                    entry = nodes.get(name)
                    why = (
                        None
                        if entry is None
                        else _fit_failure(facts, entry.node, entry.allocatable, usage.get(name))
                    )
                    if why is None:
                        passed_names.append(name)
                    elif why[1]:
                        unresolvable[name] = why[0]
                    else:
                        failed[name] = why[0]
            result = ExtenderFilterResult(
                node_names=passed_names, failed_nodes=failed, failed_and_unresolvable_nodes=unresolvable
            )
            return Reply(_encoder.encode(result), len(names), over)

        raws = args.nodes.items if args.nodes is not None and args.nodes.items is not None else []
        passed: list[msgspec.Raw] = []
        for start in range(0, len(raws), CHUNK):
            if start and self.clock() > deadline:
                over = True
                passed.extend(raws[start:])
                break
            for i, raw in enumerate(raws[start : start + CHUNK], start):
                try:
                    wire = _node_decoder.decode(raw)
                except (msgspec.DecodeError, msgspec.ValidationError) as e:
                    raise BadRequest(f"not an ExtenderArgs: Nodes.items[{i}]: {e}") from None
                meta = wire.metadata
                node = Node(
                    metadata=ObjectMeta(
                        name=meta.name, resource_version=meta.resource_version, labels=meta.labels
                    ),
                    spec=wire.spec,
                )
                why = _fit_failure(facts, node, self._allocatable_of(meta, wire.status), usage.get(meta.name))
                if why is None:
                    passed.append(raw)
                elif why[1]:
                    unresolvable[meta.name] = why[0]
                else:
                    failed[meta.name] = why[0]
        result = ExtenderFilterResult(
            nodes=_NodeListOut(items=passed), failed_nodes=failed, failed_and_unresolvable_nodes=unresolvable
        )
        return Reply(_encoder.encode(result), len(raws), over)

    # ---------------------------------------------------------------- prioritize

    def prioritize(self, body: bytes | memoryview, started: float | None = None) -> Reply:
        deadline = (self.clock() if started is None else started) + self.budget
        try:
            args = _prioritize_decoder.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            raise BadRequest(f"not an ExtenderArgs: {e}") from None
        if args.pod is None:
            raise BadRequest("not an ExtenderArgs: Pod is missing")
        requesting = requesting_of(args.pod)
        state = self.state
        # the candidates in request order; those the extender knows, with their amounts (as
        # dictionaries on demand, for the scorer's lists; as rows of arrays, for numpy)
        names: list[str]
        known: list[str]
        allocs: Callable[[], list[Mapping[str, int]]]
        alloc_rows: Floats | None
        if args.node_names is not None:
            names = args.node_names
            nodes = state.nodes
            entries = [nodes.get(name) for name in names]
            known = (
                names
                if None not in entries
                else [n for n, e in zip(names, entries, strict=True) if e is not None]
            )

            def allocs() -> list[Mapping[str, int]]:
                return [e.allocatable for e in entries if e is not None]

            assert state.alloc_rows is not None
            alloc_rows = state.alloc_rows.take(known)
        else:
            items = args.nodes.items if args.nodes is not None and args.nodes.items is not None else []
            names = known = [n.metadata.name for n in items]
            cache = self._allocatable
            # status is decoded only for a node whose resourceVersion is new (or not set)
            for n in [
                n
                for n in items
                if (hit := cache.get(n.metadata.name)) is None
                or hit[0] != n.metadata.resource_version
                or not hit[0]
            ]:
                self._allocatable_of(n.metadata, n.status)

            def allocs() -> list[Mapping[str, int]]:
                return [self._allocatable_of(n.metadata, n.status) for n in items]

            alloc_rows = self._wire_rows.take(known)
        assert state.used_rows is not None
        used_rows = state.used_rows.take(known) if alloc_rows is not None else None
        if alloc_rows is not None and used_rows is not None and _exact(requesting.values()):
            scores, over = self._scores_arrays(requesting, alloc_rows, used_rows, deadline)
        else:
            usage = state.usage
            used = [u.nonzero if u is not None else _EMPTY for u in (usage.get(name) for name in known)]
            scores, over = self._scores_lists(requesting, allocs(), used, deadline)
        if known is names and not over:
            result = [HostPriority(name, score) for name, score in zip(names, scores, strict=True)]
        else:
            by_name = dict(zip(known, scores, strict=False))
            result = [HostPriority(name, by_name.get(name, 0)) for name in names]
        return Reply(_encoder.encode(result), len(names), over)

    def _scores_arrays(
        self, requesting: Mapping[str, int], alloc_rows: Floats, used_rows: Floats, deadline: float
    ) -> tuple[list[int], bool]:
        """The 0..10 scores of the nodes (as many as the budget allows, in order) and whether the
        budget ran out, with numpy (the same floats as the scorer's lists:
        :meth:`GenericScorer.score_arrays`)."""
        scorer = self.scorer
        resources = scorer.resources
        alloc = np.ascontiguousarray(alloc_rows.T)
        used = np.ascontiguousarray(used_rows.T)
        chunks: list[Floats] = []
        over = False
        for start in range(0, len(alloc_rows), CHUNK):
            if start and self.clock() > deadline:
                over = True
                break
            end = start + CHUNK
            chunks.append(
                scorer.score_arrays(
                    requesting,
                    {r: alloc[k, start:end] for k, r in enumerate(resources)},
                    {r: used[k, start:end] for k, r in enumerate(resources)},
                )
            )
        normalized = scorer.normalize_array(np.concatenate(chunks) if chunks else np.zeros(0))
        step = MAX_NODE_SCORE / MAX_EXTENDER_SCORE
        # scores are in 0..100: floor is int() here, as in the lists' version
        scores: list[int] = np.floor(normalized / step + 0.5).astype(np.int64).tolist()
        return scores, over

    def _scores_lists(
        self,
        requesting: Mapping[str, int],
        allocs: list[Mapping[str, int]],
        used: list[Mapping[str, int]],
        deadline: float,
    ) -> tuple[list[int], bool]:
        """As :meth:`_scores_arrays`, with the scorer's lists (exact for any integer amounts)."""
        scorer = self.scorer
        raw: list[float] = []
        over = False
        for start in range(0, len(allocs), CHUNK):
            if start and self.clock() > deadline:
                over = True
                break
            end = start + CHUNK
            raw.extend(scorer.score_nodes(requesting, allocs[start:end], used[start:end]))
        step = MAX_NODE_SCORE / MAX_EXTENDER_SCORE
        return [int(s / step + 0.5) for s in scorer.normalize(raw)], over


# --------------------------------------------------------------------------- metrics


class ExtenderMetrics:
    LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
    NODE_BUCKETS = (1, 5, 10, 50, 100, 250, 500, 1000, 2500, 5000, 10000)

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "desched_extender_requests",
            "Extender requests served, by verb and HTTP status code",
            ["verb", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "desched_extender_request_duration_seconds",
            "Time from a request's arrival to its answer, by verb",
            ["verb"],
            buckets=self.LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.nodes = Histogram(
            "desched_extender_request_nodes",
            "Candidate nodes per request, by verb",
            ["verb"],
            buckets=self.NODE_BUCKETS,
            registry=self.registry,
        )
        self.over_budget = Counter(
            "desched_extender_over_budget",
            "Requests answered early because the time budget ran out, by verb",
            ["verb"],
            registry=self.registry,
        )
        self.cache_objects = Gauge(
            "desched_extender_cache_objects",
            "Objects in the extender's cache, by kind",
            ["kind"],
            registry=self.registry,
        )

    def watch_state(self, state: ClusterState) -> None:
        self.cache_objects.labels("Node").set_function(lambda: len(state.nodes))
        self.cache_objects.labels("Pod").set_function(lambda: state.pod_count)


# --------------------------------------------------------------------------- HTTP


class ExtenderServer(HttpServer):
    """The extender's HTTP(S) endpoint: the verbs, beside the health and metrics endpoints every
    command serves (:class:`desched.runtime.server.HttpServer`, on the running event loop)."""

    def __init__(
        self,
        extender: Extender,
        *,
        host: str = "0.0.0.0",
        port: int = DEFAULT_PORT,
        ssl_context: ssl.SSLContext | None = None,
        metrics: ExtenderMetrics | None = None,
        ready: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.extender = extender
        self.metrics = metrics or ExtenderMetrics()
        self.clock = clock
        self.max_body = MAX_BODY
        #: request buffers kept for the next requests (see :meth:`_read_body`)
        self._buffers: list[bytearray] = []
        super().__init__(
            host,
            port,
            registry=self.metrics.registry,
            ready=ready,
            ssl_context=ssl_context,
            not_ready="not ready: the node and pod cache has not synced yet",
            max_body=MAX_BODY,
        )
        self.app.router.add_post("/{path:.*}", self._verb)

    async def start(self) -> None:
        try:
            await super().start()
        except OSError as e:
            where = f"{self.host}:{self.port}"
            raise UserError("--port", f"cannot listen on {where}: {e.strerror or e}") from None

    async def _verb(self, request: web.Request) -> web.Response:
        started = self.clock()
        segment = request.match_info["path"].rstrip("/").rsplit("/", 1)[-1]
        verb = VERBS.get(segment)
        if verb is None:
            return web.Response(status=404, text=f"unknown verb {segment!r}: use filter or prioritize")
        code = 200
        reply: Reply | None = None
        body: memoryview | None = None
        try:
            if not self.ready():
                code = 503
                return web.Response(status=code, text="not ready: the node and pod cache has not synced yet")
            body = await self._read_body(request)
            if body is None:
                code = 413
                return web.Response(status=code, text=f"request body over {self.max_body} bytes")
            try:
                if verb == FILTER:
                    reply = self.extender.filter(body, started)
                else:
                    reply = self.extender.prioritize(body, started)
            except BadRequest as e:
                code = 400
                return web.Response(status=code, text=str(e))
            except Exception:
                log.exception("%s failed", verb)
                code = 500
                return web.Response(status=code, text=f"{verb} failed; see the extender's log")
            return web.Response(body=reply.body, content_type="application/json")
        finally:
            m = self.metrics
            m.requests.labels(verb, str(code)).inc()
            m.latency.labels(verb).observe(self.clock() - started)
            if reply is not None:
                m.nodes.labels(verb).observe(reply.nodes)
                if reply.over_budget:
                    m.over_budget.labels(verb).inc()
                    log.warning("%s over its %.3gs budget: answered early", verb, self.extender.budget)
            if body is not None:
                self._release(body)

    async def _read_body(self, request: web.Request) -> memoryview | None:
        """The request body in a buffer of the pool (None: over :attr:`max_body`).

        Not ``request.read()``: that grows a fresh bytearray chunk by chunk and copies it into a
        fresh ``bytes``, which for a 7.7 MB NodeList cost more CPU than decoding it (a new 8 MB
        allocation is mapped and page-faulted on every request). A buffer kept from one request to
        the next is written once per chunk; the verbs decode straight from it.
        """
        length = request.content_length
        if length is not None and length > self.max_body:
            return None
        buf = self._buffers.pop() if self._buffers else bytearray()
        if length is not None and len(buf) < length:
            buf = bytearray(length)  # never resized in place: a decoded Raw may still point into the old one
        view = memoryview(buf)
        size = 0
        content = request.content
        while True:
            chunk = await content.readany()
            if not chunk:
                break
            end = size + len(chunk)
            if end > self.max_body:
                return None
            if end > len(buf):
                grown = bytearray(max(end, 2 * len(buf)))
                grown[:size] = view[:size]
                buf, view = grown, memoryview(grown)
            view[size:end] = chunk
            size = end
        return view[:size]

    def _release(self, body: memoryview) -> None:
        """Give a body's buffer back to the pool (at most :data:`POOLED_BUFFERS` are kept)."""
        buf = body.obj
        if isinstance(buf, bytearray) and len(self._buffers) < POOLED_BUFFERS:
            self._buffers.append(buf)


# --------------------------------------------------------------------------- the command


@dataclass(frozen=True)
class ExtenderOptions:
    args: GenericScorerArgs
    host: str = "0.0.0.0"
    port: int = DEFAULT_PORT
    kubeconfig: str | None = None
    context: str | None = None
    snapshot: str | None = None
    tls: tuple[str, str] | None = None
    budget: float = DEFAULT_TIMEOUT_BUDGET
    connect_timeout: float = 30.0


def run_extender(options: ExtenderOptions) -> int:
    """Serve until SIGTERM or SIGINT."""
    return kube_loop.run(_serve(options))


async def _serve(options: ExtenderOptions) -> int:
    scorer = GenericScorer(options.args)
    metrics = ExtenderMetrics()
    cache: Any = None
    api: Any = None
    monitor: Any = None
    refresher: asyncio.Task[None] | None = None
    stop, signals = stop_on_signals()
    if options.snapshot:
        from desched.cluster.file_source import load_snapshot_file

        snap = load_snapshot_file(options.snapshot)
        state = ClusterState.from_objects(snap.nodes, snap.pods)

        def ready() -> bool:
            return True
    else:
        from desched.cluster.live_source import LiveCache
        from desched.kube.client import api_client
        from desched.kube.connect import ConnectionMonitor, keep_credentials_fresh, load_config_bounded

        cfg, source = await load_config_bounded(
            options.kubeconfig, options.context, options.connect_timeout, stop, signals
        )
        monitor = ConnectionMonitor(source, bound=options.connect_timeout)
        # an exec credential plugin's token is replaced before it expires, for as long as we serve
        refresher = asyncio.create_task(keep_credentials_fresh(source, options.connect_timeout, stop))
        api = api_client(cfg)
        state = ClusterState()
        cache = LiveCache(api, ("Node", "Pod"), on_change=state.on_change, monitor=monitor)

        def ready() -> bool:
            return all(inf.synced.is_set() for inf in cache.informers.values())

    metrics.watch_state(state)
    extender = Extender(scorer, state, budget=options.budget)
    ctx = server_context(*options.tls) if options.tls else None
    server = ExtenderServer(
        extender, host=options.host, port=options.port, ssl_context=ctx, metrics=metrics, ready=ready
    )
    try:
        await server.start()
        scheme = "https" if ctx else "http"
        print(f"desched extender serving {scheme}://{options.host}:{server.port} ({scorer})", file=sys.stderr)
        if cache is not None:
            from desched.kube.connect import discover

            async def connect() -> None:
                await discover(api, monitor, need_eviction=False)
                cache.start()
                await cache.wait_synced()

            await monitor.start(connect(), stop, signals)
            print(f"cache synced: {len(state.nodes)} nodes, {state.pod_count} pods on them", file=sys.stderr)
        await stop.wait()
    finally:
        await server.stop()
        if refresher is not None:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
        if cache is not None:
            await cache.stop()
        if api is not None:
            await api.close()
    return 0
