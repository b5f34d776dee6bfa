"""One harness for the plugin tests, after upstream's ``frameworktesting.InitFrameworkHandle``:
a policy that enables ONE plugin with its args (at the extension points the registry finds in its
class), loaded through the real policy loader; a Framework built from it on the in-tree registry
with a fixed clock; one cycle on a snapshot; and the pods it evicted.

    result = run("RemoveDuplicates", {"namespaces": {"exclude": ["x"]}}, nodes, pods)
    assert evicted(result) == ["web-2"]
    assert "thresholds" in load_error("LowNodeUtilization", {})

DefaultEvictor is left out unless ``evictor=`` asks for it (``True``: on with its defaults; a dict:
on with those args), so that only the plugin's own decisions are under test. Every other keyword
of :func:`policy_doc`, :func:`framework` and :func:`run` goes to the top of the DeschedulerPolicy
(``maxNoOfPodsToEvictPerNode=1``, ``nodeSelector=...``, ``metricsProviders=[...]``), except
``extra=``: plugins enabled beside the one under test (an in-tree name, or a test's own class).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from desched.api.policy import ExtensionPoint, Policy, load_policy
from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.evictor import EvictionBackend
from desched.framework.findings import Finding
from desched.framework.framework import CycleResult, Framework
from desched.framework.nodeactions import NodeActionBackend
from desched.framework.registry import Registry
from desched.k8s.objects import Namespace, Node, Pod
from desched.plugins import default_registry

__all__ = [
    "NOW",
    "REGISTRY",
    "Bound",
    "cycle",
    "evicted",
    "framework",
    "instance",
    "load",
    "load_args",
    "load_error",
    "policy_doc",
    "policy_error",
    "run",
    "run_policy",
]

#: The clock of every harness framework (a test that needs another passes ``now=``).
NOW = datetime(2026, 1, 1, tzinfo=UTC)
#: The in-tree plugins, and no installed out-of-tree one.
REGISTRY = default_registry(entry_points=False)

_POINTS = (ExtensionPoint.DESCHEDULE, ExtensionPoint.BALANCE)
_EVICTOR = "DefaultEvictor"
#: A plugin: an in-tree plugin's name, or a test's own class (registered beside the in-tree ones).
Plugin = str | type
#: A sorter enabled at the Sort or PreSort point: its name, or its name and its args.
Sorter = str | tuple[str, dict[str, Any] | None]


def registry_with(plugins: Sequence[Plugin] = ()) -> Registry:
    """The in-tree registry, plus the test's own plugin classes among ``plugins`` (origin "test")."""
    classes = [cls for cls in plugins if isinstance(cls, type)]
    if not classes:
        return REGISTRY
    registry = default_registry(entry_points=False)
    registry.register_all(classes, origin="test")
    return registry


def points_of(plugin: str, registry: Registry = REGISTRY) -> list[str]:
    """The extension points the registry finds in ``plugin``'s class, in the policy's order."""
    spec = registry.get(plugin)
    assert spec is not None, f"{plugin} is not registered"
    return [p.value for p in ExtensionPoint if p in spec.extension_points]


def name_of(plugin: Plugin) -> str:
    if isinstance(plugin, str):
        return plugin
    name = getattr(plugin, "name", None)
    assert isinstance(name, str), plugin
    return name


def policy_doc(
    plugin: Plugin,
    args: dict[str, Any] | None = None,
    *,
    configured: bool = True,
    evictor: bool | dict[str, Any] = False,
    extra: Sequence[Plugin] = (),
    sort: Sequence[Sorter] = (),
    presort: Sequence[Sorter] = (),
    **top: Any,
) -> dict[str, Any]:
    """A DeschedulerPolicy of one profile ``p`` enabling ``plugin`` at its extension points.

    ``configured=False`` leaves the plugin out of ``pluginConfig`` (its default args apply);
    ``evictor`` is described in the module's docstring; ``extra`` plugins are enabled beside it
    at their extension points, with their default args; ``sort`` and ``presort`` enable sorters at
    that point only, in that order, with their args; ``top`` goes to the top of the policy.
    """
    registry = registry_with([plugin, *extra])
    name = name_of(plugin)
    plugins: dict[str, Any] = {}
    for each in [name, *map(name_of, extra)]:
        for point in points_of(each, registry):
            plugins.setdefault(point, {"enabled": []})["enabled"].append(each)
    config: list[dict[str, Any]] = [{"name": name, "args": args}] if configured else []
    for point, sorters in ((ExtensionPoint.SORT, sort), (ExtensionPoint.PRESORT, presort)):
        for sorter in sorters:
            sorter_name, sorter_args = (sorter, None) if isinstance(sorter, str) else sorter
            plugins.setdefault(point.value, {"enabled": []})["enabled"].append(sorter_name)
            if sorter_args is not None:
                config.append({"name": sorter_name, "args": sorter_args})
    profile: dict[str, Any] = {"name": "p", "pluginConfig": config, "plugins": plugins}
    if evictor is False:
        for point in (ExtensionPoint.FILTER, ExtensionPoint.PRE_EVICTION_FILTER):
            plugins.setdefault(point.value, {})["disabled"] = [_EVICTOR]
        profile["allowDisablingDefaultEvictor"] = True
    elif isinstance(evictor, dict):
        config.insert(0, {"name": _EVICTOR, "args": evictor})
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [profile], **top}


def _registry(plugin: Plugin, kw: dict[str, Any]) -> Registry:
    return registry_with([plugin, *kw.get("extra", ())])


def load(plugin: Plugin, args: dict[str, Any] | None = None, **kw: Any) -> Policy:
    """:func:`policy_doc` through the real policy loader."""
    return load_policy(policy_doc(plugin, args, **kw), _registry(plugin, kw))


def load_args(plugin: str, args: dict[str, Any] | None, **kw: Any) -> Any:
    """The plugin's args as the policy loader makes them (checked to be the registry's args model)."""
    spec = REGISTRY.get(plugin)
    assert spec is not None and spec.args_model is not None, f"{plugin} takes no args"
    loaded = load(plugin, args, **kw).profiles[0].args[plugin]
    assert isinstance(loaded, spec.args_model), loaded
    return loaded


def policy_error(plugin: str, args: dict[str, Any] | None, **kw: Any) -> PolicyError:
    """The error the policy loader gives for these args (it must refuse them), on one line."""
    with pytest.raises(PolicyError) as e:
        load(plugin, args, **kw)
    assert "\n" not in str(e.value), str(e.value)
    return e.value


def load_error(plugin: str, args: dict[str, Any] | None, **kw: Any) -> str:
    """:func:`policy_error`'s message: ``<field path>: <reason>``."""
    return str(policy_error(plugin, args, **kw))


def framework(
    plugin: Plugin, args: dict[str, Any] | None = None, *, now: datetime = NOW, **kw: Any
) -> Framework:
    """A Framework for the one-plugin policy, on the in-tree registry, its clock stopped at ``now``."""
    return Framework(load(plugin, args, **kw), _registry(plugin, kw), clock=lambda: now)


def instance(
    plugin: Plugin,
    args: dict[str, Any] | None = None,
    *,
    snapshot: ClusterSnapshot | None = None,
    now: datetime = NOW,
    **kw: Any,
) -> object:
    """The plugin's instance, its handle pointed at a cycle on ``snapshot`` (empty by default)
    that has begun: what upstream's ``InitFrameworkHandle`` and a plugin's ``New`` give a test
    that calls the plugin's hooks itself."""
    fw = framework(plugin, args, now=now, **kw)
    snapshot = snapshot if snapshot is not None else ClusterSnapshot()
    fw.begin_cycle(snapshot, SimulatedBackend(snapshot))
    return fw.profiles[0].instances[name_of(plugin)]


def run(
    plugin: Plugin,
    args: dict[str, Any] | None,
    nodes: Sequence[Node] = (),
    pods: Sequence[Pod] = (),
    *,
    snapshot: ClusterSnapshot | None = None,
    namespaces: Sequence[Namespace] = (),
    found: list[Finding] | None = None,
    backend: Callable[[ClusterSnapshot], EvictionBackend] = SimulatedBackend,
    now: datetime = NOW,
    plugin_nodes: Sequence[Node] | None = None,
    errors_ok: bool = False,
    **kw: Any,
) -> CycleResult:
    """One cycle of the one-plugin framework on ``snapshot`` (or one of ``nodes``, ``pods`` and
    ``namespaces``).

    ``found`` collects the plugin's findings (the candidates it left, and why); ``backend`` makes
    the eviction backend from the snapshot (default: every eviction goes through).
    ``plugin_nodes``: the nodes the plugin is given, in this order (as upstream's tests call
    ``Deschedule(ctx, nodes)``), instead of the ready nodes a cycle picks. A plugin that raises or
    returns an error fails the test unless ``errors_ok``.
    """
    fw = framework(plugin, args, now=now, **kw)
    return cycle(
        fw, nodes, pods, snapshot=snapshot, namespaces=namespaces, found=found, backend=backend,
        plugin_nodes=plugin_nodes, errors_ok=errors_ok,
    )  # fmt: skip


def run_policy(
    doc: dict[str, Any],
    nodes: Sequence[Node] = (),
    pods: Sequence[Pod] = (),
    *,
    snapshot: ClusterSnapshot | None = None,
    now: datetime = NOW,
) -> CycleResult:
    """One cycle of a whole DeschedulerPolicy document (several profiles, a README's example)."""
    fw = Framework(load_policy(doc, REGISTRY), REGISTRY, clock=lambda: now)
    return cycle(fw, nodes, pods, snapshot=snapshot)


def cycle(
    fw: Framework,
    nodes: Sequence[Node] = (),
    pods: Sequence[Pod] = (),
    *,
    snapshot: ClusterSnapshot | None = None,
    namespaces: Sequence[Namespace] = (),
    found: list[Finding] | None = None,
    backend: Callable[[ClusterSnapshot], EvictionBackend] = SimulatedBackend,
    plugin_nodes: Sequence[Node] | None = None,
    errors_ok: bool = False,
    node_actions: NodeActionBackend | None = None,
) -> CycleResult:
    """One cycle of ``fw`` (see :func:`run` for the keywords; ``node_actions`` carries out the
    plugin's node actions, default: none is carried out)."""
    if snapshot is None:
        snapshot = ClusterSnapshot(nodes=list(nodes), pods=list(pods), namespaces=list(namespaces))
    if found is not None:
        fw.findings.attach(found.append)
    if plugin_nodes is None:
        result = fw.run_cycle(snapshot, backend(snapshot), node_actions=node_actions)
    else:
        result = CycleResult(started=fw.ctx.clock(), nodes=len(plugin_nodes))
        fw.begin_cycle(snapshot, backend(snapshot), node_actions=node_actions)
        for point in _POINTS:
            result.plugin_runs.extend(fw.run_extension_point(point, list(plugin_nodes)))
        result.records = list(fw.ctx.evictor.records)
    errors = [r.error for r in result.plugin_runs if r.error is not None]
    assert errors_ok or not errors, errors
    return result


def evicted(result: CycleResult, *, namespaced: bool = False) -> list[str]:
    """The names of the pods the cycle evicted, in eviction order (``namespaced``: as
    ``namespace/name`` outside the ``default`` namespace)."""
    return [
        f"{r.namespace}/{r.name}" if namespaced and r.namespace != "default" else r.name
        for r in result.evictions
    ]


@dataclass(frozen=True)
class Bound:
    """The harness bound to one plugin and the policy keywords a test file always uses, for files
    that run it many times: ``TSC = Bound(PLUGIN, {"evictor": True})``, then
    ``TSC.evicted(nodes, pods, {"constraints": []})``."""

    plugin: Plugin
    policy: dict[str, Any] = field(default_factory=dict)
    namespaced: bool = False

    def run(
        self,
        nodes: Sequence[Node] = (),
        pods: Sequence[Pod] = (),
        args: dict[str, Any] | None = None,
        **kw: Any,
    ) -> CycleResult:
        """:func:`run` with these args (``{}`` when None) and the bound keywords, then ``kw``."""
        return run(self.plugin, {} if args is None else args, nodes, pods, **{**self.policy, **kw})

    def evicted(
        self,
        nodes: Sequence[Node] = (),
        pods: Sequence[Pod] = (),
        args: dict[str, Any] | None = None,
        **kw: Any,
    ) -> list[str]:
        """:func:`evicted` of :meth:`run`."""
        return evicted(self.run(nodes, pods, args, **kw), namespaced=self.namespaced)

    def framework(self, args: dict[str, Any] | None = None, **kw: Any) -> Framework:
        return framework(self.plugin, {} if args is None else args, **{**self.policy, **kw})

    def load(self, args: dict[str, Any] | None, **kw: Any) -> Policy:
        return load(self.plugin, args, **{**self.policy, **kw})

    def load_args(self, args: dict[str, Any] | None, **kw: Any) -> Any:
        return load_args(self.plugin, args, **{**self.policy, **kw})

    def load_error(self, args: dict[str, Any] | None, **kw: Any) -> str:
        return load_error(self.plugin, args, **{**self.policy, **kw})
