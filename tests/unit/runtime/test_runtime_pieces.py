"""Runtime pieces that need no API server: watch decoding, change detection, metrics, health server."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from tests import builders

from desched.app.run import relevant_change
from desched.cluster.live_source import RESOURCES, GoneError, Informer
from desched.framework.evictor import EvictionRecord
from desched.framework.types import EvictResult
from desched.k8s.objects import Event, Node, Pod
from desched.runtime.metrics import Metrics
from desched.runtime.server import HealthServer


def line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


def test_watch_events_update_the_cache() -> None:
    changes: list[tuple[str, str]] = []
    inf = Informer(None, RESOURCES["Pod"], on_change=lambda k, t, o, n: changes.append((k, t)))  # type: ignore[arg-type]
    pod = {"kind": "Pod", "metadata": {"name": "a", "namespace": "d", "resourceVersion": "5"}}
    inf._apply(line("ADDED", pod))
    assert set(inf.objects) == {"d/a"} and inf.resource_version == "5"
    inf._apply(line("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "9"}}))
    assert inf.resource_version == "9" and set(inf.objects) == {"d/a"}
    pod["metadata"]["resourceVersion"] = "11"
    inf._apply(line("DELETED", pod))
    assert inf.objects == {} and inf.resource_version == "11"
    assert changes == [("Pod", "ADDED"), ("Pod", "DELETED")]


def test_watch_410_means_relist() -> None:
    inf = Informer(None, RESOURCES["Node"])  # type: ignore[arg-type]
    with pytest.raises(GoneError):
        inf._apply(line("ERROR", {"kind": "Status", "code": 410, "reason": "Expired"}))


def node(**spec: Any) -> Node:
    return builders.bare_node("n", labels=spec.pop("labels", {}), spec=spec)


def pod(phase: str = "Running", restarts: int = 0) -> Pod:
    return builders.bare_pod("p", containers=[], phase=phase, restarts=restarts)


def event(kind: str = "Pod", type_: str = "Warning", count: int = 1, series: int | None = None) -> Event:
    return builders.event(
        "e", namespace="d", kind=kind, object_name="p", type_=type_, count=count, series=series
    )


@pytest.mark.parametrize(
    ("kind", "event", "old", "new", "expected"),
    [
        ("Node", "ADDED", None, node(), True),
        ("Node", "MODIFIED", node(), node(taints=[{"key": "k", "effect": "NoSchedule"}]), True),
        ("Node", "MODIFIED", node(), node(labels={"a": "b"}), True),
        ("Node", "MODIFIED", node(), node(unschedulable=True), True),
        ("Node", "MODIFIED", node(), node(), False),
        ("Pod", "MODIFIED", pod(), pod("Failed"), True),
        ("Pod", "MODIFIED", pod(restarts=1), pod(restarts=2), True),
        ("Pod", "MODIFIED", pod(), pod(), False),
        ("Pod", "ADDED", None, pod(), False),
        ("Event", "ADDED", None, event(), True),
        ("Event", "ADDED", None, event("PersistentVolumeClaim"), True),
        ("Event", "ADDED", None, event("PersistentVolume"), True),
        ("Event", "ADDED", None, event(type_="Normal"), False),
        ("Event", "ADDED", None, event("Node"), False),
        ("Event", "MODIFIED", event(count=3), event(count=4), True),
        ("Event", "MODIFIED", event(series=2), event(series=5), True),
        ("Event", "MODIFIED", event(count=3), event(count=3), False),
        ("Event", "DELETED", event(), None, False),
    ],
)
def test_event_driven_triggers(kind: str, event: str, old: Any, new: Any, expected: bool) -> None:
    assert relevant_change(kind, event, old, new) is expected


def test_metrics_use_upstream_names_and_health_endpoints() -> None:
    metrics = Metrics()
    metrics.observe_eviction(
        EvictionRecord("ns", "p", "n1", "prof", "PodLifeTime", "old", EvictResult.EVICTED)
    )
    metrics.observe_eviction(
        EvictionRecord("ns", "q", "n1", "prof", "PodLifeTime", "old", EvictResult.NODE_LIMIT)
    )
    metrics.observe_eviction(
        EvictionRecord("ns", "r", "n1", "prof", "PodLifeTime", "old", EvictResult.FILTERED)
    )
    metrics.observe_cycle(0.2)
    ready = {"value": False}
    server = HealthServer("127.0.0.1", 0, registry=metrics.registry, ready=lambda: ready["value"])
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        body = urllib.request.urlopen(f"{base}/metrics").read().decode()
        assert (
            'descheduler_pods_evicted_total{namespace="ns",node="n1",profile="prof",result="success",'
            'strategy="PodLifeTime"} 1.0'
        ) in body
        assert 'result="maximum number of evicted pods per node reached"' in body
        assert "filtered" not in body
        assert "descheduler_loop_duration_seconds_count 1.0" in body
        assert "descheduler_build_info{" in body and "descheduler_strategy_duration_seconds" in body
        assert urllib.request.urlopen(f"{base}/healthz").status == 200
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base}/readyz")
        assert e.value.code == 503
        ready["value"] = True
        assert urllib.request.urlopen(f"{base}/readyz").status == 200
    finally:
        server.stop()


def test_https_with_a_self_signed_certificate(tmp_path: Any) -> None:
    import ssl

    from desched.runtime.tls import serving_certificate

    cert, key = serving_certificate("", "", str(tmp_path / "certs"))
    assert serving_certificate("", "", str(tmp_path / "certs")) == (cert, key)  # reused, not regenerated
    server = HealthServer("127.0.0.1", 0, registry=None, ready=lambda: True, tls=(cert, key))
    server.start()
    try:
        ctx = ssl.create_default_context(cafile=cert)
        ctx.check_hostname = False
        with urllib.request.urlopen(f"https://127.0.0.1:{server.port}/healthz", context=ctx) as resp:
            assert resp.status == 200
    finally:
        server.stop()


def _make_pair(cert_dir: str, start: Any, out: Any) -> None:
    from desched.runtime.tls import serving_certificate

    start.wait()  # every process at once: the race a shared --cert-dir has
    out.put(serving_certificate("", "", cert_dir))


def test_processes_sharing_a_cert_dir_all_get_one_matching_pair(tmp_path: Any) -> None:
    """Replicas started together on one --cert-dir: each gets the same pair, and its key matches its
    certificate (without the lock, two writers interleaved their key and certificate files)."""
    import multiprocessing
    import ssl

    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(6), ctx.Queue()
    cert_dir = str(tmp_path / "shared")
    procs = [ctx.Process(target=_make_pair, args=(cert_dir, start, out)) for _ in range(6)]
    for proc in procs:
        proc.start()
    pairs = [out.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(10)
    assert len(set(pairs)) == 1
    cert, key = pairs[0]
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)  # raises on a mismatch
    assert (tmp_path / "shared" / "desched.key").stat().st_mode & 0o777 == 0o600
    assert not list((tmp_path / "shared").glob(".*.tmp"))


def test_an_unwritable_cert_dir_is_one_line(tmp_path: Any) -> None:
    from desched.errors import UserError
    from desched.runtime.tls import serving_certificate

    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(UserError, match="--cert-dir"):
        serving_certificate("", "", str(blocked / "certs"))
