"""In-tree plugins: one folder per plugin, named as upstream names it (args, plugin, private helpers).

In-tree plugins are independent of each other; what several share lives in :mod:`._shared` or lower.
"""

from __future__ import annotations

from desched.framework.registry import Registry, build_registry
from desched.plugins.defaultevictor import DefaultEvictor
from desched.plugins.nodeutilization import HighNodeUtilization, LowNodeUtilization
from desched.plugins.podlifetime import PodLifeTime
from desched.plugins.removeanomalypods import RemoveAnomalyPods
from desched.plugins.removeduplicates import RemoveDuplicates
from desched.plugins.removefailedpods import RemoveFailedPods
from desched.plugins.removepodshavingtoomanyrestarts import RemovePodsHavingTooManyRestarts
from desched.plugins.removepodsviolatinginterpodantiaffinity import RemovePodsViolatingInterPodAntiAffinity
from desched.plugins.removepodsviolatingnodeaffinity import RemovePodsViolatingNodeAffinity
from desched.plugins.removepodsviolatingnodetaints import RemovePodsViolatingNodeTaints
from desched.plugins.removepodsviolatingpodaffinity import RemovePodsViolatingPodAffinity
from desched.plugins.removepodsviolatingtopologyspreadconstraint import (
    RemovePodsViolatingTopologySpreadConstraint,
)
from desched.plugins.sorters import PodAgeSort, PrioritySort

# Every in-tree plugin, in the order `desched validate` lists them.
IN_TREE_PLUGINS: tuple[type, ...] = (
    DefaultEvictor,
    PrioritySort,
    PodAgeSort,
    PodLifeTime,
    RemoveFailedPods,
    RemovePodsHavingTooManyRestarts,
    RemovePodsViolatingNodeTaints,
    RemovePodsViolatingNodeAffinity,
    RemovePodsViolatingInterPodAntiAffinity,
    RemovePodsViolatingPodAffinity,
    RemoveDuplicates,
    LowNodeUtilization,
    HighNodeUtilization,
    RemovePodsViolatingTopologySpreadConstraint,
    RemoveAnomalyPods,
)


def default_registry(*, entry_points: bool = True) -> Registry:
    """desched's in-tree plugins, and (unless disabled) every installed out-of-tree plugin."""
    return build_registry(IN_TREE_PLUGINS, entry_points=entry_points)
