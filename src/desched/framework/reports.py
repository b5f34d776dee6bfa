"""Typed reports a plugin attaches to the cycle result (``handle.attach_report``).

A plugin that has more to tell about a cycle than its evictions (what it judged, what it
suspects) attaches one report per cycle. The cycle result carries it with the plugin's profile
and name (:class:`PluginReport`), and ``desched simulate`` shows it without knowing the plugin:
the report says how it reads as JSON (:meth:`CycleReport.to_json`, listed under its
:attr:`~CycleReport.kind` key) and as a table (:meth:`CycleReport.to_table`). Both are given a
namespace filter (``simulate --namespace``) and leave out what it does not show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: ``shows(namespace)``: whether the output shows objects of that namespace (``--namespace``).
NamespaceFilter = Callable[[str], bool]


@dataclass(frozen=True, slots=True)
class ReportTable:
    """A report as the table output prints it: ``<profile> / <plugin>: <summary>``, then its rows
    under ``header`` (nothing more when there are none). The summary output shows the first rows
    and says how many more there are ("... 3 more <what>")."""

    summary: str
    header: Sequence[str] = ()
    rows: Sequence[Sequence[str]] = field(default_factory=list)
    #: the right-aligned columns (numbers)
    right: Sequence[int] = ()
    #: what the rows are, plural (``pods``)
    what: str = "rows"


@runtime_checkable
class CycleReport(Protocol):
    """What a plugin tells about one cycle beyond its evictions, in a form reports can show."""

    @property
    def kind(self) -> str:
        """The key of ``simulate -o json`` under which reports of this kind are listed
        (e.g. ``anomalies``): a camelCase word, the same for every report of the class."""
        ...

    def to_json(self, shows: NamespaceFilter) -> dict[str, Any]:
        """The report's fields in the JSON document (after ``profile`` and ``plugin``)."""
        ...

    def to_table(self, shows: NamespaceFilter) -> ReportTable:
        """The report as the table output prints it."""
        ...


@dataclass(frozen=True, slots=True)
class PluginReport:
    """A report of one plugin of one profile, in the cycle result."""

    profile: str
    plugin: str
    report: CycleReport
