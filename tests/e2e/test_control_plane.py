"""Smoke tests of the e2e control plane itself: if these fail, the rest of the tier cannot work."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from tests import builders
from tests.e2e.controlplane import ApiError, ControlPlane

T = TypeVar("T")

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"  # never pulled: kwok only simulates containers


@pytest.fixture
def cp(control_plane: Any) -> ControlPlane:
    if getattr(control_plane, "external", False):
        pytest.skip("needs the locally started control plane (DESCHED_E2E_USE_KUBECONFIG=1 is set)")
    assert isinstance(control_plane, ControlPlane)
    return control_plane


def wait_for(what: str, fn: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.25) -> T:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = fn()
        except ApiError as e:
            last = e
        else:
            if value:
                return value
            last = value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def make_namespace(cp: ControlPlane) -> str:
    """A fresh namespace with its `default` ServiceAccount (which only kube-controller-manager
    would create; the ServiceAccount admission plugin rejects pods without it)."""
    ns = unique("e2e")
    cp.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    status, _ = cp.raw_request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
    )
    assert status in (201, 409), status  # 409: kube-controller-manager was faster
    return ns


def make_fake_node(cp: ControlPlane, **kw: Any) -> str:
    """A Ready, untainted kwok node labelled ``e2e/node=<its name>``."""
    name = unique("kwok-node")
    cp.create_fake_node(name, labels={"e2e/node": name}, **kw)
    return name


def pod_manifest(name: str, **spec: Any) -> dict[str, Any]:
    return builders.pod_doc(
        name,
        namespace=None,
        labels={"app": name},
        containers=[{"name": "main", "image": PAUSE_IMAGE}],
        phase=None,
        spec=spec,
    )


def pod_running(cp: ControlPlane, ns: str, name: str) -> dict[str, Any] | None:
    pod = cp.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    return pod if pod.get("status", {}).get("phase") == "Running" else None


def test_apiserver_serves_admin_kubeconfig(cp: ControlPlane) -> None:
    version = cp.request("GET", "/version")
    assert version["gitVersion"].startswith("v1.")
    assert cp.kubeconfig.is_file()
    names = {ns["metadata"]["name"] for ns in cp.request("GET", "/api/v1/namespaces")["items"]}
    assert {"default", "kube-system"} <= names


def test_kubernetes_asyncio_client_uses_the_kubeconfig(cp: ControlPlane) -> None:
    """The project's client library talks TLS (generated CA) + token to the apiserver."""
    kubernetes_asyncio = pytest.importorskip("kubernetes_asyncio")
    from kubernetes_asyncio import client, config

    async def main() -> set[str]:
        api_client = await config.new_client_from_config(config_file=str(cp.kubeconfig))
        async with api_client:
            v1 = client.CoreV1Api(api_client)
            nss = await v1.list_namespace()
            return {ns.metadata.name for ns in nss.items}

    assert kubernetes_asyncio is not None
    assert "kube-system" in asyncio.run(main())


def test_rbac_denies_unprivileged_token(cp: ControlPlane) -> None:
    status, _ = cp.raw_request("GET", "/api/v1/namespaces", token=cp.unprivileged_token)
    assert status == 403
    status, _ = cp.raw_request("GET", "/api/v1/namespaces", token="not-a-valid-token")
    assert status == 401
    # The identity is the one from the token file, and it is authenticated.
    review = cp.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        token=cp.unprivileged_token,
    )
    assert review["status"]["userInfo"]["username"] == "e2e-unprivileged"
    kubeconfig = cp.kubeconfig_for_token(cp.unprivileged_token)
    assert cp.unprivileged_token in kubeconfig.read_text()


def test_service_account_token_is_bound_by_rbac(cp: ControlPlane) -> None:
    ns = make_namespace(cp)
    cp.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}},
    )
    token = cp.service_account_token(ns, "reader")
    status, _ = cp.raw_request("GET", f"/api/v1/namespaces/{ns}/pods", token=token)
    assert status == 403
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}"
    # A Role of our own: the aggregated ClusterRoles (view, edit, admin) stay empty until
    # kube-controller-manager's clusterrole-aggregation controller fills them.
    cp.request(
        "POST",
        f"{rbac}/roles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
    )
    cp.request(
        "POST",
        f"{rbac}/rolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "reader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}],
        },
    )
    wait_for(
        "RBAC to allow the bound ServiceAccount",
        lambda: cp.raw_request("GET", f"/api/v1/namespaces/{ns}/pods", token=token)[0] == 200,
        timeout=30,
    )


def test_pod_on_kwok_node_goes_running(cp: ControlPlane) -> None:
    cp.start_kwok()
    node = make_fake_node(cp)
    ns = make_namespace(cp)
    cp.request("POST", f"/api/v1/namespaces/{ns}/pods", pod_manifest("bound", nodeName=node))
    pod = wait_for("pod Running", lambda: pod_running(cp, ns, "bound"))
    assert pod["spec"]["nodeName"] == node
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    # kwok finalizes deletions, as a kubelet would.
    cp.request("DELETE", f"/api/v1/namespaces/{ns}/pods/bound")
    wait_for("pod gone", lambda: cp.raw_request("GET", f"/api/v1/namespaces/{ns}/pods/bound")[0] == 404)


def test_scheduler_binds_unbound_pod_to_kwok_node(cp: ControlPlane) -> None:
    cp.start_kwok()
    cp.start_scheduler()
    node = make_fake_node(cp)
    ns = make_namespace(cp)
    cp.request(
        "POST",
        f"/api/v1/namespaces/{ns}/pods",
        pod_manifest("unbound", nodeSelector={"e2e/node": node}),
    )
    pod = wait_for("pod scheduled and Running", lambda: pod_running(cp, ns, "unbound"))
    assert pod["spec"]["nodeName"] == node


def test_controller_manager_creates_service_accounts_and_pdb_status(cp: ControlPlane) -> None:
    cp.start_controller_manager()
    ns = unique("e2e-kcm")
    cp.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    sa_path = f"/api/v1/namespaces/{ns}/serviceaccounts/default"
    wait_for("default ServiceAccount", lambda: cp.raw_request("GET", sa_path)[0] == 200)
    pdb = cp.request(
        "POST",
        f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "pdb"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
        },
    )
    generation = pdb["metadata"]["generation"]

    def observed() -> dict[str, Any] | None:
        got = cp.request("GET", f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/pdb")
        return got if got.get("status", {}).get("observedGeneration") == generation else None

    status = wait_for("disruption controller to observe the PDB", observed)["status"]
    assert status["disruptionsAllowed"] == 0


def test_restart_apiserver_keeps_state(cp: ControlPlane) -> None:
    ns = make_namespace(cp)
    cp.request(
        "POST",
        f"/api/v1/namespaces/{ns}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "survivor"}, "data": {"k": "v"}},
    )
    before = cp.server
    cp.restart_apiserver()
    assert cp.server == before  # same port: clients reconnect to the same address
    cm = cp.request("GET", f"/api/v1/namespaces/{ns}/configmaps/survivor")
    assert cm["data"] == {"k": "v"}
    cp.restart_apiserver(graceful=False)
    assert cp.request("GET", f"/api/v1/namespaces/{ns}/configmaps/survivor")["data"] == {"k": "v"}
    # Components that were running survive the restarts.
    for name in ("etcd", "kube-apiserver"):
        assert cp.running(name), cp.logs(name)


def test_a_component_that_lived_through_an_apiserver_restart_is_started_afresh(cp: ControlPlane) -> None:
    """The session shares one control plane: a kube-scheduler started before another module's
    apiserver restarts is replaced by a fresh one when a test starts it; one started after the
    latest restart is kept."""
    cp.start_scheduler()
    first = cp._procs["kube-scheduler"].popen
    cp.start_scheduler()
    assert cp._procs["kube-scheduler"].popen is first  # fresh: kept
    cp.restart_apiserver()
    assert cp.running("kube-scheduler")  # it lives through the restart
    cp.start_scheduler()
    second = cp._procs["kube-scheduler"].popen
    assert second is not first and first is not None and first.poll() is not None
    test_scheduler_binds_unbound_pod_to_kwok_node(cp)  # and the fresh one schedules
    cp.start_scheduler()
    assert cp._procs["kube-scheduler"].popen is second
