"""Pieces many strategy plugins share: pod selection by namespace and labels, eviction orders."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from desched.api.types import LabelSelectorArg, Namespaces
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Pod

PodPredicate = Callable[[Pod], bool]

_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


def pod_selector(namespaces: Namespaces | None, label_selector: LabelSelectorArg | None) -> PodPredicate:
    """A predicate for a plugin's ``namespaces`` (include or exclude) and ``labelSelector`` args."""
    include = frozenset(namespaces.include or ()) if namespaces else frozenset()
    exclude = frozenset(namespaces.exclude or ()) if namespaces else frozenset()
    match = (
        k8s_labels.compile_label_selector(label_selector.to_selector(), none_matches=True)
        if label_selector is not None
        else None
    )

    def selected(pod: Pod) -> bool:
        ns = pod.metadata.namespace
        if include and ns not in include:
            return False
        if exclude and ns in exclude:
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
    prefer_keep = 1 if k8s_pods.PREFER_NO_EVICTION_ANNOTATION in (pod.metadata.annotations or {}) else 0
    return (
        0 if prio is None else 1,
        prio or 0,
        _QOS_RANK.get(k8s_pods.qos_class(pod), 1),
        prefer_keep,
        pod.metadata.namespace,
        pod.metadata.name,
    )


def oldest_first_key(pod: Pod) -> tuple[datetime, str, str]:
    return (k8s_pods.pod_creation_time(pod), pod.metadata.namespace, pod.metadata.name)
