"""RemovePodsViolatingInterPodAntiAffinity: args validation through the policy loader, and the
semantics the upstream fixtures leave out (topology domains, term namespaces, who counts)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from tests import builders
from tests.unit.plugins.harness import Bound, evicted

from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.findings import Finding, Verdict
from desched.k8s import affinity as k8s_affinity
from desched.k8s.objects import Namespace, Node, Pod

PLUGIN = "RemovePodsViolatingInterPodAntiAffinity"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


class KeepProtected:
    """A Filter plugin: pods labelled protected=true are never evicted."""

    name: ClassVar[str] = "KeepProtected"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, p: Pod) -> bool:
        return p.labels.get("protected") != "true"


#: The plugin with KeepProtected as the only Filter (DefaultEvictor off: only the plugin's
#: decisions are under test).
AFF = Bound(PLUGIN, {"extra": [KeepProtected]})


def node(name: str, zone: str | None = None) -> Node:
    return builders.node(name, zone=zone)


def term(match_labels: dict[str, str] | None, topology: str = ZONE, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": topology, **extra}
    if match_labels is not None:
        t["labelSelector"] = {"matchLabels": match_labels}
    return t


def pod(
    name: str,
    node_name: str,
    *,
    labels: dict[str, str] | None = None,
    anti: list[dict[str, Any]] | None = None,
    ns: str = "default",
    priority: int | None = None,
) -> Pod:
    affinity = None
    if anti is not None:
        affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}}
    return builders.pod(
        name,
        namespace=ns,
        node=node_name,
        uid=f"{ns}/{name}",
        labels=labels or {},
        owner=("ReplicaSet", "rs"),
        controller=None,
        affinity=affinity,
        priority=priority,
    )


def namespace(name: str, labels: dict[str, str]) -> Namespace:
    return builders.namespace(name, labels=labels)


AVOID_DB = [term({"app": "db"})]


# ----------------------------------------------------------------------------- args


def test_namespaces_include_and_exclude_are_exclusive() -> None:
    msg = AFF.load_error({"namespaces": {"include": ["a"], "exclude": ["b"]}})
    assert msg == (
        "profiles[0].pluginConfig[0].args.namespaces.exclude: cannot be set with include "
        "(got include=['a'], exclude=['b'])"
    )


def test_invalid_label_selector() -> None:
    msg = AFF.load_error({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}})
    assert msg.startswith("profiles[0].pluginConfig[0].args.labelSelector")


def test_unknown_field_is_rejected() -> None:
    assert AFF.load_error({"nodeFit": True}) == "profiles[0].pluginConfig[0].args.nodeFit: unknown field"


# ----------------------------------------------------------------------------- topology domains


def test_same_zone_on_another_node_violates() -> None:
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b")]
    result = AFF.run(nodes, [pod("web", "n1", anti=AVOID_DB), pod("db", "n2", labels={"app": "db"})])
    assert evicted(result) == ["web"]
    assert result.evictions[0].reason == (
        "pod violates its required inter-pod anti-affinity: 1 other matching pod(s) in its topology domain "
        "topology.kubernetes.io/zone=a"
    )


def test_other_zone_does_not_violate() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    assert AFF.evicted(nodes, [pod("web", "n1", anti=AVOID_DB), pod("db", "n2", labels={"app": "db"})]) == []


def test_node_without_the_topology_label_is_its_own_domain() -> None:
    nodes = [node("n1"), node("n2"), node("n3", "a")]
    pods = [
        pod("web", "n1", anti=AVOID_DB),
        pod("db", "n2", labels={"app": "db"}),
        pod("web2", "n3", anti=AVOID_DB),
    ]
    assert AFF.evicted(nodes, pods) == []
    pods.append(pod("db2", "n1", labels={"app": "db"}))
    assert AFF.evicted(nodes, pods) == ["web"]


def test_nodes_not_given_to_the_plugin_do_not_count() -> None:
    n1, n2, n3 = node("n1", "a"), node("n2", "a"), node("n3", "a")
    n1.metadata.labels["pool"] = "x"  # type: ignore[index]
    n3.metadata.labels["pool"] = "x"  # type: ignore[index]
    pods = [pod("web", "n1", anti=AVOID_DB), pod("db", "n2", labels={"app": "db"})]
    assert AFF.evicted([n1, n2, n3], pods, nodeSelector="pool=x") == []


# ----------------------------------------------------------------------------- who counts


def test_one_replica_per_node_keeps_the_highest_priority_replica() -> None:
    anti = [term({"app": "web"}, topology=HOST)]
    pods = [
        pod(f"web-{i}", "n1", labels={"app": "web"}, anti=anti, priority=p)
        for i, p in enumerate([5, 1, 9, 3])
    ]
    assert AFF.evicted([node("n1"), node("n2")], pods) == ["web-1", "web-3", "web-0"]


def test_mutual_anti_affinity_evicts_only_the_lower_priority_pod() -> None:
    pods = [
        pod("a", "n1", labels={"app": "a"}, anti=[term({"app": "b"})], priority=10),
        pod("b", "n1", labels={"app": "b"}, anti=[term({"app": "a"})], priority=1),
    ]
    assert AFF.evicted([node("n1", "z"), node("n2", "z")], pods) == ["b"]


def test_pod_that_cannot_be_evicted_still_counts_as_violator() -> None:
    # "db" is protected from eviction, yet it still makes "web" violate; and once "web" is
    # evicted, "db2" (which repels web) no longer violates anything.
    pods = [
        pod("web", "n1", anti=AVOID_DB),
        pod("db", "n2", labels={"app": "db", "protected": "true"}),
        pod("db2", "n2", labels={"app": "db"}, anti=[term({"app": "web"})]),
    ]
    assert AFF.evicted([node("n1", "z"), node("n2", "z")], pods) == ["web"]


def test_refused_candidate_keeps_counting_for_the_pods_after_it() -> None:
    pods = [
        pod("a", "n1", labels={"app": "a", "protected": "true"}, anti=[term({"app": "b"})], priority=1),
        pod("b", "n1", labels={"app": "b"}, anti=[term({"app": "a"})], priority=5),
    ]
    assert AFF.evicted([node("n1", "z"), node("n2", "z")], pods) == ["b"]


def test_namespaces_and_label_selector_args_limit_violators_too() -> None:
    pods = [
        pod("web", "n1", anti=[term({"app": "db"}, namespaces=["data"])], ns="team"),
        pod("db", "n1", labels={"app": "db"}, ns="data"),
    ]
    nodes = [node("n1", "z"), node("n2", "z")]
    assert AFF.evicted(nodes, pods) == ["web"]
    assert AFF.evicted(nodes, pods, {"namespaces": {"include": ["team"]}}) == []
    assert (
        AFF.evicted(
            nodes,
            pods,
            {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}},
        )
        == []
    )


def test_term_without_label_selector_matches_nothing() -> None:
    pods = [pod("web", "n1", anti=[term(None)]), pod("db", "n1", labels={"app": "db"})]
    assert AFF.evicted([node("n1", "z"), node("n2", "z")], pods) == []


def test_same_name_in_another_namespace_is_another_pod() -> None:
    anti = [term({"app": "web"}, topology=HOST, namespaces=["a", "b"])]
    pods = [
        pod("web", "n1", labels={"app": "web"}, anti=anti, ns="a"),
        pod("web", "n1", labels={"app": "web"}, ns="b"),
    ]
    assert AFF.evicted([node("n1"), node("n2")], pods) == ["web"]


# ----------------------------------------------------------------------------- term namespaces


def test_term_defaults_to_the_pods_own_namespace() -> None:
    pods = [pod("web", "n1", anti=AVOID_DB, ns="team"), pod("db", "n1", labels={"app": "db"}, ns="data")]
    assert AFF.evicted([node("n1", "z"), node("n2", "z")], pods) == []


def test_empty_namespace_selector_selects_every_namespace() -> None:
    # kube-scheduler's rule (upstream descheduler ignores namespaceSelector).
    pods = [
        pod("web", "n1", anti=[term({"app": "db"}, namespaceSelector={})], ns="team"),
        pod("db", "n1", labels={"app": "db"}, ns="data"),
    ]
    assert AFF.evicted([node("n1", "z"), node("n2", "z")], pods) == ["web"]


def test_namespace_selector_reads_namespace_labels() -> None:
    anti = [term({"app": "db"}, namespaceSelector={"matchLabels": {"tier": "data"}})]
    pods = [pod("web", "n1", anti=anti, ns="team"), pod("db", "n1", labels={"app": "db"}, ns="data")]
    nodes = [node("n1", "z"), node("n2", "z")]
    assert AFF.evicted(nodes, pods, namespaces=[namespace("data", {"tier": "data"})]) == ["web"]
    assert AFF.evicted(nodes, pods, namespaces=[namespace("data", {"tier": "other"})]) == []
    # A namespace the snapshot does not hold still has its name label.
    by_name = [
        term({"app": "db"}, namespaceSelector={"matchLabels": {"kubernetes.io/metadata.name": "data"}})
    ]
    pods[0] = pod("web", "n1", anti=by_name, ns="team")
    assert AFF.evicted(nodes, pods) == ["web"]


# ----------------------------------------------------------------------------- selectors and limits


def test_in_exists_and_not_in_selectors() -> None:
    nodes = [node("n1", "z"), node("n2", "z")]
    db = pod("db", "n2", labels={"app": "db", "tier": "x"})
    for selector, expected in [
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "cache"]}]}, ["web"]),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, ["web"]),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]}, []),
        (
            {
                "matchLabels": {"app": "db"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["y"]}],
            },
            [],
        ),
    ]:
        web = pod("web", "n1", anti=[{"topologyKey": ZONE, "labelSelector": selector}])
        assert AFF.evicted(nodes, [web, db]) == expected, selector


def test_node_limit_moves_on_and_total_limit_stops() -> None:
    anti = [term({"app": "web"}, topology=HOST)]
    pods = [pod(f"{n}-{i}", n, labels={"app": "web"}, anti=anti) for n in ("n1", "n2") for i in range(3)]
    nodes = [node("n1"), node("n2")]
    assert AFF.evicted(nodes, pods, maxNoOfPodsToEvictPerNode=1) == ["n1-0", "n2-0"]
    assert AFF.evicted(nodes, pods, maxNoOfPodsToEvictTotal=3) == ["n1-0", "n1-1", "n2-0"]


def test_evicted_pods_by_earlier_plugins_are_gone() -> None:
    nodes = [node("n1", "z"), node("n2", "z")]
    pods = [pod("web", "n1", anti=AVOID_DB), pod("db", "n2", labels={"app": "db"})]
    snapshot = ClusterSnapshot(nodes=nodes, pods=pods)
    snapshot.remove_pod(pods[1])
    result = AFF.run(snapshot=snapshot)
    assert evicted(result) == []


# ----------------------------------------------------------------------------- the term helpers


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, {"own"}),
        ({"namespaces": ["x", "y"]}, {"x", "y"}),
        ({"namespaceSelector": {}}, {"own", "x", "y"}),
        ({"namespaceSelector": {"matchLabels": {"team": "a"}}}, {"x"}),
        ({"namespaces": ["y"], "namespaceSelector": {"matchLabels": {"team": "a"}}}, {"x", "y"}),
        ({"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}}, set()),
    ],
)
def test_pod_affinity_term_namespaces(extra: dict[str, Any], expected: set[str]) -> None:
    p = pod("web", "n1", anti=[term({"app": "db"}, **extra)], ns="own")
    (t,) = k8s_affinity.required_pod_anti_affinity_terms(p)
    labels = {"own": {}, "x": {"team": "a"}, "y": {"team": "b"}}
    assert k8s_affinity.pod_affinity_term_namespaces(p, t, labels) == expected


def test_required_pod_anti_affinity_terms_of_a_pod_without_any() -> None:
    assert k8s_affinity.required_pod_anti_affinity_terms(pod("a", "n1")) == []


# ----------------------------------------------------------------------------- findings


def left_reasons(
    nodes: list[Node], pods: list[Pod], args: dict[str, Any] | None = None
) -> dict[str, list[str]]:
    """One cycle with findings on: the reasons given for each pod left, by pod name."""
    found: list[Finding] = []
    AFF.run(nodes, pods, args, found=found)
    out: dict[str, list[str]] = {}
    for f in found:
        if f.verdict is Verdict.LEFT:
            assert f.plugin == PLUGIN
            out.setdefault(f.name, []).append(f.reason)
    return out


def test_findings_name_the_domain_where_no_pod_matches() -> None:
    nodes = [node("n1", "a"), node("n2", "b"), node("n3")]
    pods = [
        pod("web", "n1", labels={"app": "web"}, anti=AVOID_DB),
        pod("db", "n2", labels={"app": "db"}),
        pod("cache", "n3", labels={"app": "cache"}, anti=[term({"app": "db"}), term({"app": "web"}, HOST)]),
    ]
    left = left_reasons(nodes, pods)
    assert left == {
        "web": [f"no other pod matches its anti-affinity term in its topology domain {ZONE}=a"],
        "cache": [
            "no other pod matches any of its 2 anti-affinity terms in their domains "
            f"node n3 (no {ZONE} label), {HOST}=n3"
        ],
    }


def test_findings_after_an_eviction_the_survivor_is_left() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    avoid_db = [term({"app": "db"})]
    pods = [
        pod("low", "n1", labels={"app": "db"}, anti=avoid_db, priority=1),
        pod("high", "n1", labels={"app": "db"}, anti=avoid_db, priority=2),
    ]
    left = left_reasons(nodes, pods)
    # the lower priority goes; the other no longer has a matching neighbour
    assert left == {"high": [f"no other pod matches its anti-affinity term in its topology domain {ZONE}=a"]}


def test_findings_for_pods_the_args_do_not_select() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("web", "n1", labels={"app": "web"}, anti=AVOID_DB, ns="shop"),
        pod("db", "n1", labels={"app": "db"}, ns="shop"),
    ]
    left = left_reasons(nodes, pods, {"namespaces": {"exclude": ["shop"]}})
    assert left == {"web": ["not selected by the plugin's namespaces/labelSelector"]}
