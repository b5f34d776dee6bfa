"""The settling guard: no eviction of a pod whose readiness just changed while the cluster comes back.

The eviction API decides on a PodDisruptionBudget's *status*. Under the default
``unhealthyPodEvictionPolicy`` (``IfHealthyBudget``) it lets an unhealthy (not Ready) pod go when
the status says the budget is met, even with ``disruptionsAllowed: 0``. After an outage that status
can be from before it: kubelets could not heartbeat, their nodes and pods turned NotReady, and
the disruption controller has not counted them yet. An eviction sent then is answered 201 for a
pod under a budget whose ``minAvailable`` equals its pod count: Kubernetes allows it; an operator
does not want a descheduler to do it while the cluster recovers.

So, for a settling window (``--settling-window``, 40 s by default) after

- the cache resumed after a gap: a kind re-listed (an apiserver restart, a ``410 Gone``) or a
  watch re-opened after failing (the informers report it: ``LiveCache(on_resume=...)``), or
- more than :data:`NODE_SHARE` of the nodes changed readiness within the window (a partition of
  the kubelets from the control plane shows this way even where desched's own watches held),

an eviction of a pod whose readiness changed within the window (as seen by the watch or a
re-list's diff) is held back: skipped, with reason ``settling`` (counted in
``descheduler_evictions_skipped_total``, logged once per pod and settling period, an
``EvictionSkipped`` Event), and not charged against any limit. Every other pod is evicted as
usual, and the held ones are tried again by the first cycle after their window.

The window cannot know when the disruption controller has recounted: after a long outage its own
watches re-list too, and it may still be behind when the window ends. So, whenever the guard is on
(in or out of a settling period), an unhealthy pod (Running, not Ready: the one the eviction API
lets go on the budget's status) is also held back while one of its budgets'
status is *behind its pods*: the status lets an unhealthy pod go (``currentHealthy >=
desiredHealthy``) but the pods of the cycle's snapshot have fewer healthy than desired
(:func:`desched.k8s.disruption.status_behind_pods`), so a recount would refuse the eviction. The
budgets are judged once per cycle, on the snapshot before its evictions (:meth:`begin_cycle`).

Why 40 s: it is a kubelet's node lease (``nodeLeaseDurationSeconds``, renewed every 10 s) and four
node-status heartbeats (``nodeStatusUpdateFrequency`` 10 s). A window that long lets every kubelet
that is alive report again, and the disruption controller (which recounts a budget at each change
of its pods) catch up with what they report, before a pod whose readiness moved is evicted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from desched.cluster.view import ClusterView
from desched.framework.safety import Skip, SkipReason
from desched.k8s import disruption
from desched.k8s import labels as k8s_labels
from desched.k8s.nodes import is_node_ready
from desched.k8s.objects import Node, Pod, PodDisruptionBudget
from desched.k8s.pods import is_pod_ready

log = logging.getLogger(__name__)

#: Default of ``--settling-window``: a node lease (40 s), four node heartbeats.
DEFAULT_SETTLING_WINDOW = 40.0
#: More than this share of the nodes changing readiness within the window is a settling cluster.
NODE_SHARE = 0.1


class SettlingGuard:
    """Watches readiness changes and the cache's gaps; tells which evictions to hold back.

    :meth:`observe` and :meth:`resumed` are called on the event loop (the informers' callbacks),
    :meth:`check` from the cycle's worker thread: a lock keeps the two apart.
    """

    def __init__(self, window: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.window = window
        self.clock = clock
        self._lock = threading.Lock()
        #: pod uid -> when its readiness was last seen to change
        self._pods: dict[str, float] = {}
        #: node name -> when its readiness was last seen to change
        self._node_changes: dict[str, float] = {}
        self._nodes: set[str] = set()
        #: when the cache last resumed after a gap, and how
        self._resumed_at = -float("inf")
        self._resumed: dict[str, str] = {}
        #: pods held back in the current settling period (logged once each)
        self._logged: set[str] = set()
        self.held = 0
        #: this cycle's budgets whose status is behind their pods: (namespace, name) -> reason
        self._behind: dict[tuple[str, str], str] = {}
        self._pdbs_for: Callable[[Pod], list[PodDisruptionBudget]] = lambda _pod: []

    @property
    def enabled(self) -> bool:
        return self.window > 0

    # ------------------------------------------------------------------ what the cache reports

    def observe(self, kind: str, event: str, old: Any, new: Any) -> None:
        """An informer's change (the ``on_change`` callback: ``kind``, event, old, new)."""
        if not self.enabled:
            return
        if kind == "Pod":
            self._observe_pod(old, new)
        elif kind == "Node":
            self._observe_node(old, new)

    def _observe_pod(self, old: Any, new: Any) -> None:
        if isinstance(old, Pod) and new is None:
            with self._lock:
                self._pods.pop(old.metadata.uid, None)
            return
        if isinstance(old, Pod) and isinstance(new, Pod) and is_pod_ready(old) != is_pod_ready(new):
            now = self.clock()
            with self._lock:
                self._pods[new.metadata.uid] = now
                self._prune(now)

    def _observe_node(self, old: Any, new: Any) -> None:
        now = self.clock()
        with self._lock:
            if isinstance(new, Node):
                self._nodes.add(new.metadata.name)
                if isinstance(old, Node) and is_node_ready(old) != is_node_ready(new):
                    self._node_changes[new.metadata.name] = now
            elif isinstance(old, Node):
                self._nodes.discard(old.metadata.name)
                self._node_changes.pop(old.metadata.name, None)
            self._prune(now)

    def resumed(self, kind: str, how: str) -> None:
        """The cache of ``kind`` resumed after a gap (``how``: re-listed, watch re-opened)."""
        if not self.enabled:
            return
        with self._lock:
            now = self.clock()
            if now - self._resumed_at >= self.window:
                self._resumed = {}
            self._resumed[kind] = how
            self._resumed_at = now

    def _prune(self, now: float) -> None:
        """Forget changes older than the window (with the lock held)."""
        for changes in (self._pods, self._node_changes):
            if changes and len(changes) > 64:
                for key in [k for k, t in changes.items() if now - t >= self.window]:
                    del changes[key]

    # ------------------------------------------------------------------ the decision

    def settling(self) -> str:
        """Why the cluster is settling now (for messages), or "" when it is not."""
        if not self.enabled:
            return ""
        now = self.clock()
        with self._lock:
            if now - self._resumed_at < self.window:
                how = ", ".join(f"{kind} {how}" for kind, how in self._resumed.items())
                return f"{how}, last {now - self._resumed_at:.0f}s ago"
            changed = sum(1 for t in self._node_changes.values() if now - t < self.window)
            nodes = len(self._nodes)
            if nodes and changed > NODE_SHARE * nodes:
                return f"{changed} of {nodes} nodes changed readiness within {self.window:g}s"
            self._logged.clear()  # a new settling period logs its pods again
            return ""

    def begin_cycle(self, snapshot: ClusterView) -> None:
        """Judge the budgets of a cycle's snapshot (before its evictions): which have a status
        behind their pods (:func:`desched.k8s.disruption.status_behind_pods`)."""
        if not self.enabled:
            return
        # only the budgets over a pod the eviction API would let go as unhealthy (Running, not
        # Ready; a Pending, finished or terminating pod goes without a look at budgets): a healthy
        # cluster has few, so the cycle pays one pass over its pods, not one per budget
        over_unhealthy: dict[tuple[str, str], PodDisruptionBudget] = {}
        for pod in snapshot.iter_pods():
            if is_pod_ready(pod) or disruption.can_ignore_pdb(pod):
                continue
            for pdb in snapshot.pdbs_for_pod(pod):
                over_unhealthy.setdefault((pdb.metadata.namespace, pdb.metadata.name), pdb)
        behind: dict[tuple[str, str], str] = {}
        for pdb in over_unhealthy.values():
            if pdb.status.disruptions_allowed is None:
                continue
            budget = disruption.compute_budget(pdb, ())
            if not disruption.status_behind_pods(budget, budget.desired_healthy - 1):
                continue  # its status would not let an unhealthy pod go, whatever the pods
            ns = pdb.metadata.namespace
            match = k8s_labels.compile_label_selector(pdb.spec.selector, none_matches=False)
            seen = sum(
                1
                for p in snapshot.pods_in_namespace(ns)
                if match(p.metadata.labels or {}) and disruption.is_healthy(p)
            )
            if disruption.status_behind_pods(budget, seen):
                behind[(ns, pdb.metadata.name)] = (
                    f"its PodDisruptionBudget {ns}/{pdb.metadata.name} counts {budget.current_healthy} "
                    f"healthy of {budget.desired_healthy} desired, its pods show {seen}: the budget's "
                    "status is behind its pods (the disruption controller has not recounted them); "
                    "held back until it has"
                )
        with self._lock:
            self._behind = behind
            self._pdbs_for = snapshot.pdbs_for_pod

    def _budget_behind(self, pod: Pod) -> str:
        """Why ``pod`` (unhealthy) must wait for its budget's recount, or ""."""
        with self._lock:
            behind, pdbs_for = self._behind, self._pdbs_for
        if not behind or is_pod_ready(pod) or disruption.can_ignore_pdb(pod):
            return ""
        for pdb in pdbs_for(pod):
            why = behind.get((pdb.metadata.namespace, pdb.metadata.name))
            if why:
                return why
        return ""

    def check(self, pod: Pod) -> Skip | None:
        """A :class:`Skip` (reason ``settling``) when ``pod``'s eviction must wait; else None."""
        if not self.enabled:
            return None
        uid = pod.metadata.uid
        behind = self._budget_behind(pod)
        if behind:
            return self._hold(pod, f"budget:{uid}", behind)
        with self._lock:
            changed = self._pods.get(uid)
        if changed is None:
            return None
        age = self.clock() - changed
        if age >= self.window:
            return None
        cause = self.settling()
        if not cause:
            return None
        detail = (
            f"its readiness changed {age:.0f}s ago while the cluster settles ({cause}): held back "
            f"for the {self.window:g}s settling window (--settling-window)"
        )
        return self._hold(pod, uid, detail)

    def _hold(self, pod: Pod, key: str, detail: str) -> Skip:
        """Count and log (once per ``key`` and settling period) a held-back eviction."""
        with self._lock:
            first = key not in self._logged
            self._logged.add(key)
            self.held += 1
        if first:
            log.info(
                "settling: not evicting pod %s/%s: %s", pod.metadata.namespace, pod.metadata.name, detail
            )
        return Skip(SkipReason.SETTLING, detail)
