"""A surge (``evictionPolicy.surge``) counts as one eviction against every limit and rule: the
evictor hands the profile's surge settings to the backend, records ``method=surge``, and charges a
``Surged`` answer as it charges an eviction (per-cycle limits, maxEvictionsPerWorkload, rate
limits, cooldown); the metric and the log line carry it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client import generate_latest
from tests import builders

from desched.api.evictionpolicy import EvictionPolicy, Rate, RateScope, Surge
from desched.api.policy import EvictionLimits
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import EvictAnswer, EvictionRequest, PodEvictor, Surged
from desched.framework.safety import Safety
from desched.framework.types import EvictResult
from desched.k8s.objects import Pod
from desched.logs import cycle_fields, eviction_fields
from desched.runtime.metrics import Metrics

SURGE = Surge(1, timedelta(minutes=10))
NOW = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


class SurgingBackend:
    """Surges every pod of a ReplicaSet, evicts the others; remembers the requests."""

    def __init__(self) -> None:
        self.requests: list[EvictionRequest] = []

    def evict(self, pod: Pod, request: EvictionRequest) -> EvictAnswer:
        self.requests.append(request)
        if request.surge is not None and pod.metadata.name.startswith("web"):
            return Surged(f"Deployment {pod.metadata.namespace}/{pod.metadata.name}")
        return None


def pods(*names: str) -> list[Pod]:
    return [
        builders.pod(n, namespace="shop", node="n1", uid=f"u-{n}", owner=("ReplicaSet", n), ready=True)
        for n in names
    ]


def evictor(
    policy: EvictionPolicy, limits: EvictionLimits | None = None
) -> tuple[PodEvictor, SurgingBackend]:
    ps = pods("web-a", "web-b", "web-c")
    snap = ClusterSnapshot(nodes=[builders.node("n1")], pods=ps)
    safety = Safety({"p": policy})
    safety.begin_cycle(snap, NOW)
    backend = SurgingBackend()
    return PodEvictor(backend, limits, safety=safety), backend


def test_the_profiles_surge_reaches_the_backend_and_the_record_says_surge() -> None:
    ev, backend = evictor(EvictionPolicy(surge=SURGE))
    [p, *_] = pods("web-a")
    assert ev.evict(p, "p", "RemovePodsViolatingNodeTaints", "tainted") is EvictResult.EVICTED
    assert backend.requests[0].surge == SURGE
    [record] = ev.records
    assert (record.method, record.target) == ("surge", "Deployment shop/web-a")
    fields = eviction_fields(record)
    assert fields["method"] == "surge" and fields["target"] == "Deployment shop/web-a"
    # a profile without surge: the backend is not asked to surge, and the line has no method
    ev2, backend2 = evictor(EvictionPolicy(predictive=False, max_evictions_per_workload=5))
    ev2.evict(p, "p", "P", "r")
    assert backend2.requests[0].surge is None
    assert ev2.records[0].method == "evict" and "method" not in eviction_fields(ev2.records[0])


def test_a_surge_counts_against_the_per_cycle_limits() -> None:
    ev, backend = evictor(EvictionPolicy(surge=SURGE), EvictionLimits(total=2))
    results = [ev.evict(p, "p", "P", "r") for p in pods("web-a", "web-b", "web-c")]
    assert results == [EvictResult.EVICTED, EvictResult.EVICTED, EvictResult.TOTAL_LIMIT]
    assert len(backend.requests) == 2 and ev.total == 2
    assert [r.method for r in ev.records[:2]] == ["surge", "surge"]


def test_a_surge_counts_against_the_rate_limit_and_max_evictions_per_workload() -> None:
    rate = EvictionPolicy(surge=SURGE, rate_limits=((RateScope.CLUSTER, Rate(1.0, 1)),))
    ev, backend = evictor(rate)
    a, b = pods("web-a", "web-b")
    assert ev.evict(a, "p", "P", "r") is EvictResult.EVICTED
    assert ev.evict(b, "p", "P", "r") is EvictResult.SKIPPED
    assert ev.records[1].skip_reason == "rate_limit" and len(backend.requests) == 1
    per_workload = EvictionPolicy(surge=SURGE, max_evictions_per_workload=1)
    ev, backend = evictor(per_workload)
    twin = builders.pod("web-a2", namespace="shop", node="n1", uid="u2", owner=("ReplicaSet", "web-a"))
    assert ev.evict(a, "p", "P", "r") is EvictResult.EVICTED
    assert ev.evict(twin, "p", "P", "r") is EvictResult.SKIPPED


def test_a_surge_is_counted_in_pods_evicted_and_in_the_surges_metric() -> None:
    ev, _ = evictor(EvictionPolicy(surge=SURGE))
    metrics = Metrics(process=False)
    ev.observers.append(metrics.observe_eviction)
    [p] = pods("web-a")
    ev.evict(p, "p", "RemovePodsViolatingNodeTaints", "tainted")
    metrics.observe_surge(False, "RemovePodsViolatingNodeTaints", "p", "shop")
    text = generate_latest(metrics.registry).decode()
    assert 'descheduler_pods_evicted_total{namespace="shop",node="n1",profile="p",result="success"' in text
    started = 'descheduler_surges_total{namespace="shop",profile="p",result="started",strategy='
    assert started in text
    assert 'result="failed"' in text


def test_the_cycle_summary_counts_surges_among_the_evictions() -> None:
    class Result:
        nodes = 1
        evictions: list[object] = []
        failures: list[object] = []
        unknown: list[object] = []
        skips: list[object] = []
        seconds = 0.5

    ev, _ = evictor(EvictionPolicy(surge=SURGE))
    for p in pods("web-a", "other"):
        ev.evict(p, "p", "P", "r")
    Result.evictions = list(ev.records)
    fields = cycle_fields(1, 3, Result, dry_run=False)
    assert fields["evicted"] == 2 and fields["surged"] == 1
    plain, _ = evictor(EvictionPolicy(max_evictions_per_workload=3))
    plain.evict(pods("web-a")[0], "p", "P", "r")
    Result.evictions = list(plain.records)
    assert "surged" not in cycle_fields(1, 3, Result, dry_run=False)
