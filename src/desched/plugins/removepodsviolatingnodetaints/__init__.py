"""RemovePodsViolatingNodeTaints: evict pods that do not tolerate their node's taints."""

from desched.plugins.removepodsviolatingnodetaints.plugin import (
    RemovePodsViolatingNodeTaints,
    RemovePodsViolatingNodeTaintsArgs,
)

__all__ = ["RemovePodsViolatingNodeTaints", "RemovePodsViolatingNodeTaintsArgs"]
