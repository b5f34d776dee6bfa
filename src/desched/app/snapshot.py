"""``desched snapshot``: save a live cluster in the format ``desched simulate`` reads.

Connecting and listing are bounded and stop-aware like ``desched run``'s start
(:mod:`desched.kube.connect`): a dead server, rejected credentials or missing RBAC end in one
line and exit code 2; SIGTERM/SIGINT end it at once; no partial file is left behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from desched.cluster.live_source import DEFAULT_KINDS, RESOURCES, WORKLOAD_KINDS, Informer
from desched.errors import UserError
from desched.kube.client import api_client
from desched.kube.connect import DEFAULT_CONNECT_TIMEOUT, ConnectionMonitor, discover, load_config_bounded
from desched.runtime.signals import stop_on_signals


async def save_snapshot(
    path: str,
    kubeconfig: str | None,
    context: str | None,
    *,
    events: bool = False,
    workloads: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> int:
    """List every kind desched uses once and write them as one JSON v1 List (slim records)."""
    stop, signals = stop_on_signals()
    cfg, source = await load_config_bounded(kubeconfig, context, connect_timeout, stop, signals)
    monitor = ConnectionMonitor(source, bound=connect_timeout)
    api = api_client(cfg)
    items: list[msgspec.Struct] = []

    async def list_all() -> None:
        await discover(api, monitor, need_eviction=False)
        extra = (*WORKLOAD_KINDS, "Deployment") if workloads else ()
        for kind in DEFAULT_KINDS + (("Event",) if events else ()) + extra:
            informer = Informer(api, RESOURCES[kind], monitor=monitor, list_timeout=connect_timeout)

            async def list_kind(timeout: float, informer: Informer = informer) -> None:
                await informer.list()

            await monitor.retry(f"list {RESOURCES[kind].path}", list_kind)
            items.extend(informer.objects.values())

    try:
        await monitor.start(list_all(), stop, signals)
    finally:
        await api.close()
    data = msgspec.json.encode({"apiVersion": "v1", "kind": "List", "items": items})
    tmp = Path(f"{path}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)  # never leave a half-written snapshot behind
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError("--output", f"cannot write {path}: {e.strerror or e}") from None
    return len(items)


def take_snapshot(
    path: str,
    kubeconfig: str | None,
    context: str | None,
    *,
    events: bool = False,
    workloads: bool = False,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> int:
    """``desched snapshot``: :func:`save_snapshot` on desched's event loop; the objects written."""
    from desched.kube import loop as kube_loop

    return kube_loop.run(
        save_snapshot(
            path, kubeconfig, context, events=events, workloads=workloads, connect_timeout=connect_timeout
        )
    )
