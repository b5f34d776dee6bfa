"""``--descheduling-interval-cron-expression`` (Volcano's flag): when the cycles come, on a fake
wall clock, and how the flags are refused in one line."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from desched.errors import UserError
from desched.runtime.schedule import CronSchedule, parse_schedule, sleep_until

ROOT = Path(__file__).resolve().parents[3]
PARIS = ZoneInfo("Europe/Paris")
NO_ENV: dict[str, str] = {}
NO_LOCALTIME = Path("/nonexistent/localtime")


def schedule(expr: str, zone: str | None = None, env: dict[str, str] = NO_ENV) -> CronSchedule:
    return parse_schedule(expr, zone, environ=env, localtime=NO_LOCALTIME)


def fires(s: CronSchedule, start: datetime, n: int) -> list[str]:
    out, t = [], start
    for _ in range(n):
        t = s.next_after(t)
        out.append(t.isoformat())
    return out


def test_daily_at_two_in_utc_by_default() -> None:
    s = schedule("0 2 * * *")
    assert s.zone_name == "UTC"
    start = datetime(2026, 11, 24, 21, 30, tzinfo=UTC)
    assert fires(s, start, 3) == [
        "2026-11-25T02:00:00+00:00",
        "2026-11-26T02:00:00+00:00",
        "2026-11-27T02:00:00+00:00",
    ]


def test_a_moment_on_the_schedule_gives_the_next_one_not_itself() -> None:
    s = schedule("*/15 * * * *")
    at = datetime(2026, 11, 24, 10, 15, tzinfo=UTC)
    assert s.next_after(at) == datetime(2026, 11, 24, 10, 30, tzinfo=UTC)
    assert s.next_after(at + timedelta(microseconds=1)) == datetime(2026, 11, 24, 10, 30, tzinfo=UTC)
    assert s.next_after(at - timedelta(microseconds=1)) == at


@pytest.mark.parametrize(
    ("how", "zone", "env"),
    [
        ("flag", "Europe/Paris", NO_ENV),
        ("prefix", None, NO_ENV),
        ("TZ", None, {"TZ": "Europe/Paris"}),
    ],
)
def test_time_zone_from_the_flag_the_prefix_or_tz(how: str, zone: str | None, env: dict[str, str]) -> None:
    expr = "CRON_TZ=Europe/Paris 0 2 * * *" if how == "prefix" else "0 2 * * *"
    s = schedule(expr, zone, env)
    # 02:00 in Paris is 01:00 UTC in winter
    start = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    nxt = s.next_after(start)
    assert nxt.astimezone(UTC) == datetime(2026, 11, 25, 1, 0, tzinfo=UTC)
    assert nxt.tzinfo is not None and nxt.utcoffset() == timedelta(hours=1)


def test_the_prefix_wins_over_tz_and_the_machines_zone() -> None:
    s = schedule("TZ=Asia/Tokyo 0 9 * * *", None, {"TZ": "Europe/Paris"})
    nxt = s.next_after(datetime(2026, 11, 24, 12, 0, tzinfo=UTC))
    assert nxt.astimezone(UTC) == datetime(2026, 11, 25, 0, 0, tzinfo=UTC)


def test_machine_local_time_is_read_from_etc_localtime(tmp_path: Path) -> None:
    import zoneinfo

    source = next(
        (
            Path(p) / "America" / "New_York"
            for p in zoneinfo.TZPATH
            if (Path(p) / "America/New_York").is_file()
        ),
        None,
    )
    if source is None:
        pytest.skip("no system zone data to copy as /etc/localtime (the tzdata package supplies ZoneInfo)")
    localtime = tmp_path / "localtime"
    localtime.write_bytes(source.read_bytes())
    s = parse_schedule("0 2 * * *", None, environ={}, localtime=localtime)
    assert s.zone_name == "local time"
    nxt = s.next_after(datetime(2026, 11, 24, 12, 0, tzinfo=UTC))
    assert nxt.astimezone(UTC) == datetime(2026, 11, 25, 7, 0, tzinfo=UTC)


def test_daylight_saving_gap_and_repeat_as_cron() -> None:
    s = schedule("30 2 * * *", "Europe/Paris")
    # 2026-03-29: 02:00 -> 03:00 in Paris; 02:30 does not exist: run at 03:00 (cron's rule)
    spring = s.next_after(datetime(2026, 3, 29, 0, 0, tzinfo=PARIS))
    assert spring.astimezone(UTC) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    # 2026-10-25: 03:00 -> 02:00; 02:30 happens twice: run once
    autumn = s.next_after(datetime(2026, 10, 25, 0, 0, tzinfo=PARIS))
    after = s.next_after(autumn)
    assert after - autumn > timedelta(hours=23)


@pytest.mark.parametrize(
    ("expr", "first", "second"),
    [
        ("@daily", "2026-11-25T00:00:00+00:00", "2026-11-26T00:00:00+00:00"),
        ("@midnight", "2026-11-25T00:00:00+00:00", "2026-11-26T00:00:00+00:00"),
        ("@hourly", "2026-11-24T22:00:00+00:00", "2026-11-24T23:00:00+00:00"),
        ("@weekly", "2026-11-29T00:00:00+00:00", "2026-12-06T00:00:00+00:00"),
        ("@monthly", "2026-12-01T00:00:00+00:00", "2027-01-01T00:00:00+00:00"),
        ("@yearly", "2027-01-01T00:00:00+00:00", "2028-01-01T00:00:00+00:00"),
        ("@every 90m", "2026-11-24T23:00:00+00:00", "2026-11-25T00:30:00+00:00"),
        ("0 2 * * 1-5", "2026-11-25T02:00:00+00:00", "2026-11-26T02:00:00+00:00"),
    ],
)
def test_descriptors_and_every(expr: str, first: str, second: str) -> None:
    assert fires(schedule(expr), datetime(2026, 11, 24, 21, 30, tzinfo=UTC), 2) == [first, second]


@pytest.mark.parametrize(
    ("expr", "zone", "line"),
    [
        (
            "0 25 * * *",
            None,
            "--descheduling-interval-cron-expression: not a valid cron expression (Bad hour), "
            "got '0 25 * * *'",
        ),
        (
            "0 2 * *",
            None,
            "--descheduling-interval-cron-expression: must have five fields (minute hour day-of-month "
            "month day-of-week) or be a descriptor such as @daily, got '0 2 * *'",
        ),
        (
            "@sometimes",
            None,
            "--descheduling-interval-cron-expression: not a known descriptor (known: @yearly, "
            "@annually, @monthly, @weekly, @daily, @midnight, @hourly, @every DURATION), got '@sometimes'",
        ),
        (
            "@every soon",
            None,
            "--descheduling-interval-cron-expression: @every needs a duration of at least 1s such as "
            "'@every 6h', got '@every soon'",
        ),
        (
            "",
            None,
            "--descheduling-interval-cron-expression: needs a cron expression such as '0 2 * * *', got ''",
        ),
        (
            "0 2 * * *",
            "Mars/Olympus",
            "--descheduling-interval-cron-time-zone: unknown time zone 'Mars/Olympus' (an IANA name such as "
            "'Europe/Paris' or 'UTC')",
        ),
        (
            "CRON_TZ=UTC 0 2 * * *",
            "Europe/Paris",
            "--descheduling-interval-cron-time-zone: cannot be given with a CRON_TZ= prefix in "
            "--descheduling-interval-cron-expression (got 'Europe/Paris' and 'CRON_TZ=UTC 0 2 * * *'); "
            "keep one",
        ),
    ],
)
def test_mistakes_are_one_line_naming_the_flag_and_value(expr: str, zone: str | None, line: str) -> None:
    with pytest.raises(UserError) as e:
        schedule(expr, zone)
    assert str(e.value) == line


# ----------------------------------------------------------------------------- waiting, fake clock


class FakeClock:
    """A wall clock that moves only when the code under test waits (or the test sets it)."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self.waits: list[float] = []
        #: (after this many waits, move the clock to) — a clock that is set while waiting
        self.jumps: dict[int, datetime] = {}
        self.wake_after: int | None = None

    def __call__(self) -> datetime:
        return self.now

    async def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += timedelta(seconds=seconds)
        if len(self.waits) in self.jumps:
            self.now = self.jumps[len(self.waits)]
        return self.wake_after is not None and len(self.waits) >= self.wake_after


def test_sleep_until_reaches_the_time_in_steps_reading_the_clock_again() -> None:
    clock = FakeClock(datetime(2026, 11, 24, 21, 30, tzinfo=UTC))
    when = schedule("0 2 * * *").next_after(clock())
    assert not asyncio.run(sleep_until(when, now=clock, wait=clock.wait, max_step=600))
    assert clock() == when  # not a second late
    assert len(clock.waits) == 27 and max(clock.waits) == 600  # 4.5 h in steps of at most 10 min


def test_a_clock_set_forward_or_back_keeps_the_cycle_on_its_wall_clock_time() -> None:
    start = datetime(2026, 11, 24, 1, 0, tzinfo=UTC)
    when = schedule("0 2 * * *").next_after(start)
    clock = FakeClock(start)
    clock.jumps = {1: datetime(2026, 11, 24, 0, 0, tzinfo=UTC)}  # NTP sets it back an hour (+ the step)
    asyncio.run(sleep_until(when, now=clock, wait=clock.wait, max_step=30))
    assert clock() == when
    assert sum(clock.waits) == pytest.approx(30 + 2 * 3600)
    clock = FakeClock(start)
    clock.jumps = {1: datetime(2026, 11, 24, 1, 59, 50, tzinfo=UTC)}  # or forward (a suspended VM wakes)
    asyncio.run(sleep_until(when, now=clock, wait=clock.wait, max_step=30))
    assert clock() == when and clock.waits == [30, 10]


def test_woken_early_returns_at_once() -> None:
    clock = FakeClock(datetime(2026, 11, 24, 21, 30, tzinfo=UTC))
    clock.wake_after = 2
    when = schedule("0 2 * * *").next_after(clock())
    assert asyncio.run(sleep_until(when, now=clock, wait=clock.wait, max_step=30))
    assert clock.waits == [30, 30]


# ----------------------------------------------------------------------------- the flags


def desched_run(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "run",
            "--policy-config-file",
            str(ROOT / "examples/policy.yaml"),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ("--descheduling-interval", "5m", "--descheduling-interval-cron-expression", "0 2 * * *"),
            "--descheduling-interval-cron-expression: cannot be given with --descheduling-interval "
            "(got '0 2 * * *' and an interval); keep one",
        ),
        (
            ("--descheduling-interval", "0", "--descheduling-interval-cron-expression", "0 2 * * *"),
            "--descheduling-interval-cron-expression: cannot be given with --descheduling-interval "
            "(got '0 2 * * *' and an interval); keep one",
        ),
        (
            ("--descheduling-interval-cron-time-zone", "Europe/Paris"),
            "--descheduling-interval-cron-time-zone: needs --descheduling-interval-cron-expression "
            "(got 'Europe/Paris')",
        ),
        (
            ("--descheduling-interval-cron-expression", "0 2 31 2 *"),
            "--descheduling-interval-cron-expression: not a valid cron expression",
        ),
    ],
)
def test_run_refuses_flag_mistakes_before_connecting(
    flags: tuple[str, ...], line: str, tmp_path: Path
) -> None:
    # a kubeconfig that exists (a missing one is a flag mistake of its own) for a server nobody runs
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, "
        "context: {cluster: c, user: u}}]\n"
    )
    proc = desched_run(*flags, "--kubeconfig", str(kubeconfig))
    assert proc.returncode == 2, proc.stderr
    [only] = proc.stderr.splitlines()
    assert only.startswith(f"desched: error: {line}"), only
