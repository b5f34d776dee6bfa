"""desched.k8s.priority against the Priority admission plugin's resolution."""

from __future__ import annotations

import pytest
from tests import builders

from desched.k8s.objects import Pod, PriorityClass
from desched.k8s.priority import (
    class_value,
    global_default_class,
    is_critical_pod,
    pod_priority,
    resolve_pod_priority,
)


def pc(name: str, value: int, global_default: bool = False) -> PriorityClass:
    return builders.priority_class(name, value, global_default=global_default)


def make_pod(priority: int | None = None, class_name: str = "") -> Pod:
    return builders.bare_pod("", priority=priority, priority_class=class_name or None)


CLASSES = {c.metadata.name: c for c in (pc("high", 1000), pc("low", 10, True), pc("lower", 5, True))}


def test_global_default_class_picks_lowest_value() -> None:
    default = global_default_class(CLASSES)
    assert default is not None and default.metadata.name == "lower"
    assert global_default_class(list(CLASSES.values())) is default
    assert global_default_class({"high": CLASSES["high"]}) is None
    tie = global_default_class([pc("b", 1, True), pc("a", 1, True)])
    assert tie is not None and tie.metadata.name == "a"


def test_resolve_pod_priority_order() -> None:
    default = global_default_class(CLASSES)
    # spec.priority wins, even over a class name.
    assert resolve_pod_priority(make_pod(7, "high"), CLASSES, default) == 7
    assert resolve_pod_priority(make_pod(0), CLASSES, default) == 0
    # Then the named class.
    assert resolve_pod_priority(make_pod(class_name="high"), CLASSES, default) == 1000
    # Built-in system classes are known even when the snapshot lacks them.
    assert resolve_pod_priority(make_pod(class_name="system-node-critical"), {}, None) == 2_000_001_000
    assert resolve_pod_priority(make_pod(class_name="system-cluster-critical"), {}, None) == 2_000_000_000
    # Then the global default (also for an unknown class name).
    assert resolve_pod_priority(make_pod(), CLASSES, default) == 5
    assert resolve_pod_priority(make_pod(class_name="missing"), CLASSES, default) == 5
    # Else zero.
    assert resolve_pod_priority(make_pod(), CLASSES, None) == 0


@pytest.mark.parametrize(
    ("priority", "critical"),
    [(None, False), (0, False), (1_999_999_999, False), (2_000_000_000, True), (2_000_001_000, True)],
)
def test_critical_priority(priority: int | None, critical: bool) -> None:
    pod = make_pod(priority)
    assert pod_priority(pod, {}) == priority
    assert is_critical_pod(pod, {}) is critical


@pytest.mark.parametrize(
    ("class_name", "classes", "expected"),
    [
        ("system-cluster-critical", {}, 2_000_000_000),
        ("system-node-critical", {}, 2_000_001_000),
        ("high", CLASSES, 1000),
        ("missing", CLASSES, None),
        ("system-node-critical", {"system-node-critical": pc("system-node-critical", 7)}, 7),
    ],
)
def test_a_pod_without_priority_takes_its_class_value(
    class_name: str, classes: dict[str, PriorityClass], expected: int | None
) -> None:
    """A hand-written snapshot's pod may name its class without spec.priority (admission sets it)."""
    pod = make_pod(class_name=class_name)
    assert pod_priority(pod, classes) == expected
    assert class_value(class_name, classes) == expected
    assert is_critical_pod(pod, classes) is (expected is not None and expected >= 2_000_000_000)
    assert pod_priority(make_pod(5, class_name), classes) == 5  # spec.priority wins
