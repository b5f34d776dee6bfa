"""Pod classes (pods with equal scheduling constraints: the replicas of a workload) and what is
computed once per pod before its search: :class:`PodClass` (what the filters and scores take
from a pod alone, memoised per class), :class:`PreFilter` (kube-scheduler's PreFilter and
PreScore: what depends on the pods bound so far) and :class:`ExistingAnti` (the existing pods'
required anti-affinity). Each takes the state it reads, never the simulator."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from functools import partial
from itertools import compress, filterfalse, repeat
from typing import Final

from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s.objects import Pod, PodAffinityTerm
from desched.k8s.resources import CPU, EPHEMERAL_STORAGE, MEMORY
from desched.k8s.topologyspread import DO_NOT_SCHEDULE, SCHEDULE_ANYWAY
from desched.scheduling.placement.nodes import BASIC_RESOURCES as _BASIC_RESOURCES
from desched.scheduling.placement.shapes import digest, encode, non_zero_cpu_memory
from desched.scheduling.placement.state import ClusterState, Matcher, SpreadConstraint, TermIndex

#: Below this many nodes, a set of them is built rather than a check per node searched.
_SMALL_SET: Final = 256
#: Up to this many domains of a hard spread constraint's key, its filter reads a per-node
#: list memoised per set of domains over the limit.
_FEW_DOMAINS: Final = 16


class AntiGroup:
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


class ExistingAnti:
    """The existing pods' required anti-affinity terms, grouped (:class:`AntiGroup`: alike terms
    and the domains their pods sit in), by the namespaces they select; one update walk per pod
    placed or removed."""

    def __init__(self, c: ClusterState) -> None:
        self._cluster = c
        self._groups: dict[tuple[object, ...], AntiGroup] = {}
        #: per namespace, the groups whose terms select it (only ever appended to)
        self.by_ns: dict[str, list[AntiGroup]] = {}
        self._terms: dict[bytes, list[tuple[str, AntiGroup]]] = {}

    def terms(self, pod: Pod) -> list[tuple[str, AntiGroup]]:
        """The pod's required anti-affinity terms as (topology key, group), memoised per set of
        terms (and namespace); terms with an invalid selector are left out (kube-scheduler could
        not have admitted such a pod's terms either)."""
        terms = k8s_affinity.required_pod_anti_affinity_terms(pod)
        if not terms:
            return []
        memo_key = encode((pod.metadata.namespace, terms))
        hit = self._terms.get(memo_key)
        if hit is not None:
            return hit
        c = self._cluster
        hit = []
        for term in terms:
            try:
                match = k8s_labels.compile_label_selector(term.label_selector, none_matches=False)
            except k8s_labels.SelectorError:
                continue
            namespaces = c.term_namespaces(pod, term)
            key = (tuple(sorted(namespaces)), encode(term.label_selector), term.topology_key)
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = AntiGroup(
                    term.topology_key, match, c.nodes_by_value(term.topology_key)
                )
                for ns in namespaces:
                    self.by_ns.setdefault(ns, []).append(group)
            hit.append((term.topology_key, group))
        self._terms[memo_key] = hit
        return hit

    def add(self, pod: Pod, i: int) -> None:
        """``pod`` (with required anti-affinity) occupies node ``i``."""
        node_labels = self._cluster.labels[i]
        for key, group in self.terms(pod):
            value = node_labels.get(key)
            if value is not None:
                group.add(value)

    def remove(self, pod: Pod, i: int) -> None:
        """``pod`` (with required anti-affinity) left node ``i``."""
        node_labels = self._cluster.labels[i]
        for key, group in self.terms(pod):
            value = node_labels.get(key)
            if value is not None:
                group.remove(value)


def class_key(pod: Pod) -> bytes:
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
        req = c.snapshot.shared_requests(pod)  # (read only)
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
        self.anti_groups: list[AntiGroup] = []
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

    def existing_anti_groups(self, by_ns: Mapping[str, list[AntiGroup]]) -> list[AntiGroup]:
        groups = by_ns.get(self.namespace, ())
        if len(groups) > self.anti_seen:
            labels = self.labels
            self.anti_groups.extend(g for g in groups[self.anti_seen :] if g.match(labels))
            self.anti_seen = len(groups)
        return self.anti_groups

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


class PreFilter:
    """What the PreFilter and PreScore extension points compute once per pod from its class and
    the state it reads (the cluster state, the existing pods' anti-affinity): what depends on
    the pods bound so far. Raises SelectorError for a class with an invalid selector."""

    def __init__(self, cls: PodClass, c: ClusterState, anti: ExistingAnti) -> None:
        if cls.error is not None:
            raise cls.error
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
        self.anti_groups = [g for g in cls.existing_anti_groups(anti.by_ns) if g.values]
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


def _within(ok: list[bool], part: list[int]) -> list[int]:
    return list(compress(part, map(ok.__getitem__, part)))


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
    by_value = c.nodes_by_value(con.key)
    counts = counter.counts
    if len(by_value) <= _FEW_DOMAINS:
        # few domains (zones): per node, whether its domain is within the limit, memoised per
        # set of domains over it; one lookup per node searched
        over_values = frozenset([value for value in by_value if counts.get(value, 0) > limit])
        return partial(_within, c.outside(con.key, over_values))
    ok = {value for value in by_value if counts.get(value, 0) <= limit}
    values = c.values_of(con.key).__getitem__
    return lambda part: list(compress(part, map(ok.__contains__, map(values, part))))
