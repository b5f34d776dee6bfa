"""``--descheduling-interval-cron-expression``: cycles at fixed wall-clock times (Volcano's flag).

A :class:`CronSchedule` answers "when is the next cycle after this moment"; :func:`sleep_until`
waits for that moment on the wall clock. The cron arithmetic (fields, ranges, steps, ``L``/``W``/
``#``, daylight-saving gaps and repeats) is cronsim's. Written here, and kept small, is only what
makes Volcano's expressions work as they do there (robfig/cron's ``ParseStandard``):

- the descriptors ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/``@midnight``,
  ``@hourly`` (spelled as their five-field equivalents, which cronsim does not accept) and
  ``@every DURATION`` (every DURATION from the previous cycle, the first one DURATION after start);
- a ``CRON_TZ=Area/City`` (or ``TZ=``) prefix naming the time zone of the fields.

The time zone is, in this order: the prefix, ``--descheduling-interval-cron-time-zone``, the ``TZ``
environment variable, the machine's ``/etc/localtime``, else UTC (a container without zone data).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from desched.api.types import parse_go_duration
from desched.errors import UserError

log = logging.getLogger(__name__)

FLAG = "--descheduling-interval-cron-expression"
TZ_FLAG = "--descheduling-interval-cron-time-zone"

#: robfig/cron's descriptors, as five fields.
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_LOCALTIME = Path("/etc/localtime")


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron expression with the time zone its fields are read in."""

    expression: str
    #: The five fields cronsim evaluates ("" for ``@every``).
    fields: str
    zone: tzinfo
    zone_name: str
    #: ``@every DURATION``: a fixed period instead of fields.
    every: timedelta | None = None

    def next_after(self, moment: datetime) -> datetime:
        """The first time strictly after ``moment`` (an aware datetime) the schedule fires, in
        the schedule's zone."""
        local = moment.astimezone(self.zone)
        if self.every is not None:
            return local + self.every
        # cronsim works at whole seconds and may return ``moment`` itself when it matches
        start = local.replace(microsecond=0)
        for fire in CronSim(self.fields, start):
            if fire > local:
                return fire
        raise AssertionError("unreachable: a cron iterator never ends")  # pragma: no cover

    def describe(self) -> str:
        return f"{self.expression!r} ({self.zone_name})"


def parse_schedule(
    expression: str,
    time_zone: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    localtime: Path = _LOCALTIME,
) -> CronSchedule:
    """Parse a flag's value; a mistake is a one-line :class:`UserError` naming the flag and value."""
    env = os.environ if environ is None else environ
    text = " ".join(expression.split())
    zone_name: str | None = None
    zone_source = TZ_FLAG
    for prefix in ("CRON_TZ=", "TZ="):
        if text.startswith(prefix):
            zone_name, _, text = text[len(prefix) :].partition(" ")
            zone_source = FLAG
            if time_zone:
                raise UserError(
                    TZ_FLAG,
                    f"cannot be given with a {prefix} prefix in {FLAG} (got {time_zone!r} and "
                    f"{expression!r}); keep one",
                )
            break
    if not text:
        raise UserError(FLAG, f"needs a cron expression such as '0 2 * * *', got {expression!r}")
    every: timedelta | None = None
    fields = DESCRIPTORS.get(text.lower(), text)
    if text.lower().startswith("@every"):
        every = _every(text, expression)
        fields = ""
    elif fields.startswith("@"):
        known = ", ".join([*DESCRIPTORS, "@every DURATION"])
        raise UserError(FLAG, f"not a known descriptor (known: {known}), got {expression!r}")
    if zone_name is None and time_zone:
        zone_name = time_zone
    zone, name = _zone(zone_name, zone_source, env, localtime)
    if every is None:
        if len(fields.split()) != 5:
            raise UserError(
                FLAG,
                "must have five fields (minute hour day-of-month month day-of-week) or be a "
                f"descriptor such as @daily, got {expression!r}",
            )
        try:
            CronSim(fields, datetime.now(zone))
        except CronSimError as e:
            raise UserError(FLAG, f"not a valid cron expression ({e}), got {expression!r}") from None
    return CronSchedule(expression=expression, fields=fields, zone=zone, zone_name=name, every=every)


def _every(text: str, expression: str) -> timedelta:
    _, _, duration = text.partition(" ")
    try:
        period = parse_go_duration(duration.strip()) if duration.strip() else None
    except ValueError:
        period = None
    if period is None or period < timedelta(seconds=1):
        raise UserError(
            FLAG, f"@every needs a duration of at least 1s such as '@every 6h', got {expression!r}"
        )
    return timedelta(seconds=int(period.total_seconds()))  # robfig rounds to whole seconds


def _zone(name: str | None, source: str, env: Mapping[str, str], localtime: Path) -> tuple[tzinfo, str]:
    if name:
        try:
            return ZoneInfo(name), name
        except (ZoneInfoNotFoundError, ValueError):
            raise UserError(
                source, f"unknown time zone {name!r} (an IANA name such as 'Europe/Paris' or 'UTC')"
            ) from None
    tz = env.get("TZ", "").lstrip(":")
    if tz:
        try:
            return ZoneInfo(tz), f"TZ={tz}"
        except (ZoneInfoNotFoundError, ValueError):
            log.warning("TZ=%r is not a known time zone; reading the cron expression in UTC", tz)
            return ZoneInfo("UTC"), "UTC"
    try:
        with localtime.open("rb") as f:
            return ZoneInfo.from_file(f, key=str(localtime)), "local time"
    except (OSError, ValueError):
        return ZoneInfo("UTC"), "UTC"


async def sleep_until(
    when: datetime,
    *,
    now: Callable[[], datetime],
    wait: Callable[[float], Awaitable[bool]],
    max_step: float = 30.0,
) -> bool:
    """Wait until the wall clock reads ``when``.

    ``wait(seconds)`` sleeps and returns True when woken early (a stop, an event-driven change);
    then this returns True at once. The clock is read again at least every ``max_step`` seconds,
    so a clock that is set or a machine that sleeps does not push the cycle off its time.
    """
    while True:
        remaining = (when - now()).total_seconds()
        if remaining <= 0:
            return False
        if await wait(min(remaining, max_step)):
            return True
