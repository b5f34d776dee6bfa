"""RemovePodsHavingTooManyRestarts: args validation through the policy loader; edge cases."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from tests import builders

from desched.api.policy import EvictionLimits, Policy, ProfileConfig, load_policy
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.evictor import EvictionRequest
from desched.framework.framework import Framework
from desched.framework.registry import Registry
from desched.framework.types import ExtensionPoint
from desched.k8s.objects import Pod
from desched.plugins import default_registry
from desched.plugins.removepodshavingtoomanyrestarts.args import RemovePodsHavingTooManyRestartsArgs
from desched.plugins.removepodshavingtoomanyrestarts.plugin import RemovePodsHavingTooManyRestarts

NAME = "RemovePodsHavingTooManyRestarts"
NOW = datetime(2026, 1, 1, tzinfo=UTC)
REG = default_registry(entry_points=False)


def policy_doc(args: dict[str, Any] | None, *, configured: bool = True) -> dict[str, Any]:
    # DefaultEvictor is left out so that only this plugin's args are under test.
    profile: dict[str, Any] = {
        "name": "p",
        "allowDisablingDefaultEvictor": True,
        "plugins": {
            "deschedule": {"enabled": [NAME]},
            "filter": {"disabled": ["DefaultEvictor"]},
            "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
        },
    }
    if configured:
        profile["pluginConfig"] = [{"name": NAME, "args": args}]
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [profile]}


def load_error(args: dict[str, Any] | None, *, configured: bool = True) -> PolicyError:
    with pytest.raises(PolicyError) as e:
        load_policy(policy_doc(args, configured=configured), REG)
    assert "\n" not in str(e.value)
    return e.value


def pod(
    name: str,
    node: str = "n1",
    restarts: tuple[int, ...] = (),
    init: tuple[int, ...] = (),
    *,
    phase: str = "Running",
    waiting: str | None = None,
    init_waiting: str | None = None,
    ephemeral: tuple[int, ...] = (),
    namespace: str = "default",
) -> Pod:
    def statuses(counts: tuple[int, ...], reason: str | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"restartCount": c} for c in counts]
        if reason is not None:
            out.append({"restartCount": 0, "state": {"waiting": {"reason": reason}}})
        return out

    status = {
        "phase": phase,
        "containerStatuses": statuses(restarts, waiting),
        "initContainerStatuses": statuses(init, init_waiting),
        "ephemeralContainerStatuses": statuses(ephemeral, None),
    }
    return builders.bare_pod(
        name, namespace=namespace, node=node, uid=name, owner={"kind": "ReplicaSet"}, status=status
    )


class Backend:
    def __init__(self) -> None:
        self.evicted: list[str] = []

    def evict(self, p: Pod, request: EvictionRequest) -> str | None:
        self.evicted.append(p.metadata.name)
        return None


def run(
    args: dict[str, Any],
    pods: list[Pod],
    *,
    nodes: tuple[str, ...] = ("n1", "n2"),
    limits: EvictionLimits | None = None,
) -> list[str]:
    registry = Registry()
    registry.register(RemovePodsHavingTooManyRestarts)
    profile = ProfileConfig(
        name="p",
        plugins={ExtensionPoint.DESCHEDULE: (NAME,)},
        args={NAME: RemovePodsHavingTooManyRestartsArgs.model_validate(args)},
    )
    framework = Framework(
        Policy(profiles=(profile,), limits=limits or EvictionLimits()), registry, clock=lambda: NOW
    )
    node_objs = [builders.bare_node(n) for n in nodes]
    backend = Backend()
    framework.begin_cycle(ClusterSnapshot(nodes=node_objs, pods=pods), backend)
    runs = framework.run_extension_point(ExtensionPoint.DESCHEDULE, node_objs)
    assert all(r.error is None for r in runs)
    return backend.evicted


# ----------------------------------------------------------------------------- args


def test_all_args_load() -> None:
    policy = load_policy(
        policy_doc(
            {
                "podRestartThreshold": 100,
                "includingInitContainers": True,
                "states": ["Running", "CrashLoopBackOff"],
                "namespaces": {"exclude": ["kube-system"]},
                "labelSelector": {"matchLabels": {"a": "b"}},
            }
        ),
        REG,
    )
    args = policy.profiles[0].args[NAME]
    assert isinstance(args, RemovePodsHavingTooManyRestartsArgs)
    assert args.pod_restart_threshold == 100 and args.including_init_containers
    assert args.states == ["Running", "CrashLoopBackOff"]


@pytest.mark.parametrize(
    ("args", "path", "reason"),
    [
        ({}, "args.podRestartThreshold", "required field is missing"),
        ({"includingInitContainers": True}, "args.podRestartThreshold", "required field is missing"),
        ({"podRestartThreshold": 0}, "args.podRestartThreshold", "greater than or equal to 1"),
        ({"podRestartThreshold": 2**31}, "args.podRestartThreshold", "less than or equal to 2147483647"),
        (
            {"podRestartThreshold": 3, "states": ["Pending"]},
            "args.states[0]",
            "must be one of Running, CrashLoopBackOff, got 'Pending'",
        ),
        (
            {"podRestartThreshold": 3, "namespaces": {"include": ["a"], "exclude": ["b"]}},
            "args.namespaces.exclude",
            "cannot be set with include (got include=['a'], exclude=['b'])",
        ),
        (
            {"podRestartThreshold": 3, "includingEphemeralContainers": True},
            "args.includingEphemeralContainers",
            "unknown field",
        ),
    ],
)
def test_invalid_args_name_the_field(args: dict[str, Any], path: str, reason: str) -> None:
    e = load_error(args)
    assert e.path == f"profiles[0].pluginConfig[0].{path}"
    assert reason in e.reason


def test_enabled_without_plugin_config_is_an_error() -> None:
    e = load_error(None, configured=False)
    assert e.path == "profiles[0].pluginConfig"
    assert "podRestartThreshold" in e.reason


# ----------------------------------------------------------------------------- behaviour


def test_threshold_counts_container_restarts_and_init_only_with_the_flag() -> None:
    pods = [
        pod("at", restarts=(3, 2)),
        pod("below", restarts=(4,)),
        pod("with-init", restarts=(2,), init=(3,)),
        pod("ephemeral", restarts=(1,), ephemeral=(10,)),
    ]
    assert run({"podRestartThreshold": 5}, pods) == ["at"]
    assert run({"podRestartThreshold": 5, "includingInitContainers": True}, pods) == ["at", "with-init"]


def test_most_restarts_first_per_node_in_node_order() -> None:
    pods = [
        pod("n1-few", "n1", (5,)),
        pod("n1-many", "n1", (50,)),
        pod("n2-most", "n2", (500,)),
        pod("n1-tie-b", "n1", (20,)),
        pod("n1-tie-a", "n1", (20,)),
    ]
    assert run({"podRestartThreshold": 1}, pods) == ["n1-many", "n1-tie-a", "n1-tie-b", "n1-few", "n2-most"]
    assert run({"podRestartThreshold": 1}, pods, nodes=("n2", "n1"))[0] == "n2-most"


def test_node_limit_moves_on_to_the_next_node_total_limit_stops() -> None:
    pods = [pod("a", "n1", (9,)), pod("b", "n1", (8,)), pod("c", "n2", (7,)), pod("d", "n2", (6,))]
    assert run({"podRestartThreshold": 1}, pods, limits=EvictionLimits(per_node=1)) == ["a", "c"]
    assert run({"podRestartThreshold": 1}, pods, limits=EvictionLimits(total=3)) == ["a", "b", "c"]


def test_states() -> None:
    pods = [
        pod("running", restarts=(5,)),
        pod("pending-crashloop", restarts=(5,), phase="Pending", waiting="CrashLoopBackOff"),
        pod("pending-init-crashloop", restarts=(5,), phase="Pending", init_waiting="CrashLoopBackOff"),
        pod("pending", restarts=(5,), phase="Pending", waiting="ContainerCreating"),
    ]
    assert run({"podRestartThreshold": 1, "states": ["Running"]}, pods) == ["running"]
    assert run({"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]}, pods) == ["pending-crashloop"]
    assert run(
        {"podRestartThreshold": 1, "states": ["CrashLoopBackOff"], "includingInitContainers": True}, pods
    ) == ["pending-crashloop", "pending-init-crashloop"]
    assert len(run({"podRestartThreshold": 1}, pods)) == 4


def test_namespaces_select_pods() -> None:
    pods = [pod("sys", restarts=(9,), namespace="kube-system"), pod("app", restarts=(9,), namespace="apps")]
    assert run({"podRestartThreshold": 1, "namespaces": {"exclude": ["kube-system"]}}, pods) == ["app"]
