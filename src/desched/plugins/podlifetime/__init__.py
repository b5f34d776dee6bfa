"""PodLifeTime: evict pods older than a maximum lifetime."""

from desched.plugins.podlifetime.plugin import (
    PodLifeTime,
    PodLifeTimeArgs,
)

__all__ = ["PodLifeTime", "PodLifeTimeArgs"]
