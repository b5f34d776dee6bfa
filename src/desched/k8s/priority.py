"""Pod priority, as the Priority admission plugin resolves it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from desched.k8s.objects import Pod, PriorityClass
from desched.k8s.pods import SYSTEM_CRITICAL_PRIORITY

__all__ = [
    "BUILTIN_PRIORITY_CLASSES",
    "SYSTEM_CLUSTER_CRITICAL",
    "SYSTEM_NODE_CRITICAL",
    "class_value",
    "global_default_class",
    "is_critical_pod",
    "pod_priority",
    "resolve_pod_priority",
]

SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"

#: The classes every API server creates (pkg/apis/scheduling: SystemPriorityClasses), used when a
#: snapshot names one without carrying the object.
BUILTIN_PRIORITY_CLASSES: Mapping[str, int] = {
    SYSTEM_CLUSTER_CRITICAL: 2_000_000_000,
    SYSTEM_NODE_CRITICAL: 2_000_001_000,
}


def global_default_class(
    classes: Mapping[str, PriorityClass] | Iterable[PriorityClass],
) -> PriorityClass | None:
    """The globalDefault PriorityClass; if a race left several, the one with the lowest value
    (ties: the first name in order), as admission picks it."""
    items = classes.values() if isinstance(classes, Mapping) else classes
    best: PriorityClass | None = None
    for pc in items:
        if not pc.global_default:
            continue
        if (
            best is None
            or pc.value < best.value
            or (pc.value == best.value and pc.metadata.name < best.metadata.name)
        ):
            best = pc
    return best


def class_value(name: str, classes: Mapping[str, PriorityClass]) -> int | None:
    """The value of the PriorityClass ``name``: the snapshot's object, else the built-in system
    class of that name; None if neither exists."""
    pc = classes.get(name)
    if pc is not None:
        return pc.value
    return BUILTIN_PRIORITY_CLASSES.get(name)


def pod_priority(pod: Pod, classes: Mapping[str, PriorityClass]) -> int | None:
    """The pod's priority as admission sets it from what the pod says: spec.priority if set, else
    the value of the class spec.priorityClassName names (:func:`class_value`); None if the pod
    says neither. A pod the API server admitted always has spec.priority; a hand-written snapshot's
    pod may only name its class, and ``system-node-critical`` means critical there too."""
    priority = pod.spec.priority
    if priority is not None:
        return priority
    name = pod.spec.priority_class_name
    return class_value(name, classes) if name else None


def is_critical_pod(pod: Pod, classes: Mapping[str, PriorityClass]) -> bool:
    """Upstream's ``IsCriticalPriorityPod`` (priority ≥ 2·10⁹) on :func:`pod_priority`."""
    priority = pod_priority(pod, classes)
    return priority is not None and priority >= SYSTEM_CRITICAL_PRIORITY


def resolve_pod_priority(
    pod: Pod,
    classes: Mapping[str, PriorityClass],
    default_class: PriorityClass | None,
) -> int:
    """spec.priority if set; else the value of spec.priorityClassName's class (a built-in system
    class counts even if absent from ``classes``); else the global default's value; else 0."""
    priority = pod_priority(pod, classes)
    if priority is not None:
        return priority
    if default_class is not None:
        return default_class.value
    return 0
