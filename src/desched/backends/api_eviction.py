"""Evicting for real: the ``policy/v1`` Eviction subresource, and events.k8s.io Events.

The decision code runs synchronously in a worker thread; each eviction is handed to the event loop
that owns the API client and waited for. Every answer is one of three outcomes:

- evicted (2xx);
- refused, it did not happen: a 4xx answer (PDB 429, 404, 409, 403 ...), or a request never sent
  (the connection could not be opened, not the leader, not enough lease left);
- outcome unknown, it may have happened: a 5xx answer, the connection reset or closed after the
  request went out, a timeout after sending. The evictor counts it against every limit, and
  :func:`reconcile` later reads the pod (from the cache, then one GET) to tell what happened.

Before every request the backend asks ``may_evict`` (leader lease still held, not shutting down),
and bounds the request's deadline by ``lease_time_left``: a request that could not complete before
the lease might pass to another replica is not sent, and one in flight is abandoned (client-side
timeout) before then. :class:`EvictionLedger` remembers, across cycles, the pods this process
evicted or may have evicted (by uid), so a stale or relisted cache never leads to a second eviction.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import socket
import time
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import aiohttp
from kubernetes_asyncio import client

from desched.backends import surge as surging
from desched.backends.background_evictions import (
    BackgroundEvictions,
    answered_in_background,
    requests_evict_only,
)
from desched.backends.eviction_webhook import EvictionWebhooks
from desched.framework.evictor import (
    BackgroundCounts,
    EvictionRecord,
    EvictionRequest,
    InBackground,
    OutcomeUnknown,
    Surged,
)
from desched.framework.safety import Skip
from desched.framework.types import EvictResult
from desched.k8s.objects import Pod
from desched.k8s.pods import FINISHED_PHASES
from desched.kube import client as kube
from desched.kube.client import ApiError, RateLimiter

log = logging.getLogger(__name__)

REPORTING_CONTROLLER = "sigs.k8s.io.descheduler"
REQUESTED_BY = "sigs.k8s.io/descheduler"
EVICTION_TIMEOUT_SECONDS = 60.0
#: An eviction request is not sent with less time than this left before its deadline.
MIN_REQUEST_SECONDS = 1.0
#: How long an eviction this process made (or may have made) is remembered, by pod uid.
REMEMBER_SECONDS = 600.0


class EvictionLedger:
    """The pods (by uid) this process evicted or may have evicted, remembered across cycles.

    A pod's uid never comes back without a deletionTimestamp once it was evicted, but a cache can
    be stale (a watch stalled or cut, a relist after an apiserver restart) and still show it
    running: the ledger keeps such a pod from being sent a second eviction. Entries expire after
    ``ttl`` seconds, and are dropped at once when reconciliation finds the eviction did not happen.
    """

    def __init__(self, *, ttl: float = REMEMBER_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.clock = clock
        self._until: dict[str, float] = {}

    def remember(self, uid: str, ttl: float | None = None) -> None:
        """Remember ``uid`` for ``ttl`` seconds (default: the ledger's)."""
        if uid:
            self._until[uid] = max(
                self._until.get(uid, 0.0), self.clock() + (self.ttl if ttl is None else ttl)
            )

    def forget(self, uid: str) -> None:
        self._until.pop(uid, None)

    def knows(self, uid: str) -> bool:
        until = self._until.get(uid)
        if until is None:
            return False
        if until <= self.clock():
            del self._until[uid]
            return False
        return True

    def __len__(self) -> int:
        return len(self._until)


class ApiEvictionBackend:
    def __init__(
        self,
        api: client.ApiClient,
        loop: asyncio.AbstractEventLoop,
        *,
        dry_run: bool = False,
        may_evict: Callable[[], bool] = lambda: True,
        limiter: RateLimiter | None = None,
        lease_time_left: Callable[[], float | None] = lambda: None,
        ledger: EvictionLedger | None = None,
        clock: Callable[[], float] = time.monotonic,
        background: BackgroundEvictions | None = None,
        hold: Callable[[Pod], Skip | None] | None = None,
        webhooks: EvictionWebhooks | None = None,
    ) -> None:
        self.api = api
        #: asks the profile's ``evictionPolicy.webhook`` last, right before the eviction
        self.webhooks = webhooks
        #: asked before each eviction: a Skip holds it back (the settling guard, desched.backends.settling)
        self.hold = hold
        #: ``--feature-gates EvictionsInBackground=true``: the evictions going on in background
        self.background = background
        self.loop = loop
        self.dry_run = dry_run
        self.may_evict = may_evict
        self.limiter = limiter
        self.lease_time_left = lease_time_left
        self.ledger = ledger if ledger is not None else EvictionLedger(clock=clock)
        self.clock = clock
        #: the surges (rollout restarts instead of evictions) of this backend's cycle, in order
        self.surges: list[surging.Started] = []
        self._surged: set[str] = set()

    def already_evicted(self, pod: Pod) -> bool:
        """Evicted (or possibly) by this process, or its eviction goes on in background."""
        if self.background is not None and self.background.tracks(pod):
            return True
        return self.ledger.knows(pod.metadata.uid)

    def background_counts(self) -> BackgroundCounts:
        return self.background.counts() if self.background is not None else BackgroundCounts()

    def deadline(self) -> float:
        """When (on ``clock``) a request sent now must be over: the timeout, or the lease's end."""
        budget = EVICTION_TIMEOUT_SECONDS
        left = self.lease_time_left()
        if left is not None:
            budget = min(budget, left)
        return self.clock() + budget

    def evict(
        self, pod: Pod, request: EvictionRequest
    ) -> str | OutcomeUnknown | InBackground | Skip | Surged | None:
        if not self.may_evict():
            return "not evicting: this replica is not the leader or is shutting down"
        held = self.hold(pod) if self.hold is not None else None
        if held is not None:
            return held
        if request.webhook is not None and self.webhooks is not None:
            denied = self.webhooks.review(pod, request, dry_run=self.dry_run)
            if denied is not None:
                return denied
        if request.surge is not None:
            surged = self._surge(pod, request)
            if not isinstance(surged, surging.NotEligible):
                return surged
        if self.dry_run:
            return None
        deadline = self.deadline()
        if deadline - self.clock() < MIN_REQUEST_SECONDS:
            return "not sent: the leader lease could pass to another replica before it completes"
        future = asyncio.run_coroutine_threadsafe(self.evict_async(pod, request, deadline), self.loop)
        try:
            # the coroutine keeps its own deadline; this wait only guards against a stuck loop
            answer = future.result(max(0.0, deadline - self.clock()) + 5.0)
        except FutureTimeout:
            future.cancel()
            answer = OutcomeUnknown("no answer before the request's deadline")
        except Exception as e:  # whatever went wrong, it concerns this pod only: one line, no trace
            answer = OutcomeUnknown(f"request failed: {type(e).__name__}: {e}")
        if answer is None or isinstance(answer, OutcomeUnknown):
            self.ledger.remember(pod.metadata.uid)
        elif isinstance(answer, InBackground) and self.background is not None:
            self.background.assume(pod)
        return answer

    def _surge(
        self, pod: Pod, request: EvictionRequest
    ) -> surging.NotEligible | str | OutcomeUnknown | Surged:
        """``evictionPolicy.surge`` (:mod:`desched.backends.surge`): a rollout restart in place of
        the eviction, or NOT_ELIGIBLE (the pod is evicted as usual)."""
        assert request.surge is not None
        deadline = self.deadline()
        if deadline - self.clock() < MIN_REQUEST_SECONDS:
            return "not sent: the leader lease could pass to another replica before it completes"
        attempt = surging.try_surge(
            self.api,
            pod,
            request.surge,
            profile=request.profile,
            plugin=request.plugin,
            dry_run=self.dry_run,
            timeout=deadline - self.clock(),
            already=self._surged,
            clock=self.clock,
        )
        future = asyncio.run_coroutine_threadsafe(attempt, self.loop)
        try:
            answer = future.result(max(0.0, deadline - self.clock()) + 5.0)
        except FutureTimeout:
            future.cancel()
            answer = OutcomeUnknown("no answer to the rollout restart before the request's deadline")
        except Exception as e:  # it concerns this pod only: one line, no trace
            answer = OutcomeUnknown(f"surge failed: {type(e).__name__}: {e}")
        if isinstance(answer, surging.Started):
            self.surges.append(answer)
            if not answer.dry_run:
                # the old pod stays until its replacement is available: never evicted meanwhile
                # (its Deployment, rolling now, could not surge again), nor surged twice
                self.ledger.remember(pod.metadata.uid, answer.timeout + self.ledger.ttl)
            verb = "would surge" if answer.dry_run else "surging"
            log.info("%s pod %s: rollout restart of %s", verb, pod.key, answer.target)
            return Surged(answer.target)
        if isinstance(answer, OutcomeUnknown):
            self.ledger.remember(pod.metadata.uid)
        return answer

    async def evict_async(
        self, pod: Pod, request: EvictionRequest, deadline: float | None = None
    ) -> str | OutcomeUnknown | InBackground | None:
        ns, name = pod.metadata.namespace, pod.metadata.name
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {
                "name": name,
                "namespace": ns,
                "annotations": {
                    "reason": f"triggered by {request.profile}/{request.plugin}: {request.reason}",
                    "requested-by": REQUESTED_BY,
                },
            },
        }
        if request.grace_period_seconds is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": request.grace_period_seconds}
        if self.limiter is not None:
            await self.limiter.acquire()
        if deadline is None:
            deadline = self.deadline()
        timeout = deadline - self.clock()
        if timeout < MIN_REQUEST_SECONDS:  # the rate limiter took the time that was left
            return "not sent: the leader lease could pass to another replica before it completes"
        try:
            await asyncio.wait_for(
                kube.request(
                    self.api,
                    "POST",
                    f"/api/v1/namespaces/{ns}/pods/{name}/eviction",
                    body=body,
                    timeout=timeout,
                ),
                timeout,
            )
        except ApiError as e:
            if e.status >= 500:  # the apiserver (or a proxy) may have acted before failing
                return OutcomeUnknown(str(e))
            if (
                self.background is not None
                and requests_evict_only(pod)
                and answered_in_background(e.status, e.message)
            ):
                if pod.status.phase in FINISHED_PHASES:
                    # (upstream ignores it: a finished pod would count as in progress for ever)
                    return f"not tracked as an eviction in background: the pod has finished ({e})"
                return InBackground(e.message)
            return str(e)
        except aiohttp.ClientConnectorError as e:  # no connection was made: nothing was sent
            return f"not sent: {e}"
        except TimeoutError:
            return OutcomeUnknown(f"no answer within {timeout:.1f}s")
        except (OSError, aiohttp.ClientError, client.ApiException) as e:
            # reset, closed or garbled after the request may have gone out
            return OutcomeUnknown(f"request failed: {type(e).__name__}: {e}")
        return None


#: How long reconciliation watches the cache for an outcome-unknown eviction before asking the API.
RECONCILE_WINDOW_SECONDS = 5.0

Outcome = Literal["evicted", "not evicted", "unknown"]


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What became of an eviction whose answer was lost, and what shows it."""

    record: EvictionRecord
    outcome: Outcome
    evidence: str


def _verdict(record: EvictionRecord, pod: Pod | None) -> tuple[Outcome, str] | None:
    """What the pod as now seen says about the eviction; None while it proves nothing yet."""
    if pod is None:
        return "evicted", "the pod is gone"
    if record.uid and pod.metadata.uid != record.uid:
        return "evicted", "the pod was replaced (another uid)"
    if pod.metadata.deletion_timestamp is not None:
        return "evicted", "the pod is terminating (deletionTimestamp set)"
    return None


async def reconcile(
    records: Sequence[EvictionRecord],
    cached_pod: Callable[[str, str], Pod | None],
    api: client.ApiClient | None,
    *,
    window: float = RECONCILE_WINDOW_SECONDS,
    stop: asyncio.Event | None = None,
    ledger: EvictionLedger | None = None,
    poll: float = 0.2,
) -> list[Reconciled]:
    """Tell what became of evictions with an unknown outcome.

    The cache is watched for up to ``window`` seconds: the pod gone, replaced, or with a
    deletionTimestamp means the eviction happened. A pod still there unchanged is then read once
    from the API (a stalled watch would keep showing it running): unchanged there too, it was not
    evicted, and ``ledger`` forgets it so a later cycle may evict it. A failed read leaves the
    outcome unknown (and the pod remembered, so it is not evicted again while that lasts).
    """
    done: list[Reconciled] = []
    pending = list(records)
    deadline = time.monotonic() + window
    while pending:
        still = []
        for r in pending:
            verdict = _verdict(r, cached_pod(r.namespace, r.name))
            if verdict is None:
                still.append(r)
            else:
                done.append(Reconciled(r, *verdict))
        pending = still
        if not pending or time.monotonic() >= deadline or (stop is not None and stop.is_set()):
            break
        await asyncio.sleep(poll)
    for r in pending:
        if api is None or (stop is not None and stop.is_set()):
            done.append(Reconciled(r, "unknown", "the pod still looks unchanged in the cache"))
            continue
        try:
            raw = await kube.request(
                api, "GET", f"/api/v1/namespaces/{r.namespace}/pods/{r.name}", timeout=10
            )
            meta = json.loads(raw).get("metadata") or {}
        except ApiError as e:
            if e.status == 404:
                done.append(Reconciled(r, "evicted", "the pod is gone"))
            else:
                done.append(Reconciled(r, "unknown", f"could not read the pod: {e}"))
            continue
        except Exception as e:  # the read is best effort; the outcome stays unknown
            done.append(Reconciled(r, "unknown", f"could not read the pod: {type(e).__name__}: {e}"))
            continue
        if r.uid and meta.get("uid") != r.uid:
            done.append(Reconciled(r, "evicted", "the pod was replaced (another uid)"))
        elif meta.get("deletionTimestamp"):
            done.append(Reconciled(r, "evicted", "the pod is terminating (deletionTimestamp set)"))
        else:
            done.append(Reconciled(r, "not evicted", f"the pod still runs unchanged after {window:.0f}s"))
            if ledger is not None:
                ledger.forget(r.uid)
    return done


#: The reasons of the Events on a Deployment that ``evictionPolicy.surge`` restarted (desched only).
SURGE_STARTED = "SurgeStarted"
SURGE_SUCCEEDED = "SurgeSucceeded"
SURGE_FAILED = "SurgeFailed"


def _deployment_ref(target: str) -> dict[str, str]:
    """``Deployment ns/name`` (an EvictionRecord's target) as an Event's ``regarding``."""
    namespace, _, name = target.removeprefix("Deployment ").partition("/")
    return {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": namespace, "name": name}


#: The reason of the Event on a pod whose eviction the evictionPolicy skipped (desched only).
EVICTION_SKIPPED = "EvictionSkipped"
#: reason of the Warning Event on desched's own pod when a changed policy does not load
POLICY_RELOAD_FAILED = "PolicyReloadFailed"
#: A pod skipped for the same reason cycle after cycle gets one EvictionSkipped Event per this
#: many seconds, not one per cycle (a cooldown over many pods would flood the apiserver).
SKIP_EVENT_EVERY_SECONDS = 1800.0


class EventRecorder:
    """events.k8s.io/v1 Events on evicted pods, as upstream: reason = plugin, action Descheduled;
    ``EvictionFailed`` (with ``evictionFailureEventNotification``) and ``EvictionSkipped`` (an
    evictionPolicy rule skipped it) for the evictions that did not happen."""

    def __init__(self, api: client.ApiClient, loop: asyncio.AbstractEventLoop, *, failures: bool) -> None:
        self.api = api
        self.loop = loop
        self.failures = failures
        self.instance = socket.gethostname()
        self._tasks: set[concurrent.futures.Future[None]] = set()
        #: (pod uid or key, skip reason) -> when its last EvictionSkipped Event was sent (monotonic)
        self._skip_told: dict[tuple[str, str], float] = {}

    def observe(self, record: EvictionRecord) -> None:
        if record.result is EvictResult.EVICTED and record.method == "surge":
            self._emit(
                record,
                "Normal",
                record.plugin,
                f"pod surged from {record.node} node by {REQUESTED_BY}: rollout restart of "
                f"{record.target} (make before break)",
            )
            self._emit(
                record,
                "Normal",
                SURGE_STARTED,
                f"rollout restart by {REQUESTED_BY} to move pod {record.namespace}/{record.name} off "
                f"node {record.node} ({record.profile}/{record.plugin}: {record.reason})"[:1024],
                regarding=_deployment_ref(record.target),
            )
        elif record.result is EvictResult.EVICTED:
            self._emit(
                record, "Normal", record.plugin, f"pod eviction from {record.node} node by {REQUESTED_BY}"
            )
        elif record.result.skipped:  # desched's evictionPolicy: told, not every cycle
            now = time.monotonic()
            key = (record.uid or f"{record.namespace}/{record.name}", record.skip_reason)
            told = self._skip_told.get(key)
            if told is not None and now - told < SKIP_EVENT_EVERY_SECONDS:
                return
            if len(self._skip_told) > 100_000:  # (forget the oldest half: a bound, not a cache)
                for k in sorted(self._skip_told, key=self._skip_told.__getitem__)[:50_000]:
                    del self._skip_told[k]
            self._skip_told[key] = now
            self._emit(
                record,
                "Normal",
                EVICTION_SKIPPED,
                f"pod eviction from {record.node} node by {REQUESTED_BY} skipped ({record.skip_reason}): "
                f"{record.error}",
            )
        elif self.failures and record.result not in (
            EvictResult.FILTERED,
            EvictResult.ALREADY_EVICTED,
            EvictResult.UNKNOWN,  # its event waits for reconciliation (observe_reconciled)
            EvictResult.BACKGROUND,  # not a failure; upstream records no event for it
        ):
            why = record.error or record.result.value
            self._emit(
                record,
                "Warning",
                "EvictionFailed",
                f"pod eviction from {record.node} node by {REQUESTED_BY} failed: {why}",
            )

    def observe_reconciled(self, done: Reconciled) -> None:
        """An outcome-unknown eviction, once known: the event it would have had from the start."""
        record = done.record
        if done.outcome == "evicted":
            self._emit(
                record, "Normal", record.plugin, f"pod eviction from {record.node} node by {REQUESTED_BY}"
            )
        elif self.failures:
            self._emit(
                record,
                "Warning",
                "EvictionFailed",
                f"pod eviction from {record.node} node by {REQUESTED_BY} failed: {record.error} "
                f"(outcome {'unknown' if done.outcome == 'unknown' else 'reconciled: not evicted'}: "
                f"{done.evidence})",
            )

    def observe_surge(self, done: surging.Followed) -> None:
        """A surge's rollout ended: an Event on the Deployment (and, if it failed, on the pod)."""
        s = done.surge
        regarding = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "namespace": s.namespace,
            "name": s.deployment,
        }
        what = f"surge of pod {s.namespace}/{s.pod} off node {s.node} by {REQUESTED_BY}"
        if done.succeeded:
            note = f"{what} done in {done.seconds:.0f}s: {done.detail}"
            self._emit_to(s.namespace, s.deployment, regarding, "Normal", SURGE_SUCCEEDED, note)
        else:
            note = f"{what} failed: {done.detail}"
            self._emit_to(s.namespace, s.deployment, regarding, "Warning", SURGE_FAILED, note)
            pod = {"apiVersion": "v1", "kind": "Pod", "namespace": s.namespace, "name": s.pod}
            self._emit_to(s.namespace, s.pod, pod, "Warning", SURGE_FAILED, note)

    def observe_policy_reload_failed(self, regarding: dict[str, str], note: str) -> None:
        """A new policy did not load (the running one stays): a Warning on desched's own pod (or
        its Lease), ``regarding`` names it."""
        namespace, name = regarding["namespace"], regarding["name"]
        self._emit_to(
            namespace, name, regarding, "Warning", POLICY_RELOAD_FAILED, note, action="ReloadPolicy"
        )

    def _emit(
        self,
        record: EvictionRecord,
        type_: str,
        reason: str,
        note: str,
        *,
        regarding: dict[str, str] | None = None,
    ) -> None:
        if regarding is None:
            regarding = {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": record.namespace,
                "name": record.name,
            }
        self._emit_to(record.namespace, regarding["name"], regarding, type_, reason, note)

    def _emit_to(
        self,
        namespace: str,
        name: str,
        regarding: dict[str, str],
        type_: str,
        reason: str,
        note: str,
        *,
        action: str = "Descheduled",
    ) -> None:
        now = datetime.now(UTC)
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            # named as client-go's recorder names events: <object>.<unix nanos in hex>
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
            "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "reportingController": REPORTING_CONTROLLER,
            "reportingInstance": f"{REPORTING_CONTROLLER}-{self.instance}"[:128],
            "action": action,
            "reason": reason,
            "note": note[:1024],
            "type": type_,
            "regarding": regarding,
        }
        future = asyncio.run_coroutine_threadsafe(self._post(namespace, body), self.loop)
        self._tasks.add(future)
        future.add_done_callback(self._tasks.discard)

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout`` seconds) for the Events still being posted: a one-shot run
        must not close its client under them."""
        pending = [asyncio.wrap_future(f) for f in self._tasks if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)

    async def _post(self, namespace: str, body: dict[str, Any]) -> None:
        try:
            await kube.request(
                self.api, "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=body
            )
        except Exception as e:  # events are best effort, never a reason to stop evicting
            log.warning(
                "could not record event %s for %s/%s: %s",
                body["reason"],
                namespace,
                body["regarding"]["name"],
                e,
            )
