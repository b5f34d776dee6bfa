"""RemoveFailedPods: args, defaults and validation through the policy loader; edge cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
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
from desched.plugins.removefailedpods.args import RemoveFailedPodsArgs
from desched.plugins.removefailedpods.plugin import RemoveFailedPods

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
REG = default_registry(entry_points=False)


def policy_doc(args: dict[str, Any] | None, *, configured: bool = True) -> dict[str, Any]:
    # DefaultEvictor is left out so that only this plugin's args are under test.
    profile: dict[str, Any] = {
        "name": "p",
        "allowDisablingDefaultEvictor": True,
        "plugins": {
            "deschedule": {"enabled": ["RemoveFailedPods"]},
            "filter": {"disabled": ["DefaultEvictor"]},
            "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
        },
    }
    if configured:
        profile["pluginConfig"] = [{"name": "RemoveFailedPods", "args": args}]
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [profile]}


def load_args(args: dict[str, Any] | None, *, configured: bool = True) -> RemoveFailedPodsArgs:
    loaded = load_policy(policy_doc(args, configured=configured), REG).profiles[0].args["RemoveFailedPods"]
    assert isinstance(loaded, RemoveFailedPodsArgs)
    return loaded


def load_error(args: dict[str, Any]) -> PolicyError:
    with pytest.raises(PolicyError) as e:
        load_policy(policy_doc(args), REG)
    assert "\n" not in str(e.value)
    return e.value


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


class Backend:
    def __init__(self) -> None:
        self.evicted: list[str] = []

    def evict(self, p: Pod, request: EvictionRequest) -> str | None:
        self.evicted.append(p.metadata.name)
        return None


def run(args: dict[str, Any], pods: list[Pod], *, limits: EvictionLimits | None = None) -> list[str]:
    registry = Registry()
    registry.register(RemoveFailedPods)
    profile = ProfileConfig(
        name="p",
        plugins={ExtensionPoint.DESCHEDULE: ("RemoveFailedPods",)},
        args={"RemoveFailedPods": RemoveFailedPodsArgs.model_validate(args)},
    )
    framework = Framework(
        Policy(profiles=(profile,), limits=limits or EvictionLimits()), registry, clock=lambda: NOW
    )
    nodes = [builders.bare_node(n) for n in ("n1", "n2")]
    backend = Backend()
    framework.begin_cycle(ClusterSnapshot(nodes=nodes, pods=pods), backend)
    runs = framework.run_extension_point(ExtensionPoint.DESCHEDULE, nodes)
    assert all(r.error is None for r in runs)
    return backend.evicted


# ----------------------------------------------------------------------------- args


def test_defaults() -> None:
    for args in (load_args({}), load_args(None), load_args(None, configured=False)):
        assert args.min_pod_lifetime_seconds == 3600
        assert args.reasons is None and args.exit_codes is None and args.exclude_owner_kinds is None
        assert args.including_init_containers is False


def test_all_args_load_with_their_wire_names() -> None:
    args = load_args(
        {
            "namespaces": {"include": ["batch"]},
            "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            "excludeOwnerKinds": ["Job"],
            "reasons": ["NodeAffinity", "SomeContainerReason"],
            "exitCodes": [1],
            "includingInitContainers": True,
            "minPodLifetimeSeconds": 0,
        }
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
    e = load_error(args)
    assert e.path == f"profiles[0].pluginConfig[0].{path}"
    assert reason in e.reason


# ----------------------------------------------------------------------------- behaviour


def test_only_failed_pods_even_when_a_reason_matches() -> None:
    pods = [
        pod("running", phase="Running", reason="NodeAffinity"),
        pod("succeeded", phase="Succeeded"),
        pod("failed", reason="NodeAffinity"),
    ]
    assert run({"reasons": ["NodeAffinity"]}, pods) == ["failed"]
    assert run({}, pods) == ["failed"]


def test_default_minimum_age_is_one_hour_strictly() -> None:
    pods = [pod("young", age=60), pod("hour", age=3600.5), pod("old", age=3601)]
    assert run({}, pods) == ["old"]
    assert run({"minPodLifetimeSeconds": 0}, pods) == ["old", "hour", "young"]


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
    assert sorted(run(args, pods)) == ["pod-reason", "terminated", "waiting"]
    assert sorted(run({**args, "includingInitContainers": True}, pods)) == [
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
    assert run({"reasons": ["Error"], "exitCodes": [1]}, pods) == ["both"]
    assert sorted(run({"exitCodes": [1], "includingInitContainers": True}, pods)) == [
        "both",
        "code-only",
        "init-code",
    ]


def test_exclude_owner_kinds_and_label_selector() -> None:
    pods = [pod("job", owner="Job"), pod("rs", labels={"app": "a"}), pod("rs2", labels={"app": "b"})]
    assert sorted(run({"excludeOwnerKinds": ["Job"]}, pods)) == ["rs", "rs2"]
    assert run({"labelSelector": {"matchLabels": {"app": "b"}}}, pods) == ["rs2"]


def test_oldest_first_across_nodes_with_limits() -> None:
    pods = [pod("n1-a", "n1", age=5000), pod("n2-a", "n2", age=9000), pod("n1-b", "n1", age=8000)]
    assert run({}, pods) == ["n2-a", "n1-b", "n1-a"]
    assert run({}, pods, limits=EvictionLimits(per_node=1)) == ["n2-a", "n1-b"]
    assert run({}, pods, limits=EvictionLimits(total=1)) == ["n2-a"]
