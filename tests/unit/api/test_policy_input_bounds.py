"""Bad policy input ends in one line naming the field and exit 2: never a traceback, a hang or
unbounded memory (issue 17, "Tracebacks from bad input" and "Lax or unbounded input")."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.cli import main

POLICY_HEAD = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"


def validate(path: Path | str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    return code, err


def one_error(path: Path | str, capsys: pytest.CaptureFixture[str]) -> str:
    code, err = validate(path, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("desched: error: "), err
    assert len(lines[0]) < 400, lines[0][:500]
    return lines[0][len("desched: error: ") :]


def write(tmp_path: Path, text: str | bytes, name: str = "policy.yaml") -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def policy(args: dict[str, Any], plugin: str, point: str = "deschedule") -> str:
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": plugin, "args": args}],
                "plugins": {point: {"enabled": [plugin]}},
            }
        ],
    }
    return yaml.safe_dump(doc)


# ---------------------------------------------------------------------------- the file itself


def test_deeply_nested_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, '{"a":' * 1000 + "1" + "}" * 1000, "deep.json")
    assert "nested more than 64 levels deep" in one_error(p, capsys)


def test_deeply_nested_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, POLICY_HEAD + "x: " + "[" * 5000 + "]" * 5000 + "\n")
    err = one_error(p, capsys)
    assert "nested more than" in err or "exceeded maximum nesting depth" in err, err


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, POLICY_HEAD.encode() + b"profiles: [\xff\xfe]\n")
    assert one_error(p, capsys).endswith("not UTF-8 text (byte 0xff at offset 68)")


def test_alias_bomb_is_refused_before_it_expands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for n in "bcdefghi":
        text += f"{n}: &{n} [" + ",".join(["*" + prev] * 9) + "]\n"
        prev = n
    p = write(tmp_path, text + POLICY_HEAD + "profiles: *i\n")
    assert len(text) < 1024
    assert "YAML expands to more than 100000 values" in one_error(p, capsys)


def test_recursive_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, POLICY_HEAD + "profiles: &a [*a]\n")
    assert "alias refers to a value that contains it" in one_error(p, capsys)


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for text in ("", "\n  \n", "---\n"):
        p = write(tmp_path, text)
        assert one_error(p, capsys).endswith("empty file (expected a DeschedulerPolicy)")


@pytest.mark.timeout(20)
def test_not_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert one_error(fifo, capsys).endswith("cannot read policy file: not a regular file")
    assert one_error("/dev/zero", capsys).endswith("cannot read policy file: not a regular file")
    assert one_error(tmp_path, capsys).endswith("cannot read policy file: is a directory")
    assert "No such file" in one_error(tmp_path / "missing.yaml", capsys)


def test_oversized_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, POLICY_HEAD + "#" * (5 << 20) + "\n")
    assert "more than the 4194304 a policy file may have" in one_error(p, capsys)


def test_a_snapshot_given_as_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(__file__).resolve().parents[3]
    err = one_error(root / "examples" / "cluster.yaml", capsys)
    assert err.startswith("kind: this is a cluster snapshot ('List'), not a DeschedulerPolicy"), err


def test_a_huge_value_is_quoted_as_an_excerpt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, f"apiVersion: {'x' * 100_000}\nkind: DeschedulerPolicy\n")
    err = one_error(p, capsys)
    assert err.startswith("apiVersion: must be descheduler/v1alpha2") and "..." in err


# ---------------------------------------------------------------------------- v1alpha1


def v1alpha1(strategy: str, body: str) -> str:
    return (
        "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies:\n"
        f"  {strategy}:\n" + "".join(f"    {line}\n" for line in body.splitlines())
    )


LNU_THRESHOLDS = "nodeResourceUtilizationThresholds: {thresholds: {cpu: 20}, targetThresholds: {cpu: 50}}"


@pytest.mark.parametrize("strategy", ["LowNodeUtilization", "HighNodeUtilization"])
@pytest.mark.parametrize("value", ["null", "[a, b]", "kube-system"])
def test_v1alpha1_namespaces_of_the_wrong_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str, value: str
) -> None:
    thresholds = (
        LNU_THRESHOLDS
        if strategy == "LowNodeUtilization"
        else "nodeResourceUtilizationThresholds: {thresholds: {cpu: 20}}"
    )
    body = f"enabled: true\nparams:\n  namespaces: {value}\n  {thresholds}"
    p = write(tmp_path, v1alpha1(strategy, body))
    if value == "null":  # no namespaces: valid
        assert validate(p, capsys)[0] == 0
        return
    err = one_error(p, capsys)
    shown = {"[a, b]": "['a', 'b']", "kube-system": "'kube-system'"}[value]
    assert (
        err
        == f"strategies.{strategy}.params.namespaces: must be an object with include or exclude, got {shown}"
    )


@pytest.mark.parametrize("phases", ["Pending", "[1, 2]", "{a: b}"])
def test_v1alpha1_pod_status_phases_not_strings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], phases: str
) -> None:
    body = f"enabled: true\nparams:\n  podLifeTime: {{maxPodLifeTimeSeconds: 60, podStatusPhases: {phases}}}"
    err = one_error(write(tmp_path, v1alpha1("PodLifeTime", body)), capsys)
    shown = {"Pending": "'Pending'", "[1, 2]": "[1, 2]", "{a: b}": "{'a': 'b'}"}[phases]
    field = "strategies.PodLifeTime.params.podLifeTime.podStatusPhases"
    assert err == f"{field}: must be a list of strings, got {shown}"


def test_v1alpha1_typo_in_a_strategy_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = (
        "enabled: true\nparms:\n  namespaces: {exclude: [kube-system]}\n"
        "  podLifeTime: {maxPodLifeTimeSeconds: 60}"
    )
    err = one_error(write(tmp_path, v1alpha1("PodLifeTime", body)), capsys)
    assert err == "strategies.PodLifeTime.parms: unknown field (a strategy has enabled, weight, params)"


# ---------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("plugin", "point", "args", "expected"),
    [
        (
            "DefaultEvictor",
            "filter",
            {"minPodAge": "9999999999999h"},
            "profiles[0].pluginConfig[0].args.minPodAge: duration '9999999999999h' is out of range",
        ),
        (
            "RemoveAnomalyPods",
            "deschedule",
            {"anomalyCondition": {"timeout": "99999999999999h"}},
            "profiles[0].pluginConfig[0].args.anomalyCondition.timeout: duration '99999999999999h' is out",
        ),
        (
            "RemoveAnomalyPods",
            "deschedule",
            {"nodeDowngradePolicy": {"ttl": "99999999999999h"}},
            "profiles[0].pluginConfig[0].args.nodeDowngradePolicy.ttl: duration '99999999999999h' is out",
        ),
        (
            "RemoveAnomalyPods",
            "deschedule",
            {"minPodStartupSeconds": 2**64},
            "profiles[0].pluginConfig[0].args.minPodStartupSeconds: number 18446744073709551616 is out",
        ),
        (
            "RemoveAnomalyPods",
            "deschedule",
            {"minPodStartupSeconds": 2**64 - 1},
            "profiles[0].pluginConfig[0].args.minPodStartupSeconds: input should be less than or equal to",
        ),
        # strict types, as upstream's decoder
        (
            "DefaultEvictor",
            "filter",
            {"nodeFit": "yes"},
            "profiles[0].pluginConfig[0].args.nodeFit: input should be a valid boolean, got 'yes'",
        ),
        (
            "RemovePodsHavingTooManyRestarts",
            "deschedule",
            {"podRestartThreshold": True},
            "profiles[0].pluginConfig[0].args.podRestartThreshold: input should be a valid integer, got True",
        ),
        (
            "RemovePodsHavingTooManyRestarts",
            "deschedule",
            {"podRestartThreshold": "7"},
            "profiles[0].pluginConfig[0].args.podRestartThreshold: input should be a valid integer, got '7'",
        ),
        # unknown keys where there was no model
        (
            "PodLifeTime",
            "deschedule",
            {
                "maxPodLifeTimeSeconds": 60,
                "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Exists", "valuez": []}]},
            },
            "profiles[0].pluginConfig[0].args.labelSelector.matchExpressions[0].valuez: unknown field",
        ),
        (
            "PrioritySort",
            "sort",
            {"order": "asc"},
            "profiles[0].pluginConfig[0].args.order: unknown field (PrioritySort takes no args)",
        ),
        (
            "PodAgeSort",
            "sort",
            {"x": 1},
            "profiles[0].pluginConfig[0].args.x: unknown field",
        ),
        # the leaf field and the value (issue 15)
        (
            "LowNodeUtilization",
            "balance",
            {"thresholds": {"cpu": 120}, "targetThresholds": {"cpu": 150}},
            "profiles[0].pluginConfig[0].args.thresholds.cpu: must be between 0 and 100, got 120",
        ),
    ],
)
def test_bad_values(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    plugin: str,
    point: str,
    args: dict[str, Any],
    expected: str,
) -> None:
    err = one_error(write(tmp_path, policy(args, plugin, point)), capsys)
    assert err.startswith(expected), err


def test_strict_types_still_accept_native_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Upstream accepts what JSON and YAML give natively: an int for a float, durations as strings."""
    text = policy(
        {"thresholds": {"cpu": 20, "memory": 20.5}, "targetThresholds": {"cpu": 50, "memory": 70}},
        "LowNodeUtilization",
        "balance",
    )
    assert validate(write(tmp_path, text), capsys)[0] == 0
    args = {"minPodAge": "1h30m", "nodeFit": True, "priorityThreshold": {"value": 100}}
    assert validate(write(tmp_path, policy(args, "DefaultEvictor", "filter")), capsys)[0] == 0


def test_a_newline_in_a_key_stays_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = write(tmp_path, POLICY_HEAD + 'maxNoOfPodsToEvictPerNode: {"a\\nb": 99999999999999999999999}\n')
    assert one_error(p, capsys) == (
        "maxNoOfPodsToEvictPerNode['a\\nb']: number 99999999999999999999999 is out of range"
    )
