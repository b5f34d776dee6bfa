"""Upstream parity of the policy, through the CLI as users run it: the metrics-provider validation
upstream does (``desched validate``: one line naming the field and the value, exit code 2), and
DefaultEvictor always guarding a profile unless it opts in (``desched simulate``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import builders

NOW = "2026-11-21T12:00:00Z"
STARTED = "2026-11-21T10:00:00Z"


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def validate(tmp_path: Path, doc: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "policy.yaml"
    path.write_text(
        yaml.safe_dump({"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **doc})
    )
    return desched("validate", str(path))


PROM_URL = "https://prometheus-k8s.monitoring.svc:9091"


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        (
            {"metricsCollector": {"enabled": True}, "metricsProviders": [{"source": "KubernetesMetrics"}]},
            "metricsCollector.enabled: cannot be true together with a KubernetesMetrics entry of "
            "metricsProviders (got true, with metricsProviders: KubernetesMetrics); drop the deprecated "
            "metricsCollector",
        ),
        (
            {
                "metricsCollector": {"enabled": True},
                "metricsProviders": [
                    {"source": "Prometheus", "prometheus": {"url": PROM_URL}},
                    {"source": "KubernetesMetrics"},
                ],
            },
            "metricsCollector.enabled: cannot be true together with a KubernetesMetrics entry of "
            "metricsProviders (got true, with metricsProviders: Prometheus, KubernetesMetrics);",
        ),
        (
            {
                "metricsProviders": [
                    {"source": "Prometheus", "prometheus": {"url": PROM_URL, "authToken": {}}}
                ]
            },
            "metricsProviders[0].prometheus.authToken.secretReference: required when authToken is given "
            "(got authToken without it);",
        ),
        (
            {
                "metricsProviders": [
                    {
                        "source": "Prometheus",
                        "prometheus": {"url": PROM_URL, "authToken": {"secretReference": {"name": "tok"}}},
                    }
                ]
            },
            "metricsProviders[0].prometheus.authToken.secretReference.namespace: the token Secret needs "
            "both namespace and name (got namespace='', name='tok')",
        ),
        (
            {"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "http://example.com:-80"}}]},
            "metricsProviders[0].prometheus.url: not a usable URL: invalid port ':-80' after "
            "host, got 'http://example.com:-80'",
        ),
        (
            {"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "prometheus:9090"}}]},
            "metricsProviders[0].prometheus.url: not a usable URL: the scheme must be http or "
            "https, not 'prometheus', got 'prometheus:9090'",
        ),
        (
            {"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "http://prom etheus"}}]},
            "metricsProviders[0].prometheus.url: not a usable URL: invalid character in URL, "
            "got 'http://prom etheus'",
        ),
        (
            {"metricsProviders": [{"source": "Prometheus", "prometheus": {"url": "https://p/%zz"}}]},
            "metricsProviders[0].prometheus.url: not a usable URL: invalid URL escape, got 'https://p/%zz'",
        ),
        (
            {"metricsProviders": [{"source": "KubernetesMetrics"}, {"source": "KubernetesMetrics"}]},
            "metricsProviders[1].source: 'KubernetesMetrics' is listed twice (each source may be "
            "configured once)",
        ),
        (
            {
                "metricsProviders": [
                    {
                        "source": "Prometheus",
                        "prometheus": {"url": PROM_URL, "tlsConfig": {"cert_file": "/c"}},
                    }
                ]
            },
            "metricsProviders[0].prometheus.tlsConfig.key_file: required with cert_file: give key or "
            "key_file (got cert_file='/c' alone)",
        ),
        (
            {
                "metricsProviders": [
                    {
                        "source": "Prometheus",
                        "prometheus": {
                            "url": PROM_URL,
                            "tlsConfig": {"ca": "-----BEGIN CERTIFICATE-----", "ca_file": "/ca.crt"},
                        },
                    }
                ]
            },
            "metricsProviders[0].prometheus.tlsConfig.ca_file: cannot be given with ca "
            "(got ca_file='/ca.crt' and ca too)",
        ),
        (
            {
                "metricsProviders": [
                    {"source": "Prometheus", "prometheus": {"url": PROM_URL, "tlsConfig": {"key": "k"}}}
                ]
            },
            "metricsProviders[0].prometheus.tlsConfig.cert_file: required with key: give cert or cert_file "
            "(got key (PEM text) alone)",
        ),
        (
            {
                "metricsProviders": [
                    {
                        "source": "Prometheus",
                        "prometheus": {"url": PROM_URL, "tlsConfig": {"min_version": "TLS1.2"}},
                    }
                ]
            },
            "metricsProviders[0].prometheus.tlsConfig.min_version: must be one of TLS10, TLS11, TLS12, "
            "TLS13, got 'TLS1.2'",
        ),
        (
            {
                "metricsProviders": [
                    {
                        "source": "Prometheus",
                        "prometheus": {
                            "url": PROM_URL,
                            "tlsConfig": {"min_version": "TLS13", "max_version": "TLS12"},
                        },
                    }
                ]
            },
            "metricsProviders[0].prometheus.tlsConfig.max_version: must not be below min_version "
            "(got max_version='TLS12', min_version='TLS13')",
        ),
        (
            {
                "metricsProviders": [
                    {
                        "source": "Prometheus",
                        "prometheus": {"url": PROM_URL, "tlsConfig": {"ca_ref": "vault-ca"}},
                    }
                ]
            },
            "metricsProviders[0].prometheus.tlsConfig.ca_ref: needs a secret manager, which the descheduler "
            "does not configure (got 'vault-ca'); give ca or ca_file",
        ),
        (
            {"metricsProviders": [{"source": "Prometheus"}]},
            "metricsProviders[0].prometheus.url: required with source: Prometheus (got no url)",
        ),
        (
            {
                "metricsProviders": [
                    {"source": "Prometheus", "prometheus": {"url": PROM_URL, "tlsConfig": {"caFile": "/x"}}}
                ]
            },
            "metricsProviders[0].prometheus.tlsConfig.caFile: unknown field",
        ),
    ],
)
def test_validate_refuses_in_one_line(tmp_path: Path, doc: dict[str, Any], line: str) -> None:
    proc = validate(tmp_path, doc)
    assert proc.returncode == 2, proc.stdout
    assert proc.stdout == ""
    [only] = proc.stderr.splitlines()
    assert only.startswith(f"desched: error: {line}"), only


def test_the_deprecated_collector_beside_prometheus_alone_is_kubernetes_metrics(tmp_path: Path) -> None:
    """Upstream v0.36 refuses metricsCollector.enabled beside a KubernetesMetrics provider only
    (issue 24, d2-collector-with-prometheus): beside Prometheus it configures KubernetesMetrics too,
    so a plugin may read either, and the normalised policy keeps it (it validates to itself)."""
    lnu = {
        "name": "LowNodeUtilization",
        "args": {
            "thresholds": {"cpu": 20},
            "targetThresholds": {"cpu": 50},
            "metricsUtilization": {"source": "KubernetesMetrics"},
        },
    }
    doc = {
        "metricsCollector": {"enabled": True},
        "metricsProviders": [{"source": "Prometheus", "prometheus": {"url": PROM_URL}}],
        "profiles": [
            {"name": "p", "pluginConfig": [lnu], "plugins": {"balance": {"enabled": [lnu["name"]]}}}
        ],
    }
    proc = validate(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    normalised = yaml.safe_load(proc.stdout)
    assert normalised["metricsCollector"] == {"enabled": True}
    assert [p["source"] for p in normalised["metricsProviders"]] == ["Prometheus"]
    (tmp_path / "again.yaml").write_text(proc.stdout)
    again = desched("validate", str(tmp_path / "again.yaml"))
    assert again.returncode == 0, again.stderr
    assert again.stdout == proc.stdout


def test_validate_prints_the_tls_config(tmp_path: Path) -> None:
    tls = {"ca_file": "/etc/prometheus-ca/ca.crt", "server_name": "prometheus.monitoring.svc"}
    doc = {
        "metricsProviders": [
            {
                "source": "Prometheus",
                "prometheus": {
                    "url": PROM_URL,
                    "authToken": {"secretReference": {"namespace": "kube-system", "name": "tok"}},
                    "tlsConfig": tls,
                },
            }
        ]
    }
    proc = validate(tmp_path, doc)
    assert proc.returncode == 0, proc.stderr
    [provider] = yaml.safe_load(proc.stdout)["metricsProviders"]
    assert provider["prometheus"]["tlsConfig"] == {**tls, "insecure_skip_verify": False}


# ------------------------------------------------------------------------------ DefaultEvictor


def pod(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    return builders.pod_doc(
        name,
        namespace=namespace,
        uid=f"uid-{name}",
        created=STARTED,
        owner=("ReplicaSet", f"{name}-rs", "rs"),
        node="n1",
        spec=spec,
        ready=True,
        status={"startTime": STARTED},
    )


SNAPSHOT = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [builders.node_doc(n, hostname_label=False, cpu=None, memory=None) for n in ("n1", "n2")]
    + [
        builders.priority_class_doc("system-cluster-critical", 2000000000),
        pod("kube-system", "coredns", priorityClassName="system-cluster-critical", priority=2000000000),
        pod("default", "cache", volumes=[{"name": "scratch", "emptyDir": {}}]),
        pod("default", "web"),
    ],
}


def simulate(tmp_path: Path, profile: dict[str, Any]) -> tuple[list[str], str]:
    (tmp_path / "cluster.json").write_text(json.dumps(SNAPSHOT))
    policy = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "everything-old",
                "pluginConfig": [{"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 60}}],
                "plugins": {
                    "deschedule": {"enabled": ["PodLifeTime"]},
                    "filter": {"disabled": ["DefaultEvictor"]},
                    "preEvictionFilter": {"disabled": ["*"]},
                },
                **profile,
            }
        ],
    }
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    proc = desched(
        "simulate", str(tmp_path / "cluster.json"), "--policy", str(tmp_path / "policy.yaml"), "--now", NOW,
        "-o", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    evicted = sorted(f"{e['namespace']}/{e['name']}" for e in json.loads(proc.stdout)["evictions"])
    return evicted, proc.stderr


def test_disabling_default_evictor_keeps_its_protections_as_upstream(tmp_path: Path) -> None:
    evicted, stderr = simulate(tmp_path, {})
    # the system-critical pod and the pod with local storage stay, as with upstream
    assert evicted == ["default/web"]
    assert "profiles[0].plugins.filter.disabled: 'DefaultEvictor' does not disable DefaultEvictor" in stderr
    assert "set profiles[0].allowDisablingDefaultEvictor: true" in stderr


def test_the_opt_in_removes_default_evictor(tmp_path: Path) -> None:
    evicted, stderr = simulate(tmp_path, {"allowDisablingDefaultEvictor": True})
    assert evicted == ["default/cache", "default/web", "kube-system/coredns"]
    assert "DefaultEvictor" not in stderr
