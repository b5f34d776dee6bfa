"""The Helm chart in deploy/helm renders, and the apiserver accepts every object it renders."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.api.policy import load_policy
from desched.framework.registry import default_registry
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
    ],
    ids=["cronjob-defaults", "deployment-ha", "deployment-anomaly", "deployment-metrics"],
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
    assert ("Deployment" if "kind=Deployment" in values else "CronJob") in kinds
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
