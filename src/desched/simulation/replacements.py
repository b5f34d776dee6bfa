"""The names of the replacements a cycle's evictions leave behind (the replacement pods themselves:
:mod:`desched.k8s.replacements`; the nodes as the cycle's node actions leave them:
:func:`desched.framework.nodeactions.nodes_after_actions`)."""

from __future__ import annotations

import hashlib
from typing import Final

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Pod

_NAME_CHARS: Final = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes uses in generated names


def _suffix(seed: str) -> str:
    digest = hashlib.sha1(seed.encode()).digest()
    return "".join(_NAME_CHARS[b % len(_NAME_CHARS)] for b in digest[:5])


def replacement_name(snapshot: ClusterSnapshot, pod: Pod, cycle: int) -> str:
    refs = pod.metadata.owner_references or []
    ref = k8s_pods.controller_ref(pod) or (refs[0] if refs else None)
    if ref is not None and ref.kind == "StatefulSet":
        return pod.metadata.name  # a StatefulSet re-creates the pod under its name
    base = ref.name if ref is not None and ref.name else pod.metadata.name
    for attempt in range(1000):
        name = f"{base}-{_suffix(f'{pod.key}/{cycle}/{attempt}')}"
        if snapshot.pod(pod.metadata.namespace, name) is None:
            return name
    return f"{base}-{_suffix(pod.key)}-{cycle}"  # pragma: no cover - 1000 collisions
