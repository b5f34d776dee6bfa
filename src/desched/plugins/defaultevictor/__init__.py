"""DefaultEvictor: the filter and pre-eviction checks every eviction passes."""

from desched.plugins.defaultevictor.args import DefaultEvictorArgs
from desched.plugins.defaultevictor.plugin import DefaultEvictor

__all__ = ["DefaultEvictor", "DefaultEvictorArgs"]
