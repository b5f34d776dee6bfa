"""PrioritySort and PodAgeSort: the two eviction-order plugins (grouped: both are small sort hooks)."""

from desched.plugins.sorters.args import PodAgeSortArgs
from desched.plugins.sorters.plugin import PodAgeSort, PrioritySort

__all__ = ["PodAgeSort", "PodAgeSortArgs", "PrioritySort"]
