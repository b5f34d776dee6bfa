"""Pod priority, as the Priority admission plugin resolves it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from desched.k8s.objects import Pod, PriorityClass

__all__ = [
    "BUILTIN_PRIORITY_CLASSES",
    "SYSTEM_CLUSTER_CRITICAL",
    "SYSTEM_NODE_CRITICAL",
    "global_default_class",
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


def resolve_pod_priority(
    pod: Pod,
    classes: Mapping[str, PriorityClass],
    default_class: PriorityClass | None,
) -> int:
    """spec.priority if set; else the value of spec.priorityClassName's class (a built-in system
    class counts even if absent from ``classes``); else the global default's value; else 0."""
    spec = pod.spec
    if spec.priority is not None:
        return spec.priority
    name = spec.priority_class_name
    if name:
        pc = classes.get(name)
        if pc is not None:
            return pc.value
        builtin = BUILTIN_PRIORITY_CLASSES.get(name)
        if builtin is not None:
            return builtin
    if default_class is not None:
        return default_class.value
    return 0
