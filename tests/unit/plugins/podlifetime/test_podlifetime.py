"""PodLifeTime: args validation through the policy loader, and what the fixtures leave out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

import pytest
from tests import builders
from tests.unit.plugins.harness import NOW, evicted, load_args, policy_error, run

from desched.k8s.objects import Pod
from desched.plugins.podlifetime.args import ALLOWED_STATES

# ----------------------------------------------------------------------------- helpers


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


PLUGIN = "PodLifeTime"
NODES = [builders.bare_node(n, ready=True) for n in ("n1", "n2")]


class Refuse:
    """A Filter plugin refusing pods whose name starts with 'keep'."""

    name: ClassVar[str] = "Refuse"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, p: Pod) -> bool:
        return not p.metadata.name.startswith("keep")


# ----------------------------------------------------------------------------- args


def test_all_args_load_with_their_wire_names() -> None:
    args = load_args(
        PLUGIN,
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
        },
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
    args = load_args(PLUGIN, criterion)
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
    e = policy_error(PLUGIN, args)
    assert e.path == "profiles[0].pluginConfig[0].args"
    assert "at least one filtering criterion" in e.reason
    assert "maxPodLifeTimeSeconds, states, conditions or exitCodes" in e.reason


def test_enabled_without_plugin_config_is_an_error() -> None:
    e = policy_error(PLUGIN, None, configured=False)
    assert e.path == "profiles[0].pluginConfig"
    assert "PodLifeTime" in e.reason and "at least one filtering criterion" in e.reason


def test_every_allowed_state_loads() -> None:
    assert load_args(PLUGIN, {"states": list(ALLOWED_STATES)}).states == list(ALLOWED_STATES)
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
    e = policy_error(PLUGIN, args)
    assert e.path == f"profiles[0].pluginConfig[0].{path}"
    assert reason in e.reason


def test_invalid_state_lists_the_allowed_ones() -> None:
    reason = policy_error(PLUGIN, {"states": ["Bogus"]}).reason
    for state in ALLOWED_STATES:
        assert state in reason


# ----------------------------------------------------------------------------- behaviour


def test_age_is_whole_seconds_strictly_above_the_limit() -> None:
    pods = [pod("exact", age=600), pod("fraction", age=600.9), pod("older", age=601)]
    assert evicted(run(PLUGIN, {"maxPodLifeTimeSeconds": 600}, NODES, pods)) == ["older"]


def test_pod_created_in_the_future_is_not_old() -> None:
    assert (
        evicted(
            run(PLUGIN, {"maxPodLifeTimeSeconds": 0}, NODES, [pod("skewed", age=-30), pod("now", age=0.5)])
        )
        == []
    )


def test_missing_creation_timestamp_is_go_zero_time() -> None:
    assert evicted(
        run(PLUGIN, {"maxPodLifeTimeSeconds": 86400 * 365 * 100}, NODES, [pod("ancient", age=None)])
    ) == ["ancient"]
    # Go's time.Duration saturates at about 292 years: no pod is older than that.
    assert (
        evicted(run(PLUGIN, {"maxPodLifeTimeSeconds": 86400 * 365 * 300}, NODES, [pod("ancient", age=None)]))
        == []
    )


def test_oldest_first_across_nodes_and_ties_by_name() -> None:
    pods = [pod("b", "n1", age=100), pod("a", "n2", age=100), pod("c", "n2", age=500), pod("d", "n1", age=50)]
    assert evicted(run(PLUGIN, {"maxPodLifeTimeSeconds": 10}, NODES, pods)) == ["c", "a", "b", "d"]


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
    assert evicted(run(PLUGIN, args, NODES, pods)) == ["young-stale", "old-fresh"]
    # without a transition threshold, creation time decides
    assert evicted(run(PLUGIN, {"conditions": [{"reason": "PodCompleted"}]}, NODES, pods)) == [
        "old-fresh",
        "young-stale",
    ]


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
    assert evicted(
        run(
            PLUGIN, {"conditions": [{"type": "Ready", "minTimeSinceLastTransitionSeconds": 300}]}, NODES, pods
        )
    ) == ["due"]
    # without a threshold the transition time does not matter
    assert len(evicted(run(PLUGIN, {"conditions": [{"type": "Ready"}]}, NODES, pods))) == 5


def test_condition_filters_are_ored_and_fields_anded() -> None:
    pods = [
        pod("ready-false", conditions=[{"type": "Ready", "status": "False"}]),
        pod("ready-true", conditions=[{"type": "Ready", "status": "True"}]),
        pod("sched", conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]),
    ]
    args = {"conditions": [{"type": "Ready", "status": "False"}, {"reason": "Unschedulable"}]}
    assert sorted(evicted(run(PLUGIN, args, NODES, pods))) == ["ready-false", "sched"]


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
    assert evicted(
        run(PLUGIN, {"maxPodLifeTimeSeconds": 3600, "states": ["Failed"], "exitCodes": [1]}, NODES, pods)
    ) == ["old-failed-1"]


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
    assert evicted(run(PLUGIN, {"exitCodes": [3]}, NODES, pods)) == []
    assert evicted(run(PLUGIN, {"exitCodes": [3], "includingInitContainers": True}, NODES, pods)) == ["init"]
    assert evicted(
        run(
            PLUGIN,
            {"exitCodes": [3], "includingInitContainers": True, "includingEphemeralContainers": True},
            NODES,
            pods,
        )
    ) == ["init"]


def test_states_match_terminated_reasons_and_pod_reason() -> None:
    pods = [
        pod("oom", containerStatuses=[{"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]),
        pod("evicted", phase="Failed", reason="Evicted"),
        pod("other", phase="Running"),
    ]
    assert sorted(evicted(run(PLUGIN, {"states": ["OOMKilled", "Evicted"]}, NODES, pods))) == [
        "evicted",
        "oom",
    ]


def test_owner_kinds() -> None:
    job = pod("job-pod", phase="Failed", owner="Job")
    rs = pod("rs-pod", phase="Failed")
    assert evicted(
        run(PLUGIN, {"states": ["Failed"], "ownerKinds": {"exclude": ["Job"]}}, NODES, [job, rs])
    ) == ["rs-pod"]
    assert evicted(
        run(PLUGIN, {"states": ["Failed"], "ownerKinds": {"include": ["Job"]}}, NODES, [job, rs])
    ) == ["job-pod"]


def test_namespaces_and_labels_select_pods() -> None:
    pods = [pod("a", namespace="kube-system"), pod("b", namespace="apps")]
    assert evicted(
        run(PLUGIN, {"maxPodLifeTimeSeconds": 1, "namespaces": {"exclude": ["kube-system"]}}, NODES, pods)
    ) == ["b"]
    assert evicted(
        run(PLUGIN, {"maxPodLifeTimeSeconds": 1, "namespaces": {"include": ["kube-system"]}}, NODES, pods)
    ) == ["a"]
    assert (
        evicted(
            run(
                PLUGIN,
                {"maxPodLifeTimeSeconds": 1, "labelSelector": {"matchLabels": {"x": "y"}}},
                NODES,
                pods,
            )
        )
        == []
    )


def test_only_the_given_nodes_are_looked_at() -> None:
    pods = [pod("on-n1", "n1"), pod("on-n3", "n3")]
    assert evicted(run(PLUGIN, {"maxPodLifeTimeSeconds": 1}, NODES[:1], pods, plugin_nodes=NODES[:1])) == [
        "on-n1"
    ]


def test_filtered_pods_are_skipped() -> None:
    assert evicted(
        run(
            PLUGIN,
            {"maxPodLifeTimeSeconds": 1},
            NODES,
            [pod("keep-me", age=9999), pod("go", age=10)],
            extra=[Refuse],
        )
    ) == ["go"]


def test_node_limit_skips_that_node_total_limit_stops() -> None:
    pods = [pod("n1-old", "n1", age=900), pod("n1-mid", "n1", age=800), pod("n2-new", "n2", age=700)]
    assert evicted(run(PLUGIN, {"maxPodLifeTimeSeconds": 1}, NODES, pods, maxNoOfPodsToEvictPerNode=1)) == [
        "n1-old",
        "n2-new",
    ]
    assert evicted(run(PLUGIN, {"maxPodLifeTimeSeconds": 1}, NODES, pods, maxNoOfPodsToEvictTotal=2)) == [
        "n1-old",
        "n1-mid",
    ]
    assert evicted(
        run(PLUGIN, {"maxPodLifeTimeSeconds": 1}, NODES, pods, maxNoOfPodsToEvictPerNamespace=1)
    ) == ["n1-old"]
