"""RemoveFailedPods: evict pods in the Failed phase."""

from desched.plugins.removefailedpods.plugin import (
    RemoveFailedPods,
    RemoveFailedPodsArgs,
)

__all__ = ["RemoveFailedPods", "RemoveFailedPodsArgs"]
