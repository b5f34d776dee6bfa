"""The informer's watch-list (``sendInitialEvents``) and its fallback to LIST+WATCH.

The API here is a scripted stand-in for the transport (``call_api``), answering by the request's
parameters; tests/e2e/test_live_run.py and test_fault_injection.py run the same informer against
the real kube-apiserver (which streams initial events) and through a proxy that cuts, expires and
stalls watches.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from desched.cluster import live_source
from desched.cluster.live_source import INITIAL_EVENTS_END, RESOURCES, Informer
from desched.kube.client import ApiError

Params = dict[str, str]


def ev(kind: str, name: str, rv: str, **meta: Any) -> bytes:
    obj = {"kind": "Node", "metadata": {"name": name, "resourceVersion": rv, **meta}}
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


def end_bookmark(rv: str) -> bytes:
    obj = {"kind": "Node", "metadata": {"resourceVersion": rv, "annotations": {INITIAL_EVENTS_END: "true"}}}
    return json.dumps({"type": "BOOKMARK", "object": obj}).encode() + b"\n"


class Answer:
    """One HTTP answer: a status, and a body streamed in ``chunks`` (then, if ``hang``, silence)."""

    def __init__(
        self,
        chunks: list[bytes],
        *,
        status: int = 200,
        hang: bool = False,
        gate: asyncio.Event | None = None,
        gate_at: int = 0,
    ) -> None:
        self.status = status
        self.chunks = list(chunks)
        self.hang = hang
        self.gate = gate  # waited for before chunk ``gate_at``
        self.gate_at = gate_at
        self.content = self

    async def read(self) -> bytes:
        return b"".join(self.chunks)

    async def iter_any(self) -> AsyncIterator[bytes]:
        for i, chunk in enumerate(self.chunks):
            if self.gate is not None and i == self.gate_at:
                await self.gate.wait()
            yield chunk
        if self.hang:
            await asyncio.Event().wait()

    def release(self) -> None:
        pass


class Api:
    def __init__(self, answer: Callable[[Params], Answer]) -> None:
        self.answer = answer
        self.requests: list[Params] = []

    async def call_api(self, path: str, method: str, **kw: Any) -> Answer:
        params = dict(kw.get("query_params", []))
        self.requests.append(params)
        return self.answer(params)

    def kinds(self) -> list[str]:
        return [
            "watch-list" if "sendInitialEvents" in p else "watch" if p.get("watch") else "list"
            for p in self.requests
        ]


LIST_PAGES = {
    "": b'{"metadata": {"resourceVersion": "20", "continue": "p2"}, "items": '
    b'[{"metadata": {"name": "a", "resourceVersion": "3"}}]}',
    "p2": b'{"metadata": {"resourceVersion": "20"}, "items": '
    b'[{"metadata": {"name": "b", "resourceVersion": "4"}}]}',
}


async def run_until(inf: Informer, done: Callable[[], bool], timeout: float = 5.0) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(inf.run(stop))
    try:
        async with asyncio.timeout(timeout):
            while not done():
                await asyncio.sleep(0.01)
    finally:
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_watch_list_fills_the_cache_at_the_bookmark_then_follows_the_same_stream() -> None:
    changes: list[tuple[str, str]] = []

    async def main() -> None:
        gate = asyncio.Event()
        initial = ev("ADDED", "a", "3") + ev("ADDED", "b", "4")
        # events split across chunks anywhere, even mid-line
        stream = [initial[:17], initial[17:60], initial[60:], end_bookmark("10")[:5], end_bookmark("10")[5:]]
        stream.append(ev("MODIFIED", "a", "11", labels={"x": "y"}) + ev("DELETED", "b", "12"))

        def answer(p: Params) -> Answer:
            if "sendInitialEvents" in p:
                return Answer(stream, gate=gate, gate_at=4, hang=True)
            raise AssertionError(f"unexpected request {p}")

        api = Api(answer)

        def on_change(kind: str, type_: str, old: Any, new: Any) -> None:
            changes.append((type_, new and new.metadata.name))

        inf = Informer(api, RESOURCES["Node"], on_change=on_change)  # type: ignore[arg-type]
        stop = asyncio.Event()
        task = asyncio.create_task(inf.run(stop))
        await asyncio.sleep(0.1)
        # the initial events so far are not the cache: it is filled at once, at the bookmark
        assert not inf.synced.is_set() and inf.objects == {} and not inf.healthy
        assert changes == []
        gate.set()  # the rest: the bookmark's second half, then the watch's events
        async with asyncio.timeout(5):
            while inf.resource_version != "12":
                await asyncio.sleep(0.01)
        assert inf.synced.is_set() and inf.healthy and inf.listed_by == "watch-list"
        assert set(inf.objects) == {"a"} and inf.objects["a"].metadata.labels == {"x": "y"}
        assert changes == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", None)]
        p = api.requests[0]
        assert p["watch"] == "true" and p["sendInitialEvents"] == "true"
        assert p["resourceVersionMatch"] == "NotOlderThan" and p["allowWatchBookmarks"] == "true"
        assert p["resourceVersion"] == ""
        assert api.kinds() == ["watch-list"]  # no LIST, no second request
        stop.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())


@pytest.mark.parametrize("status", [400, 422])
def test_a_refused_watch_list_falls_back_to_list_and_watch_for_good(status: int) -> None:
    async def main() -> None:
        watches = 0

        def answer(p: Params) -> Answer:
            nonlocal watches
            if "sendInitialEvents" in p:
                body = b'{"kind": "Status", "code": 422, "message": "sendInitialEvents is forbidden"}'
                return Answer([body], status=status)
            if p.get("watch"):
                watches += 1
                if watches == 1:  # the first watch expires: a re-list
                    return Answer([b'{"type": "ERROR", "object": {"code": 410}}\n'])
                return Answer([ev("ADDED", "c", "21")], hang=True)
            return Answer([LIST_PAGES[p.get("continue", "")]])

        api = Api(answer)
        inf = Informer(api, RESOURCES["Node"])  # type: ignore[arg-type]
        await run_until(inf, lambda: "c" in inf.objects)
        assert api.kinds() == ["watch-list", "list", "list", "watch", "list", "list", "watch"]
        assert api.requests[3]["resourceVersion"] == "20"  # the watch goes on from the LIST
        assert not inf.use_watch_list and inf.listed_by == "list" and set(inf.objects) == {"a", "b", "c"}

    asyncio.run(main())


def test_a_watch_list_without_its_bookmark_is_listed_this_time_and_streamed_again_next() -> None:
    """An ERROR (410) or the stream's end before the initial-events-end bookmark: LIST this time
    (progress over deadlock, as client-go); the next re-list tries the watch-list again."""

    async def main() -> None:
        lists = 0
        watch_lists = 0

        def answer(p: Params) -> Answer:
            nonlocal lists, watch_lists
            if "sendInitialEvents" in p:
                watch_lists += 1
                if watch_lists == 1:
                    return Answer([ev("ADDED", "a", "3")])  # ends, no bookmark
                if watch_lists == 2:
                    return Answer([ev("ADDED", "a", "3"), b'{"type": "ERROR", "object": {"code": 410}}\n'])
                return Answer([ev("ADDED", "z", "30"), end_bookmark("31")], hang=True)
            if p.get("watch"):  # after the first LIST: expires, so the informer re-lists
                return Answer([b'{"type": "ERROR", "object": {"code": 410}}\n'])
            lists += 1
            return Answer([LIST_PAGES[p.get("continue", "")]])

        api = Api(answer)
        inf = Informer(api, RESOURCES["Node"])  # type: ignore[arg-type]
        await run_until(inf, lambda: inf.listed_by == "watch-list")
        assert api.kinds() == [
            "watch-list",
            "list",
            "list",
            "watch",
            "watch-list",
            "list",
            "list",
            "watch",
            "watch-list",
        ]
        assert inf.use_watch_list and set(inf.objects) == {"z"} and inf.resource_version == "31"

    asyncio.run(main())


def test_a_silent_watch_list_falls_back_to_list_and_watch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server (or proxy) that opens the stream but sends no initial events: LIST+WATCH from then on."""
    monkeypatch.setattr(live_source, "INITIAL_EVENTS_SILENCE_SECONDS", 0.2)

    async def main() -> None:
        def answer(p: Params) -> Answer:
            if p.get("watch"):
                return Answer([], hang=True)  # the watch-list and the watch: silent
            return Answer([LIST_PAGES[p.get("continue", "")]])

        api = Api(answer)
        inf = Informer(api, RESOURCES["Node"])  # type: ignore[arg-type]
        await run_until(inf, lambda: inf.synced.is_set() and len(api.requests) >= 4)
        assert api.kinds() == ["watch-list", "list", "list", "watch"]
        assert not inf.use_watch_list and set(inf.objects) == {"a", "b"} and inf.healthy

    asyncio.run(main())


def test_an_error_answer_to_the_watch_list_is_a_failure_retried_not_a_list() -> None:
    """403, 503, no answer: what a LIST would get too; reported and retried after the backoff (as
    any failed list), with the watch-list again, never a LIST for it."""

    async def main() -> None:
        asked = 0

        def answer(p: Params) -> Answer:
            nonlocal asked
            if "sendInitialEvents" in p:
                asked += 1
                if asked == 1:
                    return Answer([b'{"kind": "Status", "code": 503, "message": "etcd is down"}'], status=503)
                return Answer([ev("ADDED", "a", "3"), end_bookmark("4")], hang=True)
            raise AssertionError(f"unexpected request {p}")

        api = Api(answer)
        inf = Informer(api, RESOURCES["Node"])  # type: ignore[arg-type]
        await run_until(inf, inf.synced.is_set)
        assert api.kinds() == ["watch-list", "watch-list"]
        assert inf.use_watch_list and set(inf.objects) == {"a"} and inf.healthy

    asyncio.run(main())


class SlowAnswer(Answer):
    """A stream whose chunks come ``delay`` seconds apart (an apiserver streaming a large cluster)."""

    def __init__(self, chunks: list[bytes], delay: float) -> None:
        super().__init__(chunks, hang=True)
        self.delay = delay

    async def iter_any(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            await asyncio.sleep(self.delay)
            yield chunk
        await asyncio.Event().wait()


class Progress:
    """The monitor's side the informer reports to: when each good answer came."""

    def __init__(self) -> None:
        self.at: list[float] = []

    def progress(self) -> None:
        self.at.append(asyncio.get_running_loop().time())


def test_a_long_initial_stream_reports_progress_as_its_events_come() -> None:
    """Every event of the initial stream is an answer, as a LIST's page is: the start's bound
    (--client-connection-timeout, counted from the last answer) does not cut a stream that keeps
    coming but takes longer than the bound as a whole."""
    progress = Progress()

    async def main() -> float:
        chunks = [ev("ADDED", f"n{i}", str(i + 1)) for i in range(5)] + [end_bookmark("9")]
        api = Api(lambda p: SlowAnswer(chunks, 0.5))
        inf = Informer(api, RESOURCES["Node"], monitor=progress)  # type: ignore[arg-type]
        start = asyncio.get_running_loop().time()
        await run_until(inf, lambda: inf.synced.is_set(), timeout=10)
        assert len(inf.objects) == 5
        return start

    start = asyncio.run(main())
    # the headers, then at least once a second while the 3-second stream comes, then the bookmark
    gaps = [b - a for a, b in zip([start, *progress.at], progress.at, strict=False)]
    assert len(progress.at) >= 4 and max(gaps) < 1.6, gaps


def test_cancelling_a_read_of_the_initial_stream_is_never_lost() -> None:
    """A cancel landing while a chunk is ready must cancel the read (Python 3.11's wait_for lost it
    then: the informer went on to follow the watch forever, and `desched run` hung at exit)."""

    class Stream:
        def __init__(self) -> None:
            self.queue: asyncio.Queue[bytes] = asyncio.Queue()
            self.content = self

        async def iter_any(self) -> AsyncIterator[bytes]:
            while True:
                yield await self.queue.get()

    async def main() -> list[int]:
        lost = []
        for delay in range(8):  # cancel 0..7 loop steps after the chunk arrives: one hits the window
            stream = Stream()
            lines = live_source._Lines(stream, silence=5.0)
            read = asyncio.ensure_future(lines.__anext__())
            for _ in range(3):
                await asyncio.sleep(0)
            stream.queue.put_nowait(ev("ADDED", "n1", "1"))
            for _ in range(delay):
                await asyncio.sleep(0)
            if read.cancel():  # it was still reading: it must end cancelled
                await asyncio.gather(read, return_exceptions=True)
                if not read.cancelled():
                    lost.append(delay)
        return lost

    assert asyncio.run(main()) == []


def test_a_watch_that_keeps_expiring_backs_off_before_each_re_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every watch answers 410 Gone: the first re-list is at once, the next ones wait GONE_BACKOFF,
    doubling (without the wait the informer re-listed every object in a tight loop)."""
    monkeypatch.setattr(live_source, "GONE_BACKOFF", 0.2)

    async def main() -> None:
        lists: list[float] = []

        def answer(p: Params) -> Answer:
            if p.get("watch"):
                return Answer([b'{"type": "ERROR", "object": {"code": 410}}\n'])
            if not p.get("continue"):
                lists.append(asyncio.get_running_loop().time())
            return Answer([LIST_PAGES[p.get("continue", "")]])

        inf = Informer(Api(answer), RESOURCES["Node"])  # type: ignore[arg-type]
        inf.use_watch_list = False
        await run_until(inf, lambda: len(lists) >= 5, timeout=10)
        gaps = [b - a for a, b in itertools.pairwise(lists)]
        assert gaps[0] < 0.15  # the first 410: re-listed at once
        # then 0.2, 0.4, 0.8 s (+ up to a quarter of jitter)
        for gap, wait in zip(gaps[1:], (0.2, 0.4, 0.8), strict=False):
            assert wait * 0.95 <= gap <= wait * 1.25 + 0.15, gaps
        assert not inf.healthy

    asyncio.run(main())


def recorded_pauses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, bool]]:
    """Make the informer's waits instant and note each one: (seconds, cut short by an answer)."""
    pauses: list[tuple[float, bool]] = []

    async def pause(self: Informer, stop: asyncio.Event, seconds: float, *, until_answered: bool) -> None:
        pauses.append((seconds, until_answered))
        await asyncio.sleep(0)

    monkeypatch.setattr(Informer, "_pause", pause)
    return pauses


@pytest.mark.parametrize(
    ("failure", "cap"),
    [
        (lambda: ConnectionRefusedError("refused"), 4.0),
        (lambda: ApiError(503, "the apiserver is starting"), 4.0),
        (lambda: ApiError(429, "slow down"), 4.0),
        (lambda: ApiError(403, "forbidden"), 30.0),
    ],
    ids=["refused", "503", "429", "403"],
)
def test_the_backoff_of_a_server_that_is_down_stays_short(
    monkeypatch: pytest.MonkeyPatch, failure: Callable[[], Exception], cap: float
) -> None:
    """An apiserver down for minutes (20 failed tries): the wait between tries doubles from 0.5 s to
    4 s and stays there, so the cache is back within ~5 s of the server (client-go's 30 s kept every
    informer asleep up to 37 s after an apiserver restart: 33 s to the first cycle). An answer that
    retrying cannot change (403) still backs off to 30 s."""
    pauses = recorded_pauses(monkeypatch)
    tries = 0

    def answer(p: Params) -> Answer:
        nonlocal tries
        tries += 1
        if tries <= 20:
            raise failure()
        return Answer([ev("ADDED", "a", "3"), end_bookmark("4")], hang=True)

    async def main() -> None:
        inf = Informer(Api(answer), RESOURCES["Node"])  # type: ignore[arg-type]
        await run_until(inf, inf.synced.is_set)

    asyncio.run(main())
    waits = [s for s, _ in pauses]
    assert len(waits) == 20
    assert waits[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(waits) == cap, waits
    assert all(answered for _, answered in pauses)  # each cut short by another informer's answer


def test_a_410_after_the_server_went_away_re_lists_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Watches that expired again and again grew the 410 wait; then the apiserver restarts (the
    watch fails) and its new watch cache answers the old resourceVersion with 410: that re-list is
    at once, not after the grown wait (up to 37 s with nothing cutting it short)."""
    pauses = recorded_pauses(monkeypatch)
    script = iter(["410", "410", "410", "410", "down", "410"])
    lists = 0

    def answer(p: Params) -> Answer:
        nonlocal lists
        if not p.get("watch"):
            lists += 1
            return Answer([LIST_PAGES[p.get("continue", "")]])
        step = next(script, "hang")
        if step == "down":
            raise ConnectionResetError("the apiserver went away")
        if step == "410":
            return Answer([b'{"type": "ERROR", "object": {"code": 410}}\n'])
        return Answer([], hang=True)

    async def main() -> None:
        inf = Informer(Api(answer), RESOURCES["Node"])  # type: ignore[arg-type]
        inf.use_watch_list = False
        await run_until(inf, lambda: lists >= 6 and inf.healthy)

    asyncio.run(main())
    gone = [s for s, answered in pauses if not answered]  # the 410 waits (not cut short by answers)
    failed = [s for s, answered in pauses if answered]
    assert gone == [0.8, 1.6, 3.2], pauses  # the 2nd to 4th 410: waits; the one after the failure: none
    assert failed == [0.5]


def test_a_410_that_keeps_coming_waits_at_most_4s_before_re_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Watches expiring again and again (issue 30's mixed faults): the wait before each re-list
    doubles from 0.8 s to 4 s and stays there (client-go's 30 s kept the cache out of sync, and
    every cycle waiting, up to 37 s at a time)."""
    pauses = recorded_pauses(monkeypatch)
    lists = 0

    def answer(p: Params) -> Answer:
        nonlocal lists
        if p.get("watch"):
            return Answer([b'{"type": "ERROR", "object": {"code": 410}}\n'])
        lists += 1
        return Answer([LIST_PAGES[p.get("continue", "")]])

    async def main() -> None:
        inf = Informer(Api(answer), RESOURCES["Node"])  # type: ignore[arg-type]
        inf.use_watch_list = False
        await run_until(inf, lambda: lists >= 16)

    asyncio.run(main())
    gone = [s for s, _ in pauses]
    assert gone[:4] == [0.8, 1.6, 3.2, 4.0], gone
    assert max(gone) == 4.0


def test_a_watch_cut_after_it_was_open_is_re_opened_at_once_and_the_cache_stays_in_sync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy cuts the watch (a reset mid-stream) after it had been open a while: it is re-opened
    from its resourceVersion at once, and the cache never counts as out of sync (cycles do not
    wait); a watch cut as soon as it opens is a failure, with backoff (no tight loop)."""
    pauses = recorded_pauses(monkeypatch)
    monkeypatch.setattr(live_source, "WATCH_CUT_GRACE", 0.1)
    watches: list[str] = []
    unhealthy_seen = False

    class Cut(Answer):
        def __init__(self, after: float) -> None:
            super().__init__([ev("MODIFIED", "a", str(10 + len(watches)))])
            self.after = after

        async def iter_any(self) -> AsyncIterator[bytes]:
            yield self.chunks[0]
            await asyncio.sleep(self.after)
            raise ConnectionResetError("cut by a proxy")

    def answer(p: Params) -> Answer:
        if not p.get("watch"):
            return Answer([LIST_PAGES[p.get("continue", "")]])
        watches.append(p["resourceVersion"])
        if len(watches) <= 2:
            return Cut(0.3)  # open 0.3 s (> the grace): re-opened at once
        if len(watches) == 3:
            return Cut(0.0)  # cut at once: a failure
        return Answer([], hang=True)

    async def main() -> None:
        nonlocal unhealthy_seen
        inf = Informer(Api(answer), RESOURCES["Node"])  # type: ignore[arg-type]
        inf.use_watch_list = False

        def done() -> bool:
            nonlocal unhealthy_seen
            if len(watches) < 3 and inf.synced.is_set() and not inf.healthy:
                unhealthy_seen = True
            return len(watches) >= 4 and inf.healthy

        await run_until(inf, done)

    asyncio.run(main())
    assert watches == ["20", "11", "12", "13"]  # each from the last resourceVersion seen
    assert not unhealthy_seen
    assert [s for s, _ in pauses] == [0.5]  # only the watch cut as it opened backed off
