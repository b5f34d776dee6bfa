"""Logging as Kubernetes components log: klog verbosity, klog-like text or JSON lines.

Written on the standard library's ``logging`` (the libraries desched uses log through it too):
a record's structured fields are its ``extra=`` keys. structlog would add a second logging model
and ~0.2 s of import time for what two small formatters do here.

Verbosity follows klog: ``-v N`` shows every line of V(N) and below, and warnings and errors
always. V(0) is a level of its own between INFO and WARNING (what a run decided: evictions, the
cycle summary), V(1) is ``logging.INFO``, V(2) and V(3) lie just below it, V(4) is
``logging.DEBUG`` and V(5) and up lie below DEBUG. So ``log.info`` means "shown from -v 1" and
``log.debug`` "shown from -v 4".

Text lines look like klog's::

    I1124 15:30:50.123456   12345 run.py:276] would evict pod=shop/web-1 node=n1 reason="too old"

JSON lines carry ``ts`` (seconds since the epoch, as klog's JSON), ``level``, ``caller``, ``msg``,
``v`` (the verbosity of an info line) and the structured fields; an exception adds ``err``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import logging
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import msgspec

#: klog's V(n) as logging levels.
V0 = logging.INFO + 5
V1 = logging.INFO
V2 = logging.INFO - 1
V3 = logging.INFO - 2
V4 = logging.DEBUG
V5 = logging.DEBUG - 1


def level_for(v: int) -> int:
    """The logging level of ``V(v)``."""
    if v <= 0:
        return V0
    if v < 4:
        return V1 - (v - 1)
    return max(V4 - (v - 4), 1)


def verbosity_of(levelno: int) -> int:
    """The klog verbosity of an info record's level (0 for warnings and errors)."""
    if levelno >= V0:
        return 0
    if levelno >= V1:
        return 1
    if levelno >= V3:
        return 1 + (V1 - levelno)
    if levelno >= V4:
        return 4
    return 4 + (V4 - levelno)


for _v in (0, 2, 3, 5, 6, 7, 8, 9):
    logging.addLevelName(level_for(_v), f"V{_v}")

#: Attributes every LogRecord has: anything else on a record came from ``extra=``.
_STANDARD = frozenset(
    [*vars(logging.LogRecord("", 0, "", 0, "", (), None)), "message", "asctime", "taskName"]
)


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD}


def _caller(record: logging.LogRecord) -> str:
    return f"{record.filename}:{record.lineno}"


_NEEDS_QUOTES = frozenset(' "=\\\t\n\r')
#: the same characters as a regex: one C-level scan per value (a generator over the characters cost
#: a fifth of the CPU of a dry run's 25,000 eviction lines)
_NEEDS_QUOTES_RE = re.compile("[" + re.escape("".join(sorted(_NEEDS_QUOTES))) + "]")


def _text_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(round(value, 6)) if isinstance(value, float) else str(value)
    text = value if isinstance(value, str) else str(value)
    if not text or _NEEDS_QUOTES_RE.search(text):
        return json.dumps(text, ensure_ascii=False)
    return text


class KlogTextFormatter(logging.Formatter):
    """klog's header (level letter, date, time, pid, file:line), the message, then key=value fields."""

    _LETTERS = {logging.CRITICAL: "F", logging.ERROR: "E", logging.WARNING: "W"}

    def __init__(self) -> None:
        super().__init__()
        self._pid = os.getpid()

    def format(self, record: logging.LogRecord) -> str:
        letter = self._LETTERS.get(record.levelno, "I" if record.levelno < logging.WARNING else "E")
        t = time.localtime(record.created)
        micros = int((record.created % 1) * 1_000_000)
        head = (
            f"{letter}{t.tm_mon:02d}{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}."
            f"{micros:06d} {self._pid:7d} {_caller(record)}] "
        )
        parts = [head + record.getMessage()]
        for key, value in fields_of(record).items():
            parts.append(f"{key}={_text_value(value)}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
        return line


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    return str(value)


_JSON_SCALARS = frozenset([str, int, float, bool, type(None)])
_json_encode = msgspec.json.Encoder().encode


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, caller, msg, v, then the structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": "error"
            if record.levelno >= logging.ERROR
            else "warning"
            if record.levelno >= logging.WARNING
            else "info",
            "caller": _caller(record),
            "msg": record.getMessage(),
        }
        if record.levelno < logging.WARNING:
            doc["v"] = verbosity_of(record.levelno)
        finite = True  # json writes NaN and Infinity, msgspec null: such a line goes to json
        for key, value in fields_of(record).items():
            if key not in doc:
                kind = type(value)
                if kind is float:
                    finite = finite and math.isfinite(value)
                elif kind not in _JSON_SCALARS:
                    value = _json_value(value)
                doc[key] = value
        if record.exc_info:
            doc["err"] = "".join(traceback.format_exception_only(record.exc_info[1])).strip()
            doc["stacktrace"] = "".join(traceback.format_exception(*record.exc_info)).rstrip()
        try:
            # the same JSON values as json.dumps(ensure_ascii=False, separators=(",", ":")) (an
            # exponent is written 1e16, not 1e+16), faster: a dry-run cycle can log tens of
            # thousands of lines
            if finite:
                return _json_encode(doc).decode()
        except (TypeError, ValueError, UnicodeEncodeError):  # e.g. a lone surrogate
            pass
        return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


class _VModuleFilter(logging.Filter):
    """Per-module verbosity (klog's --vmodule): a glob over the module's name, last part or whole."""

    def __init__(self, default: int, patterns: dict[str, int]) -> None:
        super().__init__()
        self.default = default
        self.patterns = patterns
        self._cache: dict[str, int] = {}

    def threshold(self, name: str) -> int:
        level = self._cache.get(name)
        if level is None:
            level = self.default
            short = name.rsplit(".", 1)[-1]
            for pattern, v in self.patterns.items():
                if fnmatch.fnmatchcase(short, pattern) or fnmatch.fnmatchcase(name, pattern):
                    level = level_for(v)
                    break
            self._cache[name] = level
        return level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING or not record.name.startswith("desched"):
            return True
        return record.levelno >= self.threshold(record.name)


class _BelowWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.WARNING


class _WarningAndUp(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


class _StreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A StreamHandler that can hold its lines and write them in batches (:func:`log_each`): a
    write and a flush per line cost a dry run's 25,000 eviction lines ~20 µs each on a pipe."""

    #: lines written together at most
    BATCH = 512

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        #: lines held (formatted, with their terminators) while :meth:`holding`; None: written at once
        self.held: list[str] | None = None
        self._last_held: logging.LogRecord | None = None

    def emit(self, record: logging.LogRecord) -> None:
        held = self.held
        if held is None:
            super().emit(record)
            return
        try:
            held.append(self.format(record) + self.terminator)
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
            return
        self._last_held = record
        if len(held) >= self.BATCH:
            self._write_held()

    def _write_held(self) -> None:
        held, record = self.held, self._last_held
        if not held or record is None:
            return
        held_text = "".join(held)
        held.clear()
        try:
            self.stream.write(held_text)
            self.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        """Hold the lines emitted in the block: written in order, in batches, the last at its end."""
        if self.held is not None:  # nested: the outer block writes them
            yield
            return
        self.acquire()
        self.held = []
        self.release()
        try:
            yield
        finally:
            self.acquire()
            try:
                self._write_held()
            finally:
                self.held = self._last_held = None
                self.release()


_vmodule: _VModuleFilter | None = None


def configure(
    verbosity: int = 0,
    fmt: str = "text",
    vmodule: dict[str, int] | None = None,
    *,
    split_stream: bool = False,
    stream: TextIO | None = None,
) -> None:
    """Set up the root logger once per process (the command line's logging flags)."""
    global _vmodule
    formatter: logging.Formatter = JsonFormatter() if fmt == "json" else KlogTextFormatter()
    patterns = dict(vmodule or {})
    threshold = level_for(verbosity)
    _vmodule = _VModuleFilter(threshold, patterns)
    handlers: list[logging.Handler] = []
    if split_stream:
        out = _StreamHandler(sys.stdout)
        out.addFilter(_BelowWarning())
        err = _StreamHandler(sys.stderr)
        err.addFilter(_WarningAndUp())
        handlers = [out, err]
    else:
        handlers = [_StreamHandler(stream if stream is not None else sys.stderr)]
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(_vmodule)
        root.addHandler(handler)
    # other libraries' info lines only at high verbosity; desched's own at the asked one
    root.setLevel(logging.WARNING if verbosity < 6 else logging.DEBUG)
    lowest = min([threshold, *(level_for(v) for v in patterns.values())])
    logging.getLogger("desched").setLevel(lowest)


def v_enabled(logger: logging.Logger, v: int) -> bool:
    """Is ``V(v)`` of this logger shown (its level, and --vmodule)? Cheap enough per cycle."""
    level = level_for(v)
    if not logger.isEnabledFor(level):
        return False
    return _vmodule is None or level >= _vmodule.threshold(logger.name)


def log_each(logger: logging.Logger, level: int, msg: str, extras: Iterable[dict[str, Any]]) -> None:
    """``logger.log(level, msg, extra=extra)`` for each of ``extras``, called from where this is,
    with the same lines, cheaper for many (a dry-run cycle's tens of thousands of evictions): the
    caller is found once and each record is a copy of one made once, with its own time and
    fields; desched's handlers write the lines in batches, not one write and flush each.

    The records go through the logger's filters and handlers as ``logger.log``'s do; ``msg`` is
    taken as is (no ``%`` arguments).
    """
    if not logger.isEnabledFor(level):
        return
    # stacklevel 2: the caller of log_each (logs.py is not logging's own file, so it is not skipped)
    fn, lno, func, sinfo = logger.findCaller(False, 2)
    template = logger.makeRecord(logger.name, level, fn, lno, msg, (), None, func, None, sinfo)
    base = template.__dict__
    created0, relative0 = template.created, template.relativeCreated
    handlers = [h for h in logging.getLogger().handlers if isinstance(h, _StreamHandler)]
    with contextlib.ExitStack() as stack:
        for h in handlers:
            stack.enter_context(h.holding())
        record_class = type(template)
        for extra in extras:
            record = record_class.__new__(record_class)
            fields = record.__dict__
            fields.update(base)
            now = time.time()
            record.created = now
            record.msecs = int((now - int(now)) * 1000) + 0.0
            record.relativeCreated = relative0 + (now - created0) * 1000
            for key in extra:
                if key in ("message", "asctime") or key in fields:
                    raise KeyError(f"Attempt to overwrite {key!r} in LogRecord")
            fields.update(extra)
            logger.handle(record)


def eviction_fields(record: Any) -> dict[str, Any]:
    """The structured fields of an eviction line (an ``EvictionRecord``); a surge's line
    (``evictionPolicy.surge``) adds ``method=surge`` and the Deployment it restarted."""
    fields = {
        "pod": f"{record.namespace}/{record.name}",
        "node": record.node,
        "profile": record.profile,
        "plugin": record.plugin,
        "reason": record.reason,
    }
    method = getattr(record, "method", "evict")
    if method != "evict":
        fields["method"] = method
        fields["target"] = record.target
    return fields


def _surged(evictions: Any) -> int:
    """Of the evictions, the pods moved by a rollout restart (``evictionPolicy.surge``)."""
    return sum(1 for r in evictions if getattr(r, "method", "evict") == "surge")


def cycle_fields(cycle: int, pods: int, result: Any, *, dry_run: bool) -> dict[str, Any]:
    """The structured fields of a cycle's summary line (a ``CycleResult``)."""
    return {
        "cycle": cycle,
        "pods": pods,
        "nodes": result.nodes,
        "evicted": len(result.evictions),
        "refused": len(result.failures),
        "unknown": len(result.unknown),
        # evictions the evictionPolicy skipped (issue 14), each told at --v=4 and in an Event
        "evictionsSkipped": len(result.skips),
        # of the evictions, the pods moved by a rollout restart (evictionPolicy.surge)
        **({"surged": surged} if (surged := _surged(result.evictions)) else {}),
        "dryRun": dry_run,
        "seconds": round(result.seconds, 3),
    }
