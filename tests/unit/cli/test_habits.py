"""The command's habits (issue 25 item 7): completion, version, help on every option, bare
``desched``, --policy/--policy-config-file on both commands, simulate -o yaml."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from desched import __version__
from desched.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]
CLUSTER = ROOT / "examples" / "cluster.yaml"
POLICY = ROOT / "examples" / "policy.yaml"
NOW = "2026-11-21T12:00:00Z"


def desched(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **sub.choices}


def test_every_option_and_argument_of_every_command_has_help() -> None:
    missing = [
        f"{name or 'desched'} {'/'.join(a.option_strings) or a.dest}"
        for name, parser in _commands().items()
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction) and not (a.help or "").strip()
    ]
    assert not missing, missing


def test_feature_gates_help_says_evictions_in_background_works() -> None:
    text = " ".join(desched("run", "--help").stdout.split())
    assert "not implemented" not in text
    assert "EvictionsInBackground (ALPHA: evictions that go on in background, for KubeVirt" in text
    # and it is: the gate reaches the run options (backends/background_evictions.py)
    args = build_parser().parse_args(["run", "--policy=/p", "--feature-gates=EvictionsInBackground=true"])
    assert args.feature_gates == {"EvictionsInBackground": True}


def test_bare_desched_lists_its_commands_and_exits_2() -> None:
    proc = desched()
    assert proc.returncode == 2 and proc.stdout == ""
    for command in ("run", "simulate", "validate", "snapshot", "extender", "version", "completion"):
        assert f"\n    {command} " in proc.stderr, command


def test_policy_and_policy_config_file_on_both_commands() -> None:
    parser = build_parser()
    assert parser.parse_args(["run", "--policy", "p.yaml"]).policy_config_file == "p.yaml"
    assert parser.parse_args(["simulate", "s", "--policy-config-file", "p.yaml"]).policy == "p.yaml"
    proc = desched("simulate", str(CLUSTER), "--policy-config-file", str(POLICY), "--now", NOW, "-o", "json")
    assert proc.returncode == 0, proc.stderr


def test_simulate_yaml_is_the_json_document() -> None:
    as_json = desched("simulate", str(CLUSTER), "--policy", str(POLICY), "--now", NOW, "-o", "json")
    as_yaml = desched("simulate", str(CLUSTER), "--policy", str(POLICY), "--now", NOW, "-o", "yaml")
    assert as_json.returncode == as_yaml.returncode == 0, as_yaml.stderr
    doc = yaml.safe_load(as_yaml.stdout)
    assert doc == json.loads(as_json.stdout)
    assert doc["evictions"]


def test_version_line_and_json() -> None:
    env = {
        "DESCHED_GIT_SHA": "0123456789abcdef0123456789abcdef01234567",
        "DESCHED_BUILD_DATE": "2026-11-29T08:00:00Z",
    }
    line = desched("version", env=env).stdout
    assert line.startswith(f"desched {__version__} (git 0123456789abcdef0123456789abcdef01234567, ")
    assert "built 2026-11-29T08:00:00Z" in line and sys.platform in line
    assert line.count("\n") == 1
    doc = json.loads(desched("version", "-o", "json", env=env).stdout)
    assert doc["version"] == __version__
    assert doc["gitCommit"] == "0123456789abcdef0123456789abcdef01234567"
    assert doc["buildDate"] == "2026-11-29T08:00:00Z"
    assert doc["python"] == ".".join(map(str, sys.version_info[:3]))
    assert doc["platform"].startswith(sys.platform)


def _bash_complete(words: list[str]) -> list[str]:
    script = desched("completion", "bash").stdout
    line = " ".join(words)
    program = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _desched; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30, check=True)
    return proc.stdout.split()


def test_bash_completion_completes_commands_options_and_choices() -> None:
    assert _bash_complete(["desched", "si"]) == ["simulate"]
    assert _bash_complete(["desched", "run", "--secure-p"]) == ["--secure-port"]
    assert "--explain-all" in _bash_complete(["desched", "simulate", "--ex"])
    assert _bash_complete(["desched", "simulate", "--output", "y"]) == ["yaml"]
    assert sorted(_bash_complete(["desched", "completion", "--logging-format", ""])) == ["json", "text"]
    assert _bash_complete(["desched", "run", "--policy-config-file", "exam"]) == []  # files: bash's default


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed on this machine")
def test_zsh_completion_loads_and_registers() -> None:
    script = desched("completion", "zsh").stdout
    assert script.startswith("#compdef desched\n")
    program = f"autoload -U compinit && compinit -u\n{script}\nprint -r -- ${{_comps[desched]}}"
    proc = subprocess.run(["zsh", "-f", "-c", program], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "_desched" in proc.stdout


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed on this machine")
def test_fish_completion_completes() -> None:
    script = desched("completion", "fish").stdout
    program = f"{script}\ncomplete -C 'desched run --secure-p'; complete -C 'desched simulate --output '"
    proc = subprocess.run(["fish", "--no-config", "-c", program], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = [line.split("\t")[0] for line in proc.stdout.splitlines()]
    assert "--secure-port" in got and {"table", "json", "yaml"} <= set(got)


def test_fish_script_is_one_complete_line_per_entry() -> None:
    script = desched("completion", "fish").stdout
    lines = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert all(line.startswith("complete -c desched") for line in lines)
    assert any("-l tls-curve-preferences" in line for line in lines)
    assert any("-s o -l output" in line or "-l output -s o" in line for line in lines)
