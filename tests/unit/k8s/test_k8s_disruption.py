"""PodDisruptionBudgets: budgets as the disruption controller computes them, and the eviction API's
answers, against figures computed by hand from the controller's and the API's rules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from tests import builders

from desched.backends.simulated_eviction import SimulatedEvictionApi
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import EvictionRequest
from desched.k8s.disruption import compute_budget, scaled_value
from desched.k8s.objects import Pod, PodDisruptionBudget

REQUEST = EvictionRequest("p", "plugin", "test")


def pod(
    name: str,
    *,
    ready: bool = True,
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    owner: str | None = "rs",
) -> Pod:
    return builders.pod(
        name,
        namespace="ns",
        node="n1",
        labels=labels or {"app": "web"},
        owner=("ReplicaSet", owner, owner) if owner is not None else None,
        phase=phase,
        ready=ready,
    )


def pdb(name: str = "web", *, selector: dict[str, str] | None = None, **spec: Any) -> PodDisruptionBudget:
    status = spec.pop("status", None)
    generation = spec.pop("generation", 0)
    return builders.pdb(
        name,
        namespace="ns",
        selector=selector or {"app": "web"},
        generation=generation,
        spec=spec,
        status=status,
    )


def answers(pdbs: list[PodDisruptionBudget], pods: list[Pod], evict: list[str]) -> list[str]:
    """Evict ``evict`` in order through the simulated API; "ok" or the HTTP code of each answer."""
    snapshot = ClusterSnapshot(pods=pods, pdbs=pdbs)
    api = SimulatedEvictionApi(snapshot)
    out = []
    for name in evict:
        target = snapshot.pod("ns", name)
        assert target is not None
        error = api.evict(target, REQUEST)
        out.append("ok" if error is None else error.split(" ", 1)[0])
    return out


@pytest.mark.parametrize(
    ("value", "total", "up", "expected"),
    [(3, 10, True, 3), ("50%", 3, True, 2), ("50%", 3, False, 1), ("10%", 5, True, 1), ("0%", 9, True, 0)],
)
def test_scaled_value_rounds_as_the_controller(value: Any, total: int, up: bool, expected: int) -> None:
    assert scaled_value(value, total, round_up=up) == expected


def test_scaled_value_rejects_what_is_not_a_percentage() -> None:
    with pytest.raises(ValueError, match="invalid value"):
        scaled_value("half", 4, round_up=True)


@pytest.mark.parametrize(
    ("spec", "pods", "expected", "desired", "allowed"),
    [
        # minAvailable 2 of 3 healthy: 3 - 2 = 1
        ({"minAvailable": 2}, 3, 3, 2, 1),
        # minAvailable 50% of 3 expected = ceil(1.5) = 2: 1 allowed
        ({"minAvailable": "50%"}, 3, 3, 2, 1),
        # maxUnavailable 1 of 4: desired 3, 1 allowed
        ({"maxUnavailable": 1}, 4, 4, 3, 1),
        # maxUnavailable 30% of 4 = ceil(1.2) = 2: desired 2, 2 allowed
        ({"maxUnavailable": "30%"}, 4, 4, 2, 2),
        # maxUnavailable 10% of 5 = ceil(0.5) = 1: desired 4, 1 allowed
        ({"maxUnavailable": "10%"}, 5, 5, 4, 1),
        # minAvailable 100%: nothing allowed
        ({"minAvailable": "100%"}, 3, 3, 3, 0),
        # maxUnavailable 0: nothing allowed
        ({"maxUnavailable": 0}, 3, 3, 3, 0),
        # neither: the controller expects 0 pods, allows nothing
        ({}, 3, 0, 0, 0),
    ],
)
def test_budget_computed_as_the_disruption_controller(
    spec: dict[str, Any], pods: int, expected: int, desired: int, allowed: int
) -> None:
    budget = compute_budget(pdb(**spec), [pod(f"p{i}") for i in range(pods)])
    assert (budget.expected_pods, budget.desired_healthy, budget.disruptions_allowed) == (
        expected,
        desired,
        allowed,
    )
    assert budget.current_healthy == pods


def test_unmanaged_pods_count_as_healthy_but_not_as_expected() -> None:
    pods = [pod("a"), pod("b"), pod("bare", owner=None)]
    budget = compute_budget(pdb(maxUnavailable=1), pods)
    # expected = the ReplicaSet's 2 pods; desired 1; healthy 3: 2 allowed
    assert (budget.expected_pods, budget.desired_healthy, budget.current_healthy) == (2, 1, 3)
    assert budget.disruptions_allowed == 2
    # an integer minAvailable counts every matching pod as expected
    assert compute_budget(pdb(minAvailable=2), pods).expected_pods == 3


def test_owner_scale_when_known() -> None:
    pods = [pod("a"), pod("b")]
    budget = compute_budget(pdb(maxUnavailable="50%"), pods, scale_of=lambda ref, ns: 4)
    # expected 4 (the ReplicaSet wants 4, 2 are there); 50% of 4 = 2: desired 2, healthy 2: none
    assert (budget.expected_pods, budget.desired_healthy, budget.disruptions_allowed) == (4, 2, 0)


def test_unready_and_terminating_pods_are_not_healthy() -> None:
    pods = [pod("a"), pod("b", ready=False), pod("c")]
    gone = datetime(2026, 1, 1, tzinfo=UTC)
    pods[2] = msgspec.structs.replace(
        pods[2], metadata=msgspec.structs.replace(pods[2].metadata, deletion_timestamp=gone)
    )
    budget = compute_budget(pdb(minAvailable=1), pods)
    assert budget.current_healthy == 1
    assert budget.disruptions_allowed == 0


def test_an_unreadable_percentage_allows_nothing() -> None:
    assert compute_budget(pdb(maxUnavailable="lots"), [pod("a"), pod("b")]).disruptions_allowed == 0


# ------------------------------------------------------------------- the eviction API's answers


def test_budget_is_spent_eviction_by_eviction() -> None:
    pods = [pod(f"p{i}") for i in range(4)]
    # maxUnavailable 30% of 4: 2 allowed; the third eviction is refused with 429
    assert answers([pdb(maxUnavailable="30%")], pods, ["p0", "p1", "p2"]) == ["ok", "ok", "429"]
    # minAvailable 2 of 4: 2 allowed
    assert answers([pdb(minAvailable=2)], pods, ["p0", "p1", "p2"]) == ["ok", "ok", "429"]


def test_the_status_of_a_live_pdb_is_taken_as_it_is() -> None:
    pods = [pod(f"p{i}") for i in range(4)]
    spent = {"disruptionsAllowed": 0, "currentHealthy": 4, "desiredHealthy": 4, "expectedPods": 4}
    assert answers([pdb(maxUnavailable=3, status=spent)], pods, ["p0"]) == ["429"]
    two = {"disruptionsAllowed": 2, "currentHealthy": 4, "desiredHealthy": 2, "expectedPods": 4}
    assert answers([pdb(minAvailable=0, status=two)], pods, ["p0", "p1", "p2"]) == ["ok", "ok", "429"]
    stale = {**two, "observedGeneration": 1}
    assert answers([pdb(minAvailable=0, status=stale, generation=2)], pods, ["p0"]) == ["429"]
    negative = {**two, "disruptionsAllowed": -1}
    assert answers([pdb(minAvailable=0, status=negative)], pods, ["p0"]) == ["403"]


def test_a_pod_under_two_pdbs_is_refused_with_500() -> None:
    pods = [pod("p0"), pod("p1")]
    both = [pdb("one", maxUnavailable=2), pdb("two", maxUnavailable=2)]
    assert answers(both, pods, ["p0"]) == ["500"]


def test_pods_no_pdb_covers_and_pods_that_hold_no_budget_are_evicted() -> None:
    pods = [pod("other", labels={"app": "other"}), pod("pending", phase="Pending", ready=False), pod("p0")]
    pods.append(pod("done", phase="Succeeded", ready=False))
    none_left = pdb(minAvailable="100%")
    assert answers([none_left], pods, ["other", "pending", "done", "p0"]) == ["ok", "ok", "ok", "429"]


def test_unhealthy_pods_under_if_healthy_budget() -> None:
    pods = [pod("a"), pod("b"), pod("sick", ready=False)]
    # healthy 2 >= desired 2 > 0: the unready pod goes without spending; a ready one does not
    assert answers([pdb(minAvailable=2)], pods, ["sick", "a"]) == ["ok", "429"]
    # healthy 2 < desired 3: the unready pod is refused too (IfHealthyBudget, the default)
    assert answers([pdb(minAvailable=3)], pods, ["sick"]) == ["429"]
    explicit = pdb(minAvailable=3, unhealthyPodEvictionPolicy="IfHealthyBudget")
    assert answers([explicit], pods, ["sick"]) == ["429"]


def test_unhealthy_pods_under_always_allow() -> None:
    pods = [pod("a"), pod("b"), pod("sick", ready=False), pod("sick2", ready=False)]
    always = pdb(minAvailable=3, unhealthyPodEvictionPolicy="AlwaysAllow")
    # not Ready: evicted whatever the budget, without spending it; Ready pods still wait
    assert answers([always], pods, ["sick", "sick2", "a"]) == ["ok", "ok", "429"]


def test_refusals_are_remembered_with_their_code() -> None:
    pods = [pod("p0"), pod("p1")]
    snapshot = ClusterSnapshot(pods=pods, pdbs=[pdb(maxUnavailable=1)])
    api = SimulatedEvictionApi(snapshot)
    assert api.evict(pods[0], REQUEST) is None
    error = api.evict(pods[1], REQUEST)
    assert error is not None
    assert error.startswith("429 Cannot evict pod as it would violate the pod's disruption budget.")
    assert "The disruption budget web needs 1 healthy pods and has 2 currently" in error
    assert api.refusals == [("ns", "p1", 429)]
