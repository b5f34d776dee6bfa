"""PodAgeSortArgs: the order of PodAgeSort (PrioritySort takes no args)."""

from __future__ import annotations

from typing import Literal

from desched.framework import ArgsModel


class PodAgeSortArgs(ArgsModel):
    order: Literal["OldestFirst", "NewestFirst"] = "OldestFirst"
