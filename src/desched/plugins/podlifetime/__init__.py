"""PodLifeTime: evict pods older than a maximum lifetime."""

from desched.plugins.podlifetime.args import PodLifeTimeArgs
from desched.plugins.podlifetime.plugin import PodLifeTime

__all__ = ["PodLifeTime", "PodLifeTimeArgs"]
