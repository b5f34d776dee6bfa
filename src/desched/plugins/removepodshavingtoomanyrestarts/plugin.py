"""RemovePodsHavingTooManyRestarts: evict pods whose containers restarted too often.

Upstream (``pkg/framework/plugins/removepodshavingtoomanyrestarts``): a pod qualifies when the
``restartCount`` of its containers (plus its init containers with ``includingInitContainers``) adds
up to at least ``podRestartThreshold``. With ``states``, the pod must also be in phase ``Running``
or have a container (init container, with the flag) waiting in ``CrashLoopBackOff``, as listed.

Nodes are processed in the order given; on each node the pods with the most restarts go first
(ties by namespace and name). A node whose per-node limit is reached is left for the next one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from desched.framework import Handle, Status
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Node, Pod
from desched.plugins._shared import pod_selector, select_all
from desched.plugins.removepodshavingtoomanyrestarts.args import RemovePodsHavingTooManyRestartsArgs


class RemovePodsHavingTooManyRestarts:
    """Deschedule: evict pods with at least ``podRestartThreshold`` container restarts."""

    name: ClassVar[str] = "RemovePodsHavingTooManyRestarts"
    Args: ClassVar[type[RemovePodsHavingTooManyRestartsArgs]] = RemovePodsHavingTooManyRestartsArgs

    def __init__(self, args: RemovePodsHavingTooManyRestartsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)
        self._states = frozenset(args.states or ())
        self._reason = "RemovePodsHavingTooManyRestarts"

    def restarts(self, pod: Pod) -> int:
        """Restarts counted against the threshold."""
        statuses = k8s_pods.container_statuses(pod, init=self.args.including_init_containers)
        return sum(cs.restart_count for cs in statuses)

    def _in_states(self, pod: Pod) -> bool:
        states = self._states
        if pod.status.phase in states:
            return True
        for cs in k8s_pods.container_statuses(pod, init=self.args.including_init_containers):
            waiting = cs.state.waiting if cs.state is not None else None
            if waiting is not None and waiting.reason in states:
                return True
        return False

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        ev = self.handle.evictor
        snapshot = self.handle.snapshot
        threshold = self.args.pod_restart_threshold
        init = self.args.including_init_containers
        selected = None if self._selected is select_all else self._selected
        states = self._states
        findings = self.handle.findings
        left = findings.left if findings.enabled else None  # reasons only when someone listens
        for node in nodes:
            candidates: list[tuple[Pod, int]] = []
            for pod in snapshot.pods_on_node(node.metadata.name):
                # restarts() inlined: this runs for every pod of the cluster
                status = pod.status
                restarts = 0
                for cs in status.container_statuses or ():
                    restarts += cs.restart_count
                if init:
                    for cs in status.init_container_statuses or ():
                        restarts += cs.restart_count
                if restarts < threshold:
                    if left is not None:
                        left(pod, f"{restarts} restarts < threshold {threshold}")
                    continue
                if selected is not None and not selected(pod):
                    if left is not None:
                        left(pod, "not selected by the plugin's namespaces/labelSelector")
                    continue
                if states and not self._in_states(pod):
                    if left is not None:
                        left(pod, f"{restarts} restarts, but not in states {sorted(states)}")
                    continue
                if ev.filter(pod):
                    candidates.append((pod, restarts))
            if not candidates:
                continue
            counts = {id(pod): restarts for pod, restarts in candidates}

            def most_restarts_first(pod: Pod, counts: dict[int, int] = counts) -> tuple[int, str, str]:
                return (-counts[id(pod)], pod.metadata.namespace, pod.metadata.name)

            def reason(pod: Pod, counts: dict[int, int] = counts) -> str:
                return f"{self._reason}: {counts[id(pod)]} restarts >= podRestartThreshold {threshold}"

            if ev.evict_in_order(
                self.handle.sort_pods([p for p, _ in candidates], key=most_restarts_first), reason
            ):
                return None
        return None


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeschedulePlugin

    _deschedule_plugin: type[DeschedulePlugin] = RemovePodsHavingTooManyRestarts
