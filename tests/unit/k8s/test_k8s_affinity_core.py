"""desched.k8s.affinity's pod-affinity core, shared by RemovePodsViolatingInterPodAntiAffinity and
RemovePodsViolatingPodAffinity: term namespaces (the namespaces' labels read once), term selectors
and the per-domain counts."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import msgspec
from tests import builders

from desched.k8s.affinity import NAMESPACE_NAME_LABEL, DomainCounts, TermNamespaces, TermSelector
from desched.k8s.objects import Namespace, Pod, PodAffinityTerm

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def term(**doc: Any) -> PodAffinityTerm:
    return msgspec.convert({"topologyKey": ZONE, **doc}, PodAffinityTerm)


def pod(name: str, ns: str = "default", **labels: str) -> Pod:
    return builders.pod(name, namespace=ns, labels=labels)


class Cluster:
    """Pods and Namespace objects; counts how often the pods are read."""

    def __init__(self, pods: list[Pod], namespaces: list[Namespace]) -> None:
        self.pods = pods
        self._namespaces = namespaces
        self.reads = 0

    def iter_pods(self) -> Iterator[Pod]:
        self.reads += 1
        return iter(self.pods)

    @property
    def namespaces(self) -> Sequence[Namespace]:
        return self._namespaces


def namespace(name: str, **labels: str) -> Namespace:
    return msgspec.convert({"metadata": {"name": name, "labels": labels}}, Namespace)


def test_term_namespaces_read_the_labels_once_and_only_for_a_namespace_selector() -> None:
    cluster = Cluster(
        [pod("a", "shop"), pod("b", "only-pods")], [namespace("prod", env="prod"), namespace("shop")]
    )
    namespaces = TermNamespaces(cluster)
    own = pod("me", "shop")
    assert namespaces.of(own, term()) == {"shop"}
    assert namespaces.of(own, term(namespaces=["x", "y"])) == {"x", "y"}
    assert cluster.reads == 0  # no namespaceSelector: the labels are never read
    assert namespaces.of(own, term(namespaceSelector={})) == {"shop", "only-pods", "prod"}
    assert namespaces.of(own, term(namespaceSelector={"matchLabels": {"env": "prod"}}, namespaces=["x"])) == {
        "x",
        "prod",
    }
    # a namespace known only from its pods has its name label, as the API server sets it
    by_name = term(namespaceSelector={"matchLabels": {NAMESPACE_NAME_LABEL: "only-pods"}})
    assert namespaces.of(own, by_name) == {"only-pods"}
    assert cluster.reads == 1


def test_term_selector_matches_labels_in_its_namespaces_and_an_invalid_selector_nothing() -> None:
    namespaces = TermNamespaces(Cluster([], []))
    own = pod("me", "shop")
    web = TermSelector(own, term(labelSelector={"matchLabels": {"app": "web"}}), namespaces)
    assert web.valid
    assert web.selects(pod("w", "shop", app="web"))
    assert not web.selects(pod("w", "other", app="web"))
    assert not web.selects(pod("d", "shop", app="db"))
    assert not TermSelector(own, term(), namespaces).selects(pod("w", "shop", app="web"))  # no selector
    bad = TermSelector(
        own, term(labelSelector={"matchExpressions": [{"key": "app", "operator": "Bogus"}]}), namespaces
    )
    assert not bad.valid
    assert not bad.selects(pod("w", "shop", app="web"))


def test_domain_counts_count_once_per_key_and_take_back() -> None:
    counts = DomainCounts([ZONE, HOST, ZONE])
    n1 = {ZONE: "a", HOST: "n1"}
    counts.add(n1, "n1")
    counts.add({ZONE: "a", HOST: "n2"}, "n2")
    counts.add({HOST: "n3"}, "n3")  # no zone label: in no zone
    assert counts.counts == {(ZONE, "a"): 4, (HOST, "n1"): 1, (HOST, "n2"): 1, (HOST, "n3"): 1}
    assert counts.in_domain(ZONE, n1, "n1") == 4
    assert counts.in_domain(ZONE, {HOST: "n3"}, "n3") == 0
    less = counts.without(n1)
    assert (less[(ZONE, "a")], less[(HOST, "n1")], less[(HOST, "n2")]) == (2, 0, 1)
    assert len(less) == 4 and set(less) == set(counts.counts)
    counts.add(n1, "n1", -1)
    assert counts.counts == {(ZONE, "a"): 2, (HOST, "n1"): 0, (HOST, "n2"): 1, (HOST, "n3"): 1}


def test_a_node_without_the_key_can_be_a_domain_of_its_own() -> None:
    counts = DomainCounts([ZONE], node_without_key_is_a_domain=True)
    counts.add({}, "n1")
    counts.add({}, "n1")
    counts.add({}, "n2")
    counts.add({ZONE: "a"}, "n3")
    assert counts.in_domain(ZONE, {}, "n1") == 2
    assert counts.in_domain(ZONE, {}, "n2") == 1
    assert counts.in_domain(ZONE, {ZONE: "a"}, "n4") == 1
    counts.add({}, "n1", -1)
    assert counts.in_domain(ZONE, {}, "n1") == 1
