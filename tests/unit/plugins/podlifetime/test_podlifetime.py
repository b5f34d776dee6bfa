"""PodLifeTime: args validation through the policy loader, and what the fixtures leave out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest
from tests import builders

from desched.api.policy import EvictionLimits, Policy, ProfileConfig, load_policy
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.evictor import EvictionRequest
from desched.framework.framework import Framework
from desched.framework.registry import Registry
from desched.framework.types import ExtensionPoint
from desched.k8s.objects import Node, Pod
from desched.plugins import default_registry
from desched.plugins.podlifetime.args import ALLOWED_STATES, PodLifeTimeArgs
from desched.plugins.podlifetime.plugin import PodLifeTime

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
REG = default_registry(entry_points=False)


# ----------------------------------------------------------------------------- helpers


def policy_doc(args: dict[str, Any] | None, *, configured: bool = True) -> dict[str, Any]:
    # DefaultEvictor is left out so that only this plugin's args are under test.
    profile: dict[str, Any] = {
        "name": "p",
        "allowDisablingDefaultEvictor": True,
        "plugins": {
            "deschedule": {"enabled": ["PodLifeTime"]},
            "filter": {"disabled": ["DefaultEvictor"]},
            "preEvictionFilter": {"disabled": ["DefaultEvictor"]},
        },
    }
    if configured:
        profile["pluginConfig"] = [{"name": "PodLifeTime", "args": args}]
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", "profiles": [profile]}


def load_args(args: dict[str, Any]) -> PodLifeTimeArgs:
    policy = load_policy(policy_doc(args), REG)
    loaded = policy.profiles[0].args["PodLifeTime"]
    assert isinstance(loaded, PodLifeTimeArgs)
    return loaded


def load_error(args: dict[str, Any] | None, *, configured: bool = True) -> PolicyError:
    with pytest.raises(PolicyError) as e:
        load_policy(policy_doc(args, configured=configured), REG)
    assert "\n" not in str(e.value)
    return e.value


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def pod(
    name: str,
    node: str = "n1",
    *,
    age: float | None = 3600,
    namespace: str = "default",
    owner: str = "ReplicaSet",
    **status: Any,
) -> Pod:
    return builders.bare_pod(
        name,
        namespace=namespace,
        node=node,
        uid=name,
        owner=(owner, "owner"),
        controller=None,
        created=None if age is None else ago(age),
        status=status,
    )


def node(name: str) -> Node:
    return builders.bare_node(name)


class Refuse:
    """A Filter plugin refusing pods whose name starts with 'keep'."""

    name: ClassVar[str] = "Refuse"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, p: Pod) -> bool:
        return not p.metadata.name.startswith("keep")


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
    registry.register_all([PodLifeTime, Refuse])
    profile = ProfileConfig(
        name="p",
        plugins={ExtensionPoint.DESCHEDULE: ("PodLifeTime",), ExtensionPoint.FILTER: ("Refuse",)},
        args={"PodLifeTime": PodLifeTimeArgs.model_validate(args), "Refuse": None},
    )
    framework = Framework(
        Policy(profiles=(profile,), limits=limits or EvictionLimits()), registry, clock=lambda: NOW
    )
    snapshot = ClusterSnapshot(nodes=[node(n) for n in nodes], pods=pods)
    backend = Backend()
    framework.begin_cycle(snapshot, backend)
    runs = framework.run_extension_point(ExtensionPoint.DESCHEDULE, [node(n) for n in nodes])
    assert all(r.error is None for r in runs)
    return backend.evicted


# ----------------------------------------------------------------------------- args


def test_all_args_load_with_their_wire_names() -> None:
    args = load_args(
        {
            "namespaces": {"exclude": ["kube-system"]},
            "labelSelector": {"matchLabels": {"app": "web"}},
            "ownerKinds": {"include": ["Job"]},
            "maxPodLifeTimeSeconds": 86400,
            "states": ["Succeeded", "CrashLoopBackOff", "OOMKilled"],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "PodCompleted",
                    "minTimeSinceLastTransitionSeconds": 300,
                }
            ],
            "exitCodes": [1, 137],
            "includingInitContainers": True,
            "includingEphemeralContainers": True,
        }
    )
    assert args.max_pod_life_time_seconds == 86400
    assert args.owner_kinds is not None and args.owner_kinds.include == ["Job"]
    assert args.conditions is not None and args.conditions[0].min_time_since_last_transition_seconds == 300
    assert args.exit_codes == [1, 137]
    assert args.including_init_containers and args.including_ephemeral_containers


@pytest.mark.parametrize(
    "criterion",
    [
        {"maxPodLifeTimeSeconds": 0},
        {"states": ["Running"]},
        {"conditions": [{"reason": "PodCompleted"}]},
        {"exitCodes": [1]},
    ],
)
def test_any_one_criterion_is_enough(criterion: dict[str, Any]) -> None:
    args = load_args(criterion)
    assert args.model_dump(mode="json", by_alias=True, exclude_defaults=True) == criterion


@pytest.mark.parametrize(
    "args",
    [
        {},
        None,
        {"states": [], "conditions": [], "exitCodes": []},
        {"namespaces": {"include": ["a"]}, "includingInitContainers": True},
    ],
)
def test_no_criterion_is_one_line_error_on_args(args: dict[str, Any] | None) -> None:
    e = load_error(args)
    assert e.path == "profiles[0].pluginConfig[0].args"
    assert "at least one filtering criterion" in e.reason
    assert "maxPodLifeTimeSeconds, states, conditions or exitCodes" in e.reason


def test_enabled_without_plugin_config_is_an_error() -> None:
    e = load_error(None, configured=False)
    assert e.path == "profiles[0].pluginConfig"
    assert "PodLifeTime" in e.reason and "at least one filtering criterion" in e.reason


def test_every_allowed_state_loads() -> None:
    assert load_args({"states": list(ALLOWED_STATES)}).states == list(ALLOWED_STATES)
    assert len(ALLOWED_STATES) == 24


@pytest.mark.parametrize(
    ("args", "path", "reason"),
    [
        ({"states": ["Running", "Terminating"]}, "args.states[1]", "got 'Terminating'"),
        (
            {"conditions": [{"type": "Ready"}, {}]},
            "args.conditions[1]",
            "at least one of type, status, reason or minTimeSinceLastTransitionSeconds must be set",
        ),
        (
            {"states": ["Failed"], "ownerKinds": {"include": ["Job"], "exclude": ["DaemonSet"]}},
            "args.ownerKinds.exclude",
            "cannot be set with include (got include=['Job'], exclude=['DaemonSet'])",
        ),
        (
            {"states": ["Failed"], "namespaces": {"include": ["a"], "exclude": ["b"]}},
            "args.namespaces.exclude",
            "cannot be set with include (got include=['a'], exclude=['b'])",
        ),
        ({"maxPodLifeTimeSeconds": -1}, "args.maxPodLifeTimeSeconds", "greater than or equal to 0"),
        (
            {"conditions": [{"minTimeSinceLastTransitionSeconds": -5}]},
            "args.conditions[0].minTimeSinceLastTransitionSeconds",
            "greater than or equal to 0",
        ),
        ({"exitCodes": [2**31]}, "args.exitCodes[0]", "less than or equal to 2147483647"),
        ({"maxPodLifetimeSeconds": 60}, "args.maxPodLifetimeSeconds", "unknown field"),
        (
            {
                "states": ["Running"],
                "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]},
            },
            "args.labelSelector",
            "",
        ),
    ],
)
def test_invalid_args_name_the_field(args: dict[str, Any], path: str, reason: str) -> None:
    e = load_error(args)
    assert e.path == f"profiles[0].pluginConfig[0].{path}"
    assert reason in e.reason


def test_invalid_state_lists_the_allowed_ones() -> None:
    reason = load_error({"states": ["Bogus"]}).reason
    for state in ALLOWED_STATES:
        assert state in reason


# ----------------------------------------------------------------------------- behaviour


def test_age_is_whole_seconds_strictly_above_the_limit() -> None:
    pods = [pod("exact", age=600), pod("fraction", age=600.9), pod("older", age=601)]
    assert run({"maxPodLifeTimeSeconds": 600}, pods) == ["older"]


def test_pod_created_in_the_future_is_not_old() -> None:
    assert run({"maxPodLifeTimeSeconds": 0}, [pod("skewed", age=-30), pod("now", age=0.5)]) == []


def test_missing_creation_timestamp_is_go_zero_time() -> None:
    assert run({"maxPodLifeTimeSeconds": 86400 * 365 * 100}, [pod("ancient", age=None)]) == ["ancient"]
    # Go's time.Duration saturates at about 292 years: no pod is older than that.
    assert run({"maxPodLifeTimeSeconds": 86400 * 365 * 300}, [pod("ancient", age=None)]) == []


def test_oldest_first_across_nodes_and_ties_by_name() -> None:
    pods = [pod("b", "n1", age=100), pod("a", "n2", age=100), pod("c", "n2", age=500), pod("d", "n1", age=50)]
    assert run({"maxPodLifeTimeSeconds": 10}, pods) == ["c", "a", "b", "d"]


def test_transition_threshold_orders_by_latest_matching_transition() -> None:
    def completed(name: str, created: float, transitioned: float) -> Pod:
        return pod(
            name,
            age=created,
            phase="Succeeded",
            conditions=[
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "PodCompleted",
                    "lastTransitionTime": ago(transitioned),
                },
                {
                    "type": "Initialized",
                    "status": "True",
                    "reason": "Other",
                    "lastTransitionTime": ago(99999),
                },
            ],
        )

    pods = [completed("young-stale", 1000, 9000), completed("old-fresh", 90000, 2000)]
    args = {"conditions": [{"reason": "PodCompleted", "minTimeSinceLastTransitionSeconds": 600}]}
    assert run(args, pods) == ["young-stale", "old-fresh"]
    # without a transition threshold, creation time decides
    assert run({"conditions": [{"reason": "PodCompleted"}]}, pods) == ["old-fresh", "young-stale"]


def test_transition_time_rules() -> None:
    def cond_pod(name: str, transition: str | None) -> Pod:
        return pod(name, conditions=[{"type": "Ready", "status": "True", "lastTransitionTime": transition}])

    pods = [
        cond_pod("null", None),
        cond_pod("zero", "0001-01-01T00:00:00Z"),
        cond_pod("future", ago(-100)),
        cond_pod("recent", ago(299.5)),
        cond_pod("due", ago(300)),
    ]
    assert run({"conditions": [{"type": "Ready", "minTimeSinceLastTransitionSeconds": 300}]}, pods) == ["due"]
    # without a threshold the transition time does not matter
    assert len(run({"conditions": [{"type": "Ready"}]}, pods)) == 5


def test_condition_filters_are_ored_and_fields_anded() -> None:
    pods = [
        pod("ready-false", conditions=[{"type": "Ready", "status": "False"}]),
        pod("ready-true", conditions=[{"type": "Ready", "status": "True"}]),
        pod("sched", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]),
    ]
    args = {"conditions": [{"type": "Ready", "status": "False"}, {"reason": "Unschedulable"}]}
    assert sorted(run(args, pods)) == ["ready-false", "sched"]


def test_criteria_are_anded() -> None:
    pods = [
        pod(
            "old-failed-1",
            age=7200,
            phase="Failed",
            containerStatuses=[{"state": {"terminated": {"exitCode": 1}}}],
        ),
        pod(
            "young-failed-1",
            age=60,
            phase="Failed",
            containerStatuses=[{"state": {"terminated": {"exitCode": 1}}}],
        ),
        pod(
            "old-failed-2",
            age=7200,
            phase="Failed",
            containerStatuses=[{"state": {"terminated": {"exitCode": 2}}}],
        ),
        pod(
            "old-running-1",
            age=7200,
            phase="Running",
            containerStatuses=[{"state": {"terminated": {"exitCode": 1}}}],
        ),
    ]
    assert run({"maxPodLifeTimeSeconds": 3600, "states": ["Failed"], "exitCodes": [1]}, pods) == [
        "old-failed-1"
    ]


def test_exit_codes_of_init_containers_need_the_flag_and_ephemeral_never_count() -> None:
    pods = [
        pod("init", initContainerStatuses=[{"state": {"terminated": {"exitCode": 3}}}]),
        pod("ephemeral", ephemeralContainerStatuses=[{"state": {"terminated": {"exitCode": 3}}}]),
        pod(
            "waiting",
            containerStatuses=[
                {
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 3}},
                }
            ],
        ),
    ]
    assert run({"exitCodes": [3]}, pods) == []
    assert run({"exitCodes": [3], "includingInitContainers": True}, pods) == ["init"]
    assert run(
        {"exitCodes": [3], "includingInitContainers": True, "includingEphemeralContainers": True}, pods
    ) == ["init"]


def test_states_match_terminated_reasons_and_pod_reason() -> None:
    pods = [
        pod("oom", containerStatuses=[{"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]),
        pod("evicted", phase="Failed", reason="Evicted"),
        pod("other", phase="Running"),
    ]
    assert sorted(run({"states": ["OOMKilled", "Evicted"]}, pods)) == ["evicted", "oom"]


def test_owner_kinds() -> None:
    job = pod("job-pod", phase="Failed", owner="Job")
    rs = pod("rs-pod", phase="Failed")
    assert run({"states": ["Failed"], "ownerKinds": {"exclude": ["Job"]}}, [job, rs]) == ["rs-pod"]
    assert run({"states": ["Failed"], "ownerKinds": {"include": ["Job"]}}, [job, rs]) == ["job-pod"]


def test_namespaces_and_labels_select_pods() -> None:
    pods = [pod("a", namespace="kube-system"), pod("b", namespace="apps")]
    assert run({"maxPodLifeTimeSeconds": 1, "namespaces": {"exclude": ["kube-system"]}}, pods) == ["b"]
    assert run({"maxPodLifeTimeSeconds": 1, "namespaces": {"include": ["kube-system"]}}, pods) == ["a"]
    assert run({"maxPodLifeTimeSeconds": 1, "labelSelector": {"matchLabels": {"x": "y"}}}, pods) == []


def test_only_the_given_nodes_are_looked_at() -> None:
    pods = [pod("on-n1", "n1"), pod("on-n3", "n3")]
    assert run({"maxPodLifeTimeSeconds": 1}, pods, nodes=("n1",)) == ["on-n1"]


def test_filtered_pods_are_skipped() -> None:
    assert run({"maxPodLifeTimeSeconds": 1}, [pod("keep-me", age=9999), pod("go", age=10)]) == ["go"]


def test_node_limit_skips_that_node_total_limit_stops() -> None:
    pods = [pod("n1-old", "n1", age=900), pod("n1-mid", "n1", age=800), pod("n2-new", "n2", age=700)]
    assert run({"maxPodLifeTimeSeconds": 1}, pods, limits=EvictionLimits(per_node=1)) == ["n1-old", "n2-new"]
    assert run({"maxPodLifeTimeSeconds": 1}, pods, limits=EvictionLimits(total=2)) == ["n1-old", "n1-mid"]
    assert run({"maxPodLifeTimeSeconds": 1}, pods, limits=EvictionLimits(per_namespace=1)) == ["n1-old"]
