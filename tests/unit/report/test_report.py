"""``desched simulate`` with placement: the JSON blocks, the terminal summary, the HTML report and
its PNG charts, the flags and their one-line errors."""

from __future__ import annotations

import base64
import io
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from desched import cli
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import EvictionRecord, EvictionRequest
from desched.framework.framework import CycleResult, PluginRun
from desched.framework.types import EvictResult
from desched.k8s.objects import Node, Pod
from desched.report.charts import MAX_NODE_BARS, MISSING_MATPLOTLIB, write_charts
from desched.report.html import write_report
from desched.report.output import View, simulation_to_json, write_table
from desched.simulation import EvictionRecorder, simulate

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = str(ROOT / "examples" / "cluster.yaml")
POLICY = str(ROOT / "examples" / "policy.yaml")
NOW = "2026-11-21T12:00:00Z"
PNG = b"\x89PNG\r\n\x1a\n"
CHARTS = (
    "utilisation-cpu.png",
    "utilisation-memory.png",
    "utilisation-pods.png",
    "evictions-by-plugin.png",
    "topology-skew.png",
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["simulate", EXAMPLE, "--policy", POLICY, "--now", NOW, *args])
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- JSON and table


def test_json_keeps_its_keys_and_adds_placement(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-o", "json")
    assert code == 0
    doc = json.loads(out)
    for key in ("now", "nodes", "skipped", "evictions", "refused", "nodeActions", "summary"):
        assert key in doc
    for e in doc["evictions"]:
        # a plain cycle's keys, and the cycle the eviction was made in
        assert set(e) == {"cycle", "namespace", "name", "node", "profile", "plugin", "reason"}
        assert e["cycle"] == 1
    assert doc["summary"]["evicted"] == len(doc["evictions"])
    placed, pending, gone = doc["placements"], doc["pending"], doc["gone"]
    assert len(placed) + len(pending) + len(gone) == len(doc["evictions"])
    assert placed and all(p["node"] and p["replacement"] and p["cycle"] == 1 for p in placed)
    assert all(
        set(p) >= {"namespace", "name", "from", "node", "score", "sameNode", "evictedBy"} for p in placed
    )
    assert [g["name"] for g in gone] == ["nightly-etl-29876-x7k2p"]  # a Failed Job pod is not re-created
    for block in ("before", "after"):
        pic = doc[block]
        assert set(pic["utilisation"]) == {"cpu", "memory", "pods"}
        assert set(pic["utilisation"]["cpu"]) == {"mean", "stddev", "min", "max"}
        assert {"taints", "nodeAffinity", "podAntiAffinity", "topologySpread", "total"} <= set(
            pic["violations"]
        )
        assert len(pic["nodes"]) == 7
    assert doc["after"]["violations"]["total"] < doc["before"]["violations"]["total"]
    [skew] = [k for k in doc["before"]["skew"] if k["topologyKey"] == "topology.kubernetes.io/zone"]
    [after] = [k for k in doc["after"]["skew"] if k["id"] == skew["id"]]
    assert skew["skew"] > skew["maxSkew"] >= after["skew"]
    assert doc["cycles"][0]["evicted"] == len(doc["evictions"])
    assert doc["scoring"]["mode"] == "default" and doc["scoring"]["weights"]["TaintToleration"] == 3


def test_json_is_deterministic(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "-o", "json")[1] == run(capsys, "-o", "json")[1]


def test_no_placement_is_the_plain_cycle(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-o", "json", "--no-placement")
    assert code == 0
    assert set(json.loads(out)) == {
        "apiVersion",
        "kind",
        "now",
        "nodes",
        "skipped",
        "evictions",
        "refused",
        "nodeActions",
        "summary",
    }
    code, out, _ = run(capsys, "--no-placement")
    assert code == 0 and "Total:" in out and "Where the replacements land" not in out


def test_table_shows_placements_and_the_before_after_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code == 0, err
    for needle in (
        "Total:",
        "Placement (cycle 1):",
        "Where the replacements land",
        "Gone: nothing re-creates them",
        "Node utilisation",
        "Pods still violating",
        "Topology skew per constraint",
    ):
        assert needle in out, needle
    assert err == ""  # no progress bar: stderr is not a terminal


def table(out: str, title: str) -> list[str]:
    """The header and rows of the table titled ``title``: the lines up to the blank one after it."""
    lines = out.splitlines()
    start = lines.index(title) + 1
    return lines[start : lines.index("", start)]


def test_table_is_plain_aligned_columns_that_cut_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "-o", "wide")
    assert code == 0, err
    doc = json.loads(run(capsys, "-o", "json")[1])
    assert "…" not in out and not set(out) & set("│┃┏┡└━")
    assert all(line == line.rstrip() for line in out.splitlines())
    rows = {line.split()[0]: line for line in out.splitlines() if re.match(r" *[0-9]+   ", line)}
    for i, e in enumerate(doc["evictions"], 1):  # one line per eviction, every name in full
        assert rows[str(i)].split()[1:3] == [f"{e['namespace']}/{e['name']}", e["node"]]
        assert rows[str(i)].endswith(f"   {e['reason']}")
    header, *placed = table(out, "Where the replacements land")
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    assert header.split() == ["pod", "from", "to", "replacement", "score"]
    for row, p in zip(placed, doc["placements"], strict=True):
        to = p["node"] + (" (same node)" if p["sameNode"] else "")
        cells = (f"{p['namespace']}/{p['name']}", p["from"], to, p["replacement"])
        for start, cell in zip(starts[:4], cells, strict=True):
            assert row[start:].startswith(cell + " "), (row, cell)
        score = "-" if p["score"] is None else p["score"]  # None: the only feasible node
        assert row.endswith(f" {score}") and len(row) == len(header)  # right-aligned
    header, *kinds = table(out, "Pods still violating")
    assert header.split() == ["kind", "before", "after"]
    assert [k.split() for k in kinds] == [
        [kind, str(n), str(doc["after"]["violations"][kind])]
        for kind, n in doc["before"]["violations"].items()
        if kind != "total"
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("out", [io.StringIO(), Terminal()], ids=["pipe", "terminal"])
def test_table_keeps_long_names_whole_on_a_narrow_screen(
    out: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("NO_COLOR", "1")
    name, node = "x" * 150, "ip-10-32-211-114.eu-west-1.compute.internal"
    result = CycleResult(started=datetime(2026, 11, 21, tzinfo=UTC), nodes=2)
    result.plugin_runs = [
        PluginRun("default", "PodLifeTime", "deschedule", 0.0, 1),
        PluginRun("default", "Broken", "balance", 0.0, 0, error="boom [x]: " + "y" * 80),
    ]
    result.records = [
        EvictionRecord("preview", name, node, "default", "PodLifeTime", "r [a]", EvictResult.EVICTED),
        EvictionRecord("ns", "b", node, "default", "PodLifeTime", "r", EvictResult.NODE_LIMIT),
    ]
    write_table(result, out, now=NOW, pods_total=5, view=View(wide=True))
    limit = EvictResult.NODE_LIMIT.value
    assert out.getvalue().splitlines() == [
        f"Simulated one descheduling cycle at {NOW} over 2 ready nodes.",
        "Per plugin",
        "profile   plugin        extension point   evicted   refused   skipped",
        "default   PodLifeTime   deschedule              1         1         0",
        "default   Broken        balance                 0         0         0",
        "",
        "default / Broken (balance): plugin failed: boom [x]: " + "y" * 80,
        f"Total: 1 pod evicted of 5; refused 1 ({limit} 1)",
        "",
        "Evicted by default / PodLifeTime: 1",
        "#   " + "pod".ljust(len(f"preview/{name}")) + "   " + "node".ljust(len(node)) + "   reason",
        f"1   preview/{name}   {node}   r [a]",
        "",
        "Refused: 1",
        "asked by              why" + " " * (len(limit) - 3) + "   pods",
        f"default/PodLifeTime   {limit}      1",
        "",
        "Refused pods",
        "pod    node" + " " * (len(node) - 1) + "asked by              why",
        f"ns/b   {node}   default/PodLifeTime   {limit}",
        "",
    ]


def test_cycles_stop_when_nothing_more_is_evicted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-o", "json", "--cycles", "5")
    assert code == 0
    doc = json.loads(out)
    assert 2 <= len(doc["cycles"]) <= 5
    assert doc["converged"] is True and doc["cycles"][-1]["evicted"] == 0
    assert doc["stopReason"] == f"cycle {len(doc['cycles'])} evicted nothing"


def test_generic_score_from_a_scorer_config(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "scorer.yaml"
    config.write_text(
        "allocated:\n  values: RatioToAllocatable\n  prefer: Most\n  resources: {cpu: 1, memory: 1}\n"
    )
    # placed after the cycle, every evicted pod gone: the scores alone decide
    after = ("--placement-order", "after-cycle", "--terminating-pods", "gone")
    code, out, err = run(capsys, "-o", "json", "--scorer-config", str(config), *after)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["scoring"]["mode"] == "generic" and "NodeResourcesGeneric" in doc["scoring"]["weights"]
    # bin-packing: the replacements crowd onto fewer nodes than with the default score
    default = json.loads(run(capsys, "-o", "json", *after)[1])
    assert len({p["node"] for p in doc["placements"]}) <= len({p["node"] for p in default["placements"]})


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--cycles", "0"), "--cycles: must be at least 1, got 0"),
        (("--cycles", "2", "--no-placement"), "--cycles: more than one cycle needs placement"),
        (("--score", "generic"), "--score: generic needs --scorer-config FILE"),
        (
            ("--score", "default", "--scorer-config", "x.yaml"),
            "--scorer-config: only applies with --score generic",
        ),
        (("--scorer-config", "/nonexistent.yaml"), "/nonexistent.yaml: cannot read scorer config"),
    ],
)
def test_bad_flags_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], args: tuple[str, ...], needle: str
) -> None:
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err, err


# ----------------------------------------------------------------------------- the report


def test_report_writes_the_page_and_readable_charts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    code, _, err = run(capsys, "--report", str(out_dir))  # a directory, as before: its index.html
    assert code == 0, err
    assert f"report written to {out_dir / 'index.html'}" in err
    assert [p.name for p in out_dir.iterdir()] == ["index.html"]  # one file: the charts are inlined
    page = (out_dir / "index.html").read_text()
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(CHARTS)
    for data in images:
        png = base64.b64decode(data)
        assert png.startswith(PNG) and len(png) > 5000
    for needle in (
        "Evictions and where the pods go",
        "Per plugin",
        "Refused",
        "Before and after",
        "Pods still violating",
        "Topology skew",
        "RemovePodsViolatingNodeTaints",
        "→ node-",
        "gone</span>",
        "snapshot <code>cluster.yaml</code>",
        "default/LowNodeUtilization low 20%",  # the policy's thresholds, drawn on the charts
    ):
        assert needle in page, needle
    assert str(ROOT) not in page  # no local path
    # self-contained: no remote resources, no scripts
    assert "http://" not in page and "https://" not in page and "<script" not in page


def test_report_to_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    page = tmp_path / "new" / "desched.html"
    code, _, err = run(capsys, "--report", str(page))
    assert code == 0, err
    assert f"report written to {page}" in err
    assert [p.name for p in page.parent.iterdir()] == ["desched.html"]
    code, _, err = run(capsys, "--report", str(tmp_path / "new" / "desched.html" / "x"))
    assert code == 2 and "--report" in err


def test_report_lists_refusals_and_skips(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "--report", str(tmp_path / "r.html"))
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    # LowNodeUtilization tries a web replica whose PDB RemoveDuplicates has used up
    assert "<h2>Refused: 1</h2>" in page and "<td>shop/web-7d9f8b6c5-0</td>" in page
    safe = str(ROOT / "examples" / "policy-safe.yaml")
    assert (
        cli.main(["simulate", EXAMPLE, "--policy", safe, "--now", NOW, "--report", str(tmp_path / "s.html")])
        == 0
    )
    capsys.readouterr()
    page = (tmp_path / "s.html").read_text()
    assert "No eviction would be refused." in page
    assert "<h2>Skipped by evictionPolicy: 11</h2>" in page
    assert "max_evictions_per_workload" in page and "monitoring/reports-84c6d9f7b-1" in page
    sim = small_simulation(3)
    result = sim.cycles[0].result
    result.records.append(
        EvictionRecord(
            "shop",
            "web-9",
            "n1",
            "default",
            "PodLifeTime",
            "r",
            EvictResult.FAILED,
            error="429 Cannot evict pod as it would violate the pod's disruption budget. (budget web)",
        )
    )
    page = write_report(sim, tmp_path / "p.html", now=NOW).read_text()
    assert "<h2>Refused: 1</h2>" in page and "shop/web-9" in page
    assert (
        '429 Cannot evict pod as it would violate the pod&#x27;s disruption budget.</td><td class="num">1'
        in page
    )


def test_policy_thresholds_are_drawn() -> None:
    from desched.api.policy import load_policy_file
    from desched.plugins import default_registry
    from desched.report.charts import Threshold, policy_thresholds, render_charts

    policy = load_policy_file(POLICY, default_registry())
    found = policy_thresholds(policy.profiles)
    assert Threshold("cpu", 20.0, "default/LowNodeUtilization low") in found
    assert {t.resource for t in found} == {"cpu", "memory", "pods"}
    sim = small_simulation(3)
    plain, drawn = render_charts(sim)[0], render_charts(sim, found)[0]
    assert (
        plain.png != drawn.png
        and "the policy's thresholds: default/LowNodeUtilization low 20%" in drawn.description
    )


def test_report_without_matplotlib_names_the_extra(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    code, out, err = run(capsys, "--report", str(tmp_path / "out"))
    assert code == 2 and out == ""
    assert err == f"desched: error: --report: {MISSING_MATPLOTLIB}\n"
    assert "desched[report]" in err
    assert not (tmp_path / "out").exists()


def small_simulation(nodes: int) -> Any:
    node_objs = [
        msgspec.convert(
            {
                "metadata": {"name": f"n{i:02d}", "labels": {"kubernetes.io/hostname": f"n{i:02d}"}},
                "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
            },
            Node,
            strict=False,
        )
        for i in range(nodes)
    ]
    pods = [
        msgspec.convert(
            {
                "metadata": {
                    "name": "web-<0>",
                    "namespace": "default",
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "web"}],
                },
                "spec": {
                    "nodeName": "n00",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
                "status": {"phase": "Running"},
            },
            Pod,
            strict=False,
        )
    ]
    s = ClusterSnapshot(nodes=node_objs, pods=pods)

    def run_cycle(snap: ClusterSnapshot, backend: EvictionRecorder, k: int) -> CycleResult:
        cycle = CycleResult(started=datetime(2026, 11, 21, tzinfo=UTC), nodes=nodes)
        cycle.plugin_runs.append(PluginRun("p", "Test", "deschedule", 0.0, 1 if k == 1 else 0))
        if k == 1:
            p = snap.pod("default", "web-<0>")
            assert p is not None
            backend.evict(p, EvictionRequest("p", "Test", "test"))
            reason = "<script>alert(1)</script>"
            cycle.records.append(
                EvictionRecord("default", "web-<0>", "n00", "p", "Test", reason, EvictResult.EVICTED)
            )
        return cycle

    return simulate(s, run_cycle, now=datetime(2026, 11, 21, tzinfo=UTC), cycles=2)


def test_report_escapes_what_it_shows(tmp_path: Path) -> None:
    sim = small_simulation(3)
    page = write_report(sim, tmp_path, now=NOW).read_text()
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "web-&lt;0&gt;" in page


def test_many_nodes_are_drawn_as_a_histogram(tmp_path: Path) -> None:
    sim = small_simulation(MAX_NODE_BARS + 5)
    charts = {c.file: c for c in write_charts(sim, tmp_path)}
    assert "histogram" in charts["utilisation-cpu.png"].description
    assert "no topology spread constraints" in charts["topology-skew.png"].description
    few = {c.file: c for c in write_charts(small_simulation(3), tmp_path / "few")}
    assert "one pair of bars per node" in few["utilisation-cpu.png"].description


def test_every_merged_list_says_which_cycle_its_entries_are_from() -> None:
    """With ``--cycles``, ``evictions``, ``refused``, ``evictionsSkipped`` and ``nodeActions`` hold
    every cycle's entries one after the other: each says its cycle, as ``placements`` do (a pod
    skipped in cycles 1 and 2 is two entries that differ only there)."""
    node_objs = [
        msgspec.convert(
            {
                "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
                "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "20"}},
            },
            Node,
            strict=False,
        )
        for i in range(2)
    ]
    pods = [
        msgspec.convert(
            {
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "ownerReferences": [{"kind": "ReplicaSet", "name": "web"}],
                },
                "spec": {"nodeName": "n0", "containers": [{"name": "c"}]},
                "status": {"phase": "Running"},
            },
            Pod,
            strict=False,
        )
        for name in ("a", "b", "c", "d")
    ]

    def run_cycle(snap: ClusterSnapshot, backend: EvictionRecorder, k: int) -> CycleResult:
        cycle = CycleResult(started=datetime(2026, 11, 21, tzinfo=UTC), nodes=2)
        victim = "abc"[k - 1]
        p = snap.pod("default", victim)
        assert p is not None
        backend.evict(p, EvictionRequest("p", "Test", "test"))
        cycle.records += [
            EvictionRecord("default", victim, "n0", "p", "Test", "r", EvictResult.EVICTED),
            EvictionRecord("default", "d", "n0", "p", "Test", "r", EvictResult.NODE_LIMIT),
            EvictionRecord(
                "default",
                "d",
                "n0",
                "p",
                "Test",
                "r",
                EvictResult.SKIPPED,
                "no budget",
                skip_reason="rate_limit",
            ),
        ]
        return cycle

    sim = simulate(
        ClusterSnapshot(nodes=node_objs, pods=pods),
        run_cycle,
        now=datetime(2026, 11, 21, tzinfo=UTC),
        cycles=3,
    )
    doc = json.loads(json.dumps(simulation_to_json(sim, now=NOW)))
    assert [(e["cycle"], e["name"]) for e in doc["evictions"]] == [(1, "a"), (2, "b"), (3, "c")]
    assert [(e["cycle"], e["name"]) for e in doc["refused"]] == [(1, "d"), (2, "d"), (3, "d")]
    assert [(e["cycle"], e["name"], e["reason"]) for e in doc["evictionsSkipped"]] == [
        (k, "d", "rate_limit") for k in (1, 2, 3)
    ]
    # the cycle first, as in placements; the rest of an entry as a plain cycle's
    assert list(doc["evictionsSkipped"][0]) == [
        "cycle",
        "namespace",
        "name",
        "node",
        "profile",
        "plugin",
        "reason",
        "detail",
    ]
    assert next(iter(doc["placements"][0])) == "cycle"
    assert [c["evicted"] for c in doc["cycles"]] == [1, 1, 1]


def _shown_in(shown: Any, actual: Any) -> bool:
    """``shown`` (the docs' excerpt) is part of ``actual``: a dict's keys shown match, a list's
    elements shown are among the actual ones, ``"..."`` in a string stands for anything after."""
    if isinstance(shown, dict):
        return isinstance(actual, dict) and all(
            k in actual and _shown_in(v, actual[k]) for k, v in shown.items()
        )
    if isinstance(shown, list):
        return isinstance(actual, list) and all(any(_shown_in(s, a) for a in actual) for s in shown)
    if isinstance(shown, str) and "..." in shown:
        return isinstance(actual, str) and actual.startswith(shown.split("...", 1)[0])
    return bool(shown == actual and type(shown) is type(actual))


def test_the_json_example_of_the_docs_is_what_simulate_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/simulation.md's JSON excerpt (the example cluster and policy) holds the values
    ``simulate -o json`` prints; ``...`` marks what it leaves out. ``pending`` and ``thrashing``
    show the shape of entries the example has none of."""
    doc_text = (ROOT / "docs" / "simulation.md").read_text()
    start = doc_text.index("```json\n", doc_text.index("JSON (`-o json`) starts with")) + len("```json\n")
    block = doc_text[start : doc_text.index("```", start)]
    text = "{" + block + "}"
    for elided, kept in ((", ...}", "}"), (", ...]", "]"), ("[...]", "[]"), ("{...}", "{}")):
        text = text.replace(elided, kept)
    shown = json.loads(text)
    code, out, _ = run(capsys, "-o", "json")
    assert code == 0
    actual = json.loads(out)
    assert actual["pending"] == [] and actual["thrashing"] == []
    for key in ("pending", "thrashing"):
        shown.pop(key)
    mismatched = [k for k, v in shown.items() if not _shown_in(v, actual.get(k))]
    assert not mismatched, {k: (shown[k], actual.get(k)) for k in mismatched}


def test_a_later_cycle_lists_the_pods_as_a_fresh_snapshot_does() -> None:
    """The placement simulator binds replacements with ``add_pod`` (appended); the next cycle must
    still meet the pods in the canonical order (namespace, name) a live ``run``'s next cycle reads
    them in, in every index: a plugin taking pods in listing order decides the same."""
    node = msgspec.convert(
        {
            "metadata": {"name": "n0", "labels": {"kubernetes.io/hostname": "n0"}},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "20"}},
        },
        Node,
        strict=False,
    )
    pods = [
        msgspec.convert(
            {
                "metadata": {
                    "name": name,
                    "namespace": "default",
                    "ownerReferences": [{"kind": "ReplicaSet", "name": owner, "controller": True}],
                },
                "spec": {"nodeName": "n0", "containers": [{"name": "c"}]},
                "status": {"phase": "Running"},
            },
            Pod,
            strict=False,
        )
        for name, owner in (("a-0", "a"), ("zz-0", "zz"))
    ]
    seen: list[tuple[list[str], list[str], list[str], list[str]]] = []

    def run_cycle(snap: ClusterSnapshot, backend: EvictionRecorder, k: int) -> CycleResult:
        seen.append(
            (
                [p.metadata.name for p in snap.pods],
                [p.metadata.name for p in snap.pods_on_node("n0")],
                [p.metadata.name for p in snap.pods_in_namespace("default")],
                [p.metadata.name for p in snap.pods_of_owner("default", "ReplicaSet", "a")],
            )
        )
        cycle = CycleResult(started=datetime(2026, 11, 21, tzinfo=UTC), nodes=1)
        if k == 1:
            p = snap.pod("default", "a-0")
            assert p is not None
            backend.evict(p, EvictionRequest("p", "Test", "test"))
            cycle.records.append(
                EvictionRecord("default", "a-0", "n0", "p", "Test", "r", EvictResult.EVICTED)
            )
        return cycle

    sim = simulate(
        ClusterSnapshot(nodes=[node], pods=pods), run_cycle, now=datetime(2026, 11, 21, tzinfo=UTC), cycles=2
    )
    (placed,) = sim.placements
    assert placed.replacement.startswith("a-") and placed.replacement < "zz-0"
    listing = [placed.replacement, "zz-0"]
    assert seen[1] == (listing, listing, listing, [placed.replacement])
