"""The live cache keeps pods' requests by resource spec from one snapshot to the next: a later
snapshot computes only the specs it has not seen, and gives the same figures as a fresh one."""

from __future__ import annotations

import pytest
from tests import builders

from desched.cluster import snapshot as snapshot_module
from desched.cluster.snapshot import ClusterSnapshot, RequestsMemo
from desched.k8s.objects import Pod


def pods(n: int) -> list[Pod]:
    return [
        builders.pod(f"p{i}", node=f"n{i % 3}", cpu=f"{100 + i % 4}m", memory=f"{64 * (1 + i % 5)}Mi")
        for i in range(n)
    ]


def test_a_later_snapshot_reuses_the_requests_and_agrees_with_a_fresh_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nodes = [builders.node(f"n{i}", cpu="8", memory="32Gi") for i in range(3)]
    listed = pods(40)
    memo = RequestsMemo()
    first = ClusterSnapshot(nodes=nodes, pods=listed, requests_memo=memo)
    computed: list[object] = []
    shape = snapshot_module._requests_shape

    def counted(pod: Pod) -> tuple[object, ...]:
        computed.append(pod)
        return shape(pod)

    monkeypatch.setattr(snapshot_module, "_requests_shape", counted)
    new_pod = builders.pod("new", node="n1", cpu="3", memory="1Gi")
    second = ClusterSnapshot(nodes=nodes, pods=[*listed, new_pod], requests_memo=memo)
    assert computed == [new_pod]  # only the spec no snapshot had seen
    fresh = ClusterSnapshot(nodes=nodes, pods=[*listed, new_pod])
    for node in nodes:
        name = node.metadata.name
        assert second.requested_on(name) == fresh.requested_on(name)
    assert first.requested_on("n1") != second.requested_on("n1")
    for pod in [*listed, new_pod]:
        assert second.requests(pod) == fresh.requests(pod)


def test_the_memo_forgets_once_it_holds_far_more_specs_than_pods() -> None:
    memo = RequestsMemo()
    ClusterSnapshot(pods=pods(2000), requests_memo=memo)
    assert len(memo.by_parts) == 2000
    memo.trim(2000)
    assert len(memo.by_parts) == 2000
    memo.trim(10)  # most of those pods are gone
    assert not memo.by_parts and not memo.by_shape
