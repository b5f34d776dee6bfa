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
from typing import TYPE_CHECKING, ClassVar, Literal

from desched.api.types import ArgsModel
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import ZERO_TIME, Pod
from desched.plugins.common import priority_low_to_high_key

if TYPE_CHECKING:
    from desched.framework.framework import PluginHandle

_PriorityKey = tuple[int, int, int, int]
_NAIVE_ZERO_TIME = ZERO_TIME.replace(tzinfo=None)


class PrioritySort:
    """Evict low-priority pods first."""

    name: ClassVar[str] = "PrioritySort"

    def __init__(self, args: object, handle: PluginHandle) -> None:
        self.handle = handle
        self._keys: dict[str, tuple[Pod, _PriorityKey]] = {}

    def on_cycle_start(self) -> None:
        self._keys.clear()

    def _key(self, pod: Pod) -> _PriorityKey:
        hit = self._keys.get(pod.key)
        if hit is not None and hit[0] is pod:
            return hit[1]
        full = priority_low_to_high_key(pod)
        key = (full[0], full[1], full[2], full[3])  # without the (namespace, name) tie-break
        self._keys[pod.key] = (pod, key)
        return key

    def less(self, a: Pod, b: Pod) -> bool:
        return self._key(a) < self._key(b)

    def pre_less(self, a: Pod, b: Pod) -> bool:
        return self._key(a) < self._key(b)

    def sort_key(self, pod: Pod) -> _PriorityKey:
        """``less(a, b)`` exactly when ``sort_key(a) < sort_key(b)`` (the framework's fast path)."""
        return self._key(pod)

    def presort_key(self, pod: Pod) -> _PriorityKey:
        return self._key(pod)


class PodAgeSortArgs(ArgsModel):
    order: Literal["OldestFirst", "NewestFirst"] = "OldestFirst"


class PodAgeSort:
    """Evict the oldest (or, with ``order: NewestFirst``, the newest) pods first."""

    name: ClassVar[str] = "PodAgeSort"
    Args: ClassVar[type[PodAgeSortArgs]] = PodAgeSortArgs

    def __init__(self, args: PodAgeSortArgs, handle: PluginHandle) -> None:
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
        t = k8s_pods.pod_creation_time(pod)
        if not self._newest_first:
            return t
        # newer first: the time before Go's zero time, which orders the other way round
        return (ZERO_TIME if t.tzinfo is not None else _NAIVE_ZERO_TIME) - t

    def presort_key(self, pod: Pod) -> datetime | timedelta:
        return self.sort_key(pod)
