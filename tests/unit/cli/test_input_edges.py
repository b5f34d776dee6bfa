"""Edge cases of the user's inputs (issue 30 item 2): each ends in one line naming the field and
exit 2, or is read exactly as meant; never a traceback, never a pod evicted by a selector dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.builders import list_doc, node_doc, pod_doc

from desched.api.policy import load_policy_file
from desched.cli import main
from desched.cluster.file_source import load_snapshot_file
from desched.errors import PolicyError, SnapshotError
from desched.plugins import default_registry

NOW = "2025-06-01T12:00:00Z"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run(capsys, *argv)
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("desched: error: ")
    return lines[0][len("desched: error: ") :]


def _duplicates_snapshot(tmp_path: Path) -> Path:
    """Three replicas of one ReplicaSet on node-a (only web-2 and web-3 labelled app=web), node-b empty."""
    rs = ("ReplicaSet", "web-rs")
    items = [
        node_doc("node-a"),
        node_doc("node-b"),
        pod_doc("web-1", node="node-a", owner=rs, cpu="100m", created="2025-05-01T00:00:00Z"),
        *(
            pod_doc(
                n, node="node-a", owner=rs, cpu="100m", labels={"app": "web"}, created="2025-05-01T00:00:00Z"
            )
            for n in ("web-2", "web-3")
        ),
    ]
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(list_doc(items)))
    return path


def _v1alpha1(strategy: str, params: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "descheduler/v1alpha1",
        "kind": "DeschedulerPolicy",
        "strategies": {strategy: {"enabled": True, "params": params}},
    }


@pytest.mark.parametrize("strategy", ["RemoveDuplicates", "LowNodeUtilization", "HighNodeUtilization"])
@pytest.mark.parametrize(
    "selector", [{"matchLabels": {"app": "web"}}, {"matchLabels": {"app": "not a valid value!"}}]
)
def test_v1alpha1_label_selector_is_refused_where_upstream_ignored_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str, selector: dict[str, object]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(_v1alpha1(strategy, {"labelSelector": selector})))
    line = one_line_error(capsys, "validate", str(policy))
    assert line.startswith(
        f"strategies.{strategy}.params.labelSelector: {strategy} does not filter pods by label"
    )
    line = one_line_error(
        capsys, "simulate", str(_duplicates_snapshot(tmp_path)), "--policy", str(policy), "--now", NOW
    )
    assert line.startswith(f"strategies.{strategy}.params.labelSelector:")


def test_v1alpha1_label_selector_still_filters_where_upstream_honoured_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.yaml"
    params = {"podLifeTime": {"maxPodLifeTimeSeconds": 60}, "labelSelector": {"matchLabels": {"app": "web"}}}
    policy.write_text(yaml.safe_dump(_v1alpha1("PodLifeTime", params)))
    snap = _duplicates_snapshot(tmp_path)
    code, out, err = run(capsys, "simulate", str(snap), "--policy", str(policy), "--now", NOW, "-o", "json")
    assert code == 0, err
    evicted = sorted(e["name"] for e in json.loads(out)["evictions"])
    assert evicted == ["web-2", "web-3"]  # web-1 has no labels: outside the selector


def _v2(profile: dict[str, object], **top: object) -> dict[str, object]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [{"name": "p", **profile}],
        **top,
    }


_LIFETIME = {
    "pluginConfig": [{"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}}],
    "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
}
_ANOMALY = {"plugins": {"deschedule": {"enabled": ["RemoveAnomalyPods"]}}}


@pytest.mark.parametrize("blank", ["", "  "])
@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (
            _v2({"pluginConfig": [{"name": "DefaultEvictor", "args": {"minPodAge": "{}"}}]}),
            "profiles[0].pluginConfig[0].args.minPodAge",
        ),
        (
            _v2(
                {
                    **_ANOMALY,
                    "pluginConfig": [
                        {"name": "RemoveAnomalyPods", "args": {"anomalyCondition": {"timeout": "{}"}}}
                    ],
                }
            ),
            "profiles[0].pluginConfig[0].args.anomalyCondition.timeout",
        ),
        (
            _v2(
                {
                    **_ANOMALY,
                    "pluginConfig": [
                        {"name": "RemoveAnomalyPods", "args": {"nodeDowngradePolicy": {"ttl": "{}"}}}
                    ],
                }
            ),
            "profiles[0].pluginConfig[0].args.nodeDowngradePolicy.ttl",
        ),
        (_v2(_LIFETIME, evictionPolicy={"cooldown": {"base": "{}"}}), "evictionPolicy.cooldown.base"),
        (
            _v2(
                _LIFETIME, evictionPolicy={"disruptionWindows": [{"schedule": "0 1 * * *", "duration": "{}"}]}
            ),
            "evictionPolicy.disruptionWindows[0].duration",
        ),
        (
            _v2(_LIFETIME, evictionPolicy={"waitForReplacement": {"timeout": "{}"}}),
            "evictionPolicy.waitForReplacement.timeout",
        ),
    ],
)
def test_an_empty_duration_is_one_line_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict[str, object], field: str, blank: str
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(doc).replace('"{}"', json.dumps(blank)))
    line = one_line_error(capsys, "validate", str(policy))
    assert line.startswith(f"{field}: ") and "empty" in line, line


def test_an_empty_duration_flag_is_one_line_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["run", "--descheduling-interval", ""])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    assert err[-1].startswith("desched: error: argument --descheduling-interval: "), err


@pytest.mark.parametrize(
    "durations",
    [
        {"base": "500ms"},
        {"base": "1.5s", "max": "1m0.25s", "window": "36h"},
        {"base": "250us", "max": "1.25ms", "window": "1h0m0.000001s"},
        {"base": "7µs", "window": "2562047h47m16.854775807s"},
        {"base": "90s", "max": "1h30m"},
    ],
)
def test_validate_prints_durations_that_validate_to_the_same_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], durations: dict[str, str]
) -> None:
    """Issue 24: `base: 500ms` was printed as `0s`, which validate then refused."""
    first = tmp_path / "policy.yaml"
    windows = [{"schedule": "0 1 * * *", "duration": durations["base"]}]
    first.write_text(
        json.dumps(
            _v2(
                _LIFETIME,
                evictionPolicy={
                    "cooldown": durations,
                    "disruptionWindows": windows,
                    "waitForReplacement": {"timeout": durations["base"]},
                },
            )
        )
    )
    code, printed, err = run(capsys, "validate", str(first))
    assert code == 0, err
    second = tmp_path / "normalised.yaml"
    second.write_text(printed)
    code, again, err = run(capsys, "validate", str(second))
    assert code == 0, err
    assert again == printed
    registry = default_registry(entry_points=False)
    assert (
        load_policy_file(second, registry).eviction_policy
        == load_policy_file(first, registry).eviction_policy
    )


@pytest.mark.parametrize(
    ("text", "got"),
    [("5\n", "a number"), ("[1, 2]\n", "a list"), ("just text\n", "a string"), ("true\n", "a boolean")],
)
def test_a_policy_that_is_not_an_object_names_the_file_and_what_was_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, got: str
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    line = one_line_error(capsys, "validate", str(policy))
    assert line == (
        f"{policy}: expected a DeschedulerPolicy (an object with apiVersion, kind and profiles), got {got}"
    )


def test_an_empty_path_says_the_path_is_empty() -> None:
    """(The command line refuses an empty path first; the readers say it too, for other callers.)"""
    with pytest.raises(PolicyError) as policy_error:
        load_policy_file("", default_registry(entry_points=False))
    assert (
        str(policy_error.value)
        == "cannot read policy file: the path is empty (expected the path of a policy file)"
    )
    with pytest.raises(SnapshotError) as snapshot_error:
        load_snapshot_file("")
    assert (
        str(snapshot_error.value)
        == "cannot read snapshot: the path is empty (expected the path of a snapshot file)"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('  "plugin Config": []\n', "profiles[0]['plugin Config']: unknown field"),
        ('  "a:b": 1\n', "profiles[0]['a:b']: unknown field"),
        ('  "": 1\n', "profiles[0]['']: unknown field"),
    ],
)
def test_a_key_that_is_not_a_plain_name_is_quoted_in_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: p\n" + text
    )
    assert one_line_error(capsys, "validate", str(policy)) == expected


def test_a_v1alpha1_key_with_a_blank_is_quoted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(json.dumps(_v1alpha1("RemoveDuplicates", {"label Selector": {}})))
    line = one_line_error(capsys, "validate", str(policy))
    assert line == "strategies.RemoveDuplicates.params['label Selector']: not a parameter of RemoveDuplicates"


@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_a_yaml_reader_error_is_file_line_column_and_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"apiVersion: v1\nkind: \x01List\n")
    good = tmp_path / "policy.yaml"
    good.write_text(json.dumps(_v2(_LIFETIME)))
    argv = ["validate", str(bad)] if command == "validate" else ["simulate", str(bad), "--policy", str(good)]
    line = one_line_error(capsys, *argv)
    assert "position" not in line and "<" not in line and "\\n" not in line, line
    assert line.startswith(f"{bad}: not valid YAML")
    assert line.endswith(
        " at line 2, column 7: unacceptable character #x0001: control characters are not allowed"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["validate", "a\x00b"], "a\\x00b: cannot read policy file: a path cannot hold a NUL character"),
        (
            ["simulate", "examples/cluster.yaml", "--policy", "\x00", "--now", NOW],
            "\\x00: cannot read policy file: a path cannot hold a NUL character",
        ),
        (
            ["simulate", "\x00", "--policy", "examples/policy.yaml", "--now", NOW],
            "\\x00: cannot read snapshot: a path cannot hold a NUL character",
        ),
    ],
)
def test_a_nul_in_a_path_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str], expected: str
) -> None:
    """Found by the long fuzz profile (test_fuzz_cli): os.stat's ValueError was a traceback."""
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    assert one_line_error(capsys, *argv) == expected
