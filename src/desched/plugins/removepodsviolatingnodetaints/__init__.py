"""RemovePodsViolatingNodeTaints: evict pods that do not tolerate their node's taints."""

from desched.plugins.removepodsviolatingnodetaints.args import RemovePodsViolatingNodeTaintsArgs
from desched.plugins.removepodsviolatingnodetaints.plugin import RemovePodsViolatingNodeTaints

__all__ = ["RemovePodsViolatingNodeTaints", "RemovePodsViolatingNodeTaintsArgs"]
