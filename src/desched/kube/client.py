"""Connecting to a cluster: kubeconfig (with contexts, exec and token auth, TLS) or in-cluster config.

kubernetes_asyncio does the transport and auth; desched never uses its models for pods or nodes
(they cost ~20x the memory of the slim records): lists and watches are read as raw bytes.

Where the kubeconfig comes from, as kubectl decides (client-go's ``clientcmd`` loading rules):
``--kubeconfig FILE`` is that one file; otherwise ``$KUBECONFIG`` is a list of files separated by
``os.pathsep`` (``:``), merged: for clusters, users and contexts the first file that names an
entry wins, ``current-context`` comes from the first file that sets it, and files that do not exist
are skipped; otherwise in-cluster config; otherwise ``~/.kube/config``. kubernetes_asyncio merges
lists too, but lets the *last* file's ``current-context`` win and writes refreshed tokens back into
the files, so the merge rule is applied here on top of its merger (and nothing is written back).

Every request carries the User-Agent ``desched/<version> (<os>/<arch>) <git sha>`` (client-go's
shape), so audit logs and API Priority and Fairness can tell desched's requests apart.
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NoReturn

import yaml
from kubernetes_asyncio import client, config
from kubernetes_asyncio.config.kube_config import KubeConfigLoader, KubeConfigMerger

from desched import __version__
from desched.buildinfo import git_sha
from desched.errors import UserError
from desched.yamlload import yaml_documents

#: client-go's rest.Config defaults when QPS / Burst are 0 (k8s.io/client-go/rest: DefaultQPS, DefaultBurst).
DEFAULT_QPS = 5.0
DEFAULT_BURST = 10


@dataclass(frozen=True)
class ClientSource:
    """Where the connection settings came from, for messages: the server URL, the file(s), the user;
    and, for a user whose token comes from an exec credential plugin, how to run it again."""

    server: str
    origin: str
    user: str = ""
    credentials: ExecCredentials | None = field(default=None, compare=False, repr=False)


class ExecCredentials:
    """A kubeconfig user's exec credential plugin, run again when the token it gave is about to
    expire.

    kubernetes_asyncio runs the plugin once, when the kubeconfig is loaded, and keeps the token in
    the client configuration; a long-running ``desched run`` or ``extender`` would then be refused
    (401) once it expires (15 minutes for ``aws eks get-token``, an hour for GKE's plugin). The
    loader knows the plugin's ``expirationTimestamp`` and, asked again, runs the plugin only within
    :data:`REFRESH_AHEAD` of it (its own margin); the new token goes into the configuration, which
    every request reads its ``Authorization`` from. A plugin that gives no expiry is run once (client-go
    runs it again after a 401; desched does not), and a plugin that gives a client certificate instead
    of a token is not run again (the TLS context is made once).
    """

    #: How long before its expiry a token is replaced (kubernetes_asyncio's EXPIRY_SKEW_PREVENTION_DELAY).
    REFRESH_AHEAD = 300.0

    def __init__(self, loader: KubeConfigLoader, cfg: client.Configuration) -> None:
        self._loader = loader
        self._cfg = cfg

    def expires_in(self) -> float | None:
        """Seconds until the token in use expires (negative once it has), or None when the plugin
        gave no expiry (or no token)."""
        expiry: datetime | None = getattr(self._loader, "exec_plugin_expiry", None)
        if expiry is None or not getattr(self._loader, "token", None):
            return None
        return expiry.timestamp() - time.time()

    def due_in(self) -> float | None:
        """Seconds until the token should be replaced (0 when it should be now), or None."""
        left = self.expires_in()
        return None if left is None else max(left - self.REFRESH_AHEAD, 0.0)

    async def refresh(self) -> None:
        """Run the plugin again (if the token is due) and use the token it gives from now on."""
        await self._loader.load_from_exec_plugin()
        token = getattr(self._loader, "token", None)
        if token:
            self._cfg.api_key["BearerToken"] = token


def user_agent() -> str:
    """``desched/<version> (<os>/<arch>) <sha>``; client-go's is ``<command>/<version> (<os>/<arch>)
    kubernetes/<sha>``."""
    system = platform.system().lower() or "unknown"
    machine = platform.machine().lower()
    arches = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}
    arch = arches.get(machine, machine or "unknown")
    sha = git_sha()
    return f"desched/{__version__} ({system}/{arch})" + (f" {sha[:7]}" if sha else "")


def kubeconfig_paths(kubeconfig: str | None) -> list[str] | None:
    """The kubeconfig files to read, in order, or None for in-cluster / ~/.kube/config."""
    if kubeconfig:
        if not Path(kubeconfig).is_file():
            raise UserError("--kubeconfig", f"file {kubeconfig} does not exist")
        return [kubeconfig]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        listed = [p for p in env.split(os.pathsep) if p]
        seen: list[str] = []
        for p in listed:
            full = os.path.expanduser(p)
            if full not in seen and Path(full).is_file():
                seen.append(full)
        if not seen:
            raise UserError("$KUBECONFIG", f"none of the files in {env!r} exists")
        return seen
    return None


#: A kubeconfig is a few KB (embedded certificates are single strings): far inside this bound.
_KUBECONFIG_NODES = 100_000


def _kubeconfig_fail(path: str, reason: str) -> NoReturn:
    raise UserError("kubeconfig", f"cannot read {path}: {reason}")


def _merged_loader(paths: list[str], context: str | None) -> tuple[KubeConfigLoader, str]:
    origin = paths[0] if len(paths) == 1 else "$KUBECONFIG (" + os.pathsep.join(paths) + ")"
    for p in paths:
        try:
            text = Path(p).read_text()
            docs = yaml_documents(
                text, p, _kubeconfig_fail, max_nodes=_KUBECONFIG_NODES, max_depth=64, single=True
            )
            doc = next(docs, None)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise UserError("kubeconfig", f"cannot read {p}: {str(e).splitlines()[0]}") from None
        if not isinstance(doc, dict):
            raise UserError("kubeconfig", f"{p} is not a kubeconfig (expected a mapping)")
    logging.getLogger("kubernetes_asyncio").setLevel(logging.CRITICAL)  # we say what went wrong
    try:
        merger = KubeConfigMerger(os.pathsep.join(paths))
        merged = merger.config
        assert merged is not None
        current = ""
        for p in merger.paths:  # kubectl: the first file that sets current-context wins
            current = str(merger.config_files[p].get("current-context") or "")
            if current:
                break
        merged.value["current-context"] = current
        if not (context or current):
            raise UserError("kubeconfig", f"no current-context in {origin} and no --context given")
        loader = KubeConfigLoader(config_dict=merged, active_context=context, config_base_path=None)
    except config.ConfigException as e:
        raise UserError("kubeconfig", f"cannot use {origin}: {e}") from None
    except (AssertionError, KeyError, TypeError, AttributeError):
        name = context or current
        raise UserError(
            "kubeconfig", f"cannot use {origin}: context {name!r} or its cluster is not defined"
        ) from None
    return loader, origin


async def load_client_config(
    kubeconfig: str | None = None, context: str | None = None
) -> tuple[client.Configuration, ClientSource]:
    """Connection settings and where they came from; one-line :class:`UserError` when unusable.

    An exec credential plugin runs here: one that is missing or fails is a :class:`UserError`.
    """
    cfg = client.Configuration()
    paths = kubeconfig_paths(kubeconfig)
    if paths is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        except config.ConfigException as e:
            raise UserError("in-cluster config", str(e)) from None
        return cfg, ClientSource(str(cfg.host), "the in-cluster ServiceAccount token")
    if paths is None:
        default = Path("~/.kube/config").expanduser()
        if not default.is_file():
            raise UserError(
                "--kubeconfig",
                "no kubeconfig given, $KUBECONFIG unset, not running in a cluster, no ~/.kube/config",
            )
        paths = [str(default)]
    loader, origin = _merged_loader(paths, context)
    user = ""
    try:
        ctx = loader.current_context
        user = str(ctx["context"].get("user", "")) if ctx else ""
    except (TypeError, KeyError, AttributeError):
        pass
    try:
        await loader.load_and_set(cfg)
    except FileNotFoundError as e:
        raise UserError(
            "kubeconfig",
            f"the exec credential plugin {e.filename!r} of user {user!r} in {origin} was not found "
            "(is it installed and on $PATH?)",
        ) from None
    except PermissionError as e:
        raise UserError(
            "kubeconfig",
            f"the exec credential plugin {e.filename!r} of user {user!r} in {origin} cannot be run",
        ) from None
    except config.ConfigException as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError("kubeconfig", f"credentials of user {user!r} in {origin}: {first}") from None
    except (OSError, ValueError) as e:
        raise UserError("kubeconfig", f"cannot use {origin}: {e}") from None
    # the loader notes an expiry only for a token an exec credential plugin gave
    expiring = getattr(loader, "exec_plugin_expiry", None) is not None
    return cfg, ClientSource(str(cfg.host), origin, user, ExecCredentials(loader, cfg) if expiring else None)


def api_client(cfg: client.Configuration) -> client.ApiClient:
    api = client.ApiClient(configuration=cfg)
    api.user_agent = user_agent()
    return api


async def make_api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """An API client from ``kubeconfig`` (or $KUBECONFIG / in-cluster / ~/.kube/config)."""
    cfg, _ = await load_client_config(kubeconfig, context)
    return api_client(cfg)


def rate_limiter(qps: float, burst: int) -> RateLimiter | None:
    """client-go's rule: QPS 0 is 5 and Burst 0 is 10 (its defaults); a negative QPS is no limit."""
    if qps < 0:
        return None
    return RateLimiter(qps or DEFAULT_QPS, burst if burst > 0 else DEFAULT_BURST)


class RateLimiter:
    """A token bucket (client-go's QPS/burst): ``qps <= 0`` means no limit."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.capacity = max(1, burst) if qps > 0 else 0
        self.tokens = float(self.capacity)
        self.updated = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            while True:
                now = time.monotonic()
                self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.qps)
                self.updated = now
                if self.tokens >= 1:
                    self.tokens -= 1
                    return
                await asyncio.sleep((1 - self.tokens) / self.qps)


class ApiError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        self.message = message
        super().__init__(f"{status} {message}")


def status_message(body: bytes) -> str:
    """The Status message of an error answer, or the start of a body that is not one (a proxy's
    HTML page), on one line."""
    import json

    try:
        text = str(json.loads(body).get("message", ""))[:500] or body[:200].decode(errors="replace")
    except (TypeError, ValueError, AttributeError):
        text = body[:200].decode(errors="replace")
    return " ".join(text.split())


async def request(
    api: client.ApiClient,
    method: str,
    path: str,
    *,
    params: list[tuple[str, str]] | None = None,
    body: object | None = None,
    timeout: float | None = 60,
    content_type: str = "application/json",
) -> bytes:
    """One API request through the client's auth and TLS; the raw answer body, or ApiError."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    resp = await api.call_api(
        path,
        method,
        query_params=params or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
        _request_timeout=timeout,
    )
    try:
        data: bytes = await resp.read()
    finally:
        resp.release()
    if not 200 <= resp.status <= 299:
        raise ApiError(resp.status, status_message(data))
    return data
