"""Which Deployments ``evictionPolicy.surge`` may surge (every exclusion), and when a rollout is done."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from desched.k8s import deployments as d


def deployment(**changes: Any) -> dict[str, Any]:
    """A settled single-replica RollingUpdate Deployment (maxSurge 25%: 1 of 1, rounded up)."""
    dep: dict[str, Any] = {
        "metadata": {"name": "web", "namespace": "shop", "generation": 4, "resourceVersion": "77"},
        "spec": {
            "replicas": 1,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"},
            },
        },
        "status": {
            "observedGeneration": 4,
            "replicas": 1,
            "updatedReplicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
        },
    }
    for path, value in changes.items():
        node = dep
        *parents, last = path.split("__")
        for p in parents:
            node = node.setdefault(p, {})
        if value is _DELETE:
            node.pop(last, None)
        else:
            node[last] = value
    return dep


_DELETE = object()


def test_a_settled_single_replica_deployment_may_surge() -> None:
    assert d.surge_refusal(deployment(), 1) is None


@pytest.mark.parametrize(
    ("changes", "max_replicas", "words"),
    [
        (
            {
                "spec__replicas": 2,
                "status__replicas": 2,
                "status__updatedReplicas": 2,
                "status__readyReplicas": 2,
                "status__availableReplicas": 2,
            },
            1,
            "wants 2 replicas",
        ),
        ({"spec__replicas": 0}, 1, "no replicas"),
        ({"spec__strategy": {"type": "Recreate"}}, 1, "Recreate"),
        ({"spec__strategy__rollingUpdate__maxSurge": 0}, 1, "lets no pod surge"),
        ({"spec__strategy__rollingUpdate__maxSurge": "0%"}, 1, "lets no pod surge"),
        ({"spec__strategy__rollingUpdate__maxSurge": "lots"}, 1, "not a number"),
        ({"spec__paused": True}, 1, "paused"),
        ({"metadata__generation": 5}, 1, "observedGeneration 4 < generation 5"),
        ({"status__updatedReplicas": 0}, 1, "rollout is in progress"),
        ({"status__readyReplicas": 0}, 1, "not available"),
        ({"status__availableReplicas": 0}, 1, "not available"),
        ({"status__replicas": 2}, 1, "rollout is in progress"),
    ],
)
def test_every_exclusion_is_refused_with_its_reason(
    changes: dict[str, Any], max_replicas: int, words: str
) -> None:
    refusal = d.surge_refusal(deployment(**changes), max_replicas)
    assert refusal is not None and words in refusal


def test_max_replicas_bounds_the_desired_replicas() -> None:
    three = deployment(
        spec__replicas=3,
        status__replicas=3,
        status__updatedReplicas=3,
        status__readyReplicas=3,
        status__availableReplicas=3,
    )
    assert d.surge_refusal(three, 2) is not None
    assert d.surge_refusal(three, 3) is None


def test_max_surge_resolves_as_the_deployment_controller_does() -> None:
    # a percentage rounds up (1% of 1 replica is 1 pod); an absent one is the API's default 25%
    assert d.resolve_max_surge("1%", 1) == 1
    assert d.resolve_max_surge("0%", 5) == 0
    assert d.resolve_max_surge("25%", 5) == 2
    assert d.resolve_max_surge(None, 1) == 1
    assert d.resolve_max_surge(0, 1) == 0
    assert d.resolve_max_surge("3", 1) == 3
    assert d.resolve_max_surge(-1, 1) is None
    absent = deployment(spec__strategy__rollingUpdate=_DELETE)
    assert d.surge_refusal(absent, 1) is None  # maxSurge defaults to 25%, which is 1 of 1


def test_unset_strategy_and_replicas_are_the_api_defaults() -> None:
    dep = deployment(spec__strategy=_DELETE, spec__replicas=_DELETE)
    assert d.desired_replicas(dep) == 1
    assert d.surge_refusal(dep, 1) is None


def test_rollout_done_needs_the_new_generation_observed_and_no_old_pod() -> None:
    after = deployment(metadata__generation=5, status__observedGeneration=5)
    assert d.rollout_done(after, 5)
    assert not d.rollout_done(deployment(), 5)  # the restart not observed yet
    surging = copy.deepcopy(after)
    surging["status"].update(replicas=2, updatedReplicas=1, availableReplicas=1)
    assert not d.rollout_done(surging, 5)  # the old pod is still counted
    unavailable = copy.deepcopy(after)
    unavailable["status"].update(availableReplicas=0)
    assert not d.rollout_done(unavailable, 5)


def test_restart_patch_is_kubectls_annotation_in_utc_with_the_resource_version() -> None:
    at = datetime(2026, 11, 29, 9, 30, 5, tzinfo=timezone(timedelta(hours=2)))
    patch = d.restart_patch(at, "77")
    assert patch["metadata"] == {"resourceVersion": "77"}
    annotations = patch["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {d.RESTARTED_AT: "2026-11-29T07:30:05Z"}
    assert datetime.fromisoformat(annotations[d.RESTARTED_AT]) == at.astimezone(UTC)
