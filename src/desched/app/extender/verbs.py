"""The two verbs, filter and prioritize, from request bytes to answer bytes (no I/O)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from desched.app.extender.usage import BoundPods, NodeUsageIndex, Rows, exact
from desched.app.extender.wire import (
    CHUNK,
    DEFAULT_TIMEOUT_BUDGET,
    EMPTY,
    ENCODER,
    FILTER_DECODER,
    NODE_DECODER,
    PRIORITIZE_DECODER,
    STATUS_DECODER,
    BadRequest,
    ExtenderFilterResult,
    HostPriority,
    NodeListOut,
    Reply,
    ScoreMeta,
    WireMeta,
    WireStatus,
)
from desched.k8s import resources as k8s_resources
from desched.k8s.objects import Node, ObjectMeta, Pod
from desched.k8s.resources import PODS, Resources
from desched.scheduling.placement.filters import (
    resource_failures,
    static_failure,
    taint_failure,
    tolerates_cordon,
)
from desched.scheduling.scorer import (
    MAX_EXTENDER_SCORE,
    MAX_NODE_SCORE,
    GenericScorer,
    requesting_of,
)

if TYPE_CHECKING:
    from desched.scheduling.scorer import Floats


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
    facts: _PodFacts, node: Node, alloc: Mapping[str, int], usage: BoundPods | None
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
    used = usage.requested if usage is not None else EMPTY
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
        state: NodeUsageIndex,
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
        self._wire_rows = Rows(scorer.resources)
        state.track(scorer.resources)

    def _allocatable_of(self, meta: WireMeta | ScoreMeta, status: WireStatus | msgspec.Raw) -> Resources:
        rv = meta.resource_version
        hit = self._allocatable.get(meta.name)
        if hit is not None and rv and hit[0] == rv:
            return hit[1]
        if not isinstance(status, WireStatus):
            try:
                status = (len(status) and STATUS_DECODER.decode(status)) or WireStatus()
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise BadRequest(f"not an ExtenderArgs: node {meta.name!r}: status: {e}") from None
        amounts = k8s_resources.resource_list(status.allocatable or status.capacity)
        if len(self._allocatable) > 100_000:
            self._allocatable.clear()
            self._wire_rows = Rows(self.scorer.resources)
        self._allocatable[meta.name] = (rv, amounts)
        self._wire_rows.set(meta.name, amounts)
        return amounts

    # ---------------------------------------------------------------- filter

    def filter(self, body: bytes | memoryview, started: float | None = None) -> Reply:
        deadline = (self.clock() if started is None else started) + self.budget
        try:
            args = FILTER_DECODER.decode(body)
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
            return Reply(ENCODER.encode(result), len(names), over)

        raws = args.nodes.items if args.nodes is not None and args.nodes.items is not None else []
        passed: list[msgspec.Raw] = []
        for start in range(0, len(raws), CHUNK):
            if start and self.clock() > deadline:
                over = True
                passed.extend(raws[start:])
                break
            for i, raw in enumerate(raws[start : start + CHUNK], start):
                try:
                    wire = NODE_DECODER.decode(raw)
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
            nodes=NodeListOut(items=passed), failed_nodes=failed, failed_and_unresolvable_nodes=unresolvable
        )
        return Reply(ENCODER.encode(result), len(raws), over)

    # ---------------------------------------------------------------- prioritize

    def prioritize(self, body: bytes | memoryview, started: float | None = None) -> Reply:
        deadline = (self.clock() if started is None else started) + self.budget
        try:
            args = PRIORITIZE_DECODER.decode(body)
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
        if alloc_rows is not None and used_rows is not None and exact(requesting.values()):
            scores, over = self._scores_arrays(requesting, alloc_rows, used_rows, deadline)
        else:
            usage = state.usage
            used = [u.nonzero if u is not None else EMPTY for u in (usage.get(name) for name in known)]
            scores, over = self._scores_lists(requesting, allocs(), used, deadline)
        if known is names and not over:
            result = [HostPriority(name, score) for name, score in zip(names, scores, strict=True)]
        else:
            by_name = dict(zip(known, scores, strict=False))
            result = [HostPriority(name, by_name.get(name, 0)) for name in names]
        return Reply(ENCODER.encode(result), len(names), over)

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
