"""kube-scheduler's cluster-level default spread constraints (upstream #1502), on a real control plane.

A kube-scheduler of its own runs with a KubeSchedulerConfiguration whose PodTopologySpread
``defaultConstraints`` ask for zones skewed by at most 1 (DoNotSchedule). A Deployment whose pods
declare no constraints lands on the only node there is; two more zones come up. Upstream's
behaviour (no ``defaultConstraints`` in the plugin's args) leaves the pods alone; with
``defaultConstraints`` read from the same file, ``desched run`` evicts two of them,
``desched simulate`` on a snapshot predicts the same and where the replacements go, and the real
kube-scheduler spreads the replacements one per zone.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import apply_manifest, run_desched, wait_for

ZONE = "topology.kubernetes.io/zone"
LABEL = "e2e-default-spread"
SCHEDULER_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": "default-scheduler",
            "pluginConfig": [
                {
                    "name": "PodTopologySpread",
                    "args": {
                        "defaultingType": "List",
                        "defaultConstraints": [
                            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                        ],
                    },
                }
            ],
        }
    ],
}


@pytest.fixture(scope="module")
def sched_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("default-spread") / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(SCHEDULER_CONFIG))
    return path


@pytest.fixture(scope="module")
def cp(sched_config: Path) -> Iterator[ControlPlane]:
    """A control plane of its own: its kube-scheduler applies the file's default constraints."""
    plane = ControlPlane()
    try:
        plane.start()
        plane.start_kwok()
        plane.start_controller_manager()
        plane.start_scheduler(config_path=sched_config)
    except Exception as e:  # never skip: the tier must not pass by not running
        plane.stop(keep_logs=True)
        pytest.fail(f"the e2e control plane did not start: {e}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


def policy(tmp: Path, args: dict[str, Any]) -> Path:
    plugin = "RemovePodsViolatingTopologySpreadConstraint"
    path = tmp / f"policy-{uuid.uuid4().hex[:6]}.yaml"
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": f"{LABEL}=true",
        "profiles": [
            {
                "name": "spread",
                "pluginConfig": [{"name": plugin, "args": args}],
                "plugins": {"balance": {"enabled": [plugin]}},
            }
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def web_pods(cp: ControlPlane, ns: str) -> dict[str, str]:
    """name -> node of the Deployment's pods that are running and not terminating."""
    pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3Dweb")["items"]
    return {
        p["metadata"]["name"]: p["spec"].get("nodeName", "")
        for p in pods
        if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("phase") == "Running"
    }


def run_once(cp: ControlPlane, pol: Path) -> str:
    proc = run_desched(
        "--v=2",
        "run",
        "--policy-config-file",
        str(pol),
        "--kubeconfig",
        str(cp.kubeconfig),
        "--descheduling-interval",
        "0",
        "--secure-port",
        "0",
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_pods_without_constraints_are_spread_by_the_cluster_defaults(
    cp: ControlPlane, sched_config: Path, tmp_path: Path
) -> None:
    ns = f"spread-{uuid.uuid4().hex[:6]}"
    cp.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    cp.create_fake_node("zone-a-1", labels={ZONE: "a", LABEL: "true"})
    apply_manifest(
        cp,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [
                            {"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}}}
                        ],
                        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
                    },
                },
            },
        },
    )
    # one zone: the default constraint has one domain, all three land there
    wait_for(lambda: sorted(web_pods(cp, ns).values()) == ["zone-a-1"] * 3, "3 pods on zone-a-1")
    first = set(web_pods(cp, ns))
    cp.create_fake_node("zone-b-1", labels={ZONE: "b", LABEL: "true"})
    cp.create_fake_node("zone-c-1", labels={ZONE: "c", LABEL: "true"})

    # upstream's behaviour: pods without constraints are not balanced
    run_once(cp, policy(tmp_path, {}))
    assert set(web_pods(cp, ns)) == first

    # simulate, on a snapshot with the workloads, predicts what run does and where the pods go
    with_defaults = policy(tmp_path, {"defaultConstraints": {"kubeSchedulerConfigFile": str(sched_config)}})
    snap = tmp_path / "snap.json"
    proc = run_desched("snapshot", "--workloads", "-o", str(snap), "--kubeconfig", str(cp.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    proc = run_desched(
        "simulate",
        str(snap),
        "--policy",
        str(with_defaults),
        "--kube-scheduler-config",
        str(sched_config),
        "--terminating-pods",
        "gone",
        "-o",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out["evictions"]) == 2, out["evictions"]
    assert sorted(p["node"] for p in out["placements"]) == ["zone-b-1", "zone-c-1"], out["placements"]

    log = run_once(cp, with_defaults)
    try:
        wait_for(
            lambda: (
                len(web_pods(cp, ns)) == 3
                and sorted(web_pods(cp, ns).values()) == ["zone-a-1", "zone-b-1", "zone-c-1"]
            ),
            "the replacements spread one per zone by kube-scheduler",
        )
    except AssertionError as e:
        raise AssertionError(
            f"{e}\ndesched said:\n{log}\nkube-scheduler:\n{cp.logs('kube-scheduler')}"
        ) from None
    assert len(first & set(web_pods(cp, ns))) == 1  # two were evicted and replaced
