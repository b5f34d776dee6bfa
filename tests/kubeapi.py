"""An API client pointed at an in-test aiohttp server (``aiohttp.test_utils.TestServer`` on
127.0.0.1): the runtime's HTTP code runs for real (kubernetes_asyncio's client, its timeouts, real
sockets) against handlers a test writes in a few lines, answering as the apiserver would."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client


@asynccontextmanager
async def api_client_for(app: web.Application) -> AsyncIterator[client.ApiClient]:
    """Serve ``app`` and yield an API client configured for it (closed after)."""
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    cfg = client.Configuration()
    cfg.host = str(server.make_url("")).rstrip("/")
    api = client.ApiClient(configuration=cfg)
    try:
        yield api
    finally:
        await api.close()
        await server.close()


def status(code: int, message: str, reason: str = "", **headers: str) -> web.Response:
    """A ``kind: Status`` answer, as the apiserver sends with an error."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    if reason:
        body["reason"] = reason
    body["code"] = code
    return web.json_response(body, status=code, headers=headers or None)


def exec_kubeconfig(path: Path, server: str, argv: list[str], user: str = "u") -> Path:
    """Write a kubeconfig for ``server`` whose user ``user`` gets its credentials from the exec
    plugin ``argv`` (client.authentication.k8s.io/v1), and return its path."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [
            {
                "name": user,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": argv[0],
                        "args": argv[1:],
                    }
                },
            }
        ],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": user}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))
    return path
