"""Replays upstream's conformance fixtures (tests/conformance/fixtures, see its README.md).

A fixture records what an upstream unit test fed a plugin and what upstream's code did. The
harness rebuilds the same situation with desched's own pieces (snapshot, registry, framework,
DefaultEvictor, evictor with limits) and reports what desched evicts or decides.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from desched.api.policy import EvictionLimits, Policy, ProfileConfig
from desched.api.types import SKIP_POLICY_CHECKS
from desched.backends.simulated_eviction import RecordingBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.framework import Framework
from desched.framework.metrics import MetricsProviders
from desched.framework.registry import Registry
from desched.framework.types import ExtensionPoint
from desched.k8s.objects import KINDS, Node, Pod
from desched.plugins import default_registry
from desched.plugins.nodeutilization.usage import StaticNodeMetrics, StaticPrometheus

FIXTURES = Path(__file__).parent / "fixtures"

#: Args the upstream tests passed with a field absent mean Go's zero value, not the policy
#: default (fixtures README, "Args are not defaulted"). Only fields whose policy default differs
#: from the zero value need an entry.
GO_ZERO_VALUES: dict[str, dict[str, Any]] = {
    "RemoveFailedPods": {"minPodLifetimeSeconds": 0},
}

_REGISTRY: Registry | None = None


def registry() -> Registry:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = default_registry(entry_points=False)
    return _REGISTRY


def fixture_paths(plugin: str | None = None) -> list[Path]:
    pattern = f"{plugin}/*.json" if plugin else "*/*.json"
    return sorted(FIXTURES.glob(pattern))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def iter_fixtures(plugin: str | None = None) -> Iterator[dict[str, Any]]:
    for path in fixture_paths(plugin):
        yield load(path)


def decode_object(obj: dict[str, Any]) -> Any:
    cls = KINDS[obj["kind"]]
    return msgspec.convert(obj, cls, strict=False)


def build_snapshot(fixture: dict[str, Any]) -> ClusterSnapshot:
    by_kind: dict[str, list[Any]] = {}
    for obj in fixture["objects"]:
        if obj["kind"] not in KINDS:
            continue
        by_kind.setdefault(obj["kind"], []).append(decode_object(obj))
    return ClusterSnapshot(
        nodes=by_kind.get("Node", []),
        pods=by_kind.get("Pod", []),
        namespaces=by_kind.get("Namespace", []),
        pdbs=by_kind.get("PodDisruptionBudget", []),
        priority_classes=by_kind.get("PriorityClass", []),
        pvcs=by_kind.get("PersistentVolumeClaim", []),
        events=by_kind.get("Event", []),
    )


def now_of(fixture: dict[str, Any]) -> datetime:
    return msgspec.convert(fixture["now"], datetime)


def plugin_args(fixture: dict[str, Any]) -> Any:
    spec = registry().get(fixture["plugin"])
    assert spec is not None, f"plugin {fixture['plugin']} is not registered"
    raw = dict(GO_ZERO_VALUES.get(fixture["plugin"], {}))
    raw.update(fixture["args"] or {})
    # Upstream's tests build the plugin straight from its args: no policy-level validation.
    context = {SKIP_POLICY_CHECKS: True}
    return spec.args_model.model_validate(raw, context=context) if spec.args_model is not None else None


def evictor_args(fixture: dict[str, Any]) -> Any:
    spec = registry().get("DefaultEvictor")
    assert spec is not None and spec.args_model is not None
    return spec.args_model.model_validate(fixture["evictorArgs"] or {})


@dataclass
class StrategyRun:
    evicted: list[tuple[str, str]]


def run_strategy(fixture: dict[str, Any]) -> StrategyRun:
    snapshot = build_snapshot(fixture)
    point = ExtensionPoint.DESCHEDULE if fixture["extensionPoint"] == "Deschedule" else ExtensionPoint.BALANCE
    name = fixture["plugin"]
    limits = fixture.get("limits") or {}
    profile = ProfileConfig(
        name="conformance",
        plugins={
            point: (name,),
            ExtensionPoint.FILTER: ("DefaultEvictor",),
            ExtensionPoint.PRE_EVICTION_FILTER: ("DefaultEvictor",),
        },
        args={"DefaultEvictor": evictor_args(fixture), name: plugin_args(fixture)},
    )
    policy = Policy(
        profiles=(profile,),
        limits=EvictionLimits(
            per_node=limits.get("maxNoOfPodsToEvictPerNode"),
            per_namespace=limits.get("maxNoOfPodsToEvictPerNamespace"),
            total=limits.get("maxNoOfPodsToEvictTotal"),
        ),
    )
    now = now_of(fixture)
    framework = Framework(policy, registry(), clock=lambda: now)
    attach_fixture_metrics(framework, fixture)
    backend = RecordingBackend()
    framework.begin_cycle(snapshot, backend)
    nodes: list[Node] = []
    for node_name in fixture["nodes"]:
        node = snapshot.node(node_name)
        assert node is not None, f"fixture node {node_name} not seeded"
        nodes.append(node)
    runs = framework.run_extension_point(point, nodes)
    for run in runs:
        # Upstream's tests ignore the Status an extension point returns; a crash is still a failure.
        assert not run.crashed, f"plugin failed: {run.error}"
    return StrategyRun(evicted=backend.evicted)


def attach_fixture_metrics(framework: Framework, fixture: dict[str, Any]) -> None:
    """Give metrics-based plugins (LowNodeUtilization's metricsUtilization) the metrics the fixture
    captured: ``metricsObjects`` (metrics.k8s.io, collected once) and ``prometheus`` answers."""
    objects = fixture.get("metricsObjects")
    answers = fixture.get("prometheus")
    if objects is None and answers is None:
        return
    node_metrics = StaticNodeMetrics.from_objects(objects) if objects is not None else None
    prometheus = StaticPrometheus.from_api_results(answers) if answers is not None else None
    framework.use_metrics(MetricsProviders(node_metrics, prometheus))


def run_default_evictor(fixture: dict[str, Any]) -> list[bool]:
    """Every check of a DefaultEvictor fixture, as desched decides it."""
    snapshot = build_snapshot(fixture)
    profile = ProfileConfig(
        name="conformance",
        plugins={
            ExtensionPoint.FILTER: ("DefaultEvictor",),
            ExtensionPoint.PRE_EVICTION_FILTER: ("DefaultEvictor",),
        },
        args={"DefaultEvictor": evictor_args(fixture)},
    )
    now = now_of(fixture)
    framework = Framework(Policy(profiles=(profile,)), registry(), clock=lambda: now)
    framework.begin_cycle(snapshot, RecordingBackend())
    evictor = framework.profiles[0].instances["DefaultEvictor"]
    results = []
    for check in fixture["checks"]:
        pod = msgspec.convert(check["pod"], Pod, strict=False)
        if check["extensionPoint"] == "Filter":
            results.append(bool(evictor.filter(pod)))  # type: ignore[attr-defined]
        else:
            results.append(bool(evictor.pre_eviction_filter(pod)))  # type: ignore[attr-defined]
    return results
