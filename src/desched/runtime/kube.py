"""Connecting to a cluster: kubeconfig (with contexts, exec and token auth, TLS) or in-cluster config.

kubernetes_asyncio does the transport and auth; desched never uses its models for pods or nodes
(they cost ~20x the memory of the slim records): lists and watches are read as raw bytes.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from kubernetes_asyncio import client, config

from desched.api.errors import UserError


async def make_api_client(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """An API client from ``kubeconfig`` (or $KUBECONFIG / ~/.kube/config), else in-cluster config."""
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        if not Path(path).exists():
            raise UserError("--kubeconfig", f"file {path} does not exist")
        try:
            await config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        except config.ConfigException as e:
            raise UserError("--kubeconfig", f"cannot use {path}: {e}") from None
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
    elif Path("~/.kube/config").expanduser().exists():
        await config.load_kube_config(context=context, client_configuration=cfg)
    else:
        raise UserError(
            "--kubeconfig",
            "no kubeconfig given, $KUBECONFIG unset, not running in a cluster, no ~/.kube/config",
        )
    return client.ApiClient(configuration=cfg)


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
    import json

    try:
        return str(json.loads(body).get("message", ""))[:500] or body[:200].decode(errors="replace")
    except (TypeError, ValueError, AttributeError):
        return body[:200].decode(errors="replace")


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
