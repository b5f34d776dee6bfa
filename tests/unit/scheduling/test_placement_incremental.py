"""The placement simulator's kept state (per-pod-class memos, request classes' fit lists and
resource scores, spread counters, term indexes and their per-node views, existing pods'
anti-affinity) and the picture brought up to date from an earlier one must give what a fresh
computation over the same snapshot gives.

A stale cache would show as a decision (node, score, reason, nodes found) or a picture that
differs from the fresh one's.
"""

from __future__ import annotations

from datetime import UTC, datetime
from operator import is_
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import Node, Pod
from desched.scheduling.placement import Decision, PlacementSimulator
from desched.simulation import cluster_picture

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
APPS = ("web", "api", "db")
TAINTS = (
    {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "value": "true", "effect": "PreferNoSchedule"},
    {"key": "old", "value": "", "effect": "PreferNoSchedule"},
)
TOLERATIONS = (
    {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
    {"key": "spot", "operator": "Exists"},
)


def make_node(name: str, doc: dict[str, Any]) -> Node:
    return msgspec.convert({"metadata": {"name": name, **doc.pop("metadata", {})}, **doc}, Node, strict=False)


@st.composite
def nodes_strategy(draw: st.DrawFn) -> list[Node]:
    out = []
    for i in range(draw(st.integers(1, 9))):
        name = f"n{i}"
        labels = {"disk": draw(st.sampled_from(["ssd", "hdd"]))}
        if draw(st.integers(0, 9)):
            labels[HOST] = name
        if draw(st.integers(0, 9)):
            labels[ZONE] = draw(st.sampled_from(["a", "b", "c"]))
        alloc = {
            "cpu": draw(st.sampled_from(["1", "2", "4"])),
            "memory": draw(st.sampled_from(["1Gi", "2Gi", "4Gi"])),
            "pods": str(draw(st.integers(1, 6))),
        }
        if draw(st.integers(0, 4)) == 0:
            alloc["example.com/gpu"] = str(draw(st.integers(0, 2)))
        taints = draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=lambda t: t["key"]))
        doc = {
            "metadata": {"labels": labels},
            "spec": {"taints": taints},
            "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]},
        }
        out.append(make_node(name, doc))
    return out


def term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


@st.composite
def template_strategy(draw: st.DrawFn, index: int) -> dict[str, Any]:
    """A workload: what its replicas share."""
    app = draw(st.sampled_from(APPS))
    requests = {
        "cpu": draw(st.sampled_from(["0", "100m", "300m", "700m"])),
        "memory": draw(st.sampled_from(["0", "128Mi", "512Mi", "1Gi"])),
    }
    if draw(st.integers(0, 5)) == 0:
        requests["example.com/gpu"] = "1"
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"requests": requests}}],
        "tolerations": draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2)),
    }
    if draw(st.integers(0, 5)) == 0:
        spec["nodeSelector"] = {"disk": draw(st.sampled_from(["ssd", "hdd"]))}
    affinity: dict[str, Any] = {}
    if draw(st.integers(0, 3)) == 0:
        affinity["nodeAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": draw(st.integers(1, 100)),
                    "preference": {
                        "matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]
                    },
                }
            ]
        }
    if draw(st.integers(0, 3)) == 0:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                term(draw(st.sampled_from(APPS)), draw(st.sampled_from([HOST, ZONE])))
            ]
        }
    if draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["podAffinity", "podAntiAffinity"]))
        affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": draw(st.integers(1, 100)),
                "podAffinityTerm": term(draw(st.sampled_from(APPS)), draw(st.sampled_from([HOST, ZONE]))),
            }
        ]
    if draw(st.integers(0, 8)) == 0:
        affinity.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [
            term(draw(st.sampled_from(APPS)), ZONE)
        ]
    if affinity:
        spec["affinity"] = affinity
    if draw(st.integers(0, 2)) == 0:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": draw(st.integers(1, 2)),
                "topologyKey": draw(st.sampled_from([ZONE, HOST])),
                "whenUnsatisfiable": draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"])),
                "labelSelector": {"matchLabels": {"app": app}},
            }
            for _ in range(draw(st.integers(1, 2)))
        ]
    owner = draw(st.sampled_from(["ReplicaSet", "ReplicaSet", "StatefulSet"]))
    return {
        "app": app,
        "owner": {"kind": owner, "name": f"{app}-{index}", "controller": True},
        "spec": spec,
        "namespace": draw(st.sampled_from(["default", "other"])),
    }


def pod_of(template: dict[str, Any], name: str, node: str = "") -> Pod:
    doc = {
        "metadata": {
            "name": name,
            "namespace": template["namespace"],
            "labels": {"app": template["app"]},
            "ownerReferences": [template["owner"]],
        },
        "spec": {**template["spec"], "nodeName": node},
        "status": {"phase": "Running" if node else "Pending"},
    }
    return msgspec.convert(doc, Pod, strict=False)


@st.composite
def cluster_strategy(draw: st.DrawFn) -> tuple[list[Node], list[Pod], list[Pod], int]:
    nodes = draw(nodes_strategy())
    names = [n.metadata.name for n in nodes]
    templates = [draw(template_strategy(i)) for i in range(draw(st.integers(1, 4)))]
    existing = [
        pod_of(draw(st.sampled_from(templates)), f"old-{i}", draw(st.sampled_from(names)))
        for i in range(draw(st.integers(0, 12)))
    ]
    incoming = [pod_of(draw(st.sampled_from(templates)), f"new-{i}") for i in range(draw(st.integers(1, 12)))]
    return nodes, existing, incoming, draw(st.integers(1, len(nodes)))


def bound(pod: Pod, node: str) -> Pod:
    status = msgspec.structs.replace(pod.status, phase="Running")
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node), status=status)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_strategy())
def test_a_simulator_kept_across_binds_decides_as_a_fresh_one(
    case: tuple[list[Node], list[Pod], list[Pod], int],
) -> None:
    nodes, existing, incoming, to_find = case
    snapshot = ClusterSnapshot(nodes=nodes, pods=existing)
    sim = PlacementSimulator(snapshot)
    # a short search (numFeasibleNodesToFind) makes the round-robin start and partial node
    # lists matter on small clusters
    sim._to_find = to_find
    for pod in incoming:
        fresh = PlacementSimulator(snapshot)
        fresh._to_find = to_find
        fresh._start = sim._start
        expected: Decision = fresh.decide(pod)
        assert sim.decide(pod) == expected, pod.metadata.name
        assert sim._start == fresh._start
        if expected.node:
            sim.bind(bound(pod, expected.node))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_strategy(), st.data())
def test_a_simulator_kept_across_evictions_decides_as_a_fresh_one(
    case: tuple[list[Node], list[Pod], list[Pod], int], data: st.DataObject
) -> None:
    """Interleaved placement: existing pods start terminating (they keep their requests and
    anti-affinity, spread stops counting them) or go (unbind) between placements."""
    nodes, existing, incoming, to_find = case
    snapshot = ClusterSnapshot(nodes=nodes, pods=existing)
    sim = PlacementSimulator(snapshot)
    sim._to_find = to_find
    now = datetime(2026, 11, 21, tzinfo=UTC)
    for pod in incoming:
        old = [p for p in snapshot.pods if p.metadata.name.startswith("old-")]
        if old:
            victim = data.draw(st.sampled_from(old))
            how = data.draw(st.sampled_from(["terminate", "unbind", "none"]))
            if how == "terminate" and victim.metadata.deletion_timestamp is None:
                meta = msgspec.structs.replace(victim.metadata, deletion_timestamp=now)
                sim.terminate(victim, msgspec.structs.replace(victim, metadata=meta))
            elif how == "unbind":
                sim.unbind(victim)
        fresh = PlacementSimulator(snapshot)
        fresh._to_find = to_find
        fresh._start = sim._start
        expected: Decision = fresh.decide(pod)
        assert sim.decide(pod) == expected, pod.metadata.name
        if expected.node:
            sim.bind(bound(pod, expected.node))
        assert_pod_lists_as_fresh(sim, PlacementSimulator(snapshot))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_strategy(), st.data())
def test_a_simulator_whose_terminating_pods_are_removed_decides_as_a_fresh_one(
    case: tuple[list[Node], list[Pod], list[Pod], int], data: st.DataObject
) -> None:
    """The driver's one model per cycle: pods start terminating while some replacements are
    placed, then :meth:`remove_gone` deletes them all at once and :meth:`restart_search` starts
    the search at the first node; the rest are placed as by a simulator made afresh from the
    snapshot without them (what the driver made before, a second model per cycle)."""
    nodes, existing, incoming, to_find = case
    snapshot = ClusterSnapshot(nodes=nodes, pods=existing)
    sim = PlacementSimulator(snapshot)
    sim._to_find = to_find
    now = datetime(2026, 11, 21, tzinfo=UTC)
    split = data.draw(st.integers(0, len(incoming)))
    terminating: list[Pod] = []
    for victim in data.draw(st.lists(st.sampled_from(existing), unique_by=id)) if existing else []:
        meta = msgspec.structs.replace(victim.metadata, deletion_timestamp=now)
        gone = msgspec.structs.replace(victim, metadata=meta)
        sim.terminate(victim, gone)
        terminating.append(gone)
    for pod in incoming[:split]:
        decision = sim.decide(pod)
        if decision.node:
            sim.bind(bound(pod, decision.node))
    sim.remove_gone(terminating)
    sim.restart_search()
    assert not any(p.metadata.deletion_timestamp for p in snapshot.pods)
    assert_pod_lists_as_fresh(sim, PlacementSimulator(snapshot))
    for k, pod in enumerate(incoming[split:]):
        fresh = PlacementSimulator(snapshot)
        fresh._to_find = to_find
        if k:
            fresh._start = sim._start  # (the first: both start where a fresh one starts)
        expected: Decision = fresh.decide(pod)
        assert sim.decide(pod) == expected, pod.metadata.name
        assert sim._start == fresh._start
        if expected.node:
            sim.bind(bound(pod, expected.node))


def assert_pod_lists_as_fresh(sim: PlacementSimulator, fresh: PlacementSimulator) -> None:
    """The kept simulator's pods by namespace and by label (followed through terminations,
    unbinds and binds) are those a fresh one makes from the snapshot, in the same order."""
    kept, new = sim.cluster, fresh.cluster
    for ns, pods in kept._ns_pods.items():
        assert list(pods.items()) == list(new._namespace_pods(ns).items()), ns
    for (ns, label), by_value in kept._label_index.items():
        expected = new._by_label(ns, label)
        assert {v: [p.key for p in pods] for v, pods in by_value.items()} == {
            v: [p.key for p in pods] for v, pods in expected.items()
        }, (ns, label)
        assert all(all(map(is_, pods, expected[v])) for v, pods in by_value.items())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_strategy(), st.data())
def test_a_picture_brought_up_to_date_is_a_fresh_one(
    case: tuple[list[Node], list[Pod], list[Pod], int], data: st.DataObject
) -> None:
    nodes, existing, incoming, _ = case
    names = [n.metadata.name for n in nodes]
    snapshot = ClusterSnapshot(nodes=nodes, pods=existing)
    before = cluster_picture(snapshot)
    for pod in existing:
        if data.draw(st.booleans()):
            snapshot.remove_pod(pod)
    for pod in incoming:
        on = data.draw(st.sampled_from(["", *names]))
        snapshot.add_pod(bound(pod, on) if on else pod)
    fresh = cluster_picture(snapshot, before.specs)
    kept = cluster_picture(snapshot, before.specs, since=before)
    assert before.state is None  # used up
    assert (kept.nodes, kept.skew, kept.violations) == (fresh.nodes, fresh.skew, fresh.violations)
    assert {sid: spec.pod for sid, spec in kept.specs.items()} == {
        sid: spec.pod for sid, spec in fresh.specs.items()
    }


def node(name: str, *, cpu: str = "1", pods: str = "10", zone: str = "a") -> Node:
    return builders.node(name, cpu=cpu, memory="4Gi", pods=pods, zone=zone)


def replica(name: str, cpu: str, app: str = "web", spec: dict[str, Any] | None = None) -> Pod:
    template = {
        "app": app,
        "owner": {"kind": "ReplicaSet", "name": app, "controller": True},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **(spec or {})},
        "namespace": "default",
    }
    return pod_of(template, name)


def test_a_bind_takes_room_from_every_request_class_that_no_longer_fits() -> None:
    snapshot = ClusterSnapshot(nodes=[node("n1"), node("n2")])
    sim = PlacementSimulator(snapshot)
    # the small class's list of fitting nodes exists before the binds that fill n1 up
    assert sim.decide(replica("small-0", "300m")).node == "n1"
    assert sim.decide(replica("big-0", "600m")).node == "n1"
    sim.bind(bound(replica("big-0", "600m"), "n1"))
    sim.bind(bound(replica("filler", "300m", app="other"), "n1"))
    # n1 has 100m left: neither class fits there any more
    assert sim.decide(replica("small-1", "300m")).node == "n2"
    assert sim.decide(replica("big-1", "600m")).node == "n2"


def test_a_bind_of_extended_resources_takes_the_node_from_the_classes_short_of_them() -> None:
    """Binding a pod that requests an extended resource takes the node off the fit lists of the
    classes it leaves short (a bind requesting none leaves those lists as they are)."""
    gpu = "example.com/gpu"
    snapshot = ClusterSnapshot(
        nodes=[builders.node(n, cpu="8", memory="4Gi", pods="10", extra={gpu: "1"}) for n in ("n1", "n2")]
    )
    sim = PlacementSimulator(snapshot)

    def trainer(name: str) -> Pod:
        requests = {"cpu": "100m", gpu: "1"}
        return replica(
            name,
            "100m",
            app="train",
            spec={"containers": [{"name": "c", "resources": {"requests": requests}}]},
        )

    assert sim.decide(trainer("t-0")).node == "n1"  # the class's fit list: n1, n2
    sim.bind(bound(replica("plain", "100m"), "n2"))  # no gpu: n2 still fits the class
    assert sim.decide(trainer("t-0")).node == "n1"
    sim.bind(bound(trainer("t-0"), "n1"))
    assert sim.decide(trainer("t-1")).node == "n2"
    sim.bind(bound(trainer("t-1"), "n2"))
    assert sim.decide(trainer("t-2")).node == ""


def test_a_full_node_leaves_every_request_class() -> None:
    snapshot = ClusterSnapshot(nodes=[node("n1", cpu="8", pods="1"), node("n2", cpu="1")])
    sim = PlacementSimulator(snapshot)
    assert sim.decide(replica("a-0", "100m")).node == "n1"
    assert sim.decide(replica("b-0", "200m", app="api")).node == "n1"
    sim.bind(bound(replica("a-0", "100m"), "n1"))
    assert sim.decide(replica("b-1", "200m", app="api")).node == "n2"


def test_resource_scores_follow_the_node_they_were_computed_for() -> None:
    # the first replica's scores are kept per request class; binding it must not leave the old
    # score of its node for the next replica
    snapshot = ClusterSnapshot(nodes=[node("n1", cpu="2"), node("n2", cpu="2")])
    sim = PlacementSimulator(snapshot)
    first = sim.decide(replica("web-0", "500m"))
    assert first.node == "n1"
    sim.bind(bound(replica("web-0", "500m"), "n1"))
    second = sim.decide(replica("web-1", "500m"))
    assert second.node == "n2"
    assert second == PlacementSimulator(snapshot).decide(replica("web-1", "500m"))


def test_spread_counts_per_node_follow_binds() -> None:
    # system-default spreading (hostname, zone) over the replicas of one owner: each bind must
    # move the next replica on, as a fresh simulator would
    nodes = [node(f"n{i}", cpu="8", zone="ab"[i % 2]) for i in range(4)]
    snapshot = ClusterSnapshot(nodes=nodes)
    sim = PlacementSimulator(snapshot)
    placed = []
    for k in range(6):
        pod = replica(f"web-{k}", "100m")
        decision = sim.decide(pod)
        fresh = PlacementSimulator(snapshot)
        fresh._start = 0
        assert decision.node == fresh.decide(pod).node
        sim.bind(bound(pod, decision.node))
        placed.append(decision.node)
    assert sorted(placed[:4]) == ["n0", "n1", "n2", "n3"]


def test_existing_anti_affinity_blocks_the_domains_bound_to() -> None:
    anti = {
        "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("db", HOST)]}
        }
    }
    snapshot = ClusterSnapshot(nodes=[node("n1", cpu="8"), node("n2", cpu="8"), node("n3", cpu="8")])
    sim = PlacementSimulator(snapshot)
    # a db pod keeps other db pods off its node; the set of blocked nodes grows with each bind
    for k, expected in enumerate(["n1", "n2", "n3", ""]):
        pod = replica(f"db-{k}", "100m", app="db", spec=anti)
        decision = sim.decide(pod)
        assert decision.node == expected
        if decision.node:
            sim.bind(bound(pod, decision.node))
    assert (
        decision.reason
        == "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."
    )


def test_a_picture_falls_back_to_counting_afresh_when_the_order_changed() -> None:
    pods = [replica(f"web-{k}", "100m") for k in range(3)]
    pods = [bound(p, "n1") for p in pods]
    snapshot = ClusterSnapshot(nodes=[node("n1", cpu="8")], pods=pods)
    before = cluster_picture(snapshot)
    # the same object again: it moves to the end, which the kept state cannot follow
    snapshot.add_pod(pods[0])
    kept = cluster_picture(snapshot, before.specs, since=before)
    fresh = cluster_picture(snapshot, before.specs)
    assert (kept.nodes, kept.skew, kept.violations) == (fresh.nodes, fresh.skew, fresh.violations)


def test_catching_up_follows_the_pods_that_came_and_went_and_refuses_one_that_moved() -> None:
    pods = [bound(replica(f"web-{k}", "100m"), "n1") for k in range(4)]
    snapshot = ClusterSnapshot(nodes=[node("n1", cpu="8")], pods=pods)
    state = cluster_picture(snapshot).state
    assert state is not None
    snapshot.remove_pod(pods[1])
    snapshot.remove_pod(pods[3])
    new = bound(replica("web-new", "100m"), "n1")
    snapshot.add_pod(new)
    assert state.catch_up()
    assert state.pods == [pods[0], pods[2], new]
    # a pod that went and came back (the same object, now last) moved: no catching up
    snapshot.remove_pod(pods[0])
    snapshot.add_pod(pods[0])
    assert not state.catch_up()
    # nor when the pods that stayed changed places
    state = cluster_picture(snapshot).state
    assert state is not None
    snapshot.add_pod(pods[2])
    assert not state.catch_up()


def test_own_anti_affinity_follows_the_pods_bound_since() -> None:
    # web keeps off nodes with db pods; the db pods (without terms of their own) come after the
    # first web replica was decided; n3, the smallest node, is where only the rule sends web
    anti = {
        "affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("db", HOST)]}
        }
    }
    snapshot = ClusterSnapshot(nodes=[node("n1", cpu="8"), node("n2", cpu="8"), node("n3", cpu="1")])
    sim = PlacementSimulator(snapshot)
    assert sim.decide(replica("web-0", "100m", spec=anti)).node == "n1"
    for k, on in enumerate(["n1", "n2"]):
        sim.bind(bound(replica(f"db-{k}", "100m", app="db"), on))
    assert sim.decide(replica("web-1", "100m", spec=anti)).node == "n3"


def test_a_terminating_pod_that_goes_leaves_the_required_affinity_index() -> None:
    # api pods must share a zone with an api pod; the one api pod is on n1 (zone a). Terminating
    # it puts a new object of it in the snapshot; when it then goes, the term index built
    # before must let it go too, or the next api pod stays bound to zone a
    affine = {
        "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("api", ZONE)]}}
    }
    old = bound(replica("old-0", "100m", app="api", spec=affine), "n1")
    snapshot = ClusterSnapshot(nodes=[node("n1", cpu="8"), node("n2", cpu="8", zone="b")], pods=[old])
    sim = PlacementSimulator(snapshot)
    assert sim.decide(replica("new-0", "100m", app="api", spec=affine)).feasible == 1  # only zone a
    meta = msgspec.structs.replace(old.metadata, deletion_timestamp=NOW)
    terminating = msgspec.structs.replace(old, metadata=meta)
    sim.terminate(old, terminating)
    sim.unbind(terminating)
    pod = replica("new-1", "100m", app="api", spec=affine)
    fresh = PlacementSimulator(snapshot)
    fresh._start = sim._start
    decision = sim.decide(pod)
    assert decision.feasible == 2  # no api pod left: the first of the group may go anywhere
    assert decision == fresh.decide(pod)


def exhaustive_best(sim: PlacementSimulator, pod: Pod) -> tuple[str, int] | None:
    """The winner and its total over every feasible node's exact score (no bound, no cache)."""
    from desched.scheduling.placement.scores import best_node

    pre = sim.prefilter(pod)
    feasible, _ = sim._find_feasible(pre)
    if len(feasible) < 2:
        return None
    scorer = sim.scorer
    keys, table, exceptions = scorer._other_scores(pre, feasible, sim._search_start)
    others = [table[()]] * len(feasible) if keys is None else [table[k] for k in keys]
    for j, x in exceptions.items():
        others[j] = x
    w_bal = 0 if pre.best_effort else scorer.weights["NodeResourcesBalancedAllocation"]
    resource = scorer._resource_scores(
        pre, feasible, scorer.weights["NodeResourcesFit"], w_bal, [None] * sim.cluster.n
    )
    best, total = best_node(feasible, [o + r for o, r in zip(others, resource, strict=True)])
    return sim.cluster.names[best], total


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_strategy())
def test_the_bounded_scoring_picks_what_scoring_every_feasible_node_picks(
    case: tuple[list[Node], list[Pod], list[Pod], int],
) -> None:
    # NodeScorer.best scores only the nodes whose upper bound (LeastAllocated for an empty
    # request plus the most BalancedAllocation can give on the node) reaches the best exact total
    nodes, existing, incoming, to_find = case
    snapshot = ClusterSnapshot(nodes=nodes, pods=existing)
    sim = PlacementSimulator(snapshot)
    sim._to_find = to_find
    for pod in incoming:
        start = sim._start
        expected = exhaustive_best(sim, pod)
        sim._start = start
        decision = sim.decide(pod)
        if expected is not None:
            assert (decision.node, decision.score) == expected, pod.metadata.name
        if decision.node:
            sim.bind(bound(pod, decision.node))


def test_the_node_tables_non_zero_requests_are_each_pods_with_shared_container_lists() -> None:
    """NodeTable looks at each list of containers once (the pods of a template share theirs):
    every pod sharing a list that misses a request still gets kube-scheduler's stand-ins, a pod
    with pod-level requests over a shared list its own, and the sums per node are each running
    pod's non-zero requests as :func:`non_zero_pod_requests` gives them."""
    from desched.k8s.objects import ResourceRequirements
    from desched.k8s.resources import CPU, MEMORY, non_zero_pod_requests
    from desched.scheduling.placement.nodes import NodeTable

    def with_spec(p: Pod, name: str, node: str, **spec: Any) -> Pod:
        meta = msgspec.structs.replace(p.metadata, name=name)
        status = msgspec.structs.replace(p.status, phase="Running")
        spec_ = msgspec.structs.replace(p.spec, node_name=node, **spec)
        return msgspec.structs.replace(p, metadata=meta, spec=spec_, status=status)

    def template(requests: dict[str, str]) -> Pod:
        doc = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
        owner = {"kind": "ReplicaSet", "name": "web", "controller": True}
        return pod_of({"namespace": "d", "app": "web", "owner": owner, "spec": doc}, "t")

    cpu_only, full = template({"cpu": "250m"}), template({"cpu": "250m", "memory": "1Gi"})
    shared_gap, shared_full = cpu_only.spec.containers, full.spec.containers
    level = msgspec.convert({"requests": {"cpu": "1", "memory": "2Gi"}}, ResourceRequirements)
    pods = [
        with_spec(full, "f1", "n0", containers=shared_full),
        with_spec(cpu_only, "g1", "n0", containers=shared_gap),
        with_spec(cpu_only, "g2", "n1", containers=shared_gap),
        with_spec(cpu_only, "g3", "n1", containers=shared_gap, resources=level),
        with_spec(full, "f2", "n1", containers=shared_full, resources=level),
        with_spec(cpu_only, "g4", "elsewhere", containers=shared_gap),
    ]
    done = with_spec(cpu_only, "g5", "n0", containers=shared_gap)
    pods.append(msgspec.structs.replace(done, status=msgspec.structs.replace(done.status, phase="Succeeded")))
    nodes = [node("n0", cpu="8"), node("n1", cpu="8")]
    snapshot = ClusterSnapshot(nodes=nodes, pods=pods)
    table = NodeTable(snapshot, nodes, {"n0": 0, "n1": 1})
    for i, name in enumerate(("n0", "n1")):
        running = [p for p in pods if p.spec.node_name == name and p.status.phase == "Running"]
        assert table.nz_cpu[i] == sum(non_zero_pod_requests(p).get(CPU, 0) for p in running), name
        assert table.nz_mem[i] == sum(non_zero_pod_requests(p).get(MEMORY, 0) for p in running), name
    assert table.nz_mem[0] == 1024**3 + 200 * 1024**2  # f1, and g1's stand-in
