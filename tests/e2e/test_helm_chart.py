"""The Helm chart in deploy/helm renders, and the apiserver accepts every object it renders."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.api.policy import load_policy
from desched.plugins import default_registry
from tests.e2e.controlplane import ApiError, ControlPlane
from tests.e2e.support import apply_manifest

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "desched"


@pytest.fixture(scope="module")
def helm() -> str:
    path = os.environ.get("DESCHED_HELM")
    if not path:
        out = subprocess.run(
            ["bash", str(ROOT / "hack" / "e2e" / "build-helm.sh")], capture_output=True, text=True, check=True
        )
        path = out.stdout.strip().splitlines()[-1]
    return path


def render(helm: str, *values: str) -> list[dict[str, Any]]:
    args = [helm, "template", "desched", str(CHART), "--namespace", "kube-system"]
    for v in values:
        args += ["--set", v]
    out = subprocess.run(args, capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.parametrize(
    "values",
    [
        (),
        (
            "kind=Deployment",
            "replicas=2",
            "leaderElection.enabled=true",
            "eventDriven=true",
            "service.enabled=true",
            "podDisruptionBudget.enabled=true",
        ),
        ("kind=Deployment", "anomalyPods.enabled=true"),
        (
            "kind=Deployment",
            "deschedulerPolicy.metricsProviders[0].source=KubernetesMetrics",
            "deschedulerPolicy.metricsProviders[1].source=Prometheus",
            "deschedulerPolicy.metricsProviders[1].prometheus.url=https://prometheus.monitoring.svc:9091",
            "deschedulerPolicy.metricsProviders[1].prometheus.authToken.secretReference.namespace=kube-system",
            "deschedulerPolicy.metricsProviders[1].prometheus.authToken.secretReference.name=prom-token",
        ),
        ("kind=Job", "ttlSecondsAfterFinished=600", "activeDeadlineSeconds=300", "podLabels.a=b"),
        (
            "timeZone=Etc/UTC",
            "successfulJobsHistoryLimit=0",
            "startingDeadlineSeconds=200",
            "jobLabels.a=b",
            "podSecurityContext.runAsNonRoot=true",
            "tolerations[0].operator=Exists",
            "nodeSelector.kubernetes\\.io/os=linux",
            "cmdOptions.dry-run=null",
        ),
    ],
    ids=[
        "cronjob-defaults",
        "deployment-ha",
        "deployment-anomaly",
        "deployment-metrics",
        "job",
        "cronjob-options",
    ],
)
def test_chart_objects_pass_server_side_validation(
    control_plane: Any, helm: str, values: tuple[str, ...]
) -> None:
    if getattr(control_plane, "external", False):
        pytest.skip("dry-run applies need the built-in control plane's admin token")
    cp: ControlPlane = control_plane
    docs = render(helm, *values)
    kinds = {d["kind"] for d in docs}
    assert {"ClusterRole", "ClusterRoleBinding", "ServiceAccount", "ConfigMap"} <= kinds
    kind = next((v.split("=", 1)[1] for v in values if v.startswith("kind=")), "CronJob")
    assert kind in kinds
    for doc in docs:
        try:
            apply_manifest(cp, doc, dry_run=True)
        except ApiError as e:
            raise AssertionError(f"{doc['kind']} {doc['metadata']['name']}: {e}") from None
        if doc["kind"] == "ConfigMap":
            # the policy the chart ships loads like any user's policy
            load_policy(yaml.safe_load(doc["data"]["policy.yaml"]), default_registry(entry_points=False))


def test_chart_refuses_two_replicas_without_leader_election(helm: str) -> None:
    proc = subprocess.run(
        [helm, "template", "desched", str(CHART), "--set", "kind=Deployment", "--set", "replicas=2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0 and "replicas > 1 requires leaderElection.enabled" in proc.stderr


# ------------------------------------------------------------------ values (rendering only)

UPSTREAM_VALUES = Path(__file__).resolve().parent / "data" / "upstream-chart-values.yaml"
#: every value path upstream's chart (v0.36) reads (/work/shared/reference/upstream-helm-values.md)
UPSTREAM_PATHS = [
    "activeDeadlineSeconds",
    "affinity",
    "automountServiceAccountToken",
    "cmdOptions",
    "command",
    "commonLabels",
    "cronJobAnnotations",
    "cronJobApiVersion",
    "cronJobLabels",
    "deploymentAnnotations",
    "deschedulerPolicy",
    "deschedulerPolicy.metricsProviders",
    "deschedulerPolicyAPIVersion",
    "deschedulingInterval",
    "dnsConfig",
    "extraServiceAccountVolumeMounts",
    "extraServiceAccountVolumes",
    "failedJobsHistoryLimit",
    "fullnameOverride",
    "image.pullPolicy",
    "image.repository",
    "image.tag",
    "imagePullSecrets",
    "initContainers",
    "jobAnnotations",
    "jobLabels",
    "kind",
    "leaderElection",
    "leaderElection.enabled",
    "leaderElection.leaseDuration",
    "leaderElection.renewDeadline",
    "leaderElection.resourceLock",
    "leaderElection.resourceName",
    "leaderElection.resourceNamescape",
    "leaderElection.resourceNamespace",
    "leaderElection.retryPeriod",
    "livenessProbe",
    "nameOverride",
    "namespaceOverride",
    "nodeSelector",
    "podAnnotations",
    "podDisruptionBudget",
    "podDisruptionBudget.annotations",
    "podDisruptionBudget.maxUnavailable",
    "podDisruptionBudget.minAvailable",
    "podDisruptionBudget.unhealthyPodEvictionPolicy",
    "podLabels",
    "podSecurityContext",
    "ports",
    "priorityClassName",
    "rbac.create",
    "replicas",
    "resources",
    "schedule",
    "securityContext",
    "service.enabled",
    "service.ipFamilies",
    "service.ipFamilyPolicy",
    "serviceAccount.annotations",
    "serviceAccount.automountServiceAccountToken",
    "serviceAccount.create",
    "serviceAccount.name",
    "serviceMonitor.additionalLabels",
    "serviceMonitor.apiVersion",
    "serviceMonitor.enabled",
    "serviceMonitor.honorLabels",
    "serviceMonitor.insecureSkipVerify",
    "serviceMonitor.interval",
    "serviceMonitor.metricRelabelings",
    "serviceMonitor.namespace",
    "serviceMonitor.relabelings",
    "serviceMonitor.serverName",
    "startingDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "suspend",
    "timeZone",
    "tolerations",
    "topologySpreadConstraints",
    "ttlSecondsAfterFinished",
]


def template(helm: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm, "template", "rel", str(CHART), "--namespace", "kube-system", *args],
        capture_output=True,
        text=True,
        check=check,
    )


def docs_of(helm: str, *args: str) -> dict[str, dict[str, Any]]:
    """kind -> object (the last of a kind) of a rendering."""
    return {d["kind"]: d for d in yaml.safe_load_all(template(helm, *args).stdout) if d}


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec = workload["spec"]
    if workload["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return dict(spec["template"]["spec"])


def test_every_upstream_value_path_is_known_to_the_schema_and_in_the_readme_table() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    readme = (CHART / "README.md").read_text()
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", readme, re.M))
    for path in UPSTREAM_PATHS:
        node = schema
        for part in path.split("."):
            props = node.get("properties", {})
            if part not in props:
                assert node.get("additionalProperties", True) is not False or path.startswith(
                    "deschedulerPolicy."
                ), path
                break
            node = props[part]
        assert path in rows, f"README.md has no row for {path}"
        assert rows[path].strip().startswith(("honoured", "not applicable")), (path, rows[path])


def test_upstream_values_file_is_honoured(helm: str) -> None:
    docs = docs_of(helm, "-f", str(UPSTREAM_VALUES))
    values = yaml.safe_load(UPSTREAM_VALUES.read_text())
    deploy = docs["Deployment"]
    spec = pod_spec(deploy)
    container = spec["containers"][0]
    assert deploy["metadata"]["name"] == "team-descheduler"
    assert deploy["metadata"]["annotations"] == values["deploymentAnnotations"]
    for key in ("nodeSelector", "tolerations", "affinity", "topologySpreadConstraints", "imagePullSecrets"):
        assert spec[key] == values[key], key
    assert spec["securityContext"] == values["podSecurityContext"]
    assert container["securityContext"] == values["securityContext"]
    assert container["livenessProbe"] == values["livenessProbe"]
    assert container["image"] == "registry.k8s.io/descheduler/descheduler:v0.36.0"
    assert container["command"] == ["/bin/descheduler"]
    assert "--v=4" in container["args"] and "--logging-format=text" in container["args"]
    assert "--leader-elect-resource-name=descheduler-upstream-values" in container["args"]
    assert "--leader-elect-resource-namespace=kube-system" in container["args"]  # resourceNamescape
    template_meta = deploy["spec"]["template"]["metadata"]
    assert template_meta["labels"]["app.example.com/part-of"] == "descheduling"
    assert template_meta["annotations"]["example.com/owner"] == "platform"
    assert re.fullmatch(r"[0-9a-f]{64}", template_meta["annotations"]["checksum/config"])
    for doc in docs.values():
        assert doc["metadata"]["labels"]["team"] == "platform", doc["kind"]  # commonLabels
    assert docs["ServiceAccount"]["metadata"]["name"] == "team-descheduler-sa"
    assert docs["ServiceAccount"]["metadata"]["annotations"] == values["serviceAccount"]["annotations"]
    assert docs["ClusterRoleBinding"]["subjects"][0]["name"] == "team-descheduler-sa"
    monitor = docs["ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["interval"] == "30s" and endpoint["scrapeTimeout"] == "10s"
    assert endpoint["relabelings"] == values["serviceMonitor"]["relabelings"]
    assert endpoint["metricRelabelings"] == values["serviceMonitor"]["metricRelabelings"]
    assert docs["Service"]["spec"]["ports"][0]["name"] == endpoint["port"]
    assert docs["PodDisruptionBudget"]["spec"]["minAvailable"] == 1


def test_cronjob_values(helm: str) -> None:
    docs = docs_of(
        helm,
        *(
            "--set",
            "successfulJobsHistoryLimit=0",
            "--set",
            "failedJobsHistoryLimit=2",
            "--set",
            "timeZone=Etc/UTC",
        ),
        *(
            "--set",
            "startingDeadlineSeconds=200",
            "--set",
            "suspend=true",
            "--set",
            "ttlSecondsAfterFinished=600",
        ),
        *("--set", "cronJobAnnotations.a=b", "--set", "cronJobLabels.c=d", "--set", "jobLabels.e=f"),
        *(
            "--set",
            "jobAnnotations.g=h",
            "--set",
            "activeDeadlineSeconds=300",
            "--set",
            "namespaceOverride=ops",
        ),
    )
    cron = docs["CronJob"]
    spec = cron["spec"]
    assert spec["successfulJobsHistoryLimit"] == 0 and spec["failedJobsHistoryLimit"] == 2
    assert (
        spec["timeZone"] == "Etc/UTC" and spec["startingDeadlineSeconds"] == 200 and spec["suspend"] is True
    )
    assert spec["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] == 600
    assert spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 300
    assert spec["jobTemplate"]["metadata"] == {"labels": {"e": "f"}, "annotations": {"g": "h"}}
    assert cron["metadata"]["annotations"] == {"a": "b"} and cron["metadata"]["labels"]["c"] == "d"
    assert cron["metadata"]["namespace"] == "ops" and docs["ConfigMap"]["metadata"]["namespace"] == "ops"
    assert docs["ClusterRoleBinding"]["subjects"][0]["namespace"] == "ops"


def test_deployment_at_fixed_times(helm: str) -> None:
    """deschedulingIntervalCronExpression replaces --descheduling-interval (they are mutually
    exclusive flags) and timeZone gives the expression's zone."""
    docs = docs_of(
        helm,
        *("--set", "kind=Deployment", "--set-string", "deschedulingIntervalCronExpression=0 2 * * *"),
        *("--set", "timeZone=Europe/Paris"),
    )
    args = pod_spec(docs["Deployment"])["containers"][0]["args"]
    assert "--descheduling-interval-cron-expression=0 2 * * *" in args
    assert "--descheduling-interval-cron-time-zone=Europe/Paris" in args
    assert not any(a.startswith("--descheduling-interval=") for a in args)
    # the flags as rendered parse, and mean a cron schedule (desched refuses them otherwise)
    from desched.cli import build_parser

    parsed = build_parser().parse_args(["run", *args])
    assert parsed.descheduling_interval is None
    assert parsed.descheduling_interval_cron_expression == "0 2 * * *"
    plain = pod_spec(docs_of(helm, "--set", "kind=Deployment")["Deployment"])["containers"][0]["args"]
    assert "--descheduling-interval=5m" in plain
    assert not any(a.startswith("--descheduling-interval-cron") for a in plain)


def test_rbac_and_service_account_switches(helm: str) -> None:
    docs = docs_of(helm, "--set", "rbac.create=false", "--set", "serviceAccount.create=false")
    assert "ClusterRole" not in docs and "ClusterRoleBinding" not in docs and "ServiceAccount" not in docs
    assert pod_spec(docs["CronJob"])["serviceAccountName"] == "default"
    docs = docs_of(helm, "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=mine")
    assert pod_spec(docs["CronJob"])["serviceAccountName"] == "mine"
    assert docs["ClusterRoleBinding"]["subjects"][0]["name"] == "mine"


def test_default_spread_constraints_may_read_services_and_controllers(helm: str) -> None:
    def rules(*args: str) -> list[str]:
        role = docs_of(helm, *args)["ClusterRole"]
        return [res for rule in role["rules"] for res in rule["resources"]]

    assert "replicasets" not in rules() and "services" not in rules()
    spread = (
        'deschedulerPolicy.profiles=[{"name":"s","pluginConfig":[{"name":'
        '"RemovePodsViolatingTopologySpreadConstraint","args":{"defaultConstraints":{}}}],'
        '"plugins":{"balance":{"enabled":["RemovePodsViolatingTopologySpreadConstraint"]}}}]'
    )
    got = rules("--set-json", spread)
    assert {"services", "replicationcontrollers", "replicasets", "statefulsets"} <= set(got)
    # exactly what the kustomize Component deploy/kubernetes/workloads grants
    added = [
        r
        for r in docs_of(helm, "--set-json", spread)["ClusterRole"]["rules"]
        if r not in docs_of(helm)["ClusterRole"]["rules"]
    ]
    component = ROOT / "deploy" / "kubernetes" / "workloads" / "rbac.yaml"
    role = next(d for d in yaml.safe_load_all(component.read_text()) if d["kind"] == "ClusterRole")
    assert added == role["rules"]


def test_null_cmd_options_render_bare_flags(helm: str) -> None:
    docs = docs_of(helm, "--set", "cmdOptions.dry-run=null", "--set", "cmdOptions.v=2")
    args = pod_spec(docs["CronJob"])["containers"][0]["args"]
    assert "--dry-run" in args and "--v=2" in args and not any(a.startswith("--dry-run=") for a in args)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--set", "nodeSelectr.a=b"), "additional properties 'nodeSelectr' not allowed"),
        (("--set", "replicas=two"), "/replicas"),
        (("--set", "kind=StatefulSet"), "/kind"),
        (
            ("--set", "serviceMonitor.relabeling[0].action=drop"),
            "additional properties 'relabeling' not allowed",
        ),
        (("--set", "leaderElection.leaseDuration=15"), "/leaderElection/leaseDuration"),
        (("--set", "image.tags=v1"), "additional properties 'tags' not allowed"),
    ],
)
def test_a_wrong_key_or_type_fails(helm: str, args: tuple[str, ...], message: str) -> None:
    proc = template(helm, *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_config_checksum_follows_the_policy(helm: str) -> None:
    def checksum(*args: str) -> str:
        workload = docs_of(helm, "--set", "kind=Deployment", *args)["Deployment"]
        return str(workload["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert checksum() == checksum()
    assert checksum() != checksum("--set", "deschedulerPolicy.maxNoOfPodsToEvictPerNode=5")


def test_service_monitor_only_where_it_can_scrape(helm: str) -> None:
    assert "ServiceMonitor" not in docs_of(helm, "--set", "serviceMonitor.enabled=true")  # a CronJob
    deployment = ("--set", "kind=Deployment", "--set", "serviceMonitor.enabled=true")
    assert "ServiceMonitor" in docs_of(helm, *deployment)
    assert "ServiceMonitor" not in docs_of(helm, *deployment, "--set", "cmdOptions.disable-metrics=true")
    assert "ServiceMonitor" not in docs_of(helm, *deployment, "--set", "cmdOptions.disable-metrics=null")


def test_prometheus_rule_and_dashboard_use_metrics_desched_exposes(helm: str) -> None:
    from prometheus_client import generate_latest

    from desched.runtime.metrics import Metrics

    exposed = set(re.findall(r"^# TYPE (\S+) (\S+)$", generate_latest(Metrics().registry).decode(), re.M))
    names = {n for n, _ in exposed} | {
        f"{n}_{s}" for n, t in exposed if t == "histogram" for s in ("bucket", "sum", "count")
    }
    names.add("up")
    docs = docs_of(
        helm,
        "--set",
        "kind=Deployment",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "grafanaDashboard.enabled=true",
    )
    rules = docs["PrometheusRule"]["spec"]["groups"][0]["rules"]
    assert {r["alert"] for r in rules} == {
        "DeschedDown",
        "DeschedEvictionsFailing",
        "DeschedCycleSlowerThanInterval",
        "DeschedMemoryNearLimit",
    }
    exprs = [r["expr"] for r in rules]
    assert "> 300" in exprs[2]  # deschedulingInterval 5m
    assert "0.9 * 402653184" in exprs[3]  # 384Mi
    dashboard = docs["ConfigMap"]  # the last ConfigMap rendered is the dashboard's
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    panels = json.loads(dashboard["data"]["desched.json"])["panels"]
    exprs += [t["expr"] for p in panels for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b((?:descheduler|process)_[a-z_]+|up)\{", e)}
    assert used and used <= names, used - names
    assert "ServiceMonitor" not in docs  # opt-in separately
    assert "PrometheusRule" not in docs_of(
        helm, "--set", "prometheusRule.enabled=true"
    )  # a CronJob: nothing scraped
    # cycles at cron times have no interval to compare with: that alert is left out, the rest stay
    cron = docs_of(
        helm,
        "--set",
        "kind=Deployment",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "deschedulingIntervalCronExpression=0 2 * * *",
    )
    assert {r["alert"] for r in cron["PrometheusRule"]["spec"]["groups"][0]["rules"]} == {
        "DeschedDown",
        "DeschedEvictionsFailing",
        "DeschedMemoryNearLimit",
    }


def test_helm_lint_is_clean(helm: str) -> None:
    out = subprocess.run([helm, "lint", str(CHART), "--strict"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[WARNING]" not in out.stdout and "[ERROR]" not in out.stdout


def test_the_safety_state_role_only_with_a_rule_that_remembers(helm: str) -> None:
    """evictionPolicy cooldown / rateLimits / waitForReplacement (top level or in a profile): a Role
    on the one ConfigMap the run keeps their memory in, and the flag naming it; otherwise neither
    (an upstream policy renders as before)."""

    def rendered(*args: str) -> list[dict[str, Any]]:
        out = template(helm, "--set", "kind=Deployment", *args).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    plain = rendered()
    assert not [d for d in plain if d["kind"] in ("Role", "RoleBinding")]
    args = next(d for d in plain if d["kind"] == "Deployment")
    assert not [a for a in pod_spec(args)["containers"][0]["args"] if "safety-state" in a]
    assert not [
        d
        for d in rendered("--set", "deschedulerPolicy.evictionPolicy.maxEvictionsPerWorkload=1")
        if d["kind"] == "Role"
    ]
    profile = (
        'deschedulerPolicy.profiles=[{"name":"p","evictionPolicy":{"waitForReplacement":{}},'
        '"plugins":{"deschedule":{"enabled":["PodLifeTime"]}},'
        '"pluginConfig":[{"name":"PodLifeTime","args":{"maxPodLifeTimeSeconds":60}}]}]'
    )
    for values in (
        ("--set", "deschedulerPolicy.evictionPolicy.cooldown.base=10m"),
        ("--set", "deschedulerPolicy.evictionPolicy.rateLimits.cluster.evictionsPerMinute=1"),
        ("--set-json", profile),
    ):
        docs = rendered(*values)
        (role,) = [d for d in docs if d["kind"] == "Role"]
        (binding,) = [d for d in docs if d["kind"] == "RoleBinding"]
        assert role["metadata"]["namespace"] == "kube-system"
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["rel-desched-safety-state"],
                "verbs": ["get", "update"],
            },
        ], values
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        deployment = next(d for d in docs if d["kind"] == "Deployment")
        container_args = pod_spec(deployment)["containers"][0]["args"]
        assert "--safety-state-configmap=rel-desched-safety-state" in container_args
