"""Pausing Python's cyclic garbage collector around work that makes many short-lived objects next
to a large, long-lived heap (the snapshot's records, the live cache).

Each cyclic collection such work triggers walks the whole long-lived heap again, so the pause is
what keeps decoding a snapshot, running a cycle and writing a report linear in their size (the
figures are in docs/performance.md). Reference counting still frees every acyclic object made
meanwhile, and the collector runs again as soon as the outermost pause ends.

Hand-written: a few lines over the standard library's ``gc``; this module imports nothing from
desched, so every layer can use it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; re-enable it after only if it was enabled before,
    so pauses nest (an inner pause leaves the outer one in force)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
