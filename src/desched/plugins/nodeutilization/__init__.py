"""LowNodeUtilization and HighNodeUtilization, with the node usage model they share."""

from desched.plugins.nodeutilization.args import HighNodeUtilizationArgs, LowNodeUtilizationArgs
from desched.plugins.nodeutilization.plugin import HighNodeUtilization, LowNodeUtilization

__all__ = ["HighNodeUtilization", "HighNodeUtilizationArgs", "LowNodeUtilization", "LowNodeUtilizationArgs"]
