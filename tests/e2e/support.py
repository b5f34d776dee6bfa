"""Helpers the e2e tests share: polling, free ports, server-side apply, desched as a subprocess."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import ControlPlane

_PLURALS = {
    "ClusterRole": "clusterroles",
    "ClusterRoleBinding": "clusterrolebindings",
    "ServiceAccount": "serviceaccounts",
    "ConfigMap": "configmaps",
    "Job": "jobs",
    "CronJob": "cronjobs",
    "Deployment": "deployments",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Service": "services",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "Pod": "pods",
}


def wait_for(check: Callable[[], Any], what: str, timeout: float = 60.0, interval: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def apply_manifest(cp: ControlPlane, doc: dict[str, Any], *, dry_run: bool = False) -> None:
    """Server-side apply, the way `kubectl apply --server-side` does it."""
    api, kind, meta = doc["apiVersion"], doc["kind"], doc["metadata"]
    base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    query = "fieldManager=e2e&force=true" + ("&dryRun=All" if dry_run else "")
    cp.request(
        "PATCH",
        f"{base}{ns}/{_PLURALS[kind]}/{meta['name']}?{query}",
        json.dumps(doc).encode(),
        content_type="application/apply-patch+yaml",
    )


def desched_env() -> dict[str, str]:
    """The test process's environment, minus a KUBECONFIG that could point desched elsewhere."""
    return {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}


def run_desched(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=desched_env(),
        check=False,
    )


class DeschedProcess:
    """``desched run`` in the background: its log in a file, its metrics over plain HTTP."""

    def __init__(self, kubeconfig: Path, tmp: Path, policy: Path, *extra: str, name: str = "desched") -> None:
        self.port = free_port()
        self.log = tmp / f"{name}-{uuid.uuid4().hex[:4]}.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "desched.cli",
                "--v=2",
                "run",
                "--policy-config-file",
                str(policy),
                "--kubeconfig",
                str(kubeconfig),
                "--http",
                "--bind-address",
                "127.0.0.1",
                "--secure-port",
                str(self.port),
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("w"),
            env=desched_env(),
        )

    def metrics(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as resp:
                return str(resp.read().decode())
        except OSError:
            return ""

    def sample(self, name: str, labels: str = "") -> float | None:
        m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", self.metrics(), re.M)
        return float(m.group(1)) if m else None

    def cycles(self) -> int:
        return int(self.sample("descheduler_loop_duration_seconds_count") or 0)

    def wait_cycles(self, n: int, timeout: float = 30) -> None:
        start = self.cycles()
        wait_for(lambda: self.cycles() >= start + n, f"{n} more cycles", timeout=timeout)

    def text(self) -> str:
        return self.log.read_text()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def lease_args(lease: str = "6s", renew: str = "4s", interval: str = "1s") -> tuple[str, ...]:
    """``desched run``'s flags for a short leader election (retry every second) and a cycle every
    ``interval``: what the leader-election tests give each replica, beside its own identity."""
    return (
        "--leader-elect",
        "--leader-elect-lease-duration",
        lease,
        "--leader-elect-renew-deadline",
        renew,
        "--leader-elect-retry-period",
        "1s",
        "--descheduling-interval",
        interval,
    )


def single_plugin_policy(path: Path, ns: str, plugin: str, args: dict[str, Any], **top: Any) -> Path:
    """Write a one-profile policy (``e2e``) acting on the ``e2e/live=true`` nodes with the Deschedule
    ``plugin`` alone, its ``args`` limited to namespace ``ns``; ``top`` adds top-level keys."""
    import yaml

    doc = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/live=true",
        **top,
        "profiles": [
            {
                "name": "e2e",
                "pluginConfig": [{"name": plugin, "args": {**args, "namespaces": {"include": [ns]}}}],
                "plugins": {"deschedule": {"enabled": [plugin]}},
            }
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return path
