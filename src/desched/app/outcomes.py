"""How ``desched run`` hears of an eviction: one object, told each outcome once, that tells the
metrics and the Kubernetes Events (issue 29: one way to hear of an eviction, not a list of
callbacks assembled at each cycle).

Three moments end an eviction's story: the cycle's answer (:meth:`EvictionOutcomes.evicted`, the
framework's one observer), a surge's rollout ending (:meth:`surge_done`), and an outcome-unknown
eviction reconciled later (:meth:`reconciled`). The log lines stay where they are written today
(the cycle's batch of ``evicted`` lines, the surge's and the reconciliation's own lines).
"""

from __future__ import annotations

from dataclasses import dataclass

from desched.backends.api_eviction import EventRecorder, Reconciled
from desched.backends.surge import Followed
from desched.framework.evictor import EvictionRecord
from desched.runtime.metrics import Metrics


@dataclass
class EvictionOutcomes:
    """Tells the metrics (None: --disable-metrics) and the Events (None until the recorder is
    made; never an eviction's Event in a dry run: a dry run records no Events)."""

    metrics: Metrics | None
    events: EventRecorder | None = None
    dry_run: bool = False

    def evicted(self, record: EvictionRecord) -> None:
        """One eviction the cycle asked for, as the backend answered it (the framework's observer)."""
        if self.metrics is not None:
            self.metrics.observe_eviction(record)
        if self.events is not None and not self.dry_run:
            self.events.observe(record)

    def surge_done(self, done: Followed) -> None:
        """A surge's rollout ended (succeeded or not)."""
        surge = done.surge
        if self.metrics is not None:
            self.metrics.observe_surge(done.succeeded, surge.plugin, surge.profile, surge.namespace)
        if self.events is not None:
            self.events.observe_surge(done)

    def reconciled(self, done: Reconciled) -> None:
        """What became of an eviction whose outcome was unknown."""
        if self.metrics is not None:
            self.metrics.observe_reconciled(done.record, done.outcome)
        if self.events is not None:
            self.events.observe_reconciled(done)
