"""RemovePodsHavingTooManyRestarts: args validation through the policy loader; edge cases."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.unit.plugins.harness import evicted, load, policy_error, run

from desched.k8s.objects import Pod
from desched.plugins.removepodshavingtoomanyrestarts.args import RemovePodsHavingTooManyRestartsArgs

NAME = "RemovePodsHavingTooManyRestarts"
NODES = [builders.bare_node(n, ready=True) for n in ("n1", "n2")]


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


# ----------------------------------------------------------------------------- args


def test_all_args_load() -> None:
    policy = load(
        NAME,
        {
            "podRestartThreshold": 100,
            "includingInitContainers": True,
            "states": ["Running", "CrashLoopBackOff"],
            "namespaces": {"exclude": ["kube-system"]},
            "labelSelector": {"matchLabels": {"a": "b"}},
        },
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
    e = policy_error(NAME, args)
    assert e.path == f"profiles[0].pluginConfig[0].{path}"
    assert reason in e.reason


def test_enabled_without_plugin_config_is_an_error() -> None:
    e = policy_error(NAME, None, configured=False)
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
    assert evicted(run(NAME, {"podRestartThreshold": 5}, NODES, pods)) == ["at"]
    assert evicted(run(NAME, {"podRestartThreshold": 5, "includingInitContainers": True}, NODES, pods)) == [
        "at",
        "with-init",
    ]


def test_most_restarts_first_per_node_in_node_order() -> None:
    pods = [
        pod("n1-few", "n1", (5,)),
        pod("n1-many", "n1", (50,)),
        pod("n2-most", "n2", (500,)),
        pod("n1-tie-b", "n1", (20,)),
        pod("n1-tie-a", "n1", (20,)),
    ]
    assert evicted(run(NAME, {"podRestartThreshold": 1}, NODES, pods)) == [
        "n1-many",
        "n1-tie-a",
        "n1-tie-b",
        "n1-few",
        "n2-most",
    ]
    assert (
        evicted(run(NAME, {"podRestartThreshold": 1}, NODES, pods, plugin_nodes=NODES[::-1]))[0] == "n2-most"
    )


def test_node_limit_moves_on_to_the_next_node_total_limit_stops() -> None:
    pods = [pod("a", "n1", (9,)), pod("b", "n1", (8,)), pod("c", "n2", (7,)), pod("d", "n2", (6,))]
    assert evicted(run(NAME, {"podRestartThreshold": 1}, NODES, pods, maxNoOfPodsToEvictPerNode=1)) == [
        "a",
        "c",
    ]
    assert evicted(run(NAME, {"podRestartThreshold": 1}, NODES, pods, maxNoOfPodsToEvictTotal=3)) == [
        "a",
        "b",
        "c",
    ]


def test_states() -> None:
    pods = [
        pod("running", restarts=(5,)),
        pod("pending-crashloop", restarts=(5,), phase="Pending", waiting="CrashLoopBackOff"),
        pod("pending-init-crashloop", restarts=(5,), phase="Pending", init_waiting="CrashLoopBackOff"),
        pod("pending", restarts=(5,), phase="Pending", waiting="ContainerCreating"),
    ]
    assert evicted(run(NAME, {"podRestartThreshold": 1, "states": ["Running"]}, NODES, pods)) == ["running"]
    assert evicted(run(NAME, {"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]}, NODES, pods)) == [
        "pending-crashloop"
    ]
    assert evicted(
        run(
            NAME,
            {"podRestartThreshold": 1, "states": ["CrashLoopBackOff"], "includingInitContainers": True},
            NODES,
            pods,
        )
    ) == ["pending-crashloop", "pending-init-crashloop"]
    assert len(evicted(run(NAME, {"podRestartThreshold": 1}, NODES, pods))) == 4


def test_namespaces_select_pods() -> None:
    pods = [pod("sys", restarts=(9,), namespace="kube-system"), pod("app", restarts=(9,), namespace="apps")]
    assert evicted(
        run(NAME, {"podRestartThreshold": 1, "namespaces": {"exclude": ["kube-system"]}}, NODES, pods)
    ) == ["app"]
