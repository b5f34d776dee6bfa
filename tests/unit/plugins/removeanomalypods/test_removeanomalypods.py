"""RemoveAnomalyPods: detection sources, the consecutive-count and timeout rules, exclusions,
node downgrades through the node-action seam, args validation, and ``desched simulate``."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests import builders
from tests.unit.plugins import harness
from tests.unit.plugins.harness import REGISTRY, load, policy_doc

from desched.api.policy import load_policy
from desched.backends.simulated_nodeactions import SimulatedNodeActions
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.findings import Finding, Verdict
from desched.framework.framework import CycleResult, Framework
from desched.framework.nodeactions import (
    DOWNGRADE_ANNOTATION,
    ActionResult,
    DowngradeEntry,
    DowngradeRequest,
    NodeState,
    apply_patch,
    encode_entries,
    plan_downgrade,
    plan_restore,
    read_entries,
)
from desched.framework.pluginmetrics import MetricsRegistry
from desched.k8s.objects import Event, Node, PersistentVolumeClaim, Pod
from desched.plugins.removeanomalypods.args import DEFAULT_EVENT_REASONS, RemoveAnomalyPodsArgs
from desched.plugins.removeanomalypods.plugin import RemoveAnomalyPods
from desched.plugins.removeanomalypods.report import AnomalyReport

ROOT = Path(__file__).resolve().parents[4]
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
NAME = "RemoveAnomalyPods"


def ts(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


# ----------------------------------------------------------------------------- objects


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    ready: bool = True,
) -> Node:
    return builders.bare_node(
        name, labels=labels or {}, annotations=annotations or {}, taints=taints or [], ready=ready
    )


def pod(
    name: str,
    node_name: str = "n1",
    *,
    ns: str = "default",
    age: float = 3600,
    phase: str = "Pending",
    ready: bool = False,
    owner: str | None = "ReplicaSet",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    reason: str = "",
    waiting: str = "",
    terminated: str = "",
    init_waiting: str = "",
    pvc: str = "",
    terminating: bool = False,
    uid: str | None = None,
    scheduled: datetime | None = None,
) -> Pod:
    status: dict[str, Any] = {"reason": reason}
    if scheduled is not None:
        status["conditions"] = [
            {"type": "Ready", "status": str(ready)},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(scheduled)},
        ]
    state: dict[str, Any] = {}
    if waiting:
        state["waiting"] = {"reason": waiting}
    if terminated:
        state["terminated"] = {"reason": terminated, "exitCode": 1}
    status["containerStatuses"] = [{"name": "c", "state": state or {"running": {}}}]
    if init_waiting:
        status["initContainerStatuses"] = [{"name": "init", "state": {"waiting": {"reason": init_waiting}}}]
    spec: dict[str, Any] = {}
    if pvc:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}]
    return builders.pod(
        name,
        namespace=ns,
        node=node_name,
        uid=uid or f"uid-{name}",
        created=ts(NOW - timedelta(seconds=age)),
        deleted=ts(NOW) if terminating else None,
        labels=labels or {},
        annotations=annotations or {},
        owner=(owner, f"{name}-owner") if owner else None,
        phase=phase,
        ready=ready,
        spec=spec,
        status=status,
    )


def event(
    about: str,
    reason: str = "FailedCreatePodSandBox",
    *,
    count: int = 1,
    last: datetime = NOW,
    type_: str = "Warning",
    message: str = "",
    kind: str = "Pod",
    ns: str = "default",
    uid: str | None = None,
    name: str | None = None,
    series: int | None = None,
) -> Event:
    doc = builders.event_doc(
        name or f"{about}.{reason}",
        namespace=ns,
        kind=kind,
        object_name=about,
        reason=reason,
        message=message,
        type_=type_,
        count=count,
        last_timestamp=ts(last),
    )
    doc["metadata"]["uid"] = f"ev-{name or about}-{reason}"
    if kind == "Pod":
        doc["involvedObject"]["uid"] = uid or f"uid-{about}"
    if series is not None:
        doc["series"] = {"count": series, "lastObservedTime": ts(last)}
    return msgspec.convert(doc, Event, strict=False)


# ----------------------------------------------------------------------------- harness


class Harness:
    """One framework (the plugin's state lives across cycles), a clock that moves, and cycles of the
    shared plugin harness."""

    def __init__(
        self, args: dict[str, Any], metrics_registry: MetricsRegistry | None = None, **kw: Any
    ) -> None:
        self.now = NOW
        self.framework = Framework(
            load(NAME, args, **kw), REGISTRY, clock=lambda: self.now, metrics_registry=metrics_registry
        )
        self.nodes = [node("n1"), node("n2")]

    @property
    def plugin(self) -> RemoveAnomalyPods:
        inst = self.framework.profiles[0].instances[NAME]
        assert isinstance(inst, RemoveAnomalyPods)
        return inst

    def cycle(
        self,
        pods: list[Pod],
        events: Sequence[Event] = (),
        *,
        at: datetime | None = None,
        nodes: list[Node] | None = None,
        pvcs: Sequence[PersistentVolumeClaim] = (),
    ) -> tuple[list[str], CycleResult]:
        if at is not None:
            self.now = at
        snapshot = ClusterSnapshot(nodes=nodes or self.nodes, pods=pods, events=events, pvcs=pvcs)
        actions = SimulatedNodeActions(lambda: self.now)
        result = harness.cycle(self.framework, snapshot=snapshot, node_actions=actions)
        return harness.evicted(result), result

    def evicted(self, pods: list[Pod], events: Sequence[Event] = (), **kw: Any) -> list[str]:
        return self.cycle(pods, events, **kw)[0]


FAST = {"minPodStartupSeconds": 60, "anomalyCondition": {"consecutiveAbnormalities": 3}}


# ----------------------------------------------------------------------------- args


def test_defaults_follow_the_proposal() -> None:
    args = load(NAME, None).profiles[0].args[NAME]
    assert isinstance(args, RemoveAnomalyPodsArgs)
    assert args.min_pod_startup_seconds == 300
    assert tuple(args.event_reasons) == DEFAULT_EVENT_REASONS
    assert args.anomaly_condition.timeout_duration == timedelta(minutes=1)
    assert args.anomaly_condition.consecutive_abnormalities == 5
    assert args.anomaly_condition.consecutive_normalities == 1
    assert args.node_downgrade_policy is None  # downgrading needs nodes patch: opt in
    full = load(NAME, {"nodeDowngradePolicy": {}}).profiles[0].args[NAME]
    assert isinstance(full, RemoveAnomalyPodsArgs) and full.node_downgrade_policy is not None
    assert full.node_downgrade_policy.method == "label"
    assert full.node_downgrade_policy.ttl_duration == timedelta(minutes=5)


@pytest.mark.parametrize(
    ("args", "path", "reason"),
    [
        ({"anomalyCondition": {"timeout": "soon"}}, "args.anomalyCondition.timeout", "invalid duration"),
        ({"anomalyCondition": {"timeout": "0s"}}, "args.anomalyCondition.timeout", "positive duration"),
        (
            {"anomalyCondition": {"consecutiveAbnormalities": 0}},
            "args.anomalyCondition.consecutiveAbnormalities",
            "greater than or equal to 1",
        ),
        (
            {"nodeDowngradePolicy": {"method": "cordon"}},
            "args.nodeDowngradePolicy.method",
            "must be 'label' or 'taint', got 'cordon'",
        ),
        ({"nodeDowngradePolicy": {"ttl": "-5m"}}, "args.nodeDowngradePolicy.ttl", "positive duration"),
        (
            {"nodeDowngradePolicy": {"key": "bad key"}},
            "args.nodeDowngradePolicy.key",
            "valid label/taint key",
        ),
        (
            {"nodeDowngradePolicy": {"effect": "NoExecute"}},
            "args.nodeDowngradePolicy.effect",
            "NoSchedule, PreferNoSchedule",
        ),
        ({"reasons": ["/(unclosed/"]}, "args.reasons[0]", "not a valid regular expression"),
        (
            {"annotationHints": ["no spaces please"]},
            "args.annotationHints[0]",
            "must be a valid annotation key",
        ),
        ({"minPodStartupSeconds": -1}, "args.minPodStartupSeconds", "greater than or equal to 0"),
        ({"consecutiveAbnormalities": 3}, "args.consecutiveAbnormalities", "unknown field"),
    ],
)
def test_invalid_args_name_the_field(args: dict[str, Any], path: str, reason: str) -> None:
    with pytest.raises(PolicyError) as e:
        load(NAME, args)
    assert e.value.path == f"profiles[0].pluginConfig[0].{path}"
    assert reason in e.value.reason


# ----------------------------------------------------------------------------- detection sources


def test_event_reason_counts_occurrences_and_needs_n_of_them() -> None:
    h = Harness(FAST)
    p = pod("a")
    assert h.evicted([p], [event("a", count=2)]) == []
    assert h.plugin.anomaly_stats.suspected == 1 and h.plugin.anomaly_stats.suspected_pods == {"default/a": 2}
    # the Event's count went 2 -> 3: one new occurrence, three in a row
    assert h.evicted([p], [event("a", count=3)], at=NOW + timedelta(seconds=10)) == ["a"]
    stats = h.plugin.anomaly_stats
    assert stats.anomalous == 1 and stats.anomalous_pods == ["default/a"]
    assert stats.judged_by_reason == {"FailedCreatePodSandBox": 1}


def test_a_single_snapshot_judges_an_event_with_count_at_least_n() -> None:
    assert Harness(FAST).evicted([pod("a")], [event("a", count=3)]) == ["a"]
    assert Harness(FAST).evicted([pod("a")], [event("a", count=2)]) == []
    # events.k8s.io-style series count counts too
    assert Harness(FAST).evicted([pod("a")], [event("a", count=0, series=4)]) == ["a"]


def test_event_reasons_match_without_regard_to_case_and_skip_normal_events() -> None:
    assert Harness(FAST).evicted([pod("a")], [event("a", "failedcreatepodsandbox", count=3)]) == ["a"]
    assert Harness(FAST).evicted([pod("a")], [event("a", count=5, type_="Normal")]) == []
    assert Harness(FAST).evicted([pod("a")], [event("a", "BackOff", count=9)]) == []


def test_several_events_add_up() -> None:
    events = [event("a", "FailedMount", count=2), event("a", "FailedAttachVolume", count=1)]
    evicted, result = Harness(FAST).cycle([pod("a")], events)
    assert evicted == ["a"]
    assert "FailedMount x2, FailedAttachVolume x1" in result.evictions[0].reason


def test_event_message_matches_reasons_patterns() -> None:
    args = {**FAST, "eventReasons": [], "reasons": ["ErrImagePull", "/OutOf(cpu|memory)/"]}
    assert Harness(args).evicted(
        [pod("a")], [event("a", "Failed", count=3, message="Error: ErrImagePull")]
    ) == ["a"]
    assert Harness(args).evicted(
        [pod("a")], [event("a", "Failed", count=3, message="Node: OutOfmemory")]
    ) == ["a"]
    assert (
        Harness(args).evicted([pod("a")], [event("a", "Failed", count=3, message="Error: CrashLoop")]) == []
    )
    # eventReasons: [] switches the default reasons off
    assert Harness(args).evicted([pod("a")], [event("a", count=3)]) == []


def test_events_about_an_earlier_pod_of_the_same_name_do_not_count() -> None:
    assert Harness(FAST).evicted([pod("a")], [event("a", count=5, uid="uid-of-an-older-a")]) == []


def test_pvc_events_count_for_the_pods_using_the_claim() -> None:
    ev = event("data-a", "FailedMount", count=3, kind="PersistentVolumeClaim")
    assert Harness(FAST).evicted([pod("a", pvc="data-a"), pod("b")], [ev]) == ["a"]


def claim(name: str, volume: str = "", ns: str = "default") -> PersistentVolumeClaim:
    doc = {"metadata": {"name": name, "namespace": ns}, "spec": {"volumeName": volume}}
    return msgspec.convert(doc, PersistentVolumeClaim, strict=False)


def test_pv_events_count_for_the_pods_whose_claim_is_bound_to_the_volume() -> None:
    # PersistentVolumes are cluster-scoped: their Events' involvedObject has no namespace
    ev = event("pv-1", "FailedAttachVolume", count=3, kind="PersistentVolume", ns="")
    other = event("pv-9", "FailedAttachVolume", count=3, kind="PersistentVolume", ns="")
    pods = [pod("a", pvc="data-a"), pod("b", pvc="data-b"), pod("c")]
    pvcs = [claim("data-a", "pv-1"), claim("data-b")]  # data-b is not bound to a volume yet
    assert Harness(FAST).evicted(pods, [ev, other], pvcs=pvcs) == ["a"]
    # a volume of the same name in a Normal Event, or a claim bound elsewhere: nothing
    normal = event("pv-1", "FailedAttachVolume", type_="Normal", count=3, kind="PersistentVolume", ns="")
    assert Harness(FAST).evicted(pods, [normal], pvcs=pvcs) == []
    assert Harness(FAST).evicted(pods, [ev], pvcs=[claim("data-a", "pv-2")]) == []


def test_pv_events_reach_the_pod_in_simulate(tmp_path: Path) -> None:
    """Through the CLI: a snapshot with the pod, its claim, and an Event about the claim's volume."""
    ready = {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "4", "pods": "110"}}
    started = ts(NOW - timedelta(seconds=600))
    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}, "status": ready} for n in ("n1", "n2")
    ]
    items += [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "db-0",
                "namespace": "default",
                "uid": "uid-db-0",
                "creationTimestamp": started,
                "ownerReferences": [{"kind": "StatefulSet", "name": "db", "controller": True, "uid": "s"}],
            },
            "spec": {
                "nodeName": "n1",
                "containers": [{"name": "c"}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}],
            },
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
                    {"type": "Ready", "status": "False"},
                ],
                "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}}],
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data-db-0", "namespace": "default", "uid": "pvc-uid"},
            "spec": {"volumeName": "pv-db-0"},
        },
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "pv-db-0.attach", "namespace": "default", "uid": "ev-pv"},
            "involvedObject": {"kind": "PersistentVolume", "name": "pv-db-0"},
            "reason": "FailedAttachVolume",
            "type": "Warning",
            "count": 5,
            "lastTimestamp": ts(NOW - timedelta(seconds=10)),
        },
    ]
    (tmp_path / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    (tmp_path / "policy.json").write_text(json.dumps(policy_doc(NAME, FAST, evictor=True)))

    def simulate(snapshot: Path) -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "desched.cli", "simulate", str(snapshot), "--policy",
             str(tmp_path / "policy.json"), "--now", ts(NOW), "-o", "json"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return [e["name"] for e in json.loads(proc.stdout)["evictions"]]

    assert simulate(tmp_path / "cluster.json") == ["db-0"]
    # without the claim in the snapshot the volume is unknown: its Event says nothing about the pod
    items = [i for i in items if i["kind"] != "PersistentVolumeClaim"]
    (tmp_path / "no-claim.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert simulate(tmp_path / "no-claim.json") == []


@pytest.mark.parametrize(
    ("kw", "init"),
    [
        ({"reason": "OutOfcpu", "phase": "Failed"}, False),
        ({"waiting": "ImagePullBackOff"}, False),
        ({"terminated": "ContainerCannotRun"}, False),
        ({"init_waiting": "ErrImagePull"}, True),
    ],
)
def test_status_sources_count_one_observation_per_cycle(kw: dict[str, Any], init: bool) -> None:
    args = {
        **FAST,
        "reasons": ["OutOfcpu", "ImagePullBackOff", "ErrImagePull", "ContainerCannotRun"],
        "includingInitContainers": init,
    }
    h = Harness(args)
    p = pod("a", **kw)
    assert h.evicted([p]) == []
    assert h.evicted([p], at=NOW + timedelta(seconds=10)) == []
    assert h.evicted([p], at=NOW + timedelta(seconds=20)) == ["a"]


def test_init_containers_only_with_including_init_containers() -> None:
    h = Harness({**FAST, "reasons": ["ErrImagePull"]})
    p = pod("a", init_waiting="ErrImagePull")
    for i in range(4):
        assert h.evicted([p], at=NOW + timedelta(seconds=10 * i)) == []


def test_annotation_hints() -> None:
    hinted = pod("a", annotations={"example.com/startup-error": "CNI timeout"})
    h = Harness({**FAST, "annotationHints": ["example.com/startup-error"]})
    assert [h.evicted([hinted], at=NOW + timedelta(seconds=10 * i)) for i in range(3)] == [[], [], ["a"]]
    # with reasons configured, the hint's value must match one
    h = Harness({**FAST, "annotationHints": ["example.com/startup-error"], "reasons": ["disk"]})
    assert [h.evicted([hinted], at=NOW + timedelta(seconds=10 * i)) for i in range(3)] == [[], [], []]
    h = Harness({**FAST, "annotationHints": ["example.com/startup-error"], "reasons": ["CNI"]})
    assert [h.evicted([hinted], at=NOW + timedelta(seconds=10 * i)) for i in range(3)] == [[], [], ["a"]]
    empty = pod("a", annotations={"example.com/startup-error": ""})
    h = Harness({**FAST, "annotationHints": ["example.com/startup-error"]})
    assert [h.evicted([empty], at=NOW + timedelta(seconds=10 * i)) for i in range(3)] == [[], [], []]


# ----------------------------------------------------------------------------- consecutive counts, timeout


def test_no_new_occurrence_is_neutral_and_does_not_count() -> None:
    h = Harness(FAST)
    p = pod("a")
    for i in range(5):
        assert h.evicted([p], [event("a", count=2)], at=NOW + timedelta(seconds=i)) == []
    assert h.plugin.anomaly_stats.suspected_pods == {"default/a": 2}


def test_a_gap_longer_than_timeout_expires_the_state() -> None:
    args = {**FAST, "anomalyCondition": {"consecutiveAbnormalities": 3, "timeout": "30s"}}
    h = Harness(args)
    p = pod("a")
    assert h.evicted([p], [event("a", count=2)]) == []
    # the next occurrence comes 40s after the last: the first two expired
    later = NOW + timedelta(seconds=40)
    assert h.evicted([p], [event("a", count=3, last=later)], at=later) == []
    assert h.plugin.anomaly_stats.suspected_pods == {"default/a": 1}
    assert h.evicted(
        [p], [event("a", count=5, last=later + timedelta(seconds=5))], at=later + timedelta(seconds=5)
    ) == ["a"]


def test_stale_occurrences_do_not_count() -> None:
    args = {**FAST, "anomalyCondition": {"consecutiveAbnormalities": 3, "timeout": "1m"}}
    h = Harness(args)
    p = pod("a")
    old = event("a", count=10, last=NOW - timedelta(minutes=5))
    assert h.evicted([p], [old]) == []
    assert h.plugin.anomaly_stats.suspected == 0
    # ...and are remembered: when the Event happens again only the new occurrences count
    assert h.evicted([p], [event("a", count=11)], at=NOW + timedelta(seconds=1)) == []
    assert h.plugin.anomaly_stats.suspected_pods == {"default/a": 1}


def test_status_matches_need_cycles_closer_than_timeout() -> None:
    h = Harness(
        {
            **FAST,
            "reasons": ["ImagePullBackOff"],
            "anomalyCondition": {"consecutiveAbnormalities": 3, "timeout": "30s"},
        }
    )
    p = pod("a", waiting="ImagePullBackOff")
    for i in range(5):  # one cycle a minute: each observation finds the previous one expired
        assert h.evicted([p], at=NOW + timedelta(minutes=i)) == []
    assert h.plugin.anomaly_stats.suspected_pods == {"default/a": 1}


def test_a_pod_that_recovers_is_not_evicted_and_leftover_events_do_not_count() -> None:
    h = Harness(FAST)
    stuck, running = pod("a"), pod("a", phase="Running", ready=True)
    assert h.evicted([stuck], [event("a", count=2)]) == []
    assert h.evicted([running], [event("a", count=2)], at=NOW + timedelta(seconds=1)) == []
    assert h.plugin.anomaly_stats.suspected == 0
    # it breaks later: the old occurrences are not counted again
    assert h.evicted([stuck], [event("a", count=3)], at=NOW + timedelta(seconds=2)) == []
    assert h.plugin.anomaly_stats.suspected_pods == {"default/a": 1}


def test_consecutive_normalities_reset_only_after_m_normal_observations() -> None:
    args = {**FAST, "anomalyCondition": {"consecutiveAbnormalities": 4, "consecutiveNormalities": 2}}
    h = Harness(args)
    stuck, running = pod("a"), pod("a", phase="Running", ready=True)
    t = NOW
    assert h.evicted([stuck], [event("a", count=2)], at=t) == []
    # one normal observation, then a neutral one: not reset
    assert h.evicted([running], [event("a", count=2)], at=t + timedelta(seconds=1)) == []
    assert h.evicted([stuck], [event("a", count=2)], at=t + timedelta(seconds=2)) == []
    assert h.plugin.anomaly_stats.suspected_pods == {"default/a": 2}
    # an abnormal one zeroes the normal streak; two normal in a row reset
    assert h.evicted([stuck], [event("a", count=3)], at=t + timedelta(seconds=3)) == []
    assert h.evicted([running], [event("a", count=3)], at=t + timedelta(seconds=4)) == []
    assert h.evicted([running], [event("a", count=3)], at=t + timedelta(seconds=5)) == []
    assert h.plugin.anomaly_stats.suspected == 0
    assert h.evicted([stuck], [event("a", count=4)], at=t + timedelta(seconds=6)) == []
    assert h.plugin.anomaly_stats.suspected_pods == {"default/a": 1}


def test_an_anomalous_pod_stays_judged_until_reset_and_is_counted_once() -> None:
    h = Harness(FAST, evictor=True)
    p = pod("a", owner=None)  # a bare pod: DefaultEvictor refuses to evict it
    h.evicted([p], [event("a", count=3)])
    assert h.plugin.anomaly_stats.judged_by_reason == {"FailedCreatePodSandBox": 1}
    h.evicted([p], [event("a", count=4)], at=NOW + timedelta(seconds=5))
    stats = h.plugin.anomaly_stats
    assert stats.anomalous == 1 and stats.judged_by_reason == {}
    assert stats.total_by_reason == {"FailedCreatePodSandBox": 1}


# ----------------------------------------------------------------------------- exclusions


def test_exclusions() -> None:
    events = [
        event(n, count=5, ns=ns)
        for n, ns in (
            ("young", "default"),
            ("sts", "default"),
            ("other-ns", "kube-system"),
            ("unlabelled", "default"),
            ("done", "default"),
            ("leaving", "default"),
            ("on-not-ready", "default"),
            ("unbound", "default"),
            ("ok", "default"),
        )
    ]
    pods = [
        pod("young", age=30, labels={"app": "x"}),
        pod("sts", owner="StatefulSet", labels={"app": "x"}),
        pod("other-ns", ns="kube-system", labels={"app": "x"}),
        pod("unlabelled"),
        pod("done", phase="Succeeded", labels={"app": "x"}),
        pod("leaving", terminating=True, labels={"app": "x"}),
        pod("on-not-ready", "n3", labels={"app": "x"}),
        pod("unbound", "", labels={"app": "x"}),
        pod("ok", labels={"app": "x"}),
    ]
    args = {
        **FAST,
        "excludeOwnerKinds": ["StatefulSet"],
        "namespaces": {"exclude": ["kube-system"]},
        "labelSelector": {"matchLabels": {"app": "x"}},
    }
    h = Harness(args)
    nodes = [node("n1"), node("n2"), node("n3", ready=False)]
    assert h.evicted(pods, events, nodes=nodes) == ["ok"]


def test_min_pod_startup_seconds_counts_from_scheduling() -> None:
    h = Harness({**FAST, "minPodStartupSeconds": 300})
    p = pod("a", age=3600, scheduled=NOW - timedelta(seconds=100))
    assert h.evicted([p], [event("a", count=5)]) == []
    assert h.plugin.anomaly_stats.suspected == 0  # not observed at all yet
    # past the window, the occurrences still within the timeout count
    later = NOW + timedelta(seconds=201)
    assert h.evicted([p], [event("a", count=5, last=later)], at=later) == ["a"]


def test_evictions_go_through_the_profiles_filters_and_limits() -> None:
    bare = pod("bare", owner=None)
    events = [event(n, count=5) for n in ("bare", "a", "b", "c")]
    h = Harness(FAST, evictor=True)
    assert h.evicted([bare, pod("a")], events) == ["a"]  # DefaultEvictor protects bare pods
    h = Harness(FAST, maxNoOfPodsToEvictPerNode=1)
    assert h.evicted([pod("a"), pod("b"), pod("c", "n2")], events) == ["a", "c"]


# ----------------------------------------------------------------------------- node downgrade


def test_nodes_with_anomalous_pods_are_downgraded_before_evicting() -> None:
    h = Harness({**FAST, "nodeDowngradePolicy": {"method": "taint", "ttl": "10m"}})
    evicted, result = h.cycle([pod("a"), pod("b", "n2")], [event("a", count=3), event("b", count=1)])
    assert evicted == ["a"]
    [action] = result.node_actions
    assert (action.node, action.action, action.method, action.effect, action.result) == (
        "n1",
        "downgrade",
        "taint",
        "NoSchedule",
        ActionResult.DOWNGRADED,
    )
    assert action.expires_at == NOW + timedelta(minutes=10) and action.pods == ("default/a",)
    assert action.by == "p/RemoveAnomalyPods" and action.dry_run
    assert h.plugin.anomaly_stats.downgraded_nodes == ["n1"]


def test_no_downgrade_unless_configured() -> None:
    _, result = Harness(FAST).cycle([pod("a")], [event("a", count=3)])
    assert result.node_actions == []


def test_downgrade_respects_max_downgraded_nodes() -> None:
    mine = encode_entries(
        [DowngradeEntry("label", "desched.io/anomalous-node", "true", NOW + timedelta(minutes=1))]
    )
    assert mine is not None
    nodes = [
        node("n1", annotations={DOWNGRADE_ANNOTATION: mine}, labels={"desched.io/anomalous-node": "true"}),
        node("n2"),
        node("n3"),
    ]
    h = Harness({**FAST, "nodeDowngradePolicy": {"maxDowngradedNodes": 2}})
    pods = [pod(n, f"n{i + 1}") for i, n in enumerate(("a", "b", "c"))]
    _, result = h.cycle(pods, [event(n, count=3) for n in ("a", "b", "c")], nodes=nodes)
    assert [(a.node, a.result) for a in result.node_actions] == [
        ("n1", ActionResult.EXTENDED),
        ("n2", ActionResult.DOWNGRADED),
    ]


def test_a_soft_taint_does_not_count_against_max_downgraded_nodes() -> None:
    soft = encode_entries(
        [
            DowngradeEntry(
                "taint",
                "desched.io/overutilized",
                "",
                NOW + timedelta(hours=1),
                "PreferNoSchedule",
                "p/LowNodeUtilization",
            )
        ]
    )
    assert soft is not None
    taint = {"key": "desched.io/overutilized", "effect": "PreferNoSchedule"}
    nodes = [node("n1", annotations={DOWNGRADE_ANNOTATION: soft}, taints=[taint]), node("n2")]
    h = Harness({**FAST, "nodeDowngradePolicy": {"maxDowngradedNodes": 1}})
    _, result = h.cycle([pod("b", "n2")], [event("b", count=3)], nodes=nodes)
    assert [(a.node, a.result) for a in result.node_actions] == [("n2", ActionResult.DOWNGRADED)]


def test_capped_downgrades_are_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [node(f"n{i}") for i in range(1, 10)]
    h = Harness({**FAST, "nodeDowngradePolicy": {"maxDowngradedNodes": 1}})
    names = [f"p{i}" for i in range(1, 10)]
    pods = [pod(n, f"n{i + 1}") for i, n in enumerate(names)]
    with caplog.at_level(logging.WARNING, logger="desched.plugins.removeanomalypods"):
        _, result = h.cycle(pods, [event(n, count=3) for n in names], nodes=nodes)
    assert [a.node for a in result.node_actions] == ["n1"]
    capped = [r.getMessage() for r in caplog.records if "not downgrading" in r.getMessage()]
    assert capped == [
        "not downgrading 8 node(s) with anomalous pods (n2, n3, n4, n5, n6 and 3 more): "
        "1 node(s) already downgraded (maxDowngradedNodes 1)"
    ]


def predictive_cycle(pods: list[Pod], nodes: list[Node], events: Sequence[Event] = ()) -> Any:
    """One simulated cycle of RemoveAnomalyPods (taint downgrade) then PodLifeTime (1 day), with
    ``evictionPolicy.predictive``; simulate's own placement of the replacements after it."""
    from desched.app.simulate import simulate_cycles

    doc = policy_doc(
        NAME, {**FAST, "nodeDowngradePolicy": {"method": "taint"}}, evictionPolicy={"predictive": True}
    )
    profile = doc["profiles"][0]
    profile["plugins"]["deschedule"]["enabled"].append("PodLifeTime")
    profile["pluginConfig"].append({"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 86400}})
    snapshot = ClusterSnapshot(nodes=nodes, pods=pods, events=events)
    sim, _, _ = simulate_cycles(
        Framework(load_policy(doc, REGISTRY), REGISTRY, clock=lambda: NOW), snapshot, NOW
    )
    return sim.cycles[0]


def sized(name: str, node_name: str, cpu: str, *, age: float = 3600, ready: bool = True) -> Pod:
    return builders.pod(
        name,
        node=node_name,
        uid=f"uid-{name}",
        cpu=cpu,
        created=ts(NOW - timedelta(seconds=age)),
        owner=("ReplicaSet", name),
        phase="Running" if ready else "Pending",
        ready=ready,
    )


def test_predictive_sees_the_downgrade_made_earlier_in_the_cycle() -> None:
    """The placement model follows the node RemoveAnomalyPods taints in the same cycle: the
    anomalous pod's replacement goes elsewhere (so it is evicted), and no later replacement is
    predicted onto the tainted node (issue 24, d1-predictive-downgrade)."""
    nodes = [builders.node(f"n{i}", cpu="2") for i in (1, 2, 3)]
    pods = [
        sized("sandbox", "n2", "100m", ready=False),  # anomalous: the emptiest node, downgraded
        sized("fill", "n3", "1900m"),
        sized("old", "n1", "1", age=30 * 86400),  # PodLifeTime's: its replacement fits nowhere
    ]
    cycle = predictive_cycle(pods, nodes, [event("sandbox", count=5)])
    result = cycle.result
    assert [(a.node, a.result) for a in result.node_actions] == [("n2", ActionResult.DOWNGRADED)]
    assert [r.name for r in result.evictions] == ["sandbox"]
    # n1 holds old (terminating) and sandbox's replacement, n2 is tainted, n3 is full
    assert [(r.name, r.skip_reason) for r in result.skips] == [("old", "predicted_pending")]
    assert [(p.name, p.node, p.same_node) for p in cycle.placements] == [("sandbox", "n1", False)]


def test_predictive_sees_the_expired_downgrades_removed_before_the_cycle() -> None:
    """An expired downgrade is removed first (a restore record): the model sees the node free."""
    expired = encode_entries(
        [
            DowngradeEntry(
                "taint", "desched.io/anomalous-node", "true", NOW - timedelta(minutes=1), "NoSchedule"
            )
        ]
    )
    assert expired is not None
    tainted = builders.node(
        "n2",
        cpu="2",
        taints=[builders.taint("desched.io/anomalous-node", "true")],
        annotations={DOWNGRADE_ANNOTATION: expired},
    )
    pods = [sized("old", "n1", "1500m", age=30 * 86400)]
    cycle = predictive_cycle(pods, [builders.node("n1", cpu="2"), tainted])
    assert [(a.node, a.action, a.result) for a in cycle.result.node_actions] == [
        ("n2", "restore", ActionResult.RESTORED)
    ]
    assert [r.name for r in cycle.result.evictions] == ["old"]
    assert [(p.name, p.node) for p in cycle.placements] == [("old", "n2")]


# ----------------------------------------------------------------------------- planning (pure)


def req(method: str = "label", value: str = "true", ttl: float = 300) -> DowngradeRequest:
    return DowngradeRequest(
        method, "desched.io/anomalous-node", value, timedelta(seconds=ttl), "why", by="p/x"
    )


def test_plan_label_downgrade_and_restore_round_trip() -> None:
    state = NodeState(labels={"zone": "a"})
    plan = plan_downgrade(state, req(), NOW)
    assert plan.result is ActionResult.DOWNGRADED and plan.patch is not None
    assert plan.patch["metadata"]["labels"] == {"desched.io/anomalous-node": "true"}
    after = apply_patch(state, plan.patch)
    [entry], _ = read_entries(after.annotations)
    assert entry.expires_at == NOW + timedelta(minutes=5) and entry.by == "p/x"
    # not expired yet: nothing to restore
    assert plan_restore(after, NOW + timedelta(minutes=4)).patch is None
    restore = plan_restore(after, NOW + timedelta(minutes=5))
    assert restore.patch == {
        "metadata": {
            "annotations": {DOWNGRADE_ANNOTATION: None},
            "labels": {"desched.io/anomalous-node": None},
        }
    }
    assert apply_patch(after, restore.patch) == state


def test_plan_taint_keeps_other_taints_and_restores_only_its_own() -> None:
    other = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    state = NodeState(taints=[other])
    plan = plan_downgrade(state, req("taint"), NOW)
    assert plan.patch is not None
    after = apply_patch(state, plan.patch)
    assert after.taints == [
        other,
        {"key": "desched.io/anomalous-node", "value": "true", "effect": "NoSchedule"},
    ]
    restored = apply_patch(after, plan_restore(after, NOW + timedelta(hours=1)).patch or {})
    assert restored.taints == [other] and DOWNGRADE_ANNOTATION not in restored.annotations


def test_plan_never_claims_or_removes_what_desched_did_not_add() -> None:
    admin_label = NodeState(labels={"desched.io/anomalous-node": "true"})
    assert plan_downgrade(admin_label, req(), NOW).result is ActionResult.SKIPPED
    admin_taint = NodeState(
        taints=[{"key": "desched.io/anomalous-node", "value": "x", "effect": "NoSchedule"}]
    )
    assert plan_downgrade(admin_taint, req("taint"), NOW).result is ActionResult.SKIPPED
    # ours, but someone changed the label's value since: not extended, and at expiry left as is
    ours = apply_patch(NodeState(), plan_downgrade(NodeState(), req(), NOW).patch or {})
    changed = NodeState({"desched.io/anomalous-node": "manual"}, [], ours.annotations)
    assert plan_downgrade(changed, req(), NOW + timedelta(minutes=1)).result is ActionResult.SKIPPED
    restore = plan_restore(changed, NOW + timedelta(hours=1))
    assert restore.patch == {"metadata": {"annotations": {DOWNGRADE_ANNOTATION: None}}}
    # an annotation desched cannot read: hands off entirely
    garbled = NodeState(annotations={DOWNGRADE_ANNOTATION: "{not json"})
    assert plan_downgrade(garbled, req(), NOW).result is ActionResult.SKIPPED
    assert plan_restore(garbled, NOW + timedelta(days=1)).patch is None


def test_plan_extends_only_when_it_moves_expiry_enough() -> None:
    after = apply_patch(NodeState(), plan_downgrade(NodeState(), req(ttl=300), NOW).patch or {})
    assert plan_downgrade(after, req(ttl=300), NOW + timedelta(seconds=10)).result is ActionResult.UNCHANGED
    plan = plan_downgrade(after, req(ttl=300), NOW + timedelta(seconds=31))
    assert plan.result is ActionResult.EXTENDED and plan.expires_at == NOW + timedelta(seconds=331)


def test_entries_of_other_targets_and_unknown_elements_are_kept() -> None:
    foreign_elem = {"something": "else"}
    entry = DowngradeEntry("taint", "k", "v", NOW + timedelta(hours=1), effect="NoSchedule")
    annotations = {DOWNGRADE_ANNOTATION: json.dumps([entry.to_json(), foreign_elem])}
    state = NodeState(taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}], annotations=annotations)
    after = apply_patch(state, plan_downgrade(state, req(), NOW).patch or {})
    entries, unknown = read_entries(after.annotations)
    assert [(e.method, e.key) for e in entries] == [("taint", "k"), ("label", "desched.io/anomalous-node")]
    assert unknown == [foreign_elem]


def test_simulated_restore_of_expired_downgrades() -> None:
    entry = DowngradeEntry("label", "desched.io/anomalous-node", "true", NOW - timedelta(seconds=1), by="p/x")
    n = node(
        "n1",
        labels={"desched.io/anomalous-node": "true"},
        annotations={DOWNGRADE_ANNOTATION: encode_entries([entry]) or ""},
    )
    actions = SimulatedNodeActions(lambda: NOW)
    [record] = actions.restore_expired([n, node("n2")])
    assert (record.node, record.action, record.result, record.dry_run) == (
        "n1",
        "restore",
        ActionResult.RESTORED,
        True,
    )


# ----------------------------------------------------------------------------- metrics, simulate


def test_the_plugin_reports_to_the_cycle_result_and_its_own_metrics() -> None:
    from desched.runtime.metrics import Metrics

    metrics = Metrics()
    h = Harness(FAST, metrics_registry=metrics.plugins)
    _, result = h.cycle([pod("a"), pod("b")], [event("a", count=3), event("b", count=1)])
    [report] = result.reports
    assert (report.profile, report.plugin) == ("p", NAME)
    assert isinstance(report.report, AnomalyReport)
    assert list(report.report.anomalous_pods) == ["default/a"]
    assert dict(report.report.suspected_pods) == {"default/b": 1}
    assert report.report.to_json(lambda ns: ns == "default") == {
        "anomalous": ["default/a"],
        "suspected": {"default/b": 1},
    }
    assert report.report.to_json(lambda ns: False) == {"anomalous": [], "suspected": {}}
    metrics.observe_downgraded_nodes(2)
    value = metrics.registry.get_sample_value
    assert value("descheduler_anomaly_pods_anomalous", {"profile": "p"}) == 1
    assert value("descheduler_anomaly_pods_suspected", {"profile": "p"}) == 1
    assert value("descheduler_anomaly_total", {"profile": "p", "reason": "FailedCreatePodSandBox"}) == 1
    assert value("descheduler_anomaly_nodes_downgraded", None) == 2
    # the next cycle: a is still anomalous (not judged again: the counter stays), b is gone
    h.cycle([pod("a")], [event("a", count=3)])
    assert value("descheduler_anomaly_total", {"profile": "p", "reason": "FailedCreatePodSandBox"}) == 1
    assert value("descheduler_anomaly_pods_suspected", {"profile": "p"}) == 0
    # a reloaded policy's instance asks for the same metrics: it gets them, the series go on
    Harness(FAST, metrics_registry=metrics.plugins).cycle([pod("c")], [event("c", count=3)])
    assert value("descheduler_anomaly_total", {"profile": "p", "reason": "FailedCreatePodSandBox"}) == 2


def test_simulate_reports_anomalous_pods_and_node_downgrades() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "simulate",
            str(ROOT / "examples" / "cluster.yaml"),
            "--policy",
            str(ROOT / "examples" / "policy-anomaly.yaml"),
            "--now",
            "2026-11-21T12:00:00Z",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(e["namespace"], e["name"], e["plugin"]) for e in doc["evictions"]] == [
        ("shop", "checkout-5c7b9d8f6-0", "RemoveAnomalyPods")
    ]
    assert doc["anomalies"] == [
        {
            "profile": "anomaly",
            "plugin": "RemoveAnomalyPods",
            "anomalous": ["shop/checkout-5c7b9d8f6-0"],
            "suspected": {"shop/payments-6d8c4b7f9-0": 3},
        }
    ]
    [action] = doc["nodeActions"]
    assert action["node"] == "node-c1" and action["method"] == "taint" and action["result"] == "downgraded"
    assert action["expiresAt"] == "2026-11-21T12:10:00Z" and action["dryRun"] is True
    # the same snapshot an hour later: the Events are stale, nothing is judged
    late = subprocess.run(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "simulate",
            str(ROOT / "examples" / "cluster.yaml"),
            "--policy",
            str(ROOT / "examples" / "policy-anomaly.yaml"),
            "--now",
            "2026-11-21T13:00:00Z",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert json.loads(late.stdout)["nodeActions"] == []


def test_helm_gate_grants_what_the_kustomize_component_grants() -> None:
    import yaml

    template = (ROOT / "deploy" / "helm" / "desched" / "templates" / "rbac.yaml").read_text()
    start = template.index("{{- if .Values.anomalyPods.enabled }}")
    gated = template[start : template.index("{{- end }}", start)].split("\n", 1)[1]
    helm_rules = yaml.safe_load(gated)
    component = [
        d
        for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "anomaly" / "rbac.yaml").read_text())
        if d["kind"] == "ClusterRole"
    ]
    assert helm_rules == component[0]["rules"]
    values = yaml.safe_load((ROOT / "deploy" / "helm" / "desched" / "values.yaml").read_text())
    assert values["anomalyPods"] == {"enabled": False}


# ----------------------------------------------------------------------------- the live backend (fake API)


class FakeNodesApi:
    """Nodes with resourceVersions; merge patches guarded by resourceVersion, like the apiserver."""

    def __init__(self, *names: str) -> None:
        self.nodes: dict[str, dict[str, Any]] = {
            n: {"metadata": {"name": n, "resourceVersion": "1", "labels": {}}, "spec": {}} for n in names
        }
        self.patches = 0
        #: called before a PATCH is applied: a concurrent writer
        self.before_patch: Any = None

    async def request(self, api: Any, method: str, path: str, *, body: Any = None, **kw: Any) -> bytes:
        from desched.kube.client import ApiError

        node = self.nodes[path.rsplit("/", 1)[1]]
        if method == "GET":
            return json.dumps(node).encode()
        assert method == "PATCH" and kw.get("content_type") == "application/merge-patch+json"
        if self.before_patch is not None:
            hook, self.before_patch = self.before_patch, None
            hook(node)
            node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        if body["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"]:
            raise ApiError(409, "the object has been modified")
        self.patches += 1
        for field_ in ("labels", "annotations"):
            target = node["metadata"].setdefault(field_, {})
            for k, v in (body["metadata"].get(field_) or {}).items():
                if v is None:
                    target.pop(k, None)
                else:
                    target[k] = v
        if "taints" in (body.get("spec") or {}):
            node["spec"]["taints"] = body["spec"]["taints"]
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
        return json.dumps(node).encode()


LOOPS: list[Any] = []


@pytest.fixture(autouse=True)
def _close_loops() -> Any:
    yield
    while LOOPS:
        LOOPS.pop().close()


def live(monkeypatch: pytest.MonkeyPatch, fake: FakeNodesApi, clock: list[datetime], **kw: Any) -> Any:
    import asyncio

    from desched.backends import api_nodeactions as nodeactions

    monkeypatch.setattr(nodeactions, "request", fake.request)
    loop = asyncio.new_event_loop()
    LOOPS.append(loop)
    return loop, nodeactions.NodeDowngrades(None, loop, clock=lambda: clock[0], **kw)


def as_node(obj: dict[str, Any]) -> Node:
    return msgspec.convert(obj, Node, strict=False)


def test_live_downgrade_rereads_on_conflict_and_keeps_a_concurrent_taint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeNodesApi("n1")
    clock = [NOW]
    loop, downgrades = live(monkeypatch, fake, clock)
    other = {"key": "example.com/maintenance", "value": "", "effect": "NoSchedule"}
    fake.before_patch = lambda node: node["spec"].setdefault("taints", []).append(other)
    record = loop.run_until_complete(downgrades.downgrade(as_node(fake.nodes["n1"]), req("taint", ttl=60)))
    assert record.result is ActionResult.DOWNGRADED and not record.dry_run
    taints = fake.nodes["n1"]["spec"]["taints"]
    assert (
        other in taints
        and {"key": "desched.io/anomalous-node", "value": "true", "effect": "NoSchedule"} in taints
    )
    assert downgrades.downgraded_count() == 1
    # expiry comes from the node, in a fresh backend (a restarted desched)
    clock[0] = NOW + timedelta(seconds=61)
    loop2, restarted = live(monkeypatch, fake, clock)
    [restored] = loop2.run_until_complete(restarted.reconcile([as_node(fake.nodes["n1"])]))
    assert restored.action == "restore" and restored.result is ActionResult.RESTORED
    assert fake.nodes["n1"]["spec"]["taints"] == [other]
    assert DOWNGRADE_ANNOTATION not in fake.nodes["n1"]["metadata"]["annotations"]
    assert restarted.downgraded_count() == 0


def test_live_dry_run_and_non_leaders_write_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNodesApi("n1")
    clock = [NOW]
    loop, dry = live(monkeypatch, fake, clock, dry_run=True)
    record = loop.run_until_complete(dry.downgrade(as_node(fake.nodes["n1"]), req()))
    assert record.result is ActionResult.DOWNGRADED and record.dry_run
    loop, follower = live(monkeypatch, fake, clock, may_write=lambda: False)
    record = loop.run_until_complete(follower.downgrade(as_node(fake.nodes["n1"]), req()))
    assert record.result is ActionResult.FAILED and "not the leader" in record.detail
    assert fake.patches == 0 and fake.nodes["n1"]["metadata"]["labels"] == {}


# ----------------------------------------------------------------------------- findings


def test_findings_name_every_pod_observed_and_left() -> None:
    h = Harness({**FAST, "excludeOwnerKinds": ["Job"], "namespaces": {"exclude": ["skip"]}})
    found: list[Finding] = []
    h.framework.findings.attach(found.append)
    pods = [
        pod("young", age=30),
        pod("quiet"),
        pod("flaky"),
        pod("bad"),
        pod("batch", owner="Job"),
        pod("elsewhere", ns="skip"),
        pod("healthy", phase="Running", ready=True),
    ]
    events = [event("flaky", count=2), event("bad", count=3), event("young", count=9)]
    evicted, _ = h.cycle(pods, events)
    assert evicted == ["bad"]
    left = {f.name: f.reason for f in found if f.verdict is Verdict.LEFT}
    assert all(f.plugin == NAME for f in found)
    assert left == {
        "young": "started 30s ago, within minPodStartupSeconds 60",
        "quiet": "phase Pending and not ready, but no matching Event, status reason or annotation hint",
        "flaky": "2 abnormal observations below the anomaly threshold 3 (FailedCreatePodSandBox x2)",
        "batch": "owned by a Job, in excludeOwnerKinds",
        "elsewhere": "not selected by the plugin's namespaces/labelSelector",
    }  # a healthy pod never tracked is not a candidate: nothing reported, nothing computed
    # the next cycle: flaky recovered (running and ready), its count is reset
    found.clear()
    h.cycle(
        [pod("flaky", phase="Running", ready=True)], [event("flaky", count=2)], at=NOW + timedelta(seconds=10)
    )
    assert [(f.name, f.reason) for f in found] == [
        ("flaky", "running and ready; 0 abnormal observations below the anomaly threshold 3")
    ]
