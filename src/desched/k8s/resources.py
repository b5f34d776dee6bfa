"""Pod and node resource amounts, as Kubernetes computes them.

Amounts are canonical integers (:data:`Resources`): millicores for ``cpu``, ``Quantity.Value()``
(rounded up) for everything else — bytes of memory and ephemeral storage, pod counts, extended
resources such as ``nvidia.com/gpu``.

Pod totals follow ``k8s.io/component-helpers/resource`` ``PodRequests`` / ``PodLimits`` with the
PodLevelResources feature on (it is on by default since Kubernetes 1.34):

- regular containers are summed;
- init containers run one after another, so the pod needs the most any single step needs; a
  restartable init container (``restartPolicy: Always``, a sidecar) keeps running, so it adds to
  the regular containers and to every later init step (KEP-753);
- pod-level ``spec.resources`` replaces the container total for the resources it names (cpu,
  memory, ``hugepages-*``);
- ``spec.overhead`` is added (to requests always; to limits only where a limit is set).

Quantities are summed in exact nano-units and rounded once at the end, like Go sums ``Quantity``
values before calling ``MilliValue()``. Not modelled: in-place resize status
(``UseStatusResources``) and DRA node-allocatable claim status, which the slim records do not
carry; ``spec`` is what the scheduler would place again anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from desched.k8s.objects import Container, Node, Pod, ResourceList
from desched.k8s.quantity import NANO, nano_to_amount, nano_value

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "Resources",
    "add",
    "fits",
    "is_pod_level_requests_set",
    "is_pod_level_resources_set",
    "node_allocatable",
    "non_zero_pod_requests",
    "pod_limits",
    "pod_requests",
    "resource_list",
    "subtract",
    "sum_resources",
]

#: Canonical amounts by resource name: millicores for cpu, ``Value()`` for the rest.
Resources = dict[str, int]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"
_HUGEPAGES_PREFIX = "hugepages-"

#: kube-scheduler's stand-ins for a container that sets no cpu / memory request
#: (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest), used only for scoring.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_RESTART_ALWAYS = "Always"
_NanoList = dict[str, int]
_ContainerFn = Callable[[Container, Mapping[str, int] | None], _NanoList]
_NON_MISSING_BOTH: Mapping[str, int] = {
    CPU: DEFAULT_MILLI_CPU_REQUEST * 1_000_000,
    MEMORY: DEFAULT_MEMORY_REQUEST * NANO,
}


def _is_supported_pod_level_resource(name: str) -> bool:
    return name in (CPU, MEMORY) or name.startswith(_HUGEPAGES_PREFIX)


def _to_amounts(nano: _NanoList) -> Resources:
    return {name: nano_to_amount(name, value) for name, value in nano.items()}


def _nano_list(rl: ResourceList | None) -> _NanoList:
    if not rl:
        return {}
    return {name: nano_value(q) for name, q in rl.items()}


def resource_list(rl: ResourceList | None) -> Resources:
    """A ResourceList (as the API wrote it) in canonical amounts."""
    if not rl:
        return {}
    return {name: nano_to_amount(name, nano_value(q)) for name, q in rl.items()}


def _add_into(total: _NanoList, rl: Mapping[str, int]) -> None:
    for name, value in rl.items():
        total[name] = total.get(name, 0) + value


def _max_into(total: _NanoList, rl: Mapping[str, int]) -> None:
    for name, value in rl.items():
        current = total.get(name)
        if current is None or value > current:
            total[name] = value


def _container_requests(c: Container, non_missing: Mapping[str, int] | None) -> _NanoList:
    res = c.resources
    out = _nano_list(res.requests if res is not None else None)
    if non_missing:
        for name, value in non_missing.items():
            if name not in out:
                out[name] = value
    return out


def _container_limits(c: Container, _non_missing: Mapping[str, int] | None) -> _NanoList:
    res = c.resources
    return _nano_list(res.limits if res is not None else None)


def _aggregate(
    pod: Pod,
    per_container: _ContainerFn,
    non_missing: Mapping[str, int] | None,
) -> _NanoList:
    spec = pod.spec
    total: _NanoList = {}
    for c in spec.containers:
        _add_into(total, per_container(c, non_missing))
    init_containers = spec.init_containers
    if init_containers:
        sidecars: _NanoList = {}
        init_peak: _NanoList = {}
        for c in init_containers:
            own = per_container(c, non_missing)
            if c.restart_policy == _RESTART_ALWAYS:
                # A sidecar keeps running: it adds to the pod's steady state and to every later step.
                _add_into(total, own)
                _add_into(sidecars, own)
                _max_into(init_peak, sidecars)
            else:
                step = dict(own)
                _add_into(step, sidecars)
                _max_into(init_peak, step)
        _max_into(total, init_peak)
    return total


def is_pod_level_requests_set(pod: Pod) -> bool:
    """``IsPodLevelRequestsSet``: spec.resources.requests names cpu, memory or a hugepages size."""
    res = pod.spec.resources
    if res is None or not res.requests:
        return False
    return any(_is_supported_pod_level_resource(name) for name in res.requests)


def is_pod_level_resources_set(pod: Pod) -> bool:
    """``IsPodLevelResourcesSet``: pod-level requests or limits name a supported resource."""
    res = pod.spec.resources
    if res is None:
        return False
    return any(
        _is_supported_pod_level_resource(name) for rl in (res.requests, res.limits) if rl for name in rl
    )


def _apply_pod_level(total: _NanoList, rl: ResourceList | None) -> None:
    if rl:
        for name, q in rl.items():
            if _is_supported_pod_level_resource(name):
                total[name] = nano_value(q)


def _pod_requests_nano(pod: Pod, non_missing: Mapping[str, int] | None) -> _NanoList:
    total = _aggregate(pod, _container_requests, non_missing)
    if is_pod_level_requests_set(pod):
        res = pod.spec.resources
        assert res is not None
        _apply_pod_level(total, res.requests)
    overhead = pod.spec.overhead
    if overhead:
        _add_into(total, _nano_list(overhead))
    return total


def pod_requests(pod: Pod) -> Resources:
    """Effective pod requests (``PodRequests`` with default options). No ``pods`` entry."""
    return _to_amounts(_pod_requests_nano(pod, None))


def non_zero_pod_requests(pod: Pod) -> Resources:
    """kube-scheduler's scoring requests: a container that sets no cpu (memory) request counts as
    100m (200Mi). An explicit zero stays zero. With pod-level requests set, the stand-ins apply
    only to a resource that neither the pod level nor any container requests
    (``getNonMissingContainerRequests``)."""
    if not is_pod_level_requests_set(pod):
        return _to_amounts(_pod_requests_nano(pod, _NON_MISSING_BOTH))
    plain = _pod_requests_nano(pod, None)
    non_missing = {name: value for name, value in _NON_MISSING_BOTH.items() if name not in plain}
    if not non_missing:
        return _to_amounts(plain)
    return _to_amounts(_pod_requests_nano(pod, non_missing))


def pod_limits(pod: Pod) -> Resources:
    """Effective pod limits (``PodLimits``): overhead is added only to limits that are set and
    non-zero."""
    total = _aggregate(pod, _container_limits, None)
    if is_pod_level_resources_set(pod):
        res = pod.spec.resources
        assert res is not None
        _apply_pod_level(total, res.limits)
    overhead = pod.spec.overhead
    if overhead:
        for name, value in _nano_list(overhead).items():
            current = total.get(name)
            if current:
                total[name] = current + value
    return _to_amounts(total)


def node_allocatable(node: Node) -> Resources:
    """status.allocatable, or status.capacity when allocatable is absent."""
    status = node.status
    rl = status.allocatable if status.allocatable else status.capacity
    return resource_list(rl)


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """a + b, per resource (a new dict)."""
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) + value
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """a - b, per resource (a new dict; may go negative)."""
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) - value
    return out


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> list[str]:
    """Names of the requested resources that exceed ``free`` (in request order).

    A resource missing from ``free`` has 0 free; a request of 0 (or less) always fits.
    """
    return [name for name, value in request.items() if value > 0 and value > free.get(name, 0)]


def sum_resources(items: Iterable[Mapping[str, int]]) -> Resources:
    """The per-resource sum of many amounts."""
    out: Resources = {}
    for rl in items:
        for name, value in rl.items():
            out[name] = out.get(name, 0) + value
    return out
