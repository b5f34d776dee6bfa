"""What the checks read of a pod alone, and the msgpack encoding that keys the memos on it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

import msgspec

from desched.k8s import resources as k8s_resources
from desched.k8s.objects import Container, NodeSelectorTerm, Pod
from desched.k8s.resources import CPU, MEMORY

encode = msgspec.msgpack.Encoder().encode


def digest(value: object) -> bytes:
    """A 16-byte digest of ``value``'s encoding (BLAKE2b): the key of a memo that is kept for
    the whole placement, where the encoding itself (a kilobyte or more for a pod's spec) would
    be kept once per entry."""
    return hashlib.blake2b(encode(value), digest_size=16).digest()


def required_node_affinity(pod: Pod) -> object:
    aff = pod.spec.affinity
    if aff is None or aff.node_affinity is None:
        return None
    return aff.node_affinity.required_during_scheduling_ignored_during_execution


def affinity_shape(pod: Pod) -> bytes:
    return encode((pod.spec.node_selector, required_node_affinity(pod)))


def has_node_constraint(pod: Pod) -> bool:
    return bool(pod.spec.node_selector) or required_node_affinity(pod) is not None


def node_label_keys(
    node_selector: Mapping[str, str] | None, terms: Iterable[NodeSelectorTerm]
) -> tuple[str, ...] | None:
    """The node labels a nodeSelector and node selector terms read, sorted; None when a term
    reads a node's fields (its name), which no group of nodes shares."""
    keys = set(node_selector or ())
    for term in terms:
        if term.match_fields:
            return None
        keys.update(e.key for e in term.match_expressions or ())
    return tuple(sorted(keys))


def missing_cpu_or_memory(pod: Pod) -> bool:
    """Whether kube-scheduler's non-zero stand-ins could change the pod's cpu/memory requests."""
    spec = pod.spec
    if spec.resources is not None and spec.resources.requests:
        return True
    return containers_miss_cpu_or_memory(spec.containers, spec.init_containers)


def containers_miss_cpu_or_memory(
    containers: Sequence[Container], init_containers: Sequence[Container] | None
) -> bool:
    """:func:`missing_cpu_or_memory` for a pod without pod-level requests: whether a container
    (or an init container) requests no cpu or no memory."""
    for group in (containers, init_containers or ()):
        for c in group:
            res = c.resources
            req = res.requests if res is not None else None
            if not req or CPU not in req or MEMORY not in req:
                return True
    return False


def non_zero_cpu_memory(pod: Pod, requests: Mapping[str, int]) -> tuple[int, int]:
    if not missing_cpu_or_memory(pod):
        return requests.get(CPU, 0), requests.get(MEMORY, 0)
    nz = k8s_resources.non_zero_pod_requests(pod)
    return nz.get(CPU, 0), nz.get(MEMORY, 0)
