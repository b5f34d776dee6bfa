"""DefaultEvictor: the filter and pre-eviction checks every eviction passes."""

from desched.plugins.defaultevictor.plugin import (
    DefaultEvictor,
    DefaultEvictorArgs,
)

__all__ = ["DefaultEvictor", "DefaultEvictorArgs"]
