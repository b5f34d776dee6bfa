"""logs.log_each: the lines ``logger.log(level, msg, extra=...)`` would write, one per extra, from the
caller's line, written by desched's handlers in batches."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from desched import logs

FIELDS = [
    {"pod": f"shop/web-{i}", "node": f"n{i % 3}", "profile": "p", "plugin": "X", "reason": 'why "quoted"'}
    for i in range(1300)  # more than a batch (512): written in three writes
]


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, s: str) -> int:
        self.writes += 1
        return super().write(s)


@pytest.fixture
def configured() -> Iterator[None]:
    yield
    logs.configure(0, "text")


def _without_time(line: str, fmt: str) -> str:
    if fmt == "json":
        doc = json.loads(line)
        doc.pop("ts")
        return json.dumps(doc)
    return re.sub(r"^I\d{4} \d\d:\d\d:\d\d\.\d{6}", "I", line)


def _lines(fmt: str, emit: Any) -> tuple[list[str], int]:
    stream = CountingStream()
    logs.configure(2, fmt, stream=stream)
    emit(logging.getLogger("desched.test"))
    return [_without_time(line, fmt) for line in stream.getvalue().splitlines()], stream.writes


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_the_lines_are_logger_logs_from_the_callers_line(fmt: str, configured: None) -> None:
    def one_by_one(log: logging.Logger) -> None:
        for extra in FIELDS:
            log.log(logs.V0, "would evict", extra=extra)
        log.log(logs.V0, "cycle done")

    def at_once(log: logging.Logger) -> None:
        logs.log_each(log, logs.V0, "would evict", iter(FIELDS))  # (the caller)
        log.log(logs.V0, "cycle done")

    expected, writes = _lines(fmt, one_by_one)
    got, batched_writes = _lines(fmt, at_once)
    assert len(expected) == len(FIELDS) + 1
    # the same text but for the time and the caller's line, which is log_each's caller's
    source = Path(__file__).read_text().splitlines()
    each_line = next(i for i, text in enumerate(source, 1) if text.endswith("# (the caller)"))
    log_line = next(i for i, text in enumerate(source, 1) if 'log.log(logs.V0, "would evict"' in text)
    caller, log_caller = f"test_logs_each.py:{each_line}", f"test_logs_each.py:{log_line}"
    assert all(caller in line for line in got[:-1])
    assert got[:-1] == [line.replace(log_caller, caller) for line in expected[:-1]]
    assert got[-1] == expected[-1].replace(f":{log_line + 1}", f":{each_line + 1}")
    assert writes >= len(FIELDS) and batched_writes <= 5  # (one per line; three batches, cycle done)


def test_times_are_each_lines_own(configured: None) -> None:
    stream = io.StringIO()
    logs.configure(2, "json", stream=stream)
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    log = logging.getLogger("desched.test")
    keep = Keep()
    log.addHandler(keep)
    try:
        logs.log_each(log, logs.V0, "would evict", iter(FIELDS[:50]))
    finally:
        log.removeHandler(keep)
    # another handler (as pytest's caplog) gets every record at once, with its fields
    assert [r.__dict__["pod"] for r in records] == [f["pod"] for f in FIELDS[:50]]
    created = [r.created for r in records]
    assert created == sorted(created)
    for r in records:
        assert r.msecs == int((r.created - int(r.created)) * 1000)
        assert r.getMessage() == "would evict" and r.levelno == logs.V0
    assert [json.loads(line)["ts"] for line in stream.getvalue().splitlines()] == [
        round(t, 6) for t in created
    ]


def test_nothing_when_the_level_is_off_and_filters_apply(configured: None) -> None:
    stream = io.StringIO()
    logs.configure(0, "json", stream=stream, vmodule={"quiet": 0})
    logs.log_each(logging.getLogger("desched.test"), logs.V2, "hidden", iter(FIELDS))
    logs.configure(3, "json", stream=stream, vmodule={"quiet": 0})
    logs.log_each(logging.getLogger("desched.quiet"), logs.V2, "hidden by vmodule", iter(FIELDS))
    assert stream.getvalue() == ""


def test_a_field_that_would_overwrite_a_record_attribute_is_refused(configured: None) -> None:
    logs.configure(2, "json", stream=io.StringIO())
    with pytest.raises(KeyError, match="overwrite 'name'"):
        logs.log_each(logging.getLogger("desched.test"), logs.V0, "x", iter([{"name": "p"}]))


def test_lines_held_before_an_error_are_still_written(configured: None) -> None:
    stream = io.StringIO()
    logs.configure(2, "json", stream=stream)

    def fields() -> Iterator[dict[str, Any]]:
        yield FIELDS[0]
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        logs.log_each(logging.getLogger("desched.test"), logs.V0, "would evict", fields())
    logging.getLogger("desched.test").log(logs.V0, "after")
    assert [json.loads(line)["msg"] for line in stream.getvalue().splitlines()] == ["would evict", "after"]
