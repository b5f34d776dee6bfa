"""The node table: what NodeResourcesFit and the resource scores read of each node (allocatable,
requested and non-zero-requested per resource, pod counts), indexed by node in kube-scheduler's
order, kept up to date as pods are bound and leave (:class:`NodeTable`, the one owner of those
facts); and each request class's list of fitting nodes (:class:`FitLists`)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Node, Pod
from desched.k8s.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources
from desched.scheduling.placement.filters import resource_failures
from desched.scheduling.placement.shapes import containers_miss_cpu_or_memory, non_zero_cpu_memory

#: A request of 0 always fits, even on an overcommitted node: compare against this instead.
NO_REQUEST: Final = -(1 << 62)
#: Resources NodeResourcesFit checks by name; every other requested resource is a "scalar" one.
BASIC_RESOURCES: Final = frozenset((CPU, MEMORY, EPHEMERAL_STORAGE, PODS))
#: Request classes whose lists of fitting nodes are kept.
_FIT_CLASSES: Final = 1024


class NodeTable:
    """Per node (by index in kube-scheduler's order): allocatable, the requests of the pods
    occupying it, raw (the filter, BalancedAllocation; the snapshot keeps these sums) and with
    kube-scheduler's non-zero stand-ins (NonZeroRequested: LeastAllocated), its pod count and
    what is left free."""

    def __init__(self, snapshot: ClusterSnapshot, nodes: Sequence[Node], index: Mapping[str, int]) -> None:
        self.n = len(nodes)
        self.alloc: list[Resources] = [snapshot.allocatable(node) for node in nodes]
        self.alloc_cpu = [a.get(CPU, 0) for a in self.alloc]
        self.alloc_mem = [a.get(MEMORY, 0) for a in self.alloc]
        self.alloc_eph = [a.get(EPHEMERAL_STORAGE, 0) for a in self.alloc]
        self.alloc_pods = [a.get(PODS, 0) for a in self.alloc]
        used = [snapshot.requested_on(node.metadata.name) for node in nodes]
        self.req_cpu = [u.get(CPU, 0) for u in used]
        self.req_mem = [u.get(MEMORY, 0) for u in used]
        self.req_eph = [u.get(EPHEMERAL_STORAGE, 0) for u in used]
        self.pod_count = [snapshot.pod_count_on(node.metadata.name) for node in nodes]
        self.req_scalar: list[dict[str, int]] = [
            {k: v for k, v in u.items() if k not in BASIC_RESOURCES} for u in used
        ]
        self.nz_cpu = list(self.req_cpu)
        self.nz_mem = list(self.req_mem)
        index_get = index.get
        requests = snapshot.shared_requests
        nz_cpu, nz_mem = self.nz_cpu, self.nz_mem
        # only a pod missing a cpu or memory request has non-zero stand-ins; the pods of one
        # template share their lists of containers, so each pair of lists is looked at once
        # (the lists live in the snapshot through the loop: their ids stay theirs)
        missing: dict[tuple[int, int], bool] = {}
        for pod in snapshot.iter_pods():
            spec = pod.spec
            key = (id(spec.containers), id(spec.init_containers))
            gap = missing.get(key)
            if gap is None:
                gap = missing[key] = containers_miss_cpu_or_memory(spec.containers, spec.init_containers)
            if not gap and (spec.resources is None or not spec.resources.requests):
                continue
            at = index_get(spec.node_name)
            if at is None or pod.status.phase in k8s_pods.FINISHED_PHASES:
                continue
            req = requests(pod)
            pc, pm = non_zero_cpu_memory(pod, req)
            nz_cpu[at] += pc - req.get(CPU, 0)
            nz_mem[at] += pm - req.get(MEMORY, 0)
        self.free_cpu = [a - u for a, u in zip(self.alloc_cpu, self.req_cpu, strict=True)]
        self.free_mem = [a - u for a, u in zip(self.alloc_mem, self.req_mem, strict=True)]
        self.free_eph = [a - u for a, u in zip(self.alloc_eph, self.req_eph, strict=True)]
        self.free_pods = [a - u for a, u in zip(self.alloc_pods, self.pod_count, strict=True)]

    def free(self, i: int) -> tuple[int, int, int, int]:
        """Node ``i``'s free cpu, memory, ephemeral storage and pod slots."""
        return self.free_cpu[i], self.free_mem[i], self.free_eph[i], self.free_pods[i]

    def add(self, i: int, pod: Pod, req: Mapping[str, int], sign: int = 1) -> bool:
        """A pod occupying node ``i`` with requests ``req`` arrived (``sign`` 1) or left (-1).
        Whether it requests an extended resource (the node's room for those changed)."""
        self.pod_count[i] += sign
        self.req_cpu[i] += sign * req.get(CPU, 0)
        self.req_mem[i] += sign * req.get(MEMORY, 0)
        self.req_eph[i] += sign * req.get(EPHEMERAL_STORAGE, 0)
        extended = False
        for name, amount in req.items():
            if name not in BASIC_RESOURCES:
                scalar = self.req_scalar[i]
                scalar[name] = scalar.get(name, 0) + sign * amount
                extended = True
        pc, pm = non_zero_cpu_memory(pod, req)
        self.nz_cpu[i] += sign * pc
        self.nz_mem[i] += sign * pm
        self.free_cpu[i] = self.alloc_cpu[i] - self.req_cpu[i]
        self.free_mem[i] = self.alloc_mem[i] - self.req_mem[i]
        self.free_eph[i] = self.alloc_eph[i] - self.req_eph[i]
        self.free_pods[i] = self.alloc_pods[i] - self.pod_count[i]
        return extended

    def resource_failures(self, i: int, requests: Iterable[tuple[str, int]]) -> list[str]:
        """NodeResourcesFit's reasons on node ``i`` for these requests."""
        alloc = self.alloc[i]
        used = self.req_scalar[i]
        free = {CPU: self.free_cpu[i], MEMORY: self.free_mem[i], EPHEMERAL_STORAGE: self.free_eph[i]}

        def free_of(name: str) -> int:
            left = free.get(name)
            return alloc.get(name, 0) - used.get(name, 0) if left is None else left

        return resource_failures(self.free_pods[i], requests, free_of)

    def short_of(self, scalar: Iterable[tuple[str, int]], i: int) -> bool:
        """Whether node ``i`` lacks room for one of these extended-resource requests."""
        alloc = self.alloc[i]
        used = self.req_scalar[i]
        return any(amount > alloc.get(name, 0) - used.get(name, 0) for name, amount in scalar)


class _FitClass:
    """A request class's fitting nodes (ascending), its cpu, memory and ephemeral-storage
    requests (``NO_REQUEST`` for none) and its extended-resource requests."""

    __slots__ = ("nodes", "requests", "scalar")

    def __init__(
        self, nodes: list[int], requests: tuple[int, int, int], scalar: list[tuple[str, int]]
    ) -> None:
        self.nodes = nodes
        self.requests = requests
        self.scalar = scalar


class FitLists:
    """Per request class (the nodes a pod class passes the static filters on, and its requests),
    the nodes where its requests fit (NodeResourcesFit), kept right as pods are bound
    (:meth:`node_shrank`) and made again on demand once a pod leaves (:meth:`reset`)."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.reset()

    def reset(self) -> None:
        self._classes: dict[tuple[object, ...], _FitClass] = {}
        #: the classes by their cpu, memory and ephemeral-storage request (ascending)
        self._by: tuple[tuple[list[int], list[_FitClass]], ...] = (([], []), ([], []), ([], []))
        self._scalar: list[_FitClass] = []

    def fitting(
        self,
        key: tuple[object, ...],
        passing: Sequence[int],
        requests: tuple[int, int, int],
        scalar: list[tuple[str, int]],
    ) -> list[int]:
        """The nodes of ``passing`` where requests of cpu, memory and ephemeral storage
        (``requests``, 0 for none) and ``scalar`` fit; ``key`` names the class."""
        classes = self._classes
        fit = classes.get(key)
        if fit is not None:
            return fit.nodes
        if len(classes) >= _FIT_CLASSES:
            self._forget(classes.pop(next(iter(classes))))
        t = self.table
        cpu, mem, eph = (r if r > 0 else NO_REQUEST for r in requests)
        free_cpu, free_mem, free_eph, free_pods = t.free_cpu, t.free_mem, t.free_eph, t.free_pods
        nodes = [
            i
            for i in passing
            if free_pods[i] > 0 and cpu <= free_cpu[i] and mem <= free_mem[i] and eph <= free_eph[i]
        ]
        if scalar:
            nodes = [i for i in nodes if not t.short_of(scalar, i)]
        fit = classes[key] = _FitClass(nodes, (cpu, mem, eph), scalar)
        for amount, (amounts, members) in zip(fit.requests, self._by, strict=True):
            at = bisect.bisect_right(amounts, amount)
            amounts.insert(at, amount)
            members.insert(at, fit)
        if scalar:
            self._scalar.append(fit)
        return fit.nodes

    def _forget(self, fit: _FitClass) -> None:
        for amount, (amounts, members) in zip(fit.requests, self._by, strict=True):
            at = bisect.bisect_left(amounts, amount)
            while members[at] is not fit:
                at += 1
            del amounts[at]
            del members[at]
        if fit in self._scalar:
            self._scalar.remove(fit)

    def node_shrank(self, i: int, before: tuple[int, int, int, int], extended: bool = True) -> None:
        """Node ``i`` has less room than ``before`` (its free cpu, memory, ephemeral storage and
        pods, and of extended resources if ``extended``): take it off the fit lists of the
        request classes that no longer fit there. Those are the classes requesting more than the
        node has left of some resource, but no more than it had (the others did not have the
        node, or still fit)."""
        t = self.table
        if t.free_pods[i] <= 0 < before[3]:
            affected: Iterable[_FitClass] = self._classes.values()
        else:
            gone: list[_FitClass] = []
            for (amounts, members), old, new in zip(
                self._by, before[:3], (t.free_cpu[i], t.free_mem[i], t.free_eph[i]), strict=True
            ):
                if new < old:
                    gone.extend(
                        members[bisect.bisect_right(amounts, new) : bisect.bisect_right(amounts, old)]
                    )
            if extended:
                # (room for extended resources unchanged: a class short of it now was before,
                # and its list does not have the node)
                gone.extend(fit for fit in self._scalar if t.short_of(fit.scalar, i))
            affected = gone
        for fit in affected:
            nodes = fit.nodes
            at = bisect.bisect_left(nodes, i)
            if at < len(nodes) and nodes[at] == i:
                del nodes[at]
