"""report/ shows the reports plugins attach to a cycle (``handle.attach_report``) without knowing
the plugin: each reads itself as JSON (under its kind's key) and as a table."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from desched.framework import NamespaceFilter, ReportTable
from desched.framework.framework import CycleResult
from desched.framework.reports import PluginReport
from desched.report.output import View, write_json, write_table


@dataclass(frozen=True)
class Stuck:
    """A report kind report/ has never heard of."""

    pods: dict[str, int]

    @property
    def kind(self) -> str:
        return "stuckPods"

    def to_json(self, shows: NamespaceFilter) -> dict[str, Any]:
        return {"pods": {p: n for p, n in self.pods.items() if shows(p.partition("/")[0])}}

    def to_table(self, shows: NamespaceFilter) -> ReportTable:
        rows = [(p, str(n)) for p, n in self.pods.items() if shows(p.partition("/")[0])]
        return ReportTable(f"{len(rows)} stuck", ("pod", "minutes"), rows, right=(1,), what="pods")


RESULT = CycleResult(started=datetime(2026, 1, 1, tzinfo=UTC), nodes=3)
REPORTS = [
    PluginReport("p", "Stuckness", Stuck({"a/x": 12, "b/y": 3})),
    PluginReport("q", "Stuckness", Stuck({})),
]


def test_json_lists_each_report_under_its_kind_with_profile_and_plugin() -> None:
    out = io.StringIO()
    write_json(RESULT, out, now="t", reports=REPORTS)
    doc = json.loads(out.getvalue())
    assert doc["stuckPods"] == [
        {"profile": "p", "plugin": "Stuckness", "pods": {"a/x": 12, "b/y": 3}},
        {"profile": "q", "plugin": "Stuckness", "pods": {}},
    ]
    out = io.StringIO()
    write_json(RESULT, out, now="t", reports=REPORTS, view=View(namespaces=frozenset({"b"})))
    assert json.loads(out.getvalue())["stuckPods"][0]["pods"] == {"b/y": 3}
    out = io.StringIO()
    write_json(RESULT, out, now="t")
    assert "stuckPods" not in json.loads(out.getvalue())


def test_the_table_shows_each_report_after_the_evictions() -> None:
    out = io.StringIO()
    write_table(RESULT, out, now="t", pods_total=5, reports=REPORTS)
    text = out.getvalue()
    assert "p / Stuckness: 2 stuck\npod   minutes\na/x        12\nb/y         3\n\n" in text
    assert "q / Stuckness: 0 stuck\n" in text  # no rows: the summary line alone
    out = io.StringIO()
    write_table(RESULT, out, now="t", pods_total=5, reports=REPORTS, view=View(namespaces=frozenset({"a"})))
    assert "p / Stuckness: 1 stuck\npod   minutes\na/x        12\n" in out.getvalue()
