"""The one table of desched's command-line options, and the check that runs it before any I/O.

Each option of each command has an entry in :data:`FLAGS`, keyed by ``(command, dest)``
(``"*"``: the logging options every command takes): its kind (what the value is), its range and
unit. :data:`RELATIONS` holds the rules between options (one shorter than another, options that
exclude or need each other, a port that must be free). :func:`validate` runs both on the parsed
arguments before a command reads a policy, connects to a cluster or serves anything, so a bad
value is one line naming the option and the value, exit code 2, at once.

A new option cannot skip this: ``tests/unit/cli/test_flag_table.py`` walks every option of every
command and fails on one that has no entry here, or whose argparse converter does not match its
kind.
"""

from __future__ import annotations

import argparse
import errno
import math
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from desched.errors import UserError

#: what a kind of option holds (the unit a range is in)
KINDS = {
    "bool": "true or false",
    "int": "a whole number",
    "float": "a number",
    "duration": "a Go duration (seconds)",
    "port": "a TCP port",
    "choice": "one of a list",
    "text": "free text",
    "name": "a Kubernetes name",
    "file": "a file to read",
    # read before any cluster I/O by a loader whose one-line error names the file and the field
    "input": "a policy, snapshot or config file to read",
    "output-file": "a file to write",
    "output-dir": "a directory to write in (made if missing)",
    "report-target": "an .html file to write, or a directory to write index.html in",
    "time": "an RFC 3339 time",
    "quantity": "a quantity of bytes",
    "list": "a comma-separated or repeated list",
    "map": "key=value pairs",
    "address": "a local address to listen on",
    "endpoint": "a collector address",
    "cron": "a cron expression",
    "zone": "an IANA time zone",
}


@dataclass(frozen=True)
class Flag:
    """What one option takes. ``minimum``/``maximum`` are inclusive, ``above`` exclusive, in the
    option's unit (seconds for durations, bytes for quantities)."""

    kind: str
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None
    #: an empty string is refused (otherwise an empty value means "not set", as upstream)
    nonempty: bool = False
    #: a check of its own (a cron expression, a time zone): None, or the reason the value is wrong
    check: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class Relation:
    """A rule between options of one command.

    - ``less``: ``flags[0] < flags[1]``
    - ``exclusive``: at most one of ``flags`` is set (``why`` names the first one's value)
    - ``requires``: ``flags[0]`` set needs ``flags[1]`` set
    - ``together``: all of ``flags`` set, or none
    - ``bindable``: ``flags`` = (port, address[, reuse-port]): the port can be listened on now
      (0: nothing is served)

    - ``repeats``: ``flags[0]`` on needs ``flags[1]`` > 0 or ``flags[2]`` set (something that
      comes back: leader election needs an interval or a cron schedule)

    ``when``: the rule holds only while this boolean option is on (leader election's timings
    matter only with ``--leader-elect``, as upstream checks them); ``unless``: not while this one is.
    """

    command: str
    kind: str
    flags: tuple[str, ...]
    when: str | None = None
    why: str = ""
    unless: str | None = None


def _time(value: Any) -> str | None:
    from desched.cli import parse_now

    try:
        parse_now(str(value))
    except UserError as e:
        return e.reason
    return None


def _curves(value: Any) -> str | None:
    from desched.runtime.tls import parse_curves

    try:
        parse_curves(value)
    except UserError as e:
        return e.reason
    return None


def _cron(value: Any) -> str | None:
    from desched.runtime.schedule import parse_schedule

    try:
        parse_schedule(str(value), None)
    except UserError as e:
        return e.reason
    return None


def _zone(value: Any) -> str | None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    text = str(value)
    if not text:
        return "must name a time zone such as Europe/Paris or UTC, got ''"
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {text!r} (an IANA name such as Europe/Paris or UTC)"
    return None


_LOGGING: dict[str, Flag] = {
    "help": Flag("bool"),
    "verbosity": Flag("int", minimum=0),
    "logging_format": Flag("choice"),
    "vmodule": Flag("map"),
    "log_flush_frequency": Flag("duration", minimum=0),
    "log_json_split_stream": Flag("bool"),
    "log_json_info_buffer_size": Flag("quantity", minimum=0),
    "log_text_split_stream": Flag("bool"),
    "log_text_info_buffer_size": Flag("quantity", minimum=0),
}

_CONNECT: dict[str, Flag] = {
    "kubeconfig": Flag("file"),
    "context": Flag("text"),
    "client_connection_timeout": Flag("duration", above=0),
}

FLAGS: dict[tuple[str, str], Flag] = {
    **{("*", dest): flag for dest, flag in _LOGGING.items()},
    ("", "command"): Flag("choice"),
    # simulate
    ("simulate", "snapshot"): Flag("input", nonempty=True),
    ("simulate", "policy"): Flag("input", nonempty=True),
    ("simulate", "now"): Flag("time", nonempty=True, check=_time),
    ("simulate", "output"): Flag("choice"),
    ("simulate", "explain"): Flag("list"),
    ("simulate", "namespace"): Flag("list"),
    ("simulate", "explain_all"): Flag("bool"),
    ("simulate", "placement"): Flag("bool"),
    ("simulate", "score"): Flag("choice"),
    ("simulate", "scorer_config"): Flag("input", nonempty=True),
    ("simulate", "placement_order"): Flag("choice"),
    ("simulate", "terminating_pods"): Flag("choice"),
    ("simulate", "kube_scheduler_config"): Flag("input", nonempty=True),
    ("simulate", "cycles"): Flag("int", minimum=1),
    ("simulate", "report"): Flag("report-target", nonempty=True),
    ("simulate", "webhook"): Flag("bool"),
    # validate
    ("validate", "policy"): Flag("input", nonempty=True),
    ("validate", "output"): Flag("choice"),
    # version, completion
    ("version", "output"): Flag("choice"),
    ("completion", "shell"): Flag("choice"),
    # snapshot
    ("snapshot", "output"): Flag("output-file", nonempty=True),
    **{("snapshot", dest): flag for dest, flag in _CONNECT.items()},
    ("snapshot", "events"): Flag("bool"),
    ("snapshot", "workloads"): Flag("bool"),
    # extender
    ("extender", "config"): Flag("input", nonempty=True),
    ("extender", "port"): Flag("port", minimum=1, maximum=65535),
    ("extender", "bind_address"): Flag("address"),
    **{("extender", dest): flag for dest, flag in _CONNECT.items()},
    ("extender", "snapshot"): Flag("input", nonempty=True),
    ("extender", "tls_cert_file"): Flag("file"),
    ("extender", "tls_private_key_file"): Flag("file"),
    ("extender", "timeout_budget"): Flag("duration", above=0),
    # run
    ("run", "policy_config_file"): Flag("input", nonempty=True),
    ("run", "descheduling_interval"): Flag("duration", minimum=0),
    ("run", "descheduling_interval_cron_expression"): Flag("cron", check=_cron),
    ("run", "descheduling_interval_cron_time_zone"): Flag("zone", check=_zone),
    ("run", "dry_run"): Flag("bool"),
    **{("run", dest): flag for dest, flag in _CONNECT.items()},
    # client-go: QPS 0 is its default (5), a negative QPS turns the limit off; NaN means nothing
    ("run", "client_connection_qps"): Flag("float"),
    # client-go: burst 0 is its default (10); a negative burst lets no request through
    ("run", "client_connection_burst"): Flag("int", minimum=0, maximum=2**31 - 1),
    ("run", "leader_elect"): Flag("bool"),
    ("run", "leader_elect_lease_duration"): Flag("duration", above=0),
    ("run", "leader_elect_renew_deadline"): Flag("duration", above=0),
    ("run", "leader_elect_retry_period"): Flag("duration", above=0),
    ("run", "leader_elect_resource_lock"): Flag("choice"),
    ("run", "leader_elect_resource_name"): Flag("name", nonempty=True),
    ("run", "leader_elect_resource_namespace"): Flag("name", nonempty=True),
    ("run", "leader_elect_identity"): Flag("text"),
    ("run", "safety_state_configmap"): Flag("name", nonempty=True),
    ("run", "secure_port"): Flag("port", minimum=0, maximum=65535),
    ("run", "bind_address"): Flag("address"),
    ("run", "tls_cert_file"): Flag("file"),
    ("run", "tls_private_key_file"): Flag("file"),
    ("run", "cert_dir"): Flag("output-dir"),
    ("run", "http"): Flag("bool"),
    ("run", "disable_metrics"): Flag("bool"),
    ("run", "event_driven"): Flag("bool"),
    ("run", "event_debounce"): Flag("duration", minimum=0),
    ("run", "settling_window"): Flag("duration", minimum=0),
    ("run", "reload_policy"): Flag("bool"),
    ("run", "feature_gates"): Flag("map"),
    ("run", "otel_collector_endpoint"): Flag("endpoint"),
    ("run", "otel_transport_ca_cert"): Flag("file"),
    ("run", "otel_service_name"): Flag("text"),
    ("run", "otel_trace_namespace"): Flag("text"),
    ("run", "otel_sample_rate"): Flag("float"),
    ("run", "otel_fallback_no_op_on_error"): Flag("bool"),
    ("run", "tls_min_version"): Flag("choice"),
    ("run", "tls_cipher_suites"): Flag("list"),
    ("run", "tls_curve_preferences"): Flag("list", check=_curves),
    ("run", "tls_sni_cert_key"): Flag("list"),
    ("run", "permit_port_sharing"): Flag("bool"),
    ("run", "permit_address_sharing"): Flag("bool"),
    ("run", "enable_http2"): Flag("bool"),
    ("run", "disable_http2_serving"): Flag("bool"),
    ("run", "http2_max_streams_per_connection"): Flag("int", minimum=0, maximum=2**32 - 1),
}

RELATIONS: tuple[Relation, ...] = (
    Relation(
        "run",
        "less",
        ("leader_elect_renew_deadline", "leader_elect_lease_duration"),
        when="leader_elect",
        why="a leader must give up before its lease runs out",
    ),
    Relation(
        "run",
        "less",
        ("leader_elect_retry_period", "leader_elect_renew_deadline"),
        when="leader_elect",
        why="the leader must retry at least once before it gives up",
    ),
    Relation(
        "run",
        "repeats",
        ("leader_elect", "descheduling_interval", "descheduling_interval_cron_expression"),
        unless="dry_run",
        why="a one-shot run has nothing to lead",
    ),
    Relation(
        "run",
        "exclusive",
        ("descheduling_interval", "descheduling_interval_cron_expression"),
        why="an interval",
    ),
    Relation(
        "run", "requires", ("descheduling_interval_cron_time_zone", "descheduling_interval_cron_expression")
    ),
    Relation("run", "together", ("tls_cert_file", "tls_private_key_file")),
    Relation("run", "bindable", ("secure_port", "bind_address", "permit_port_sharing")),
    Relation("extender", "together", ("tls_cert_file", "tls_private_key_file")),
    Relation("extender", "bindable", ("port", "bind_address")),
)


def rule_for(command: str, dest: str) -> Flag | None:
    return FLAGS.get((command, dest)) or FLAGS.get(("*", dest))


def option_name(action: argparse.Action) -> str:
    """How the messages name an option: its first long spelling (or its metavar, a positional)."""
    longs = [s for s in action.option_strings if s.startswith("--")]
    if longs:
        return longs[0]
    if action.option_strings:
        return action.option_strings[0]
    return str(action.metavar or action.dest).upper()


def command_actions(parser: argparse.ArgumentParser, command: str) -> list[argparse.Action]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    child: argparse.ArgumentParser = sub.choices[command]
    return list(child._actions)


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else str(int(value))
    return repr(value) if isinstance(value, str) else str(value)


def _is_set(value: Any) -> bool:
    return value is not None and value is not argparse.SUPPRESS and value != "" and value is not False


#: the Python type each kind's value has once parsed (str for the rest)
_PYTHON_TYPES: dict[str, type | tuple[type, ...]] = {
    "bool": bool,
    "int": int,
    "port": int,
    "float": (float, int),
    "duration": (float, int),
    "quantity": int,
    "list": list,
    "map": dict,
}


def check_value(flag: Flag, name: str, value: Any, raw: Any = None) -> None:
    """Raise a one-line :class:`UserError` naming ``name`` when ``value`` breaks ``flag``."""
    if value is None or value is argparse.SUPPRESS:
        return
    shown = raw if raw is not None else _shown(value)
    expected = _PYTHON_TYPES.get(flag.kind, str)
    if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
        # argparse hands a flag written `--flag=--` an empty list: say what the flag takes
        raise UserError(name, f"must be {KINDS[flag.kind]}, got {raw if raw is not None else '--'}")
    if value == "" and not isinstance(value, bool):
        if flag.nonempty:
            raise UserError(name, f"must be {KINDS[flag.kind]}, got ''")
        return
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and math.isnan(value):
            raise UserError(name, f"must be a number, got {shown}")
        if flag.kind in ("int", "port") and isinstance(value, float):
            raise UserError(name, f"must be a whole number, got {shown}")
        if flag.minimum is not None and flag.maximum is not None:
            if not flag.minimum <= value <= flag.maximum:
                raise UserError(
                    name, f"must be between {_shown(flag.minimum)} and {_shown(flag.maximum)}, got {shown}"
                )
        elif flag.minimum is not None and value < flag.minimum:
            raise UserError(name, f"must be at least {_shown(flag.minimum)}, got {shown}")
        elif flag.maximum is not None and value > flag.maximum:
            raise UserError(name, f"must be at most {_shown(flag.maximum)}, got {shown}")
        if flag.above is not None and not value > flag.above:
            raise UserError(name, f"must be more than {_shown(flag.above)}, got {shown}")
        if flag.kind == "float" and math.isinf(value) and flag.maximum is not None:
            raise UserError(name, f"must be a finite number, got {shown}")
    if flag.kind == "file" and isinstance(value, str):
        _check_readable(name, value)
    elif flag.kind == "output-file" and isinstance(value, str):
        _check_writable_file(name, value)
    elif flag.kind == "output-dir" and isinstance(value, str):
        _check_writable_dir(name, value)
    elif flag.kind == "report-target" and isinstance(value, str):
        if Path(value).suffix.lower() in (".html", ".htm") and not Path(value).is_dir():
            _check_writable_dir(name, str(Path(value).parent))  # (made if missing)
        else:
            _check_writable_dir(name, value)
    if flag.check is not None:
        reason = flag.check(value)
        if reason:
            raise UserError(name, reason)


def _check_readable(name: str, path: str) -> None:
    # a pipe (<(kubectl get ...), /dev/stdin) is a real use: anything that exists and is not a folder
    p = Path(path)
    if not p.exists():
        raise UserError(name, f"file {path!r} does not exist")
    if p.is_dir():
        raise UserError(name, f"{path!r} is a directory, not a file")
    if not os.access(p, os.R_OK):
        raise UserError(name, f"file {path!r} cannot be read (permission denied)")


def _nearest_existing(p: Path) -> Path:
    p = p.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _check_writable_file(name: str, path: str) -> None:
    p = Path(path)
    if p.is_dir():
        raise UserError(name, f"{path!r} is a directory; give a file name")
    folder = p.absolute().parent
    if not folder.is_dir():
        raise UserError(name, f"cannot write {path!r}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(name, f"cannot write {path!r}: folder {str(folder)!r} is not writable")
    if p.exists() and not os.access(p, os.W_OK):
        raise UserError(name, f"cannot write {path!r}: permission denied")


def _check_writable_dir(name: str, path: str) -> None:
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(name, f"{path!r} is a file, not a directory")
    base = _nearest_existing(p)
    if not base.is_dir():
        raise UserError(name, f"cannot make directory {path!r}: {str(base)!r} is a file")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UserError(name, f"cannot write in {path!r}: {str(base)!r} is not writable")


def check_bindable(port_name: str, address_name: str, port: int, address: str, reuse_port: bool) -> None:
    """Listen on ``address:port`` for a moment, as the server will: a port in use, one that needs
    privileges, or an address this machine does not have is one line now, not a traceback later."""
    try:
        infos = socket.getaddrinfo(address or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise UserError(address_name, f"cannot listen on {address!r}: {e}") from None
    family, kind, proto, _, sockaddr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds it
        if reuse_port and hasattr(socket, "SO_REUSEPORT"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(sockaddr)
        sock.listen(1)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise UserError(port_name, f"port {port} on {address!r} is already in use") from None
        if e.errno == errno.EACCES:
            raise UserError(port_name, f"cannot listen on port {port}: permission denied") from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise UserError(address_name, f"{address!r} is not an address of this machine") from None
        raise UserError(port_name, f"cannot listen on {address!r} port {port}: {e.strerror or e}") from None
    finally:
        sock.close()


def _written(argv: Sequence[str], action: argparse.Action) -> str | None:
    """The spelling of an option the user wrote last (``--client-connection-kubeconfig`` rather
    than ``--kubeconfig``), so the message names what is on their command line."""
    found: str | None = None
    for token in argv:
        name = token.partition("=")[0]
        if name in action.option_strings and name.startswith("--"):  # -o is told as --output
            found = name
    return found


def _raw(argv: Sequence[str], action: argparse.Action) -> str | None:
    """The text the user wrote for an option (the last time), to name it in a message."""
    found: str | None = None
    for i, token in enumerate(argv):
        for spelling in action.option_strings:
            if token == spelling and i + 1 < len(argv):
                found = argv[i + 1]
            elif token.startswith(spelling + "="):
                found = token[len(spelling) + 1 :]
    return found


def validate(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str] = ()) -> None:
    """Check every option of ``args.command`` against :data:`FLAGS` and :data:`RELATIONS`; the first
    mistake is a :class:`UserError` naming the option and the value."""
    command = args.command
    actions = command_actions(parser, command)
    names = {action.dest: _written(argv, action) or option_name(action) for action in actions}
    relations = [r for r in RELATIONS if r.command == command]
    # which options go together is told first (it holds whatever their values), then each value,
    # then the rules that compare values or use them (a port that must be free)
    for rel in relations:
        if rel.kind in _STRUCTURAL:
            _check_relation(rel, args, names)
    for action in actions:
        if action.dest == "help":
            continue
        name = names[action.dest]
        flag = rule_for(command, action.dest)
        if flag is None:  # tests/unit/cli/test_flag_table.py keeps this from happening
            raise UserError(name, "has no entry in desched.cli.flags.FLAGS")
        value = getattr(args, action.dest, None)
        check_value(flag, name, value, _raw(argv, action) if not isinstance(value, str) else None)
    for rel in relations:
        if rel.kind not in _STRUCTURAL:
            _check_relation(rel, args, names)


_STRUCTURAL = frozenset({"exclusive", "requires", "together"})


def _check_relation(rel: Relation, args: argparse.Namespace, names: dict[str, str]) -> None:
    if rel.when is not None and not getattr(args, rel.when, False):
        return
    if rel.unless is not None and getattr(args, rel.unless, False):
        return
    values = [getattr(args, f, None) for f in rel.flags]
    shown = [names.get(f, f) for f in rel.flags]
    if rel.kind == "less":
        a, b = values
        if a is not None and b is not None and not a < b:
            raise UserError(
                shown[0],
                f"must be shorter than {shown[1]} ({rel.why}), got {_shown(a)}s and {_shown(b)}s",
            )
    elif rel.kind == "exclusive":
        given = [(n, v) for n, v in zip(shown, values, strict=True) if _is_set(v)]
        if len(given) > 1:
            (first, _), (last, value) = given[0], given[-1]
            raise UserError(last, f"cannot be given with {first} (got {value!r} and {rel.why}); keep one")
    elif rel.kind == "requires":
        if _is_set(values[0]) and not _is_set(values[1]):
            raise UserError(shown[0], f"needs {shown[1]} (got {values[0]!r})")
    elif rel.kind == "together":
        named = [n for n, v in zip(shown, values, strict=True) if _is_set(v)]
        if named and len(named) < len(values):
            missing = [n for n in shown if n not in named]
            raise UserError(named[0], f"needs {', '.join(missing)} too (and the other way round)")
    elif rel.kind == "repeats":
        on, every, schedule = values
        if on and not (every or 0) > 0 and not _is_set(schedule):
            raise UserError(shown[0], f"needs {shown[1]} > 0 or {shown[2]} ({rel.why})")
    elif rel.kind == "bindable":
        port, address = values[0], values[1]
        reuse = bool(values[2]) if len(values) > 2 else False
        if port:
            check_bindable(shown[0], shown[1], int(port), str(address or ""), reuse)
