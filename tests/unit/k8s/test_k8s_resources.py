"""desched.k8s.resources against component-helpers' PodRequests / PodLimits rules."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders

from desched.k8s.objects import Node, Pod
from desched.k8s.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    add,
    fits,
    is_pod_level_requests_set,
    is_pod_level_resources_set,
    node_allocatable,
    non_zero_pod_requests,
    pod_limits,
    pod_requests,
    resource_list,
    subtract,
    sum_resources,
)

Mi = 2**20
Gi = 2**30


def ctr(
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    *,
    sidecar: bool = False,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "resources": {}}
    if requests is not None:
        c["resources"]["requests"] = requests
    if limits is not None:
        c["resources"]["limits"] = limits
    if sidecar:
        c["restartPolicy"] = "Always"
    return c


def make_pod(
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    *,
    overhead: dict[str, Any] | None = None,
    pod_resources: dict[str, Any] | None = None,
) -> Pod:
    spec: dict[str, Any] = {}
    if overhead is not None:
        spec["overhead"] = overhead
    if pod_resources is not None:
        spec["resources"] = pod_resources
    return builders.pod(
        "p", namespace="ns", phase=None, containers=containers or [], init_containers=init, spec=spec
    )


def test_regular_containers_are_summed() -> None:
    pod = make_pod([ctr({"cpu": "100m", "memory": "64Mi"}), ctr({"cpu": "250m", "memory": "128Mi"})])
    assert pod_requests(pod) == {"cpu": 350, "memory": 192 * Mi}


def test_no_pods_entry_and_empty_pod() -> None:
    assert pod_requests(make_pod([ctr()])) == {}
    assert "pods" not in pod_requests(make_pod([ctr({"cpu": 1})]))


def test_init_containers_take_the_max_per_resource() -> None:
    # Init containers run one at a time: the pod needs the most any one of them needs,
    # per resource, against the sum of the app containers.
    pod = make_pod(
        [ctr({"cpu": "500m", "memory": "512Mi"})],
        init=[ctr({"cpu": "2", "memory": "1Gi"}), ctr({"cpu": "1", "memory": "2Gi"})],
    )
    assert pod_requests(pod) == {"cpu": 2000, "memory": 2 * Gi}


def test_sidecars_add_to_app_containers_and_later_init_steps() -> None:
    # KEP-753: InitContainerUse(i) = sum(sidecars before i) + init(i);
    # pod = max(max_i InitContainerUse(i), sum(app) + sum(sidecars)).
    init = [
        ctr({"cpu": "100m"}, sidecar=True),
        ctr({"cpu": "1"}),  # step: 1000 + 100
        ctr({"cpu": "200m"}, sidecar=True),
        ctr({"cpu": "500m"}),  # step: 500 + 300
    ]
    assert pod_requests(make_pod([ctr({"cpu": "300m"})], init=init)) == {"cpu": 1100}
    # Steady state wins once the app containers are big enough: 1000 + 100 + 200.
    assert pod_requests(make_pod([ctr({"cpu": "1"})], init=init)) == {"cpu": 1300}


def test_sidecar_declared_after_an_init_container_does_not_count_for_it() -> None:
    init = [ctr({"memory": "1Gi"}), ctr({"memory": "512Mi"}, sidecar=True)]
    pod = make_pod([ctr({"memory": "256Mi"})], init=init)
    assert pod_requests(pod) == {"memory": 1 * Gi}
    init = [ctr({"memory": "512Mi"}, sidecar=True), ctr({"memory": "1Gi"})]
    assert pod_requests(make_pod([ctr({"memory": "256Mi"})], init=init)) == {"memory": 1536 * Mi}


def test_overhead_is_added_to_requests() -> None:
    # RuntimeClass docs: overhead cpu 250m, memory 120Mi.
    pod = make_pod(
        [ctr({"cpu": "500m", "memory": "100Mi"}), ctr({"cpu": "1500m", "memory": "100Mi"})],
        overhead={"cpu": "250m", "memory": "120Mi"},
    )
    assert pod_requests(pod) == {"cpu": 2250, "memory": 320 * Mi}


def test_quantities_are_summed_exactly_then_rounded_once() -> None:
    # 0.4m + 0.4m = 0.8m -> MilliValue 1, not ceil(0.4)+ceil(0.4) = 2.
    pod = make_pod([ctr({"cpu": "0.0004"}), ctr({"cpu": "0.0004"})])
    assert pod_requests(pod) == {"cpu": 1}


def test_pod_level_requests_replace_supported_resources_only() -> None:
    pod = make_pod(
        [ctr({"cpu": "200m", "memory": "64Mi", "ephemeral-storage": "1Gi"}), ctr({"cpu": "100m"})],
        pod_resources={"requests": {"cpu": "1"}},
        overhead={"cpu": "100m"},
    )
    assert is_pod_level_requests_set(pod)
    # cpu from the pod level (+ overhead); memory and ephemeral-storage from the containers.
    assert pod_requests(pod) == {"cpu": 1100, "memory": 64 * Mi, "ephemeral-storage": Gi}


def test_pod_level_requests_with_only_unsupported_resources_are_ignored() -> None:
    pod = make_pod(
        [ctr({"cpu": "200m", "ephemeral-storage": "1Gi"})],
        pod_resources={"requests": {"ephemeral-storage": "5Gi"}},
    )
    assert not is_pod_level_requests_set(pod)
    assert not is_pod_level_resources_set(pod)
    assert pod_requests(pod) == {"cpu": 200, "ephemeral-storage": Gi}


def test_pod_level_hugepages_are_supported() -> None:
    pod = make_pod([ctr({"hugepages-2Mi": "2Mi"})], pod_resources={"requests": {"hugepages-2Mi": "8Mi"}})
    assert pod_requests(pod) == {"hugepages-2Mi": 8 * Mi}


def test_limits_follow_the_same_formula_and_take_overhead_only_where_set() -> None:
    pod = make_pod(
        [ctr(limits={"cpu": "1"}), ctr(limits={"cpu": "500m", "memory": "0"})],
        init=[ctr(limits={"cpu": "2"})],
        overhead={"cpu": "250m", "memory": "120Mi"},
    )
    # cpu: max(1500, 2000) + 250; memory limit is zero, so no overhead is added to it.
    assert pod_limits(pod) == {"cpu": 2250, "memory": 0}


def test_pod_level_limits_replace_container_limits() -> None:
    pod = make_pod(
        [ctr({"cpu": "1"}, {"cpu": "1", "memory": "1Gi"})],
        pod_resources={"limits": {"memory": "4Gi"}},
    )
    assert is_pod_level_resources_set(pod)
    assert not is_pod_level_requests_set(pod)
    assert pod_limits(pod) == {"cpu": 1000, "memory": 4 * Gi}
    assert pod_requests(pod) == {"cpu": 1000}


def test_non_zero_requests_fill_missing_cpu_and_memory_per_container() -> None:
    pod = make_pod([ctr(), ctr({"cpu": "0", "nvidia.com/gpu": 1}), ctr({"memory": "1Gi"})])
    # container 1: 100m + 200Mi; container 2: explicit cpu 0 stays 0, + 200Mi; container 3: 100m + 1Gi.
    assert non_zero_pod_requests(pod) == {
        "cpu": 2 * DEFAULT_MILLI_CPU_REQUEST,
        "memory": 2 * DEFAULT_MEMORY_REQUEST + Gi,
        "nvidia.com/gpu": 1,
    }
    assert pod_requests(pod) == {"cpu": 0, "memory": Gi, "nvidia.com/gpu": 1}


def test_non_zero_requests_apply_to_init_containers_and_add_overhead() -> None:
    pod = make_pod([ctr({"cpu": "50m", "memory": "10Mi"})], init=[ctr()], overhead={"cpu": "10m"})
    # The init step counts as 100m / 200Mi, which beats the app container.
    assert non_zero_pod_requests(pod) == {"cpu": 110, "memory": 200 * Mi}


def test_non_zero_requests_with_pod_level_requests() -> None:
    # Pod level sets cpu; no container asks for memory: each container gets the memory stand-in.
    pod = make_pod([ctr(), ctr()], pod_resources={"requests": {"cpu": "1"}})
    assert non_zero_pod_requests(pod) == {"cpu": 1000, "memory": 2 * DEFAULT_MEMORY_REQUEST}
    # One container asks for memory: the pod's requests have memory, so no stand-in at all.
    pod = make_pod([ctr({"memory": "50Mi"}), ctr()], pod_resources={"requests": {"cpu": "1"}})
    assert non_zero_pod_requests(pod) == {"cpu": 1000, "memory": 50 * Mi}
    # Pod level sets both: nothing is filled in.
    pod = make_pod([ctr()], pod_resources={"requests": {"cpu": "1", "memory": "1Gi"}})
    assert non_zero_pod_requests(pod) == {"cpu": 1000, "memory": Gi}


def make_node(allocatable: dict[str, Any] | None, capacity: dict[str, Any] | None) -> Node:
    status: dict[str, Any] = {}
    if allocatable is not None:
        status["allocatable"] = allocatable
    if capacity is not None:
        status["capacity"] = capacity
    return builders.bare_node("n", status=status)


def test_node_allocatable_prefers_allocatable_over_capacity() -> None:
    node = make_node({"cpu": "3800m", "memory": "7Gi", "pods": "110"}, {"cpu": "4", "memory": "8Gi"})
    assert node_allocatable(node) == {"cpu": 3800, "memory": 7 * Gi, "pods": 110}
    assert node_allocatable(make_node(None, {"cpu": "4", "memory": "8Gi"})) == {"cpu": 4000, "memory": 8 * Gi}
    assert node_allocatable(make_node(None, None)) == {}


def test_resource_list() -> None:
    assert resource_list(None) == {}
    assert resource_list({"cpu": 2, "memory": "1.5Gi", "nvidia.com/gpu": "1"}) == {
        "cpu": 2000,
        "memory": 3 * 2**29,
        "nvidia.com/gpu": 1,
    }


def test_add_subtract_sum() -> None:
    a = {"cpu": 1000, "memory": 10}
    b = {"cpu": 250, "pods": 1}
    assert add(a, b) == {"cpu": 1250, "memory": 10, "pods": 1}
    assert subtract(a, b) == {"cpu": 750, "memory": 10, "pods": -1}
    assert a == {"cpu": 1000, "memory": 10}  # inputs untouched
    assert sum_resources([a, b, b]) == {"cpu": 1500, "memory": 10, "pods": 2}


@pytest.mark.parametrize(
    ("request_", "free", "expected"),
    [
        ({"cpu": 500}, {"cpu": 500}, []),
        ({"cpu": 501}, {"cpu": 500}, ["cpu"]),
        ({"cpu": 100, "memory": 10}, {"cpu": 50, "memory": 5}, ["cpu", "memory"]),
        ({"nvidia.com/gpu": 1}, {"cpu": 1000}, ["nvidia.com/gpu"]),  # absent: 0 free
        ({"nvidia.com/gpu": 0}, {}, []),  # a zero request always fits
        ({"cpu": 0}, {"cpu": -100}, []),
        ({"cpu": 1}, {"cpu": -100}, ["cpu"]),
    ],
)
def test_fits(request_: dict[str, int], free: dict[str, int], expected: list[str]) -> None:
    assert fits(request_, free) == expected
