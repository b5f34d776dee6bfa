"""RemoveDuplicates: spread pods of one owner over the nodes."""

from desched.plugins.removeduplicates.args import RemoveDuplicatesArgs
from desched.plugins.removeduplicates.plugin import RemoveDuplicates

__all__ = ["RemoveDuplicates", "RemoveDuplicatesArgs"]
