"""RemovePodsViolatingInterPodAntiAffinity: evict pods that break another pod's anti-affinity."""

from desched.plugins.removepodsviolatinginterpodantiaffinity.args import (
    RemovePodsViolatingInterPodAntiAffinityArgs,
)
from desched.plugins.removepodsviolatinginterpodantiaffinity.plugin import (
    RemovePodsViolatingInterPodAntiAffinity,
)

__all__ = ["RemovePodsViolatingInterPodAntiAffinity", "RemovePodsViolatingInterPodAntiAffinityArgs"]
