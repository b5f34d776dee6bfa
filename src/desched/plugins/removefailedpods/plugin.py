"""RemoveFailedPods: evict pods in phase Failed, optionally by reason, exit code, age and owner kind.

Upstream (``pkg/framework/plugins/removefailedpods``) runs PodLifeTime with the phase fixed to
Failed, and so does desched (both use :class:`desched.plugins._shared.LifetimeCriteria`):

- ``reasons`` act as PodLifeTime ``states``: the pod's phase or ``status.reason``, or a waiting or
  terminated reason of a container (of init containers too with ``includingInitContainers``);
- ``exitCodes``: a terminated container's exit code (init containers with the same flag);
- ``minPodLifetimeSeconds`` (default 3600): whole seconds since creation strictly above it. ``0``
  means no minimum age (upstream would still skip pods younger than one second);
- ``excludeOwnerKinds``: pods with an owner of one of these kinds are left alone.

Matching pods of all the given nodes are evicted oldest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from desched.framework import Handle, Status
from desched.k8s.objects import Node, Pod
from desched.plugins._shared import LifetimeCriteria, evict_oldest_first, failure_text, pod_selector
from desched.plugins.removefailedpods.args import RemoveFailedPodsArgs


class RemoveFailedPods:
    """Deschedule: evict failed pods matching the configured reasons and exit codes, oldest first."""

    name: ClassVar[str] = "RemoveFailedPods"
    Args: ClassVar[type[RemoveFailedPodsArgs]] = RemoveFailedPodsArgs

    def __init__(self, args: RemoveFailedPodsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)
        self._criteria = LifetimeCriteria(
            max_age_seconds=args.min_pod_lifetime_seconds or None,
            states=frozenset(args.reasons or ()),
            exit_codes=frozenset(args.exit_codes or ()),
            exclude_owner_kinds=frozenset(args.exclude_owner_kinds or ()),
            including_init=args.including_init_containers,
            failed_only=True,
        )

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        return evict_oldest_first(self.handle, nodes, self._selected, self._criteria, self._reason)

    def _reason(self, pod: Pod) -> str:
        """``RemoveFailedPods: pod failed: Error; container job exit code 1 (Error)``, and its age
        against minPodLifetimeSeconds when that is set."""
        why = failure_text(pod, init=self.args.including_init_containers)
        if self._criteria.max_age_seconds is not None:
            age = self._criteria.why_evicted(pod, self.handle.now(), "minPodLifetimeSeconds")
            why += f"; {age.split(', ')[0]}"
        return f"RemoveFailedPods: pod failed: {why}"


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeschedulePlugin

    _deschedule_plugin: type[DeschedulePlugin] = RemoveFailedPods
