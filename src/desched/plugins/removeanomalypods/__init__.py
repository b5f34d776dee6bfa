"""RemoveAnomalyPods: evict pods stuck after scheduling and downgrade the nodes that cause it."""

from desched.plugins.removeanomalypods.args import RemoveAnomalyPodsArgs
from desched.plugins.removeanomalypods.plugin import RemoveAnomalyPods

__all__ = ["RemoveAnomalyPods", "RemoveAnomalyPodsArgs"]
