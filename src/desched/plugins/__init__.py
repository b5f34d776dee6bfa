"""In-tree plugins. Each module holds one plugin's whole story: its args, their validation, the plugin."""

from __future__ import annotations

import importlib

# (module, class) of every in-tree plugin, in the order `desched validate` lists them.
_IN_TREE = [
    ("desched.plugins.defaultevictor", "DefaultEvictor"),
    ("desched.plugins.sorters", "PrioritySort"),
    ("desched.plugins.sorters", "PodAgeSort"),
    ("desched.plugins.podlifetime", "PodLifeTime"),
    ("desched.plugins.removefailedpods", "RemoveFailedPods"),
    ("desched.plugins.toomanyrestarts", "RemovePodsHavingTooManyRestarts"),
    ("desched.plugins.nodetaints", "RemovePodsViolatingNodeTaints"),
    ("desched.plugins.nodeaffinity", "RemovePodsViolatingNodeAffinity"),
    ("desched.plugins.interpodantiaffinity", "RemovePodsViolatingInterPodAntiAffinity"),
    ("desched.plugins.removeduplicates", "RemoveDuplicates"),
    ("desched.plugins.nodeutilization", "LowNodeUtilization"),
    ("desched.plugins.nodeutilization", "HighNodeUtilization"),
    ("desched.plugins.topologyspread", "RemovePodsViolatingTopologySpreadConstraint"),
    ("desched.plugins.removeanomalypods", "RemoveAnomalyPods"),
]


def _load() -> list[type]:
    classes = []
    for module, cls in _IN_TREE:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            continue  # not written yet
        classes.append(getattr(mod, cls))
    return classes


IN_TREE_PLUGINS: list[type] = _load()
