"""RemovePodsHavingTooManyRestarts: evict pods whose containers restart too often."""

from desched.plugins.removepodshavingtoomanyrestarts.args import RemovePodsHavingTooManyRestartsArgs
from desched.plugins.removepodshavingtoomanyrestarts.plugin import RemovePodsHavingTooManyRestarts

__all__ = ["RemovePodsHavingTooManyRestarts", "RemovePodsHavingTooManyRestartsArgs"]
