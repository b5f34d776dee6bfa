"""RemoveFailedPods: evict pods in the Failed phase."""

from desched.plugins.removefailedpods.args import RemoveFailedPodsArgs
from desched.plugins.removefailedpods.plugin import RemoveFailedPods

__all__ = ["RemoveFailedPods", "RemoveFailedPodsArgs"]
