"""The kustomize Component deploy/kubernetes/workloads, run as shipped against the real kube-apiserver.

A policy whose RemovePodsViolatingTopologySpreadConstraint args set ``defaultConstraints`` makes
``desched run`` watch Services, ReplicationControllers, ReplicaSets and StatefulSets (kube-scheduler's
default spread selector is made of them). The base ClusterRole does not grant that; the Component
does. Each test renders an overlay of the kustomize Job with ``kustomize build`` (the user's policy
patched into the ConfigMap, as a user would), applies the rendered RBAC and runs the rendered
container as tests/e2e/test_as_shipped.py does (under a token of the rendered ServiceAccount):

- ``resources: [../job]`` alone: desched ends at start with exit code 2 and one line naming the
  missing permission and the Component to add;
- ``resources: [../job]`` + ``components: [../workloads]``: it syncs, completes its one cycle and
  evicts what the cluster's default constraints (here the built-in system defaults: hostname
  maxSkew 3, ``ScheduleAnyway``) say: 6 pods selected by one Service, all on one of three nodes.

Each overlay adds its own ``nameSuffix``, so its ServiceAccount, ClusterRoles and ConfigMap are its
own: the other shipped forms' objects (and a base-only identity here) never get the Component's rules.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import apply_manifest, wait_for
from tests.e2e.test_as_shipped import KUSTOMIZE, Pod, apply_rendered, shipped, tool
from tests.e2e.test_live_run import make_pod, new_namespace

PLUGIN = "RemovePodsViolatingTopologySpreadConstraint"
LABEL = "e2e-workloads"
#: the rules the Component must grant: what the Helm chart adds for defaultConstraints
READ = ["get", "watch", "list"]
WORKLOAD_RULES = [
    {"apiGroups": [""], "resources": ["services", "replicationcontrollers"], "verbs": READ},
    {"apiGroups": ["apps"], "resources": ["replicasets", "statefulsets"], "verbs": READ},
]
PODS = 6


@pytest.fixture(scope="module")
def cp(control_plane: Any) -> Iterator[ControlPlane]:
    if getattr(control_plane, "external", False):
        pytest.skip("these tests run kwok and mint ServiceAccount tokens with the built-in control plane")
    plane: ControlPlane = control_plane
    plane.start_kwok()
    yield plane


@pytest.fixture(scope="module")
def kustomize() -> str:
    return tool("DESCHED_KUSTOMIZE", "build-kustomize.sh")


def policy(ns: str) -> str:
    """The user's policy: the system default constraints (ScheduleAnyway), balanced in ``ns``."""
    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": f"{LABEL}={ns}",
        "profiles": [
            {
                "name": "spread",
                "pluginConfig": [
                    {
                        "name": PLUGIN,
                        "args": {
                            "constraints": ["DoNotSchedule", "ScheduleAnyway"],
                            "defaultConstraints": {},
                            "namespaces": {"include": [ns]},
                        },
                    }
                ],
                "plugins": {"balance": {"enabled": [PLUGIN]}},
            }
        ],
    }
    return yaml.safe_dump(doc)


def render(kustomize: str, tmp: Path, ns: str, *, component: bool) -> list[dict[str, Any]]:
    """``kustomize build`` of a user's overlay: the Job, the Component if asked, the user's policy."""
    overlay = tmp / "overlay"
    overlay.mkdir()
    up = os.path.relpath(KUSTOMIZE, overlay)  # kustomize wants relative paths to other kustomizations
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "desched-policy-configmap", "namespace": "kube-system"},
        "data": {"policy.yaml": policy(ns)},
    }
    doc: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [f"{up}/job"],
        "nameSuffix": f"-{ns}",
        "patches": [{"patch": yaml.safe_dump(configmap)}],
    }
    if component:
        doc["components"] = [f"{up}/workloads"]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(doc))
    out = subprocess.run([kustomize, "build", str(overlay)], capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def prepare(cp: ControlPlane, prefix: str) -> tuple[str, list[str]]:
    """Three nodes of their own; 6 pods one Service selects, all on the first (pod names)."""
    ns = new_namespace(cp, prefix)
    nodes = [f"{ns}-{i}" for i in range(3)]
    for node in nodes:
        cp.create_fake_node(node, cpu="8", memory="32Gi", labels={LABEL: ns})
    apply_manifest(
        cp,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
        },
    )
    names = [f"web-{i}" for i in range(PODS)]
    for name in names:
        make_pod(cp, ns, name, nodes[0], owner="web-owner", labels={"app": "web"})

    def running() -> bool:
        pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        return len(pods) == PODS and all(p.get("status", {}).get("phase") == "Running" for p in pods)

    wait_for(running, f"the pods of {ns} to run")
    return ns, names


def alive(cp: ControlPlane, ns: str) -> set[str]:
    pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    return {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}


def run_job(cp: ControlPlane, docs: list[dict[str, Any]], tmp: Path) -> tuple[int, str]:
    """Apply the rendering's RBAC and ConfigMap, run its Job's container once: (exit code, output)."""
    form = shipped(docs)
    assert form.kind == "Job"
    apply_rendered(cp, form)
    pod = Pod(cp, form, tmp)
    pod.start()
    try:
        [code] = pod.wait_exit(timeout=120)
    finally:
        pod.kill()
    return code, pod.logs()


def test_base_rbac_alone_fails_at_start_naming_the_component(
    cp: ControlPlane, kustomize: str, tmp_path: Path
) -> None:
    ns, names = prepare(cp, "wl-base")
    docs = render(kustomize, tmp_path, ns, component=False)
    assert not [d for d in docs if d["kind"] == "ClusterRole" and d["rules"] == WORKLOAD_RULES]
    started = time.monotonic()
    code, out = run_job(cp, docs, tmp_path)
    took = time.monotonic() - started
    assert code == 2, out
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("desched: error:")]
    sa = re.escape(f"system:serviceaccount:kube-system:desched-sa-{ns}")
    assert len(errors) == 1, out
    assert re.fullmatch(
        rf"desched: error: 403 Forbidden from the API server at {re.escape(cp.server)}: {sa} cannot "
        r"(?:watch|list) (?:services|replicationcontrollers|replicasets\.apps|statefulsets\.apps) at the "
        r"cluster scope \(RBAC: defaultConstraints reads Services and workload controllers: add the "
        r"kustomize component deploy/kubernetes/workloads to your overlay, or bind the ClusterRole in its "
        r"rbac\.yaml to this identity\)",
        errors[0],
    ), errors[0]
    assert took < 30, f"a permanent 403 is not retried ({took:.1f}s)"
    assert alive(cp, ns) == set(names), "nothing is evicted"


def test_the_workloads_component_lets_default_constraints_run(
    cp: ControlPlane, kustomize: str, tmp_path: Path
) -> None:
    ns, names = prepare(cp, "wl-comp")
    docs = render(kustomize, tmp_path, ns, component=True)
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    assert roles[f"desched-workloads-{ns}"]["rules"] == WORKLOAD_RULES, roles
    binding = next(d for d in docs if d["metadata"]["name"] == f"desched-workloads-{ns}" and "roleRef" in d)
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": f"desched-sa-{ns}", "namespace": "kube-system"}
    ]
    code, out = run_job(cp, docs, tmp_path)
    assert code == 0, out
    assert "Traceback" not in out, out
    gone = set(names) - alive(cp, ns)
    # hostname maxSkew 3: 6-0-0 on three nodes; balanced to within the skew, 6 -> 3 (3 evicted)
    assert len(gone) == 3, out
