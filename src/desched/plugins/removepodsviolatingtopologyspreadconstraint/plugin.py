"""RemovePodsViolatingTopologySpreadConstraint: evict the fewest pods that rebalance spread domains.

A pod's ``topologySpreadConstraints`` are enforced by kube-scheduler only when it places the pod;
scale-downs, node failures and new nodes leave domains skewed. For every constraint found in a
namespace this Balance plugin counts the matching pods per topology domain, and when the largest
and smallest domain differ by more than ``maxSkew`` it evicts as few pods as upstream's
``balanceDomains`` needs to bring them within it, so that kube-scheduler spreads them again.

Which constraints (upstream ``topologyspreadconstraint.go``):

- those of the pods bound to the given nodes, in the namespaces ``namespaces`` allows, whose
  ``whenUnsatisfiable`` is listed in ``constraints`` (default ``[DoNotSchedule]``);
- a constraint is taken with the pod that declares it, as kube-scheduler does: ``matchLabelKeys``
  are merged into its selector with the pod's values; with ``nodeAffinityPolicy: Honor`` (the
  default) only nodes matching the pod's nodeSelector and required node affinity are domains,
  with ``nodeTaintsPolicy: Honor`` (default ``Ignore``) only nodes whose NoSchedule/NoExecute
  taints the pod tolerates. Identical constraints of a namespace are balanced once.

Counting (as kube-scheduler counts, see "Differences" below): the pods of the namespace bound to an
eligible node that carries the topology key, that match the selector, are not terminating and have
not finished. Every eligible domain counts, also an empty one. ``minDomains`` (which upstream does
not support) follows kube-scheduler's definition: with fewer eligible domains than ``minDomains``
the global minimum is 0, which is modelled as ``minDomains - domains`` extra empty domains without
nodes. They lower the average the plan balances to, so that pods move to the existing domains
below it; only with ``topologyBalanceNodeFit`` (no pod is evicted that no node would take):
without it, ``minDomains`` is left out of the plan, as upstream leaves it out, since a pod
"moved" to a domain without nodes would be evicted to stay Pending.

Balancing (upstream's algorithm): with ``idealAvg = pods / domains`` and the domains sorted by size,
a pointer ``i`` walks up from the smallest and ``j`` down from the largest; while the two differ
by more than ``maxSkew``, ``min(ceil(size_j - idealAvg), ceil(idealAvg - size_i),
ceil((skew - maxSkew) / 2))`` pods move from ``j`` to ``i``. The pods taken from a domain are
chosen from the back of upstream's order: pods that cannot be evicted first (kept), then pods
with a nodeSelector or node affinity, then the others; by descending priority within each group
(the profile's Sort plugins order pods of equal standing; then the name, the last name leaves first).
Pods that fit somewhere better are preferred (upstream #1719), and with ``topologyBalanceNodeFit``
(default true) a pod is only evicted if it fits (node fit: ``handle.node_fit_failures``) one of
the eligible nodes, other than its own, of the domains below the ideal average. A pod that is
chosen but may not leave still counts as moved, so the plan never evicts more than needed.
``labelSelector`` is not used to count; it only decides which pods may be evicted.

Constraints of one namespace share pods, so they are planned together, in the order the pods
declare them: a pod planned to leave for one constraint is gone from the counts of the others,
and those constraints expect kube-scheduler to place it again in their smallest domains (so a
zone constraint's evictions do not make a hostname constraint evict more). No pod is chosen whose
departure would leave any constraint of its namespace more skewed than ``max(its skew before,
its maxSkew)``: evictions never create a violation, nor deepen one.

Evictions run after every namespace is planned, in plan order (after the profile's Sort plugins):
the per-node limit skips the rest of that node, the total limit ends the plugin. The promise above
is checked again against the evictions actually made, since the evictor may refuse planned ones.

Speed (150,000 pods, 5,000 nodes): pods are grouped by namespace in one pass, a namespace's pods
are indexed by label on first use so that a selector with an equality requirement only looks at
its candidates, a pod's constraints are built once per distinct set of records (replicas decoded
by the snapshot loader share theirs), domain counts are sparse (a hostname constraint of ten
replicas costs ten entries, not one per node), eligible nodes are computed once per (topology
key, node filter), and node fit is searched lazily over the candidate nodes, once per pod shape
rather than once per replica.

With ``evictionPolicy.predictive``, a chosen pod is left where it is (the plan is made first, so
no other pod goes in its stead; the pod still counts in its domain) when the domain the placement
model puts its replacement in, of the constraint that chose it, is its own domain, would then
hold as many matching pods as the domain it leaves or more, or would then be more than
``maxSkew`` above the global minimum (the replacements predicted into a domain earlier in the
call count there): skip reason ``predicted_skew``. A replacement on a node the constraint does not
count helps.

Differences from upstream, on purpose:

- upstream counts only the pods its evictor filter and the ``labelSelector`` accept, so pods it
  may not evict vanish from the domains (its sort for non-evictable pods is then dead code). desched
  counts every matching pod, as kube-scheduler and upstream's documentation do, and keeps the
  ones it may not evict; pods on ineligible nodes are not counted (upstream counted them into a
  domain of their node's label value);
- pods that are not evictable, or not selected by ``labelSelector``, are never chosen while an
  evictable one is available (upstream could choose them, and then evicted nothing);
- pods in ``Succeeded``/``Failed`` phase are not counted (kube-scheduler does not see them);
- within a domain the lowest priority leaves first, as upstream documents (its comparator
  inverted it), and ties are broken by node, then by name, rather than Go's map and sort order
  (a replacement's name is random: by name first, no snapshot could tell which node loses a pod);
- with ``topologyBalanceNodeFit``, a pod is also kept when every candidate node would break another
  of its ``DoNotSchedule`` constraints (kube-scheduler would refuse it there; upstream PR #1918,
  except that a node without the topology key is refused, as kube-scheduler does);
- constraints are planned together (above); upstream plans each on the original counts and can
  evict for one what breaks another;
- ``minDomains`` is honoured when ``topologyBalanceNodeFit`` is on (see "Counting").
"""

from __future__ import annotations

import bisect
import heapq
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import msgspec

from desched.framework import ClusterView, Evictor, Handle, LiveInputs, NoGain, PredictedMove, Status
from desched.k8s import labels as k8s_labels
from desched.k8s.namespaces import namespace_rule
from desched.k8s.objects import Node, Pod, TopologySpreadConstraint
from desched.k8s.topologyspread import DO_NOT_SCHEDULE, DefaultConstraints, counts_pod
from desched.plugins.removepodsviolatingtopologyspreadconstraint._constraints import (
    ConstraintCache,
    SpreadConstraint,
)
from desched.plugins.removepodsviolatingtopologyspreadconstraint._domains import (
    Domain,
    NamespacePods,
    Spread,
    Topologies,
)
from desched.plugins.removepodsviolatingtopologyspreadconstraint.args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
)

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder

_NO_PODS: list[Pod] = []


@dataclass(slots=True)
class Plan:
    """Pods to evict, in order, each with the reason it was chosen for."""

    order: list[Pod] = field(default_factory=list)
    #: id(pod) -> why (the pods of ``order``)
    reasons: dict[int, str] = field(default_factory=dict)
    namespaces: dict[str, _Namespace] = field(default_factory=dict)
    #: id(pod) -> the Spread that chose it (the pods of ``order``)
    chosen_by: dict[int, Spread] = field(default_factory=dict)
    #: (id(spread), domain) -> replacements predicted to land there (``predictive``)
    landed: dict[tuple[int, str], int] = field(default_factory=dict)

    def add(self, pod: Pod, reason: str, spread: Spread | None = None) -> None:
        if id(pod) not in self.reasons:
            self.reasons[id(pod)] = reason
            self.order.append(pod)
            if spread is not None:
                self.chosen_by[id(pod)] = spread

    def judge(self, move: PredictedMove) -> NoGain | None:
        """The move must lower the skew of the constraint that chose the pod: its replacement's
        domain (with the replacements predicted there before it) must end below the domain it
        leaves, and not above the global minimum plus ``maxSkew``."""
        pod = move.pod
        spread = self.chosen_by.get(id(pod))
        ns = self.namespaces.get(pod.metadata.namespace)
        if spread is None or ns is None:
            return None
        source = ns.domain_of(pod, spread)
        target = spread.topology.node_domain.get(move.destination.metadata.name)
        c = spread.constraint
        if source is None or target is None:
            return None  # (a domain the constraint does not count: leaving its domain helps)
        landing = (id(spread), target)
        there = spread.counts.get(target, 0) + self.landed.get(landing, 0)
        here = spread.counts.get(source, 0)
        floor = spread.floor()
        if target == source:
            why = f"back in its own domain {c.topology_key}={source}"
        elif there + 1 >= here:
            why = (
                f"in domain {c.topology_key}={target}, which would then hold {there + 1} matching "
                f"pods, not fewer than the {here - 1} left in {source}"
            )
        elif there + 1 - floor > c.max_skew:
            why = (
                f"in domain {c.topology_key}={target}, which would then hold {there + 1} matching "
                f"pods, more than the minimum {floor} plus maxSkew {c.max_skew}"
            )
        else:
            self.landed[landing] = self.landed.get(landing, 0) + 1
            return None
        return NoGain(
            "predicted_skew",
            f"its replacement would land on {move.destination.metadata.name}, {why} "
            f"(topology spread constraint {c.describe()})",
        )

    def may_evict(self, pod: Pod) -> bool:
        """Given the evictions made so far, evicting the pod leaves every constraint of its
        namespace within ``max(initial skew, maxSkew)``. The plan assumed every planned eviction
        happens; when the evictor refuses some, this keeps the promise for the ones that do."""
        ns = self.namespaces.get(pod.metadata.namespace)
        return ns is None or ns.removal_allowed(pod, None)

    def evicted(self, pod: Pod) -> None:
        ns = self.namespaces.get(pod.metadata.namespace)
        if ns is not None:
            ns.remove(pod)


def _has_selector_or_affinity(pod: Pod) -> bool:
    spec = pod.spec
    return spec.node_selector is not None or (
        spec.affinity is not None and spec.affinity.node_affinity is not None
    )


def _priority_key(pod: Pod) -> tuple[int, int]:
    """Lowest first; a pod without a resolved priority before any with one."""
    prio = pod.spec.priority
    return (0, 0) if prio is None else (1, prio)


class RemovePodsViolatingTopologySpreadConstraint:
    name: ClassVar[str] = "RemovePodsViolatingTopologySpreadConstraint"
    Args: ClassVar[type[RemovePodsViolatingTopologySpreadConstraintArgs]] = (
        RemovePodsViolatingTopologySpreadConstraintArgs
    )

    def __init__(self, args: RemovePodsViolatingTopologySpreadConstraintArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.kinds = frozenset(args.constraints)
        ns = args.namespaces
        self._namespace_rule = namespace_rule(ns.include, ns.exclude) if ns else None
        self.label_match: k8s_labels.Matcher | None = (
            k8s_labels.compile_label_selector(args.label_selector.to_selector(), none_matches=True)
            if args.label_selector is not None
            else None
        )
        dc = args.default_constraints
        #: kube-scheduler's cluster-level defaults for pods without constraints (None: off)
        self.defaults: DefaultConstraints | None = dc.resolved if dc is not None else None
        if self.defaults is not None and not self.defaults.constraints:
            self.defaults = None
        #: this cycle's plan (for :meth:`judge_move`)
        self._plan: Plan | None = None

    def live_inputs(self) -> LiveInputs:
        """The default constraints' selectors are made of Services, ReplicaSets, ..."""
        return LiveInputs(workloads=self.defaults is not None)

    def namespace_allowed(self, namespace: str) -> bool:
        allowed = self._namespace_rule
        return allowed is None or allowed(namespace)

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        """See :meth:`Plan.judge` (the plan of this cycle's Balance call)."""
        return self._plan.judge(move) if self._plan is not None else None

    def on_cycle_end(self) -> None:
        """Let go of the cycle's plan (its namespaces' pods, spreads and indexes)."""
        self._plan = None

    def balance(self, nodes: Sequence[Node]) -> Status | None:
        self._plan = None
        ev = self.handle.evictor
        if ev.total_limit_reached() or not self.kinds:
            return None
        plan = self._plan = self.plan(nodes)
        if not plan.order:
            return None
        rank = {id(p): i for i, p in enumerate(plan.order)}
        findings = self.handle.findings
        order = ev.in_order(
            self.handle.sort_pods(plan.order, key=lambda p: rank[id(p)]), explain_node_limit=True
        )
        for pod in order:
            if not plan.may_evict(pod):
                if findings.enabled:
                    findings.left(
                        pod,
                        "chosen, but with the evictions refused so far, evicting it would leave a "
                        "spread constraint of its namespace more skewed than max(its skew, its maxSkew)",
                    )
                continue
            if order.evict(pod, plan.reasons[id(pod)]).gone:
                plan.evicted(pod)
        return None

    def plan(self, nodes: Sequence[Node]) -> Plan:
        """Which pods to evict, in order, and why (nothing is evicted)."""
        run = _Run(self, nodes)
        namespaces, countable, declaring = run.scan()
        for namespace in namespaces:
            run.plan_namespace(
                namespace, NamespacePods(countable.get(namespace, [])), declaring.get(namespace, [])
            )
        return run.plan


class _Run:
    """One Balance call: this snapshot's caches, and the plan being built."""

    def __init__(self, plugin: RemovePodsViolatingTopologySpreadConstraint, nodes: Sequence[Node]) -> None:
        self.plugin = plugin
        self.handle = plugin.handle
        self.snapshot: ClusterView = plugin.handle.snapshot
        self.evictor: Evictor = plugin.handle.evictor
        self.node_fit = plugin.args.topology_balance_node_fit
        self.nodes = list(nodes)
        self.node_by_name = {n.metadata.name: n for n in self.nodes}
        #: a node's place among the nodes by name: ties between equal pods of a domain are broken
        #: by their node first (see _Chooser.keep_order)
        self.node_rank = {name: i for i, name in enumerate(sorted(self.node_by_name))}
        self.constraints = ConstraintCache()
        self.topology = Topologies(self.nodes)
        #: id(pod) -> movable (the pods are the snapshot's, alive for the whole call)
        self.movable_cache: dict[int, bool] = {}
        self.findings = plugin.handle.findings
        #: reasons are composed only when someone listens (checked once per constraint)
        self.reporting = self.findings.enabled
        self.plan = Plan()
        #: (its own object, not a method of the run: the plan's namespaces keep it, and a cycle
        #: back to the run would keep the whole plan alive after the cycle, until the garbage
        #: collector runs, which the simulation driver pauses)
        self.constraints_of = _ConstraintsOf(self.snapshot, plugin.defaults)

    def scan(self) -> tuple[list[str], dict[str, list[Pod]], dict[str, list[Pod]]]:
        """One pass over the pods: the namespaces where a pod bound to a given node declares a
        constraint to balance (sorted); the pods kube-scheduler counts, by namespace: bound to a
        given node, not terminating, not finished (in the snapshot's order, as
        ``pods_in_namespace`` lists them); and those of them that declare constraints."""
        kinds = self.plugin.kinds
        allowed = self.plugin.namespace_allowed
        by_name = self.node_by_name
        found: set[str] = set()
        countable: dict[str, list[Pod]] = {}
        declaring: dict[str, list[Pod]] = {}
        for pod in self.snapshot.pods:
            spec = pod.spec
            if spec.node_name not in by_name:
                continue
            meta = pod.metadata
            ns = meta.namespace
            tscs = self.constraints_of(pod)
            if tscs and ns not in found and any(c.when_unsatisfiable in kinds for c in tscs) and allowed(ns):
                found.add(ns)
            if counts_pod(pod):
                same_ns = countable.get(ns)
                if same_ns is None:
                    countable[ns] = [pod]
                else:
                    same_ns.append(pod)
                if tscs:
                    same_ns = declaring.get(ns)
                    if same_ns is None:
                        declaring[ns] = [pod]
                    else:
                        same_ns.append(pod)
        return sorted(found), countable, declaring

    def movable(self, pod: Pod) -> bool:
        """The profile's filter and the plugin's labelSelector let the pod go."""
        hit = self.movable_cache.get(id(pod))
        if hit is None:
            match = self.plugin.label_match
            hit = (match is None or match(pod.metadata.labels or {})) and self.evictor.filter(pod)
            self.movable_cache[id(pod)] = hit
        return hit

    def plan_namespace(self, namespace: str, countable: NamespacePods, declaring: list[Pod]) -> None:
        """Plan one namespace: ``countable`` its pods that count, ``declaring`` those of them
        that declare constraints."""
        ns = _Namespace(self.constraints, self.topology, countable, declaring, self.constraints_of)
        kinds = self.plugin.kinds
        for spread in list(ns.spreads.values()):
            if spread.constraint.when_unsatisfiable in kinds:
                self.balance_constraint(ns, spread)
        ns.reset()
        self.plan.namespaces[namespace] = ns

    def balance_constraint(self, ns: _Namespace, spread: Spread) -> None:
        c = spread.constraint
        # Cheap test first, on the sparse counts: most constraints are balanced.
        # (Placing pending pods only fills the smallest domains: it never adds skew.)
        if spread.skew() <= c.max_skew:
            if self.reporting:
                self.report_within(ns, spread, spread.skew())
            return
        counts = spread.counts
        domains = [
            Domain(value, nodes, spread.pods.get(value, _NO_PODS), size=counts.get(value, 0))
            for value, nodes in sorted(spread.topology.domain_nodes.items())
        ]
        # Pods already planned to leave for another constraint are gone from these domains, but
        # kube-scheduler will place them again, where this constraint's domains are smallest.
        pending = spread.pending
        if pending and domains:
            heap = [(d.size, d.value, k) for k, d in enumerate(domains)]
            heapq.heapify(heap)
            for _ in range(pending):
                size, value, k = heapq.heappop(heap)
                domains[k].size = size + 1
                heapq.heappush(heap, (size + 1, value, k))
        # Missing domains (minDomains) only draw pods towards the existing domains below the
        # average, which node fit checks. Without node fit nothing would stop a pod from being
        # "moved" into a domain that has no node at all, where upstream (no minDomains) evicts
        # nothing: then minDomains is left out of the plan, as upstream leaves it out.
        if self.node_fit:
            for k in range(c.min_domains - len(domains)):
                domains.append(Domain(f"<missing domain {k + 1}>", [], [], phantom=True))
        if len(domains) < 2:
            if self.reporting:
                self.report_within(ns, spread, None)
            return
        sizes = [d.size for d in domains]
        if max(sizes) - min(sizes) <= c.max_skew:
            if self.reporting:
                self.report_within(ns, spread, max(sizes) - min(sizes))
            return
        ideal = sum(sizes) / len(domains)
        domains.sort(key=lambda d: (d.size, not d.phantom, d.value))
        # (sorted by size: the domains below the ideal are the first ones)
        below = _BelowNodes(domains[: bisect.bisect_left(domains, ideal, key=_domain_size)])
        chooser = _Chooser(self, ns, spread, below)
        initial = {d.value: d.size for d in domains} if self.reporting else {}

        i, j = 0, len(domains) - 1
        while i < j:
            if domains[j].size <= ideal:
                j -= 1
            low, high = domains[i], domains[j]
            skew = high.size - low.size
            if skew <= c.max_skew:
                i += 1
                continue
            move = min(
                math.ceil(high.size - ideal),
                math.ceil(ideal - low.size),
                math.ceil((skew - c.max_skew) / 2),
            )
            if move <= 0:
                i += 1
                continue
            reason = (
                f"skew {skew} > maxSkew {c.max_skew}: domain {high.value} has {high.size} matching "
                f"pods, {low.value} has {low.size}, ideal {ideal:.2f} (topology spread constraint "
                f"{c.describe()})"
            )
            for pod in chooser.take(high, move):
                self.plan.add(pod, reason, spread)
            high.size -= move
            low.size += move
        if self.reporting:
            self.report_kept(ns, spread, domains, initial, ideal, chooser.why)

    # ------------------------------------------------------------------ findings (when reported)

    def report_within(self, ns: _Namespace, spread: Spread, skew: int | None) -> None:
        """Every pod the constraint counts stays: its domains are within maxSkew (``skew``), or
        there are fewer than two of them (``skew`` None)."""
        c = spread.constraint
        left = self.findings.left
        planned = ns.planned
        for value, pods in spread.pods.items():
            if skew is None:
                why = (
                    f"topology {c.topology_key}={value} is the only eligible domain of constraint "
                    f"{c.describe()}: nothing to spread"
                )
            else:
                why = (
                    f"topology {c.topology_key}={value} has {spread.counts.get(value, 0)} pods, "
                    f"skew {skew} <= maxSkew {c.max_skew} ({c.describe()})"
                )
            for pod in pods:
                if id(pod) not in planned:
                    left(pod, why)

    def report_kept(
        self,
        ns: _Namespace,
        spread: Spread,
        domains: list[Domain],
        initial: dict[str, int],
        ideal: float,
        why: dict[int, str],
    ) -> None:
        """The pods a skewed constraint counts and did not choose: why each stays."""
        c = spread.constraint
        left = self.findings.left
        planned = ns.planned
        for d in domains:
            if d.phantom:
                continue
            size = initial.get(d.value, 0)
            if size <= ideal:
                general = (
                    f"topology {c.topology_key}={d.value} has {size} pods, not above the ideal "
                    f"average {ideal:.2f} ({c.describe()})"
                )
            elif size == d.size:
                general = (
                    f"topology {c.topology_key}={d.value} has {size} pods, above the ideal average "
                    f"{ideal:.2f} but within maxSkew {c.max_skew} of the domains below it ({c.describe()})"
                )
            else:
                general = (
                    f"topology {c.topology_key}={d.value} has {size} pods, ideal average {ideal:.2f}: "
                    f"it gives {size - d.size}, this pod is kept by the keep order "
                    f"(priority, node selector, evictability; {c.describe()})"
                )
            for pod in d.pods:
                if id(pod) not in planned:
                    left(pod, why.get(id(pod), general))


class _ConstraintsOf:
    """A pod's constraints as kube-scheduler applies them: its own, or (with
    ``defaultConstraints``) the cluster's defaults with the pod's default selector."""

    __slots__ = ("_default_lists", "_defaulted", "defaults", "snapshot")

    def __init__(self, snapshot: ClusterView, defaults: DefaultConstraints | None) -> None:
        self.snapshot = snapshot
        self.defaults = defaults
        #: id(pod) -> its default constraints; equal lists are one object (replicas share it)
        self._defaulted: dict[int, list[TopologySpreadConstraint] | None] = {}
        self._default_lists: dict[bytes, list[TopologySpreadConstraint]] = {}

    def __call__(self, pod: Pod) -> list[TopologySpreadConstraint] | None:
        own = pod.spec.topology_spread_constraints
        if own or self.defaults is None:
            return own
        key = id(pod)
        if key in self._defaulted:
            return self._defaulted[key]
        found = self.snapshot.default_spread_constraints(pod, self.defaults)
        shared: list[TopologySpreadConstraint] | None = None
        if found:
            shared = self._default_lists.setdefault(msgspec.json.encode(found), found)
        self._defaulted[key] = shared
        return shared


class _Namespace:
    """Every constraint of one namespace with its Spread, and which Spreads count which pod."""

    def __init__(
        self,
        constraints: ConstraintCache,
        topology: Topologies,
        ns_pods: NamespacePods,
        declaring: list[Pod],
        constraints_of: Callable[[Pod], list[TopologySpreadConstraint] | None],
    ) -> None:
        # (not the _Run: the plan keeps the namespaces, and a cycle would outlive the call
        # until the garbage collector runs)
        self.constraints = constraints
        self.topology = topology
        self.ns_pods = ns_pods
        self.constraints_of = constraints_of
        #: id(constraint) -> its Spread (equal constraints are one object of the run's cache)
        self.spreads: dict[int, Spread] = {}
        #: id(pod) -> the Spreads counting the pod, with its domain in each (ids of ``ns_pods``)
        self.by_pod: dict[int, list[tuple[Spread, str]]] = {}
        #: ids of the pods planned to leave
        self.planned: set[int] = set()
        build_all = constraints.build_all
        done: set[int] = set()  # constraint lists already seen valid (replicas share theirs)
        for pod in declaring:
            built = build_all(pod, constraints_of(pod))
            if id(built) in done:
                continue
            valid = True
            for c in built:
                if isinstance(c, str):
                    log.error("pod %s: cannot process topology spread constraint: %s", pod.key, c)
                    valid = False
                else:
                    self._spread(c)
            if valid:
                done.add(id(built))  # (the run's cache holds the lists, so ids are not reused)

    def spread_of(self, tsc: TopologySpreadConstraint, pod: Pod) -> Spread | None:
        """The Spread of ``tsc`` as declared by ``pod`` (None if its selector is invalid)."""
        try:
            c = self.constraints.build(tsc, pod)
        except k8s_labels.SelectorError as e:
            log.error("pod %s: cannot process topology spread constraint: %s", pod.key, e)
            return None
        return self._spread(c)

    def _spread(self, c: SpreadConstraint) -> Spread:
        spread = self.spreads.get(id(c))
        if spread is None:
            topo = self.topology(c)
            pods: dict[str, list[Pod]] = {}
            node_domain = topo.node_domain
            for p in self.ns_pods.matching(c):
                value = node_domain.get(p.spec.node_name)
                if value is not None:
                    members = pods.get(value)
                    if members is None:
                        pods[value] = [p]
                    else:
                        members.append(p)
            spread = Spread(c, topo, pods, len(topo.domain_nodes))
            spread.reset()
            spread.initial_skew = spread.skew()
            self.spreads[id(c)] = spread
            by_pod = self.by_pod
            for value, members in pods.items():
                for p in members:
                    by_pod.setdefault(id(p), []).append((spread, value))
        return spread

    def remove(self, pod: Pod) -> None:
        self.planned.add(id(pod))
        for spread, value in self.by_pod.get(id(pod), ()):
            spread.remove(value)

    def reset(self) -> None:
        """Forget the planned removals (before the evictions replay them)."""
        self.planned.clear()
        for spread in self.spreads.values():
            spread.reset()

    def removal_allowed(self, pod: Pod, balancing: Spread | None) -> bool:
        """Evicting the pod does not push a constraint of the namespace (other than
        ``balancing``) past ``max(its initial skew, its maxSkew)``."""
        for spread, value in self.by_pod.get(id(pod), ()):
            if spread is not balancing and not spread.removal_allowed(value):
                return False
        return True

    def domain_of(self, pod: Pod, spread: Spread) -> str | None:
        for s, value in self.by_pod.get(id(pod), ()):
            if s is spread:
                return value
        return None


def _domain_size(domain: Domain) -> int:
    return domain.size


class _BelowNodes:
    """The nodes of the domains below the ideal average, in the domains' order: listed only as
    far as the node fit scans ask (most stop at the first nodes; a zone of a large cluster has
    thousands)."""

    __slots__ = ("_domains", "_next", "_nodes")

    def __init__(self, domains: list[Domain]) -> None:
        self._domains = domains
        self._nodes: list[Node] = []
        self._next = 0  # the first domain whose nodes are not listed yet

    def at(self, i: int) -> Node | None:
        """The ``i``-th node (None past the last)."""
        nodes = self._nodes
        while i >= len(nodes):
            if self._next == len(self._domains):
                return None
            nodes.extend(self._domains[self._next].nodes)
            self._next += 1
        return nodes[i]

    def __len__(self) -> int:
        return sum(len(d.nodes) for d in self._domains)


@dataclass(slots=True)
class _FitScan:
    passing: list[Node] = field(default_factory=list)
    next: int = 0


class _Chooser:
    """Picks the pods a domain gives away for one constraint, and answers "could it go?"."""

    def __init__(self, run: _Run, ns: _Namespace, spread: Spread, below_nodes: _BelowNodes) -> None:
        self.run = run
        self.ns = ns
        self.spread = spread
        self.below_nodes = below_nodes
        self._scans: dict[tuple[object, ...], _FitScan] = {}
        #: id(pod) -> why a pod looked at was not chosen (only filled when findings are reported)
        self.why: dict[int, str] = {}

    def keep_order(self, pods: list[Pod]) -> list[Pod]:
        """Upstream's order: the pods given away are taken from the back."""
        run = self.run
        rank = self.ns.ns_pods.rank
        kept: list[Pod] = []
        pinned: list[Pod] = []
        free: list[Pod] = []
        for pod in pods:
            if not run.movable(pod):
                kept.append(pod)
            elif _has_selector_or_affinity(pod):
                pinned.append(pod)
            else:
                free.append(pod)

        node_rank = run.node_rank

        def evict_first(p: Pod) -> tuple[int, int, int, int]:
            # Among equal priorities, by node, then by the pod's place in the namespace (its
            # name): a replacement's name is the random suffix its ReplicaSet controller gave it,
            # so taking by name first would leave to that suffix which node of a domain loses a
            # pod of the ReplicaSet, which no snapshot (and no simulate) can tell in advance.
            # Two pods of one ReplicaSet on one node are the same template on the same node.
            return (*_priority_key(p), -node_rank.get(p.spec.node_name, -1), -rank[id(p)])

        sort = run.handle.sort_pods
        return kept + sort(pinned, key=evict_first)[::-1] + sort(free, key=evict_first)[::-1]

    def fits(self, pod: Pod) -> bool:
        """Some eligible node of a domain below the ideal average, other than its own, would
        take the pod without breaking another of its DoNotSchedule constraints."""
        own = pod.spec.node_name
        others = self._other_hard_constraints(pod)
        domain_of = self.ns.domain_of
        for node in self._fitting_nodes(pod):
            if node.metadata.name == own:
                continue
            if all(s.admits(pod, node, domain_of(pod, s)) for s in others):
                return True
        return False

    def _fitting_nodes(self, pod: Pod) -> Iterator[Node]:
        """The nodes of ``below_nodes`` that pass node fit for the pod, found lazily and shared by
        the pods of the same shape (the replicas of a workload): a shape that fits the first node
        costs one check, one that fits nowhere one pass over the nodes, whatever the replicas."""
        spec = pod.spec
        snapshot = self.run.snapshot
        content = self.run.constraints.content
        key = (
            pod.metadata.namespace,
            content(spec.node_selector),
            content(spec.affinity),
            content(spec.tolerations),
            tuple(sorted(snapshot.requests(pod).items())),
        )
        scan = self._scans.get(key)
        if scan is None:
            scan = self._scans[key] = _FitScan()
        passing = scan.passing
        below = self.below_nodes
        i = 0
        while True:
            if i < len(passing):
                yield passing[i]
                i += 1
            else:
                node = below.at(scan.next)
                if node is None:
                    return
                scan.next += 1
                if not self.run.handle.node_fit_failures(pod, node):
                    passing.append(node)

    def _why_stays(self, pod: Pod, domain: Domain) -> str:
        """Why ``take`` passed over a pod of ``domain`` (for the findings; recomputes its tests)."""
        run = self.run
        c = self.spread.constraint
        where = f"topology {c.topology_key}={domain.value} gives pods ({c.describe()}), but this one "
        if not run.movable(pod):
            match = run.plugin.label_match
            if match is not None and not match(pod.metadata.labels or {}):
                return where + "is not selected by the plugin's labelSelector"
            return where + "is refused by the profile's filters"
        if not self.ns.removal_allowed(pod, self.spread):
            return where + (
                "would leave another spread constraint of its namespace more skewed than "
                "max(its skew, its maxSkew)"
            )
        return where + (
            f"fits none of the {len(self.below_nodes)} eligible nodes of the domains below the ideal "
            "average (topologyBalanceNodeFit)"
        )

    def _other_hard_constraints(self, pod: Pod) -> list[Spread]:
        out = []
        for tsc in self.ns.constraints_of(pod) or ():
            if tsc.when_unsatisfiable != DO_NOT_SCHEDULE:
                continue
            spread = self.ns.spread_of(tsc, pod)
            if spread is not None and spread is not self.spread:
                out.append(spread)
        return out

    def take(self, domain: Domain, count: int) -> list[Pod]:
        """Account ``count`` pods as leaving ``domain``; return those to evict.

        Pods that may leave (evictor filter, labelSelector, no other constraint made worse) and
        fit elsewhere go first, from the back of the keep order. If there are not enough, the
        next ones from the back are accounted as moved too, but evicted only when
        ``topologyBalanceNodeFit`` is off and they may leave.
        """
        ns = self.ns
        if domain.keep is None:
            # Without the pods already planned to leave for another constraint (none of this
            # constraint's: those were taken from their domain's keep list).
            planned = ns.planned
            pods = [p for p in domain.pods if id(p) not in planned] if planned else domain.pods
            domain.keep = self.keep_order(pods)
        remaining = domain.keep
        run = self.run
        chosen: list[int] = []
        for idx in range(len(remaining) - 1, -1, -1):
            if len(chosen) == count:
                break
            pod = remaining[idx]
            if run.movable(pod) and ns.removal_allowed(pod, self.spread) and self.fits(pod):
                chosen.append(idx)
                ns.remove(pod)
            elif run.reporting:
                self.why[id(pod)] = self._why_stays(pod, domain)
        evict = [remaining[idx] for idx in chosen]
        taken = set(chosen)
        rest = [p for idx, p in enumerate(remaining) if idx not in taken]
        shortfall = count - len(chosen)
        if shortfall > 0:
            accounted = rest[max(0, len(rest) - shortfall) :]
            rest = rest[: len(rest) - len(accounted)]
            if not run.node_fit:
                for pod in reversed(accounted):
                    if run.movable(pod) and ns.removal_allowed(pod, self.spread):
                        evict.append(pod)
                        ns.remove(pod)
        domain.keep = rest
        return evict


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import BalancePlugin, CycleEndHook, DeclaresLiveInputs, JudgesMoves

    _balance_plugin: type[BalancePlugin] = RemovePodsViolatingTopologySpreadConstraint
    _cycle_end_hook: type[CycleEndHook] = RemovePodsViolatingTopologySpreadConstraint
    _declares_live_inputs: type[DeclaresLiveInputs] = RemovePodsViolatingTopologySpreadConstraint
    _judges_moves: type[JudgesMoves] = RemovePodsViolatingTopologySpreadConstraint
