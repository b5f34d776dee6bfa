"""desched.k8s.taints against core/v1 Toleration.ToleratesTaint."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests import builders

from desched.k8s.objects import Node, Pod, Taint, Toleration
from desched.k8s.taints import (
    TAINT_NO_EXECUTE,
    TAINT_NO_SCHEDULE,
    TAINT_PREFER_NO_SCHEDULE,
    pod_tolerates_node_taints,
    tolerates_taint,
    toleration_tolerates_taint,
    untolerated_taint,
)


def tol(key: str = "", operator: str = "", value: str = "", effect: str = "") -> Toleration:
    return Toleration(key=key, operator=operator, value=value, effect=effect)


def taint(key: str, value: str = "", effect: str = TAINT_NO_SCHEDULE) -> Taint:
    return Taint(key=key, value=value, effect=effect)


@pytest.mark.parametrize(
    ("toleration", "the_taint", "expected"),
    [
        # Equal (and the empty operator, which means Equal) compares values.
        (tol("k", "Equal", "v", "NoSchedule"), taint("k", "v"), True),
        (tol("k", "", "v", "NoSchedule"), taint("k", "v"), True),
        (tol("k", "Equal", "v", "NoSchedule"), taint("k", "w"), False),
        (tol("k", "Equal", "", "NoSchedule"), taint("k", ""), True),
        # Exists ignores the value.
        (tol("k", "Exists", "", "NoSchedule"), taint("k", "anything"), True),
        (tol("k", "Exists", "ignored", "NoSchedule"), taint("k", "anything"), True),
        # Keys must match unless the toleration's key is empty.
        (tol("k", "Exists"), taint("other"), False),
        (tol("", "Exists"), taint("other", "v", TAINT_NO_EXECUTE), True),
        (tol("", "Equal", "v"), taint("any-key", "v"), True),  # the function does not forbid it
        # An empty effect matches every effect; otherwise effects must be equal.
        (tol("k", "Exists", "", ""), taint("k", "", TAINT_NO_EXECUTE), True),
        (tol("k", "Exists", "", "NoSchedule"), taint("k", "", TAINT_NO_EXECUTE), False),
        (tol("k", "Exists", "", "NoExecute"), taint("k", "", TAINT_PREFER_NO_SCHEDULE), False),
        # Gt / Lt compare the taint's value with the toleration's, as int64s.
        (tol("k", "Gt", "5"), taint("k", "6"), True),
        (tol("k", "Gt", "5"), taint("k", "5"), False),
        (tol("k", "Lt", "5"), taint("k", "4"), True),
        (tol("k", "Lt", "5"), taint("k", "-10"), True),
        (tol("k", "Lt", "5"), taint("k", "x"), False),
        (tol("k", "Lt", "x"), taint("k", "1"), False),
        # Unknown operators tolerate nothing.
        (tol("k", "exists"), taint("k"), False),
    ],
)
def test_toleration_tolerates_taint(toleration: Toleration, the_taint: Taint, expected: bool) -> None:
    assert toleration_tolerates_taint(toleration, the_taint) is expected


def test_tolerates_taint_any_of() -> None:
    t = taint("dedicated", "gpu")
    assert not tolerates_taint(None, t)
    assert not tolerates_taint([], t)
    assert tolerates_taint([tol("x", "Exists"), tol("dedicated", "Equal", "gpu")], t)
    assert not tolerates_taint([tol("x", "Exists"), tol("dedicated", "Equal", "cpu")], t)


def test_untolerated_taint_returns_the_first_in_effect_scope() -> None:
    taints = [
        taint("soft", effect=TAINT_PREFER_NO_SCHEDULE),
        taint("a", effect=TAINT_NO_SCHEDULE),
        taint("b", effect=TAINT_NO_EXECUTE),
    ]
    effects = (TAINT_NO_SCHEDULE, TAINT_NO_EXECUTE)
    assert untolerated_taint(taints, [], effects) == taints[1]
    assert untolerated_taint(taints, [tol("a", "Exists")], effects) == taints[2]
    assert untolerated_taint(taints, [tol("a", "Exists"), tol("b", "Exists")], effects) is None
    assert untolerated_taint(taints, [], {TAINT_PREFER_NO_SCHEDULE}) == taints[0]
    assert untolerated_taint(None, None, effects) is None


def make_node(taints: list[dict[str, Any]]) -> Node:
    return builders.bare_node("n", taints=taints)


def make_pod(tolerations: list[dict[str, Any]]) -> Pod:
    return builders.bare_pod("", tolerations=tolerations)


def test_pod_tolerates_node_taints() -> None:
    node = make_node(
        [
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
            {"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"},
        ]
    )
    assert not pod_tolerates_node_taints(make_pod([]), node)
    tolerant = make_pod([{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}])
    assert pod_tolerates_node_taints(tolerant, node)
    # PreferNoSchedule only counts when asked for.
    assert not pod_tolerates_node_taints(tolerant, node, effects=("PreferNoSchedule",))
    assert pod_tolerates_node_taints(make_pod([]), make_node([]))
    assert pod_tolerates_node_taints(make_pod([{"operator": "Exists"}]), node, effects=("PreferNoSchedule",))


effects = st.sampled_from([TAINT_NO_SCHEDULE, TAINT_PREFER_NO_SCHEDULE, TAINT_NO_EXECUTE])
words = st.text("abcxyz-./", max_size=8)


@given(key=words, value=words, taint_effect=effects, toleration_effect=effects)
def test_exists_with_empty_key_tolerates_every_taint_of_its_effect(
    key: str, value: str, taint_effect: str, toleration_effect: str
) -> None:
    t = Taint(key=key, value=value, effect=taint_effect)
    assert toleration_tolerates_taint(tol("", "Exists", "", toleration_effect), t) is (
        taint_effect == toleration_effect
    )
    assert toleration_tolerates_taint(tol("", "Exists"), t)


@given(key=words, value=words, other=words, effect=effects)
def test_equal_toleration_needs_equal_value(key: str, value: str, other: str, effect: str) -> None:
    t = Taint(key=key, value=value, effect=effect)
    assert toleration_tolerates_taint(tol(key, "Equal", other, effect), t) is (value == other)
    assert toleration_tolerates_taint(tol(key, "Exists", other, effect), t)
