"""Property: every placement the simulator predicts passes kube-scheduler's filters, and every pod
it leaves Pending passes them on no node.

Random small clusters (nodes with zones, labels, taints, capacity, cordons; pods with requests,
tolerations, node selectors, required pod (anti-)affinity and topology spread constraints) lose
a random set of pods; the simulator places their replacements. Each decision is then replayed
against a brute-force re-check written here from the semantics package alone (``desched.k8s``),
in the order the simulator made them, with the pods placed before it counted.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders

from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import EvictionRecord, EvictionRequest
from desched.framework.framework import CycleResult
from desched.framework.types import EvictResult
from desched.k8s import affinity as k8s_affinity
from desched.k8s import labels as k8s_labels
from desched.k8s import resources as k8s_resources
from desched.k8s import taints as k8s_taints
from desched.k8s.objects import Node, Pod, PodAffinityTerm, Taint
from desched.scheduling.placement import ORDER_AFTER_CYCLE, SCORE_GENERIC, TERMINATING_GONE, PlacementOptions
from desched.scheduling.scorer import GenericScorerArgs
from desched.simulation import GONE, PENDING, PLACED, EvictionRecorder, simulate

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
APPS = ("web", "api", "db")
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "maint", "value": "", "effect": "NoExecute"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
)
TOLERATIONS = (
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "maint", "operator": "Exists"},
    {"operator": "Exists"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)


# ----------------------------------------------------------------------------- strategies


@st.composite
def nodes_strategy(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(1, 6))
    out = []
    for i in range(count):
        name = f"n{i}"
        labels = {HOST: name, "disk": draw(st.sampled_from(["ssd", "hdd"]))}
        if draw(st.integers(0, 9)) > 0:
            labels[ZONE] = draw(st.sampled_from(["a", "b", "c"]))
        alloc = {
            "cpu": draw(st.sampled_from(["1", "2", "4"])),
            "memory": draw(st.sampled_from(["1Gi", "2Gi", "4Gi"])),
            "pods": str(draw(st.integers(1, 8))),
        }
        node = builders.node(
            name,
            labels=labels,
            **alloc,
            unschedulable=draw(st.integers(0, 6)) == 0,  # drawn before the taints, as always
            taints=draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=lambda t: t["key"])),
        )
        out.append(node)
    return out


def term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def request_strategy(draw: st.DrawFn) -> dict[str, str]:
    return {
        "cpu": draw(st.sampled_from(["0", "100m", "300m", "700m", "1200m"])),
        "memory": draw(st.sampled_from(["0", "128Mi", "512Mi", "1Gi", "1500Mi"])),
    }


@st.composite
def pod_strategy(draw: st.DrawFn, index: int, node_names: list[str], sizes: dict[str, dict[str, str]]) -> Pod:
    app = draw(st.sampled_from(APPS))
    owner = draw(st.sampled_from(["ReplicaSet", "ReplicaSet", "StatefulSet", None]))
    labels = {"app": app, "pod-template-hash": f"{app}-h"}
    meta: dict[str, Any] = {
        "name": f"{app}-{index}",
        "namespace": draw(st.sampled_from(["default", "default", "other"])),
        "labels": labels,
    }
    if owner is not None:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{app}-{owner.lower()}", "controller": True}]
    # replicas of an app usually share their requests (one request class), sometimes not
    requests = sizes[app] if draw(st.integers(0, 3)) else request_strategy(draw)
    spec: dict[str, Any] = {
        "nodeName": draw(st.sampled_from(node_names)),
        "priority": draw(st.sampled_from([0, 0, 100])),
        "containers": [{"name": "c", "resources": {"requests": requests}}],
        "tolerations": draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2)),
    }
    if draw(st.integers(0, 4)) == 0:
        spec["nodeSelector"] = {"disk": draw(st.sampled_from(["ssd", "hdd"]))}
    affinity: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                term(draw(st.sampled_from(APPS)), draw(st.sampled_from([HOST, ZONE])))
            ]
        }
    if draw(st.integers(0, 6)) == 0:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [term(draw(st.sampled_from(APPS)), ZONE)]
        }
    if draw(st.integers(0, 5)) == 0:
        affinity["podAffinity"] = {
            **affinity.get("podAffinity", {}),
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": draw(st.integers(1, 100)),
                    "podAffinityTerm": term(draw(st.sampled_from(APPS)), HOST),
                }
            ],
        }
    if affinity:
        spec["affinity"] = affinity
    if draw(st.integers(0, 2)) == 0:
        constraint: dict[str, Any] = {
            "maxSkew": draw(st.integers(1, 2)),
            "topologyKey": draw(st.sampled_from([ZONE, HOST])),
            "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"])),
            "labelSelector": {"matchLabels": {"app": app}},
        }
        if draw(st.booleans()):
            constraint["matchLabelKeys"] = ["pod-template-hash"]
        if draw(st.integers(0, 4)) == 0:
            constraint["minDomains"] = draw(st.integers(1, 4))
        if draw(st.integers(0, 4)) == 0:
            constraint["nodeTaintsPolicy"] = "Honor"
        spec["topologySpreadConstraints"] = [constraint]
    doc = {"metadata": meta, "spec": spec, "status": {"phase": "Running"}}
    return msgspec.convert(doc, Pod, strict=False)


@st.composite
def cluster_strategy(draw: st.DrawFn) -> tuple[list[Node], list[Pod], list[int], bool]:
    nodes = draw(nodes_strategy())
    names = [n.metadata.name for n in nodes]
    sizes = {app: request_strategy(draw) for app in APPS}
    pods = [draw(pod_strategy(i, names, sizes)) for i in range(draw(st.integers(0, 14)))]
    evicted = (
        draw(st.lists(st.integers(0, max(0, len(pods) - 1)), unique=True, max_size=len(pods))) if pods else []
    )
    return nodes, pods, evicted, draw(st.booleans())


# ----------------------------------------------------------------------------- the cycle


#: What the simulated cycle asks the eviction backend.
REQUEST = EvictionRequest("p", "Random", "test")


# ----------------------------------------------------------------------------- the independent re-check


def occupying(p: Pod) -> bool:
    return bool(p.spec.node_name) and p.status.phase not in ("Succeeded", "Failed")


def term_matches(owner: Pod, t: PodAffinityTerm, target: Pod, ns_labels: dict[str, dict[str, str]]) -> bool:
    namespaces = k8s_affinity.pod_affinity_term_namespaces(owner, t, ns_labels)
    selector = k8s_labels.compile_label_selector(t.label_selector, none_matches=False)
    return target.metadata.namespace in namespaces and selector(target.metadata.labels or {})


def same_domain(a: Node, b: Node, key: str) -> bool:
    la, lb = a.metadata.labels or {}, b.metadata.labels or {}
    return key in la and key in lb and la[key] == lb[key]


def failure(pod: Pod, node: Node, bound: list[Pod], nodes: dict[str, Node]) -> str | None:
    """Why kube-scheduler's filters reject ``pod`` on ``node`` (None: they admit it)."""
    spec = pod.spec
    ns_labels = {ns: {k8s_affinity.NAMESPACE_NAME_LABEL: ns} for ns in ("default", "other")}
    if node.spec.unschedulable and not k8s_taints.tolerates_taint(
        spec.tolerations, Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
    ):
        return "unschedulable"
    if (
        k8s_taints.untolerated_taint(node.spec.taints, spec.tolerations, ("NoSchedule", "NoExecute"))
        is not None
    ):
        return "taint"
    if not k8s_affinity.pod_matches_node_selector(pod, node):
        return "node affinity"
    here = [q for q in bound if occupying(q) and q.spec.node_name == node.metadata.name]
    alloc = k8s_resources.node_allocatable(node)
    if len(here) + 1 > alloc.get("pods", 0):
        return "pods"
    used = k8s_resources.sum_resources(k8s_resources.pod_requests(q) for q in here)
    for name, amount in k8s_resources.pod_requests(pod).items():
        if amount > 0 and amount > alloc.get(name, 0) - used.get(name, 0):
            return f"insufficient {name}"
    # PodTopologySpread, DoNotSchedule
    hard = [c for c in spec.topology_spread_constraints or () if c.when_unsatisfiable == "DoNotSchedule"]
    keys = {c.topology_key for c in hard}
    labels = pod.metadata.labels or {}
    for c in hard:
        if c.topology_key not in (node.metadata.labels or {}):
            return "spread: missing label"
        selector = k8s_labels.compile_label_selector(c.label_selector, none_matches=False)
        extra = {k: labels[k] for k in c.match_label_keys or () if k in labels}

        def matches(q: Pod, selector: Any = selector, extra: dict[str, str] = extra) -> bool:
            ql = q.metadata.labels or {}
            return selector(ql) and all(ql.get(k) == v for k, v in extra.items())

        def eligible(n: Node, c: Any = c) -> bool:
            nl = n.metadata.labels or {}
            if not all(k in nl for k in keys) or not k8s_affinity.pod_matches_node_selector(pod, n):
                return False
            return (
                c.node_taints_policy != "Honor"
                or k8s_taints.untolerated_taint(n.spec.taints, spec.tolerations, ("NoSchedule", "NoExecute"))
                is None
            )

        domains = {(n.metadata.labels or {})[c.topology_key] for n in nodes.values() if eligible(n)}
        count = dict.fromkeys(domains, 0)
        for q in bound:
            qn = nodes[q.spec.node_name] if occupying(q) else None
            if (
                qn is None
                or q.metadata.namespace != pod.metadata.namespace
                or not eligible(qn)
                or not matches(q)
            ):
                continue
            count[(qn.metadata.labels or {})[c.topology_key]] += 1
        if c.min_domains is not None and len(domains) < c.min_domains:
            floor = 0
        else:
            floor = min(count.values()) if count else 1 << 40
        mine = (node.metadata.labels or {})[c.topology_key]
        if count.get(mine, 0) + (1 if matches(pod) else 0) - floor > c.max_skew:
            return "spread: skew"
    # InterPodAffinity: existing pods' anti-affinity
    for q in bound:
        if not occupying(q):
            continue
        for t in k8s_affinity.required_pod_anti_affinity_terms(q):
            if term_matches(q, t, pod, ns_labels) and same_domain(
                nodes[q.spec.node_name], node, t.topology_key
            ):
                return "existing anti-affinity"
    # the pod's own required affinity
    aff = spec.affinity
    terms = (
        (aff.pod_affinity.required_during_scheduling_ignored_during_execution or [])
        if aff and aff.pod_affinity
        else []
    )
    if terms:
        node_labels = node.metadata.labels or {}
        matching = [
            q for q in bound if occupying(q) and all(term_matches(pod, t, q, ns_labels) for t in terms)
        ]
        if not all(t.topology_key in node_labels for t in terms):
            return "affinity: missing label"
        exist = all(
            any(same_domain(nodes[q.spec.node_name], node, t.topology_key) for q in matching) for t in terms
        )
        any_pair = any(
            t.topology_key in (nodes[q.spec.node_name].metadata.labels or {}) for q in matching for t in terms
        )
        if not exist and (any_pair or not all(term_matches(pod, t, pod, ns_labels) for t in terms)):
            return "affinity"
    # the pod's own required anti-affinity
    for t in k8s_affinity.required_pod_anti_affinity_terms(pod):
        for q in bound:
            if (
                occupying(q)
                and term_matches(pod, t, q, ns_labels)
                and same_domain(nodes[q.spec.node_name], node, t.topology_key)
            ):
                return "anti-affinity"
    return None


# ----------------------------------------------------------------------------- the property


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_strategy())
def test_placements_pass_every_filter_and_pending_pods_fit_nowhere(
    case: tuple[list[Node], list[Pod], list[int], bool],
) -> None:
    nodes, pods, evicted_idx, generic = case
    snapshot = ClusterSnapshot(nodes=nodes, pods=pods)
    victims = [pods[i] for i in evicted_idx]

    def run(s: ClusterSnapshot, backend: EvictionRecorder, k: int) -> CycleResult:
        cycle = CycleResult(started=NOW, nodes=len(nodes))
        for p in victims:
            current = s.pod(p.metadata.namespace, p.metadata.name)
            assert current is not None
            backend.evict(current, REQUEST)
            cycle.records.append(
                EvictionRecord(
                    p.metadata.namespace,
                    p.metadata.name,
                    p.spec.node_name,
                    "p",
                    "Random",
                    "",
                    EvictResult.EVICTED,
                )
            )
        return cycle

    # the model this brute force replays: every evicted pod gone, then every replacement (the
    # interleaved and terminating models are checked against a fresh simulator in
    # test_placement_incremental.py)
    after = {"order": ORDER_AFTER_CYCLE, "terminating": TERMINATING_GONE}
    options = PlacementOptions(**after)
    if generic:
        args = GenericScorerArgs.model_validate(
            {
                "allocated": {
                    "values": "RatioToAllocatable",
                    "prefer": "Most",
                    "resources": {"cpu": 1, "memory": 1},
                }
            }
        )
        options = PlacementOptions(score=SCORE_GENERIC, generic=args, **after)
    victim_keys = {p.key for p in victims}
    sim = simulate(snapshot, run, now=NOW, options=options)

    by_name = {n.metadata.name: n for n in nodes}
    bound = [p for p in pods if p.key not in victim_keys]
    decided = 0
    for placement in sim.placements:
        if placement.outcome == GONE:
            continue
        replacement = snapshot.pod(placement.namespace, placement.replacement)
        assert replacement is not None
        if placement.outcome == PLACED:
            why = failure(replacement, by_name[placement.node], bound, by_name)
            assert why is None, f"{placement.namespace}/{placement.replacement} on {placement.node}: {why}"
            bound.append(replacement)
        else:
            assert placement.outcome == PENDING
            for n in nodes:
                assert failure(replacement, n, bound, by_name) is not None, (
                    f"{placement.replacement} left Pending but fits {n.metadata.name}: {placement.reason}"
                )
            assert placement.reason.startswith(f"0/{len(nodes)} nodes are available")
        decided += 1
    owned_running = [p for p in victims if p.metadata.owner_references]
    assert decided == len(owned_running)
