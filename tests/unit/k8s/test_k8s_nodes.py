"""desched.k8s.nodes against descheduler's pkg/descheduler/node/node.go."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders

from desched.k8s.nodes import is_node_ready, is_node_unschedulable, node_region, node_zone
from desched.k8s.objects import Node


def make_node(conditions: list[dict[str, str]] | None = None, **kw: Any) -> Node:
    return builders.bare_node("n", conditions=conditions, **kw)


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        (None, True),  # no conditions: IsReady returns true
        ([], True),
        ([{"type": "Ready", "status": "True"}], True),
        ([{"type": "Ready", "status": "False"}], False),
        ([{"type": "Ready", "status": "Unknown"}], False),
        ([{"type": "MemoryPressure", "status": "True"}], True),  # only Ready is consulted
        ([{"type": "NetworkUnavailable", "status": "True"}, {"type": "Ready", "status": "True"}], True),
        ([{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"}], False),
    ],
)
def test_is_node_ready(conditions: list[dict[str, str]] | None, ready: bool) -> None:
    assert is_node_ready(make_node(conditions)) is ready


def test_is_node_unschedulable() -> None:
    assert not is_node_unschedulable(make_node())
    assert is_node_unschedulable(make_node(unschedulable=True))


def test_zone_and_region() -> None:
    node = make_node(labels={"topology.kubernetes.io/zone": "eu-1a", "topology.kubernetes.io/region": "eu-1"})
    assert node_zone(node) == "eu-1a"
    assert node_region(node) == "eu-1"
    assert node_zone(make_node()) is None
    assert node_zone(make_node(labels={"failure-domain.beta.kubernetes.io/zone": "old"})) is None
