"""Evictions in background (upstream's alpha feature gate ``EvictionsInBackground``, for KubeVirt).

A pod annotated ``descheduler.alpha.kubernetes.io/request-evict-only`` asks to be evicted by its
controller, not deleted: KubeVirt answers the eviction of a VM's launcher pod with HTTP 429 and a
message containing ``Eviction triggered evacuation``, then live-migrates the VM and the pod leaves
when the migration is done. While it goes on, the controller sets
``descheduler.alpha.kubernetes.io/eviction-in-progress`` on the pod.

:class:`BackgroundEvictions` tracks those evictions across cycles, as upstream's cache of eviction
requests does:

- an eviction answered so is *assumed* in progress (:meth:`BackgroundEvictions.assume`);
- at the start of every cycle (:meth:`BackgroundEvictions.sync`, over the cycle's pods) a pod
  carrying both annotations, not finished, is tracked (also one this process never evicted: a
  restart or another replica made the request); a tracked pod is dropped when it is gone, has
  finished (Succeeded/Failed), lost ``request-evict-only``, or lost ``eviction-in-progress``
  after having had it (the migration failed or was cancelled: it may be evicted again); an assumed
  eviction never confirmed by ``eviction-in-progress`` is dropped after 10 minutes
  (upstream's ``assumedEvictionRequestTimeoutSeconds``);
- a tracked pod is not sent another eviction, and the tracked evictions count against every
  limit (total, per node, per namespace) of every cycle until they end
  (:meth:`BackgroundEvictions.counts`).

Hand-written: it is a small table over desched's own pod records.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from desched.framework.evictor import BackgroundCounts
from desched.k8s.objects import Pod
from desched.k8s.pods import FINISHED_PHASES

log = logging.getLogger(__name__)

#: The pod asks for eviction in background (set by KubeVirt on virt-launcher pods).
REQUEST_EVICT_ONLY: Final = "descheduler.alpha.kubernetes.io/request-evict-only"
#: The pod's eviction in background is going on (set and removed by its controller).
EVICTION_IN_PROGRESS: Final = "descheduler.alpha.kubernetes.io/eviction-in-progress"
#: What the answer to the eviction (HTTP 429) says when it goes on in background.
IN_BACKGROUND_TEXT: Final = "Eviction triggered evacuation"
#: How long an assumed eviction in background is kept without the in-progress annotation.
ASSUMED_TIMEOUT_SECONDS: Final = 600.0


def requests_evict_only(pod: Pod) -> bool:
    annotations = pod.metadata.annotations
    return annotations is not None and REQUEST_EVICT_ONLY in annotations


def answered_in_background(status: int, message: str) -> bool:
    """The eviction's answer is KubeVirt's "eviction in background": 429 with its text."""
    return status == 429 and IN_BACKGROUND_TEXT in message


@dataclass(slots=True)
class _Entry:
    namespace: str
    name: str
    node: str
    #: set by a 429 answer, not yet seen with the in-progress annotation
    assumed: bool
    since: float
    seen_in_progress: bool


class BackgroundEvictions:
    """The evictions in background going on, by pod uid (see the module docstring)."""

    def __init__(
        self, *, timeout: float = ASSUMED_TIMEOUT_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.timeout = timeout
        self.clock = clock
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def tracks(self, pod: Pod) -> bool:
        return bool(pod.metadata.uid) and pod.metadata.uid in self._entries

    def assume(self, pod: Pod) -> None:
        """The eviction of ``pod`` was answered "in background"."""
        uid = pod.metadata.uid
        if uid and uid not in self._entries:
            meta = pod.metadata
            self._entries[uid] = _Entry(
                meta.namespace, meta.name, pod.spec.node_name, True, self.clock(), False
            )

    def sync(self, pods: Iterable[Pod]) -> None:
        """Bring the table up to date with the cluster's pods (at the start of a cycle)."""
        now = self.clock()
        by_uid: dict[str, Pod] = {}
        for pod in pods:
            uid = pod.metadata.uid
            if not uid or not requests_evict_only(pod):
                continue
            by_uid[uid] = pod
            annotations = pod.metadata.annotations or {}
            if EVICTION_IN_PROGRESS in annotations and pod.status.phase not in FINISHED_PHASES:
                entry = self._entries.get(uid)
                if entry is None:
                    log.info("eviction in background of pod %s is in progress: tracking it", pod.key)
                    meta = pod.metadata
                    entry = _Entry(meta.namespace, meta.name, pod.spec.node_name, False, now, True)
                    self._entries[uid] = entry
                entry.seen_in_progress = True
                entry.assumed = False
                entry.node = pod.spec.node_name
        for uid, entry in list(self._entries.items()):
            current = by_uid.get(uid)
            why = ""
            if current is None:
                why = "the pod is gone (or no longer asks for eviction in background)"
            elif current.status.phase in FINISHED_PHASES:
                why = f"the pod has {current.status.phase.lower()}"
            elif entry.seen_in_progress and EVICTION_IN_PROGRESS not in (current.metadata.annotations or {}):
                why = f"{EVICTION_IN_PROGRESS} was removed (cancelled or failed: it may be evicted again)"
            elif entry.assumed and now - entry.since > self.timeout:
                why = f"not confirmed by {EVICTION_IN_PROGRESS} within {self.timeout:.0f}s"
            if why:
                log.info("eviction in background of pod %s/%s ended: %s", entry.namespace, entry.name, why)
                del self._entries[uid]

    def counts(self) -> BackgroundCounts:
        by_node: dict[str, int] = {}
        by_namespace: dict[str, int] = {}
        for e in self._entries.values():
            if e.node:
                by_node[e.node] = by_node.get(e.node, 0) + 1
            by_namespace[e.namespace] = by_namespace.get(e.namespace, 0) + 1
        return BackgroundCounts(len(self._entries), by_node, by_namespace)
