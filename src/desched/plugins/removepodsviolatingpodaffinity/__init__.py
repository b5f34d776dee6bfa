"""RemovePodsViolatingPodAffinity: evict pods whose required pod affinity no longer holds."""

from desched.plugins.removepodsviolatingpodaffinity.args import RemovePodsViolatingPodAffinityArgs
from desched.plugins.removepodsviolatingpodaffinity.plugin import RemovePodsViolatingPodAffinity

__all__ = ["RemovePodsViolatingPodAffinity", "RemovePodsViolatingPodAffinityArgs"]
