"""desched.k8s.affinity against component-helpers' nodeaffinity package."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from tests import builders

from desched.k8s.affinity import (
    compile_node_selector_term,
    has_preferred_node_affinity,
    has_required_node_affinity,
    node_selector_matches,
    node_selector_requirement_matches,
    node_selector_term_matches,
    pod_matches_node_selector,
    preferred_node_affinity_score,
)
from desched.k8s.labels import SelectorError
from desched.k8s.objects import Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod


def node(name: str = "node-1", **labels: str) -> Node:
    return builders.bare_node(name, labels=labels)


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    r: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        r["values"] = list(values)
    return r


def term(
    exprs: list[dict[str, Any]] | None = None, fields: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    t: dict[str, Any] = {}
    if exprs is not None:
        t["matchExpressions"] = exprs
    if fields is not None:
        t["matchFields"] = fields
    return t


def selector(*terms: dict[str, Any]) -> NodeSelector:
    return msgspec.convert({"nodeSelectorTerms": list(terms)}, NodeSelector)


def make_pod(
    node_selector: dict[str, str] | None = None,
    required: list[dict[str, Any]] | None = None,
    preferred: list[tuple[int, dict[str, Any]]] | None = None,
) -> Pod:
    node_affinity: dict[str, Any] = {}
    if required is not None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred is not None:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": t} for w, t in preferred
        ]
    return builders.bare_pod(
        "p", node_selector=node_selector, affinity={"nodeAffinity": node_affinity} if node_affinity else None
    )


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (req("zone", "In", "a", "b"), {"zone": "a"}, True),
        (req("zone", "In", "a", "b"), {"zone": "c"}, False),
        (req("zone", "In", "a"), {}, False),
        (req("zone", "NotIn", "a"), {"zone": "b"}, True),
        (req("zone", "NotIn", "a"), {}, True),
        (req("zone", "NotIn", "a"), {"zone": "a"}, False),
        (req("gpu", "Exists"), {"gpu": ""}, True),
        (req("gpu", "Exists"), {}, False),
        (req("gpu", "DoesNotExist"), {}, True),
        (req("gpu", "DoesNotExist"), {"gpu": "x"}, False),
        (req("cores", "Gt", "4"), {"cores": "8"}, True),
        (req("cores", "Gt", "4"), {"cores": "4"}, False),
        (req("cores", "Gt", "4"), {"cores": "many"}, False),
        (req("cores", "Gt", "4"), {}, False),
        (req("cores", "Lt", "4"), {"cores": "3"}, True),
        (req("cores", "Lt", "4"), {"cores": "04"}, False),
        # Invalid requirements match nothing.
        (req("zone", "In"), {"zone": "a"}, False),
        (req("zone", "Exists", "a"), {"zone": "a"}, False),
        (req("cores", "Gt", "four"), {"cores": "8"}, False),
        (req("cores", "Gt", "1", "2"), {"cores": "8"}, False),
        (req("zone", "Equals", "a"), {"zone": "a"}, False),
        (req("zone", "DoesNotExist", "a"), {}, False),
    ],
)
def test_label_requirement(requirement: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    r = msgspec.convert(requirement, NodeSelectorRequirement)
    assert node_selector_requirement_matches(r, node(**labels)) is expected


@pytest.mark.parametrize(
    ("requirement", "node_name", "expected"),
    [
        (req("metadata.name", "In", "node-1"), "node-1", True),
        (req("metadata.name", "In", "node-2"), "node-1", False),
        (req("metadata.name", "NotIn", "node-2"), "node-1", True),
        (req("metadata.name", "NotIn", "node-1"), "node-1", False),
        (req("metadata.name", "In", "node-1", "node-2"), "node-1", False),  # exactly one value
        (req("metadata.name", "Exists"), "node-1", False),
        (req("spec.unschedulable", "In", ""), "node-1", True),  # unknown fields read as ""
        (req("metadata.name", "In", "x"), "", True),  # a nameless node has no fields to check
    ],
)
def test_field_requirement(requirement: dict[str, Any], node_name: str, expected: bool) -> None:
    r = msgspec.convert(requirement, NodeSelectorRequirement)
    assert node_selector_requirement_matches(r, node(node_name), field=True) is expected


def test_term_requirements_are_anded_and_fields_combine_with_labels() -> None:
    t = msgspec.convert(
        term([req("zone", "In", "a"), req("gpu", "Exists")], [req("metadata.name", "In", "node-1")]),
        NodeSelectorTerm,
    )
    assert node_selector_term_matches(t, node("node-1", zone="a", gpu="1"))
    assert not node_selector_term_matches(t, node("node-2", zone="a", gpu="1"))
    assert not node_selector_term_matches(t, node("node-1", zone="a"))


def test_empty_term_matches_nothing() -> None:
    assert not node_selector_term_matches(NodeSelectorTerm(), node(zone="a"))
    assert not node_selector_term_matches(msgspec.convert(term([], []), NodeSelectorTerm), node())
    assert compile_node_selector_term(NodeSelectorTerm()) is None


def test_invalid_term_raises_when_compiled_directly() -> None:
    with pytest.raises(SelectorError, match="matchExpressions"):
        compile_node_selector_term(msgspec.convert(term([req("zone", "Bogus", "a")]), NodeSelectorTerm))
    with pytest.raises(SelectorError, match="matchFields"):
        compile_node_selector_term(
            msgspec.convert(term(None, [req("metadata.name", "Exists")]), NodeSelectorTerm)
        )


def test_selector_terms_are_ored() -> None:
    ns = selector(term([req("zone", "In", "a")]), term([req("zone", "In", "b")]))
    assert node_selector_matches(ns, node(zone="a"))
    assert node_selector_matches(ns, node(zone="b"))
    assert not node_selector_matches(ns, node(zone="c"))


def test_selector_without_terms_matches_nothing() -> None:
    assert not node_selector_matches(selector(), node(zone="a"))
    assert not node_selector_matches(selector(term()), node(zone="a"))


def test_invalid_term_is_skipped_but_other_terms_count() -> None:
    # LazyErrorNodeSelector: parse errors only matter when no term matches.
    ns = selector(term([req("zone", "Bogus", "a")]), term([req("zone", "In", "a")]))
    assert node_selector_matches(ns, node(zone="a"))
    assert not node_selector_matches(ns, node(zone="b"))


def test_pod_node_selector_and_required_affinity_are_anded() -> None:
    pod = make_pod({"disktype": "ssd"}, [term([req("zone", "In", "a")])])
    assert pod_matches_node_selector(pod, node(disktype="ssd", zone="a"))
    assert not pod_matches_node_selector(pod, node(disktype="hdd", zone="a"))
    assert not pod_matches_node_selector(pod, node(disktype="ssd", zone="b"))
    assert not pod_matches_node_selector(pod, node(zone="a"))


def test_pod_without_constraints_matches_every_node() -> None:
    assert pod_matches_node_selector(make_pod(), node())
    assert pod_matches_node_selector(make_pod({}), node())
    assert pod_matches_node_selector(make_pod(preferred=[(10, term([req("a", "Exists")]))]), node())


def test_pod_with_empty_required_terms_matches_nothing() -> None:
    pod = make_pod(required=[])
    assert has_required_node_affinity(pod)
    assert not pod_matches_node_selector(pod, node(zone="a"))


def test_pod_required_affinity_on_node_name() -> None:
    # What the DaemonSet controller writes.
    pod = make_pod(required=[term(None, [req("metadata.name", "In", "node-7")])])
    assert pod_matches_node_selector(pod, node("node-7"))
    assert not pod_matches_node_selector(pod, node("node-8"))


def test_preferred_score_sums_matching_weights() -> None:
    pod = make_pod(
        preferred=[
            (10, term([req("zone", "In", "a")])),
            (5, term([req("disktype", "In", "ssd")])),
            (7, term([req("zone", "Bogus", "a")])),  # invalid: adds nothing
            (3, term()),  # empty: matches nothing
            (0, term([req("zone", "Exists")])),
        ]
    )
    assert has_preferred_node_affinity(pod)
    assert preferred_node_affinity_score(pod, node(zone="a", disktype="ssd")) == 15
    assert preferred_node_affinity_score(pod, node(zone="a")) == 10
    assert preferred_node_affinity_score(pod, node(zone="b", disktype="ssd")) == 5
    assert preferred_node_affinity_score(pod, node()) == 0
    assert preferred_node_affinity_score(make_pod(), node(zone="a")) == 0


def test_has_node_affinity() -> None:
    assert not has_required_node_affinity(make_pod())
    assert not has_preferred_node_affinity(make_pod())
    assert not has_preferred_node_affinity(make_pod(preferred=[]))
    assert has_required_node_affinity(make_pod(required=[term([req("a", "Exists")])]))
    assert not has_preferred_node_affinity(make_pod(required=[term([req("a", "Exists")])]))


def test_compiled_terms_are_reused_per_object() -> None:
    pod = make_pod(required=[term([req("zone", "In", "a")])])
    nodes = [node(f"n{i}", zone="a" if i % 2 else "b") for i in range(200)]
    assert sum(pod_matches_node_selector(pod, n) for n in nodes) == 100
