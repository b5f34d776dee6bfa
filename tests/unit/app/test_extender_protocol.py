"""``desched extender``: the kube-scheduler extender protocol (k8s.io/kube-scheduler/extender/v1)
in its exact JSON shapes, the filter's checks, the cache, the time budget, and the HTTP server
(health, readiness, metrics, TLS, errors) and the command line."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tests import builders

from desched.app.extender import (
    Extender,
    ExtenderMetrics,
    ExtenderServer,
    NodeUsageIndex,
    Reply,
)
from desched.cli import main as cli_main
from desched.k8s.objects import Node, Pod
from desched.runtime.server import BackgroundServer
from desched.runtime.tls import server_context, serving_certificate
from desched.scheduling.scorer import GenericScorer, GenericScorerArgs, allocated_of, requesting_of

REPO = Path(__file__).resolve().parents[3]
SMALL_FIRST = {
    "allocatable": {"values": "AbsoluteValue", "prefer": "Least", "resources": {"cpu": 10**13, "memory": 10}},
    "left": {"values": "RatioToAllocatable", "prefer": "Least", "resources": {"cpu": 10**12, "memory": 1}},
}
SPREAD = {"left": {"values": "RatioToAllocatable", "prefer": "Most"}}


def node_doc(
    name: str,
    cpu: str = "4",
    memory: str = "16Gi",
    pods: str = "110",
    *,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    extra: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Node as kube-scheduler marshals it (with the noise a real one carries)."""
    return builders.node_doc(
        name,
        cpu=cpu,
        memory=memory,
        pods=pods,
        extra=extra,
        capacity=True,
        labels=labels,
        annotations={"node.alpha.kubernetes.io/ttl": "0"},
        taints=taints or None,
        unschedulable=True if unschedulable else None,
        conditions=[{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}],
        metadata={
            "uid": f"uid-{name}",
            "resourceVersion": "42",
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}],
        },
        spec={"podCIDR": "10.0.0.0/24"},
        status={
            "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320368}],
            "nodeInfo": {"kubeletVersion": "v1.36.3"},
        },
    )


def pod_doc(
    name: str,
    node: str = "",
    *,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    phase: str = "Pending",
    extra: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    return builders.pod_doc(
        name,
        node=node or None,
        uid=f"uid-{name}",
        containers=[{"name": "c", "image": "app", "resources": {"requests": requests}}],
        phase=phase,
        spec=spec,
    )


def as_node(doc: dict[str, Any]) -> Node:
    return msgspec.convert(doc, Node, strict=False)


def as_pod(doc: dict[str, Any]) -> Pod:
    return msgspec.convert(doc, Pod, strict=False)


def make_extender(
    scorer: dict[str, Any], nodes: list[dict[str, Any]], pods: Sequence[dict[str, Any]] = (), **kw: Any
) -> Extender:
    state = NodeUsageIndex.from_objects([as_node(n) for n in nodes], [as_pod(p) for p in pods])
    return Extender(GenericScorer(GenericScorerArgs.model_validate(scorer)), state, **kw)


def args_nodelist(pod: dict[str, Any], nodes: list[dict[str, Any]]) -> bytes:
    """ExtenderArgs of an extender with nodeCacheCapable: false."""
    nodelist = {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"}, "items": nodes}
    return json.dumps({"Pod": pod, "Nodes": nodelist, "NodeNames": None}).encode()


def args_names(pod: dict[str, Any], names: list[str]) -> bytes:
    """ExtenderArgs of an extender with nodeCacheCapable: true."""
    return json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()


NODES = [node_doc("small", "4", "16Gi"), node_doc("big", "16", "64Gi")]


# --------------------------------------------------------------------------- prioritize


def test_prioritize_answers_a_host_priority_list_in_request_order() -> None:
    ext = make_extender(SMALL_FIRST, NODES)
    for body in (args_nodelist(pod_doc("p"), NODES), args_names(pod_doc("p"), ["small", "big"])):
        reply = ext.prioritize(body)
        assert json.loads(reply.body) == [{"Host": "small", "Score": 10}, {"Host": "big", "Score": 0}]
        assert reply.nodes == 2 and not reply.over_budget
    flipped = make_extender(SPREAD, NODES)
    got = json.loads(flipped.prioritize(args_names(pod_doc("p"), ["small", "big"])).body)
    # left cpu 3/4 and memory 15/16 against 15/16 and 63/64: 84.4 and 96.9 of 100
    assert got == [{"Host": "small", "Score": 8}, {"Host": "big", "Score": 10}]


def test_prioritize_scores_are_the_scorers_extender_scores_with_the_cached_pods() -> None:
    nodes = [node_doc(f"n{i}", cpu=str(2 + i), memory=f"{4 + 2 * i}Gi") for i in range(6)]
    pods = [
        pod_doc(f"x{i}", f"n{i % 6}", cpu=f"{100 * i}m", memory=f"{i}00Mi", phase="Running")
        for i in range(15)
    ]
    pods += [pod_doc("bare", "n2", cpu=None, memory=None, phase="Running")]
    ext = make_extender(SPREAD, nodes, pods)
    incoming = pod_doc("p", cpu="500m", memory="1Gi")
    got = json.loads(ext.prioritize(args_nodelist(incoming, nodes)).body)
    scorer = GenericScorer(GenericScorerArgs.model_validate(SPREAD))
    on_node = [
        allocated_of([as_pod(p) for p in pods if p["spec"].get("nodeName") == n["metadata"]["name"]])
        for n in nodes
    ]
    expected = scorer.extender_scores(
        requesting_of(as_pod(incoming)),
        [{"cpu": (2 + i) * 1000, "memory": (4 + 2 * i) * 1024**3, "pods": 110} for i in range(6)],
        on_node,
    )
    assert [h["Score"] for h in got] == expected
    assert [h["Host"] for h in got] == [f"n{i}" for i in range(6)]
    # the same with node names
    assert json.loads(ext.prioritize(args_names(incoming, [f"n{i}" for i in range(6)])).body) == got


def test_prioritize_scores_an_unknown_node_0_and_the_rest_as_usual() -> None:
    ext = make_extender(SMALL_FIRST, NODES)
    got = json.loads(ext.prioritize(args_names(pod_doc("p"), ["ghost", "small", "big"])).body)
    assert got == [{"Host": "ghost", "Score": 0}, {"Host": "small", "Score": 10}, {"Host": "big", "Score": 0}]


def test_prioritize_with_no_nodes() -> None:
    ext = make_extender(SPREAD, NODES)
    assert ext.prioritize(args_names(pod_doc("p"), [])).body == b"[]"
    assert (
        ext.prioritize(json.dumps({"Pod": pod_doc("p"), "Nodes": None, "NodeNames": None}).encode()).body
        == b"[]"
    )
    assert ext.prioritize(json.dumps({"Pod": pod_doc("p"), "Nodes": {"items": None}}).encode()).body == b"[]"


# --------------------------------------------------------------------------- filter


FILTER_KEYS = ["Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"]


def test_filter_with_a_node_list_returns_the_passing_nodes_as_sent() -> None:
    nodes = [
        node_doc("small", "4", "16Gi"),
        node_doc("tiny", "500m", "16Gi"),
        node_doc("tainted", taints=[{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
        node_doc("big", "16", "64Gi"),
    ]
    ext = make_extender(SPREAD, nodes)
    body = args_nodelist(pod_doc("p"), nodes)
    reply = ext.filter(body)
    result = json.loads(reply.body)
    assert list(result) == FILTER_KEYS
    assert result["NodeNames"] is None
    assert result["Error"] == ""
    assert result["FailedNodes"] == {"tiny": "Insufficient cpu"}
    assert result["FailedAndUnresolvableNodes"] == {
        "tainted": "node(s) had untolerated taint {dedicated: db}"
    }
    assert result["Nodes"]["kind"] == "NodeList"
    assert result["Nodes"]["items"] == [nodes[0], nodes[3]]
    # byte for byte: the node objects go back exactly as kube-scheduler sent them
    sent = json.dumps(nodes[0]).encode()
    assert sent in reply.body and sent in body


def test_filter_with_node_names_returns_names() -> None:
    nodes = [node_doc("small"), node_doc("cordoned", unschedulable=True), node_doc("big", "16", "64Gi")]
    ext = make_extender(SPREAD, nodes)
    result = json.loads(ext.filter(args_names(pod_doc("p"), ["small", "cordoned", "big", "ghost"])).body)
    assert list(result) == FILTER_KEYS
    assert result["Nodes"] is None
    # a node the cache has not seen passes: kube-scheduler's own filters have checked it
    assert result["NodeNames"] == ["small", "big", "ghost"]
    assert result["FailedAndUnresolvableNodes"] == {"cordoned": "node(s) were unschedulable"}
    assert result["FailedNodes"] == {}


@pytest.mark.parametrize(
    ("node", "pod", "failed", "unresolvable"),
    [
        (node_doc("n", unschedulable=True), pod_doc("p"), None, "node(s) were unschedulable"),
        (
            node_doc("n", unschedulable=True),
            pod_doc("p", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]),
            None,
            None,
        ),
        (
            node_doc("n"),
            pod_doc("p", nodeSelector={"disk": "ssd"}),
            None,
            "node(s) didn't match Pod's node affinity/selector",
        ),
        (node_doc("n", labels={"disk": "ssd"}), pod_doc("p", nodeSelector={"disk": "ssd"}), None, None),
        (
            node_doc("n", labels={"zone": "a"}),
            pod_doc(
                "p",
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
                            ]
                        }
                    }
                },
            ),
            None,
            "node(s) didn't match Pod's node affinity/selector",
        ),
        (
            node_doc("n", taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]),
            pod_doc("p"),
            None,
            "node(s) had untolerated taint {k: v}",
        ),
        (
            node_doc("n", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}]),
            pod_doc("p"),
            None,
            None,
        ),
        (
            node_doc("n", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
            pod_doc(
                "p", tolerations=[{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]
            ),
            None,
            None,
        ),
        (node_doc("n", cpu="1"), pod_doc("p", cpu="1500m"), "Insufficient cpu", None),
        (
            node_doc("n", cpu="1", memory="1Gi"),
            pod_doc("p", cpu="2", memory="2Gi"),
            "Insufficient cpu, Insufficient memory",
            None,
        ),
        (node_doc("n"), pod_doc("p", extra={"nvidia.com/gpu": "1"}), "Insufficient nvidia.com/gpu", None),
        (
            node_doc("n", extra={"nvidia.com/gpu": "2"}),
            pod_doc("p", extra={"nvidia.com/gpu": "1"}),
            None,
            None,
        ),
        (node_doc("n", pods="0"), pod_doc("p"), "Too many pods", None),
        # NodeResourcesFit reports every shortage at once, the pod slot first
        (node_doc("n", cpu="1", pods="0"), pod_doc("p", cpu="2"), "Too many pods, Insufficient cpu", None),
        # kube-scheduler's filter order: TaintToleration before NodeAffinity
        (
            node_doc("n", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
            pod_doc("p", nodeSelector={"disk": "ssd"}),
            None,
            "node(s) had untolerated taint {k: v}",
        ),
        # a pod without requests fits as long as there is a pod slot (no non-zero stand-ins for fit)
        (node_doc("n", cpu="0", memory="0"), pod_doc("p", cpu=None, memory=None), None, None),
    ],
)
def test_filter_checks(
    node: dict[str, Any], pod: dict[str, Any], failed: str | None, unresolvable: str | None
) -> None:
    ext = make_extender(SPREAD, [node])
    for body in (args_nodelist(pod, [node]), args_names(pod, ["n"])):
        result = json.loads(ext.filter(body).body)
        assert result["FailedNodes"] == ({"n": failed} if failed else {})
        assert result["FailedAndUnresolvableNodes"] == ({"n": unresolvable} if unresolvable else {})


def test_filter_counts_the_pods_already_on_the_node_but_not_the_incoming_one() -> None:
    nodes = [node_doc("n", cpu="4", pods="3")]
    running = [pod_doc("a", "n", cpu="2", phase="Running"), pod_doc("b", "n", cpu="1500m", phase="Running")]
    done = [pod_doc("old", "n", cpu="4", phase="Succeeded"), pod_doc("failed", "n", cpu="4", phase="Failed")]
    pending = [pod_doc("queued", cpu="4")]  # not bound: on no node
    ext = make_extender(SPREAD, nodes, running + done + pending)
    fits = json.loads(ext.filter(args_names(pod_doc("p", cpu="500m"), ["n"])).body)
    assert fits["NodeNames"] == ["n"]
    short = json.loads(ext.filter(args_names(pod_doc("p", cpu="501m"), ["n"])).body)
    assert short["FailedNodes"] == {"n": "Insufficient cpu"}
    # the incoming pod, if the cache already holds it (Pending), does not count against itself
    ext2 = make_extender(SPREAD, nodes, [*running, pod_doc("p", cpu="500m")])
    assert json.loads(ext2.filter(args_names(pod_doc("p", cpu="500m"), ["n"])).body)["NodeNames"] == ["n"]
    full = make_extender(SPREAD, nodes, [*running, pod_doc("c", "n", cpu=None, memory=None, phase="Running")])
    assert json.loads(full.filter(args_names(pod_doc("p", cpu="100m"), ["n"])).body)["FailedNodes"] == {
        "n": "Too many pods"
    }


# --------------------------------------------------------------------------- the cache


def test_cluster_state_follows_watch_events() -> None:
    state = NodeUsageIndex()
    node = as_node(node_doc("n"))
    state.on_change("Node", "ADDED", None, node)
    pending = as_pod(pod_doc("p", cpu="1"))
    state.on_change("Pod", "ADDED", None, pending)
    assert state.usage == {} and state.pod_count == 0
    bound = as_pod(pod_doc("p", "n", cpu="1", phase="Running"))
    state.on_change("Pod", "MODIFIED", pending, bound)
    assert state.usage["n"].requested == {"cpu": 1000, "memory": 1024**3}
    assert state.usage["n"].nonzero == {"cpu": 1000, "memory": 1024**3, "pods": 1}
    assert state.usage["n"].pods == 1
    # the same event again (a re-list) does not count it twice
    state.on_change("Pod", "MODIFIED", bound, bound)
    assert state.usage["n"].pods == 1
    other = as_pod(pod_doc("q", "n", cpu=None, memory=None, phase="Running"))
    state.on_change("Pod", "ADDED", None, other)
    assert state.usage["n"].nonzero == {"cpu": 1100, "memory": 1024**3 + 200 * 1024**2, "pods": 2}
    assert state.usage["n"].requested == {"cpu": 1000, "memory": 1024**3}
    finished = as_pod(pod_doc("p", "n", cpu="1", phase="Succeeded"))
    state.on_change("Pod", "MODIFIED", bound, finished)
    assert state.usage["n"].pods == 1
    state.on_change("Pod", "DELETED", other, None)
    assert state.usage == {} and state.pod_count == 0
    relabelled = as_node(node_doc("n", cpu="8"))
    state.on_change("Node", "MODIFIED", node, relabelled)
    assert state.nodes["n"].allocatable["cpu"] == 8000
    state.on_change("Node", "DELETED", relabelled, None)
    assert state.nodes == {}


# --------------------------------------------------------------------------- the time budget


class StepClock:
    """A clock that moves ``step`` seconds every time it is read."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_over_budget_prioritize_answers_with_what_is_computed() -> None:
    nodes = [node_doc(f"n{i:04d}", cpu=str(1 + i % 7)) for i in range(600)]
    names = [n["metadata"]["name"] for n in nodes]
    ext = make_extender(SMALL_FIRST, nodes, budget=1.0, clock=StepClock(1.5))
    reply = ext.prioritize(args_names(pod_doc("p", cpu="100m"), names), started=0.0)
    assert reply.over_budget
    got = json.loads(reply.body)
    assert [h["Host"] for h in got] == names
    # the first chunk (256 nodes) was scored, min..max among themselves; the rest are neutral
    assert {h["Score"] for h in got[:256]} == {0, 2, 3, 5, 7, 8, 10}
    assert all(h["Score"] == 0 for h in got[256:])
    in_time = make_extender(SMALL_FIRST, nodes, budget=100.0, clock=StepClock(1.5))
    assert not in_time.prioritize(args_names(pod_doc("p", cpu="100m"), names), started=0.0).over_budget


def test_over_budget_filter_lets_the_rest_through() -> None:
    nodes = [node_doc(f"n{i:04d}", cpu="1" if i % 2 else "100m") for i in range(600)]
    names = [n["metadata"]["name"] for n in nodes]
    ext = make_extender(SPREAD, nodes, budget=1.0, clock=StepClock(1.5))
    for body in (args_names(pod_doc("p", cpu="500m"), names), args_nodelist(pod_doc("p", cpu="500m"), nodes)):
        reply = ext.filter(body, started=0.0)
        assert reply.over_budget
        result = json.loads(reply.body)
        assert set(result["FailedNodes"]) == {names[i] for i in range(0, 256, 2)}
        passed = result["NodeNames"] or [n["metadata"]["name"] for n in result["Nodes"]["items"]]
        assert passed == [names[i] for i in range(1, 256, 2)] + names[256:]


# --------------------------------------------------------------------------- malformed requests


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not an ExtenderArgs"),
        (b"[]", "not an ExtenderArgs"),
        (b'{"Nodes": null, "NodeNames": []}', "Pod is missing"),
        (b'{"Pod": {"metadata": {"name": 5}}, "NodeNames": []}', "not an ExtenderArgs"),
        (b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "n1"}', "not an ExtenderArgs"),
    ],
)
def test_bad_requests(body: bytes, message: str) -> None:
    from desched.app.extender import BadRequest

    ext = make_extender(SPREAD, NODES)
    for verb in (ext.filter, ext.prioritize):
        with pytest.raises(BadRequest, match=message):
            verb(body)


def test_a_bad_node_item_is_named() -> None:
    from desched.app.extender import BadRequest

    ext = make_extender(SPREAD, NODES)
    body = json.dumps(
        {"Pod": pod_doc("p"), "Nodes": {"items": [NODES[0], {"spec": {"taints": "x"}}]}}
    ).encode()
    with pytest.raises(BadRequest, match=r"Nodes.items\[1\]"):
        ext.filter(body)


def test_prioritize_reads_a_nodes_allocatable_again_when_its_resource_version_changes() -> None:
    from desched.app.extender import BadRequest

    ext = make_extender(SMALL_FIRST, NODES)
    first = json.loads(ext.prioritize(args_nodelist(pod_doc("p"), NODES)).body)
    assert first == [{"Host": "small", "Score": 10}, {"Host": "big", "Score": 0}]
    # the same resourceVersion: the cached allocatable, whatever the status says now
    grown = node_doc("small", "64", "256Gi")
    assert json.loads(ext.prioritize(args_nodelist(pod_doc("p"), [grown, NODES[1]])).body) == first
    # a new resourceVersion: the status is read, and "small" is now the bigger node
    grown["metadata"]["resourceVersion"] = "43"
    got = json.loads(ext.prioritize(args_nodelist(pod_doc("p"), [grown, NODES[1]])).body)
    assert got == [{"Host": "small", "Score": 0}, {"Host": "big", "Score": 10}]
    # a status that is not a NodeStatus, or no status at all
    broken = {"metadata": {"name": "small", "resourceVersion": "44"}, "status": {"allocatable": 5}}
    with pytest.raises(BadRequest, match="node 'small': status"):
        ext.prioritize(args_nodelist(pod_doc("p"), [broken]))
    bare = {"metadata": {"name": "small", "resourceVersion": "45"}}
    assert json.loads(ext.prioritize(args_nodelist(pod_doc("p"), [bare, NODES[1]])).body)[1]["Host"] == "big"


# --------------------------------------------------------------------------- HTTP


@pytest.fixture
def served() -> Iterator[tuple[BackgroundServer, dict[str, bool]]]:
    ready = {"ok": True}
    ext = make_extender(SMALL_FIRST, NODES)
    server = ExtenderServer(
        ext, host="127.0.0.1", port=0, ready=lambda: ready["ok"], metrics=ExtenderMetrics()
    )
    with BackgroundServer(server) as bg:
        yield bg, ready


def http(
    url: str, body: bytes | None = None, context: ssl.SSLContext | None = None
) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, data=body, method="POST" if body is not None else "GET")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    try:
        with opener.open(req, timeout=30) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def test_http_verbs_under_any_url_prefix(served: tuple[BackgroundServer, dict[str, bool]]) -> None:
    bg, _ = served
    for prefix in ("", "/scheduler", "/api/v1/desched/"):
        status, ctype, body = http(
            f"{bg.url}{prefix.rstrip('/')}/prioritize", args_names(pod_doc("p"), ["small", "big"])
        )
        assert (status, ctype) == (200, "application/json")
        assert json.loads(body) == [{"Host": "small", "Score": 10}, {"Host": "big", "Score": 0}]
        status, ctype, body = http(f"{bg.url}{prefix.rstrip('/')}/filter", args_nodelist(pod_doc("p"), NODES))
        assert status == 200
        assert [n["metadata"]["name"] for n in json.loads(body)["Nodes"]["items"]] == ["small", "big"]
    # the names older examples use
    assert http(f"{bg.url}/priorities", args_names(pod_doc("p"), ["big"]))[0] == 200
    assert http(f"{bg.url}/predicates", args_names(pod_doc("p"), ["big"]))[0] == 200


def test_http_errors(served: tuple[BackgroundServer, dict[str, bool]]) -> None:
    bg, ready = served
    status, _, body = http(f"{bg.url}/bind", b"{}")
    assert status == 404 and b"unknown verb 'bind'" in body
    status, _, body = http(f"{bg.url}/filter", b"{nope")
    assert status == 400 and b"not an ExtenderArgs" in body
    ready["ok"] = False
    assert http(f"{bg.url}/filter", args_names(pod_doc("p"), ["big"]))[0] == 503


def test_health_readiness_and_metrics(served: tuple[BackgroundServer, dict[str, bool]]) -> None:
    bg, ready = served
    assert http(f"{bg.url}/healthz")[::2] == (200, b"ok")
    assert http(f"{bg.url}/livez")[0] == 200
    assert http(f"{bg.url}/readyz")[0] == 200
    for _ in range(3):
        http(f"{bg.url}/filter", args_names(pod_doc("p"), ["small", "big"]))
    http(f"{bg.url}/prioritize", args_nodelist(pod_doc("p"), NODES))
    http(f"{bg.url}/filter", b"garbage")
    ready["ok"] = False
    assert http(f"{bg.url}/readyz")[0] == 503
    assert http(f"{bg.url}/healthz")[0] == 200
    status, ctype, body = http(f"{bg.url}/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    text = body.decode()
    assert 'desched_extender_requests_total{code="200",verb="filter"} 3.0' in text
    assert 'desched_extender_requests_total{code="200",verb="prioritize"} 1.0' in text
    assert 'desched_extender_requests_total{code="400",verb="filter"} 1.0' in text
    assert 'desched_extender_request_duration_seconds_count{verb="filter"} 4.0' in text
    assert 'desched_extender_request_duration_seconds_bucket{le="0.005",verb="prioritize"}' in text
    assert 'desched_extender_request_nodes_sum{verb="prioritize"} 2.0' in text


def test_over_budget_is_counted(tmp_path: Path) -> None:
    nodes = [node_doc(f"n{i:04d}") for i in range(300)]
    clock = StepClock(1.0)
    ext = make_extender(SPREAD, nodes, budget=0.5, clock=clock)
    metrics = ExtenderMetrics()
    server = ExtenderServer(ext, host="127.0.0.1", port=0, metrics=metrics, clock=clock)
    with BackgroundServer(server) as bg:
        status, _, body = http(
            f"{bg.url}/prioritize", args_names(pod_doc("p"), [n["metadata"]["name"] for n in nodes])
        )
        assert status == 200 and len(json.loads(body)) == 300
    assert metrics.over_budget.labels("prioritize")._value.get() == 1.0


def test_tls(tmp_path: Path) -> None:
    cert, key = serving_certificate("", "", str(tmp_path))
    server = ExtenderServer(
        make_extender(SPREAD, NODES), host="127.0.0.1", port=0, ssl_context=server_context(cert, key)
    )
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    with BackgroundServer(server) as bg:
        assert bg.url.startswith("https://")
        assert http(f"{bg.url}/healthz", context=insecure)[::2] == (200, b"ok")
        status, _, body = http(
            f"{bg.url}/prioritize", args_names(pod_doc("p"), ["small", "big"]), context=insecure
        )
        assert status == 200 and json.loads(body)[1] == {"Host": "big", "Score": 10}
        # plain HTTP to the TLS port is refused
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                f"http://127.0.0.1:{bg.server.port}/healthz", timeout=5
            ).read()


def test_reply_record() -> None:
    assert Reply(b"[]", 0, False).body == b"[]"


# --------------------------------------------------------------------------- the command


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--config", "missing.yaml"], "missing.yaml: cannot read scorer config"),
        (["--config", "{bad}", "--timeout-budget", "0s"], "--timeout-budget: must be more than 0"),
        (["--config", "{bad}", "--port", "0"], "--port: must be between 1 and 65535"),
        (["--config", "{bad}", "--tls-cert-file", "x.crt"], "--tls-cert-file: needs --tls-private-key-file"),
        (["--config", "{worse}"], "left.prefer: input should be"),
    ],
)
def test_cli_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    ok = tmp_path / "ok.yaml"
    ok.write_text("left: {values: RatioToAllocatable, prefer: Most}\n")
    worse = tmp_path / "worse.yaml"
    worse.write_text("left: {values: RatioToAllocatable, prefer: Best}\n")
    argv = [a.replace("{bad}", str(ok)).replace("{worse}", str(worse)) for a in argv]
    assert cli_main(["extender", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("desched: error: ")
    assert message in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_serves_a_snapshot_until_sigterm(tmp_path: Path) -> None:
    snapshot = tmp_path / "cluster.json"
    pods = [pod_doc("x", "big", cpu="8", phase="Running")]
    snapshot.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [{"kind": "Node", "apiVersion": "v1", **n} for n in NODES]
                + [{"kind": "Pod", "apiVersion": "v1", **p} for p in pods],
            }
        )
    )
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "desched.cli",
            "extender",
            "--config",
            str(REPO / "deploy" / "extender" / "scorer.yaml"),
            "--snapshot",
            str(snapshot),
            "--port",
            str(port),
            "--bind-address",
            "127.0.0.1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "NO_PROXY": "*"},
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if http(f"{url}/readyz")[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "extender did not come up"
            time.sleep(0.1)
        result = json.loads(http(f"{url}/filter", args_names(pod_doc("p", cpu="10"), ["small", "big"]))[2])
        # big holds a pod of 8 cpus: 8 left, not 10
        assert result["FailedNodes"] == {"small": "Insufficient cpu", "big": "Insufficient cpu"}
        got = json.loads(http(f"{url}/prioritize", args_names(pod_doc("p"), ["small", "big"]))[2])
        assert got == [{"Host": "small", "Score": 10}, {"Host": "big", "Score": 0}]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()


# --------------------------------------------------------------------------- scoring as arrays


def test_the_rows_of_arrays_follow_the_cache_through_watch_events() -> None:
    """Prioritize scores from rows of numpy arrays kept beside the dictionaries: after nodes and
    pods come, change and go, every node's rows are its dictionaries' amounts."""
    nodes = [node_doc(f"n{i}", cpu=str(2 + i), memory=f"{4 + i}Gi") for i in range(5)]
    ext = make_extender(SMALL_FIRST, nodes)
    state = ext.state
    pods = [as_pod(pod_doc(f"x{i}", f"n{i % 4}", cpu=f"{100 + i}m", phase="Running")) for i in range(12)]
    for pod in pods:
        state.on_change("Pod", "ADDED", None, pod)
    for i in (0, 1, 2, 3, 4, 7, 11):  # n3 loses all three of its pods (x3, x7, x11)
        state.on_change("Pod", "DELETED", pods[i], None)
    state.on_change("Node", "DELETED", as_node(nodes[4]), None)
    state.on_change("Node", "ADDED", None, as_node(node_doc("n9", cpu="7")))
    state.on_change("Node", "MODIFIED", as_node(nodes[1]), as_node(node_doc("n1", cpu="3", memory="1Gi")))
    names = ["n0", "n1", "n2", "n3", "n9", "n4"]
    assert state.alloc_rows is not None and state.used_rows is not None
    alloc = state.alloc_rows.take(names)
    used = state.used_rows.take(names)
    assert alloc is not None and used is not None
    for i, name in enumerate(names):
        entry = state.nodes.get(name)
        usage = state.usage.get(name)
        for k, resource in enumerate(state.alloc_rows.resources):
            assert alloc[i, k] == (entry.allocatable.get(resource, 0) if entry else 0)
            assert used[i, k] == (usage.nonzero.get(resource, 0) if usage else 0)
    assert "n3" not in state.usage and "n3" not in state.used_rows.slots
    # a slot given up is used again
    assert len(state.alloc_rows.slots) == 5 and max(state.alloc_rows.slots.values()) == 5


def test_amounts_beyond_float64_exactness_are_scored_with_integers() -> None:
    """A node with more memory than float64 counts exactly (8Ei) is scored with the scorer's lists of
    Python integers, with the same answer as the scorer's own."""
    nodes = [node_doc("huge", "4", "8Ei"), *NODES]
    incoming = pod_doc("p", cpu="500m", memory="1Gi")
    scorer = GenericScorer(GenericScorerArgs.model_validate(SMALL_FIRST))
    allocs = [
        {"cpu": 4000, "memory": 8 * 1024**6, "pods": 110},
        *({"cpu": c * 1000, "memory": m * 1024**3, "pods": 110} for c, m in ((4, 16), (16, 64))),
    ]
    expected = scorer.extender_scores(requesting_of(as_pod(incoming)), allocs, [{}, {}, {}])
    for body in (args_names(incoming, ["huge", "small", "big"]), args_nodelist(incoming, nodes)):
        ext = make_extender(SMALL_FIRST, nodes)
        assert [h["Score"] for h in json.loads(ext.prioritize(body).body)] == expected
    ext = make_extender(SMALL_FIRST, nodes)
    assert ext.state.alloc_rows is not None and ext.state.alloc_rows.take(["huge"]) is None


def test_prioritize_scores_as_the_scorer_on_a_larger_cluster() -> None:
    """Over several chunks of nodes, with pods on most: numpy's answer is the scorer's lists'."""
    nodes = [node_doc(f"n{i:03d}", cpu=str(1 + i % 13), memory=f"{2 + i % 29}Gi") for i in range(700)]
    pods = [
        pod_doc(f"x{i}", f"n{i % 650:03d}", cpu=f"{37 * i % 900}m", memory=f"{i % 300}Mi", phase="Running")
        for i in range(2000)
    ]
    incoming = pod_doc("p", cpu="250m", memory="300Mi")
    scorer = GenericScorer(GenericScorerArgs.model_validate(SMALL_FIRST))
    on_node: dict[str, list[Pod]] = {}
    for p in pods:
        on_node.setdefault(p["spec"]["nodeName"], []).append(as_pod(p))
    names = [n["metadata"]["name"] for n in nodes]
    allocatable = [
        {"cpu": (1 + i % 13) * 1000, "memory": (2 + i % 29) * 1024**3, "pods": 110} for i in range(700)
    ]
    expected = scorer.extender_scores(
        requesting_of(as_pod(incoming)), allocatable, [allocated_of(on_node.get(name, [])) for name in names]
    )
    ext = make_extender(SMALL_FIRST, nodes, pods)
    for body in (args_names(incoming, names), args_nodelist(incoming, nodes)):
        got = json.loads(ext.prioritize(body).body)
        assert [h["Host"] for h in got] == names
        assert [h["Score"] for h in got] == expected
    assert len(set(expected)) > 5


def test_http_bodies_of_any_size_and_framing(served: tuple[BackgroundServer, dict[str, bool]]) -> None:
    """The body is read into a buffer kept between requests: a big one after a small one, a small
    one after a big one, and one sent chunked (no Content-Length) all read whole; one over the
    limit is refused with 413 before it is read."""
    bg, _ = served
    small = args_names(pod_doc("p"), ["small", "big"])
    padded = args_nodelist(pod_doc("p"), [*NODES * 1, *(node_doc(f"pad{i}") for i in range(3000))])
    want_small = [{"Host": "small", "Score": 10}, {"Host": "big", "Score": 0}]
    for body in (small, padded, small):
        status, _, answer = http(f"{bg.url}/prioritize", body)
        assert status == 200
        assert json.loads(answer)[:2] == want_small
    assert len(padded) > 2 * 1024**2
    with socket.create_connection(("127.0.0.1", bg.port), timeout=30) as sock:
        head = (
            b"POST /prioritize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(small[i : i + 7]), small[i : i + 7]) for i in range(0, len(small), 7)
        )
        sock.sendall(head + chunks + b"0\r\n\r\n")
        reply = b""
        while data := sock.recv(65536):
            reply += data
    assert reply.startswith(b"HTTP/1.1 200") and json.loads(reply.split(b"\r\n\r\n", 1)[1]) == want_small
    with socket.create_connection(("127.0.0.1", bg.port), timeout=30) as sock:
        sock.sendall(
            b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n{" % (2**40)
        )
        reply = b""
        while data := sock.recv(65536):
            reply += data
    assert reply.startswith(b"HTTP/1.1 413") and b"request body over 536870912 bytes" in reply
