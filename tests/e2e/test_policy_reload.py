"""Live policy reload in ``desched run`` against a real kube-apiserver (issue 27 item 1).

The policy file is mounted as kubelet mounts a ConfigMap (``policy.yaml -> ..data/policy.yaml``)
and updated as kubelet updates it: an atomic rename of the ``..data`` symlink, the file's mtime
unchanged. The next cycle follows the new policy; a broken one leaves the running policy in place
(a Warning Event on desched's pod, ``desched_policy_reloads_total{result="error"}``, evictions go
on); SIGHUP reloads at once, without waiting for the interval.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.support import DeschedProcess, wait_for
from tests.e2e.test_live_run import NODES, Cluster, cluster, make_pod, new_namespace, wait_running
from tests.unit.app.test_policy_reload import ConfigMapVolume

__all__ = ["cluster"]  # (the module-scoped fixture, shared with test_live_run)

POD_NAME = "desched-7c9d-abcde"


def policy(ns: str, plugin: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "nodeSelector": "e2e/live=true",
        "profiles": [
            {
                "name": "e2e",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": {"evictLocalStoragePods": True}},
                    {"name": plugin, "args": {**args, "namespaces": {"include": [ns]}}},
                ],
                "plugins": {"deschedule": {"enabled": [plugin]}},
            }
        ],
    }


def quiet(ns: str) -> dict[str, Any]:
    """Evicts nothing here: no pod of ``ns`` fails."""
    return policy(ns, "RemoveFailedPods", {})


def lifetime(ns: str, seconds: Any = 1) -> dict[str, Any]:
    """Evicts every pod of ``ns`` older than ``seconds``."""
    return policy(ns, "PodLifeTime", {"maxPodLifeTimeSeconds": seconds})


def evicted(cluster: Cluster, ns: str, name: str) -> bool:
    status, data = cluster.cp.raw_request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    return status == 404 or bool(json.loads(data)["metadata"].get("deletionTimestamp"))


def reloads(d: DeschedProcess, result: str) -> float:
    return d.sample("desched_policy_reloads_total", f'{{result="{result}"}}') or 0.0


def test_a_swapped_policy_is_followed_and_a_broken_one_keeps_the_running_one(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "reload")
    make_pod(cp, ns, "a-0", NODES[0], owner="a")
    wait_running(cp, ns, 1)
    (tmp_path / "volume").mkdir()
    vol = ConfigMapVolume(tmp_path / "volume", quiet(ns))
    # the chart's downward API: desched's own pod, which the Warning Event is about
    monkeypatch.setenv("POD_NAME", POD_NAME)
    monkeypatch.setenv("POD_NAMESPACE", ns)
    d = DeschedProcess(cluster.kubeconfig, tmp_path, vol.path, "--descheduling-interval", "2s")
    try:
        d.wait_cycles(2, timeout=60)
        assert not evicted(cluster, ns, "a-0")  # the quiet policy evicts nothing
        first_hash = d.metrics().count('desched_policy_info{hash="')
        assert first_hash == 1

        vol.update(lifetime(ns))  # a plugin added (PodLifeTime for RemoveFailedPods)
        wait_for(lambda: evicted(cluster, ns, "a-0"), "the new policy's eviction", timeout=30)
        assert reloads(d, "success") == 1
        assert "plugin e2e/PodLifeTime added" in d.text()
        assert "plugin e2e/RemoveFailedPods removed" in d.text()

        vol.update(lifetime(ns, "soon"))  # does not load
        wait_for(lambda: reloads(d, "error") == 1, "the failed reload counted", timeout=30)

        def warning() -> list[dict[str, Any]]:
            items = cp.request("GET", f"/apis/events.k8s.io/v1/namespaces/{ns}/events")["items"]
            return [
                e
                for e in items
                if e["reason"] == "PolicyReloadFailed" and e["regarding"].get("name") == POD_NAME
            ]

        events = wait_for(warning, "the PolicyReloadFailed Event on desched's pod", timeout=30)
        assert events[0]["type"] == "Warning" and events[0]["regarding"]["kind"] == "Pod"
        assert "maxPodLifeTimeSeconds" in events[0]["note"]
        errors = [line for line in d.text().splitlines() if "policy reload failed" in line]
        assert len(errors) == 1 and "profiles[0].pluginConfig[1].args.maxPodLifeTimeSeconds" in errors[0]

        # the running policy goes on evicting
        make_pod(cp, ns, "b-0", NODES[1], owner="b")
        wait_for(lambda: evicted(cluster, ns, "b-0"), "an eviction by the running policy", timeout=30)
        d.wait_cycles(2, timeout=30)
        assert d.proc.poll() is None
        assert reloads(d, "error") == 1 and reloads(d, "success") == 1  # told once, not each cycle
        assert "Traceback" not in d.text()
    finally:
        assert d.stop() == 0, d.text()


def test_sighup_reloads_without_waiting_for_the_interval(cluster: Cluster, tmp_path: Path) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "reloadhup")
    make_pod(cp, ns, "a-0", NODES[0], owner="a")
    wait_running(cp, ns, 1)
    (tmp_path / "volume").mkdir()
    vol = ConfigMapVolume(tmp_path / "volume", quiet(ns))
    d = DeschedProcess(cluster.kubeconfig, tmp_path, vol.path, "--descheduling-interval", "10m")
    try:
        wait_for(lambda: d.cycles() >= 1, "the first cycle", timeout=60)
        vol.update(lifetime(ns))
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: reloads(d, "success") == 1, "the reload on SIGHUP", timeout=15)
        assert d.proc.poll() is None and d.cycles() == 1  # applied at the next cycle, an interval away
        assert not evicted(cluster, ns, "a-0")
        assert "plugin e2e/PodLifeTime added" in d.text()
    finally:
        assert d.stop() == 0, d.text()


SLOW_PLUGIN = """
import os
import time
from typing import ClassVar


class Slow:
    name: ClassVar[str] = "Slow"

    def __init__(self, args, handle):
        self.handle = handle

    def deschedule(self, nodes):
        with open(os.environ["SLOW_MARKS"], "a") as f:
            f.write("start\\n")
        time.sleep(6)
        with open(os.environ["SLOW_MARKS"], "a") as f:
            f.write("end\\n")
        return None
"""


def install_slow_plugin(tmp: Path) -> Path:
    """An out-of-tree plugin (a module and its entry point, as pip installs one) whose cycle takes
    6 s; it marks in a file when it starts and ends."""
    site = tmp / "site"
    site.mkdir()
    (site / "slow_plugin.py").write_text(SLOW_PLUGIN)
    info = site / "slow_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: slow-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[desched.plugins]\nSlow = slow_plugin:Slow\n")
    return site


def with_slow_profile(doc: dict[str, Any]) -> dict[str, Any]:
    doc["profiles"].insert(0, {"name": "slow", "plugins": {"deschedule": {"enabled": ["Slow"]}}})
    return doc


def test_a_reload_during_a_long_cycle_waits_for_its_end(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cp = cluster.cp
    ns = new_namespace(cp, "reloadlong")
    make_pod(cp, ns, "a-0", NODES[0], owner="a")
    wait_running(cp, ns, 1)
    marks = tmp_path / "marks"
    paths = [str(install_slow_plugin(tmp_path)), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.setenv("SLOW_MARKS", str(marks))
    (tmp_path / "volume").mkdir()
    vol = ConfigMapVolume(tmp_path / "volume", with_slow_profile(quiet(ns)))
    d = DeschedProcess(cluster.kubeconfig, tmp_path, vol.path, "--descheduling-interval", "1s")
    try:
        # the second cycle is running (started, not ended)
        wait_for(
            lambda: marks.exists() and marks.read_text().split() == ["start", "end", "start"], "a cycle", 90
        )
        done_before = d.text().count("cycle done")
        vol.update(with_slow_profile(lifetime(ns)))
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: reloads(d, "success") == 1, "the reload", timeout=30)
        log = d.text()
        # the reload came after the running cycle ended, not during it
        assert log.count("cycle done") == done_before + 1, log
        assert log.index("policy reloaded") > log.rindex("cycle done")
        assert marks.read_text().split()[:4] == ["start", "end", "start", "end"]
        assert not evicted(cluster, ns, "a-0")  # that cycle ran the old policy
        wait_for(lambda: evicted(cluster, ns, "a-0"), "the next cycle's eviction", timeout=30)
    finally:
        assert d.stop() == 0, d.text()
