"""The event loop desched's commands run on, which knows the child processes started on it.

The only child processes desched starts are a kubeconfig's exec credential plugins, and it does
not start them itself: kubernetes_asyncio's exec provider does (``asyncio.create_subprocess_exec``)
and keeps the process object to itself. When desched gives up on a plugin that hangs (the start-up
bound of ``--client-connection-timeout``, or SIGTERM), cancelling the wait does not end the
plugin: it would outlive desched, still waiting for input. :class:`ProcessTrackingLoop` is
asyncio's own loop that also keeps the transport of every process started on it, so that
:func:`ending_processes_on_failure` can end the ones a failed start left running.

Hand-written: neither asyncio nor kubernetes_asyncio exposes the processes started on a loop, and a
subclass overriding the one method that starts them is smaller than any process-listing
dependency (psutil would also find them, by polling the process table, with a pid-reuse race).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
P = TypeVar("P", bound=asyncio.BaseProtocol)

#: How long an ended process has to exit after SIGTERM before it is sent SIGKILL.
TERM_GRACE_SECONDS = 0.5


class ProcessTrackingLoop(asyncio.SelectorEventLoop):
    """asyncio's selector loop (the default on Unix) that remembers the child processes it starts."""

    def __init__(self) -> None:
        super().__init__()
        #: every process started on this loop that had not exited when the next one started, in
        #: order (the ones that exited are dropped then)
        self.processes: list[asyncio.SubprocessTransport] = []

    async def subprocess_exec(
        self, protocol_factory: Callable[[], P], program: Any, *args: Any, **kwargs: Any
    ) -> tuple[asyncio.SubprocessTransport, P]:
        transport, protocol = await super().subprocess_exec(protocol_factory, program, *args, **kwargs)
        self.processes = [p for p in self.processes if p.get_returncode() is None]
        self.processes.append(transport)
        return transport, protocol


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a :class:`ProcessTrackingLoop`."""
    with asyncio.Runner(loop_factory=ProcessTrackingLoop) as runner:
        return runner.run(main)


def started_processes() -> list[asyncio.SubprocessTransport]:
    """The processes the running loop started so far (none known on a loop of another kind)."""
    loop = asyncio.get_running_loop()
    return list(loop.processes) if isinstance(loop, ProcessTrackingLoop) else []


async def end_processes_started_after(before: list[asyncio.SubprocessTransport]) -> int:
    """End the processes started on the running loop since ``before`` (what
    :func:`started_processes` said then) that are still running: SIGTERM, then SIGKILL for one
    still there after :data:`TERM_GRACE_SECONDS`. Returns how many were running."""
    known = {id(t) for t in before}
    running = [t for t in started_processes() if id(t) not in known and t.get_returncode() is None]
    for t in running:
        with contextlib.suppress(ProcessLookupError):
            t.terminate()
    deadline = time.monotonic() + TERM_GRACE_SECONDS
    while any(t.get_returncode() is None for t in running) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    for t in running:
        if t.get_returncode() is None:
            with contextlib.suppress(ProcessLookupError):
                t.kill()
    return len(running)


@contextlib.asynccontextmanager
async def ending_processes_on_failure() -> AsyncIterator[None]:
    """Around a block that may start processes on the running loop: when it raises (a timeout, a
    cancellation, an error), the processes it started that still run are ended
    (:func:`end_processes_started_after`) before the exception goes on."""
    before = started_processes()
    try:
        yield
    except BaseException:
        ended = await end_processes_started_after(before)
        if ended:
            log.debug("ended %d child process(es) left running by a failed step", ended)
        raise
