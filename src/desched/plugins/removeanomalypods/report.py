"""What RemoveAnomalyPods tells about a cycle beyond its evictions: its report in the cycle result
(``simulate`` shows it, JSON key ``anomalies``) and the metrics a live run exports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from desched.framework import MetricsRegistry, NamespaceFilter, ReportTable


@dataclass(frozen=True, slots=True)
class AnomalyReport:
    """What the plugin judged in one cycle (a :class:`desched.framework.CycleReport`)."""

    #: Pods currently judged anomalous (still present, not reset or expired).
    anomalous: int
    #: Pods with abnormal observations that are not (yet) judged anomalous.
    suspected: int
    #: Pods newly judged anomalous in this cycle, by their main reason.
    judged_by_reason: Mapping[str, int]
    #: ``namespace/name`` of the pods judged anomalous in this cycle (newly or still).
    anomalous_pods: Sequence[str]
    #: ``namespace/name`` of the suspected pods, with their consecutive abnormal observations.
    suspected_pods: Mapping[str, int]

    @property
    def kind(self) -> str:
        return "anomalies"

    def to_json(self, shows: NamespaceFilter) -> dict[str, Any]:
        """The anomalous and the suspected pods (with their abnormal observations) that ``shows``."""
        return {
            "anomalous": [p for p in self.anomalous_pods if shows(_namespace(p))],
            "suspected": {p: n for p, n in self.suspected_pods.items() if shows(_namespace(p))},
        }

    def to_table(self, shows: NamespaceFilter) -> ReportTable:
        """The anomalous pods, then the suspected ones, most abnormal observations first."""
        anomalous = [p for p in self.anomalous_pods if shows(_namespace(p))]
        suspected = sorted(
            ((p, n) for p, n in self.suspected_pods.items() if shows(_namespace(p))),
            key=lambda pn: (-pn[1], pn[0]),
        )
        return ReportTable(
            f"{len(anomalous)} anomalous, {len(suspected)} suspected",
            ("pod", "verdict", "abnormal observations"),
            [(p, "anomalous", "") for p in anomalous] + [(p, "suspected", str(n)) for p, n in suspected],
            right=(2,),
            what="pods",
        )


def _namespace(key: str) -> str:
    return key.partition("/")[0]


class AnomalyMetrics:
    """The plugin's metrics (the proposal's observability section), by profile; registered once
    per registry, whichever profile's instance asks first."""

    def __init__(self, registry: MetricsRegistry, profile: str) -> None:
        self.profile = profile
        self.anomalous = registry.gauge(
            "descheduler_anomaly_pods_anomalous",
            "Pods judged anomalous by RemoveAnomalyPods and not yet gone, reset or expired",
            ["profile"],
        )
        self.suspected = registry.gauge(
            "descheduler_anomaly_pods_suspected",
            "Pods with abnormal observations that RemoveAnomalyPods has not (yet) judged anomalous",
            ["profile"],
        )
        self.judged = registry.counter(
            "descheduler_anomaly_total",
            "Pods judged anomalous by RemoveAnomalyPods, by their main reason",
            ["profile", "reason"],
        )

    def observe(self, report: AnomalyReport) -> None:
        self.anomalous.labels(self.profile).set(report.anomalous)
        self.suspected.labels(self.profile).set(report.suspected)
        for reason, n in report.judged_by_reason.items():
            self.judged.labels(self.profile, reason).inc(n)
