"""The cluster as kube-scheduler's filters and scores read it, kept up to date as pods come and go:
nodes in kube-scheduler's order with what the checks read of them (memoised per pod shape), pods
indexed by namespace and label, topology spread domain counts (:class:`DomainCounter`) and the pods
matching each (anti-)affinity term (:class:`TermIndex`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain
from typing import Final, TypeVar

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s import taints as k8s_taints
from desched.k8s import topologyspread as k8s_topologyspread
from desched.k8s.objects import (
    LabelSelector,
    Node,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from desched.k8s.topologyspread import SCHEDULE_ANYWAY
from desched.scheduling.placement.filters import (
    condition_taints,
    static_failure,
    taint_failure,
    tolerates_cordon,
)
from desched.scheduling.placement.order import scheduler_node_order
from desched.scheduling.placement.shapes import (
    affinity_shape,
    digest,
    encode,
    has_node_constraint,
    node_label_keys,
    required_node_affinity,
)

LABEL_HOSTNAME: Final = k8s_topologyspread.LABEL_HOSTNAME
#: Owners whose selector kube-scheduler's default spread constraints use (the stand-in for a
#: snapshot without the workload objects).
_DEFAULT_SPREAD_OWNERS: Final = ("ReplicaSet", "StatefulSet", "ReplicationController")
BIG: Final = 1 << 62
#: How many per-node lists ClusterState.outside keeps.
_OUTSIDE_MEMO: Final = 32
_T = TypeVar("_T")
_NO_PODS: Final[list[Pod]] = []

Matcher = Callable[[Mapping[str, str]], bool]
PodMatcher = Callable[[Pod], bool]


class DomainCounter:
    """Matching pods per topology domain for one spread constraint, kept as pods are placed.

    ``domains`` (shared between counters with the same eligible nodes and key, read-only) are
    the topology values of the eligible nodes; ``counts`` holds the domains with matching pods;
    ``hist`` how many domains have each count (0 included; no entry for a count no domain has),
    from which the global minimum, the skew and the excess follow without a pass over the
    domains. ``node_map`` (made on demand by :meth:`by_node`, then kept in step) is the count of
    every node's domain, by node.
    """

    __slots__ = (
        "counts",
        "domains",
        "eligible",
        "hist",
        "key",
        "match",
        "min_count",
        "namespace",
        "node_map",
        "nodes_of",
    )

    def __init__(
        self,
        namespace: str,
        key: str,
        match: PodMatcher,
        eligible: list[bool],
        domains: Mapping[str, int],
        counts: dict[str, int],
    ) -> None:
        """``counts``: the matching pods per domain (only domains with pods), taken over."""
        self.namespace = namespace
        self.key = key
        self.match = match
        self.eligible = eligible
        self.domains = domains
        self.counts = counts
        hist: dict[int, int] = {}
        for count in counts.values():
            hist[count] = hist.get(count, 0) + 1
        empty = len(domains) - len(counts)
        if empty:
            hist[0] = empty
        self.hist = hist
        self.min_count = min(hist) if hist else BIG
        self.node_map: dict[int, int] | None = None
        self.nodes_of: Mapping[str, list[int]] = {}

    def increment(self, value: str) -> None:
        if value not in self.domains:
            return
        counts = self.counts
        c = counts.get(value, 0)
        counts[value] = c + 1
        hist = self.hist
        k = hist[c] - 1
        if k:
            hist[c] = k
        else:
            del hist[c]
        hist[c + 1] = hist.get(c + 1, 0) + 1
        if c == self.min_count and c not in hist:
            self.min_count = c + 1
        node_map = self.node_map
        if node_map is not None:
            for j in self.nodes_of.get(value, ()):
                node_map[j] = c + 1

    def decrement(self, value: str) -> None:
        """A counted pod is gone."""
        if value not in self.domains:
            return
        counts = self.counts
        c = counts[value]
        if c == 1:
            del counts[value]
        else:
            counts[value] = c - 1
        hist = self.hist
        k = hist[c] - 1
        if k:
            hist[c] = k
        else:
            del hist[c]
        hist[c - 1] = hist.get(c - 1, 0) + 1
        if c - 1 < self.min_count:
            self.min_count = c - 1
        node_map = self.node_map
        if node_map is not None:
            for j in self.nodes_of.get(value, ()):
                if c == 1:
                    del node_map[j]
                else:
                    node_map[j] = c - 1

    def by_node(self, nodes_of: Mapping[str, list[int]]) -> dict[int, int]:
        """The count of each node's domain, for the nodes in a domain with matching pods
        (``nodes_of``: the nodes by their value of the counter's key)."""
        node_map = self.node_map
        if node_map is None:
            node_map = self.node_map = {}
            self.nodes_of = nodes_of
            for value, count in self.counts.items():
                for j in nodes_of.get(value, ()):
                    node_map[j] = count
        return node_map

    def global_min(self, min_domains: int | None) -> int:
        if min_domains is not None and len(self.domains) < min_domains:
            return 0
        return self.min_count

    def skew(self, min_domains: int | None) -> int:
        if not self.hist:
            return 0
        return max(self.hist) - self.global_min(min_domains)

    def excess(self, min_domains: int | None, max_skew: int) -> int:
        """Pods above ``global minimum + maxSkew`` in their domain."""
        if not self.hist:
            return 0
        ceiling = self.global_min(min_domains) + max_skew
        return sum((c - ceiling) * k for c, k in self.hist.items() if c > ceiling)


class TermIndex:
    """The occupying pods that match one pod (anti-)affinity term (namespaces + selector), by node;
    made on demand and then kept in step: how many per domain of a topology key (``domains``),
    and per node how many in its domain (``node_maps``)."""

    __slots__ = ("by_node", "domains", "match", "namespaces", "node_maps", "node_sets")

    def __init__(self, namespaces: frozenset[str], match: Matcher) -> None:
        self.namespaces = namespaces
        self.match = match
        self.by_node: dict[int, list[Pod]] = {}
        self.domains: dict[str, dict[str, int]] = {}
        self.node_maps: dict[str, tuple[Mapping[str, list[int]], dict[int, int]]] = {}
        self.node_sets: dict[str, tuple[Mapping[str, list[int]], set[int]]] = {}

    def matches(self, pod: Pod) -> bool:
        return pod.metadata.namespace in self.namespaces and self.match(pod.metadata.labels or {})

    def add(self, pod: Pod, i: int, node_labels: Mapping[str, str]) -> None:
        """A matching pod bound to node ``i``."""
        self.by_node.setdefault(i, []).append(pod)
        for key, counts in self.domains.items():
            value = node_labels.get(key)
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
        for key, (nodes_of, node_map) in self.node_maps.items():
            value = node_labels.get(key)
            if value is not None:
                for j in nodes_of.get(value, ()):
                    node_map[j] = node_map.get(j, 0) + 1
        for key, (nodes_of, nodes) in self.node_sets.items():
            value = node_labels.get(key)
            if value is not None:
                domain = nodes_of.get(value, ())
                if domain and domain[0] not in nodes:
                    nodes.update(domain)

    def remove(self, pod: Pod, i: int, node_labels: Mapping[str, str]) -> None:
        """A matching pod on node ``i`` is gone. The index may hold an earlier object of the same
        pod (a pod that started terminating is replaced in the snapshot, not here): the pod is
        found by namespace and name, unique among a snapshot's pods."""
        pods = self.by_node[i]
        ns, name = pod.metadata.namespace, pod.metadata.name
        for k, q in enumerate(pods):
            if q is pod or (q.metadata.name == name and q.metadata.namespace == ns):
                del pods[k]
                break
        if not pods:
            del self.by_node[i]
        for key, counts in self.domains.items():
            value = node_labels.get(key)
            if value is not None:
                if counts[value] == 1:
                    del counts[value]
                else:
                    counts[value] -= 1
        # made again on demand
        self.node_maps = {}
        self.node_sets = {}

    def domain_counts(self, key: str, labels: Sequence[Mapping[str, str]]) -> dict[str, int]:
        """The matching pods per value of topology key ``key`` (only values with pods)."""
        counts = self.domains.get(key)
        if counts is None:
            counts = self.domains[key] = {}
            for i, pods in self.by_node.items():
                value = labels[i].get(key)
                if value is not None:
                    counts[value] = counts.get(value, 0) + len(pods)
        return counts

    def nodes_in_domains(
        self, key: str, labels: Sequence[Mapping[str, str]], nodes_of: Mapping[str, list[int]]
    ) -> set[int]:
        """The nodes in a domain of ``key`` with matching pods."""
        hit = self.node_sets.get(key)
        if hit is None:
            nodes: set[int] = set()
            for value in self.domain_counts(key, labels):
                nodes.update(nodes_of.get(value, ()))
            hit = self.node_sets[key] = (nodes_of, nodes)
        return hit[1]

    def by_node_of(
        self, key: str, labels: Sequence[Mapping[str, str]], nodes_of: Mapping[str, list[int]]
    ) -> dict[int, int]:
        """Per node in a domain of ``key`` with matching pods: how many there are in it."""
        hit = self.node_maps.get(key)
        if hit is None:
            node_map: dict[int, int] = {}
            for value, count in self.domain_counts(key, labels).items():
                for j in nodes_of.get(value, ()):
                    node_map[j] = count
            hit = self.node_maps[key] = (nodes_of, node_map)
        return hit[1]


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    counter: DomainCounter
    key: str
    max_skew: int
    min_domains: int | None
    self_match: int
    when: str


class ClusterState:
    """Nodes in kube-scheduler's order and everything the checks read, with memos per pod shape."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        nodes: Sequence[Node] | None = None,
        defaults: k8s_topologyspread.DefaultConstraints = k8s_topologyspread.SYSTEM_DEFAULTS,
    ) -> None:
        self.snapshot = snapshot
        #: kube-scheduler's cluster-level default spread constraints
        self.defaults = defaults
        self.nodes: list[Node] = scheduler_node_order(snapshot.nodes if nodes is None else nodes)
        self.n = len(self.nodes)
        self.names: list[str] = [n.metadata.name for n in self.nodes]
        self.index: dict[str, int] = {name: i for i, name in enumerate(self.names)}
        self.labels: list[Mapping[str, str]] = [n.metadata.labels or {} for n in self.nodes]
        self.unschedulable: list[bool] = [n.spec.unschedulable for n in self.nodes]
        sigs: dict[bytes, int] = {}
        self.sig_taints: list[tuple[Taint, ...]] = []
        self.taint_sig: list[int] = []
        for node in self.nodes:
            taints = (*(node.spec.taints or ()), *condition_taints(node))
            enc = encode(taints)
            sig = sigs.get(enc)
            if sig is None:
                sig = sigs[enc] = len(self.sig_taints)
                self.sig_taints.append(taints)
            self.taint_sig.append(sig)
        self.prefer_no_schedule = any(
            t.effect == k8s_taints.TAINT_PREFER_NO_SCHEDULE for ts in self.sig_taints for t in ts
        )
        self._static: dict[bytes, tuple[list[str], list[int]]] = {}
        self._values: dict[str, list[str | None]] = {}
        self._nodes_by_value: dict[str, dict[str, list[int]]] = {}
        self._outside: dict[tuple[str, frozenset[str]], list[bool]] = {}
        self._all_have: dict[str, bool] = {}
        self._signatures: dict[tuple[object, ...], tuple[list[int], list[tuple[object, ...]]]] = {}
        self._fine: dict[str, bool] = {}
        self._templates: dict[tuple[int, str], dict[str, int]] = {}
        self._preferred: dict[bytes, list[int]] = {}
        self._prefer_no_schedule: dict[bytes, list[int]] = {}
        self._eligible: dict[tuple[object, ...], list[bool]] = {}
        self._affinity_ok: dict[bytes, list[bool]] = {}
        #: per set of label keys: each node's group of nodes alike in them, each group's first node
        self._label_groups: dict[tuple[str, ...], tuple[list[int], list[int]]] = {}
        self._default_eligibles: dict[
            tuple[object, ...], list[tuple[TopologySpreadConstraint, list[bool]]]
        ] = {}
        self._counters: dict[tuple[object, ...], DomainCounter] = {}
        #: counters and term indexes by the pods that can change them: ("owner", ns, kind, name),
        #: ("pair", ns, label, value) for the first of their matchLabels, else ("ns", ns)
        self._counter_buckets: dict[tuple[str, ...], list[DomainCounter]] = {}
        self._terms: dict[tuple[object, ...], TermIndex] = {}
        self._term_buckets: dict[tuple[str, ...], list[TermIndex]] = {}
        #: per namespace, the label keys of its ("pair", ...) buckets
        self._pair_keys: dict[str, set[str]] = {}
        self._spread_cache: dict[bytes, list[SpreadConstraint]] = {}
        #: the pods of a namespace and, per label key, by value: key -> pod, in the snapshot's
        #: order (made on demand, then kept in step by :meth:`pod_listed` / :meth:`pod_unlisted`)
        self._label_index: dict[tuple[str, str], dict[str, list[Pod]]] = {}
        self._label_keys: dict[str, list[str]] = {}
        self._ns_pods: dict[str, dict[str, Pod]] = {}
        self._with_keys: dict[tuple[bytes, tuple[str, ...]], list[int]] = {}
        self._ns_labels: dict[str, Mapping[str, str]] | None = None
        self._term_ns: dict[tuple[str, bytes], frozenset[str]] = {}

    # ---------------------------------------------------------------- static filters

    def static_reasons(self, pod: Pod) -> tuple[list[str], list[int]]:
        """Per node (in order): why NodeUnschedulable, TaintToleration or NodeAffinity reject the
        pod, "" when they pass; and the nodes that pass. Memoised per shape (node selector, node
        affinity, tolerations)."""
        spec = pod.spec
        required = required_node_affinity(pod)
        shape = encode((spec.node_selector, required, spec.tolerations))
        hit = self._static.get(shape)
        if hit is not None:
            return hit
        tolerations = spec.tolerations
        cordon_tolerated = tolerates_cordon(tolerations)
        check_affinity = bool(spec.node_selector) or required is not None
        affinity_ok = self.node_affinity_ok(pod) if check_affinity else None
        by_sig: dict[int, str] = {}
        # the reason is the same for nodes alike in what the filters read: cordoned or not, the
        # taints, the node affinity's verdict
        by_group: dict[tuple[bool, int, bool], str] = {}
        out: list[str] = []
        for i, node in enumerate(self.nodes):
            sig = self.taint_sig[i]
            group = (self.unschedulable[i], sig, affinity_ok[i] if affinity_ok is not None else True)
            reason = by_group.get(group)
            if reason is None:
                untolerated = by_sig.get(sig)
                if untolerated is None:
                    untolerated = by_sig[sig] = taint_failure(self.sig_taints[sig], tolerations)
                reason = by_group[group] = static_failure(
                    pod,
                    node,
                    cordon_tolerated=cordon_tolerated,
                    untolerated=untolerated,
                    check_affinity=check_affinity,
                )
            out.append(reason)
        result = (out, [i for i, r in enumerate(out) if not r])
        self._static[shape] = result
        return result

    def passing_with_keys(self, pod: Pod, keys: tuple[str, ...]) -> list[int]:
        """The nodes passing the static filters that carry every label of ``keys``."""
        passing = self.static_reasons(pod)[1]
        if not keys:
            return passing
        spec = pod.spec
        key = (encode((spec.node_selector, required_node_affinity(pod), spec.tolerations)), keys)
        hit = self._with_keys.get(key)
        if hit is None:
            labels = self.labels
            hit = self._with_keys[key] = [i for i in passing if all(k in labels[i] for k in keys)]
        return hit

    def nodes_by_value(self, key: str) -> dict[str, list[int]]:
        """The nodes carrying label ``key``, by its value."""
        hit = self._nodes_by_value.get(key)
        if hit is None:
            hit = {}
            for i, value in enumerate(self.values_of(key)):
                if value is not None:
                    hit.setdefault(value, []).append(i)
            self._nodes_by_value[key] = hit
        return hit

    def outside(self, key: str, values: frozenset[str]) -> list[bool]:
        """Per node: whether it carries label ``key`` with a value not among ``values``
        (memoised; the memo is emptied when it holds _OUTSIDE_MEMO lists)."""
        hit = self._outside.get((key, values))
        if hit is None:
            if len(self._outside) >= _OUTSIDE_MEMO:
                self._outside.clear()
            hit = self._outside[key, values] = [
                v is not None and v not in values for v in self.values_of(key)
            ]
        return hit

    def all_have(self, key: str) -> bool:
        """Whether every node carries label ``key``."""
        hit = self._all_have.get(key)
        if hit is None:
            hit = self._all_have[key] = all(key in labels for labels in self.labels)
        return hit

    def fine(self, key: str) -> bool:
        """Whether the domains of ``key`` hold about one node each (as hostnames do): then counts
        per domain are best kept per node."""
        hit = self._fine.get(key)
        if hit is None:
            by_value = self.nodes_by_value(key)
            hit = self._fine[key] = sum(map(len, by_value.values())) <= 2 * len(by_value)
        return hit

    def signatures(
        self, shape: tuple[object, ...], components: Sequence[Sequence[object]]
    ) -> tuple[list[int], list[tuple[object, ...]]]:
        """Per node, the index of its tuple of ``components`` (per-node lists) in the list of
        distinct tuples; memoised per ``shape`` (what the components are)."""
        hit = self._signatures.get(shape)
        if hit is None:
            ids: dict[tuple[object, ...], int] = {}
            if components:
                sig = [ids.setdefault(row, len(ids)) for row in zip(*components, strict=True)]
            else:
                sig = [0] * self.n
                ids[()] = 0
            hit = self._signatures[shape] = (sig, list(ids))
        return hit

    def values_of(self, key: str) -> list[str | None]:
        """Per node: the value of label ``key`` (None when the node lacks it)."""
        hit = self._values.get(key)
        if hit is None:
            hit = self._values[key] = [labels.get(key) for labels in self.labels]
        return hit

    def preferred_node_affinity(self, pod: Pod) -> list[int]:
        """Per node: the weights of the pod's matching preferred node-affinity terms (memoised
        per set of terms)."""
        aff = pod.spec.affinity
        terms = (
            aff.node_affinity.preferred_during_scheduling_ignored_during_execution
            if aff and aff.node_affinity
            else None
        )
        key = encode(terms)
        hit = self._preferred.get(key)
        if hit is None:
            hit = self._preferred[key] = self._per_label_group(
                node_label_keys(None, [wt.preference for wt in terms or ()]),
                partial(k8s_affinity.preferred_node_affinity_score, pod),
            )
        return hit

    def prefer_no_schedule_counts(self, tolerations: Sequence[Toleration] | None) -> list[int]:
        """Per node: the PreferNoSchedule taints the tolerations do not tolerate."""
        key = encode(tolerations)
        hit = self._prefer_no_schedule.get(key)
        if hit is None:
            hit = self._prefer_no_schedule[key] = self._prefer_no_schedule_counts(tolerations)
        return hit

    def _prefer_no_schedule_counts(self, tolerations: Sequence[Toleration] | None) -> list[int]:
        relevant = [t for t in tolerations or () if t.effect in ("", k8s_taints.TAINT_PREFER_NO_SCHEDULE)]
        by_sig = [
            sum(
                1
                for t in taints
                if t.effect == k8s_taints.TAINT_PREFER_NO_SCHEDULE
                and not k8s_taints.tolerates_taint(relevant, t)
            )
            for taints in self.sig_taints
        ]
        return [by_sig[s] for s in self.taint_sig]

    # ---------------------------------------------------------------- pods by namespace and label

    def _namespace_pods(self, namespace: str) -> dict[str, Pod]:
        pods = self._ns_pods.get(namespace)
        if pods is None:
            pods = self._ns_pods[namespace] = self.snapshot.pods_in_namespace_by_key(namespace)
        return pods

    def _by_label(self, namespace: str, key: str) -> dict[str, list[Pod]]:
        """The namespace's pods by their value of label ``key`` (lists: a value's pods are
        mostly one workload's, and a list entry is a fifth of a dict's)."""
        index = self._label_index.get((namespace, key))
        if index is None:
            index = {}
            for p in self._namespace_pods(namespace).values():
                labels = p.metadata.labels
                if labels:
                    value = labels.get(key)
                    if value is not None:
                        index.setdefault(value, []).append(p)
            self._label_index[(namespace, key)] = index
            self._label_keys.setdefault(namespace, []).append(key)
        return index

    def candidates(self, namespace: str, selector: LabelSelector | None) -> Collection[Pod]:
        """The namespace's pods a selector could match, narrowed by the label index: by one of
        its matchLabels, or by an ``In`` expression (the union of its values' pods)."""
        if selector is not None:
            if selector.match_labels:
                key, value = min(selector.match_labels.items())
                return self._by_label(namespace, key).get(value, _NO_PODS)
            for expr in selector.match_expressions or ():
                if expr.operator == "In" and expr.values:
                    index = self._by_label(namespace, expr.key)
                    lists = [index.get(v, _NO_PODS) for v in sorted(set(expr.values))]
                    return lists[0] if len(lists) == 1 else [p for pods in lists for p in pods]
        return self._namespace_pods(namespace).values()

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]]:
        if self._ns_labels is None:
            self._ns_labels = k8s_affinity.namespace_labels(
                (), self.snapshot.namespaces, pod_namespaces=self.snapshot.pod_namespaces()
            )
        return self._ns_labels

    def term_namespaces(self, pod: Pod, term: PodAffinityTerm) -> frozenset[str]:
        if term.namespace_selector is None:
            return frozenset(term.namespaces or ()) or frozenset((pod.metadata.namespace,))
        key = (pod.metadata.namespace, encode((term.namespaces, term.namespace_selector)))
        hit = self._term_ns.get(key)
        if hit is None:
            hit = self._term_ns[key] = k8s_affinity.pod_affinity_term_namespaces(
                pod, term, self.namespace_labels
            )
        return hit

    def term_index(self, pod: Pod, term: PodAffinityTerm) -> TermIndex:
        """The index of the pods matching ``term`` (declared by ``pod``). Raises SelectorError."""
        namespaces = self.term_namespaces(pod, term)
        key = (tuple(sorted(namespaces)), encode(term.label_selector))
        hit = self._terms.get(key)
        if hit is not None:
            return hit
        match = k8s_labels.compile_label_selector(term.label_selector, none_matches=False)
        ti = TermIndex(namespaces, match)
        index = self.index
        for ns in sorted(namespaces):
            for p in self.candidates(ns, term.label_selector):
                i = index.get(p.spec.node_name)
                if i is not None and k8s_pods.occupies_node(p) and match(p.metadata.labels or {}):
                    ti.by_node.setdefault(i, []).append(p)
            self._register(self._term_buckets, selector_bucket(ns, term.label_selector), ti)
        self._terms[key] = ti
        return ti

    # ---------------------------------------------------------------- topology spread

    def eligible(
        self, pod: Pod, required_keys: tuple[str, ...], c: TopologySpreadConstraint | None
    ) -> list[bool]:
        """Per node: whether it is a domain of the pod's constraint (has every required key and
        passes the node inclusion policies)."""
        honor_affinity = k8s_topologyspread.honors_node_affinity(c)
        honor_taints = k8s_topologyspread.honors_node_taints(c)
        key = (
            required_keys,
            affinity_shape(pod) if honor_affinity and has_node_constraint(pod) else None,
            encode(pod.spec.tolerations) if honor_taints else None,
        )
        hit = self._eligible.get(key)
        if hit is not None:
            return hit
        out = [True] * self.n
        for k in required_keys:
            out = [ok and value is not None for ok, value in zip(out, self.values_of(k), strict=True)]
        if key[1] is not None:
            out = [ok and matches for ok, matches in zip(out, self.node_affinity_ok(pod), strict=True)]
        if honor_taints:
            tolerated = [k8s_topologyspread.tolerates_node(pod, taints) for taints in self.sig_taints]
            out = [ok and tolerated[sig] for ok, sig in zip(out, self.taint_sig, strict=True)]
        self._eligible[key] = out
        return out

    def node_affinity_ok(self, pod: Pod) -> list[bool]:
        """Per node: whether it satisfies the pod's nodeSelector and required node affinity
        (memoised per affinity shape; judged once per distinct value of the labels they read)."""
        shape = affinity_shape(pod)
        hit = self._affinity_ok.get(shape)
        if hit is None:
            spec = pod.spec
            aff = spec.affinity
            required = (
                aff.node_affinity.required_during_scheduling_ignored_during_execution
                if (aff is not None and aff.node_affinity is not None)
                else None
            )
            keys = node_label_keys(spec.node_selector, required.node_selector_terms if required else ())
            hit = self._affinity_ok[shape] = self._per_label_group(
                keys, partial(k8s_affinity.pod_matches_node_selector, pod)
            )
        return hit

    def _per_label_group(self, keys: tuple[str, ...] | None, judge: Callable[[Node], _T]) -> list[_T]:
        """Per node, ``judge`` of it, where ``judge`` reads only node labels ``keys`` (None: it
        reads more, the node's name): judged once per group of nodes alike in those labels."""
        if keys is None:
            return [judge(node) for node in self.nodes]
        groups = self._label_groups.get(keys)
        if groups is None:
            if keys:
                rows: dict[tuple[str | None, ...], int] = {}
                group_of = [
                    rows.setdefault(row, len(rows))
                    for row in zip(*(self.values_of(k) for k in keys), strict=True)
                ]
            else:
                group_of = [0] * self.n
            first: dict[int, int] = {}
            for i, g in enumerate(group_of):
                first.setdefault(g, i)
            groups = self._label_groups[keys] = (group_of, list(first.values()))
        group_of, firsts = groups
        nodes = self.nodes
        verdicts = [judge(nodes[i]) for i in firsts]
        return [verdicts[g] for g in group_of]

    def counter(
        self,
        key: tuple[object, ...],
        namespace: str,
        topology_key: str,
        match: PodMatcher,
        eligible: list[bool],
        candidates: Callable[[], Iterable[Pod]],
        bucket: tuple[str, ...],
        all_match: bool = False,
    ) -> DomainCounter:
        """The counter of ``key``, made from ``candidates`` (a superset of the matching pods;
        ``all_match``: all of them match) when there is none yet."""
        hit = self._counters.get(key)
        if hit is not None:
            return hit
        index_get = self.index.get
        counts_pod = k8s_topologyspread.counts_pod
        at_nodes: list[int] = []
        for p in candidates():
            at = index_get(p.spec.node_name)
            if at is not None and eligible[at] and counts_pod(p) and (all_match or match(p)):
                at_nodes.append(at)
        return self._new_counter(key, namespace, topology_key, match, eligible, at_nodes, bucket)

    def _new_counter(
        self,
        key: tuple[object, ...],
        namespace: str,
        topology_key: str,
        match: PodMatcher,
        eligible: list[bool],
        at_nodes: Iterable[int],
        bucket: tuple[str, ...],
    ) -> DomainCounter:
        """A counter of the pods on nodes ``at_nodes`` (one entry per counted, matching pod;
        the nodes not ``eligible`` are skipped here), registered under ``key`` and ``bucket``."""
        template_key = (id(eligible), topology_key)
        domains = self._templates.get(template_key)
        if domains is None:
            domains = {}
            for value, ok in zip(self.values_of(topology_key), eligible, strict=True):
                if ok and value is not None:
                    domains[value] = 0
            self._templates[template_key] = domains
        counts: dict[str, int] = {}
        values = self.values_of(topology_key)
        for at in at_nodes:
            if eligible[at]:
                value = values[at]
                if value is not None and value in domains:
                    counts[value] = counts.get(value, 0) + 1
        counter = DomainCounter(namespace, topology_key, match, eligible, domains, counts)
        self._counters[key] = counter
        self._register(self._counter_buckets, bucket, counter)
        return counter

    def spread_constraints(self, pod: Pod, when: str) -> list[SpreadConstraint]:
        """The pod's constraints of one ``whenUnsatisfiable`` kind, with their domain counters.
        Raises SelectorError for an invalid selector."""
        tscs = [c for c in pod.spec.topology_spread_constraints or () if c.when_unsatisfiable == when]
        if not tscs:
            return []
        spec = pod.spec
        cache_key = digest(
            (
                when,
                pod.metadata.namespace,
                tscs,
                pod.metadata.labels,
                spec.node_selector,
                required_node_affinity(pod),
                spec.tolerations,
            )
        )
        hit = self._spread_cache.get(cache_key)
        if hit is not None:
            return hit
        hit = self._spread_cache[cache_key] = self._spread_constraints(pod, when, tscs)
        return hit

    def _spread_constraints(
        self, pod: Pod, when: str, tscs: list[TopologySpreadConstraint]
    ) -> list[SpreadConstraint]:
        required = tuple(sorted({c.topology_key for c in tscs}))
        namespace = pod.metadata.namespace
        labels = pod.metadata.labels or {}
        out: list[SpreadConstraint] = []
        for c in tscs:
            selector = k8s_labels.compile_label_selector(c.label_selector, none_matches=False)
            extra = k8s_topologyspread.match_label_pairs(c, labels)
            match = k8s_topologyspread.merged_pod_matcher(selector, extra)
            eligible = self.eligible(pod, required, c)
            key = ("sel", namespace, encode(c.label_selector), extra, c.topology_key, id(eligible))
            counter = self.counter(
                key,
                namespace,
                c.topology_key,
                match,
                eligible,
                self._candidates_of(namespace, c.label_selector),
                selector_bucket(namespace, c.label_selector),
            )
            out.append(
                SpreadConstraint(
                    counter, c.topology_key, c.max_skew, c.min_domains, 1 if match(pod) else 0, when
                )
            )
        return out

    def _candidates_of(self, namespace: str, selector: LabelSelector | None) -> Callable[[], Iterable[Pod]]:
        return lambda: self.candidates(namespace, selector)

    def default_spread_constraints(self, pod: Pod, when: str) -> list[SpreadConstraint]:
        """kube-scheduler's cluster-level default constraints of one ``whenUnsatisfiable`` kind
        for a pod without its own (``self.defaults``). With a snapshot that holds Services,
        ReplicaSets, StatefulSets or ReplicationControllers, over kube-scheduler's default
        selector; without any, over the pods of the same owner (standing in for the selectors of
        the owning ReplicaSet/StatefulSet/Service)."""
        defaults = [c for c in self.defaults.constraints if c.when_unsatisfiable == when]
        if not defaults:
            return []
        if self.snapshot.workloads_known:
            tscs = [
                c
                for c in self.snapshot.default_spread_constraints(pod, self.defaults)
                if c.when_unsatisfiable == when
            ]
            if not tscs:
                return []
            spec = pod.spec
            cache_key = encode(
                (
                    "defaults",
                    when,
                    pod.metadata.namespace,
                    tscs,
                    spec.node_selector,
                    required_node_affinity(pod),
                    spec.tolerations,
                )
            )
            hit = self._spread_cache.get(cache_key)
            if hit is None:
                hit = self._spread_cache[cache_key] = self._spread_constraints(pod, when, tscs)
            return hit
        ref = k8s_pods.controller_ref(pod)
        if ref is None or ref.kind not in _DEFAULT_SPREAD_OWNERS:
            return []
        namespace = pod.metadata.namespace
        kind, name = ref.kind, ref.name
        policies = tuple((c.node_affinity_policy, c.node_taints_policy) for c in defaults)
        cache_key = encode(
            (
                "default",
                when,
                namespace,
                kind,
                name,
                affinity_shape(pod),
                encode(pod.spec.tolerations),
                policies,
            )
            if self.defaults is not k8s_topologyspread.SYSTEM_DEFAULTS
            else ("default", namespace, kind, name, affinity_shape(pod))
        )
        hit = self._spread_cache.get(cache_key)
        if hit is not None:
            return hit

        def same_owner(p: Pod) -> bool:
            return p.metadata.namespace == namespace and any(
                r.kind == kind and r.name == name for r in p.metadata.owner_references or ()
            )

        owner = ("owner", namespace, kind, name)
        # the owner's counted pods' nodes: one pass for all the constraints (the snapshot's
        # pods of the owner all match)
        at_nodes: list[int] | None = None
        out: list[SpreadConstraint] = []
        for c, eligible in self._default_eligible(pod, when, defaults):
            topology_key = c.topology_key
            key = (*owner, topology_key, id(eligible))
            counter = self._counters.get(key)
            if counter is None:
                if at_nodes is None:
                    index_get = self.index.get
                    counts_pod = k8s_topologyspread.counts_pod
                    at_nodes = []
                    for p in self.snapshot.pods_of_owner(namespace, kind, name):
                        at = index_get(p.spec.node_name)
                        if at is not None and counts_pod(p):
                            at_nodes.append(at)
                counter = self._new_counter(
                    key, namespace, topology_key, same_owner, eligible, at_nodes, owner
                )
            out.append(SpreadConstraint(counter, topology_key, c.max_skew, c.min_domains, 1, when))
        self._spread_cache[cache_key] = out
        return out

    def _default_eligible(
        self, pod: Pod, when: str, defaults: list[TopologySpreadConstraint]
    ) -> list[tuple[TopologySpreadConstraint, list[bool]]]:
        """The default constraints of one kind (``defaults``), each with its eligible nodes for
        ``pod``: memoised by what :meth:`eligible` reads of a pod (its node affinity, its
        tolerations where a constraint honours taints)."""
        memo_key = (
            when,
            affinity_shape(pod),
            encode(pod.spec.tolerations)
            if any(k8s_topologyspread.honors_node_taints(c) for c in defaults)
            else None,
        )
        hit = self._default_eligibles.get(memo_key)
        if hit is None:
            hard_keys = tuple(sorted({c.topology_key for c in defaults}))
            hit = self._default_eligibles[memo_key] = [
                (c, self.eligible(pod, hard_keys if when != SCHEDULE_ANYWAY else (c.topology_key,), c))
                for c in defaults
            ]
        return hit

    # ---------------------------------------------------------------- incremental updates

    def _register(self, buckets: dict[tuple[str, ...], list[_T]], bucket: tuple[str, ...], item: _T) -> None:
        buckets.setdefault(bucket, []).append(item)
        if bucket[0] == "pair":
            self._pair_keys.setdefault(bucket[1], set()).add(bucket[2])

    def _buckets(self, ns: str, labels: Mapping[str, str]) -> list[tuple[str, ...]]:
        """The namespace's and label pairs' buckets a pod with ``labels`` falls in."""
        out: list[tuple[str, ...]] = [("ns", ns)]
        keys = self._pair_keys.get(ns)
        if keys:
            out.extend(("pair", ns, k, labels[k]) for k in keys if k in labels)
        return out

    def pod_changed(self, pod: Pod, i: int, added: bool) -> None:
        """Keep the spread counters and term indexes in step with a pod on node ``i`` that came
        (``added``) or went, as a fresh index would count it. The pods by namespace and label
        must follow the snapshot first (:meth:`pod_unlisted`, or :meth:`forget_pods`)."""
        if not k8s_pods.occupies_node(pod):
            return
        ns = pod.metadata.namespace
        labels = pod.metadata.labels or {}
        buckets = self._buckets(ns, labels)
        owners = {("owner", ns, r.kind, r.name) for r in pod.metadata.owner_references or ()}
        node_labels = self.labels[i]
        if pod.metadata.deletion_timestamp is None:
            for bucket in chain(buckets, owners):
                for counter in self._counter_buckets.get(bucket, ()):
                    if counter.eligible[i] and counter.match(pod):
                        value = node_labels.get(counter.key)
                        if value is not None:
                            if added:
                                counter.increment(value)
                            else:
                                counter.decrement(value)
        for bucket in buckets:
            for ti in self._term_buckets.get(bucket, ()):
                if ti.match(labels):
                    if added:
                        ti.add(pod, i, node_labels)
                    else:
                        ti.remove(pod, i, node_labels)

    def pod_terminating(self, pod: Pod, i: int) -> None:
        """``pod`` on node ``i`` is now terminating: spread constraints no longer count it
        (kube-scheduler skips pods with a deletionTimestamp there, and only there). The pods by
        namespace and label must follow the snapshot first (:meth:`pod_listed`)."""
        if not k8s_pods.occupies_node(pod) or pod.metadata.deletion_timestamp is not None:
            return
        ns = pod.metadata.namespace
        owners = {("owner", ns, r.kind, r.name) for r in pod.metadata.owner_references or ()}
        value_of = self.labels[i].get
        for bucket in chain(self._buckets(ns, pod.metadata.labels or {}), owners):
            for counter in self._counter_buckets.get(bucket, ()):
                if counter.eligible[i] and counter.match(pod):
                    value = value_of(counter.key)
                    if value is not None:
                        counter.decrement(value)

    def pod_unterminated(self, pod: Pod, i: int) -> None:
        """Undo :meth:`pod_terminating` for ``pod`` (the pod as it was before, no
        deletionTimestamp): spread constraints count it again. Drop the caches first."""
        if not k8s_pods.occupies_node(pod) or pod.metadata.deletion_timestamp is not None:
            return
        ns = pod.metadata.namespace
        owners = {("owner", ns, r.kind, r.name) for r in pod.metadata.owner_references or ()}
        value_of = self.labels[i].get
        for bucket in chain(self._buckets(ns, pod.metadata.labels or {}), owners):
            for counter in self._counter_buckets.get(bucket, ()):
                if counter.eligible[i] and counter.match(pod):
                    value = value_of(counter.key)
                    if value is not None:
                        counter.increment(value)

    def forget_pods(self) -> None:
        """Drop the pods by namespace and label (made again from the snapshot on demand)."""
        self._ns_pods = {}
        self._label_index = {}
        self._label_keys = {}

    def pod_listed(self, pod: Pod) -> None:
        """The snapshot took ``pod`` in (``ClusterSnapshot.add_pod``: a pod of the same key is
        replaced, and the pod goes last): the pods by namespace and label follow, as they would
        be made again from the snapshot."""
        self.pod_unlisted(pod)
        ns = pod.metadata.namespace
        key = pod.key
        pods = self._ns_pods.get(ns)
        if pods is not None:
            pods[key] = pod
        labels = pod.metadata.labels
        if labels:
            index = self._label_index
            for label in self._label_keys.get(ns, ()):
                value = labels.get(label)
                if value is not None:
                    index[(ns, label)].setdefault(value, []).append(pod)

    def pod_unlisted(self, pod: Pod) -> None:
        """The snapshot no longer has a pod of ``pod``'s key (``ClusterSnapshot.remove_pod``)."""
        ns = pod.metadata.namespace
        key = pod.key
        pods = self._ns_pods.get(ns)
        if pods is None:
            return  # no label index of the namespace either
        old = pods.pop(key, None)
        if old is None:
            return
        labels = old.metadata.labels
        if labels:
            index = self._label_index
            for label in self._label_keys.get(ns, ()):
                value = labels.get(label)
                if value is not None:
                    by_value = index[(ns, label)]
                    bucket = by_value[value]
                    del bucket[next(j for j, p in enumerate(bucket) if p is old)]
                    if not bucket:
                        del by_value[value]

    def pod_added(self, pod: Pod, i: int) -> None:
        """Keep the indexes in step with a pod bound to node ``i``."""
        ns = pod.metadata.namespace
        labels = pod.metadata.labels or {}
        self.pod_listed(pod)
        if not k8s_pods.occupies_node(pod):
            return
        buckets = self._buckets(ns, labels)
        node_labels = self.labels[i]
        counters = self._counter_buckets
        terms = self._term_buckets
        live = pod.metadata.deletion_timestamp is None
        for bucket in (
            *buckets,
            *(("owner", ns, r.kind, r.name) for r in pod.metadata.owner_references or ()),
        ):
            for counter in counters.get(bucket, ()):
                if live and counter.eligible[i] and counter.match(pod):
                    value = node_labels.get(counter.key)
                    if value is not None:
                        counter.increment(value)
        for bucket in buckets:
            for ti in terms.get(bucket, ()):
                if ti.match(labels):
                    ti.add(pod, i, node_labels)


def selector_bucket(namespace: str, selector: LabelSelector | None) -> tuple[str, ...]:
    """Which pods can match ``selector``: those with its first matchLabels pair, else any."""
    if selector is not None and selector.match_labels:
        k, v = min(selector.match_labels.items())
        return ("pair", namespace, k, v)
    return ("ns", namespace)
