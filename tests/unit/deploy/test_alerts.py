"""The chart's PrometheusRule and dashboard queries, run by Prometheus itself (``promtool test rules``).

The series are what a Prometheus Operator scrape of the chart's ServiceMonitor stores: every series
gets the target's labels ``job`` and ``service`` (the Service's name), ``pod``, ``instance``,
``endpoint`` and ``container``; ``namespace`` is the target's (the release's) except on series that
carry their own (``descheduler_pods_evicted_total``: the evicted pod's), because the ServiceMonitor
has ``honorLabels: true`` (the default, as upstream's). Each alert is driven by series that make it
fire and by series that must leave it quiet. helm renders the rules (hack/e2e/build-helm.sh) and
promtool comes from hack/e2e/build-promtool.sh (both cached once per machine).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.tools import tool

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "desched"
RELEASE, NAMESPACE = "rel", "kube-system"
JOB = f"{RELEASE}-desched"
#: the labels the scrape attaches to every series of the release's one pod
TARGET = {
    "job": JOB,
    "service": JOB,
    "endpoint": "http-metrics",
    "container": "desched",
    "pod": f"{JOB}-7d9f8b6c5-x2k4q",
    "instance": "10.244.1.17:10258",
}


@pytest.fixture(scope="module")
def helm() -> str:
    return tool("DESCHED_HELM", "build-helm.sh")


@pytest.fixture(scope="module")
def promtool() -> str:
    return tool("DESCHED_PROMTOOL", "build-promtool.sh")


def rendered(helm: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            *(helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--set", "kind=Deployment"),
            *("--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true", *args),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {d["kind"]: d for d in yaml.safe_load_all(out) if d and d["kind"] != "ConfigMap"} | {
        "dashboard": next(
            json.loads(d["data"]["desched.json"])
            for d in yaml.safe_load_all(out)
            if d and d["kind"] == "ConfigMap" and "desched.json" in d.get("data", {})
        )
    }


def series(name: str, values: str, *, own_namespace: str | None = None, **labels: str) -> dict[str, str]:
    """One input series as the scrape stores it: ``own_namespace`` is the series' own namespace
    label (honorLabels keeps it); without one the target's namespace is attached."""
    merged = {**TARGET, "namespace": own_namespace or NAMESPACE, **labels}
    text = ",".join(f'{k}="{v}"' for k, v in sorted(merged.items()))
    return {"series": f"{name}{{{text}}}", "values": values}


def run_promtool(
    promtool: str, tmp_path: Path, groups: list[dict[str, Any]], tests: list[dict[str, Any]]
) -> str:
    # the annotations are checked by `promtool check rules` (their templates); the unit tests
    # compare the alerts' labels
    full = tmp_path / "full.yaml"
    full.write_text(yaml.safe_dump({"groups": groups}))
    check = subprocess.run(
        [promtool, "check", "rules", str(full)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    bare = [
        {**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
        for g in groups
    ]
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": bare}))
    spec = tmp_path / "tests.yaml"
    spec.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests}))
    proc = subprocess.run(
        [promtool, "test", "rules", str(spec)], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def alert_test(
    input_series: list[dict[str, str]], checks: list[tuple[str, str, list[dict[str, str]]]]
) -> dict[str, Any]:
    """A promtool test group: the series, scraped every minute, and (eval time, alert, expected labels)."""
    return {
        "interval": "1m",
        "input_series": input_series,
        "alert_rule_test": [
            {"eval_time": t, "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in expected]}
            for t, name, expected in checks
        ],
    }


WARNING = {"severity": "warning"}


def evictions(result: str, per_minute: float, pod_namespace: str, job: str = JOB) -> dict[str, str]:
    return series(
        "descheduler_pods_evicted_total",
        f"0+{per_minute}x90",
        own_namespace=pod_namespace,
        job=job,
        service=job,
        result=result,
        strategy="LowNodeUtilization",
        profile="default",
        node="worker-3",
    )


def test_evictions_failing_fires_on_errors_in_any_pods_namespace(
    helm: str, promtool: str, tmp_path: Path
) -> None:
    groups = rendered(helm)["PrometheusRule"]["spec"]["groups"]
    tests = [
        # 2 errors a second (0.05/s is the threshold), the evicted pods in team-a (not the release's)
        alert_test(
            [evictions("error", 120, "team-a")],
            [("10m", "DeschedEvictionsFailing", []), ("40m", "DeschedEvictionsFailing", [WARNING])],
        ),
        # limits, evictions in background, successes and unknown outcomes are not failures; another
        # release's errors are not this one's
        alert_test(
            [
                evictions("maximum number of evicted pods per node reached", 600, "team-a"),
                evictions("maximum number of evicted pods per a descheduling cycle reached", 600, "team-b"),
                evictions("background", 600, "kubevirt"),
                evictions("success", 600, "team-a"),
                evictions("unknown", 60, "team-a"),
                evictions("error", 600, "team-a", job="other-desched"),
                evictions("error", 1, "team-a"),  # 1/min: under 0.05/s
            ],
            [("40m", "DeschedEvictionsFailing", [])],
        ),
    ]
    run_promtool(promtool, tmp_path, groups, tests)


def test_no_cycle_completed_in_three_intervals(helm: str, promtool: str, tmp_path: Path) -> None:
    groups = rendered(helm, "--set", "deschedulingInterval=5m")["PrometheusRule"]["spec"]["groups"]
    expr = next(r["expr"] for g in groups for r in g["rules"] if r["alert"] == "DeschedNoCycleCompleted")
    assert "[900s]" in expr and "> 900" in expr  # 3 x 5m
    started_at_0 = series("process_start_time_seconds", "0+0x90")
    tests = [
        # up since t=0, 4 cycles in the first 20 minutes, then none (a stuck or skipped cycle)
        alert_test(
            [
                started_at_0,
                series(
                    "descheduler_loop_duration_seconds_count",
                    "0 0 0 0 0 1 1 1 1 1 2 2 2 2 2 3 3 3 3 3 4+0x70",
                ),
            ],
            [("30m", "DeschedNoCycleCompleted", []), ("45m", "DeschedNoCycleCompleted", [WARNING])],
        ),
        # a cycle every 5 minutes: quiet
        alert_test(
            [started_at_0, series("descheduler_loop_duration_seconds_count", "0+0.2x90")],
            [("80m", "DeschedNoCycleCompleted", [])],
        ),
        # started at 60m (a restart), its first cycle not yet done: too early to tell
        alert_test(
            [
                series("process_start_time_seconds", "3600+0x90"),
                series("descheduler_loop_duration_seconds_count", "0+0x90"),
            ],
            [("70m", "DeschedNoCycleCompleted", [])],
        ),
    ]
    run_promtool(promtool, tmp_path, groups, tests)
    cron = rendered(helm, "--set-string", "deschedulingIntervalCronExpression=0 2 * * *")
    assert "DeschedNoCycleCompleted" not in json.dumps(cron["PrometheusRule"])  # no interval to compare


def test_plugin_failing_every_cycle(helm: str, promtool: str, tmp_path: Path) -> None:
    groups = rendered(helm)["PrometheusRule"]["spec"]["groups"]
    cycles = series("descheduler_loop_duration_seconds_count", "0+1x90")

    def failures(per_cycle: float, strategy: str) -> dict[str, str]:
        return series(
            "descheduler_plugin_failures_total", f"0+{per_cycle}x90", strategy=strategy, profile="default"
        )

    tests = [
        alert_test(
            [
                cycles,
                failures(1, "RemovePodsViolatingTopologySpreadConstraint"),
                failures(0.5, "LowNodeUtilization"),
            ],
            [
                ("10m", "DeschedPluginFailingEveryCycle", []),
                (
                    "60m",
                    "DeschedPluginFailingEveryCycle",
                    [
                        {
                            **WARNING,
                            "strategy": "RemovePodsViolatingTopologySpreadConstraint",
                            "profile": "default",
                        }
                    ],
                ),
            ],
        ),
        # no cycle runs (e.g. a replica without the lease): nothing fails "every cycle"
        alert_test(
            [series("descheduler_loop_duration_seconds_count", "5+0x90"), failures(0, "LowNodeUtilization")],
            [("60m", "DeschedPluginFailingEveryCycle", [])],
        ),
    ]
    run_promtool(promtool, tmp_path, groups, tests)


def test_down_slow_and_memory_alerts(helm: str, promtool: str, tmp_path: Path) -> None:
    groups = rendered(helm, "--set", "deschedulingInterval=1m")["PrometheusRule"]["spec"]["groups"]
    tests = [
        alert_test(
            [
                series("up", "1+0x20 0+0x60"),
                series("process_resident_memory_bytes", "100000000+0x20 390000000+0x60"),  # 384Mi limit
                # cycles of 90 s on a 1m interval
                series("descheduler_loop_duration_seconds_sum", "0+90x90"),
                series("descheduler_loop_duration_seconds_count", "0+1x90"),
            ],
            [
                ("15m", "DeschedDown", []),
                ("35m", "DeschedDown", [WARNING]),
                ("20m", "DeschedMemoryNearLimit", []),
                # per replica: the alert names the pod
                ("30m", "DeschedMemoryNearLimit", [{**WARNING, **TARGET, "namespace": NAMESPACE}]),
                ("70m", "DeschedCycleSlowerThanInterval", [{**WARNING, **TARGET, "namespace": NAMESPACE}]),
            ],
        ),
        alert_test(
            [
                series("up", "1+0x90"),
                series("process_resident_memory_bytes", "200000000+0x90"),
                series("descheduler_loop_duration_seconds_sum", "0+20x90"),
                series("descheduler_loop_duration_seconds_count", "0+1x90"),
                # another release's target, down: not this one's
                series("up", "0+0x90", job="other-desched", service="other-desched"),
            ],
            [
                ("80m", "DeschedDown", []),
                ("80m", "DeschedMemoryNearLimit", []),
                ("80m", "DeschedCycleSlowerThanInterval", []),
            ],
        ),
    ]
    run_promtool(promtool, tmp_path, groups, tests)


def test_dashboard_panels_select_the_release_series(helm: str, promtool: str, tmp_path: Path) -> None:
    """The panels' queries, with Grafana's variables as the dashboard sets them for this release,
    evaluated by promtool on the same kind of series: the eviction panels count this release's
    evictions in every pod namespace, "failed" is result="error" only."""
    dashboard = rendered(helm)["dashboard"]
    panels = {p["title"]: p["targets"][0]["expr"] for p in dashboard["panels"] if p.get("targets")}

    def grafana(expr: str) -> str:
        return expr.replace("$job", JOB).replace("$namespace", NAMESPACE).replace("$__rate_interval", "5m")

    recorded = {
        "evictions_24h": panels["Evictions (24h)"],
        "failed_24h": panels["Failed evictions (24h)"],
        "by_namespace": panels["Evictions by namespace"],
        "replicas_up": panels["Replicas up"],
    }
    groups = [
        {"name": "panels", "rules": [{"record": name, "expr": grafana(e)} for name, e in recorded.items()]}
    ]
    input_series = [
        series("up", "1+0x90"),
        evictions("success", 1, "team-a"),
        evictions("success", 2, "team-b"),
        evictions("error", 1, "team-a"),
        evictions("maximum number of evicted pods per node reached", 5, "team-a"),
        evictions("background", 5, "kubevirt"),
        evictions("success", 7, "team-a", job="other-desched"),
    ]
    tests = [
        {
            "interval": "1m",
            "input_series": input_series,
            "promql_expr_test": [
                # increase over the 61 minutes of data (0..60m) of a counter growing 1/min, extrapolated
                {
                    "expr": "round(evictions_24h)",
                    "eval_time": "60m",
                    "exp_samples": [{"labels": "{}", "value": 180}],
                },
                {
                    "expr": "round(failed_24h)",
                    "eval_time": "60m",
                    "exp_samples": [{"labels": "{}", "value": 60}],
                },
                {
                    "expr": "round(by_namespace * 60)",
                    "eval_time": "60m",
                    "exp_samples": [
                        {"labels": '{namespace="team-a"}', "value": 1},
                        {"labels": '{namespace="team-b"}', "value": 2},
                    ],
                },
                {
                    "expr": "replicas_up",
                    "eval_time": "60m",
                    "exp_samples": [{"labels": "replicas_up", "value": 1}],
                },
            ],
        }
    ]
    run_promtool(promtool, tmp_path, groups, tests)
