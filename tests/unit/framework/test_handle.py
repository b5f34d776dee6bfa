"""The Handle is a plugin's only door: the limit-aware eviction loop, the report channel into the
cycle result, declared live inputs, metrics providers, node fit, and hooks found once by protocol."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest
from tests.unit.framework.test_framework_cycle import node, pod

from desched.api.policy import load_policy
from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework import (
    CycleEndHook,
    CycleReport,
    CycleStartHook,
    DeschedulePlugin,
    EvictResult,
    Handle,
    LiveInputs,
    MetricsProviders,
    MetricsRegistry,
    MetricsRegistryError,
    NamespaceFilter,
    Node,
    NoMetricsRegistry,
    Pod,
    ReportTable,
    Status,
)
from desched.framework.framework import CycleResult, Framework, FrameworkError
from desched.framework.registry import Registry, extension_points_of
from desched.framework.types import ExtensionPoint
from desched.k8s.namespaces import namespace_rule
from desched.k8s.resources import Resources

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SEEN: dict[str, Any] = {}


@dataclasses.dataclass(frozen=True)
class Tally:
    """A plugin's own report kind (the framework knows it only as a CycleReport)."""

    pods: tuple[str, ...]

    @property
    def kind(self) -> str:
        return "tallies"

    def to_json(self, shows: NamespaceFilter) -> dict[str, Any]:
        return {"pods": [p for p in self.pods if shows(p.partition("/")[0])]}

    def to_table(self, shows: NamespaceFilter) -> ReportTable:
        pods = [p for p in self.pods if shows(p.partition("/")[0])]
        return ReportTable(f"{len(pods)} tallied", ("pod",), [(p,) for p in pods], what="pods")


class InOrder:
    """Deschedule: every pod of the cluster, in name order, through ``evictor.in_order``."""

    name: ClassVar[str] = "InOrder"

    def __init__(self, args: object, handle: Handle) -> None:
        self.handle = handle
        self.cycles = 0

    def on_cycle_start(self) -> None:
        self.cycles += 1

    def on_cycle_end(self) -> None:
        # the cycle is over: its evictions are made and the handle still reaches its snapshot
        SEEN["ended"] = [*SEEN.get("ended", []), (self.cycles, len(self.handle.snapshot.pods))]

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        pods = sorted(self.handle.snapshot.pods, key=lambda p: p.metadata.name)
        own = [n for n in nodes if n.metadata.name == pods[0].spec.node_name]
        SEEN["fits"] = [
            self.handle.fits_other_node(pods[0], nodes),
            self.handle.fits_other_node(pods[0], own),
        ]
        gone: list[str] = []
        seen: list[str] = []
        order = self.handle.evictor.in_order(pods)
        for p in order:
            seen.append(p.metadata.name)
            if not p.metadata.name.endswith("skip") and order.evict(p, f"reason {p.metadata.name}").gone:
                gone.append(p.metadata.name)
        SEEN["stopped"] = order.stopped
        SEEN["gone"], SEEN["seen"] = gone, seen
        SEEN["metrics"] = self.handle.metrics
        SEEN["registry"] = self.handle.metrics_registry
        self.handle.attach_report(Tally(("default/a", "other/b")))
        return None

    def live_inputs(self) -> LiveInputs:
        return LiveInputs(warning_events=True, prometheus_queries=("q1", "q2"))


class Quiet:
    """Deschedule: does nothing; declares a Prometheus query (one shared with InOrder)."""

    name: ClassVar[str] = "Quiet"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        return None

    def live_inputs(self) -> LiveInputs:
        return LiveInputs(prometheus_queries=("q2", "q3"))


class NotAFilter:
    name: ClassVar[str] = "NotAFilter"

    def __init__(self, args: object, handle: Handle) -> None:
        pass

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        return None


def fw_registry() -> Registry:
    reg = Registry()
    reg.register_all([InOrder, Quiet, NotAFilter])
    return reg


def framework(
    plugins: list[str],
    *,
    limits: Mapping[str, int] | None = None,
    filters: Sequence[str] = (),
    metrics_registry: MetricsRegistry | None = None,
) -> Framework:
    reg = fw_registry()
    doc: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "allowDisablingDefaultEvictor": True,
                "pluginConfig": [{"name": n} for n in plugins],
                "plugins": {
                    "deschedule": {"enabled": plugins},
                    "filter": {"enabled": list(filters), "disabled": ["DefaultEvictor"]},
                    "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
                },
            }
        ],
        **(limits or {}),
    }
    return Framework(load_policy(doc, reg), reg, clock=lambda: NOW, metrics_registry=metrics_registry)


def cycle(fw: Framework, pods: list[Pod]) -> CycleResult:
    snapshot = ClusterSnapshot(nodes=[node("n1"), node("n2")], pods=pods)
    SEEN.clear()
    return fw.run_cycle(snapshot, SimulatedBackend(snapshot))


def test_in_order_leaves_out_the_rest_of_a_node_at_its_limit_and_goes_on_elsewhere() -> None:
    fw = framework(["InOrder"], limits={"maxNoOfPodsToEvictPerNode": 1})
    result = cycle(fw, [pod("a", "n1"), pod("b", "n1"), pod("c", "n2"), pod("d", "n1")])
    assert [r.name for r in result.evictions] == ["a", "c"]
    assert SEEN["gone"] == ["a", "c"]
    # b reached the limit (refused and recorded); d, on the same node, is left out without a request
    assert SEEN["seen"] == ["a", "b", "c"]
    assert [(r.name, r.result) for r in result.records if not r.result.ok] == [("b", EvictResult.NODE_LIMIT)]
    assert SEEN["stopped"] is False


def test_in_order_ends_at_the_total_and_the_plugin_decides_before_each_eviction() -> None:
    fw = framework(["InOrder"], limits={"maxNoOfPodsToEvictTotal": 2})
    result = cycle(fw, [pod("a", "n1"), pod("b-skip", "n1"), pod("c", "n2"), pod("d", "n2"), pod("e", "n2")])
    assert [r.name for r in result.evictions] == ["a", "c"]
    assert [r.reason for r in result.evictions] == ["reason a", "reason c"]
    # d is refused by the total; e is never reached
    assert SEEN["seen"] == ["a", "b-skip", "c", "d"]
    assert SEEN["stopped"] is True


def test_in_order_passes_over_a_namespace_at_its_limit() -> None:
    fw = framework(["InOrder"], limits={"maxNoOfPodsToEvictPerNamespace": 1})
    result = cycle(fw, [pod("a", "n1"), pod("b", "n1"), pod("c", "n1", ns="other")])
    assert [r.name for r in result.evictions] == ["a", "c"]
    assert SEEN["seen"] == ["a", "b", "c"] and SEEN["stopped"] is False


def test_reports_reach_the_cycle_result_with_profile_and_plugin() -> None:
    fw = framework(["InOrder", "Quiet"])
    result = cycle(fw, [pod("a", "n1")])
    [report] = result.reports
    assert (report.profile, report.plugin) == ("p", "InOrder")
    assert report.report == Tally(("default/a", "other/b"))
    assert isinstance(report.report, CycleReport)
    # a new cycle starts with no reports of its own until plugins report again
    assert len(cycle(fw, [pod("a", "n1")]).reports) == 1


def test_live_inputs_are_the_union_of_the_plugins_declarations() -> None:
    assert framework(["Quiet"]).live_inputs() == LiveInputs(prometheus_queries=("q2", "q3"))
    assert framework(["InOrder", "Quiet"]).live_inputs() == LiveInputs(True, ("q1", "q2", "q3"))


class _NoMetrics:
    def node_usage(self) -> Mapping[str, Resources]:
        return {}

    def pod_usage(self, namespace: str, name: str) -> Resources | None:
        return None


def test_metrics_providers_reach_the_plugin_through_its_handle() -> None:
    fw = framework(["InOrder"])
    cycle(fw, [pod("a", "n1")])
    assert SEEN["metrics"] == MetricsProviders()
    provider = _NoMetrics()
    fw.use_metrics(MetricsProviders(node_metrics=provider))
    cycle(fw, [pod("a", "n1")])
    assert SEEN["metrics"].node_metrics is provider


def test_node_fit_through_the_handle() -> None:
    fw = framework(["InOrder"])
    cycle(fw, [pod("a", "n1")])
    # n2 has room for a 100m pod; its own node n1 is not another node
    assert SEEN["fits"] == [True, False]


def test_hooks_are_found_once_by_protocol() -> None:
    fw = framework(["InOrder", "Quiet"])
    [profile] = fw.profiles
    [hooked] = profile.cycle_hooks
    assert isinstance(hooked, InOrder) and isinstance(hooked, CycleStartHook)
    assert [type(p) for p in profile.deschedulers] == [InOrder, Quiet]
    assert all(isinstance(p, DeschedulePlugin) for p in profile.deschedulers)
    cycle(fw, [pod("a", "n1")])
    cycle(fw, [pod("a", "n1")])
    assert hooked.cycles == 2
    [ended] = profile.cycle_end_hooks
    assert ended is hooked and isinstance(hooked, CycleEndHook)
    assert not isinstance(Quiet, CycleEndHook)


def test_the_cycle_end_hook_runs_once_per_cycle_after_its_evictions() -> None:
    fw = framework(["InOrder", "Quiet"])
    result = cycle(fw, [pod("a", "n1"), pod("b", "n2"), pod("skip", "n2")])
    # one call, once InOrder had evicted a and b (one pod left in the snapshot)
    assert SEEN["ended"] == [(1, 1)]
    assert [r.name for r in result.evictions] == ["a", "b"]
    assert extension_points_of(NotAFilter) == frozenset({ExtensionPoint.DESCHEDULE})


def test_a_plugin_enabled_at_a_point_it_does_not_serve_is_refused() -> None:
    # the policy refuses it from the registered extension points (found by protocol)...
    with pytest.raises(PolicyError, match=r"plugin 'NotAFilter' does not implement filter"):
        framework(["InOrder"], filters=["NotAFilter"])
    # ...and so does the framework, were a policy to get past that (checked once per profile)
    policy = framework(["NotAFilter"]).policy
    config = policy.profiles[0]
    wrong = dataclasses.replace(config, plugins={**config.plugins, ExtensionPoint.FILTER: ("NotAFilter",)})
    with pytest.raises(FrameworkError, match="plugin NotAFilter does not implement filter"):
        Framework(dataclasses.replace(policy, profiles=[wrong]), fw_registry())


@pytest.mark.parametrize(
    ("include", "exclude", "allowed", "refused"),
    [
        (None, None, ["a", "b"], []),
        (["a"], None, ["a"], ["b"]),
        (None, ["a"], ["b"], ["a"]),
        (["a", "b"], ["b"], ["a"], ["b", "c"]),
    ],
)
def test_namespace_rule(
    include: list[str] | None, exclude: list[str] | None, allowed: list[str], refused: list[str]
) -> None:
    rule = namespace_rule(include, exclude)
    if include is None and exclude is None:
        assert rule is None
        return
    assert rule is not None
    assert [ns for ns in allowed if rule(ns)] == allowed
    assert [ns for ns in refused if rule(ns)] == []


def test_the_metrics_registry_given_to_the_framework_reaches_the_plugin() -> None:
    cycle(framework(["InOrder"]), [pod("a", "n1")])
    assert isinstance(SEEN["registry"], NoMetricsRegistry)  # simulate, tests: kept nowhere
    given = NoMetricsRegistry()
    fw = framework(["InOrder"], metrics_registry=given)
    cycle(fw, [pod("a", "n1")])
    assert SEEN["registry"] is given


@pytest.mark.parametrize(
    ("kind", "name", "labels", "error"),
    [
        ("counter", "my_plugin_evaluations", (), "a counter's name ends in _total"),
        ("gauge", "my-plugin", (), "not a Prometheus metric name"),
        ("gauge", "my_plugin_pods", ("profile", "profile"), "invalid or repeated label names"),
        ("gauge", "my_plugin_pods", ("__name",), "invalid or repeated label names"),
    ],
)
def test_the_registry_without_export_checks_the_exporting_ones_rules(
    kind: str, name: str, labels: tuple[str, ...], error: str
) -> None:
    registry = NoMetricsRegistry()
    register = registry.counter if kind == "counter" else registry.gauge
    with pytest.raises(MetricsRegistryError, match=error):
        register(name, "help", labels)


def test_the_registry_without_export_gives_a_name_one_meaning() -> None:
    registry = NoMetricsRegistry()
    registry.gauge("my_plugin_pods", "Pods", ["profile"]).labels("p").set(3)
    registry.gauge("my_plugin_pods", "Pods", ["profile"])  # asked again (another profile): fine
    with pytest.raises(MetricsRegistryError, match="already registered differently"):
        registry.gauge("my_plugin_pods", "Pods", ["profile", "node"])
    with pytest.raises(MetricsRegistryError, match="already registered differently"):
        registry.counter("my_plugin_seen_total", "Seen", ["profile"])
        registry.gauge("my_plugin_seen_total", "Seen", ["profile"])
    with pytest.raises(MetricsRegistryError, match="1 label values for 2 labels"):
        registry.counter("my_plugin_judged_total", "Judged", ["profile", "reason"]).labels("p").inc()
