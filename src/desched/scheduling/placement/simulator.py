"""The placement simulator: kube-scheduler's scheduling cycle for one pod at a time (PreFilter,
the search for feasible nodes, the filters' reasons when none is, then the scores of
:class:`~desched.scheduling.placement.scores.NodeScorer`) over a
:class:`~desched.scheduling.placement.state.ClusterState` and the nodes' requests, kept up to date
as pods are bound."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import compress, filterfalse, repeat
from typing import Final

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s import resources as k8s_resources
from desched.k8s.objects import Node, Pod, PodAffinityTerm
from desched.k8s.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources
from desched.k8s.topologyspread import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY
from desched.scheduling.placement.filters import (
    R_AFFINITY,
    R_ANTI_AFFINITY,
    R_EXISTING_ANTI,
    R_SPREAD,
    R_SPREAD_LABEL,
    fit_error_message,
    resource_failures,
)
from desched.scheduling.placement.options import PlacementOptions
from desched.scheduling.placement.order import num_feasible_nodes_to_find
from desched.scheduling.placement.scores import (
    NodeScorer,
    ScorePlan,
)
from desched.scheduling.placement.shapes import (
    digest,
    encode,
    missing_cpu_or_memory,
    non_zero_cpu_memory,
)
from desched.scheduling.placement.state import BIG, ClusterState, Matcher, SpreadConstraint, TermIndex


class _AntiGroup:
    """Existing pods' required anti-affinity terms that are alike, and where those pods sit: the
    domains (``values``: pods per value of the topology key) and the nodes in them."""

    __slots__ = ("key", "match", "nodes", "nodes_of", "values")

    def __init__(self, key: str, match: Matcher, nodes_of: Mapping[str, list[int]]) -> None:
        self.key = key
        self.match = match
        self.nodes_of = nodes_of
        self.values: Counter[str] = Counter()
        self.nodes: set[int] = set()

    def add(self, value: str) -> None:
        if not self.values[value]:
            self.nodes.update(self.nodes_of.get(value, ()))
        self.values[value] += 1

    def remove(self, value: str) -> None:
        self.values[value] -= 1
        if not self.values[value]:
            del self.values[value]
            self.nodes.difference_update(self.nodes_of.get(value, ()))


@dataclass(frozen=True, slots=True)
class Decision:
    """Where kube-scheduler would bind one pod, or why it would stay Pending."""

    #: The node, "" when no node is feasible.
    node: str
    #: kube-scheduler's FitError message when pending.
    reason: str = ""
    #: The winning node's total score (the weighted sum of the plugins' 0..100 scores).
    score: int | None = None
    #: Feasible nodes found (and scored).
    feasible: int = 0


#: A request of 0 always fits, even on an overcommitted node: compare against this instead.
_NO_REQUEST: Final = -BIG
#: Resources NodeResourcesFit checks by name; every other requested resource is a "scalar" one.
_BASIC_RESOURCES: Final = frozenset((CPU, MEMORY, EPHEMERAL_STORAGE, PODS))
#: Pods placed between two progress reports.
#: Below this many nodes, a set of them is built rather than a check per node searched.
_SMALL_SET: Final = 256
#: Request classes whose lists of fitting nodes are kept.
_FIT_CLASSES: Final = 1024


class _FitClass:
    """A request class's fitting nodes (ascending), its cpu, memory and ephemeral-storage
    requests (``_NO_REQUEST`` for none) and its extended-resource requests."""

    __slots__ = ("nodes", "requests", "scalar")

    def __init__(
        self, nodes: list[int], requests: tuple[int, int, int], scalar: list[tuple[str, int]]
    ) -> None:
        self.nodes = nodes
        self.requests = requests
        self.scalar = scalar


def _class_key(pod: Pod) -> bytes:
    """Everything the filters and scores read of a pod (its *class*: the replicas of a workload
    share one), digested."""
    meta = pod.metadata
    spec = pod.spec
    return digest(
        (
            meta.namespace,
            meta.labels,
            meta.owner_references,
            spec.node_selector,
            spec.affinity,
            spec.tolerations,
            spec.topology_spread_constraints,
            [c.resources for c in spec.containers],
            [(c.restart_policy, c.resources) for c in spec.init_containers or ()],
            spec.overhead,
            spec.resources,
        )
    )


class PodClass:
    """What the filters and scores take from a pod alone, shared by the pods of one class: its
    requests, the static filters' verdicts, the spread counters and term indexes it reads (live
    objects, kept in step as pods are bound), or the invalid selector that leaves it Pending."""

    __slots__ = (
        "_na",
        "_plan",
        "_pns",
        "affinity_indexes",
        "affinity_keys",
        "affinity_terms",
        "anti_groups",
        "anti_seen",
        "best_effort",
        "cpu",
        "eph",
        "error",
        "fit_key",
        "hard",
        "labels",
        "mem",
        "namespace",
        "nz_cpu",
        "nz_mem",
        "own_anti",
        "passing",
        "pod",
        "preferred",
        "scalar",
        "self_affine",
        "soft",
        "soft_defaulted",
        "static",
    )

    def __init__(self, c: ClusterState, pod: Pod) -> None:
        self.pod = pod  # the first pod of the class: what the per-node memos are computed from
        self.namespace = pod.metadata.namespace
        self.labels: Mapping[str, str] = pod.metadata.labels or {}
        self.static = c.static_reasons(pod)[0]
        req = k8s_resources.pod_requests(pod)
        self.cpu = req.get(CPU, 0)
        self.mem = req.get(MEMORY, 0)
        self.eph = req.get(EPHEMERAL_STORAGE, 0)
        self.scalar = sorted(
            (name, amount) for name, amount in req.items() if amount > 0 and name not in _BASIC_RESOURCES
        )
        self.nz_cpu, self.nz_mem = non_zero_cpu_memory(pod, req)
        self.best_effort = self.cpu == 0 and self.mem == 0
        self.error: k8s_labels.SelectorError | None = None
        self.hard: list[SpreadConstraint] = []
        self.soft: list[SpreadConstraint] = []
        self.soft_defaulted = False
        #: existing pods' anti-affinity groups of the namespace that match the pod, of the first
        #: ``anti_seen`` groups there (groups are only ever added)
        self.anti_groups: list[_AntiGroup] = []
        self.anti_seen = 0
        self.own_anti: list[tuple[TermIndex, str]] = []
        self.affinity_terms: list[PodAffinityTerm] = []
        self.affinity_indexes: list[TermIndex] = []
        self.affinity_keys: list[str] = []
        self.self_affine = False
        self.passing: list[int] = []
        self.fit_key: tuple[object, ...] = ()
        self.preferred: list[tuple[TermIndex, str, int]] = []
        self._pns: list[int] | None = None
        self._na: list[int] | None = None
        self._plan: ScorePlan | None = None
        try:
            self.hard = c.spread_constraints(pod, DO_NOT_SCHEDULE)
            self.soft = c.spread_constraints(pod, SCHEDULE_ANYWAY)
            if not pod.spec.topology_spread_constraints:
                self.hard = c.default_spread_constraints(pod, DO_NOT_SCHEDULE)
                self.soft = c.default_spread_constraints(pod, SCHEDULE_ANYWAY)
                # (kube-scheduler's scoring keeps nodes lacking a key only for the System defaults)
                self.soft_defaulted = bool(self.soft) and c.defaults.system
            anti = k8s_affinity.required_pod_anti_affinity_terms(pod)
            self.own_anti = [(c.term_index(pod, t), t.topology_key) for t in anti]
            terms = k8s_affinity.required_pod_affinity_terms(pod)
            self.affinity_keys = [t.topology_key for t in terms]
            if terms:
                self.affinity_terms = terms
                self.affinity_indexes = [c.term_index(pod, t) for t in terms]
                self.self_affine = all(ti.matches(pod) for ti in self.affinity_indexes)
        except k8s_labels.SelectorError as e:
            self.error = e
            return
        self.passing = c.passing_with_keys(pod, tuple(sorted({con.key for con in self.hard})))
        self.fit_key = (id(self.passing), self.cpu, self.mem, self.eph, tuple(self.scalar))
        aff = pod.spec.affinity
        if aff is not None:
            for sign, pa in ((1, aff.pod_affinity), (-1, aff.pod_anti_affinity)):
                if pa is None:
                    continue
                for wt in pa.preferred_during_scheduling_ignored_during_execution or ():
                    if wt.weight == 0:
                        continue
                    term = wt.pod_affinity_term
                    try:
                        ti = c.term_index(pod, term)
                    except k8s_labels.SelectorError:
                        continue
                    self.preferred.append((ti, term.topology_key, sign * wt.weight))

    def existing_anti_groups(self, by_ns: Mapping[str, list[_AntiGroup]]) -> list[_AntiGroup]:
        groups = by_ns.get(self.namespace, ())
        if len(groups) > self.anti_seen:
            labels = self.labels
            self.anti_groups.extend(g for g in groups[self.anti_seen :] if g.match(labels))
            self.anti_seen = len(groups)
        return self.anti_groups

    def score_plan(self, sim: PlacementSimulator) -> ScorePlan:
        if self._plan is None:
            self._plan = ScorePlan(sim.cluster, self, sim.scorer.weights)
        return self._plan

    def prefer_no_schedule(self, c: ClusterState) -> list[int]:
        """Per node: the PreferNoSchedule taints the pod does not tolerate."""
        if self._pns is None:
            self._pns = c.prefer_no_schedule_counts(self.pod.spec.tolerations)
        return self._pns

    def preferred_node_affinity(self, c: ClusterState) -> list[int]:
        """Per node: the weights of the pod's matching preferred node-affinity terms."""
        if self._na is None:
            self._na = c.preferred_node_affinity(self.pod)
        return self._na


class PlacementSimulator:
    """kube-scheduler's filters and scores over one snapshot, kept up to date as pods are bound.

    Use :meth:`decide` for a pod, then :meth:`bind` the pod (with ``spec.nodeName`` set) to make
    the placement count for the pods after it.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        options: PlacementOptions | None = None,
        *,
        nodes: Sequence[Node] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.options = options or PlacementOptions()
        self.cluster = c = ClusterState(snapshot, nodes, self.options.default_constraints)
        self._start = 0
        #: where the latest search started (the feasible nodes it found are in order from there)
        self._search_start = 0
        self._to_find = num_feasible_nodes_to_find(c.n, self.options.percentage_of_nodes_to_score)
        self.alloc: list[Resources] = [snapshot.allocatable(node) for node in c.nodes]
        self.alloc_cpu = [a.get(CPU, 0) for a in self.alloc]
        self.alloc_mem = [a.get(MEMORY, 0) for a in self.alloc]
        self.alloc_eph = [a.get(EPHEMERAL_STORAGE, 0) for a in self.alloc]
        self.alloc_pods = [a.get(PODS, 0) for a in self.alloc]
        # what the pods occupying the node request: raw (the filter, BalancedAllocation; the
        # snapshot keeps these sums) and with kube-scheduler's non-zero stand-ins
        # (NonZeroRequested: LeastAllocated)
        used = [snapshot.requested_on(name) for name in c.names]
        self.req_cpu = [u.get(CPU, 0) for u in used]
        self.req_mem = [u.get(MEMORY, 0) for u in used]
        self.req_eph = [u.get(EPHEMERAL_STORAGE, 0) for u in used]
        self.pod_count = [snapshot.pod_count_on(name) for name in c.names]
        self.req_scalar: list[dict[str, int]] = [
            {k: v for k, v in u.items() if k not in _BASIC_RESOURCES} for u in used
        ]
        self.nz_cpu = list(self.req_cpu)
        self.nz_mem = list(self.req_mem)
        self._anti_groups: dict[tuple[object, ...], _AntiGroup] = {}
        self._anti_by_ns: dict[str, list[_AntiGroup]] = {}
        self._anti_terms: dict[bytes, list[tuple[str, _AntiGroup]]] = {}
        index_get = c.index.get
        requests = snapshot.shared_requests
        nz_cpu, nz_mem = self.nz_cpu, self.nz_mem
        for pod in snapshot.iter_pods():
            spec = pod.spec
            at = index_get(spec.node_name)
            if at is None or pod.status.phase in k8s_pods.FINISHED_PHASES:
                continue
            if missing_cpu_or_memory(pod):
                req = requests(pod)
                pc, pm = non_zero_cpu_memory(pod, req)
                nz_cpu[at] += pc - req.get(CPU, 0)
                nz_mem[at] += pm - req.get(MEMORY, 0)
            aff = spec.affinity
            if aff is not None and aff.pod_anti_affinity is not None:
                self._add_existing_anti(pod, at)
        self.free_cpu = [a - u for a, u in zip(self.alloc_cpu, self.req_cpu, strict=True)]
        self.free_mem = [a - u for a, u in zip(self.alloc_mem, self.req_mem, strict=True)]
        self.free_eph = [a - u for a, u in zip(self.alloc_eph, self.req_eph, strict=True)]
        self.free_pods = [a - u for a, u in zip(self.alloc_pods, self.pod_count, strict=True)]
        #: the score plugins, over the state above
        self.scorer = NodeScorer(self)
        #: request classes' lists of fitting nodes, and the classes by their cpu, memory and
        #: ephemeral-storage request (ascending, for :meth:`_drop_unfit`)
        self._fit_classes: dict[tuple[object, ...], _FitClass] = {}
        self._fit_by: tuple[tuple[list[int], list[_FitClass]], ...] = (([], []), ([], []), ([], []))
        self._fit_scalar: list[_FitClass] = []
        self._classes: dict[bytes, PodClass] = {}

    def with_nodes(self, nodes: Sequence[Node]) -> PlacementSimulator:
        """A simulator over this one's snapshot as it is now (the pods bound, terminating and gone
        so far) with ``nodes`` changed (a node tainted or labelled mid-cycle: the memos per node
        would be stale), going on searching where this one stopped; this one is closed."""
        renewed = PlacementSimulator(self.snapshot, self.options, nodes=nodes)
        renewed._start = self._start % renewed.cluster.n if renewed.cluster.n else 0
        self.close()
        return renewed

    def close(self) -> None:
        """Let go of the state (the simulator is unusable after). Its indexes refer to one
        another (the scorer to the simulator, counters to the cluster state), so without this
        they would wait for the cyclic collector, which the simulation driver pauses: every
        simulator of a run would stay in memory until the end."""
        vars(self.cluster).clear()
        vars(self.scorer).clear()
        vars(self).clear()

    # ---------------------------------------------------------------- state

    def _add_requests(self, i: int, pod: Pod, req: Mapping[str, int], sign: int = 1) -> None:
        self.req_cpu[i] += sign * req.get(CPU, 0)
        self.req_mem[i] += sign * req.get(MEMORY, 0)
        self.req_eph[i] += sign * req.get(EPHEMERAL_STORAGE, 0)
        for name, amount in req.items():
            if name not in _BASIC_RESOURCES:
                scalar = self.req_scalar[i]
                scalar[name] = scalar.get(name, 0) + sign * amount
        pc, pm = non_zero_cpu_memory(pod, req)
        self.nz_cpu[i] += sign * pc
        self.nz_mem[i] += sign * pm

    def _existing_anti_terms(self, pod: Pod) -> list[tuple[str, _AntiGroup]]:
        """The pod's required anti-affinity terms as (topology key, group), memoised per set of
        terms (and namespace); terms with an invalid selector are left out (kube-scheduler could
        not have admitted such a pod's terms either)."""
        terms = k8s_affinity.required_pod_anti_affinity_terms(pod)
        if not terms:
            return []
        memo_key = encode((pod.metadata.namespace, terms))
        hit = self._anti_terms.get(memo_key)
        if hit is not None:
            return hit
        c = self.cluster
        hit = []
        for term in terms:
            try:
                match = k8s_labels.compile_label_selector(term.label_selector, none_matches=False)
            except k8s_labels.SelectorError:
                continue
            namespaces = c.term_namespaces(pod, term)
            key = (tuple(sorted(namespaces)), encode(term.label_selector), term.topology_key)
            group = self._anti_groups.get(key)
            if group is None:
                group = self._anti_groups[key] = _AntiGroup(
                    term.topology_key, match, c.nodes_by_value(term.topology_key)
                )
                for ns in namespaces:
                    self._anti_by_ns.setdefault(ns, []).append(group)
            hit.append((term.topology_key, group))
        self._anti_terms[memo_key] = hit
        return hit

    def _add_existing_anti(self, pod: Pod, i: int) -> None:
        node_labels = self.cluster.labels[i]
        for key, group in self._existing_anti_terms(pod):
            value = node_labels.get(key)
            if value is not None:
                group.add(value)

    def bind(self, pod: Pod) -> None:
        """Bind ``pod`` (``spec.nodeName`` set) on its node: the snapshot and every index follow."""
        i = self.cluster.index.get(pod.spec.node_name)
        if i is None:
            raise ValueError(f"pod {pod.key}: node {pod.spec.node_name!r} is not one of the simulated nodes")
        self.snapshot.add_pod(pod)
        if k8s_pods.occupies_node(pod):
            req = self.snapshot.shared_requests(pod)  # (not a copy kept per pod)
            before = (self.free_cpu[i], self.free_mem[i], self.free_eph[i], self.free_pods[i])
            self.pod_count[i] += 1
            self._add_requests(i, pod, req)
            self.free_cpu[i] = self.alloc_cpu[i] - self.req_cpu[i]
            self.free_mem[i] = self.alloc_mem[i] - self.req_mem[i]
            self.free_eph[i] = self.alloc_eph[i] - self.req_eph[i]
            self.free_pods[i] = self.alloc_pods[i] - self.pod_count[i]
            self._drop_unfit(i, before)
            self.scorer.node_changed(i)
            aff = pod.spec.affinity
            if aff is not None and aff.pod_anti_affinity is not None:
                self._add_existing_anti(pod, i)
        self.cluster.pod_added(pod, i)

    def terminate(self, pod: Pod, terminating: Pod) -> None:
        """``pod`` (bound) is being deleted and is now ``terminating`` (the same pod with a
        deletionTimestamp): it keeps its requests, its place in the pod count and its
        anti-affinity, as kube-scheduler's cache keeps a pod until it is gone; only spread
        constraints stop counting it."""
        i = self.cluster.index.get(pod.spec.node_name)
        self.snapshot.add_pod(terminating)  # replaces ``pod``
        if i is None:
            self.cluster.pod_listed(terminating)
            return
        c = self.cluster
        c.pod_listed(terminating)
        c.pod_terminating(pod, i)

    def unterminate(self, terminating: Pod, pod: Pod) -> None:
        """Undo :meth:`terminate`: ``terminating`` is ``pod`` again (its eviction did not happen)."""
        i = self.cluster.index.get(pod.spec.node_name)
        self.snapshot.add_pod(pod)  # replaces ``terminating``
        if i is None:
            return
        c = self.cluster
        c.forget_pods()
        c.pod_unterminated(pod, i)

    def unbind(self, pod: Pod) -> None:
        """``pod`` (bound, as the snapshot has it) is gone: the snapshot and every index follow.
        The request classes' fit lists are made again on demand (a node with more room may fit
        classes it did not)."""
        c = self.cluster
        i = c.index.get(pod.spec.node_name)
        req = self.snapshot.shared_requests(pod)
        if not self.snapshot.remove_pod(pod):
            return
        c.pod_unlisted(pod)
        if i is None:
            return
        if k8s_pods.occupies_node(pod):
            self.pod_count[i] -= 1
            self._add_requests(i, pod, req, -1)
            self.free_cpu[i] = self.alloc_cpu[i] - self.req_cpu[i]
            self.free_mem[i] = self.alloc_mem[i] - self.req_mem[i]
            self.free_eph[i] = self.alloc_eph[i] - self.req_eph[i]
            self.free_pods[i] = self.alloc_pods[i] - self.pod_count[i]
            self._fit_classes = {}
            self._fit_by = (([], []), ([], []), ([], []))
            self._fit_scalar = []
            self.scorer.node_changed(i)
            aff = pod.spec.affinity
            if aff is not None and aff.pod_anti_affinity is not None:
                node_labels = c.labels[i]
                for key, group in self._existing_anti_terms(pod):
                    value = node_labels.get(key)
                    if value is not None:
                        group.remove(value)
        c.pod_changed(pod, i, added=False)

    # ---------------------------------------------------------------- one pod

    def _class_of(self, pod: Pod) -> PodClass:
        key = _class_key(pod)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = PodClass(self.cluster, pod)
        return cls

    def decide(self, pod: Pod, *, probe: bool = False) -> Decision:
        """Run kube-scheduler's filters and scores for ``pod`` (not bound yet). A ``probe`` leaves
        the next search's start where it was (kube-scheduler never saw that pod)."""
        if not probe:
            return self._decide(pod)
        start, search_start = self._start, self._search_start
        try:
            return self._decide(pod)
        finally:
            self._start, self._search_start = start, search_start

    def _decide(self, pod: Pod) -> Decision:
        c = self.cluster
        n = c.n
        if n == 0:
            return Decision("", fit_error_message(0, {}))
        try:
            pre = PreFilter(self, pod)
        except k8s_labels.SelectorError as e:
            return Decision("", fit_error_message(n, {}, prefix=f"invalid selector: {e}"))
        feasible, processed = self._find_feasible(pre)
        self._start = (self._start + processed) % n
        if not feasible:
            return Decision("", fit_error_message(n, self._diagnose(pre)))
        if len(feasible) == 1:
            i = feasible[0]
            return Decision(c.names[i], "", None, 1)
        best, best_score = self.scorer.best(pod, pre, feasible)
        return Decision(c.names[best], "", best_score, len(feasible))

    def _find_feasible(self, pre: PreFilter) -> tuple[list[int], int]:
        """The first feasible nodes (up to numFeasibleNodesToFind) from where the previous search
        stopped, and how many nodes were looked at."""
        n = self.cluster.n
        start = self._search_start = self._start
        fit = self._fitting(pre)
        if not fit:
            return [], n
        size = len(fit)
        at = bisect.bisect_left(fit, start)
        blocked = pre.blockers
        slow = self._slow_failure if pre.dynamic else None
        to_find = self._to_find
        if not blocked and slow is None:
            if size < to_find:
                return fit[at:] + fit[:at], n
            order = fit[at : at + to_find]
            if len(order) < to_find:
                order += fit[: to_find - len(order)]
            return order, (order[-1] - start) % n + 1
        feasible: list[int] = []
        # in chunks of the nodes in search order (the fitting nodes from ``at`` on, then those
        # before it), each check a pass over the chunk: the same nodes as one at a time
        pos = 0
        chunk = to_find + (to_find >> 2) + 16
        while pos < size:
            lo = at + pos
            hi = at + min(pos + chunk, size)
            if hi <= size:
                part = fit[lo:hi]
            elif lo >= size:
                part = fit[lo - size : hi - size]
            else:
                part = fit[lo:] + fit[: hi - size]
            pos += len(part)
            for drop in blocked:
                part = drop(part)
            if slow is not None:
                part = [i for i in part if not slow(pre, i)]
            need = to_find - len(feasible)
            if len(part) >= need:
                feasible.extend(part[:need])
                return feasible, (feasible[-1] - start) % n + 1
            feasible.extend(part)
            chunk *= 2
        return feasible, n

    def _fitting(self, pre: PreFilter) -> list[int]:
        """The nodes passing the static filters where the pod's requests fit (NodeResourcesFit),
        kept per request class (and kept right by :meth:`_drop_unfit` as pods are bound)."""
        key = pre.cls.fit_key
        classes = self._fit_classes
        fit = classes.get(key)
        if fit is None:
            if len(classes) >= _FIT_CLASSES:
                self._forget_fit_class(classes.pop(next(iter(classes))))
            cpu = pre.cpu if pre.cpu > 0 else _NO_REQUEST
            mem = pre.mem if pre.mem > 0 else _NO_REQUEST
            eph = pre.eph if pre.eph > 0 else _NO_REQUEST
            free_cpu, free_mem, free_eph, free_pods = (
                self.free_cpu,
                self.free_mem,
                self.free_eph,
                self.free_pods,
            )
            nodes = [
                i
                for i in pre.passing
                if free_pods[i] > 0 and cpu <= free_cpu[i] and mem <= free_mem[i] and eph <= free_eph[i]
            ]
            if pre.scalar:
                nodes = [i for i in nodes if not self._scalar_failures(pre, i)]
            fit = classes[key] = _FitClass(nodes, (cpu, mem, eph), pre.scalar)
            for amount, (amounts, members) in zip(fit.requests, self._fit_by, strict=True):
                at = bisect.bisect_right(amounts, amount)
                amounts.insert(at, amount)
                members.insert(at, fit)
            if pre.scalar:
                self._fit_scalar.append(fit)
        return fit.nodes

    def _forget_fit_class(self, fit: _FitClass) -> None:
        for amount, (amounts, members) in zip(fit.requests, self._fit_by, strict=True):
            at = bisect.bisect_left(amounts, amount)
            while members[at] is not fit:
                at += 1
            del amounts[at]
            del members[at]
        if fit in self._fit_scalar:
            self._fit_scalar.remove(fit)

    def _drop_unfit(self, i: int, before: tuple[int, int, int, int]) -> None:
        """Node ``i`` has less room than ``before`` (its free cpu, memory, ephemeral storage and
        pods): take it off the fit lists of the request classes that no longer fit there. Those
        are the classes requesting more than the node has left of some resource, but no more
        than it had (the others did not have the node, or still fit)."""
        if self.free_pods[i] <= 0 < before[3]:
            affected: Iterable[_FitClass] = self._fit_classes.values()
        else:
            gone: list[_FitClass] = []
            for (amounts, members), old, new in zip(
                self._fit_by, before[:3], (self.free_cpu[i], self.free_mem[i], self.free_eph[i]), strict=True
            ):
                if new < old:
                    gone.extend(
                        members[bisect.bisect_right(amounts, new) : bisect.bisect_right(amounts, old)]
                    )
            gone.extend(fit for fit in self._fit_scalar if self._short_of(fit.scalar, i))
            affected = gone
        for fit in affected:
            nodes = fit.nodes
            at = bisect.bisect_left(nodes, i)
            if at < len(nodes) and nodes[at] == i:
                del nodes[at]

    def _diagnose(self, pre: PreFilter) -> Counter[str]:
        """Every node's reasons, as kube-scheduler's FitError counts them."""
        reasons: Counter[str] = Counter()
        static = pre.static
        for i in range(self.cluster.n):
            if static[i]:
                reasons[static[i]] += 1
                continue
            found: list[str] = []
            if not self._resource_failure(pre, i, found):
                self._dynamic_failure(pre, i, found)
            for r in found:
                reasons[r] += 1
        return reasons

    def _resource_failure(self, pre: PreFilter, i: int, reasons: list[str]) -> bool:
        """NodeResourcesFit on node ``i``; appends its reasons to ``reasons``."""
        alloc = self.alloc[i]
        used = self.req_scalar[i]
        free = {CPU: self.free_cpu[i], MEMORY: self.free_mem[i], EPHEMERAL_STORAGE: self.free_eph[i]}

        def free_of(name: str) -> int:
            left = free.get(name)
            return alloc.get(name, 0) - used.get(name, 0) if left is None else left

        failed = resource_failures(self.free_pods[i], pre.requests, free_of)
        reasons.extend(failed)
        return bool(failed)

    def _scalar_failures(self, pre: PreFilter, i: int) -> list[str]:
        if not pre.scalar:
            return []
        alloc = self.alloc[i]
        used = self.req_scalar[i]
        return [
            f"Insufficient {name}"
            for name, amount in pre.scalar
            if amount > alloc.get(name, 0) - used.get(name, 0)
        ]

    def _short_of(self, scalar: list[tuple[str, int]], i: int) -> bool:
        """Whether node ``i`` lacks room for one of these extended-resource requests."""
        alloc = self.alloc[i]
        used = self.req_scalar[i]
        return any(amount > alloc.get(name, 0) - used.get(name, 0) for name, amount in scalar)

    def _slow_failure(self, pre: PreFilter, i: int) -> bool:
        """The check the search does not take from ``pre.blockers``: required pod affinity."""
        return not self._affinity_ok(pre, self.cluster.labels[i])

    def _affinity_ok(self, pre: PreFilter, labels: Mapping[str, str]) -> bool:
        return k8s_affinity.pod_affinity_satisfied(
            pre.affinity_keys, labels, pre.affinity_counts, pre.self_affine
        )

    def _dynamic_failure(self, pre: PreFilter, i: int, reasons: list[str]) -> bool:
        """PodTopologySpread and InterPodAffinity on node ``i``, in kube-scheduler's order;
        appends the failing plugin's reason to ``reasons``."""
        labels = self.cluster.labels[i]
        # PodTopologySpread
        for con, _ in pre.hard:
            if con.key not in labels:
                reasons.append(R_SPREAD_LABEL)
                return True
        for con, limit in pre.hard:
            if con.counter.counts.get(labels[con.key], 0) > limit:
                reasons.append(R_SPREAD)
                return True
        # InterPodAffinity
        existing_anti, own_anti = pre.anti_domains()
        for key, values in existing_anti.items():
            value = labels.get(key)
            if value is not None and value in values:
                reasons.append(R_EXISTING_ANTI)
                return True
        if pre.affinity_keys and not self._affinity_ok(pre, labels):
            reasons.append(R_AFFINITY)
            return True
        for key, values in own_anti.items():
            value = labels.get(key)
            if value is not None and value in values:
                reasons.append(R_ANTI_AFFINITY)
                return True
        return False


class PreFilter:
    """What the PreFilter and PreScore extension points compute once per pod: its class
    (memoised) and what depends on the pods bound so far. Raises SelectorError for a pod with
    an invalid selector."""

    def __init__(self, sim: PlacementSimulator, pod: Pod) -> None:
        cls = sim._class_of(pod)
        if cls.error is not None:
            raise cls.error
        c = sim.cluster
        self.cls = cls
        self.static = cls.static
        self.passing = cls.passing
        self.cpu = cls.cpu
        self.mem = cls.mem
        self.eph = cls.eph
        self.scalar = cls.scalar
        #: what NodeResourcesFit checks: (resource, amount)
        self.requests = ((CPU, cls.cpu), (MEMORY, cls.mem), (EPHEMERAL_STORAGE, cls.eph), *cls.scalar)
        self.nz_cpu = cls.nz_cpu
        self.nz_mem = cls.nz_mem
        self.best_effort = cls.best_effort
        # PodTopologySpread: a node fails a hard constraint when its domain's count exceeds
        # maxSkew + global minimum - (1 if the pod matches its own selector)
        self.hard = [
            (con, con.max_skew + con.counter.global_min(con.min_domains) - con.self_match) for con in cls.hard
        ]
        self.soft = cls.soft
        self.soft_defaulted = cls.soft_defaulted
        # InterPodAffinity: the existing pods' anti-affinity terms that match this pod (those
        # held by some pod)
        self.anti_groups = [g for g in cls.existing_anti_groups(sim._anti_by_ns) if g.values]
        node_labels = c.labels
        # the pod's own required affinity: pods matching all its terms, per topology pair
        terms = cls.affinity_terms
        self.affinity_keys = cls.affinity_keys
        self.affinity_counts: dict[tuple[str, str], int] = {}
        self.self_affine = cls.self_affine
        if terms:
            indexes = cls.affinity_indexes
            for i, pods in indexes[0].by_node.items():
                for q in pods:
                    if all(ti.matches(q) for ti in indexes[1:]):
                        for t in terms:
                            value = node_labels[i].get(t.topology_key)
                            if value is not None:
                                pair = (t.topology_key, value)
                                self.affinity_counts[pair] = self.affinity_counts.get(pair, 0) + 1
        # what the search checks per node: the domains where the pod would break a hard spread
        # constraint, an existing pod's anti-affinity or its own, each a filter over a chunk of
        # nodes; nodes without a hard constraint's topology key are left out of the search
        # beforehand
        self.blockers: list[Callable[[list[int]], list[int]]] = []
        for con, limit in self.hard:
            hist = con.counter.hist
            if hist and max(hist) > limit:
                self.blockers.append(_over_limit(c, con, limit))
        for group in self.anti_groups:
            self.blockers.append(partial(_without, group.nodes))
        for ti, key in cls.own_anti:
            nodes = ti.nodes_in_domains(key, node_labels, c.nodes_by_value(key))
            if nodes:
                self.blockers.append(partial(_without, nodes))
        self.dynamic = bool(self.affinity_keys)
        self._cluster = c

    def anti_domains(self) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        """The domains where existing pods' anti-affinity, and the pod's own, rule it out: per
        topology key, the values."""
        existing: dict[str, set[str]] = {}
        for group in self.anti_groups:
            existing.setdefault(group.key, set()).update(group.values)
        own: dict[str, set[str]] = {}
        for ti, key in self.cls.own_anti:
            domains = ti.domain_counts(key, self._cluster.labels)
            if domains:
                own.setdefault(key, set()).update(domains)
        return existing, own


def _without(nodes: set[int], part: list[int]) -> list[int]:
    return list(filterfalse(nodes.__contains__, part))


def _over_limit(c: ClusterState, con: SpreadConstraint, limit: int) -> Callable[[list[int]], list[int]]:
    """A filter dropping the nodes whose domain holds more than ``limit`` matching pods (every
    node searched carries the key)."""
    counter = con.counter
    if c.fine(con.key):
        node_map = counter.by_node(c.nodes_by_value(con.key))
        if len(node_map) <= 4 * _SMALL_SET:
            over = {j for j, count in node_map.items() if count > limit}
            return partial(_without, over)
        within = limit.__ge__
        get = node_map.get
        return lambda part: list(compress(part, map(within, map(get, part, repeat(0)))))
    ok = {value for value in c.nodes_by_value(con.key) if counter.counts.get(value, 0) <= limit}
    values = c.values_of(con.key).__getitem__
    return lambda part: list(compress(part, map(ok.__contains__, map(values, part))))
