"""Node fit: each check, their order, and that the memoised answers follow the snapshot."""

from __future__ import annotations

from typing import Any

from tests import builders

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import Node, Pod
from desched.scheduling import nodefit
from desched.scheduling.nodefit import (
    ANTI_AFFINITY,
    NODE_SELECTOR_MISMATCH,
    UNSCHEDULABLE,
    UNTOLERATED_TAINT,
    node_fit_failures,
    pod_fits_any_node,
    pod_fits_any_other_node,
    pod_fits_current_node,
)


def make_node(
    name: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    pods: str = "10",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
) -> Node:
    return builders.node(
        name,
        cpu=cpu,
        memory=memory,
        pods=pods,
        extra=extra,
        capacity=True,
        ready=None,
        labels=labels,
        taints=taints or [],
        unschedulable=unschedulable,
    )


def make_pod(
    name: str,
    node: str = "",
    *,
    namespace: str = "default",
    cpu: str = "100m",
    memory: str = "100Mi",
    labels: dict[str, str] | None = None,
    phase: str = "Running",
    node_selector: dict[str, str] | None = None,
    affinity: dict[str, Any] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    extra: dict[str, str] | None = None,
) -> Pod:
    return builders.pod(
        name,
        node=node,
        namespace=namespace,
        cpu=cpu,
        memory=memory,
        requests=extra,
        labels=labels or {},
        phase=phase,
        node_selector=node_selector or None,
        affinity=affinity or None,
        tolerations=tolerations or None,
    )


def anti_affinity(
    match_labels: dict[str, str] | None, topology_key: str = "kubernetes.io/hostname", **term: Any
) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": topology_key, **term}
    if match_labels is not None:
        t["labelSelector"] = {"matchLabels": match_labels}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [t]}}


# ---------------------------------------------------------------------------- single checks


def test_fits_an_empty_node() -> None:
    n = make_node("n1")
    snap = ClusterSnapshot(nodes=[n])
    assert node_fit_failures(snap, make_pod("p"), n) == []


def test_unschedulable_node() -> None:
    n = make_node("n1", unschedulable=True)
    snap = ClusterSnapshot(nodes=[n])
    assert node_fit_failures(snap, make_pod("p"), n) == [UNSCHEDULABLE]


def test_node_selector_and_required_node_affinity() -> None:
    n = make_node("n1", labels={"disk": "ssd"})
    snap = ClusterSnapshot(nodes=[n])
    assert node_fit_failures(snap, make_pod("a", node_selector={"disk": "ssd"}), n) == []
    hdd = make_pod("b", node_selector={"disk": "hdd"})
    assert node_fit_failures(snap, hdd, n) == [NODE_SELECTOR_MISMATCH]
    not_ssd = {"matchExpressions": [{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]}
    required = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [not_ssd]}}
    }
    assert node_fit_failures(snap, make_pod("c", affinity=required), n) == [NODE_SELECTOR_MISMATCH]


def test_only_no_schedule_and_no_execute_taints_count() -> None:
    soft = make_node("soft", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}])
    hard = make_node("hard", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    execute = make_node("exec", taints=[{"key": "k", "value": "v", "effect": "NoExecute"}])
    snap = ClusterSnapshot(nodes=[soft, hard, execute])
    plain = make_pod("plain")
    assert node_fit_failures(snap, plain, soft) == []
    assert node_fit_failures(snap, plain, hard) == [UNTOLERATED_TAINT]
    assert node_fit_failures(snap, plain, execute) == [UNTOLERATED_TAINT]
    tolerant = make_pod("tolerant", tolerations=[{"key": "k", "operator": "Exists"}])
    assert node_fit_failures(snap, tolerant, hard) == []
    assert node_fit_failures(snap, tolerant, execute) == []


def test_resources_requests_against_free_room() -> None:
    n = make_node("n1", cpu="1", memory="1Gi")
    busy = make_pod("busy", "n1", cpu="800m", memory="100Mi")
    snap = ClusterSnapshot(nodes=[n], pods=[busy])
    assert node_fit_failures(snap, make_pod("small", cpu="200m"), n) == []
    assert node_fit_failures(snap, make_pod("big", cpu="201m"), n) == ["insufficient cpu"]
    assert node_fit_failures(snap, make_pod("fat", memory="1000Mi"), n) == ["insufficient memory"]


def test_finished_pods_free_their_room_and_their_slot() -> None:
    n = make_node("n1", cpu="1", pods="1")
    done = make_pod("done", "n1", cpu="1", phase="Succeeded")
    failed = make_pod("failed", "n1", cpu="1", phase="Failed")
    snap = ClusterSnapshot(nodes=[n], pods=[done, failed])
    assert node_fit_failures(snap, make_pod("p", cpu="1"), n) == []


def test_pod_slots() -> None:
    n = make_node("n1", pods="2")
    snap = ClusterSnapshot(nodes=[n], pods=[make_pod("a", "n1"), make_pod("b", "n1")])
    assert node_fit_failures(snap, make_pod("p", cpu="0", memory="0"), n) == ["insufficient pods"]
    no_slots = make_node("n2", pods="0")
    snap2 = ClusterSnapshot(nodes=[no_slots])
    assert node_fit_failures(snap2, make_pod("p"), no_slots) == ["insufficient pods"]


def test_extended_resource_the_node_does_not_offer() -> None:
    gpu_node = make_node("gpu", extra={"nvidia.com/gpu": "2"})
    plain_node = make_node("plain")
    snap = ClusterSnapshot(nodes=[gpu_node, plain_node])
    pod = make_pod("p", extra={"nvidia.com/gpu": "1"})
    assert node_fit_failures(snap, pod, gpu_node) == []
    assert node_fit_failures(snap, pod, plain_node) == ["insufficient nvidia.com/gpu"]


def test_own_node_does_not_count_the_pod_twice() -> None:
    n = make_node("n1", cpu="1", pods="1")
    pod = make_pod("p", "n1", cpu="1")
    snap = ClusterSnapshot(nodes=[n], pods=[pod])
    assert pod_fits_current_node(snap, pod, n)
    assert node_fit_failures(snap, pod, n) == []
    # a twin elsewhere would not fit there
    twin = make_pod("twin", "n2", cpu="1")
    assert node_fit_failures(snap, twin, n) == ["insufficient cpu"]
    assert node_fit_failures(snap, twin, n, all_reasons=True) == ["insufficient cpu", "insufficient pods"]


def test_checks_stop_at_the_first_failure_unless_all_reasons() -> None:
    n = make_node("n1", unschedulable=True, cpu="100m", taints=[{"key": "k", "effect": "NoSchedule"}])
    snap = ClusterSnapshot(nodes=[n])
    pod = make_pod("p", cpu="1", node_selector={"x": "y"})
    assert node_fit_failures(snap, pod, n) == [UNSCHEDULABLE]
    assert node_fit_failures(snap, pod, n, all_reasons=True) == [
        UNSCHEDULABLE,
        NODE_SELECTOR_MISMATCH,
        UNTOLERATED_TAINT,
        "insufficient cpu",
    ]


# ---------------------------------------------------------------------------- anti-affinity


def test_anti_affinity_against_pods_on_the_node() -> None:
    n1, n2 = make_node("n1"), make_node("n2")
    web = make_pod("web", "n1", labels={"app": "web"})
    snap = ClusterSnapshot(nodes=[n1, n2], pods=[web])
    pod = make_pod("p", "n2", labels={"app": "web"}, affinity=anti_affinity({"app": "web"}))
    assert node_fit_failures(snap, pod, n1) == [ANTI_AFFINITY]
    assert node_fit_failures(snap, pod, n2) == []


def test_anti_affinity_needs_the_topology_label_on_the_node() -> None:
    n1 = make_node("n1")
    snap = ClusterSnapshot(nodes=[n1], pods=[make_pod("web", "n1", labels={"app": "web"})])
    pod = make_pod("p", affinity=anti_affinity({"app": "web"}, topology_key="topology.kubernetes.io/zone"))
    assert node_fit_failures(snap, pod, n1) == []


def test_anti_affinity_looks_at_the_node_only_not_its_topology_domain() -> None:
    # upstream's NodeFit: pods on other nodes of the same zone do not count
    n1 = make_node("n1", labels={"zone": "a"})
    n2 = make_node("n2", labels={"zone": "a"})
    snap = ClusterSnapshot(nodes=[n1, n2], pods=[make_pod("web", "n1", labels={"app": "web"})])
    pod = make_pod("p", affinity=anti_affinity({"app": "web"}, topology_key="zone"))
    assert node_fit_failures(snap, pod, n1) == [ANTI_AFFINITY]
    assert node_fit_failures(snap, pod, n2) == []


def test_anti_affinity_namespaces() -> None:
    n1 = make_node("n1")
    other_ns = make_pod("web", "n1", namespace="other", labels={"app": "web"})
    snap = ClusterSnapshot(nodes=[n1], pods=[other_ns])
    same_ns_only = make_pod("p", affinity=anti_affinity({"app": "web"}))
    assert node_fit_failures(snap, same_ns_only, n1) == []
    listed = make_pod("q", affinity=anti_affinity({"app": "web"}, namespaces=["other"]))
    assert node_fit_failures(snap, listed, n1) == [ANTI_AFFINITY]


def test_anti_affinity_ignores_the_pod_itself_finished_pods_and_nil_selectors() -> None:
    n1 = make_node("n1")
    pod = make_pod("p", "n1", labels={"app": "web"}, affinity=anti_affinity({"app": "web"}))
    done = make_pod("done", "n1", labels={"app": "web"}, phase="Succeeded")
    snap = ClusterSnapshot(nodes=[n1], pods=[pod, done])
    assert node_fit_failures(snap, pod, n1) == []
    nil_selector = make_pod("q", affinity=anti_affinity(None))
    assert node_fit_failures(snap, nil_selector, n1) == []


def test_existing_pods_anti_affinity_against_the_incoming_pod_is_not_checked() -> None:
    # as upstream: only the incoming pod's own terms are evaluated
    n1 = make_node("n1")
    guard = make_pod("guard", "n1", affinity=anti_affinity({"app": "web"}))
    snap = ClusterSnapshot(nodes=[n1], pods=[guard])
    assert node_fit_failures(snap, make_pod("web", labels={"app": "web"}), n1) == []


def test_invalid_anti_affinity_selector_fails_every_node() -> None:
    n1 = make_node("n1")
    snap = ClusterSnapshot(nodes=[n1])
    bad = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]},
                }
            ]
        }
    }
    failures = node_fit_failures(snap, make_pod("p", affinity=bad), n1)
    assert len(failures) == 1 and failures[0].startswith("invalid inter-pod anti-affinity label selector")


# ---------------------------------------------------------------------------- any / other / current


def test_any_other_node_skips_the_pods_own_node() -> None:
    n1, n2 = make_node("n1"), make_node("n2", unschedulable=True)
    pod = make_pod("p", "n1")
    snap = ClusterSnapshot(nodes=[n1, n2], pods=[pod])
    nodes = snap.nodes
    assert not pod_fits_any_other_node(snap, pod, nodes)
    assert pod_fits_any_node(snap, pod, nodes)
    assert pod_fits_current_node(snap, pod, n1)


def test_a_hypothetical_pod_uses_its_own_requests() -> None:
    n1 = make_node("n1", cpu="1")
    real = make_pod("p", "n2", cpu="100m")
    snap = ClusterSnapshot(nodes=[n1], pods=[real])
    nodes = snap.nodes
    assert pod_fits_any_other_node(snap, real, nodes)
    bigger = make_pod("p", "n2", cpu="2")  # same namespace/name, not the snapshot's object
    assert not pod_fits_any_other_node(snap, bigger, nodes)


# ---------------------------------------------------------------------------- caches follow the snapshot


def test_answers_change_when_a_pod_is_evicted_from_a_full_node() -> None:
    n1, n2 = make_node("n1", cpu="1"), make_node("n2", cpu="1")
    blocker = make_pod("blocker", "n2", cpu="900m")
    mover = make_pod("mover", "n1", cpu="500m")
    twin = make_pod("twin", "n1", cpu="500m")
    snap = ClusterSnapshot(nodes=[n1, n2], pods=[blocker, mover, twin])
    nodes = snap.ready_nodes()
    assert not pod_fits_any_other_node(snap, mover, nodes)
    assert not pod_fits_any_other_node(snap, twin, nodes)  # same shape and requests: memoised
    assert snap.remove_pod(blocker)
    assert pod_fits_any_other_node(snap, mover, nodes)
    assert node_fit_failures(snap, mover, n2) == []


def test_answers_change_when_a_pod_is_added() -> None:
    n1, n2 = make_node("n1", cpu="1"), make_node("n2", cpu="1")
    mover = make_pod("mover", "n1", cpu="500m")
    snap = ClusterSnapshot(nodes=[n1, n2], pods=[mover])
    nodes = snap.ready_nodes()
    assert pod_fits_any_other_node(snap, mover, nodes)
    snap.add_pod(make_pod("newcomer", "n2", cpu="900m"))
    assert not pod_fits_any_other_node(snap, mover, nodes)


def test_anti_affinity_index_follows_evictions_and_additions() -> None:
    n1, n2 = make_node("n1"), make_node("n2", unschedulable=True)
    web = make_pod("web", "n1", labels={"app": "web"})
    pod = make_pod("p", "n2", affinity=anti_affinity({"app": "web"}))
    snap = ClusterSnapshot(nodes=[n1, n2], pods=[web, pod])
    nodes = snap.ready_nodes()
    assert not pod_fits_any_other_node(snap, pod, nodes)
    snap.remove_pod(web)
    assert pod_fits_any_other_node(snap, pod, nodes)
    assert node_fit_failures(snap, pod, n1) == []
    snap.add_pod(web)
    assert node_fit_failures(snap, pod, n1) == [ANTI_AFFINITY]
    assert not pod_fits_any_other_node(snap, pod, nodes)


def test_a_new_node_list_is_not_confused_with_an_old_one() -> None:
    n1, n2 = make_node("n1"), make_node("n2", unschedulable=True)
    pod = make_pod("p", "n0")
    snap = ClusterSnapshot(nodes=[n1, n2])
    assert pod_fits_any_other_node(snap, pod, [n1, n2])
    assert not pod_fits_any_other_node(snap, pod, [n2])
    assert pod_fits_any_other_node(snap, pod, [n2, n1])


def test_contexts_are_per_snapshot() -> None:
    full = make_node("n1", cpu="100m")
    roomy = make_node("n1", cpu="4")
    pod = make_pod("p", cpu="1")
    a = ClusterSnapshot(nodes=[full])
    b = ClusterSnapshot(nodes=[roomy])
    assert not nodefit.pod_fits_any_node(a, pod, a.nodes)
    assert nodefit.pod_fits_any_node(b, pod, b.nodes)
    assert not nodefit.pod_fits_any_node(a, pod, a.nodes)


def test_replicas_share_answers_but_each_excludes_its_own_node() -> None:
    roomy, full = make_node("roomy", cpu="2"), make_node("full", cpu="1")
    a = make_pod("a", "roomy", cpu="500m")
    b = make_pod("b", "full", cpu="500m")
    filler = make_pod("filler", "full", cpu="500m")
    snap = ClusterSnapshot(nodes=[roomy, full], pods=[a, b, filler])
    nodes = snap.ready_nodes()
    assert not pod_fits_any_other_node(snap, a, nodes)  # the only room is where it already is
    assert pod_fits_any_other_node(snap, b, nodes)
    assert pod_fits_any_node(snap, a, nodes)
    # the same node listed twice is still one node
    assert not pod_fits_any_other_node(snap, a, [roomy, roomy, full])


def test_any_node_counts_the_own_node_without_the_pods_requests() -> None:
    only = make_node("only", cpu="1", pods="1")
    pod = make_pod("p", "only", cpu="1")
    snap = ClusterSnapshot(nodes=[only], pods=[pod])
    assert pod_fits_any_node(snap, pod, snap.nodes)
    assert not pod_fits_any_other_node(snap, pod, snap.nodes)
    assert not pod_fits_any_node(snap, make_pod("q", "elsewhere", cpu="1"), snap.nodes)
