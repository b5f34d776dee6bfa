"""The shared plugin test harness (tests/unit/plugins/harness.py) does what the plugin tests rely
on, and docs/design.md's "Adding a plugin" checklist shows a test written with it that passes."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
from tests import builders
from tests.unit.plugins.harness import Bound, evicted, load, policy_doc, run

from desched.k8s.objects import Node, Pod

ROOT = Path(__file__).resolve().parents[3]
NODES = [builders.node("n1"), builders.node("n2")]


def failed(name: str) -> Pod:
    return builders.pod(name, node="n1", phase="Failed", owner=("ReplicaSet", "rs"))


def test_the_design_checklists_example_test_passes() -> None:
    text = (ROOT / "docs" / "design.md").read_text().split("## Adding a plugin: a checklist", 1)[1]
    (code,) = re.findall(r"^ *```python\n(.*?)^ *```$", text, re.M | re.S)
    namespace: dict[str, Any] = {}
    exec(compile(textwrap.dedent(code), "docs/design.md", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()


def test_the_plugin_is_enabled_at_its_extension_points_and_default_evictor_left_out() -> None:
    doc = policy_doc("RemoveDuplicates", {})
    plugins = doc["profiles"][0]["plugins"]
    assert plugins["balance"] == {"enabled": ["RemoveDuplicates"]} and "deschedule" not in plugins
    assert plugins["filter"] == plugins["preEvictionFilter"] == {"disabled": ["DefaultEvictor"]}
    policy = load("RemoveFailedPods", None, configured=False, evictor={"minReplicas": 2})
    (profile,) = policy.profiles
    assert getattr(profile.args["DefaultEvictor"], "min_replicas", None) == 2


def test_default_evictor_is_off_unless_asked_for() -> None:
    # a pod without an owner: DefaultEvictor refuses it, the plugin alone evicts it
    bare = builders.pod("bare", node="n1", phase="Failed")
    args = {"minPodLifetimeSeconds": 0}
    assert evicted(run("RemoveFailedPods", args, NODES, [bare])) == ["bare"]
    assert evicted(run("RemoveFailedPods", args, NODES, [bare], evictor=True)) == []


def test_top_level_keywords_go_to_the_policy() -> None:
    pods = [failed("a"), failed("b")]
    args = {"minPodLifetimeSeconds": 0}
    assert len(evicted(run("RemoveFailedPods", args, NODES, pods))) == 2
    assert len(evicted(run("RemoveFailedPods", args, NODES, pods, maxNoOfPodsToEvictTotal=1))) == 1


class Raises:
    """A Deschedule plugin that fails."""

    name: ClassVar[str] = "Raises"

    def __init__(self, args: object, handle: object) -> None:
        pass

    def deschedule(self, nodes: list[Node]) -> None:
        raise RuntimeError("boom")


def test_a_plugin_error_fails_the_run_unless_allowed() -> None:
    with pytest.raises(AssertionError, match="boom"):
        run(Raises, None, NODES, [], configured=False)
    result = run(Raises, None, NODES, [], configured=False, errors_ok=True)
    assert [r.crashed for r in result.plugin_runs] == [True]


def test_bound_applies_its_keywords_and_lets_a_call_override_them() -> None:
    pods = [failed("a"), failed("b")]
    one = Bound("RemoveFailedPods", {"maxNoOfPodsToEvictTotal": 1})
    assert len(one.evicted(NODES, pods, {"minPodLifetimeSeconds": 0})) == 1
    assert len(one.evicted(NODES, pods, {"minPodLifetimeSeconds": 0}, maxNoOfPodsToEvictTotal=2)) == 2
