"""RemovePodsViolatingNodeAffinity: evict pods whose node no longer matches their node affinity."""

from desched.plugins.removepodsviolatingnodeaffinity.plugin import (
    RemovePodsViolatingNodeAffinity,
    RemovePodsViolatingNodeAffinityArgs,
)

__all__ = ["RemovePodsViolatingNodeAffinity", "RemovePodsViolatingNodeAffinityArgs"]
