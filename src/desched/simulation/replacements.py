"""The names of the replacements a cycle's evictions leave behind, and the nodes as the cycle's
node actions leave them (the replacement pods themselves: :mod:`desched.k8s.replacements`)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

import msgspec

from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.nodeactions import NodeActionRecord
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import (
    Node,
    Pod,
    Taint,
)

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


def nodes_after_actions(snapshot: ClusterSnapshot, actions: Sequence[NodeActionRecord]) -> list[Node] | None:
    """The nodes as the cycle's node actions (downgrades, restores) would leave them."""
    changes = [a for a in actions if str(a.result) in ("downgraded", "extended", "unchanged", "restored")]
    if not changes:
        return None
    by_name = {n.metadata.name: n for n in snapshot.nodes}
    for a in changes:
        node = by_name.get(a.node)
        if node is None:
            continue
        taints = list(node.spec.taints or ())
        labels = dict(node.metadata.labels or {})
        if a.action == "restore":
            if a.method == "taint":
                taints = [t for t in taints if not (t.key == a.key and t.effect == a.effect)]
            else:
                labels.pop(a.key, None)
        elif a.method == "taint":
            if not any(t.key == a.key and t.effect == a.effect for t in taints):
                taints.append(Taint(key=a.key, value=a.value, effect=a.effect))
        else:
            labels[a.key] = a.value
        by_name[a.node] = msgspec.structs.replace(
            node,
            metadata=msgspec.structs.replace(node.metadata, labels=labels),
            spec=msgspec.structs.replace(node.spec, taints=taints),
        )
    return list(by_name.values())
