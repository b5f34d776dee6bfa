"""One consistent view of a cluster for one descheduling cycle, with the indexes decisions need.

A snapshot is built once from a source (a file or the live cache) and is then the only thing the
plugins see. The framework removes each evicted pod from it (whichever eviction backend ran), so
a plugin that runs later in the cycle sees it gone; every index is kept in step.

Pods and nodes are held in a canonical order (nodes by name, pods by namespace and name) so that
a decision never depends on the order a source happened to list objects in.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from desched.k8s import labels as k8s_labels
from desched.k8s import nodes as k8s_nodes
from desched.k8s import resources as k8s_resources
from desched.k8s import topologyspread as k8s_tsc
from desched.k8s.objects import (
    Container,
    Deployment,
    Event,
    Namespace,
    Node,
    OwnerReference,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    Service,
    TopologySpreadConstraint,
    Workload,
)
from desched.k8s.pods import FINISHED_PHASES as _FINISHED
from desched.k8s.pods import occupies_node
from desched.k8s.resources import Resources

OwnerKey = tuple[str, str, str]
"""(namespace, owner kind, owner name)."""


@dataclass(slots=True)
class _NodeUsage:
    requested: Resources = field(default_factory=dict)
    pod_count: int = 0


class RequestsMemo:
    """Pods' requests by resource spec, kept from one snapshot to the next (the live cache's: a
    cycle's snapshot computes only the requests of specs it has not seen; 0.5 of 1.4 CPU-s of an
    event-driven cycle's snapshot at 30,000 pods). Safe because records are never changed in
    place (see cluster.compact) and the dicts it hands out are never changed."""

    def __init__(self) -> None:
        #: by the identity of a pod's containers and init containers lists; the lists are kept,
        #: so that their ids are not reused
        self.by_parts: dict[object, tuple[list[Container], list[Container] | None, Resources]] = {}
        self.by_shape: dict[tuple[object, ...], Resources] = {}

    def trim(self, pods: int) -> None:
        """Forget everything once it holds far more specs than there are pods (deleted pods' lists)."""
        if len(self.by_parts) > 2 * pods + 1000 or len(self.by_shape) > 2 * pods + 1000:
            self.by_parts.clear()
            self.by_shape.clear()


class ClusterSnapshot:
    """Nodes, pods and the objects around them, indexed. Its pods change only through
    :meth:`remove_pod` (an eviction) and :meth:`add_pod` (the placement simulator binding a pod
    again); everything else is fixed when it is built, and no record is mutated in place. Plugins
    read it as a :class:`~desched.cluster.view.ClusterView`."""

    def __init__(
        self,
        *,
        nodes: Iterable[Node] = (),
        pods: Iterable[Pod] = (),
        namespaces: Iterable[Namespace] = (),
        pdbs: Iterable[PodDisruptionBudget] = (),
        priority_classes: Iterable[PriorityClass] = (),
        pvcs: Iterable[PersistentVolumeClaim] = (),
        events: Iterable[Event] = (),
        workloads: Iterable[Workload] = (),
        requests_memo: RequestsMemo | None = None,
        deployments: Iterable[Deployment] = (),
    ) -> None:
        self._nodes: dict[str, Node] = {n.metadata.name: n for n in sorted(nodes, key=_node_sort_key)}
        self._pods: dict[str, Pod] = {}
        self._namespaces: dict[str, Namespace] = {ns.metadata.name: ns for ns in namespaces}
        self._pdbs: list[PodDisruptionBudget] = list(pdbs)
        self._priority_classes: dict[str, PriorityClass] = {pc.metadata.name: pc for pc in priority_classes}
        self._pvcs: dict[tuple[str, str], PersistentVolumeClaim] = {
            (c.metadata.namespace, c.metadata.name): c for c in pvcs
        }
        self._events: list[Event] = list(events)
        self._workloads: list[Workload] = list(workloads)
        self._deployments: dict[tuple[str, str], Deployment] = {
            (d.metadata.namespace, d.metadata.name): d for d in deployments
        }
        self._services_by_ns: dict[str, list[Service]] = {}
        self._controllers: dict[tuple[str, str, str], Workload] = {}
        for w in self._workloads:
            meta = w.metadata
            if isinstance(w, Service):
                self._services_by_ns.setdefault(meta.namespace, []).append(w)
            else:
                self._controllers[(meta.namespace, type(w).__name__, meta.name)] = w

        self._requests: dict[str, Resources] = {}
        # By the identity of a pod's containers and init containers lists (pods of one workload
        # share theirs, see cluster.compact), for pods whose requests depend on nothing else, and
        # by what the requests are made of: this snapshot's, or kept across snapshots.
        memo = requests_memo if requests_memo is not None else RequestsMemo()
        self._memo = memo
        self._requests_by_shape = memo.by_shape
        self._requests_by_parts = memo.by_parts
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._by_owner: dict[OwnerKey, dict[str, Pod]] = {}
        self._by_namespace: dict[str, dict[str, Pod]] = {}
        self._usage: dict[str, _NodeUsage] = {}
        self._removed: dict[str, Pod] = {}
        #: Bumped by every remove_pod/add_pod, and by add_pod alone: caches built over the snapshot
        #: (e.g. scheduling.nodefit) compare them to know whether they are still valid.
        self.version = 0
        self.additions = 0
        self._index_all(pods)
        #: The pod indexes are as :meth:`_index_all` built them (no pod removed, added or
        #: reordered since): :meth:`copy` may then copy them rather than build them again.
        self._as_built = True
        self._pdbs_by_ns: dict[str, list[PodDisruptionBudget]] = {}
        self._pdb_index: dict[str, _PdbIndex] = {}
        for pdb in self._pdbs:
            self._pdbs_by_ns.setdefault(pdb.metadata.namespace, []).append(pdb)
        self._events_by_object: dict[tuple[str, str, str], list[Event]] = {}
        for ev in self._events:
            io = ev.involved_object
            self._events_by_object.setdefault((io.kind, io.namespace, io.name), []).append(ev)

    # ------------------------------------------------------------------ indexing

    def _index_all(self, pods: Iterable[Pod]) -> None:
        """Take in the pods, in the canonical order: :meth:`_index` for each, faster.

        What the indexes need of each pod is read in the source's order (the order of the pods'
        records in memory, when they were just decoded), and only these rows are then sorted.
        """
        shared_requests = self.shared_requests
        rows_by_namespace: dict[str, list[_Row]] = {}
        for pod in pods:
            meta = pod.metadata
            node = pod.spec.node_name
            # (occupies_node)
            requests = shared_requests(pod) if node and pod.status.phase not in _FINISHED else None
            row = (meta.name, pod, node, meta.owner_references, requests)
            rows = rows_by_namespace.get(meta.namespace)
            if rows is None:
                rows_by_namespace[meta.namespace] = [row]
            else:
                rows.append(row)
        all_pods = self._pods
        by_node = self._by_node
        by_owner = self._by_owner
        usages = self._usage
        for namespace in sorted(rows_by_namespace):
            rows = rows_by_namespace[namespace]
            rows.sort(key=_row_name)  # (stable: pods of one key stay in the source's order)
            prefix = namespace + "/"
            keys = [prefix + row[0] for row in rows]  # (Pod.key)
            self._by_namespace[namespace] = in_namespace = dict(
                zip(keys, [row[1] for row in rows], strict=True)
            )
            all_pods.update(in_namespace)
            if len(in_namespace) < len(rows):  # pods of one key: the last one stays
                for key, pod in in_namespace.items():
                    self._index(pod, key)
                continue
            for key, (_, pod, node, refs, requests) in zip(keys, rows, strict=True):
                on_node = by_node.get(node)
                if on_node is None:
                    on_node = by_node[node] = {}
                on_node[key] = pod
                if refs:
                    for ref in refs:
                        owner = (namespace, ref.kind, ref.name)
                        of_owner = by_owner.get(owner)
                        if of_owner is None:
                            of_owner = by_owner[owner] = {}
                        of_owner[key] = pod
                if requests is not None:
                    usage = usages.get(node)
                    if usage is None:
                        usage = usages[node] = _NodeUsage()
                    _accumulate(usage.requested, requests, 1)
                    usage.pod_count += 1

    def _index(self, pod: Pod, key: str) -> None:
        node = pod.spec.node_name
        namespace = pod.metadata.namespace
        on_node = self._by_node.get(node)
        if on_node is None:
            on_node = self._by_node[node] = {}
        on_node[key] = pod
        in_namespace = self._by_namespace.get(namespace)
        if in_namespace is None:
            in_namespace = self._by_namespace[namespace] = {}
        in_namespace[key] = pod
        refs = pod.metadata.owner_references
        if refs:
            for ref in refs:
                owner = (namespace, ref.kind, ref.name)
                of_owner = self._by_owner.get(owner)
                if of_owner is None:
                    of_owner = self._by_owner[owner] = {}
                of_owner[key] = pod
        if node and pod.status.phase not in _FINISHED:  # (occupies_node)
            usage = self._usage.get(node)
            if usage is None:
                usage = self._usage[node] = _NodeUsage()
            _accumulate(usage.requested, self.shared_requests(pod), 1)
            usage.pod_count += 1

    def _unindex(self, pod: Pod, key: str) -> None:
        self._by_node.get(pod.spec.node_name, {}).pop(key, None)
        self._by_namespace.get(pod.metadata.namespace, {}).pop(key, None)
        for ref in pod.metadata.owner_references or ():
            self._by_owner.get((pod.metadata.namespace, ref.kind, ref.name), {}).pop(key, None)
        if pod.spec.node_name and occupies_node(pod):
            usage = self._usage.get(pod.spec.node_name)
            if usage is not None:
                _accumulate(usage.requested, self.shared_requests(pod), -1)
                usage.pod_count -= 1

    # ------------------------------------------------------------------ mutation

    def remove_pod(self, pod: Pod) -> bool:
        """Take an evicted pod out of the view. Returns False if it was not (or no longer) there."""
        key = pod.key
        current = self._pods.pop(key, None)
        if current is None:
            return False
        self._unindex(current, key)
        self._removed[key] = current
        self._as_built = False
        self.version += 1
        return True

    def add_pod(self, pod: Pod) -> None:
        """Put a pod in (the placement simulator binds evicted pods again with this)."""
        key = pod.key  # (one string for every index: a pod's key is made afresh each time)
        old = self._pods.pop(key, None)
        if old is not None:
            self._unindex(old, key)
        self._requests.pop(key, None)
        self._pods[key] = pod
        self._removed.pop(key, None)
        self._index(pod, key)
        self._as_built = False
        self.version += 1
        self.additions += 1

    def reorder(self) -> None:
        """Put the pods back in the canonical order (namespace, then name) in every index, as a
        snapshot read afresh lists them: :meth:`add_pod` appends, so after the placement
        simulator has bound replacements the next simulated cycle would otherwise meet them last
        wherever a plugin takes pods in listing order, where a live ``run``'s next cycle meets
        them by name."""

        def canonical(pods: dict[str, Pod]) -> dict[str, Pod]:
            return dict(sorted(pods.items(), key=lambda kv: (kv[1].metadata.namespace, kv[1].metadata.name)))

        self._pods = canonical(self._pods)
        self._by_node = {node: canonical(pods) for node, pods in self._by_node.items()}
        self._by_namespace = {ns: canonical(pods) for ns, pods in self._by_namespace.items()}
        self._by_owner = {owner: canonical(pods) for owner, pods in self._by_owner.items()}
        self._as_built = False
        self.version += 1

    def replace_nodes(self, nodes: Iterable[Node]) -> None:
        """Put these versions of known nodes in place of the old ones (a simulated cycle's node
        actions: the next cycle reads the nodes as the live run's next cycle would)."""
        for node in nodes:
            if node.metadata.name in self._nodes:
                self._nodes[node.metadata.name] = node
        self.version += 1

    def was_removed(self, pod: Pod) -> bool:
        return pod.key in self._removed

    def copy(self) -> ClusterSnapshot:
        """An independent working copy (objects are shared; they are never mutated in place),
        indexed as a snapshot built afresh from this one's nodes and pods would be.

        While no pod was removed, added or reordered, the indexes are exactly what building them
        again would give (same keys, same order: :meth:`_index_all` is canonical): they are copied
        (their key strings shared), which is several times faster than building them again and
        keeps one key string per pod. The requests memo is shared (safe, see
        :class:`RequestsMemo`)."""
        if not self._as_built:
            return self._rebuilt()
        new = ClusterSnapshot(
            nodes=self._nodes.values(),
            namespaces=self._namespaces.values(),
            pdbs=self._pdbs,
            priority_classes=self._priority_classes.values(),
            pvcs=self._pvcs.values(),
            events=self._events,
            workloads=self._workloads,
            deployments=self._deployments.values(),
            requests_memo=self._memo,
        )
        new._pods = dict(self._pods)
        new._by_node = {node: dict(pods) for node, pods in self._by_node.items()}
        new._by_namespace = {ns: dict(pods) for ns, pods in self._by_namespace.items()}
        new._by_owner = {owner: dict(pods) for owner, pods in self._by_owner.items()}
        new._usage = {
            node: _NodeUsage(dict(usage.requested), usage.pod_count) for node, usage in self._usage.items()
        }
        return new

    def _rebuilt(self) -> ClusterSnapshot:
        """:meth:`copy` by building every index again from the nodes and pods."""
        return ClusterSnapshot(
            nodes=self._nodes.values(),
            pods=self._pods.values(),
            namespaces=self._namespaces.values(),
            pdbs=self._pdbs,
            priority_classes=self._priority_classes.values(),
            pvcs=self._pvcs.values(),
            events=self._events,
            workloads=self._workloads,
            deployments=self._deployments.values(),
        )

    # ------------------------------------------------------------------ nodes

    @property
    def nodes(self) -> Sequence[Node]:
        return list(self._nodes.values())

    def node(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def ready_nodes(self, selector: str | None = None) -> list[Node]:
        """Ready nodes (upstream's rule), optionally those matching a label-selector string."""
        match = k8s_labels.parse_selector_string(selector) if selector else None
        return [
            n
            for n in self._nodes.values()
            if k8s_nodes.is_node_ready(n) and (match is None or match(n.metadata.labels or {}))
        ]

    def allocatable(self, node: Node) -> Resources:
        return k8s_resources.node_allocatable(node)

    def requested_on(self, node_name: str) -> Resources:
        """Sum of the requests of the pods occupying a node (running or pending-bound, not finished)."""
        usage = self._usage.get(node_name)
        return dict(usage.requested) if usage else {}

    def pod_count_on(self, node_name: str) -> int:
        usage = self._usage.get(node_name)
        return usage.pod_count if usage else 0

    # ------------------------------------------------------------------ pods

    @property
    def pods(self) -> Sequence[Pod]:
        return list(self._pods.values())

    def iter_pods(self) -> Iterator[Pod]:
        return iter(list(self._pods.values()))

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self._pods.get(f"{namespace}/{name}")

    def pods_on_node(self, node_name: str) -> list[Pod]:
        return list(self._by_node.get(node_name, {}).values())

    def pods_in_namespace(self, namespace: str) -> list[Pod]:
        return list(self._by_namespace.get(namespace, {}).values())

    def pod_namespaces(self) -> list[str]:
        """The namespaces that hold pods (without a pass over the pods)."""
        return [ns for ns, pods in self._by_namespace.items() if pods]

    def pods_in_namespace_by_key(self, namespace: str) -> dict[str, Pod]:
        """The namespace's pods by :attr:`Pod.key`, in order (a copy; the keys are the view's own
        strings, not new ones)."""
        return dict(self._by_namespace.get(namespace, {}))

    def pods_of_owner(self, namespace: str, kind: str, name: str) -> list[Pod]:
        return list(self._by_owner.get((namespace, kind, name), {}).values())

    def owner_pod_count(self, namespace: str, kind: str, name: str) -> int:
        """How many pods of the view name this owner (``len(pods_of_owner(...))``, without the list)."""
        pods = self._by_owner.get((namespace, kind, name))
        return len(pods) if pods else 0

    def owners(self) -> list[OwnerKey]:
        """Every (namespace, owner kind, owner name) that some pod of the view names as an owner."""
        return [key for key, pods in self._by_owner.items() if pods]

    def requests(self, pod: Pod) -> Resources:
        """The pod's effective requests (containers, init and sidecar containers, overhead)."""
        key = pod.key
        cached = self._requests.get(key)
        if cached is None:
            # each pod its own copy (computed when first asked for)
            cached = self._requests[key] = dict(self.shared_requests(pod))
        return cached

    def shared_requests(self, pod: Pod) -> Resources:
        """:meth:`requests`, but one dict shared by the pods of one resource spec and not kept
        per pod: never change it."""
        # The pods of one workload share their resource specs: computed once per distinct spec
        # (the quantities as written).
        spec = pod.spec
        containers, init = spec.containers, spec.init_containers
        parts: object = None
        if not spec.overhead and spec.resources is None:
            parts = id(containers) if init is None else (id(containers), id(init))
            hit = self._requests_by_parts.get(parts)
            if hit is not None and hit[0] is containers and hit[1] is init:
                return hit[2]
        shape = _requests_shape(pod)
        by_shape = self._requests_by_shape.get(shape)
        if by_shape is None:
            by_shape = self._requests_by_shape[shape] = k8s_resources.pod_requests(pod)
        if parts is not None:
            self._requests_by_parts[parts] = (containers, init, by_shape)
        return by_shape

    # ------------------------------------------------------------------ the rest

    @property
    def namespaces(self) -> Sequence[Namespace]:
        return list(self._namespaces.values())

    def namespace(self, name: str) -> Namespace | None:
        return self._namespaces.get(name)

    @property
    def priority_classes(self) -> dict[str, PriorityClass]:
        return self._priority_classes

    def pvc(self, namespace: str, name: str) -> PersistentVolumeClaim | None:
        return self._pvcs.get((namespace, name))

    @property
    def pdbs(self) -> Sequence[PodDisruptionBudget]:
        return self._pdbs

    def pdbs_for_pod(self, pod: Pod) -> list[PodDisruptionBudget]:
        """PDBs in the pod's namespace whose selector matches it (a nil selector matches nothing),
        in the snapshot's order."""
        ns = pod.metadata.namespace
        index = self._pdb_index.get(ns)
        if index is None:
            # built once per namespace (the PDBs never change): matching each of a namespace's
            # PDBs against every pod evicted was 1.2 s of a 5,000-node simulate (~40 PDBs in a
            # namespace); by their first matchLabels pair, a pod meets only those it can match
            index = self._pdb_index[ns] = _PdbIndex(self._pdbs_by_ns.get(ns, ()))
        return index.matching(pod.metadata.labels or {})

    @property
    def events(self) -> Sequence[Event]:
        return self._events

    def events_for(self, kind: str, namespace: str, name: str) -> list[Event]:
        return list(self._events_by_object.get((kind, namespace, name), ()))

    # ------------------------------------------------------------------ default spread constraints

    def controller(self, namespace: str, kind: str, name: str) -> Workload | None:
        """The snapshot's ReplicaSet, StatefulSet or ReplicationController of that name, if held."""
        return self._controllers.get((namespace, kind, name))

    def deployment(self, namespace: str, name: str) -> Deployment | None:
        """The snapshot's Deployment of that name, if held (``evictionPolicy.surge``)."""
        return self._deployments.get((namespace, name))

    @property
    def workloads_known(self) -> bool:
        """The snapshot holds Services, ReplicaSets, StatefulSets or ReplicationControllers (the
        objects the default spread selector is made of)."""
        return bool(self._workloads)

    def default_spread_constraints(
        self, pod: Pod, defaults: k8s_tsc.DefaultConstraints
    ) -> list[TopologySpreadConstraint]:
        """The cluster-level ``defaults`` as kube-scheduler applies them to ``pod``: none if it
        declares constraints of its own, else each with the default selector made of the
        snapshot's Services and the pod's controller (:func:`desched.k8s.topologyspread.default_selector`)."""
        if pod.spec.topology_spread_constraints or not defaults.constraints:
            return []
        ns = pod.metadata.namespace
        controllers = self._controllers
        selector = k8s_tsc.default_selector(
            pod,
            self._services_by_ns.get(ns, ()),
            lambda kind, name: controllers.get((ns, kind, name)),
        )
        return k8s_tsc.default_constraints(defaults, selector)

    def __repr__(self) -> str:
        return f"ClusterSnapshot(nodes={len(self._nodes)}, pods={len(self._pods)})"


def _node_sort_key(node: Node) -> str:
    return node.metadata.name


_Row = tuple[str, Pod, str, list[OwnerReference] | None, Resources | None]
"""What :meth:`ClusterSnapshot._index_all` needs of a pod: name, pod, node, owners, requests."""
_row_name: Callable[[_Row], str] = operator.itemgetter(0)


def _requests_shape(pod: Pod) -> tuple[object, ...]:
    """Everything :func:`k8s_resources.pod_requests` reads, as a hashable key."""
    spec = pod.spec
    containers = tuple(
        tuple(c.resources.requests.items()) if c.resources is not None and c.resources.requests else ()
        for c in spec.containers
    )
    init = spec.init_containers
    pod_level = spec.resources
    if not init and not spec.overhead and (pod_level is None or not pod_level.requests):
        return containers
    return (
        containers,
        tuple(
            (
                c.restart_policy,
                tuple(c.resources.requests.items())
                if c.resources is not None and c.resources.requests
                else (),
            )
            for c in init or ()
        ),
        tuple(spec.overhead.items()) if spec.overhead else (),
        tuple(pod_level.requests.items()) if pod_level is not None and pod_level.requests else (),
        None,  # never equal to a containers-only key
    )


def _accumulate(into: Resources, add: Resources, sign: int) -> None:
    for name, amount in add.items():
        into[name] = into.get(name, 0) + sign * amount


class _PdbIndex:
    """A namespace's PDBs by the first pair (in key order) of their selector's matchLabels: a pod
    can only match a PDB whose pair it carries. PDBs without matchLabels are tried on every pod."""

    __slots__ = ("_by_key", "_rest")

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        #: label key -> label value -> (position, PDB, its selector's matcher)
        self._by_key: dict[str, dict[str, list[tuple[int, PodDisruptionBudget, k8s_labels.Matcher]]]] = {}
        self._rest: list[tuple[int, PodDisruptionBudget, k8s_labels.Matcher]] = []
        for at, pdb in enumerate(pdbs):
            sel = pdb.spec.selector
            entry = (at, pdb, k8s_labels.compile_label_selector(sel, none_matches=False))
            if sel is not None and sel.match_labels:
                k, v = min(sel.match_labels.items())
                self._by_key.setdefault(k, {}).setdefault(v, []).append(entry)
            else:
                self._rest.append(entry)

    def matching(self, labels: Mapping[str, str]) -> list[PodDisruptionBudget]:
        found = [e for e in self._rest if e[2](labels)]
        for key, by_value in self._by_key.items():
            value = labels.get(key)
            if value is not None:
                entries = by_value.get(value)
                if entries is not None:
                    found.extend(e for e in entries if e[2](labels))
        if len(found) > 1:
            found.sort(key=_first)
        return [e[1] for e in found]


def _first(entry: tuple[int, PodDisruptionBudget, k8s_labels.Matcher]) -> int:
    return entry[0]
