"""``desched simulate``'s output for real clusters: a summary table that stays short and narrow at
5,000 nodes (``-o wide`` for every row), ``--namespace``, numbered cycles with a total over them,
``-o json`` checked against docs/simulation-output.schema.json, and progress per step."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from benchmarks.generator import NOW as BENCH_NOW
from benchmarks.generator import ClusterSpec, cached_snapshot

from desched import cli
from desched.app import simulate as simulate_app

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = str(ROOT / "examples" / "cluster.yaml")
NOW = "2026-11-21T12:00:00Z"
SCHEMA = json.loads((ROOT / "docs" / "simulation-output.schema.json").read_text())

#: The summary's bounds: a person reads it top to bottom; a terminal of 200 columns shows every line.
MAX_LINES_PER_CYCLE = 250
MAX_COLUMNS = 200
#: The total is on the screen without scrolling.
TOTAL_BY_LINE = 30


def simulate(capsys: pytest.CaptureFixture[str], snapshot: str, *args: str) -> tuple[int, str, str]:
    code = cli.main(["simulate", snapshot, *args])
    out, err = capsys.readouterr()
    return code, out, err


def check_summary(out: str, cycles: int = 1) -> list[str]:
    lines = out.splitlines()
    assert len(lines) <= MAX_LINES_PER_CYCLE * cycles, len(lines)
    widest = max(lines, key=len)
    assert len(widest) <= MAX_COLUMNS, widest
    total = next(i for i, line in enumerate(lines) if line.startswith("Total: "))
    assert total < TOTAL_BY_LINE
    assert "{" not in lines[total]  # counts, not a Python dict
    for line in lines:
        if line.startswith("... "):
            assert re.fullmatch(r"\.\.\. [0-9]+ more [a-z ]+ \(-o wide lists them all\)", line), line
    return lines


def plugin_counts(lines: list[str]) -> dict[str, int]:
    """The evicted column of the 'Per plugin' table, per profile/plugin."""
    start = lines.index("Per plugin") + 2
    end = lines.index("", start)
    return {f"{c[0]}/{c[1]}": int(c[3]) for c in (row.split() for row in lines[start:end])}


@pytest.fixture(scope="module")
def cluster_300() -> str:
    return str(cached_snapshot(ClusterSpec(nodes=300))[0])


@pytest.mark.parametrize("nodes", [300, 5000])
def test_summary_stays_short_and_narrow_on_a_generated_cluster(
    nodes: int, capsys: pytest.CaptureFixture[str]
) -> None:
    # generated once and kept in ~/.cache/desched/bench (the 5,000-node one: ~35 s, 730 MB)
    path = str(cached_snapshot(ClusterSpec(nodes=nodes))[0])
    policy = str(ROOT / "benchmarks" / "policy-all.yaml")
    code, out, _ = simulate(capsys, path, "--policy", policy, "--now", BENCH_NOW)
    assert code == 0
    lines = check_summary(out)
    counts = plugin_counts(lines)
    total = next(line for line in lines if line.startswith("Total: "))
    evicted = int(total.split()[1])
    assert sum(counts.values()) == evicted > 1000  # a large result, summarised
    for key, n in counts.items():  # each plugin's list: its count, the first rows, how many more
        profile, plugin = key.split("/")
        if n:
            title = lines.index(f"Evicted by {profile} / {plugin}: {n}")
            rows = lines[title + 2 : lines.index("", title)]
            if n > 5:
                assert rows[-1] == f"... {n - 5} more evictions (-o wide lists them all)"
    assert any(line.startswith("Refused: ") for line in lines)


def test_wide_lists_every_row_uncut(cluster_300: str, capsys: pytest.CaptureFixture[str]) -> None:
    policy = str(ROOT / "benchmarks" / "policy-all.yaml")
    args = ("--policy", policy, "--now", BENCH_NOW)
    doc = json.loads(simulate(capsys, cluster_300, *args, "-o", "json")[1])
    code, out, _ = simulate(capsys, cluster_300, *args, "-o", "wide")
    assert code == 0
    assert "-o wide lists them all" not in out and "…" not in out
    rows = {line.split()[0]: line for line in out.splitlines() if re.match(r" *[0-9]+   ", line)}
    for i, e in enumerate(doc["evictions"], 1):
        assert rows[str(i)].split()[1:3] == [f"{e['namespace']}/{e['name']}", e["node"]]
        assert rows[str(i)].endswith(f"   {e['reason']}")
    for r in doc["refused"]:
        assert re.search(rf"^{r['namespace']}/{r['name']} +{r['node']}   ", out, re.M), r


def test_namespace_shows_only_that_namespaces_pods(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--policy", str(ROOT / "examples" / "policy.yaml"), "--now", NOW)
    everything = json.loads(simulate(capsys, EXAMPLE, *args, "-o", "json")[1])
    code, out, _ = simulate(capsys, EXAMPLE, *args, "-o", "json", "--namespace", "shop")
    assert code == 0
    doc = json.loads(out)
    assert doc["namespaces"] == ["shop"]
    shop = [e for e in everything["evictions"] if e["namespace"] == "shop"]
    assert doc["evictions"] == shop and 0 < len(shop) < len(everything["evictions"])
    assert {p["namespace"] for p in doc["placements"] + doc["gone"]} <= {"shop"}
    assert {k["namespace"] for k in doc["before"]["skew"]} <= {"shop"}
    jsonschema.validate(doc, SCHEMA)
    code, out, _ = simulate(capsys, EXAMPLE, *args, "--namespace", "shop")
    assert code == 0
    lines = out.splitlines()
    assert "(namespaces shop)" in lines[0]
    assert sum(plugin_counts(lines).values()) == len(shop)
    pods = [w for line in lines for w in line.split() if re.fullmatch(r"[a-z0-9-]+/[a-z0-9.-]+-[a-z0-9]+", w)]
    assert pods and all(p.startswith("shop/") for p in pods), pods


def test_cycles_are_numbered_and_totalled(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--policy", str(ROOT / "examples" / "policy.yaml"), "--now", NOW, "--cycles", "3")
    doc = json.loads(simulate(capsys, EXAMPLE, *args, "-o", "json")[1])
    code, out, _ = simulate(capsys, EXAMPLE, *args)
    assert code == 0
    lines = out.splitlines()
    n = len(doc["cycles"])
    assert n >= 2
    for c in doc["cycles"]:
        assert f"──── Cycle {c['cycle']} of {n} ────" in lines
        assert any(line.startswith(f"Cycle {c['cycle']} of {n}: simulated at {NOW}") for line in lines)
    assert "Simulated one descheduling cycle" not in out
    start = lines.index(f"──── All {n} cycles ────")
    header = lines[start + 2].split()
    assert header == [
        "profile",
        "plugin",
        *(x for c in doc["cycles"] for x in ("cycle", str(c["cycle"]))),
        "evicted",
        "refused",
        "skipped",
    ]
    total = next(line for line in lines[start:] if line.startswith(f"Total over {n} cycles: "))
    assert total.startswith(f"Total over {n} cycles: {len(doc['evictions'])} pods evicted of ")
    placed = sum(c["placed"] for c in doc["cycles"])
    assert f"placed {placed}, pending {sum(c['pending'] for c in doc['cycles'])}" in total
    per_cycle: dict[str, list[int]] = {}
    for c in doc["cycles"]:
        for e in c["evictions"]:
            per_cycle.setdefault(f"{e['profile']}/{e['plugin']}", [0] * n)[c["cycle"] - 1] += 1
    rows = lines[start + 3 : lines.index("", start + 3)]
    for row in rows:
        cells = row.split()
        key = f"{cells[0]}/{cells[1]}"
        counts = [int(x) for x in cells[2 : 2 + n]]  # the header's "cycle k" is two words
        assert counts == per_cycle.get(key, [0] * n), row
        assert int(cells[2 + n]) == sum(counts)


OUTPUTS: list[tuple[str, tuple[str, ...]]] = [
    ("examples/policy.yaml", ()),
    ("examples/policy.yaml", ("--cycles", "3")),
    ("examples/policy.yaml", ("--explain-all", "--explain", "sandbox/scratch")),
    ("examples/policy.yaml", ("--no-placement",)),
    ("examples/policy-safe.yaml", ("--cycles", "2")),
    ("examples/policy-anomaly.yaml", ("--cycles", "3", "--explain-all")),
    ("examples/policy-binpacking.yaml", ()),
    ("benchmarks/policy-all.yaml", ("--explain-all",)),
]


@pytest.mark.parametrize(("policy", "extra"), OUTPUTS, ids=[f"{p}{' '.join(e)}" for p, e in OUTPUTS])
def test_json_output_matches_its_schema(
    policy: str, extra: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = simulate(
        capsys, EXAMPLE, "--policy", str(ROOT / policy), "--now", NOW, "-o", "json", *extra
    )
    assert code == 0
    doc = json.loads(out)
    assert (doc["apiVersion"], doc["kind"]) == ("desched.io/v1alpha1", "SimulationResult")
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(doc, SCHEMA, format_checker=jsonschema.FormatChecker())


def test_yaml_output_is_the_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    args = ("--policy", str(ROOT / "examples" / "policy.yaml"), "--now", NOW, "--cycles", "2")
    as_json = json.loads(simulate(capsys, EXAMPLE, *args, "-o", "json")[1])
    code, out, _ = simulate(capsys, EXAMPLE, *args, "-o", "yaml")
    assert code == 0
    doc = yaml.safe_load(out)
    assert doc == as_json and (doc["apiVersion"], doc["kind"]) == ("desched.io/v1alpha1", "SimulationResult")
    jsonschema.validate(doc, SCHEMA)


def test_json_of_a_generated_cluster_matches_its_schema(
    cluster_300: str, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = str(ROOT / "benchmarks" / "policy-all.yaml")
    code, out, _ = simulate(
        capsys, cluster_300, "--policy", policy, "--now", BENCH_NOW, "-o", "json", "--cycles", "2"
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["refused"] and doc["nodeActions"] and doc["pending"] and doc["thrashing"]
    jsonschema.validate(doc, SCHEMA)


def test_schema_refuses_what_the_output_must_not_be(capsys: pytest.CaptureFixture[str]) -> None:
    """The schema is not a blank cheque: a missing key, an unknown one or a wrong type fails."""
    doc: dict[str, Any] = json.loads(
        simulate(
            capsys, EXAMPLE, "--policy", str(ROOT / "examples" / "policy.yaml"), "--now", NOW, "-o", "json"
        )[1]
    )
    for broken in (
        {k: v for k, v in doc.items() if k != "apiVersion"},
        {**doc, "surprise": 1},
        {**doc, "evictions": [{**doc["evictions"][0], "reason": 3}]},
        {k: v for k, v in doc.items() if k != "before"},  # placement keys come together
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, SCHEMA)


# ----------------------------------------------------------------------------- progress


class _Err(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_plain_progress_lines_on_a_non_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _Err()
    monkeypatch.setattr("sys.stderr", err)
    progress = simulate_app._Progress(True, terminal=False, every=0.0)
    progress.start("loading the snapshot")
    progress("cycle 1: placing pods", 500, 1036)
    progress("measuring the cluster", 0, 1)
    progress.stop()
    lines = err.getvalue().splitlines()
    assert [re.sub(r" \([0-9]+ s\)$", "", line) for line in lines] == [
        "desched: simulate: cycle 1: placing pods 500/1036",
        "desched: simulate: measuring the cluster",
    ]


def test_plain_progress_waits_between_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _Err()
    monkeypatch.setattr("sys.stderr", err)
    progress = simulate_app._Progress(True, terminal=False, every=3600.0)
    progress.start("loading the snapshot")
    for done in range(100):
        progress("cycle 1: placing pods", done, 100)
    assert err.getvalue() == ""


def test_terminal_progress_shows_each_steps_own_count() -> None:
    progress = simulate_app._Progress(True, terminal=True)
    progress.start("loading the snapshot")
    try:
        progress("cycle 1: placing pods", 1000, 1036)
        progress("measuring the cluster", 0, 1)
        (task,) = progress._progress.tasks
        assert (task.description, task.completed, task.total) == ("measuring the cluster", 0, None)
        progress("cycle 2: placing pods", 3, 40)
        (task,) = progress._progress.tasks
        assert (task.description, task.completed, task.total) == ("cycle 2: placing pods", 3, 40)
    finally:
        progress.stop()
