"""EvictionsInBackground on a real control plane, with a validating admission webhook answering
evictions as KubeVirt's does.

The webhook (served by this test over TLS on 127.0.0.1, registered for ``pods/eviction`` CREATE in
the test's namespace only) denies the eviction of "VM" pods with code 429 and KubeVirt's message
``Eviction triggered evacuation of VMI ...``, then marks the pod
``descheduler.alpha.kubernetes.io/eviction-in-progress`` as virt-controller does while it
live-migrates the VM; other pods' evictions are allowed. ``desched run
--feature-gates=EvictionsInBackground=true`` runs PodLifeTime every second over two VM pods
(annotated ``request-evict-only``) and one plain pod, with ``maxNoOfPodsToEvictPerNamespace: 2``:

- each VM pod is asked once (tracked, never asked again while it migrates), counted
  ``descheduler_pods_evicted_total{result="background"}``, and stays (it is migrating);
- the two evictions in progress fill the namespace's limit: the plain pod waits, cycle after cycle;
- one VM pod leaves (its migration is done): the plain pod is evicted in the next cycle;
- the other migration is cancelled (the annotation removed): the VM pod is asked again.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.controlplane import ControlPlane
from tests.e2e.support import DeschedProcess, wait_for

REQUEST_EVICT_ONLY = "descheduler.alpha.kubernetes.io/request-evict-only"
IN_PROGRESS = "descheduler.alpha.kubernetes.io/eviction-in-progress"
WEBHOOK = "virt-launcher-eviction-interceptor.e2e.desched.io"


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    """A control plane of its own (the webhook must not touch other tests' evictions)."""
    plane = ControlPlane()
    try:
        plane.start()
        plane.start_kwok()
    except Exception as e:  # never skip: the tier must not pass by not running
        plane.stop(keep_logs=True)
        pytest.fail(f"the e2e control plane did not start: {e}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


class KubeVirtWebhook:
    """Answers AdmissionReviews of pod evictions as KubeVirt's eviction interceptor does."""

    def __init__(self, cp: ControlPlane, vm_pods: set[str]) -> None:
        self.cp = cp
        self.vm_pods = vm_pods
        self.asked: list[str] = []
        pki = cp.workdir / "pki"  # the apiserver's serving certificate: SAN 127.0.0.1, the e2e CA
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki / "apiserver.crt", pki / "apiserver.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = review["request"]
                name, ns = request["name"], request["namespace"]
                response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
                if name in hook.vm_pods:
                    hook.asked.append(name)
                    response["allowed"] = False
                    response["status"] = {
                        "code": 429,
                        "message": f"Eviction triggered evacuation of VMI {ns}/{name}",
                    }
                    # virt-controller marks the pod while the VM migrates
                    threading.Thread(target=hook.mark_in_progress, args=(ns, name), daemon=True).start()
                body = json.dumps(
                    {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def mark_in_progress(self, ns: str, name: str) -> None:
        patch = {"metadata": {"annotations": {IN_PROGRESS: ""}}}
        self.cp.request(
            "PATCH",
            f"/api/v1/namespaces/{ns}/pods/{name}",
            patch,
            content_type="application/merge-patch+json",
        )

    def register(self, ns: str) -> None:
        port = self.server.server_address[1]
        ca = base64.b64encode(Path(self.cp.ca_file).read_bytes()).decode()
        self.cp.request(
            "POST",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": f"kubevirt-eviction-{ns}"},
                "webhooks": [
                    {
                        "name": WEBHOOK,
                        "clientConfig": {"url": f"https://127.0.0.1:{port}/evict", "caBundle": ca},
                        "rules": [
                            {
                                "operations": ["CREATE"],
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "resources": ["pods/eviction"],
                                "scope": "Namespaced",
                            }
                        ],
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                        "failurePolicy": "Fail",
                        "sideEffects": "NoneOnDryRun",
                        "admissionReviewVersions": ["v1"],
                        "timeoutSeconds": 5,
                    }
                ],
            },
        )

    def __enter__(self) -> KubeVirtWebhook:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def pod(ns: str, name: str, node: str, *, vm: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": ns,
        "labels": {"app": "vm" if vm else "web"},
        # not a bare pod (DefaultEvictor protects those); no controller runs here to act on it
        "ownerReferences": [
            {
                "apiVersion": "kubevirt.io/v1" if vm else "apps/v1",
                "kind": "VirtualMachineInstance" if vm else "ReplicaSet",
                "name": name,
                "uid": str(uuid.uuid4()),
                "controller": True,
            }
        ],
    }
    if vm:
        meta["annotations"] = {REQUEST_EVICT_ONLY: ""}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "image": "compute"}],
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
        },
    }


def test_evictions_in_background_are_tracked_until_the_pod_leaves(cp: ControlPlane, tmp_path: Path) -> None:
    ns = f"kubevirt-{uuid.uuid4().hex[:6]}"
    cp.request(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    # (no kube-controller-manager here to create it)
    cp.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
    )
    node = f"node-{ns}"
    cp.create_fake_node(node)
    cp.create_fake_node(f"spare-{ns}")  # (with one ready node only, a cycle evicts nothing)
    vms = {"virt-launcher-vm-1", "virt-launcher-vm-2"}
    for name in sorted(vms):
        cp.request("POST", f"/api/v1/namespaces/{ns}/pods", pod(ns, name, node, vm=True))
    time.sleep(1.1)  # PodLifeTime takes the oldest first: the VM pods
    cp.request("POST", f"/api/v1/namespaces/{ns}/pods", pod(ns, "web-1", node, vm=False))

    def phase(name: str) -> str | None:
        status, body = cp.raw_request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        if status == 404:
            return None
        obj = json.loads(body)
        return None if obj["metadata"].get("deletionTimestamp") else obj.get("status", {}).get("phase")

    wait_for(lambda: all(phase(n) == "Running" for n in [*vms, "web-1"]), "the pods running on kwok")
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "descheduler/v1alpha2",
                "kind": "DeschedulerPolicy",
                "maxNoOfPodsToEvictPerNamespace": 2,
                "profiles": [
                    {
                        "name": "lifetime",
                        "pluginConfig": [
                            {
                                "name": "PodLifeTime",
                                "args": {"maxPodLifeTimeSeconds": 1, "namespaces": {"include": [ns]}},
                            }
                        ],
                        "plugins": {"deschedule": {"enabled": ["PodLifeTime"]}},
                    }
                ],
            }
        )
    )
    with KubeVirtWebhook(cp, vms) as hook:
        hook.register(ns)
        d = DeschedProcess(
            cp.kubeconfig,
            tmp_path,
            policy,
            "--descheduling-interval",
            "1s",
            "--feature-gates=EvictionsInBackground=true",
        )
        try:

            def waiting(check: Any, what: str, timeout: float = 30) -> None:
                try:
                    wait_for(check, what, timeout=timeout)
                except AssertionError as e:
                    raise AssertionError(
                        f"{e}; webhook asked {hook.asked}\ndesched said:\n{d.text()[-6000:]}"
                    ) from None

            def count(result: str) -> float:
                labels = (
                    f'{{namespace="{ns}",node="{node}",profile="lifetime",result="{result}",'
                    'strategy="PodLifeTime"}'
                )
                return d.sample("descheduler_pods_evicted_total", labels) or 0.0

            waiting(lambda: sorted(hook.asked) == sorted(vms), "both VM pods asked once", timeout=60)
            d.wait_cycles(3)
            # asked once each, migrating, still there; counted as "background"
            assert sorted(hook.asked) == sorted(vms), hook.asked
            assert count("background") == 2.0, d.metrics()
            assert all(phase(n) == "Running" for n in vms)
            # the two evictions in progress fill the namespace's limit of 2: the plain pod waits
            assert phase("web-1") == "Running", d.text()
            assert count("maximum number of evicted pods per namespace reached") >= 1, d.metrics()

            # vm-1's migration is done: its pod leaves; web-1 is evicted in a next cycle
            cp.request(
                "DELETE",
                f"/api/v1/namespaces/{ns}/pods/virt-launcher-vm-1",
                {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0},
            )
            waiting(lambda: phase("web-1") is None, "web-1 evicted once vm-1 has left")
            assert count("success") == 1.0
            assert hook.asked.count("virt-launcher-vm-2") == 1

            # vm-2's migration is cancelled (virt-controller removes the annotation): asked again
            cp.request(
                "PATCH",
                f"/api/v1/namespaces/{ns}/pods/virt-launcher-vm-2",
                {"metadata": {"annotations": {IN_PROGRESS: None}}},
                content_type="application/merge-patch+json",
            )
            waiting(lambda: hook.asked.count("virt-launcher-vm-2") == 2, "vm-2 asked again")
            assert "eviction goes on in background" in d.text()
        finally:
            d.stop()
            cp.request(
                "DELETE",
                f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/kubevirt-eviction-{ns}",
            )
