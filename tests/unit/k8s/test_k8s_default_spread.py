"""kube-scheduler's cluster-level default spread constraints: the default selector made of the
Services and controller of a pod (``helper.DefaultSelector``), and where the defaults apply."""

from __future__ import annotations

from typing import Any

from tests import builders

from desched.k8s import labels as k8s_labels
from desched.k8s import topologyspread as k8s_tsc
from desched.k8s.objects import (
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    TopologySpreadConstraint,
    Workload,
)

RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d", "controller": True}


def pod(labels: dict[str, str], owner: Any = None, **kw: Any) -> Pod:
    return builders.pod("p", node="n1", labels=labels, owner=owner, **kw)


def selector(p: Pod, *workloads: Workload) -> LabelSelector | None:
    snap = builders.snapshot(pods=[p], workloads=workloads)
    found = snap.default_spread_constraints(p, k8s_tsc.SYSTEM_DEFAULTS)
    return found[0].label_selector if found else None


def matches(sel: LabelSelector | None, labels: dict[str, str]) -> bool:
    return k8s_labels.compile_label_selector(sel, none_matches=True)(labels)


def test_services_selecting_the_pod_are_merged() -> None:
    p = pod({"app": "web", "tier": "front", "x": "1"})
    sel = selector(
        p,
        builders.service("web", {"app": "web"}),
        builders.service("front", {"tier": "front"}),
        builders.service("other", {"app": "db"}),  # does not select the pod
        builders.service("headless", None),  # no selector: selects nothing
        builders.service("elsewhere", {"app": "web"}, namespace="other"),
    )
    assert sel == LabelSelector(match_labels={"app": "web", "tier": "front"})


def test_replica_set_requirements_are_added_to_the_services() -> None:
    p = pod({"app": "web", "pod-template-hash": "5d"}, owner=RS)
    rs = builders.replica_set(
        "web-5d",
        {"pod-template-hash": "5d"},
        match_expressions=[{"key": "app", "operator": "In", "values": ["web", "api"]}],
    )
    sel = selector(p, builders.service("web", {"app": "web"}), rs)
    assert matches(sel, {"app": "web", "pod-template-hash": "5d"})
    assert not matches(sel, {"app": "web", "pod-template-hash": "6e"})  # the RS's requirement
    assert not matches(sel, {"app": "api", "pod-template-hash": "5d"})  # the Service's label


def test_controller_needs_its_group_version() -> None:
    rs = builders.replica_set("web-5d", {"app": "web"})
    assert selector(pod({"app": "web"}, owner=RS), rs) is not None
    # an ownerReference of another group is not kube-scheduler's ReplicaSet
    other = {**RS, "apiVersion": "example.com/v1"}
    assert selector(pod({"app": "web"}, owner=other), rs) is None
    # a missing controller, or one not listed: no selector, no default constraints
    assert selector(pod({"app": "web"}, owner=RS)) is None
    assert selector(pod({"app": "web"}, owner={**RS, "controller": False}), rs) is None


def test_stateful_set_and_replication_controller() -> None:
    ss = builders.stateful_set("db", {"app": "db"})
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "controller": True}
    assert selector(pod({"app": "db"}, owner=owner), ss) == LabelSelector(
        match_expressions=[LabelSelectorRequirement(key="app", operator="In", values=["db"])]
    )
    rc = builders.replication_controller("old", {"app": "old"})
    owner = {"apiVersion": "v1", "kind": "ReplicationController", "name": "old", "controller": True}
    sel = selector(pod({"app": "old", "v": "1"}, owner=owner), rc, builders.service("s", {"v": "1"}))
    assert sel == LabelSelector(match_labels={"v": "1", "app": "old"})


def test_invalid_controller_selector_is_left_out() -> None:
    rs = builders.replica_set("web-5d", match_expressions=[{"key": "app", "operator": "Bad"}])
    assert selector(pod({"app": "web"}, owner=RS), rs) is None
    sel = selector(pod({"app": "web"}, owner=RS), rs, builders.service("web", {"app": "web"}))
    assert sel == LabelSelector(match_labels={"app": "web"})


def test_defaults_apply_only_to_pods_without_constraints() -> None:
    own = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    p = pod({"app": "web"}, spec={"topologySpreadConstraints": [own]})
    snap = builders.snapshot(pods=[p], workloads=[builders.service("web", {"app": "web"})])
    assert snap.default_spread_constraints(p, k8s_tsc.SYSTEM_DEFAULTS) == []


def test_system_defaults_are_kube_schedulers() -> None:
    p = pod({"app": "web"})
    snap = builders.snapshot(pods=[p], workloads=[builders.service("web", {"app": "web"})])
    got = snap.default_spread_constraints(p, k8s_tsc.SYSTEM_DEFAULTS)
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in got] == [
        ("kubernetes.io/hostname", 3, "ScheduleAnyway"),
        ("topology.kubernetes.io/zone", 5, "ScheduleAnyway"),
    ]
    assert all(c.label_selector == LabelSelector(match_labels={"app": "web"}) for c in got)
    assert k8s_tsc.NO_DEFAULTS.constraints == ()
    assert snap.default_spread_constraints(p, k8s_tsc.NO_DEFAULTS) == []


def test_match_label_keys_of_a_default_are_replaced_by_the_selector() -> None:
    c = TopologySpreadConstraint(
        max_skew=1, topology_key="zone", when_unsatisfiable="DoNotSchedule", match_label_keys=["v"]
    )
    sel = LabelSelector(match_labels={"app": "web"})
    (got,) = k8s_tsc.default_constraints(k8s_tsc.DefaultConstraints((c,)), sel)
    assert got.match_label_keys is None and got.label_selector == sel and got.max_skew == 1
    assert k8s_tsc.default_constraints(k8s_tsc.DefaultConstraints((c,)), None) == []
