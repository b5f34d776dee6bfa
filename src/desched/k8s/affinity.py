"""Node selectors and node affinity (``k8s.io/component-helpers/scheduling/corev1/nodeaffinity``),
and pod (anti-)affinity terms.

- ``matchExpressions`` test node labels with In, NotIn, Exists, DoesNotExist, Gt, Lt (Gt/Lt compare
  the label as an int64); ``matchFields`` support In/NotIn with exactly one value, against the
  node's fields, of which there is one: ``metadata.name`` (any other key reads as ""). A node with
  an empty name has no fields, and then ``matchFields`` are not checked at all, as upstream.
- A term's requirements are ANDed; a term with neither expressions nor fields matches nothing; a
  term that does not parse (unknown operator, bad key or value, wrong value count) matches
  nothing, while the selector's other terms still count (``LazyErrorNodeSelector``). Terms are ORed.
- The required node affinity of a pod is ``spec.nodeSelector`` (every pair equal) AND
  ``requiredDuringSchedulingIgnoredDuringExecution`` (kube-scheduler's NodeAffinity filter and
  descheduler's ``PodMatchNodeSelector``).
- The preferred score sums the weights of the matching preferred terms, each judged on its own
  (descheduler's ``GetNodeWeightGivenPodPreferredAffinity``: a term that does not parse adds 0).

Pod (anti-)affinity: a pod's required terms, kube-scheduler's rule for required pod affinity
(:func:`pod_affinity_satisfied`, also the placement simulator's), the namespaces a term selects
(``namespaceSelector`` matched against the namespaces' labels, made in one place:
:func:`namespace_labels`, read lazily through :class:`TermNamespaces`), and the core the two
pod-affinity plugins share: which pods a term selects (:class:`TermSelector`) and how many each
topology domain holds (:class:`DomainCounts`).

Compiled node selectors are cached per object (by identity, holding a reference), so testing one
pod against many nodes compiles its terms once. Affinity objects are treated as immutable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from desched.k8s._compile_cache import CompileCache
from desched.k8s.labels import (
    OP_DOES_NOT_EXIST,
    OP_EXISTS,
    OP_GT,
    OP_IN,
    OP_LT,
    OP_NOT_IN,
    Matcher,
    SelectorError,
    compile_label_selector,
    match_nothing,
    new_requirement,
    requirements_matcher,
)
from desched.k8s.objects import (
    Namespace,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    PreferredSchedulingTerm,
)

__all__ = [
    "NAMESPACE_NAME_LABEL",
    "NODE_FIELD_NAME",
    "CompiledTerm",
    "DomainCounts",
    "TermNamespaces",
    "TermSelector",
    "compile_node_selector_term",
    "has_preferred_node_affinity",
    "has_required_node_affinity",
    "namespace_labels",
    "node_selector_matches",
    "node_selector_requirement_matches",
    "node_selector_term_matches",
    "pod_affinity_satisfied",
    "pod_affinity_term_namespaces",
    "pod_matches_node_selector",
    "preferred_node_affinity_score",
    "required_pod_affinity_terms",
    "required_pod_anti_affinity_terms",
]

#: The only node field a matchFields requirement can read.
NODE_FIELD_NAME = "metadata.name"

_NODE_SELECTOR_OPERATORS = {
    "In": OP_IN,
    "NotIn": OP_NOT_IN,
    "Exists": OP_EXISTS,
    "DoesNotExist": OP_DOES_NOT_EXIST,
    "Gt": OP_GT,
    "Lt": OP_LT,
}

_LabelCheck = Callable[[Mapping[str, str]], bool]
_FieldCheck = tuple[str, str, bool]  # key, value, True for In / False for NotIn


class CompiledTerm:
    """A parsed NodeSelectorTerm: ``matches(labels, node_name)``."""

    __slots__ = ("fields", "labels")

    def __init__(self, labels: _LabelCheck | None, fields: tuple[_FieldCheck, ...]) -> None:
        self.labels = labels
        self.fields = fields

    def matches(self, node_labels: Mapping[str, str], node_name: str) -> bool:
        if self.labels is not None and not self.labels(node_labels):
            return False
        if self.fields and node_name:
            for key, value, is_in in self.fields:
                actual = node_name if key == NODE_FIELD_NAME else ""
                if (actual == value) != is_in:
                    return False
        return True


def _label_requirements(exprs: Sequence[NodeSelectorRequirement]) -> _LabelCheck:
    reqs = []
    for i, expr in enumerate(exprs):
        op = _NODE_SELECTOR_OPERATORS.get(expr.operator)
        if op is None:
            raise SelectorError(f"matchExpressions[{i}].operator: unsupported value {expr.operator!r}")
        try:
            reqs.append(new_requirement(expr.key, op, tuple(expr.values or ())))
        except SelectorError as e:
            raise SelectorError(f"matchExpressions[{i}]: {e}") from None
    return requirements_matcher(reqs)


def _field_requirements(exprs: Sequence[NodeSelectorRequirement]) -> tuple[_FieldCheck, ...]:
    out: list[_FieldCheck] = []
    for i, expr in enumerate(exprs):
        if expr.operator not in ("In", "NotIn"):
            raise SelectorError(
                f"matchFields[{i}].operator: unsupported value {expr.operator!r} (supported: In, NotIn)"
            )
        values = expr.values or []
        if len(values) != 1:
            raise SelectorError(f"matchFields[{i}].values: must have one element")
        out.append((expr.key, values[0], expr.operator == "In"))
    return tuple(out)


def compile_node_selector_term(term: NodeSelectorTerm) -> CompiledTerm | None:
    """Parse a term; None if it matches nothing (empty) — raises SelectorError if it is invalid."""
    exprs = term.match_expressions
    fields = term.match_fields
    if not exprs and not fields:
        return None
    labels = _label_requirements(exprs) if exprs else None
    field_checks = _field_requirements(fields) if fields else ()
    return CompiledTerm(labels, field_checks)


def _usable_term(term: NodeSelectorTerm) -> CompiledTerm | None:
    try:
        return compile_node_selector_term(term)
    except SelectorError:
        return None


# Two cache levels: by object identity (holding the object, so its id cannot be reused while
# cached), then by msgpack encoding, so that the equal affinities of a workload's pods share one
# compiled form.

_Terms = tuple[CompiledTerm, ...]
_Weighted = tuple[tuple[CompiledTerm, int], ...]


def _compile_selector(ns: NodeSelector) -> _Terms:
    return tuple(t for t in map(_usable_term, ns.node_selector_terms) if t is not None)


def _compile_preferred(terms: list[PreferredSchedulingTerm]) -> _Weighted:
    compiled: list[tuple[CompiledTerm, int]] = []
    for t in terms:
        if t.weight == 0:
            continue
        c = _usable_term(t.preference)
        if c is not None:
            compiled.append((c, t.weight))
    return tuple(compiled)


_selector_cache: CompileCache[NodeSelector, _Terms] = CompileCache(_compile_selector)
_term_cache: CompileCache[NodeSelectorTerm, CompiledTerm | None] = CompileCache(
    _usable_term, by_content=False
)
_preferred_cache: CompileCache[list[PreferredSchedulingTerm], _Weighted] = CompileCache(_compile_preferred)
_compiled_selector = _selector_cache.get
_compiled_term = _term_cache.get
_compiled_preferred = _preferred_cache.get


def node_selector_requirement_matches(
    req: NodeSelectorRequirement, node: Node, *, field: bool = False
) -> bool:
    """One requirement against a node: a label requirement, or with ``field=True`` a matchFields
    one. An invalid requirement matches nothing."""
    try:
        if field:
            (check,) = _field_requirements((req,))
            return CompiledTerm(None, (check,)).matches({}, node.metadata.name)
        return _label_requirements((req,))(node.metadata.labels or {})
    except SelectorError:
        return False


def node_selector_term_matches(term: NodeSelectorTerm, node: Node) -> bool:
    """A NodeSelectorTerm against a node (empty or invalid terms match nothing)."""
    compiled = _compiled_term(term)
    if compiled is None:
        return False
    return compiled.matches(node.metadata.labels or {}, node.metadata.name)


def node_selector_matches(ns: NodeSelector, node: Node) -> bool:
    """A NodeSelector against a node: any term matches (no terms: nothing matches)."""
    terms = _compiled_selector(ns)
    if not terms:
        return False
    labels = node.metadata.labels or {}
    name = node.metadata.name
    for term in terms:  # noqa: SIM110 -- hot path
        if term.matches(labels, name):
            return True
    return False


def pod_matches_node_selector(pod: Pod, node: Node) -> bool:
    """The pod's required node affinity: spec.nodeSelector AND requiredDuringScheduling... ."""
    spec = pod.spec
    required_labels = spec.node_selector
    if required_labels:
        labels = node.metadata.labels or {}
        for k, v in required_labels.items():
            if labels.get(k) != v:
                return False
    affinity = spec.affinity
    if affinity is not None:
        node_affinity = affinity.node_affinity
        if node_affinity is not None:
            required = node_affinity.required_during_scheduling_ignored_during_execution
            if required is not None:
                return node_selector_matches(required, node)
    return True


def preferred_node_affinity_score(pod: Pod, node: Node) -> int:
    """Sum of the weights of the pod's preferred node-affinity terms that match ``node``."""
    affinity = pod.spec.affinity
    if affinity is None or affinity.node_affinity is None:
        return 0
    preferred = affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    if not preferred:
        return 0
    labels = node.metadata.labels or {}
    name = node.metadata.name
    score = 0
    for term, weight in _compiled_preferred(preferred):
        if term.matches(labels, name):
            score += weight
    return score


def has_required_node_affinity(pod: Pod) -> bool:
    """``PodHasNodeAffinity(pod, requiredDuringSchedulingIgnoredDuringExecution)``."""
    affinity = pod.spec.affinity
    return (
        affinity is not None
        and affinity.node_affinity is not None
        and affinity.node_affinity.required_during_scheduling_ignored_during_execution is not None
    )


def has_preferred_node_affinity(pod: Pod) -> bool:
    """``PodHasNodeAffinity(pod, preferredDuringSchedulingIgnoredDuringExecution)``."""
    affinity = pod.spec.affinity
    return (
        affinity is not None
        and affinity.node_affinity is not None
        and bool(affinity.node_affinity.preferred_during_scheduling_ignored_during_execution)
    )


# --------------------------------------------------------------------------- pod (anti-)affinity terms

#: The label the API server sets on every namespace: its own name (immutable since Kubernetes 1.22).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def required_pod_affinity_terms(pod: Pod) -> list[PodAffinityTerm]:
    """The pod's ``podAffinity.requiredDuringSchedulingIgnoredDuringExecution`` terms."""
    affinity = pod.spec.affinity
    if affinity is None or affinity.pod_affinity is None:
        return []
    return affinity.pod_affinity.required_during_scheduling_ignored_during_execution or []


def pod_affinity_satisfied(
    topology_keys: Sequence[str],
    node_labels: Mapping[str, str],
    counts: Mapping[tuple[str, str], int],
    self_affine: bool,
) -> bool:
    """Whether a node passes the required pod affinity of a pod, as kube-scheduler's
    InterPodAffinity filter decides it.

    ``topology_keys`` are the topologyKeys of the pod's required affinity terms; ``counts`` holds,
    per (topology key, value), how many existing pods match *all* of the pod's terms (each such
    pod counted once per term, under the value its node has for that term's key); ``self_affine``
    whether the pod matches all of its own terms. The node must carry every key, and each of its
    values must have a matching pod; except that when no pod matches anywhere (``counts`` has no
    positive entry), a self-affine pod, the first of its group, may go to any node with the keys.
    """
    exist = True
    for key in topology_keys:
        value = node_labels.get(key)
        if value is None:
            return False  # every topology key must be on the node
        if counts.get((key, value), 0) <= 0:
            exist = False
    return exist or (self_affine and not any(n > 0 for n in counts.values()))


def required_pod_anti_affinity_terms(pod: Pod) -> list[PodAffinityTerm]:
    """The pod's ``podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`` terms."""
    affinity = pod.spec.affinity
    if affinity is None or affinity.pod_anti_affinity is None:
        return []
    return affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution or []


def namespace_labels(
    pods: Iterable[Pod], namespaces: Iterable[Namespace], *, pod_namespaces: Iterable[str] = ()
) -> dict[str, Mapping[str, str]]:
    """What a term's ``namespaceSelector`` is matched against: every namespace of ``pods`` (or
    ``pod_namespaces``: the namespaces of the pods, when known without a pass over them) and
    ``namespaces`` (name -> labels), each with its :data:`NAMESPACE_NAME_LABEL` (a namespace only
    known from its pods has that label alone)."""
    out: dict[str, Mapping[str, str]] = {}
    for ns in pod_namespaces:
        out[ns] = {NAMESPACE_NAME_LABEL: ns}
    for p in pods:
        ns = p.metadata.namespace
        if ns not in out:
            out[ns] = {NAMESPACE_NAME_LABEL: ns}
    for ns_obj in namespaces:
        name = ns_obj.metadata.name
        out[name] = {**(ns_obj.metadata.labels or {}), NAMESPACE_NAME_LABEL: name}
    return out


def pod_affinity_term_namespaces(
    pod: Pod, term: PodAffinityTerm, namespace_labels: Mapping[str, Mapping[str, str]]
) -> frozenset[str]:
    """The namespaces a pod's (anti-)affinity term selects pods in, as kube-scheduler reads it.

    ``term.namespaces`` united with the namespaces of ``namespace_labels`` (name -> labels) that
    ``term.namespaceSelector`` selects (an empty selector selects all, an invalid one none); the
    pod's own namespace when the list is empty and the selector is not set. (Upstream descheduler's
    ``GetNamespacesFromPodAffinityTerm`` reads only the list.)
    """
    names = set(term.namespaces or ())
    if term.namespace_selector is not None:
        try:
            match = compile_label_selector(term.namespace_selector, none_matches=False)
        except SelectorError:
            match = match_nothing
        names.update(ns for ns, labels in namespace_labels.items() if match(labels))
    elif not names:
        names.add(pod.metadata.namespace)
    return frozenset(names)


# --------------------------------------------------------------------------- the affinity core
# What RemovePodsViolatingInterPodAntiAffinity and RemovePodsViolatingPodAffinity share: the
# namespaces of a term (the namespaces' labels read in one place), which pods a term selects, and
# how many selected pods each topology domain holds.


class _PodsAndNamespaces(Protocol):
    """What :class:`TermNamespaces` reads of a cluster (a ``desched.cluster.view.ClusterView``)."""

    def iter_pods(self) -> Iterator[Pod]: ...

    @property
    def namespaces(self) -> Sequence[Namespace]: ...


class TermNamespaces:
    """The namespaces of (anti-)affinity terms in one cluster (:func:`pod_affinity_term_namespaces`):
    the namespaces' labels (:func:`namespace_labels`, every namespace of the cluster's pods and
    Namespace objects) are read once, when a term's ``namespaceSelector`` first needs them."""

    __slots__ = ("_cluster", "_labels")

    def __init__(self, cluster: _PodsAndNamespaces) -> None:
        self._cluster = cluster
        self._labels: Mapping[str, Mapping[str, str]] | None = None

    def of(self, pod: Pod, term: PodAffinityTerm) -> frozenset[str]:
        if term.namespace_selector is None:
            return pod_affinity_term_namespaces(pod, term, {})
        if self._labels is None:
            self._labels = namespace_labels(self._cluster.iter_pods(), self._cluster.namespaces)
        return pod_affinity_term_namespaces(pod, term, self._labels)


class TermSelector:
    """The pods one (anti-)affinity term of a pod selects: those in its namespaces that its label
    selector matches. A missing label selector matches nothing; an invalid one too, and ``valid``
    says so (kube-scheduler then fails the pod everywhere)."""

    __slots__ = ("match", "namespaces", "valid")

    def __init__(self, pod: Pod, term: PodAffinityTerm, namespaces: TermNamespaces) -> None:
        try:
            self.match: Matcher = compile_label_selector(term.label_selector, none_matches=False)
            self.valid = True
        except SelectorError:
            self.match, self.valid = match_nothing, False
        self.namespaces = namespaces.of(pod, term)

    def selects(self, pod: Pod) -> bool:
        return pod.metadata.namespace in self.namespaces and self.match(pod.metadata.labels or {})


class DomainCounts:
    """How many pods each topology domain holds, for the topology keys of a pod's terms: a pod is
    counted once per key, under (key, the value of that label on its node). A node without the
    label is in no domain of that key, unless ``node_without_key_is_a_domain`` (descheduler's
    anti-affinity check: such a node is a domain of its own)."""

    __slots__ = ("_by_node", "counts", "keys")

    def __init__(self, keys: Sequence[str], *, node_without_key_is_a_domain: bool = False) -> None:
        self.keys = tuple(keys)
        #: (topology key, value) -> pods
        self.counts: dict[tuple[str, str], int] = {}
        #: (topology key, node name) -> pods, for the nodes without the key (None: not counted)
        self._by_node: dict[tuple[str, str], int] | None = {} if node_without_key_is_a_domain else None

    def add(self, node_labels: Mapping[str, str], node_name: str, delta: int = 1) -> None:
        """Count (``delta`` -1: take back) a pod on the node of ``node_labels``."""
        counts = self.counts
        for key in self.keys:
            value = node_labels.get(key)
            if value is not None:
                pair = (key, value)
                counts[pair] = counts.get(pair, 0) + delta
            elif self._by_node is not None:
                own = (key, node_name)
                self._by_node[own] = self._by_node.get(own, 0) + delta

    def in_domain(self, key: str, node_labels: Mapping[str, str], node_name: str) -> int:
        """The pods counted in the domain of ``key`` that the node of ``node_labels`` is in."""
        value = node_labels.get(key)
        if value is not None:
            return self.counts.get((key, value), 0)
        return self._by_node.get((key, node_name), 0) if self._by_node is not None else 0

    def without(self, node_labels: Mapping[str, str]) -> Mapping[tuple[str, str], int]:
        """:attr:`counts` less one pod on the node of ``node_labels`` (a counted pod judged as if
        placed again), read-only and without a copy."""
        own: dict[tuple[str, str], int] = {}
        for key in self.keys:
            value = node_labels.get(key)
            if value is not None:
                own[(key, value)] = own.get((key, value), 0) + 1
        return _Less(self.counts, own)


class _Less(Mapping[tuple[str, str], int]):
    """``counts`` minus ``own``."""

    __slots__ = ("_counts", "_own")

    def __init__(self, counts: Mapping[tuple[str, str], int], own: Mapping[tuple[str, str], int]) -> None:
        self._counts = counts
        self._own = own

    def __getitem__(self, pair: tuple[str, str]) -> int:
        return self._counts[pair] - self._own.get(pair, 0)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._counts)

    def __len__(self) -> int:
        return len(self._counts)
