"""RemovePodsViolatingNodeAffinity: evict pods whose node no longer matches their node affinity."""

from desched.plugins.removepodsviolatingnodeaffinity.args import RemovePodsViolatingNodeAffinityArgs
from desched.plugins.removepodsviolatingnodeaffinity.plugin import RemovePodsViolatingNodeAffinity

__all__ = ["RemovePodsViolatingNodeAffinity", "RemovePodsViolatingNodeAffinityArgs"]
