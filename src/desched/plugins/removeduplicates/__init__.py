"""RemoveDuplicates: spread pods of one owner over the nodes."""

from desched.plugins.removeduplicates.plugin import (
    RemoveDuplicates,
    RemoveDuplicatesArgs,
)

__all__ = ["RemoveDuplicates", "RemoveDuplicatesArgs"]
