"""PrioritySort and PodAgeSort: the two eviction-order plugins (grouped: both are small sort hooks)."""

from desched.plugins.sorters.plugin import (
    PodAgeSort,
    PodAgeSortArgs,
    PrioritySort,
)

__all__ = ["PodAgeSort", "PodAgeSortArgs", "PrioritySort"]
