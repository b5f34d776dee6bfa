"""Fuzzing desched's command line: every option of every command, random values and combinations.

Each case is one command line: a command, its required arguments (valid), and a random set of its
options, each with a value drawn for its kind in desched.cli.flags' table (a valid one, a value
just outside its range, or junk: empty, NaN, huge, negative, control characters, paths that do
not exist). It runs ``desched.cli.main`` in-process in a scratch folder. The properties:

- no exception escapes ``main`` (a traceback), and the exit status is 0 or 2, never 1;
- on exit 2, stderr is one line ``desched: error: ...`` that names an option or a value given;
- each case ends within a bound (10 s): nothing connects anywhere. The last step of the commands
  that reach a cluster or serve (``desched.app.run.run``, ``desched.app.snapshot.save_snapshot``,
  ``desched.app.extender.run_extender``) is replaced by a stub that records its options; what
  comes before it (parsing, the flag table, the TLS context, the cron schedule, tracing set-up,
  the policy and scorer files) runs for real. ``simulate``, ``validate``, ``version`` and
  ``completion`` run whole.

The fast profile (the default: 40 derandomised cases per command) keeps ``.ci/run`` quick; the
long one is ``HYPOTHESIS_PROFILE=long`` (tests/unit/fuzz/profiles.py, docs/testing.md). What it
found is kept below as regression cases (``test_fuzz_cli_regressions``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import math
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.fuzz.profiles import budget

from desched.cli import build_parser, flags, main

ROOT = Path(__file__).resolve().parents[3]
#: one case's bound, seconds (a simulate of the example cluster takes well under one)
BOUND = 10.0

WORK = Path(tempfile.mkdtemp(prefix="desched-fuzz-cli-"))
SCORER = WORK / "scorer.yaml"
SCORER.write_text("left: {values: RatioToAllocatable, prefer: Most}\n")
CLUSTER = str(ROOT / "examples" / "cluster.yaml")
POLICY = str(ROOT / "examples" / "policy.yaml")
NOW = "2026-11-21T12:00:00Z"

#: the required arguments each command gets, valid
REQUIRED: dict[str, list[str]] = {
    "run": [f"--policy-config-file={POLICY}"],
    "simulate": [CLUSTER, f"--policy={POLICY}", f"--now={NOW}"],
    "validate": [POLICY],
    "version": [],
    "completion": ["bash"],
    "snapshot": [f"--output={WORK / 'snap.json'}"],
    "extender": [f"--config={SCORER}"],
}

JUNK = st.sampled_from(
    [
        "",
        " ",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "-1",
        "0",
        "1e400",
        "99999999999999999999",
        "x",
        "-",
        "--",
        "=",
        ",",
        "a=b",
        "\x00",
        "é",
        "1.5",
        "true",
        "/nonexistent/x",
        "5s",
        "-5s",
    ]
) | st.text(max_size=12)

DURATIONS = st.sampled_from(
    [
        "0",
        "0s",
        "1s",
        "500ms",
        "5m",
        "1h30m",
        "2m17s",
        "-1s",
        "",
        "5",
        "1e3s",
        "ms",
        "9999999999999h",
        "1.5h",
        "+3s",
        "1s1s",
    ]
)
#: values for options of each kind (valid ones first, then near misses)
BY_KIND: dict[str, st.SearchStrategy[str]] = {
    "int": st.integers(-5, 70000).map(str) | st.sampled_from(["1.5", "0x10", "", "1_000", "٣"]),
    "port": st.integers(-2, 70000).map(str) | st.sampled_from(["0", "", "1.0", "65536"]),
    "float": st.floats(allow_nan=True, allow_infinity=True).map(repr)
    | st.sampled_from(["nan", "inf", "-1", "0.5"]),
    "duration": DURATIONS,
    "quantity": st.sampled_from(["0", "512", "1Ki", "2Mi", "1k", "-1", "", "1.5Gi", "x", "1e3", "9" * 40]),
    "time": st.sampled_from(
        [
            NOW,
            "",
            "yesterday",
            "2026-11-21T12:00:00",
            "2026-11-21T12:00:00+02:00",
            "2026-13-01T00:00:00Z",
            "0",
        ]
    ),
    "map": st.sampled_from(
        [
            "",
            "EvictionsInBackground=true",
            "AllAlpha=false,AllBeta=true",
            "x=1",
            "loop=4",
            "node*=2,run=9",
            "loop",
            "=",
            "EvictionsInBackground=maybe",
        ]
    ),
    "list": st.sampled_from(
        [
            "",
            "23,29",
            "CurveP384",
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            "TLS_NOPE",
            "99",
            "a,b",
            "shop/web-1",
            "x.crt,x.key:a.example",
            ",,",
        ]
    ),
    "address": st.sampled_from(
        ["127.0.0.1", "0.0.0.0", "::1", "", "no.such.host.invalid", "256.1.1.1", "localhost", "10.255.255.1"]
    ),
    "name": st.sampled_from(["descheduler", "kube-system", "", "Big_Name", "a/b", "ns/name", "a/b/c", "-x"]),
    "endpoint": st.sampled_from(
        ["", "127.0.0.1:1", "http://127.0.0.1:1", "https://127.0.0.1:1/x", "::::", "ftp://x"]
    ),
    "cron": st.sampled_from(
        [
            "@daily",
            "0 2 * * *",
            "",
            "61 * * * *",
            "@every 1m",
            "@every 0s",
            "CRON_TZ=Mars/X 0 2 * * *",
            "* * *",
            "0 2 31 2 *",
        ]
    ),
    "zone": st.sampled_from(["UTC", "Europe/Paris", "", "Mars/Olympus", "../../etc/passwd", "/abs"]),
    "text": st.sampled_from(["", "desched", "a b", "é", "\n"]),
    "endpoint-file": st.just(""),
}
FILES = st.sampled_from(
    ["", "/nonexistent/file", str(WORK), "/dev/null", POLICY, CLUSTER, str(SCORER), "rel-missing.yaml"]
)
OUT_FILES = st.sampled_from(
    ["", "out.json", str(WORK / "out.json"), "/nonexistent/dir/x.json", str(WORK), "/dev/null"]
)
#: a scratch folder's children only: desched may create them (root could create any path)
OUT_DIRS = st.sampled_from(["", "certs", str(WORK / "certs"), str(SCORER), "/dev/null/x"])


def _actions(command: str) -> list[argparse.Action]:
    return [
        a for a in flags.command_actions(build_parser(), command) if a.option_strings and a.dest != "help"
    ]


def _value(kind: str) -> st.SearchStrategy[str]:
    if kind in ("file", "input"):
        base = FILES
    elif kind == "output-file":
        base = OUT_FILES
    elif kind == "output-dir":
        base = OUT_DIRS
    else:
        base = BY_KIND.get(kind, st.text(max_size=8))
    return st.one_of(base, base, JUNK)


@st.composite
def command_lines(draw: st.DrawFn, command: str) -> list[str]:
    argv = [command, *REQUIRED[command]]
    actions = _actions(command)
    chosen = draw(st.lists(st.sampled_from(actions), max_size=6, unique_by=lambda a: a.dest))
    for action in chosen:
        rule = flags.rule_for(command, action.dest)
        assert rule is not None
        spelling = draw(st.sampled_from(action.option_strings))
        if action.nargs == 0:  # store_true, --placement/--no-placement
            argv.append(spelling)
            continue
        if action.choices:
            value = draw(st.sampled_from([str(c) for c in action.choices]) | JUNK)
        else:
            value = draw(_value(rule.kind))
        if action.nargs == "?" and draw(st.booleans()):  # --dry-run alone
            argv.append(spelling)
        elif spelling.startswith("--") and draw(st.booleans()):
            argv.append(f"{spelling}={value}")
        else:
            argv += [spelling, value]
    if draw(st.booleans()):  # the logging options go before the command too
        argv = draw(st.sampled_from([["--v=2"], ["--logging-format=json"], ["-v", "x"], []])) + argv
    return argv


@contextlib.contextmanager
def _no_io(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The step that would connect or serve records its options and returns 0."""
    import desched.app.extender
    import desched.app.run
    import desched.app.snapshot

    calls: list[Any] = []

    def run(options: Any) -> int:
        calls.append(options)
        _sane(options)
        return 0

    async def save_snapshot(path: str, *args: Any, **kwargs: Any) -> int:
        calls.append((path, args, kwargs))
        folder = Path(path).absolute().parent
        assert folder.is_dir() and os.access(folder, os.W_OK), path  # the file can be written
        assert not Path(path).is_dir(), path
        assert kwargs["connect_timeout"] > 0
        return 0

    monkeypatch.setattr(desched.app.run, "run", run)
    monkeypatch.setattr(desched.app.extender, "run_extender", run)
    monkeypatch.setattr(desched.app.snapshot, "save_snapshot", save_snapshot)
    yield calls


def _sane(options: Any) -> None:
    """What reaches the step that connects or serves is usable: what the old code let through
    (a port of 99999, a NaN QPS, a lease shorter than its renewal) ended there in a traceback or
    after the connection's 30 s, so the stub checks it independently of the flag table."""
    port = getattr(options, "port", 0)
    assert 0 <= port <= 65535, port
    if hasattr(options, "qps"):  # run
        assert not math.isnan(options.qps), options.qps
        assert options.burst >= 0, options.burst
        assert options.interval >= 0 and math.isfinite(options.debounce) and options.debounce >= 0
        if options.leader_elect:
            lead = options.leader
            assert 0 < lead.retry_period < lead.renew_deadline < lead.lease_duration, lead
    if hasattr(options, "budget"):  # extender
        assert port >= 1 and options.budget > 0
    timeout = getattr(options, "connect_timeout", 1.0)
    assert timeout > 0, timeout


def run_main(argv: list[str]) -> tuple[int, str, str, float]:
    """``main`` in-process in the scratch folder: (exit status, stdout, stderr, seconds). An
    exception other than argparse's SystemExit propagates (the test fails with its traceback)."""
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    cwd = os.getcwd()
    os.chdir(WORK)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse's own exits (--help, a refused value)
                code = int(e.code or 0)
    finally:
        os.chdir(cwd)
        for handler in list(logging.getLogger().handlers):  # main configured logging onto `err`
            logging.getLogger().removeHandler(handler)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - started


def _escaped(text: str) -> str:
    return "".join(repr(c)[1:-1] if ord(c) < 32 or ord(c) == 127 else c for c in text)


def check(argv: list[str]) -> None:
    code, _out, err, took = run_main(argv)
    assert took < BOUND, f"{argv}: {took:.1f}s"
    assert code in (0, 2), f"{argv}: exit {code}\n{err}"
    if code == 2 and "--help" not in argv and "-h" not in argv:
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines, argv
        last = lines[-1]
        assert last.startswith("desched: error: ") or last.startswith('{"ts":'), (argv, err)
        said = [t.split("=", 1)[0] for t in argv if t.startswith("-")]
        said += [t.split("=", 1)[1] for t in argv if t.startswith("--") and "=" in t]
        said += [t for t in argv if not t.startswith("-")]
        # a control character the user wrote is shown escaped (desched.errors), as repr shows it
        named = any(s and (s in last or _escaped(s) in last or repr(s)[1:-1] in last) for s in said)
        # argparse's own words for an option are the option (`argument --x`), or a positional's name
        named = named or "argument " in last or "required" in last
        # a file given to an option that reads it (a policy, a snapshot) whose content is wrong:
        # the loader's line names the field in it (`apiVersion: must be ...`), as the policy tests want
        named = named or any(s and os.path.isfile(os.path.join(WORK, s)) for s in said)
        assert named, (argv, last)


#: the profile's budget; hypothesis' fixture check off (monkeypatch is reset once per test, and
#: each case sets the same stubs)
FUZZ = settings(
    budget(40), suppress_health_check=[*budget(40).suppress_health_check, HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("command", sorted(REQUIRED))
@FUZZ
@given(data=st.data())
def test_fuzz_cli_every_option(command: str, data: st.DataObject, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = data.draw(command_lines(command), label="argv")
    with _no_io(monkeypatch):
        check(argv)


#: command lines found wrong once (by the issue, or the fuzzer), with the exit status and the words
#: of the one line each must keep giving
REGRESSIONS: list[tuple[list[str], str]] = [
    (["run", f"--policy-config-file={POLICY}", "--secure-port=99999"], "--secure-port: must be between"),
    (["run", f"--policy-config-file={POLICY}", "--client-connection-qps=nan"], "--client-connection-qps"),
    (["run", f"--policy-config-file={POLICY}", "--client-connection-burst=-3"], "--client-connection-burst"),
    (["run", f"--policy-config-file={POLICY}", "--descheduling-interval="], "--descheduling-interval"),
    (
        [
            "run",
            f"--policy-config-file={POLICY}",
            "--leader-elect",
            "--descheduling-interval=1m",
            "--leader-elect-renew-deadline=5s",
            "--leader-elect-lease-duration=1s",
        ],
        "--leader-elect-renew-deadline: must be shorter than --leader-elect-lease-duration",
    ),
    (["simulate", CLUSTER, f"--policy={POLICY}", "--now="], "--now"),
    (["snapshot", "--output=/nonexistent/dir/x.json"], "--output: cannot write"),
    # found by the fuzzer: a policy flag given another kind of file is refused naming its field
    (["simulate", CLUSTER, f"--policy={SCORER}", f"--now={NOW}"], "apiVersion: must be descheduler/v1alpha2"),
    # found by the fuzzer: argparse hands `--flag=--` an empty list (a TypeError in logs.configure)
    (["completion", "bash", "--v=--"], "--v: must be a whole number, got --"),
    (
        ["snapshot", f"--output={WORK / 'snap.json'}", "--client-connection-kubeconfig", "\x80"],
        "--client-connection-kubeconfig: file '\\x80' does not exist",
    ),
    (["--logging-format=--", "version"], "--logging-format: must be one of a list, got --"),
    (["run", f"--policy-config-file={POLICY}", "--secure-port=--"], "--secure-port: must be a TCP port"),
]


@pytest.mark.parametrize(("argv", "said"), REGRESSIONS, ids=[" ".join(a[1:])[-50:] for a, _ in REGRESSIONS])
def test_fuzz_cli_regressions(argv: list[str], said: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _no_io(monkeypatch) as calls:
        code, _, err, took = run_main(argv)
    assert (code, calls) == (2, []), err
    assert err.startswith("desched: error: ") and said in err and err.count("\n") == 1, err
    assert took < BOUND
