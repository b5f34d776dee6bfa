"""``desched snapshot``: save a live cluster in the format ``desched simulate`` reads."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from desched.runtime.informer import DEFAULT_KINDS, RESOURCES, Informer
from desched.runtime.kube import make_api_client


async def save_snapshot(
    path: str, kubeconfig: str | None, context: str | None, *, events: bool = False
) -> int:
    """List every kind desched uses once and write them as one JSON v1 List (slim records)."""
    api = await make_api_client(kubeconfig, context)
    try:
        items: list[msgspec.Struct] = []
        for kind in DEFAULT_KINDS + (("Event",) if events else ()):
            informer = Informer(api, RESOURCES[kind])
            await informer.list()
            items.extend(informer.objects.values())
    finally:
        await api.close()
    data = msgspec.json.encode({"apiVersion": "v1", "kind": "List", "items": items})
    tmp = Path(f"{path}.tmp{os.getpid()}")
    tmp.write_bytes(data)
    tmp.replace(path)  # never leave a half-written snapshot behind
    return len(items)
