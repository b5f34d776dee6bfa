"""desched.kube.loop: the loop desched's commands run on knows the processes started on it, and a
credential plugin that a bounded start gave up on is ended instead of outliving desched."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from tests.kubeapi import exec_kubeconfig

from desched.errors import UserError
from desched.kube import loop as kube_loop
from desched.kube.connect import load_config_bounded

IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def _alive(pid: int) -> bool:
    """Running (a zombie or a missing process is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


async def _start(*argv: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(*argv)


def test_run_is_asyncio_run_on_a_tracking_loop() -> None:
    async def main() -> tuple[bool, list[int | None], int]:
        proc = await _start("sleep", "60")
        tracked = [t.get_pid() for t in kube_loop.started_processes()]
        proc.kill()
        await proc.wait()
        return isinstance(asyncio.get_running_loop(), kube_loop.ProcessTrackingLoop), tracked, proc.pid

    on_tracking, tracked, pid = kube_loop.run(main())
    assert on_tracking and tracked == [pid]


def test_ends_only_the_processes_started_since_and_still_running() -> None:
    async def main() -> tuple[int, list[int | None], list[bool]]:
        older = await _start("sleep", "60")
        before = kube_loop.started_processes()
        done = await _start("true")
        await done.wait()
        hanging = await _start("sleep", "60")
        stubborn = await _start(sys.executable, "-c", IGNORES_SIGTERM)
        await asyncio.sleep(0.3)  # the stubborn one has set its handler
        began = time.monotonic()
        ended = await kube_loop.end_processes_started_after(before)
        took = time.monotonic() - began
        # SIGKILL has been sent when it returns; the exit is seen once the child is reaped
        codes = [await asyncio.wait_for(p.wait(), 5) for p in (hanging, stubborn)]
        alive = [_alive(p.pid) for p in (older, hanging, stubborn)]
        older.kill()
        await older.wait()
        assert took < kube_loop.TERM_GRACE_SECONDS + 1.0
        return ended, codes, alive

    ended, codes, alive = kube_loop.run(main())
    assert ended == 2  # not "true", which had exited, nor the one started before
    assert codes == [-15, -9]  # SIGTERM, then SIGKILL for the one that ignored it
    assert alive == [True, False, False]


def test_on_another_loop_nothing_is_known_and_nothing_ended() -> None:
    async def main() -> tuple[list[object], int]:
        proc = await _start("sleep", "60")
        try:
            return list(kube_loop.started_processes()), await kube_loop.end_processes_started_after([])
        finally:
            proc.kill()
            await proc.wait()

    assert asyncio.run(main()) == ([], 0)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to see the plugin gone")
@pytest.mark.parametrize(
    ("stopped", "said"),
    [(False, r"did not finish within 1\.5s"), (True, r"stopped by SIGTERM during start-up")],
)
def test_a_hanging_exec_credential_plugin_is_ended_when_the_start_gives_up(
    tmp_path: Path, stopped: bool, said: str
) -> None:
    """At the bound, or on SIGTERM (what the signal handler does: the stop event, the signal's name)."""
    pidfile = tmp_path / "plugin.pid"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        # written whole, then renamed: the file exists only with the pid in it (a kill between
        # open and write left it empty, and int('') failed the test under load)
        f"import os, time\nwith open({str(pidfile) + '.tmp'!r}, 'w') as f:\n    f.write(str(os.getpid()))\n"
        f"os.replace({str(pidfile) + '.tmp'!r}, {str(pidfile)!r})\ntime.sleep(60)\n"
    )
    kc = exec_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", [sys.executable, str(plugin)])

    async def main() -> None:
        stop, signals = asyncio.Event(), []
        if stopped:

            async def sigterm() -> None:
                while not pidfile.exists():  # the plugin runs
                    await asyncio.sleep(0.02)
                signals.append("SIGTERM")
                stop.set()

            asyncio.get_running_loop().create_task(sigterm())
        await load_config_bounded(str(kc), None, 1.5, stop, signals)

    with pytest.raises(UserError, match=said):
        kube_loop.run(main())
    pid = int(pidfile.read_text())
    assert pid != os.getpid() and not _alive(pid)
