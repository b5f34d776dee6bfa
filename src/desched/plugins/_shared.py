"""Pieces many strategy plugins share: pod selection by namespace and labels, eviction orders,
content keys for the records pods share."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from desched.api.types import LabelSelectorArg, Namespaces
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s._compile_cache import ContentKeys
from desched.k8s.namespaces import namespace_rule
from desched.k8s.objects import ZERO_TIME, Pod

PodPredicate = Callable[[Pod], bool]

__all__ = [
    "ContentKeys",
    "PodPredicate",
    "oldest_first_key",
    "pod_selector",
    "priority_low_to_high_key",
    "priority_rank",
    "select_all",
]

_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


def select_all(pod: Pod) -> bool:
    """What :func:`pod_selector` returns when the args select every pod (hot loops test for it)."""
    return True


def pod_selector(namespaces: Namespaces | None, label_selector: LabelSelectorArg | None) -> PodPredicate:
    """A predicate for a plugin's ``namespaces`` (include or exclude) and ``labelSelector`` args;
    :func:`select_all` itself when they are not set."""
    allowed = namespace_rule(namespaces.include, namespaces.exclude) if namespaces else None
    match = (
        k8s_labels.compile_label_selector(label_selector.to_selector(), none_matches=True)
        if label_selector is not None
        else None
    )
    if allowed is None and match is None:
        return select_all

    def selected(pod: Pod) -> bool:
        if allowed is not None and not allowed(pod.metadata.namespace):
            return False
        return match is None or match(pod.metadata.labels or {})

    return selected


def priority_low_to_high_key(pod: Pod) -> tuple[int, int, int, int, str, str]:
    """Upstream's SortPodsBasedOnPriorityLowToHigh as a sort key, made total.

    Pods without a priority first, then by priority; among equals BestEffort, Burstable, Guaranteed,
    then pods without the prefer-no-eviction annotation before those with it. Upstream leaves further
    ties in listing order; desched breaks them by namespace and name, so decisions are reproducible.
    """
    prio = pod.spec.priority
    meta = pod.metadata
    annotations = meta.annotations
    prefer_keep = 1 if annotations and k8s_pods.PREFER_NO_EVICTION_ANNOTATION in annotations else 0
    return (
        0 if prio is None else 1,
        prio or 0,
        _QOS_RANK.get(pod.status.qos_class or k8s_pods.compute_qos_class(pod), 1),
        prefer_keep,
        meta.namespace,
        meta.name,
    )


def priority_rank(pod: Pod) -> tuple[int, int, int, int]:
    """:func:`priority_low_to_high_key` without the (namespace, name) tie-break."""
    prio = pod.spec.priority
    annotations = pod.metadata.annotations
    return (
        0 if prio is None else 1,
        prio or 0,
        _QOS_RANK.get(pod.status.qos_class or k8s_pods.compute_qos_class(pod), 1),
        1 if annotations and k8s_pods.PREFER_NO_EVICTION_ANNOTATION in annotations else 0,
    )


def oldest_first_key(pod: Pod) -> tuple[datetime, str, str]:
    meta = pod.metadata
    created = meta.creation_timestamp
    return (ZERO_TIME if created is None else created, meta.namespace, meta.name)
