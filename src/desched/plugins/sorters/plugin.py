"""Sort and PreSort plugins: the order in which strategies look at pods and evict them.

Upstream accepts ``sort`` and ``presort`` in a policy but never runs them (KEP-753 names a
"Priority" sorter as the default idea). desched runs them: a strategy orders its candidates with
``handle.sort_pods`` / ``handle.presort_pods``, where the profile's Sort (PreSort) plugins decide
first, in the order the profile enables them, and the strategy's own order breaks their ties.

Each plugin compares only what it is about, so that plugins configured after it, and the
strategy's order, still decide among pods it considers equal.

- ``PrioritySort``: lower priority first (pods without ``spec.priority`` before all others), then
  BestEffort, Burstable, Guaranteed, then pods without the ``prefer-no-eviction`` annotation
  (upstream's ``SortPodsBasedOnPriorityLowToHigh``). No args.
- ``PodAgeSort``: by ``metadata.creationTimestamp``; args ``order: OldestFirst`` (default) or
  ``NewestFirst``.

Both serve Sort (``less``) and PreSort (``pre_less``) alike.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, ClassVar

from desched.k8s import pods as k8s_pods
from desched.k8s.objects import ZERO_TIME, Pod
from desched.plugins._shared import priority_rank
from desched.plugins.sorters.args import PodAgeSortArgs

if TYPE_CHECKING:
    from desched.framework import Handle

_NAIVE_ZERO_TIME = ZERO_TIME.replace(tzinfo=None)


class PrioritySort:
    """Evict low-priority pods first."""

    name: ClassVar[str] = "PrioritySort"

    def __init__(self, args: object, handle: Handle) -> None:
        self.handle = handle

    def less(self, a: Pod, b: Pod) -> bool:
        return priority_rank(a) < priority_rank(b)

    def pre_less(self, a: Pod, b: Pod) -> bool:
        return priority_rank(a) < priority_rank(b)

    # Keys (without the (namespace, name) tie-break): ``less(a, b)`` exactly when
    # ``sort_key(a) < sort_key(b)`` (the framework's fast path). Computed each time: a memo costs
    # more than the few attribute reads, pods being sorted once or twice a cycle.
    sort_key = staticmethod(priority_rank)
    presort_key = staticmethod(priority_rank)


class PodAgeSort:
    """Evict the oldest (or, with ``order: NewestFirst``, the newest) pods first."""

    name: ClassVar[str] = "PodAgeSort"
    Args: ClassVar[type[PodAgeSortArgs]] = PodAgeSortArgs

    def __init__(self, args: PodAgeSortArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self._newest_first = args.order == "NewestFirst"

    def less(self, a: Pod, b: Pod) -> bool:
        ta: datetime = k8s_pods.pod_creation_time(a)
        tb: datetime = k8s_pods.pod_creation_time(b)
        return ta > tb if self._newest_first else ta < tb

    def pre_less(self, a: Pod, b: Pod) -> bool:
        return self.less(a, b)

    def sort_key(self, pod: Pod) -> datetime | timedelta:
        """``less(a, b)`` exactly when ``sort_key(a) < sort_key(b)`` (the framework's fast path)."""
        t = pod.metadata.creation_timestamp
        if t is None:
            t = ZERO_TIME
        if not self._newest_first:
            return t
        # newer first: the time before Go's zero time, which orders the other way round
        return (ZERO_TIME if t.tzinfo is not None else _NAIVE_ZERO_TIME) - t

    def presort_key(self, pod: Pod) -> datetime | timedelta:
        return self.sort_key(pod)


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import PreSortKeyPlugin, PreSortPlugin, SortKeyPlugin, SortPlugin

    _priority_pre_sort_plugin: type[PreSortPlugin] = PrioritySort
    _priority_sort_plugin: type[SortPlugin] = PrioritySort
    _priority_sort_key_plugin: type[SortKeyPlugin] = PrioritySort
    _priority_pre_sort_key_plugin: type[PreSortKeyPlugin] = PrioritySort
    _pod_age_pre_sort_plugin: type[PreSortPlugin] = PodAgeSort
    _pod_age_sort_plugin: type[SortPlugin] = PodAgeSort
    _pod_age_sort_key_plugin: type[SortKeyPlugin] = PodAgeSort
    _pod_age_pre_sort_key_plugin: type[PreSortKeyPlugin] = PodAgeSort
