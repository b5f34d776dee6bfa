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
UPSTREAM_STYLE = Path(__file__).resolve().parent / "data" / "upstream-values"
DEFAULT_REPOSITORY = "ghcr.io/your-org/desched"
APP_VERSION = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]


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
    assert "Pod" in kinds  # the `helm test` hook
    for doc in docs:
        try:
            # `helm test`'s pod runs after the install: its ServiceAccount exists by then
            apply_manifest(cp, doc, dry_run=doc["kind"] != "ServiceAccount")
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
    # chart 0.37
    "schedulerName",
    "runtimeClassName",
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
    # upstream's image (and its tag) would run upstream's binary: desched's default image instead
    assert container["image"] == f"{DEFAULT_REPOSITORY}:{APP_VERSION}"
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


@pytest.mark.parametrize(
    "where",
    [
        'deschedulerPolicy.evictionPolicy={"surge":{"maxReplicas":1}}',
        'deschedulerPolicy.profiles=[{"name":"s","evictionPolicy":{"surge":{}},'
        '"plugins":{"deschedule":{"enabled":["RemovePodsViolatingNodeTaints"]}}}]',
    ],
)
def test_surge_may_read_replicasets_and_restart_deployments(helm: str, where: str) -> None:
    base = docs_of(helm)["ClusterRole"]["rules"]
    assert not any("deployments" in r["resources"] for r in base)
    added = [r for r in docs_of(helm, "--set-json", where)["ClusterRole"]["rules"] if r not in base]
    # exactly what the kustomize Component deploy/kubernetes/surge grants
    component = ROOT / "deploy" / "kubernetes" / "surge" / "rbac.yaml"
    role = next(d for d in yaml.safe_load_all(component.read_text()) if d["kind"] == "ClusterRole")
    assert added == role["rules"]
    # another evictionPolicy rule adds nothing of the kind
    other = docs_of(helm, "--set-json", 'deschedulerPolicy.evictionPolicy={"predictive":true}')
    assert not any("deployments" in r["resources"] for r in other["ClusterRole"]["rules"])


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
        "DeschedPluginFailingEveryCycle",
        "DeschedNoCycleCompleted",
        "DeschedCycleSlowerThanInterval",
        "DeschedMemoryNearLimit",
    }
    by_name = {r["alert"]: r["expr"] for r in rules}
    exprs = list(by_name.values())
    assert "> 300" in by_name["DeschedCycleSlowerThanInterval"]  # deschedulingInterval 5m
    assert "0.9 * 402653184" in by_name["DeschedMemoryNearLimit"]  # 384Mi
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
        "DeschedPluginFailingEveryCycle",
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


# ------------------------------------------------------------------ upstream values files users have


def rendered_policy(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return dict(yaml.safe_load(docs["ConfigMap"]["data"]["policy.yaml"]))


def policy_volume(spec: dict[str, Any]) -> str:
    (volume,) = [v for v in spec["volumes"] if v["name"] == "policy-volume"]
    return str(volume["configMap"]["name"])


@pytest.mark.parametrize(
    "args",
    [
        ("-f", str(UPSTREAM_STYLE / "null-policy.yaml")),
        ("-f", str(UPSTREAM_STYLE / "existing-configmap-values.yaml")),
        ("--set", "deschedulerPolicy=null"),
    ],
    ids=["null", "empty", "set-null"],
)
def test_a_null_policy_renders_no_configmap_and_mounts_the_users(helm: str, args: tuple[str, ...]) -> None:
    """Upstream's way to keep the policy out of the chart: no ConfigMap, and the pods (and the
    `helm test` pod) mount the one named as the release's full name."""
    out = template(helm, *args).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert "null" not in out.split("policy.yaml")[-1].split("\n")[0]
    assert not [d for d in docs if d["kind"] == "ConfigMap"], out
    (workload,) = [d for d in docs if d["kind"] in ("CronJob", "Deployment", "Job")]
    name = workload["metadata"]["name"]
    assert policy_volume(pod_spec(workload)) == name
    (hook,) = [d for d in docs if d["kind"] == "Pod"]
    assert policy_volume(hook["spec"]) == name


def test_the_policy_goes_through_tpl(helm: str) -> None:
    docs = docs_of(helm, "-f", str(UPSTREAM_STYLE / "tpl.yaml"))
    text = docs["ConfigMap"]["data"]["policy.yaml"]
    assert "{{" not in text, text
    plugins = {c["name"]: c["args"] for c in rendered_policy(docs)["profiles"][0]["pluginConfig"]}
    assert plugins["LowNodeUtilization"]["evictableNamespaces"] == {"exclude": ["kube-system"]}
    assert plugins["RemovePodsViolatingNodeTaints"] == {
        "excludedTaints": ["node.example.com/maintenance"],
        "namespaces": {"exclude": ["kube-system"]},
    }
    load_policy(rendered_policy(docs), default_registry(entry_points=False))


def test_a_v1alpha1_policy_is_rendered_alone(helm: str) -> None:
    """Helm merges the user's `strategies:` with the chart's default `profiles`; the chart renders the
    v1alpha1 document alone, and desched converts it (here as at start)."""
    docs = docs_of(helm, "-f", str(UPSTREAM_STYLE / "v1alpha1.yaml"))
    policy = rendered_policy(docs)
    assert policy["apiVersion"] == "descheduler/v1alpha1"
    assert "profiles" not in policy
    user = yaml.safe_load((UPSTREAM_STYLE / "v1alpha1.yaml").read_text())["deschedulerPolicy"]
    assert {k: v for k, v in policy.items() if k not in ("apiVersion", "kind")} == user
    loaded = load_policy(policy, default_registry(entry_points=False))
    assert "RemovePodsViolatingNodeTaints" in repr(loaded)


def test_scheduler_name_and_runtime_class(helm: str) -> None:
    for kind in ("CronJob", "Deployment", "Job"):
        docs = docs_of(
            helm,
            *("--set", f"kind={kind}", "--set", "schedulerName=second-scheduler"),
            *("--set", "runtimeClassName=gvisor"),
        )
        spec = pod_spec(docs[kind])
        assert spec["schedulerName"] == "second-scheduler" and spec["runtimeClassName"] == "gvisor", kind
    spec = pod_spec(docs_of(helm)["CronJob"])
    assert "schedulerName" not in spec and "runtimeClassName" not in spec


@pytest.mark.parametrize(
    ("repository", "tag", "image"),
    [
        ("registry.k8s.io/descheduler/descheduler", "", f"{DEFAULT_REPOSITORY}:{APP_VERSION}"),
        ("registry.k8s.io/descheduler/descheduler", "v0.36.0", f"{DEFAULT_REPOSITORY}:{APP_VERSION}"),
        ("k8s.gcr.io/descheduler/descheduler", "v0.25.1", f"{DEFAULT_REPOSITORY}:{APP_VERSION}"),
        ("registry.example.com/platform/desched", "", f"registry.example.com/platform/desched:{APP_VERSION}"),
        (
            "registry.example.com/platform/desched",
            "0.1.0-rc1",
            "registry.example.com/platform/desched:0.1.0-rc1",
        ),
    ],
)
def test_upstreams_image_block_becomes_desched_image(
    helm: str, repository: str, tag: str, image: str
) -> None:
    docs = docs_of(helm, "--set", f"image.repository={repository}", "--set-string", f"image.tag={tag}")
    assert pod_spec(docs["CronJob"])["containers"][0]["image"] == image
    assert docs["Pod"]["spec"]["containers"][0]["image"] == image  # the helm test pod's


def test_the_default_repository_is_values_yamls() -> None:
    """The helper that replaces upstream's image names the same repository as values.yaml."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["image"]["repository"] == DEFAULT_REPOSITORY
    assert f'"{DEFAULT_REPOSITORY}"' in (CHART / "templates" / "_helpers.tpl").read_text()


def run_helm_test_pod(helm: str, tmp_path: Path, *args: str, user_configmap: Path | None = None) -> Any:
    """`helm test`'s pod, run as a process: its command, with /policy-dir holding the ConfigMap it
    mounts (the chart's, or the user's), and the image's `desched` this checkout's."""
    docs = [d for d in yaml.safe_load_all(template(helm, *args).stdout) if d]
    (hook,) = [d for d in docs if d["kind"] == "Pod"]
    assert hook["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = hook["spec"]["containers"]
    configmaps = [d for d in docs if d["kind"] == "ConfigMap"]
    if user_configmap is not None:
        configmaps.append(yaml.safe_load(user_configmap.read_text()))
    (mounted,) = [c for c in configmaps if c["metadata"]["name"] == policy_volume(hook["spec"])]
    (mount,) = container["volumeMounts"]
    local = tmp_path / mount["mountPath"].strip("/")
    local.mkdir(parents=True)
    for key, value in mounted["data"].items():
        (local / key).write_text(value)
    command = list(container["command"])
    assert command[0] == "desched", command
    venv_desched = str(Path(os.sys.executable).parent / "desched")
    argv = [venv_desched, *(a.replace(mount["mountPath"], str(local)) for a in command[1:])]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.parametrize(
    ("args", "user_configmap"),
    [
        ((), None),
        (("-f", str(UPSTREAM_STYLE / "tpl.yaml")), None),
        (("-f", str(UPSTREAM_STYLE / "v1alpha1.yaml")), None),
        (
            ("-f", str(UPSTREAM_STYLE / "existing-configmap-values.yaml")),
            UPSTREAM_STYLE / "existing-configmap.yaml",
        ),
    ],
    ids=["defaults", "tpl", "v1alpha1", "existing-configmap"],
)
def test_helm_test_pod_passes_a_good_policy(
    helm: str, tmp_path: Path, args: tuple[str, ...], user_configmap: Path | None
) -> None:
    proc = run_helm_test_pod(helm, tmp_path, *args, user_configmap=user_configmap)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_helm_test_pod_fails_a_bad_policy(helm: str, tmp_path: Path) -> None:
    """A threshold above 100% in the values: `helm test` fails, naming the field, before any cycle."""
    bad = (
        'deschedulerPolicy.profiles=[{"name":"p","pluginConfig":[{"name":"LowNodeUtilization","args":'
        '{"thresholds":{"cpu":20},"targetThresholds":{"cpu":150}}}],'
        '"plugins":{"balance":{"enabled":["LowNodeUtilization"]}}}]'
    )
    proc = run_helm_test_pod(helm, tmp_path, "--set-json", bad)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "targetThresholds" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


# ------------------------------------------------------------------ NOTES.txt


def install_notes(cp: Any, helm: str, *args: str) -> str:
    """What `helm install` prints after the install (a server-side dry run: the apiserver checks the
    objects, nothing is created)."""
    proc = subprocess.run(
        [
            *(helm, "install", "notes", str(CHART), "--namespace", "kube-system", "--dry-run=server"),
            *("--kubeconfig", str(cp.kubeconfig), *args),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("NOTES:", 1)[1]


def test_notes_say_what_runs_whether_it_evicts_and_where_to_look(control_plane: Any, helm: str) -> None:
    if getattr(control_plane, "external", False):
        pytest.skip("the dry-run install needs the built-in control plane's admin kubeconfig")
    notes = install_notes(control_plane, helm)
    assert 'CronJob notes-desched: one descheduling cycle per schedule "*/2 * * * *"' in notes
    assert "It EVICTS pods" in notes and "DRY RUN" not in notes
    assert f"Image: {DEFAULT_REPOSITORY}:{APP_VERSION}" in notes and "is a placeholder" in notes
    assert "kubectl -n kube-system get configmap notes-desched -o jsonpath='{.data.policy\\.yaml}'" in notes
    assert "helm test notes -n kube-system" in notes
    assert "get pods -l app.kubernetes.io/name=desched,app.kubernetes.io/instance=notes" in notes

    notes = install_notes(
        control_plane,
        helm,
        *("--set", "kind=Deployment", "--set", "cmdOptions.dry-run=null"),
        *("--set", "image.repository=registry.example.com/platform/desched"),
    )
    assert "Deployment notes-desched (1 replica(s)): a cycle every 5m" in notes
    assert "DRY RUN (cmdOptions.dry-run): nothing is evicted" in notes and "It EVICTS" not in notes
    assert f"Image: registry.example.com/platform/desched:{APP_VERSION}" in notes
    assert "placeholder" not in notes
    assert "kubectl -n kube-system logs deployment/notes-desched" in notes

    notes = install_notes(control_plane, helm, "-f", str(UPSTREAM_STYLE / "null-policy.yaml"))
    assert "the pods mount YOUR ConfigMap notes-desched (key policy.yaml)" in notes
    notes = install_notes(
        control_plane, helm, "--set", "image.repository=registry.k8s.io/descheduler/descheduler"
    )
    assert "your values name upstream's image, registry.k8s.io/descheduler/descheduler" in notes


@pytest.mark.parametrize("plugin", ["LowNodeUtilization", "HighNodeUtilization"])
def test_soft_taint_may_patch_nodes(helm: str, plugin: str) -> None:
    base = docs_of(helm)["ClusterRole"]["rules"]
    assert not any("nodes" in r["resources"] and "patch" in r["verbs"] for r in base)
    where = (
        'deschedulerPolicy.profiles=[{"name":"t","pluginConfig":[{"name":"' + plugin + '",'
        '"args":{"thresholds":{"cpu":20},"softTaint":{}}}],'
        '"plugins":{"balance":{"enabled":["' + plugin + '"]}}}]'
    )
    added = [r for r in docs_of(helm, "--set-json", where)["ClusterRole"]["rules"] if r not in base]
    # exactly what the kustomize Component deploy/kubernetes/softtaint grants
    component = ROOT / "deploy" / "kubernetes" / "softtaint" / "rbac.yaml"
    role = next(d for d in yaml.safe_load_all(component.read_text()) if d["kind"] == "ClusterRole")
    assert added == role["rules"]
    # the same plugin without softTaint adds no node patch
    plain = where.replace(',"softTaint":{}', "")
    rules = docs_of(helm, "--set-json", plain)["ClusterRole"]["rules"]
    assert not any("nodes" in r["resources"] and "patch" in r["verbs"] for r in rules)
