"""RemovePodsViolatingInterPodAntiAffinity: evict pods that break another pod's anti-affinity."""

from desched.plugins.removepodsviolatinginterpodantiaffinity.plugin import (
    RemovePodsViolatingInterPodAntiAffinity,
    RemovePodsViolatingInterPodAntiAffinityArgs,
)

__all__ = ["RemovePodsViolatingInterPodAntiAffinity", "RemovePodsViolatingInterPodAntiAffinityArgs"]
