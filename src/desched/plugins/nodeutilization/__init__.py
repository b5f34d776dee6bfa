"""LowNodeUtilization and HighNodeUtilization, with the node usage model they share."""

from desched.plugins.nodeutilization.plugin import (
    HighNodeUtilization,
    HighNodeUtilizationArgs,
    LowNodeUtilization,
    LowNodeUtilizationArgs,
)

__all__ = ["HighNodeUtilization", "HighNodeUtilizationArgs", "LowNodeUtilization", "LowNodeUtilizationArgs"]
