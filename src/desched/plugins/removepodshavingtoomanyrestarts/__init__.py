"""RemovePodsHavingTooManyRestarts: evict pods whose containers restart too often."""

from desched.plugins.removepodshavingtoomanyrestarts.plugin import (
    RemovePodsHavingTooManyRestarts,
    RemovePodsHavingTooManyRestartsArgs,
)

__all__ = ["RemovePodsHavingTooManyRestarts", "RemovePodsHavingTooManyRestartsArgs"]
