"""The placement simulator: kube-scheduler's scheduling cycle for one pod at a time (PreFilter,
the search for feasible nodes, the filters' reasons when none is, then the scores of
:class:`~desched.scheduling.placement.scores.NodeScorer`) over the state it owns and keeps up to
date as pods are bound: the :class:`~desched.scheduling.placement.state.ClusterState` (term
indexes, spread counters), the :class:`~desched.scheduling.placement.nodes.NodeTable` (requests
per node), the request classes' :class:`~desched.scheduling.placement.nodes.FitLists` and the
existing pods' anti-affinity (:class:`~desched.scheduling.placement.classes.ExistingAnti`). The
parts take the state they read, never the simulator: nothing refers back to it."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Node, Pod
from desched.scheduling.placement.classes import ExistingAnti, PodClass, PreFilter, class_key
from desched.scheduling.placement.filters import (
    R_AFFINITY,
    R_ANTI_AFFINITY,
    R_EXISTING_ANTI,
    R_SPREAD,
    R_SPREAD_LABEL,
    fit_error_message,
)
from desched.scheduling.placement.nodes import FitLists, NodeTable
from desched.scheduling.placement.options import PlacementOptions
from desched.scheduling.placement.order import num_feasible_nodes_to_find
from desched.scheduling.placement.scores import NodeScorer
from desched.scheduling.placement.state import ClusterState


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
        self.table = NodeTable(snapshot, c.nodes, c.index)
        self.anti = ExistingAnti(c)
        for pod in snapshot.iter_pods():
            aff = pod.spec.affinity
            if aff is None or aff.pod_anti_affinity is None:
                continue
            at = c.index.get(pod.spec.node_name)
            if at is not None and pod.status.phase not in k8s_pods.FINISHED_PHASES:
                self.anti.add(pod, at)
        #: the score plugins, over the state above
        self.scorer = NodeScorer(c, self.table, self.options)
        self.fits = FitLists(self.table)
        self._classes: dict[bytes, PodClass] = {}

    def with_nodes(self, nodes: Sequence[Node]) -> PlacementSimulator:
        """A simulator over this one's snapshot as it is now (the pods bound, terminating and gone
        so far) with ``nodes`` changed (a node tainted or labelled mid-cycle: the memos per node
        would be stale), going on searching where this one stopped."""
        renewed = PlacementSimulator(self.snapshot, self.options, nodes=nodes)
        renewed._start = self._start % renewed.cluster.n if renewed.cluster.n else 0
        return renewed

    def restart_search(self) -> None:
        """The next search starts at the first node, as a simulator made afresh would start."""
        self._start = self._search_start = 0

    @property
    def free_cpu(self) -> list[int]:
        """Per node, the cpu not requested (millicores)."""
        return self.table.free_cpu

    # ---------------------------------------------------------------- state

    def bind(self, pod: Pod) -> None:
        """Bind ``pod`` (``spec.nodeName`` set) on its node: the snapshot and every index follow."""
        i = self.cluster.index.get(pod.spec.node_name)
        if i is None:
            raise ValueError(f"pod {pod.key}: node {pod.spec.node_name!r} is not one of the simulated nodes")
        self.snapshot.add_pod(pod)
        if k8s_pods.occupies_node(pod):
            req = self.snapshot.shared_requests(pod)  # (not a copy kept per pod)
            before = self.table.free(i)
            extended = self.table.add(i, pod, req)
            self.fits.node_shrank(i, before, extended)
            self.scorer.node_changed(i)
            aff = pod.spec.affinity
            if aff is not None and aff.pod_anti_affinity is not None:
                self.anti.add(pod, i)
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
        req = self.snapshot.shared_requests(pod)
        if not self.snapshot.remove_pod(pod):
            return
        c.pod_unlisted(pod)
        self._gone(pod, req)
        self.fits.reset()

    def remove_gone(self, pods: Iterable[Pod]) -> None:
        """:meth:`unbind` each of ``pods`` (a cycle's terminating pods once they are deleted),
        leaving the same state: the pods by namespace and label are dropped once (made again
        from the snapshot on demand, as a fresh simulator makes them) rather than kept in step
        pod by pod, and the fit lists are reset once."""
        c = self.cluster
        c.forget_pods()
        shared_requests, remove_pod = self.snapshot.shared_requests, self.snapshot.remove_pod
        for pod in pods:
            req = shared_requests(pod)
            if remove_pod(pod):
                self._gone(pod, req)
        self.fits.reset()

    def _gone(self, pod: Pod, req: Mapping[str, int]) -> None:
        """The model's side of :meth:`unbind` once the snapshot and the pods by label follow."""
        c = self.cluster
        i = c.index.get(pod.spec.node_name)
        if i is None:
            return
        if k8s_pods.occupies_node(pod):
            self.table.add(i, pod, req, -1)
            self.scorer.node_changed(i)
            aff = pod.spec.affinity
            if aff is not None and aff.pod_anti_affinity is not None:
                self.anti.remove(pod, i)
        c.pod_changed(pod, i, added=False)

    # ---------------------------------------------------------------- one pod

    def _class_of(self, pod: Pod) -> PodClass:
        key = class_key(pod)
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = PodClass(self.cluster, pod)
        return cls

    def prefilter(self, pod: Pod) -> PreFilter:
        """The pod's PreFilter over the state as it is now. Raises SelectorError."""
        return PreFilter(self._class_of(pod), self.cluster, self.anti)

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
            pre = self.prefilter(pod)
        except k8s_labels.SelectorError as e:
            return Decision("", fit_error_message(n, {}, prefix=f"invalid selector: {e}"))
        feasible, processed = self._find_feasible(pre)
        self._start = (self._start + processed) % n
        if not feasible:
            return Decision("", fit_error_message(n, self._diagnose(pre)))
        if len(feasible) == 1:
            i = feasible[0]
            return Decision(c.names[i], "", None, 1)
        best, best_score = self.scorer.best(pod, pre, feasible, self._search_start)
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
        kept per request class."""
        return self.fits.fitting(pre.cls.fit_key, pre.passing, (pre.cpu, pre.mem, pre.eph), pre.scalar)

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
        failed = self.table.resource_failures(i, pre.requests)
        reasons.extend(failed)
        return bool(failed)

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
