"""RemoveFailedPods: args, defaults and validation through the policy loader; edge cases."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from tests import builders
from tests.unit.plugins.harness import NOW, evicted, load_args, policy_error, run

from desched.k8s.objects import Pod


def pod(
    name: str,
    node: str = "n1",
    *,
    age: float = 7200,
    owner: str = "ReplicaSet",
    labels: dict[str, str] | None = None,
    **status: Any,
) -> Pod:
    status.setdefault("phase", "Failed")
    created = (NOW - timedelta(seconds=age)).isoformat().replace("+00:00", "Z")
    return builders.bare_pod(
        name,
        namespace="default",
        node=node,
        uid=name,
        created=created,
        labels=labels or {},
        owner=(owner, "owner"),
        controller=None,
        status=status,
    )


PLUGIN = "RemoveFailedPods"
NODES = [builders.bare_node(n, ready=True) for n in ("n1", "n2")]


# ----------------------------------------------------------------------------- args


def test_defaults() -> None:
    for args in (load_args(PLUGIN, {}), load_args(PLUGIN, None), load_args(PLUGIN, None, configured=False)):
        assert args.min_pod_lifetime_seconds == 3600
        assert args.reasons is None and args.exit_codes is None and args.exclude_owner_kinds is None
        assert args.including_init_containers is False


def test_all_args_load_with_their_wire_names() -> None:
    args = load_args(
        PLUGIN,
        {
            "namespaces": {"include": ["batch"]},
            "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            "excludeOwnerKinds": ["Job"],
            "reasons": ["NodeAffinity", "SomeContainerReason"],
            "exitCodes": [1],
            "includingInitContainers": True,
            "minPodLifetimeSeconds": 0,
        },
    )
    assert args.exclude_owner_kinds == ["Job"] and args.min_pod_lifetime_seconds == 0
    # reasons are not restricted to PodLifeTime's states: any container reason may be named
    assert args.reasons == ["NodeAffinity", "SomeContainerReason"]


@pytest.mark.parametrize(
    ("args", "path", "reason"),
    [
        (
            {"namespaces": {"include": ["a"], "exclude": ["b"]}},
            "args.namespaces.exclude",
            "cannot be set with include (got include=['a'], exclude=['b'])",
        ),
        ({"minPodLifetimeSeconds": -1}, "args.minPodLifetimeSeconds", "greater than or equal to 0"),
        ({"exitCodes": [-(2**31) - 1]}, "args.exitCodes[0]", "greater than or equal to -2147483648"),
        ({"excludeOwnerKinds": "Job"}, "args.excludeOwnerKinds", "valid list"),
        ({"minPodLifeTimeSeconds": 5}, "args.minPodLifeTimeSeconds", "unknown field"),
        ({"labelSelector": {"matchLabels": {"bad key!": "x"}}}, "args.labelSelector", ""),
    ],
)
def test_invalid_args_name_the_field(args: dict[str, Any], path: str, reason: str) -> None:
    e = policy_error(PLUGIN, args)
    assert e.path == f"profiles[0].pluginConfig[0].{path}"
    assert reason in e.reason


# ----------------------------------------------------------------------------- behaviour


def test_only_failed_pods_even_when_a_reason_matches() -> None:
    pods = [
        pod("running", phase="Running", reason="NodeAffinity"),
        pod("succeeded", phase="Succeeded"),
        pod("failed", reason="NodeAffinity"),
    ]
    assert evicted(run(PLUGIN, {"reasons": ["NodeAffinity"]}, NODES, pods)) == ["failed"]
    assert evicted(run(PLUGIN, {}, NODES, pods)) == ["failed"]


def test_default_minimum_age_is_one_hour_strictly() -> None:
    pods = [pod("young", age=60), pod("hour", age=3600.5), pod("old", age=3601)]
    assert evicted(run(PLUGIN, {}, NODES, pods)) == ["old"]
    assert evicted(run(PLUGIN, {"minPodLifetimeSeconds": 0}, NODES, pods)) == ["old", "hour", "young"]


def test_reasons_match_pod_and_container_reasons() -> None:
    pods = [
        pod("pod-reason", reason="Shutdown"),
        pod("terminated", containerStatuses=[{"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]),
        pod("waiting", containerStatuses=[{"state": {"waiting": {"reason": "CreateContainerConfigError"}}}]),
        pod(
            "init-only", initContainerStatuses=[{"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
        ),
        pod("none"),
    ]
    args: dict[str, Any] = {"reasons": ["Shutdown", "Error", "CreateContainerConfigError"]}
    assert sorted(evicted(run(PLUGIN, args, NODES, pods))) == ["pod-reason", "terminated", "waiting"]
    assert sorted(evicted(run(PLUGIN, {**args, "includingInitContainers": True}, NODES, pods))) == [
        "init-only",
        "pod-reason",
        "terminated",
        "waiting",
    ]


def test_exit_codes_and_reasons_are_anded() -> None:
    pods = [
        pod("both", containerStatuses=[{"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]),
        pod(
            "code-only", containerStatuses=[{"state": {"terminated": {"exitCode": 1, "reason": "OOMKilled"}}}]
        ),
        pod(
            "init-code", initContainerStatuses=[{"state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]
        ),
    ]
    assert evicted(run(PLUGIN, {"reasons": ["Error"], "exitCodes": [1]}, NODES, pods)) == ["both"]
    assert sorted(evicted(run(PLUGIN, {"exitCodes": [1], "includingInitContainers": True}, NODES, pods))) == [
        "both",
        "code-only",
        "init-code",
    ]


def test_exclude_owner_kinds_and_label_selector() -> None:
    pods = [pod("job", owner="Job"), pod("rs", labels={"app": "a"}), pod("rs2", labels={"app": "b"})]
    assert sorted(evicted(run(PLUGIN, {"excludeOwnerKinds": ["Job"]}, NODES, pods))) == ["rs", "rs2"]
    assert evicted(run(PLUGIN, {"labelSelector": {"matchLabels": {"app": "b"}}}, NODES, pods)) == ["rs2"]


def test_oldest_first_across_nodes_with_limits() -> None:
    pods = [pod("n1-a", "n1", age=5000), pod("n2-a", "n2", age=9000), pod("n1-b", "n1", age=8000)]
    assert evicted(run(PLUGIN, {}, NODES, pods)) == ["n2-a", "n1-b", "n1-a"]
    assert evicted(run(PLUGIN, {}, NODES, pods, maxNoOfPodsToEvictPerNode=1)) == ["n2-a", "n1-b"]
    assert evicted(run(PLUGIN, {}, NODES, pods, maxNoOfPodsToEvictTotal=1)) == ["n2-a"]
