"""A bounded, stop-aware start, and what desched says when the API server fails it.

Start-up (``run``, ``extender`` on a live cluster, ``snapshot``) is: read the kubeconfig (an exec
credential plugin runs here), ask the API server its version (a skew warning, as upstream) and,
for ``run``, whether it serves the ``pods/eviction`` subresource (policy/v1), then fill the
cache. All of it runs under :meth:`ConnectionMonitor.start`, which ends it with one
:class:`~desched.errors.UserError` line (exit code 2) when

- no answer has come from the API server for ``--client-connection-timeout`` (30 s by default;
  the clock restarts at every good answer, so a large cluster's long initial list is not cut
  short while its pages keep coming),
- a failure cannot heal by retrying (401, 403, a certificate the kubeconfig does not trust), at
  once rather than at the bound,
- SIGTERM or SIGINT arrives (at once).

Transient failures (refused, reset, timeouts, 429, 5xx, an answer that is not the Kubernetes
API) are retried with backoff until the bound. After the start, the same monitor classifies the
live failures of the watches and logs them at most once per failure class per interval
(:data:`LIVE_LOG_INTERVAL`), with a count, instead of a line (or a traceback) per retry.

Hand-written: no library classifies aiohttp/kubernetes_asyncio failures into operator-facing
causes; the retry and rate-limited logging are a few lines each.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import random
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import msgspec
from kubernetes_asyncio import client

from desched.errors import UserError
from desched.kube.client import ApiError, ClientSource, ExecCredentials, load_client_config, request
from desched.kube.loop import ending_processes_on_failure
from desched.logs import V2

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Default of ``--client-connection-timeout``.
DEFAULT_CONNECT_TIMEOUT = 30.0
#: A failure class is logged at most once per this many seconds (with the count in between).
LIVE_LOG_INTERVAL = 10.0
#: During start-up, retries are logged only after this long (so a short outage prints nothing but
#: the final line), then at most once per LIVE_LOG_INTERVAL.
START_QUIET_SECONDS = 10.0
#: The Kubernetes minor version desched's behaviour follows (upstream descheduler v0.36 = 1.36).
KUBERNETES_MINOR = 36
#: Upstream warns when |descheduler minor - server minor| is more than this.
MAX_MINOR_SKEW = 3

_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    406: "Not Acceptable",
    409: "Conflict",
    410: "Gone",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
#: What only RemovePodsViolatingTopologySpreadConstraint's ``defaultConstraints`` (and ``snapshot
#: --workloads``) read: the resources of ``desched.cluster.live_source.WORKLOAD_KINDS``, granted by
#: the kustomize Component deploy/kubernetes/workloads, not by the base ClusterRole.
WORKLOAD_RESOURCES = frozenset(
    {"services", "replicationcontrollers", "replicasets.apps", "statefulsets.apps"}
)
_FORBIDDEN = re.compile(
    r'User "(?P<user>[^"]*)" cannot (?P<verb>\S+) resource "(?P<resource>[^"]*)"'
    r'(?: in API group "(?P<group>[^"]*)")?(?P<scope> at the cluster scope| in the namespace "[^"]*")?'
)


@dataclass(frozen=True)
class Failure:
    """One failed request, said for an operator."""

    key: str  # failure class: refused, timeout, tls, certificate, http-401, http-5xx, garbage, ...
    message: str  # one line naming the server and the cause
    permanent: bool  # retrying cannot help (401, 403, untrusted certificate)


def http_status(exc: BaseException) -> int | None:
    if isinstance(exc, ApiError):
        return exc.status
    if isinstance(exc, client.ApiException):
        return int(exc.status or 0) or None
    return None


def describe(exc: BaseException, source: ClientSource, what: str = "") -> Failure:
    """Classify a failed request against ``source``'s server into a :class:`Failure`."""
    server = source.server
    status = http_status(exc)
    if status is not None:
        reason = _REASONS.get(status, "")
        head = f"{status} {reason}".strip()
        if isinstance(exc, ApiError):
            detail = exc.message
        else:
            detail = str(getattr(exc, "reason", "") or "")
        detail = detail.strip()
        detail = detail.splitlines()[0][:300] if detail else ""
        if status == 401:
            who = f" (user {source.user!r})" if source.user else ""
            return Failure(
                "http-401",
                f"{head} from the API server at {server}: the credentials in {source.origin}{who} "
                "were rejected",
                True,
            )
        if status == 403:
            m = _FORBIDDEN.search(detail)
            hint = "bind the ClusterRole in deploy/kubernetes/base/rbac.yaml to this identity"
            if m:
                group = m.group("group")
                resource = m.group("resource") + (f".{group}" if group else "")
                scope = (m.group("scope") or "").strip()
                why = f"{m.group('user')} cannot {m.group('verb')} {resource} {scope}".rstrip()
                if resource in WORKLOAD_RESOURCES:
                    hint = (
                        "defaultConstraints reads Services and workload controllers: add the kustomize "
                        "component deploy/kubernetes/workloads to your overlay, or bind the ClusterRole "
                        "in its rbac.yaml to this identity"
                    )
            else:
                why = detail or f"{what} is not allowed"
            return Failure("http-403", f"{head} from the API server at {server}: {why} (RBAC: {hint})", True)
        if status == 404:
            return Failure(
                "http-404",
                f"{head} from {server} for {what or 'a request'}: is this the Kubernetes API server "
                "(check the cluster's server URL in the kubeconfig)?",
                False,
            )
        key = "http-5xx" if status >= 500 else f"http-{status}"
        said = f"the API server at {server} answered {head}" + (f": {detail}" if detail else "")
        return Failure(key, said, False)
    if isinstance(exc, (ssl.SSLCertVerificationError, aiohttp.ClientConnectorCertificateError)):
        why = getattr(exc, "verify_message", "") or str(exc)
        cert_error = getattr(exc, "certificate_error", None)
        if cert_error is not None:
            why = getattr(cert_error, "verify_message", "") or str(cert_error)
        return Failure(
            "certificate",
            f"the API server's certificate at {server} is not trusted: {why} (check the cluster's "
            f"certificate-authority in {source.origin})",
            True,
        )
    if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):
        text = str(getattr(exc, "os_error", None) or exc)
        plain = "WRONG_VERSION_NUMBER" in text or "record layer" in text
        hint = " (is it a plain HTTP server?)" if plain else ""
        short = re.sub(r"\s*\(_ssl\.c:\d+\)", "", text.split("] ", 1)[-1])[:200]
        return Failure("tls", f"TLS handshake with {server} failed: {short}{hint}", False)
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        if isinstance(os_error, ConnectionRefusedError) or os_error.errno == errno.ECONNREFUSED:
            return Failure("refused", f"cannot reach the API server at {server}: connection refused", False)
        if isinstance(os_error, TimeoutError):
            return Failure("timeout", f"cannot reach the API server at {server}: connecting timed out", False)
        text = str(os_error.strerror or os_error)
        return Failure("unreachable", f"cannot reach the API server at {server}: {text}", False)
    if isinstance(exc, TimeoutError):
        return Failure(
            "timeout", f"no answer from the API server at {server}" + (f" to {what}" if what else ""), False
        )
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return Failure(
            "disconnected", f"the API server at {server} closed the connection without an answer", False
        )
    if isinstance(exc, aiohttp.ClientPayloadError):
        return Failure("cut", f"the connection to the API server at {server} was cut mid-answer", False)
    if isinstance(exc, aiohttp.ClientResponseError):
        text = str(getattr(exc, "message", "") or exc or type(exc).__name__).splitlines()[0][:200]
        return Failure(
            "garbage",
            f"the server at {server} did not answer as a Kubernetes API server: invalid HTTP ({text})",
            False,
        )
    if isinstance(exc, (msgspec.DecodeError, msgspec.ValidationError, ValueError, UnicodeDecodeError)):
        text = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return Failure(
            "garbage",
            f"the server at {server} did not answer as a Kubernetes API server"
            + (f" to {what}" if what else "")
            + f": {text}",
            False,
        )
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError | OSError):
        text = str(getattr(exc, "strerror", None) or exc) or type(exc).__name__
        return Failure("unreachable", f"connection to the API server at {server} failed: {text}", False)
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return Failure(
        type(exc).__name__,
        f"request to the API server at {server} failed: {type(exc).__name__}" + (f": {text}" if text else ""),
        False,
    )


class StartupFailed(Exception):
    """A permanent failure while starting (raised inside the start task)."""

    def __init__(self, failure: Failure) -> None:
        self.failure = failure
        super().__init__(failure.message)


class ConnectionMonitor:
    """Progress and failures of every request to one API server: bounds the start, logs the rest.

    Informers call :meth:`progress` on each good answer and :meth:`failure` on each failed one.
    """

    def __init__(
        self,
        source: ClientSource,
        *,
        bound: float = DEFAULT_CONNECT_TIMEOUT,
        log_interval: float = LIVE_LOG_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        silence: str = "",
    ) -> None:
        self.source = source
        #: what to say when the bound passes with neither an answer nor a failure
        self.silence = silence or (
            f"no answer from the API server at {source.server} within {bound:g}s "
            "(it accepts connections but does not respond; --client-connection-timeout)"
        )
        self.bound = bound
        self.log_interval = log_interval
        self.clock = clock
        self.starting = False
        self.quiet = False  # a start that failed: its one line says it all, whatever still runs
        self.started_at = clock()
        self.last_progress = clock()
        self.last: Failure | None = None
        self.permanent: Failure | None = None
        self._changed = asyncio.Event()
        self._answered = asyncio.Event()
        self._logged: dict[str, float] = {}  # failure class -> when last logged
        self._suppressed: dict[str, int] = {}

    # ------------------------------------------------------------------ reports

    def progress(self) -> None:
        self.last_progress = self.clock()
        self._changed.set()
        self._answered.set()  # wakes whoever waits on the current event
        self._answered = asyncio.Event()

    def answered(self) -> asyncio.Event:
        """An event set at the next good answer from the server (informers end a backoff on it)."""
        return self._answered

    def failure(self, what: str, exc: BaseException) -> Failure:
        f = describe(exc, self.source, what)
        self.last = f
        if f.permanent and self.starting:
            self.permanent = f
        self._changed.set()
        self._log(f, what)
        return f

    def _log(self, f: Failure, what: str) -> None:
        now = self.clock()
        if self.quiet or (self.starting and now - self.started_at < START_QUIET_SECONDS):
            return  # the start's outcome says it; a short outage stays quiet
        last = self._logged.get(f.key)
        if last is not None and now - last < self.log_interval:
            self._suppressed[f.key] = self._suppressed.get(f.key, 0) + 1
            return
        more = self._suppressed.pop(f.key, 0)
        self._logged[f.key] = now
        tail = f" ({more} more like it in the last {now - last:.0f}s)" if more and last is not None else ""
        if self.starting:
            log.warning(
                "%s; retrying (%.0fs without an answer, giving up at %.0fs)%s",
                f.message,
                now - self.last_progress,
                self.bound,
                tail,
            )
        else:
            log.warning("%s%s; retrying with backoff%s", what + ": " if what else "", f.message, tail)

    # ------------------------------------------------------------------ the bounded start

    async def start(self, work: Coroutine[Any, Any, T], stop: asyncio.Event, signals: list[str]) -> T:
        """Run ``work`` (the start-up) under the bound; stop-aware; failures as one UserError."""
        self.starting = True
        self.started_at = self.last_progress = self.clock()
        task = asyncio.ensure_future(work)
        stopper = asyncio.ensure_future(stop.wait())
        succeeded = False
        try:
            while True:
                self._changed.clear()
                changed = asyncio.ensure_future(self._changed.wait())
                remaining = self.last_progress + self.bound - self.clock()
                try:
                    await asyncio.wait(
                        {task, stopper, changed},
                        timeout=max(0.0, remaining),
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                finally:
                    changed.cancel()
                if task.done():
                    exc = task.exception()
                    if isinstance(exc, StartupFailed):
                        raise UserError("", exc.failure.message) from None
                    result = task.result()
                    succeeded = True
                    return result
                if stop.is_set():
                    sig = signals[-1] if signals else "a stop request"
                    cause = f"; last: {self.last.message}" if self.last is not None else ""
                    raise UserError(
                        "",
                        f"stopped by {sig} during start-up, {self.clock() - self.started_at:.1f}s after "
                        f"connecting to {self.source.server} began{cause}",
                    )
                if self.permanent is not None:
                    raise UserError("", self.permanent.message)
                if self.clock() >= self.last_progress + self.bound:
                    if self.last is not None:
                        raise UserError("", f"{self.last.message} (gave up after {self.bound:g}s)")
                    raise UserError("", self.silence)
        finally:
            self.starting = False
            self.quiet = not succeeded
            stopper.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def retry(self, what: str, op: Callable[[float], Awaitable[T]]) -> T:
        """``op(timeout)`` until it succeeds; a permanent failure raises :class:`StartupFailed`.

        Meant to run inside :meth:`start`, which bounds it.
        """
        backoff = 0.2
        while True:
            timeout = max(1.0, self.last_progress + self.bound - self.clock())
            try:
                result = await op(timeout)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                f = self.failure(what, e)
                if f.permanent:
                    raise StartupFailed(f) from None
                await asyncio.sleep(backoff * (1 + random.random() / 4))
                backoff = min(backoff * 2, 2.0)
                continue
            self.progress()
            return result


async def load_config_bounded(
    kubeconfig: str | None, context: str | None, bound: float, stop: asyncio.Event, signals: list[str]
) -> tuple[client.Configuration, ClientSource]:
    """:func:`~desched.kube.client.load_client_config` under the bound and the stop signals (an
    exec credential plugin runs there, and may hang)."""
    origin = kubeconfig or "the kubeconfig"
    probe = ConnectionMonitor(
        ClientSource("the API server", origin),
        bound=bound,
        silence=f"loading the credentials of {origin} did not finish within {bound:g}s (does its exec "
        "credential plugin wait for input?)",
    )
    # a credential plugin given up on (the bound, a signal) is ended, not left to outlive desched
    async with ending_processes_on_failure():
        return await probe.start(load_client_config(kubeconfig, context), stop, signals)


#: Longest sleep of :func:`keep_credentials_fresh` between looks at the token's expiry.
CREDENTIALS_TICK = 60.0
#: Shortest wait before running a credential plugin again (after a failure, the wait doubles to
#: CREDENTIALS_TICK; a plugin whose tokens are always due is not run in a tight loop).
CREDENTIALS_RETRY = 5.0


async def keep_credentials_fresh(source: ClientSource, bound: float, stop: asyncio.Event) -> None:
    """Until ``stop``: run the exec credential plugin of ``source`` again before its token expires
    (:class:`~desched.kube.client.ExecCredentials`), each run bounded by ``bound`` (a plugin that
    hangs is ended), a failure logged as a warning and retried with backoff, the old token kept
    meanwhile. Returns at once when there is nothing to refresh."""
    credentials = source.credentials
    if credentials is None:
        return
    who = f"user {source.user!r} in {source.origin}" if source.user else source.origin
    retry = CREDENTIALS_RETRY
    wait = credentials.due_in()
    while wait is not None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), min(wait, CREDENTIALS_TICK))
        if stop.is_set():
            return
        due = credentials.due_in()
        if due is None or due > 0:
            wait = due
            continue
        try:
            # a plugin that hangs past the bound, or is still running when desched stops, is ended
            async with ending_processes_on_failure():
                await asyncio.wait_for(credentials.refresh(), bound)
        except Exception as e:  # the plugin failed, hung or gave nothing usable: keep the old token
            reason = (
                f"did not finish within {bound:g}s"
                if isinstance(e, TimeoutError)
                else str(e) or type(e).__name__
            )
            log.warning(
                "refreshing the credentials of %s failed: %s (the token in use: %s; retrying in %gs)",
                who,
                " ".join(reason.split()),
                _expires_in(credentials),
                retry,
            )
            wait, retry = retry, min(2 * retry, CREDENTIALS_TICK)
            continue
        retry = CREDENTIALS_RETRY
        due = credentials.due_in()
        log.log(V2, "refreshed the credentials of %s", who)
        wait = None if due is None else max(due, CREDENTIALS_RETRY)


def _expires_in(credentials: ExecCredentials) -> str:
    left = credentials.expires_in()
    if left is None:
        return "expiry unknown"
    return f"expires in {left:.0f}s" if left > 0 else f"expired {-left:.0f}s ago"


# --------------------------------------------------------------------------- discovery


class _Version(msgspec.Struct, rename="camel"):
    major: str = ""
    minor: str = ""
    git_version: str = ""


class _Resource(msgspec.Struct):
    name: str
    kind: str = ""
    group: str = ""
    version: str = ""


class _ResourceList(msgspec.Struct, rename="camel"):
    group_version: str = ""
    resources: list[_Resource] = msgspec.field(default_factory=list)


def skew_warning(version: _Version) -> str | None:
    """Upstream's check: warn when the server's minor differs from ours by more than 3."""
    digits = re.match(r"\d+", version.minor or "")
    if version.major != "1" or digits is None:
        return (
            "cannot tell the Kubernetes version of the API server "
            f"(major {version.major!r}, minor {version.minor!r})"
        )
    minor = int(digits.group())
    if abs(minor - KUBERNETES_MINOR) > MAX_MINOR_SKEW:
        low, high = KUBERNETES_MINOR - MAX_MINOR_SKEW, KUBERNETES_MINOR + MAX_MINOR_SKEW
        return (
            f"the API server runs Kubernetes {version.git_version or f'1.{minor}'}; desched follows "
            f"Kubernetes 1.{KUBERNETES_MINOR} (as descheduler v0.{KUBERNETES_MINOR}) and supports 1.{low} to "
            f"1.{high}: behaviour may differ"
        )
    return None


async def discover(api: client.ApiClient, monitor: ConnectionMonitor, *, need_eviction: bool) -> str:
    """Ask the server its version (warn on skew) and, with ``need_eviction``, check that it serves
    ``pods/eviction`` in policy/v1. Returns the server's git version. Runs inside ``monitor.start``."""

    async def get(path: str, timeout: float) -> bytes:
        return await request(api, "GET", path, timeout=timeout)

    async def version(timeout: float) -> _Version:
        return msgspec.json.decode(await get("/version", timeout), type=_Version)

    server_version = await monitor.retry("GET /version", version)
    warning = skew_warning(server_version)
    if warning:
        log.warning("%s", warning)
    if need_eviction:

        async def core(timeout: float) -> _ResourceList:
            return msgspec.json.decode(await get("/api/v1", timeout), type=_ResourceList)

        resources = await monitor.retry("GET /api/v1", core)
        served = (("policy", "v1"), ("", ""))
        if not any(
            r.name == "pods/eviction" and r.kind == "Eviction" and (r.group, r.version) in served
            for r in resources.resources
        ):
            raise UserError(
                "",
                f"the API server at {monitor.source.server} does not serve the pods/eviction subresource "
                "in policy/v1 (Kubernetes 1.22 or later does): desched evicts only through it",
            )
    return server_version.git_version
