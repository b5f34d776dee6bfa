"""SIGTERM and SIGINT as an event a start-up wait can end on (``run``'s start, ``snapshot``, the
extender): one place, so every command stops waiting the same way. Only the standard library is
imported here, so the extender's snapshot mode stays light."""

from __future__ import annotations

import asyncio
import contextlib
import signal


def stop_on_signals() -> tuple[asyncio.Event, list[str]]:
    """An event set by SIGTERM or SIGINT on the running loop, and the names of the signals seen."""
    stop = asyncio.Event()
    seen: list[str] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        seen.append(sig.name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread, or Windows
            loop.add_signal_handler(sig, on_signal, sig)
    return stop, seen
