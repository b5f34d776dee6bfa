"""``evictionPolicy.webhook``: an external service approves each eviction.

Before an eviction that passed every other check (filters, limits, the evictionPolicy's rules,
the settling guard), the backend POSTs an ``EvictionReview`` to the profile's webhook::

    {"apiVersion": "desched.io/v1alpha1", "kind": "EvictionReview",
     "request": {"uid": "<new uuid>",
                 "pod": {"namespace": ..., "name": ..., "uid": ..., "labels": {...},
                         "owner": {"kind": "ReplicaSet", "name": ...} or null},
                 "node": ..., "profile": ..., "plugin": ..., "reason": ..., "dryRun": false}}

and expects, as Kubernetes admission webhooks answer, a 2xx with::

    {"apiVersion": "desched.io/v1alpha1", "kind": "EvictionReview",
     "response": {"uid": "<the request's uid>", "allowed": true, "reason": "..."}}

``allowed: false`` is a skip (reason ``webhook_denied``). No usable answer (a timeout, a refused
connection, a TLS error, a non-2xx status, a body that is not that JSON, a wrong uid) is an error:
counted in :attr:`EvictionWebhooks.errors`, logged, and decided by ``failurePolicy``: ``Ignore``
lets the eviction go on, ``Fail`` skips it (reason ``webhook_error``).

A ``caFile`` is read again when it changes (its inode, size or modification time, looked at before
each request: a Secret volume's certificates are rotated in place, by cert-manager or by hand, and a
run must not keep trusting the old CA until it restarts).

Each request is bounded by the webhook's ``timeout`` and at most :data:`MAX_IN_FLIGHT` run at once:
a slow webhook slows the cycle (each eviction waits at most ``timeout``); the cycle's limits are
checked before the webhook is asked, so they hold whatever it answers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import ssl
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp

from desched.api.evictionpolicy import FailurePolicy, Webhook
from desched.framework.evictor import EvictAnswer, EvictionBackend, EvictionRequest
from desched.framework.safety import Skip, SkipReason
from desched.k8s.objects import Pod
from desched.k8s.pods import controller_ref

log = logging.getLogger(__name__)

API_VERSION = "desched.io/v1alpha1"
KIND = "EvictionReview"
#: requests to webhooks in flight at once (the evictor asks one at a time; this bounds the rest)
MAX_IN_FLIGHT = 4
#: the most of an answer read (an answer is a few hundred bytes)
MAX_ANSWER_BYTES = 64 * 1024


class WebhookError(Exception):
    """No usable answer from the webhook (the message says why, in one line)."""


def review_request(pod: Pod, request: EvictionRequest, *, dry_run: bool, uid: str) -> dict[str, Any]:
    """The ``EvictionReview`` sent for ``pod``."""
    owner = controller_ref(pod)
    meta = pod.metadata
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "request": {
            "uid": uid,
            "pod": {
                "namespace": meta.namespace,
                "name": meta.name,
                "uid": meta.uid,
                "labels": dict(meta.labels or {}),
                "owner": {"kind": owner.kind, "name": owner.name} if owner is not None else None,
            },
            "node": pod.spec.node_name,
            "profile": request.profile,
            "plugin": request.plugin,
            "reason": request.reason,
            "dryRun": dry_run,
        },
    }


def parse_answer(body: bytes, uid: str) -> tuple[bool, str]:
    """(allowed, reason) from a webhook's answer; a :class:`WebhookError` when it is not usable."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise WebhookError(f"answer is not JSON: {body[:80]!r}") from None
    response = doc.get("response") if isinstance(doc, dict) else None
    if not isinstance(response, dict):
        raise WebhookError("answer has no 'response' object")
    if response.get("uid") != uid:
        raise WebhookError(f"answer's response.uid {response.get('uid')!r} is not the request's {uid!r}")
    allowed = response.get("allowed")
    if not isinstance(allowed, bool):
        raise WebhookError(f"answer's response.allowed must be true or false, got {allowed!r}")
    reason = response.get("reason", "")
    if not isinstance(reason, str):
        raise WebhookError(f"answer's response.reason must be a string, got {reason!r}")
    return allowed, reason


def _ssl_context(webhook: Webhook) -> ssl.SSLContext:
    if webhook.ca_pem is not None:
        return ssl.create_default_context(cadata=webhook.ca_pem)
    if webhook.ca_file is not None:
        return ssl.create_default_context(cafile=webhook.ca_file)
    return ssl.create_default_context()


class EvictionWebhooks:
    """Asks the profiles' webhooks; created on, and its requests run by, the event loop ``loop``.

    :meth:`review` is called from the cycle's worker thread and waits for the loop's answer.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        max_in_flight: int = MAX_IN_FLIGHT,
        on_error: Callable[[str, str], None] | None = None,
    ) -> None:
        self.loop = loop
        #: hears of each request without a usable answer: (profile, failurePolicy)
        self.on_error = on_error
        self._max_in_flight = max_in_flight
        self._gate: asyncio.Semaphore | None = None
        self._session: aiohttp.ClientSession | None = None
        #: each webhook's TLS context, with the caFile's stamp it was made from (None: no caFile)
        self._contexts: dict[Webhook, tuple[tuple[int, ...] | None, ssl.SSLContext]] = {}
        #: requests without a usable answer, by profile (``desched_eviction_webhook_errors_total``)
        self.errors: dict[str, int] = {}
        #: evictions denied, by profile
        self.denied: dict[str, int] = {}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def review(self, pod: Pod, request: EvictionRequest, *, dry_run: bool) -> Skip | None:
        """From a worker thread: a :class:`Skip` when the eviction must not go on, else None."""
        webhook = request.webhook
        if webhook is None:
            return None
        future = asyncio.run_coroutine_threadsafe(self.review_async(pod, request, dry_run=dry_run), self.loop)
        try:
            # the coroutine keeps its own timeout; this wait only guards against a stuck loop
            return future.result(webhook.timeout.total_seconds() + 5.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return self._failed(pod, request, webhook, "no answer: the event loop is stuck")

    async def review_async(self, pod: Pod, request: EvictionRequest, *, dry_run: bool) -> Skip | None:
        webhook = request.webhook
        if webhook is None:
            return None
        uid = str(uuid.uuid4())
        try:
            allowed, reason = await self._ask(
                webhook, review_request(pod, request, dry_run=dry_run, uid=uid), uid
            )
        except WebhookError as e:
            return self._failed(pod, request, webhook, str(e))
        if allowed:
            return None
        self.denied[request.profile] = self.denied.get(request.profile, 0) + 1
        # logged by the evictor, as every skip: "eviction skipped" (--v=4), reason webhook_denied
        return Skip(
            SkipReason.WEBHOOK_DENIED, f"denied by the eviction webhook: {reason or 'no reason given'}"
        )

    def _context(self, webhook: Webhook) -> ssl.SSLContext:
        """The webhook's TLS context, made again when its caFile changed since it was made (a
        caFile that cannot be read again leaves the context made before in use, and is tried
        again at the next request)."""
        cached = self._contexts.get(webhook)
        try:
            stamp: tuple[int, ...] | None = None
            if webhook.ca_file is not None and webhook.ca_pem is None:
                st = os.stat(webhook.ca_file)
                stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            ctx = _ssl_context(webhook)
        except (OSError, ssl.SSLError) as e:
            if cached is not None:
                log.warning(
                    "eviction webhook %s: cannot read caFile %s again (%s); "
                    "the certificates read before stay in use",
                    webhook.url,
                    webhook.ca_file,
                    e,
                )
                return cached[1]
            raise WebhookError(f"cannot load the webhook's CA certificates: {e}") from None
        if cached is not None:
            log.info(
                "eviction webhook %s: caFile %s changed, its certificates read again",
                webhook.url,
                webhook.ca_file,
            )
        self._contexts[webhook] = (stamp, ctx)
        return ctx

    async def _ask(self, webhook: Webhook, body: dict[str, Any], uid: str) -> tuple[bool, str]:
        if self._gate is None:
            self._gate = asyncio.Semaphore(self._max_in_flight)
        if self._session is None:
            self._session = aiohttp.ClientSession()
        tls: ssl.SSLContext | bool = False
        if webhook.url.startswith("https://"):
            tls = self._context(webhook)
        timeout = webhook.timeout.total_seconds()
        try:
            async with (
                asyncio.timeout(timeout),
                self._gate,
                self._session.post(
                    webhook.url,
                    json=body,
                    ssl=tls,
                    allow_redirects=False,
                    timeout=aiohttp.ClientTimeout(total=timeout),
                ) as resp,
            ):
                data = await resp.content.read(MAX_ANSWER_BYTES)
                if not 200 <= resp.status < 300:
                    raise WebhookError(f"answered HTTP {resp.status}")
        except TimeoutError:
            raise WebhookError(f"no answer within {timeout:g}s") from None
        except aiohttp.ClientSSLError as e:
            raise WebhookError(f"TLS error: {e}") from None
        except (aiohttp.ClientError, OSError) as e:
            raise WebhookError(f"request failed: {type(e).__name__}: {e}") from None
        return parse_answer(data, uid)

    def _failed(self, pod: Pod, request: EvictionRequest, webhook: Webhook, why: str) -> Skip | None:
        self.errors[request.profile] = self.errors.get(request.profile, 0) + 1
        if self.on_error is not None:
            self.on_error(request.profile, webhook.failure_policy.value)
        fail = webhook.failure_policy is FailurePolicy.FAIL
        log.warning(
            "eviction webhook %s gave no usable answer for pod %s/%s (%s): %s",
            webhook.url,
            pod.metadata.namespace,
            pod.metadata.name,
            "failurePolicy Fail: skipped" if fail else "failurePolicy Ignore: allowed",
            why,
        )
        if fail:
            return Skip(SkipReason.WEBHOOK_ERROR, f"the eviction webhook gave no usable answer: {why}")
        return None


class WebhookGate:
    """An eviction backend in front of ``inner``: asks the request's webhook first (``dryRun:
    true``) and passes on only what it does not skip, as the live backend asks it before the
    eviction API (``desched simulate --webhook``: in front of the simulated eviction API, so a
    denied pod spends no disruption budget)."""

    def __init__(self, webhooks: EvictionWebhooks, inner: EvictionBackend) -> None:
        self.webhooks = webhooks
        self.inner = inner

    def evict(self, pod: Pod, request: EvictionRequest) -> EvictAnswer:
        skip = self.webhooks.review(pod, request, dry_run=True)
        if skip is not None:
            return skip
        return self.inner.evict(pod, request)


@contextlib.contextmanager
def webhooks_on_a_thread(**kwargs: Any) -> Iterator[EvictionWebhooks]:
    """:class:`EvictionWebhooks` for a caller without an event loop (``desched simulate``): its
    requests run on a loop in a daemon thread, stopped (the session closed) on exit."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="eviction-webhooks", daemon=True)
    thread.start()
    webhooks = EvictionWebhooks(loop, **kwargs)
    try:
        yield webhooks
    finally:
        try:
            asyncio.run_coroutine_threadsafe(webhooks.close(), loop).result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
