"""``desched run`` with a KubernetesMetrics provider on a control plane that does not serve
metrics.k8s.io: LowNodeUtilization reports an error for the cycle, the other plugins run.

(Metrics actually served through the aggregation layer: tests/e2e/test_metrics_api.py.)
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import run_desched


def test_lnu_without_metrics_api_errors_and_the_cycle_goes_on(control_plane: Any, tmp_path: Path) -> None:
    if getattr(control_plane, "external", False):
        pytest.skip("needs kwok on the built-in control plane")
    cp: ControlPlane = control_plane
    cp.start_kwok()
    label = f"um-{uuid.uuid4().hex[:6]}"
    for i in range(2):
        cp.create_fake_node(f"{label}-{i}", labels={"e2e/usage-metrics": label})
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "nodeSelector": f"e2e/usage-metrics={label}",
                "metricsProviders": [{"source": "KubernetesMetrics"}],
                "profiles": [
                    {
                        "name": "p",
                        "pluginConfig": [
                            {
                                "name": "LowNodeUtilization",
                                "args": {
                                    "thresholds": {"cpu": 20},
                                    "targetThresholds": {"cpu": 50},
                                    "metricsUtilization": {"source": "KubernetesMetrics"},
                                },
                            },
                            {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 1}},
                        ],
                        "plugins": {
                            "balance": {"enabled": ["LowNodeUtilization"]},
                            "deschedule": {"enabled": ["PodLifeTime"]},
                        },
                    }
                ],
            }
        )
    )
    started = time.monotonic()
    proc = run_desched(
        "--v=2",
        "run",
        "--policy-config-file",
        str(policy),
        "--kubeconfig",
        str(cp.kubeconfig),
        "--secure-port=0",
    )
    assert proc.returncode == 0, proc.stderr
    # a 404 for metrics.k8s.io is final: no waiting for metrics that will not come
    assert time.monotonic() - started < 30
    assert "metrics.k8s.io is not served" in proc.stderr
    assert "plugin LowNodeUtilization of profile p: error getting node usage" in proc.stderr
    assert "cycle done cycle=1 " in proc.stderr and " nodes=2 " in proc.stderr
