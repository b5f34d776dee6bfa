"""PodLifeTime: evict pods that match age, state, condition, exit-code and owner-kind criteria.

Upstream (``pkg/framework/plugins/podlifetime``) ANDs every criterion that is set; within one
criterion the listed values are ORed:

- ``maxPodLifeTimeSeconds``: whole seconds since ``metadata.creationTimestamp`` strictly above
  the limit (a pod without a creation timestamp is as old as Go's zero time);
- ``states``: the pod's phase, its ``status.reason``, or the waiting or terminated reason of a
  container (init and ephemeral containers only with their ``including*`` flag);
- ``conditions``: some ``status.conditions`` entry matches a filter's type, status and reason (the
  fields set); with ``minTimeSinceLastTransitionSeconds`` the entry must also have a
  ``lastTransitionTime`` at least that many whole seconds ago;
- ``exitCodes``: the exit code of a terminated container (init containers with the flag);
- ``ownerKinds``: include (some owner has one of the kinds) or exclude (no owner has one).

The pods considered are those on the given nodes; with ``includingUnscheduledPods`` (desched
only, upstream #1183) also the pods bound to no node, which upstream never lists (its #858): with
a ``PodScheduled=False`` condition filter and ``minTimeSinceLastTransitionSeconds`` that is "stuck
unschedulable for longer than a threshold". (Bound pods that never started are already there:
``states: [Pending]`` with a ``PodScheduled=True`` filter and a threshold.)

Matching pods of all the given nodes are evicted together, oldest first. "Oldest" is by the most
recent ``lastTransitionTime`` among the conditions matching a filter that carries a transition
threshold, if there is one, else by creation time (upstream's README); desched breaks ties by
namespace and name.

RemoveFailedPods is this plugin with the phase fixed to Failed (upstream delegates the same way):
:class:`~desched.plugins._shared.LifetimeCriteria` and
:func:`~desched.plugins._shared.evict_oldest_first` are shared with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from desched.framework import Handle, Status
from desched.k8s.objects import Node, Pod
from desched.plugins._shared import LifetimeCriteria, evict_oldest_first, pod_selector
from desched.plugins.podlifetime.args import PodLifeTimeArgs


class PodLifeTime:
    """Deschedule: evict pods matching the configured lifetime and state criteria, oldest first."""

    name: ClassVar[str] = "PodLifeTime"
    Args: ClassVar[type[PodLifeTimeArgs]] = PodLifeTimeArgs

    def __init__(self, args: PodLifeTimeArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._selected = pod_selector(args.namespaces, args.label_selector)
        include = args.namespaces.include if args.namespaces is not None else None
        self._namespaces = frozenset(include) if include else None
        self._criteria = _criteria(args)

    def _reason(self, pod: Pod) -> str:
        """``PodLifeTime: pod age 9d3h (790000s) > maxPodLifeTimeSeconds 7d (604800s)``, and the
        state, exit code or condition it matched."""
        why = self._criteria.why_evicted(pod, self.handle.now(), "maxPodLifeTimeSeconds")
        return f"PodLifeTime: pod {why}"

    def deschedule(self, nodes: Sequence[Node]) -> Status | None:
        return evict_oldest_first(
            self.handle,
            nodes,
            self._selected,
            self._criteria,
            self._reason,
            namespaces=self._namespaces,
            unscheduled=self.args.including_unscheduled_pods,
        )


def _criteria(args: PodLifeTimeArgs) -> LifetimeCriteria:
    owners = args.owner_kinds
    return LifetimeCriteria(
        max_age_seconds=args.max_pod_life_time_seconds,
        states=frozenset(args.states or ()),
        conditions=tuple(args.conditions or ()),
        exit_codes=frozenset(args.exit_codes or ()),
        include_owner_kinds=frozenset(owners.include or ()) if owners else frozenset(),
        exclude_owner_kinds=frozenset(owners.exclude or ()) if owners else frozenset(),
        including_init=args.including_init_containers,
        including_ephemeral=args.including_ephemeral_containers,
    )


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import DeschedulePlugin

    _deschedule_plugin: type[DeschedulePlugin] = PodLifeTime
