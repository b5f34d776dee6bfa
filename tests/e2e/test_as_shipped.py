"""Every shipped way to deploy desched, run as shipped against the real kube-apiserver.

For each form (the kustomize Job, CronJob and Deployment; the Helm chart's defaults; the chart
with leader election and two replicas; the chart with a values file written in upstream's chart's
keys) the test renders the manifests with the real tools (``kustomize build``, ``helm template``),
applies the rendered ServiceAccount, RBAC and ConfigMap to the apiserver, and runs the rendered
container's ``command`` and ``args`` verbatim as a local process, one per replica. desched then
has only what the pod would have:

- **Credentials**: a token of the rendered ServiceAccount from the TokenRequest API, bound to the
  rendered (least-privilege) ClusterRole, in a kubeconfig named by ``$KUBECONFIG`` (in a pod,
  in-cluster config). A missing permission fails the run.
- **Files**: every ``volumeMount`` of the container becomes a directory under the test's temp dir,
  and every argument naming a path under a mount has that mount's prefix rewritten to it (e.g.
  ``--policy-config-file=/policy-dir/policy.yaml`` -> ``<tmp>/mnt/policy-dir/policy.yaml``,
  ``--cert-dir=/tmp/certs`` -> ``<tmp>/replica-<i>/mnt/tmp/certs``: an emptyDir is each
  replica's own); nothing else in the arguments changes. A
  configMap volume holds the ConfigMap as read back from the apiserver; an emptyDir is empty.
- **Executable**: the image's programs map to this checkout's: ``desched`` (the image's
  ENTRYPOINT) to the venv's ``desched``, ``/bin/descheduler`` to ``deploy/bin/descheduler`` (the
  file the Dockerfile installs there) with the venv first on ``PATH``.
- **Network**: a pod has its own port space and the test machine one, so (and only so that two
  replicas and parallel test runs do not collide on 10258) ``--bind-address=127.0.0.1
  --secure-port=<free port>`` are appended after the verbatim args; the test first checks that the
  rendered args set neither and that the manifest's containerPort and probe port are desched's
  default, 10258, which these flags stand in for.

Each form gets a kwok node tainted ``NoSchedule`` with one pod that does not tolerate the taint
(the shipped policies' RemovePodsViolatingNodeTaints must evict it) and one that does (it must
stay). The run must start, evict that pod, serve ``/healthz`` and ``/metrics`` over HTTPS (the
Deployment forms) and end with exit code 0: after its one cycle (Job, CronJob) or within a few
seconds of SIGTERM (Deployment). A rendered argument desched does not know fails the run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import apply_manifest, desched_env, free_port, wait_for
from tests.e2e.test_live_run import make_pod, new_namespace
from tests.tools import tool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "desched"
KUSTOMIZE = ROOT / "deploy" / "kubernetes"
UPSTREAM_VALUES = Path(__file__).resolve().parent / "data" / "upstream-chart-values.yaml"
UPSTREAM_STYLE = Path(__file__).resolve().parent / "data" / "upstream-values"
VENV_BIN = Path(sys.executable).parent
#: the image's programs (deploy/Dockerfile) -> this checkout's
IMAGE_PROGRAMS = {
    "desched": [str(VENV_BIN / "desched")],
    "/bin/descheduler": ["/bin/sh", str(ROOT / "deploy" / "bin" / "descheduler")],
}
DEFAULT_PORT = 10258
#: what the test applies of a rendering (the workload itself is run as a process)
APPLIED = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap"}
STOP_WITHIN = 10.0


@pytest.fixture(scope="module")
def helm() -> str:
    return tool("DESCHED_HELM", "build-helm.sh")


@pytest.fixture(scope="module")
def kustomize() -> str:
    return tool("DESCHED_KUSTOMIZE", "build-kustomize.sh")


def kustomize_build(kustomize: str, base: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [kustomize, "build", str(KUSTOMIZE / base)], capture_output=True, text=True, check=True
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def helm_template(helm: str, release: str, *args: str) -> list[dict[str, Any]]:
    cmd = [helm, "template", release, str(CHART), "--namespace", "kube-system", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


# ---------------------------------------------------------------------------------- the rendering


@dataclass
class Shipped:
    """A rendered form: the objects the test applies, and the workload's pod spec."""

    docs: list[dict[str, Any]]
    workload: dict[str, Any]
    pod_spec: dict[str, Any] = field(init=False)
    replicas: int = field(init=False)

    def __post_init__(self) -> None:
        kind = self.workload["kind"]
        spec = self.workload["spec"]
        if kind == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        self.pod_spec = spec["template"]["spec"]
        self.replicas = int(spec.get("replicas", 1)) if kind == "Deployment" else 1

    @property
    def kind(self) -> str:
        return str(self.workload["kind"])

    @property
    def namespace(self) -> str:
        return str(self.workload["metadata"]["namespace"])

    @property
    def container(self) -> dict[str, Any]:
        containers = self.pod_spec["containers"]
        assert len(containers) == 1, containers
        return dict(containers[0])


def shipped(docs: list[dict[str, Any]]) -> Shipped:
    workloads = [d for d in docs if d["kind"] in ("Job", "CronJob", "Deployment")]
    assert len(workloads) == 1, [d["kind"] for d in docs]
    return Shipped(docs, workloads[0])


# ---------------------------------------------------------------------------------- the pod, as a process


@dataclass
class Replica:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


def https_get(port: int, path: str) -> tuple[int, str]:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the self-signed serving certificate, as the kubelet's probe
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", timeout=5, context=ctx) as resp:
            return int(resp.status), resp.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), ""
    except OSError:
        return 0, ""


class Pod:
    """The rendered container run as local processes (see the module docstring for the mapping)."""

    def __init__(self, cp: ControlPlane, form: Shipped, tmp: Path) -> None:
        self.cp = cp
        self.form = form
        self.tmp = tmp
        self.replicas: list[Replica] = []
        container = form.container
        self.command: list[str] = list(container["command"])
        self.args: list[str] = [str(a) for a in container.get("args", [])]
        self.empty_dirs: set[str] = set()
        self.mounts = self._mount_volumes(container)
        self.kubeconfig = self._credentials()

    def _mount_volumes(self, container: dict[str, Any]) -> dict[str, Path]:
        volumes = {v["name"]: v for v in self.form.pod_spec.get("volumes", [])}
        mounts: dict[str, Path] = {}
        for m in container.get("volumeMounts", []):
            local = self.tmp / "mnt" / m["mountPath"].strip("/")
            local.mkdir(parents=True, exist_ok=True)
            volume = volumes[m["name"]]
            if "configMap" in volume:
                name = volume["configMap"]["name"]
                cm = self.cp.request("GET", f"/api/v1/namespaces/{self.form.namespace}/configmaps/{name}")
                for key, value in cm.get("data", {}).items():
                    (local / key).write_text(value)
            else:
                assert "emptyDir" in volume, f"volume {m['name']}: only configMap and emptyDir are mapped"
                # an emptyDir is each pod's own: every replica gets a directory of its own below
                self.empty_dirs.add(m["mountPath"].rstrip("/"))
            mounts[m["mountPath"].rstrip("/")] = local
        return mounts

    def _credentials(self) -> Path:
        sa = self.form.pod_spec.get("serviceAccountName", "default")
        token = self.cp.service_account_token(self.form.namespace, sa)
        return self.cp.kubeconfig_for_token(token, name=f"shipped-{sa}-{uuid.uuid4().hex[:4]}")

    def _map_path(self, value: str, replica: int) -> str:
        for prefix, local in self.mounts.items():
            if value == prefix or value.startswith(prefix + "/"):
                if prefix in self.empty_dirs:
                    local = self.tmp / f"replica-{replica}" / "mnt" / prefix.strip("/")
                    local.mkdir(parents=True, exist_ok=True)
                return str(local) + value[len(prefix) :]
        return value

    def _map_arg(self, arg: str, replica: int) -> str:
        if arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            return f"{flag}={self._map_path(value, replica)}"
        return self._map_path(arg, replica)

    def argv(self, port: int, replica: int = 0) -> list[str]:
        program = self.command[0]
        assert program in IMAGE_PROGRAMS, f"command {self.command}: not a program of desched's image"
        for arg in self.args:
            flag = arg.split("=", 1)[0]
            assert flag not in ("--secure-port", "--bind-address", "--port"), f"the manifest sets {arg}"
        return [
            *IMAGE_PROGRAMS[program],
            *self.command[1:],
            *(self._map_arg(a, replica) for a in self.args),
            "--bind-address=127.0.0.1",
            f"--secure-port={port}",
        ]

    def start(self) -> None:
        container = self.form.container
        ports = [p["containerPort"] for p in container.get("ports", [])]
        assert ports == [DEFAULT_PORT], ports
        probe = container.get("livenessProbe", {}).get("httpGet", {})
        assert probe.get("port") == DEFAULT_PORT and probe.get("scheme") == "HTTPS", probe
        env = desched_env()
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        for i in range(self.form.replicas):
            port = free_port()
            log = self.tmp / f"replica-{i}.log"
            proc = subprocess.Popen(
                self.argv(port, i), stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env
            )
            self.replicas.append(Replica(proc, port, log))

    def check_started(self) -> None:
        """A run that ended at once (an unknown flag, a bad policy) fails here, with its output."""
        for r in self.replicas:
            rc = r.proc.poll()
            if rc is not None and rc != 0:
                out = r.text()
                if "unrecognized arguments" in out:
                    raise AssertionError(
                        f"exit {rc}, desched does not know a rendered argument: {out.strip()}"
                    )
                raise AssertionError(f"desched exited {rc} at start:\n{out}")

    def wait_exit(self, timeout: float) -> list[int]:
        codes = []
        for r in self.replicas:
            try:
                codes.append(r.proc.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                r.proc.kill()
                raise AssertionError(f"desched did not exit within {timeout:.0f}s:\n{r.text()}") from None
        return codes

    def stop(self) -> list[tuple[int, float]]:
        """SIGTERM every replica; (exit code, seconds it took) of each."""
        started = time.monotonic()
        for r in self.replicas:
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGTERM)
        out = []
        for r in self.replicas:
            try:
                rc = r.proc.wait(timeout=STOP_WITHIN)
            except subprocess.TimeoutExpired:
                r.proc.kill()
                r.proc.wait()
                rc = -9
            out.append((rc, time.monotonic() - started))
        return out

    def kill(self) -> None:
        for r in self.replicas:
            if r.proc.poll() is None:
                r.proc.kill()
                r.proc.wait()

    def logs(self) -> str:
        return "\n".join(f"--- replica {i}\n{r.text()}" for i, r in enumerate(self.replicas))


# ---------------------------------------------------------------------------------- the cluster


@dataclass
class Scenario:
    namespace: str
    node: str
    victim: str = "untolerated"
    keeper: str = "tolerated"

    def alive(self, cp: ControlPlane) -> set[str]:
        pods = cp.request("GET", f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        return {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}


@pytest.fixture(scope="module")
def cp(control_plane: Any) -> Iterator[ControlPlane]:
    if getattr(control_plane, "external", False):
        pytest.skip(
            "these tests run kwok and mint ServiceAccount tokens with the built-in control plane's admin"
        )
    plane: ControlPlane = control_plane
    plane.start_kwok()
    # the shipped policies skip a cycle with fewer than two Ready nodes
    for name in ("shipped-a", "shipped-b"):
        status, _ = plane.raw_request("GET", f"/api/v1/nodes/{name}")
        if status == 404:
            plane.create_fake_node(name, cpu="8", memory="32Gi")
    yield plane


def prepare(cp: ControlPlane, form: str) -> Scenario:
    """A node tainted NoSchedule; on it a pod that does not tolerate the taint and one that does."""
    ns = new_namespace(cp, f"shipped-{form}")
    node = f"shipped-{form}-{uuid.uuid4().hex[:4]}"
    taint = {"key": "e2e.desched/as-shipped", "value": form, "effect": "NoSchedule"}
    cp.create_fake_node(node, cpu="8", memory="32Gi", taints=[taint])
    s = Scenario(ns, node)
    make_pod(cp, ns, s.victim, node, owner="owner-untolerated")
    toleration = {"key": taint["key"], "operator": "Equal", "value": form, "effect": "NoSchedule"}
    make_pod(cp, ns, s.keeper, node, owner="owner-tolerated", tolerations=[toleration])

    def running() -> bool:
        pods = cp.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        return len(pods) == 2 and all(p.get("status", {}).get("phase") == "Running" for p in pods)

    wait_for(running, f"the pods of {ns} to run")
    return s


def apply_rendered(cp: ControlPlane, form: Shipped) -> None:
    kinds = {d["kind"] for d in form.docs}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap"} <= kinds, kinds
    for doc in form.docs:
        if doc["kind"] in APPLIED:
            apply_manifest(cp, doc)
    apply_manifest(cp, form.workload, dry_run=True)  # the workload the test runs is one the apiserver accepts


def leader_lease(form: Shipped) -> tuple[str, str] | None:
    """(namespace, name) of the Lease the rendered args elect a leader with, if they do."""
    flags = dict(a.split("=", 1) for a in form.container.get("args", []) if "=" in a)
    if flags.get("--leader-elect") != "true":
        return None
    return (
        flags.get("--leader-elect-resource-namespace", "kube-system"),
        flags.get("--leader-elect-resource-name", "descheduler"),
    )


def lease_holder(cp: ControlPlane, namespace: str, name: str) -> str:
    status, body = cp.raw_request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    return str(json.loads(body).get("spec", {}).get("holderIdentity") or "") if status == 200 else ""


def run_as_shipped(cp: ControlPlane, form: Shipped, tmp: Path, scenario: Scenario) -> dict[str, Any]:
    """Run the form; assert it evicts the untolerated pod only and stops cleanly. Facts for the report."""
    apply_rendered(cp, form)
    pod = Pod(cp, form, tmp)
    facts: dict[str, Any] = {
        "kind": form.kind,
        "replicas": form.replicas,
        "command": pod.command,
        "args": pod.args,
    }
    pod.start()
    facts["pids"] = [r.proc.pid for r in pod.replicas]
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # an argument it does not know ends it at once
            pod.check_started()
            time.sleep(0.1)
        if form.kind in ("Job", "CronJob"):
            codes = pod.wait_exit(timeout=120)
            pod.check_started()
            assert codes == [0], f"exit codes {codes}:\n{pod.logs()}"
        else:

            def evicted_victim() -> bool:
                pod.check_started()
                return scenario.victim not in scenario.alive(cp)

            wait_for(evicted_victim, f"desched to evict {scenario.namespace}/{scenario.victim}", timeout=90)
            for r in pod.replicas:
                assert https_get(r.port, "/healthz") == (200, "ok"), pod.logs()
                status, body = https_get(r.port, "/metrics")
                assert status == 200, pod.logs()
                assert "# TYPE descheduler_loop_duration_seconds histogram" in body
                assert "process_resident_memory_bytes" in body and "_created" not in body
            bodies = [https_get(r.port, "/metrics")[1] for r in pod.replicas]
            evicted = [
                line
                for body in bodies
                for line in body.splitlines()
                if line.startswith("descheduler_pods_evicted_total{")
                and f'namespace="{scenario.namespace}"' in line
                and 'result="success"' in line
            ]
            assert len(evicted) == 1 and 'strategy="RemovePodsViolatingNodeTaints"' in evicted[0], bodies
            facts["metrics_line"] = evicted[0]
            facts["rss_mib"] = [
                round(float(m.group(1)) / 2**20)
                for body in bodies
                if (m := re.search(r"^process_resident_memory_bytes (\S+)$", body, re.M))
            ]
            lease = leader_lease(form)
            if lease:
                facts["lease_holder"] = lease_holder(cp, *lease)
            stops = pod.stop()
            facts["stop"] = stops
            assert all(rc == 0 for rc, _ in stops), f"exit codes after SIGTERM {stops}:\n{pod.logs()}"
            assert all(s < STOP_WITHIN for _, s in stops), stops
            if lease:
                facts["lease_holder_after_stop"] = lease_holder(cp, *lease)
    except BaseException:
        sys.stderr.write(pod.logs())
        raise
    finally:
        pod.kill()
    alive = scenario.alive(cp)
    assert scenario.victim not in alive, pod.logs()
    assert scenario.keeper in alive, f"the pod tolerating the taint was evicted:\n{pod.logs()}"
    facts["evicted"] = f"{scenario.namespace}/{scenario.victim}"
    facts["log"] = pod.logs()
    print(json.dumps({k: v for k, v in facts.items() if k != "log"}))
    return facts


# ---------------------------------------------------------------------------------- the forms


@pytest.mark.parametrize("base", ["job", "cronjob", "deployment"])
def test_kustomize_form_runs_as_shipped(cp: ControlPlane, kustomize: str, tmp_path: Path, base: str) -> None:
    form = shipped(kustomize_build(kustomize, base))
    assert form.kind == {"job": "Job", "cronjob": "CronJob", "deployment": "Deployment"}[base]
    run_as_shipped(cp, form, tmp_path, prepare(cp, f"k-{base}"))


def test_helm_defaults_run_as_shipped(cp: ControlPlane, helm: str, tmp_path: Path) -> None:
    form = shipped(helm_template(helm, "shipped-defaults"))
    assert form.kind == "CronJob"
    run_as_shipped(cp, form, tmp_path, prepare(cp, "h-defaults"))


def test_helm_leader_election_two_replicas_run_as_shipped(
    cp: ControlPlane, helm: str, tmp_path: Path
) -> None:
    form = shipped(
        helm_template(
            helm,
            "shipped-ha",
            "--set",
            "kind=Deployment",
            "--set",
            "replicas=2",
            "--set",
            "leaderElection.enabled=true",
            "--set",
            "leaderElection.resourceName=desched-shipped-ha",
            "--set",
            "deschedulingInterval=20s",
        )
    )
    assert form.kind == "Deployment" and form.replicas == 2
    rules = next(d for d in form.docs if d["kind"] == "ClusterRole")["rules"]
    lease_rule = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"]}
    assert {
        **lease_rule,
        "resourceNames": ["desched-shipped-ha"],
        "verbs": ["get", "patch", "delete"],
    } in rules
    cp.raw_request("DELETE", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/desched-shipped-ha")
    facts = run_as_shipped(cp, form, tmp_path, prepare(cp, "h-ha"))
    # one replica held the Lease (and only it evicted: one success series across both replicas'
    # /metrics, asserted in run_as_shipped); SIGTERM released it
    pids = {str(r) for r in facts["pids"]}
    assert any(facts["lease_holder"].endswith(f"_{pid}") for pid in pids), (facts["lease_holder"], pids)
    assert facts["lease_holder_after_stop"] == "", facts["lease_holder_after_stop"]


def test_helm_upstream_values_file_runs_as_shipped(cp: ControlPlane, helm: str, tmp_path: Path) -> None:
    form = shipped(helm_template(helm, "shipped-upstream", "-f", str(UPSTREAM_VALUES)))
    assert form.kind == "Deployment" and form.container["command"] == ["/bin/descheduler"]
    assert form.workload["metadata"]["name"] == "team-descheduler"
    assert form.pod_spec["serviceAccountName"] == "team-descheduler-sa"
    assert form.pod_spec["imagePullSecrets"] == [{"name": "registry-credentials"}]
    cp.raw_request(
        "DELETE", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/descheduler-upstream-values"
    )
    run_as_shipped(cp, form, tmp_path, prepare(cp, "h-upstream"))


def test_helm_with_the_users_own_policy_configmap_runs_as_shipped(
    cp: ControlPlane, helm: str, tmp_path: Path
) -> None:
    """Upstream's `deschedulerPolicy: null`: the chart renders no ConfigMap; the user's ConfigMap
    (named as the release's full name), applied next to the release, is the policy the run uses."""
    form = shipped(
        helm_template(
            helm, "shipped-own-policy", "-f", str(UPSTREAM_STYLE / "existing-configmap-values.yaml")
        )
    )
    assert "ConfigMap" not in {d["kind"] for d in form.docs}
    users = yaml.safe_load((UPSTREAM_STYLE / "existing-configmap.yaml").read_text())
    form.docs.append(users)  # what the user applies (GitOps) next to `helm install`
    facts = run_as_shipped(cp, form, tmp_path, prepare(cp, "h-own-policy"))
    assert 'profile="gitops"' in facts["log"] or "gitops" in facts["log"], facts["log"][-2000:]


def test_helm_tpl_policy_runs_as_shipped(cp: ControlPlane, helm: str, tmp_path: Path) -> None:
    """A policy with `{{ .Release.Namespace }}` and `.Values` in it: rendered through tpl, it
    loads, and its RemovePodsViolatingNodeTaints evicts."""
    form = shipped(helm_template(helm, "shipped-tpl", "-f", str(UPSTREAM_STYLE / "tpl.yaml")))
    policy = next(d for d in form.docs if d["kind"] == "ConfigMap")["data"]["policy.yaml"]
    assert "{{" not in policy and "node.example.com/maintenance" in policy
    run_as_shipped(cp, form, tmp_path, prepare(cp, "h-tpl"))


def test_helm_v1alpha1_values_run_as_shipped(cp: ControlPlane, helm: str, tmp_path: Path) -> None:
    """An upstream values file with a v1alpha1 `strategies:` policy: rendered alone, converted by
    desched at start, and its RemovePodsViolatingNodeTaints evicts."""
    form = shipped(helm_template(helm, "shipped-v1alpha1", "-f", str(UPSTREAM_STYLE / "v1alpha1.yaml")))
    assert form.kind == "CronJob"
    facts = run_as_shipped(cp, form, tmp_path, prepare(cp, "h-v1alpha1"))
    assert "v1alpha1" in facts["log"], facts["log"][-2000:]


#: README.md, "Install in a cluster": the image a user built and pushed
YOUR_IMAGE = "registry.example.com/platform/desched"


def test_helm_with_your_image_runs_as_shipped(cp: ControlPlane, helm: str, tmp_path: Path) -> None:
    """README's `helm install ... --set image.repository=<your registry>`: the pods pull that image."""
    form = shipped(helm_template(helm, "shipped-yours", "--set", f"image.repository={YOUR_IMAGE}"))
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert form.container["image"] == f"{YOUR_IMAGE}:{version}"
    run_as_shipped(cp, form, tmp_path, prepare(cp, "h-yours"))


def test_kustomize_with_your_image_runs_as_shipped(cp: ControlPlane, kustomize: str, tmp_path: Path) -> None:
    """README's `kustomize edit set image` in deploy/kubernetes/cronjob (on a copy), then what
    `kubectl apply -k` applies: the CronJob pulls the user's image, and runs."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(KUSTOMIZE, copy)
    subprocess.run(
        [kustomize, "edit", "set", "image", f"ghcr.io/your-org/desched={YOUR_IMAGE}:0.1.0"],
        cwd=copy / "cronjob",
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        [kustomize, "build", str(copy / "cronjob")], capture_output=True, text=True, check=True
    )
    form = shipped([d for d in yaml.safe_load_all(out.stdout) if d])
    assert form.container["image"] == f"{YOUR_IMAGE}:0.1.0"
    run_as_shipped(cp, form, tmp_path / "run", prepare(cp, "k-yours"))


def test_a_rendered_argument_desched_does_not_know_fails_the_run(
    cp: ControlPlane, helm: str, tmp_path: Path
) -> None:
    """The runner's own check: an unknown rendered flag ends desched with exit 2 and fails the run."""
    form = shipped(helm_template(helm, "shipped-unknown", "--set", "cmdOptions.no-such-flag=1"))
    assert "--no-such-flag=1" in form.container["args"]
    with pytest.raises(
        AssertionError,
        match=r"exit 2, desched does not know a rendered argument: .*unrecognized arguments: --no-such-flag",
    ):
        run_as_shipped(cp, form, tmp_path, prepare(cp, "h-unknown"))


def test_the_run_has_only_the_manifests_permissions(cp: ControlPlane, kustomize: str, tmp_path: Path) -> None:
    """The runner's credentials are the rendered RBAC's: without its pods/eviction rule nothing is evicted."""
    docs = kustomize_build(kustomize, "job")
    for doc in docs:  # the same manifests under other names, so the other forms' RBAC stays intact
        if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            doc["metadata"]["name"] = "desched-no-eviction"
        if doc["kind"] == "ClusterRole":
            doc["rules"] = [r for r in doc["rules"] if r["resources"] != ["pods/eviction"]]
        if doc["kind"] == "ClusterRoleBinding":
            doc["roleRef"]["name"] = "desched-no-eviction"
            doc["subjects"][0]["name"] = "desched-sa-no-eviction"
        if doc["kind"] == "ServiceAccount":
            doc["metadata"]["name"] = "desched-sa-no-eviction"
        if doc["kind"] == "Job":
            doc["spec"]["template"]["spec"]["serviceAccountName"] = "desched-sa-no-eviction"
    with pytest.raises(AssertionError, match=r'cannot create resource "pods/eviction"(.|\n)*untolerated'):
        run_as_shipped(cp, shipped(docs), tmp_path, prepare(cp, "k-no-eviction"))


def test_helm_with_a_cooldown_keeps_its_state_as_shipped(cp: ControlPlane, helm: str, tmp_path: Path) -> None:
    """The chart with an evictionPolicy cooldown renders a Role on one ConfigMap: the run, with only
    the rendered permissions, writes its safety state there (docs/operations.md, "The safety state")."""
    form = shipped(
        helm_template(helm, "shipped-state", "--set", "deschedulerPolicy.evictionPolicy.cooldown.base=10m")
    )
    assert "--safety-state-configmap=shipped-state-desched-safety-state" in form.container["args"]
    assert {"Role", "RoleBinding"} <= {d["kind"] for d in form.docs}
    path = "/api/v1/namespaces/kube-system/configmaps/shipped-state-desched-safety-state"
    cp.raw_request("DELETE", path)
    scenario = prepare(cp, "h-state")
    facts = run_as_shipped(cp, form, tmp_path, scenario)
    assert (
        "the safety state is kept in ConfigMap kube-system/shipped-state-desched-safety-state" in facts["log"]
    )
    state = json.loads(cp.request("GET", path)["data"]["state.json"])
    assert [m for m in state["moves"] if m["workload"][0] == scenario.namespace], state
