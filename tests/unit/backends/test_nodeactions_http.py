"""Node downgrades over HTTP (an aiohttp test server holding nodes as the apiserver does: a
resourceVersion per write, JSON merge patches refused with 409 when their resourceVersion is
stale): the patch desched sends, a conflict re-read and re-planned, conflicts that never end, a
failed read or write, an expired downgrade removed, a node gone before its removal, and the
worker thread's blocking call."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from tests import builders
from tests.kubeapi import api_client_for, status

from desched.backends import api_nodeactions as nodeactions_module
from desched.backends.api_nodeactions import CONFLICT_RETRIES, NodeDowngrades
from desched.framework.nodeactions import DOWNGRADE_ANNOTATION, ActionResult, DowngradeRequest, ReleaseRequest
from desched.k8s.objects import Node

NOW = datetime(2026, 11, 24, 12, tzinfo=UTC)
KEY = "desched.io/anomalous-node"
MAINTENANCE = {"key": "example.com/maintenance", "value": "", "effect": "NoSchedule"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the apiserver applies ``application/merge-patch+json``."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


class Nodes:
    """The nodes resource. ``get_answer``/``patch_answer`` replace a request's answer (a status);
    ``meanwhile`` runs before each PATCH is applied: another writer, True when it changed the node."""

    def __init__(self, *nodes: dict[str, Any]) -> None:
        self.nodes = {n["metadata"]["name"]: n for n in nodes}
        for n in nodes:
            n["metadata"]["resourceVersion"] = "1"
        self.patches: list[dict[str, Any]] = []
        self.conflicts = 0
        self.gets = 0
        self.get_answer: int | None = None
        self.patch_answer: int | None = None
        self.meanwhile: Callable[[dict[str, Any]], bool] | None = None
        self.patch_delay = 0.0

    def bump(self, node: dict[str, Any]) -> None:
        node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)

    def app(self) -> web.Application:
        async def get(request: web.Request) -> web.Response:
            self.gets += 1
            name = request.match_info["name"]
            if self.get_answer is not None:
                return status(self.get_answer, f"answer {self.get_answer}")
            if name not in self.nodes:
                return status(404, f'nodes "{name}" not found', "NotFound")
            return web.json_response(self.nodes[name])

        async def patch(request: web.Request) -> web.Response:
            assert request.content_type == "application/merge-patch+json"
            body = json.loads(await request.read())
            self.patches.append(body)
            await asyncio.sleep(self.patch_delay)
            if self.patch_answer is not None:
                return status(self.patch_answer, f"answer {self.patch_answer}")
            node = self.nodes[request.match_info["name"]]
            if self.meanwhile is not None and self.meanwhile(node):
                self.bump(node)
            if body["metadata"]["resourceVersion"] != node["metadata"]["resourceVersion"]:
                self.conflicts += 1
                return status(409, "the object has been modified; please apply your changes", "Conflict")
            updated = merge_patch(node, body)
            self.nodes[node["metadata"]["name"]] = updated
            self.bump(updated)
            return web.json_response(updated)

        app = web.Application()
        app.router.add_get("/api/v1/nodes/{name}", get)
        app.router.add_patch("/api/v1/nodes/{name}", patch)
        return app


def node_doc(name: str = "n1", **kw: Any) -> dict[str, Any]:
    return builders.node_doc(name, labels={}, hostname_label=False, **kw)


def as_node(doc: dict[str, Any]) -> Node:
    return builders.node(
        doc["metadata"]["name"], hostname_label=False, metadata=copy.deepcopy(doc["metadata"])
    )


def req(method: str = "label", ttl: float = 300) -> DowngradeRequest:
    return DowngradeRequest(
        method, KEY, "true", timedelta(seconds=ttl), "anomalous pods", by="p/RemoveAnomalyPods"
    )


def run(nodes: Nodes, test: Callable[[NodeDowngrades, list[datetime]], Awaitable[None]], **kw: Any) -> None:
    clock = [NOW]

    async def main() -> None:
        async with api_client_for(nodes.app()) as api:
            downgrades = NodeDowngrades(api, asyncio.get_running_loop(), clock=lambda: clock[0], **kw)
            await test(downgrades, clock)

    asyncio.run(main())


def test_a_label_downgrade_is_one_guarded_merge_patch() -> None:
    nodes = Nodes(node_doc())

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        record = await d.downgrade(as_node(nodes.nodes["n1"]), req())
        assert (record.result, record.action, record.detail) == (ActionResult.DOWNGRADED, "downgrade", "")
        assert record.expires_at == NOW + timedelta(seconds=300)
        assert d.downgraded_count() == 1 and d.next_expiry() == record.expires_at

    run(nodes, test)
    [patch] = nodes.patches
    assert patch["metadata"]["resourceVersion"] == "1"  # guarded by what was read
    assert patch["metadata"]["labels"] == {KEY: "true"}
    assert DOWNGRADE_ANNOTATION in patch["metadata"]["annotations"]
    node = nodes.nodes["n1"]
    assert node["metadata"]["labels"] == {KEY: "true"} and node["metadata"]["resourceVersion"] == "2"


def test_a_conflict_rereads_and_keeps_the_other_writers_taint() -> None:
    nodes = Nodes(node_doc())
    calls = [0]

    def once(n: dict[str, Any]) -> bool:
        calls[0] += 1
        if calls[0] == 1:
            n.setdefault("spec", {}).setdefault("taints", []).append(MAINTENANCE)
        return calls[0] == 1

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        nodes.meanwhile = once
        record = await d.downgrade(as_node(nodes.nodes["n1"]), req("taint"))
        assert record.result is ActionResult.DOWNGRADED

    run(nodes, test)
    assert nodes.conflicts == 1 and len(nodes.patches) == 2 and nodes.gets == 2
    assert nodes.nodes["n1"]["spec"]["taints"] == [
        MAINTENANCE,
        {"key": KEY, "value": "true", "effect": "NoSchedule"},
    ]


def test_a_node_that_keeps_changing_is_given_up_on() -> None:
    nodes = Nodes(node_doc())

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        nodes.meanwhile = lambda n: True  # every write loses the race
        record = await d.downgrade(as_node(nodes.nodes["n1"]), req())
        assert record.result is ActionResult.FAILED
        assert record.detail == "the node kept changing (conflicts)"
        assert d.downgraded_count() == 0

    run(nodes, test)
    assert nodes.conflicts == CONFLICT_RETRIES and nodes.nodes["n1"]["metadata"]["labels"] == {}


@pytest.mark.parametrize(
    ("failing", "code", "detail"),
    [("get", 403, "cannot read node: 403 answer 403"), ("patch", 500, "500 answer 500")],
)
def test_a_failed_read_or_write_is_a_failed_record(failing: str, code: int, detail: str) -> None:
    nodes = Nodes(node_doc())

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        if failing == "get":
            nodes.get_answer = code
        else:
            nodes.patch_answer = code
        record = await d.downgrade(as_node(nodes.nodes["n1"]), req())
        assert (record.result, record.detail) == (ActionResult.FAILED, detail)
        assert d.downgraded_count() == 0

    run(nodes, test)
    assert nodes.nodes["n1"]["metadata"]["labels"] == {}


def test_a_write_without_an_answer_times_out_as_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nodeactions_module, "WRITE_TIMEOUT_SECONDS", 0.5)
    nodes = Nodes(node_doc())
    nodes.patch_delay = 3

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        record = await d.downgrade(as_node(nodes.nodes["n1"]), req())
        assert record.result is ActionResult.FAILED and record.detail.startswith("request failed")
        assert d.downgraded_count() == 0

    run(nodes, test)
    assert len(nodes.patches) == 1  # a timed-out write is not repeated: the next cycle decides


def test_an_expired_downgrade_is_removed_and_only_it() -> None:
    nodes = Nodes(node_doc(taints=[MAINTENANCE]))

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        assert (
            await d.downgrade(as_node(nodes.nodes["n1"]), req("taint", ttl=60))
        ).result is ActionResult.DOWNGRADED
        assert await d.reconcile([as_node(nodes.nodes["n1"])]) == []  # not yet expired
        clock[0] = NOW + timedelta(seconds=61)
        [restored] = await d.reconcile([as_node(nodes.nodes["n1"])])
        assert (restored.action, restored.result, restored.key) == ("restore", ActionResult.RESTORED, KEY)
        assert d.downgraded_count() == 0 and d.next_expiry() is None

    run(nodes, test)
    node = nodes.nodes["n1"]
    assert node["spec"]["taints"] == [MAINTENANCE]
    assert DOWNGRADE_ANNOTATION not in (node["metadata"].get("annotations") or {})


def test_a_node_gone_before_its_removal_is_forgotten() -> None:
    nodes = Nodes(node_doc("n1"), node_doc("n2"))

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        for name in ("n1", "n2"):
            await d.downgrade(as_node(nodes.nodes[name]), req(ttl=60))
        seen = [as_node(nodes.nodes[n]) for n in ("n1", "n2")]
        del nodes.nodes["n1"]
        clock[0] = NOW + timedelta(seconds=61)
        records = await d.reconcile(seen)
        assert [r.node for r in records] == ["n2"]
        assert "n1" not in d.active and "n2" not in d.active

    run(nodes, test)


def test_the_worker_threads_call_blocks_until_the_loop_wrote() -> None:
    nodes = Nodes(node_doc())

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        actions = d.cycle_actions()
        record = await asyncio.to_thread(actions.downgrade, as_node(nodes.nodes["n1"]), req())
        assert record.result is ActionResult.DOWNGRADED and actions.records == [record]

    run(nodes, test)
    assert nodes.nodes["n1"]["metadata"]["labels"] == {KEY: "true"}


def test_dry_run_and_a_follower_write_nothing() -> None:
    nodes = Nodes(node_doc())

    async def dry(d: NodeDowngrades, clock: list[datetime]) -> None:
        record = await d.downgrade(as_node(nodes.nodes["n1"]), req())
        assert record.result is ActionResult.DOWNGRADED and record.dry_run

    async def follower(d: NodeDowngrades, clock: list[datetime]) -> None:
        record = await d.downgrade(as_node(nodes.nodes["n1"]), req())
        assert record.result is ActionResult.FAILED and "not the leader" in record.detail

    run(nodes, dry, dry_run=True)
    run(nodes, follower, may_write=lambda: False)
    assert nodes.patches == [] and nodes.gets == 0


# ----------------------------------------------------------------------------- release (softTaint)

SOFT = "desched.io/overutilized"


def soft_req() -> DowngradeRequest:
    return DowngradeRequest(
        "taint", SOFT, "", timedelta(hours=1), "over-utilised", "PreferNoSchedule", by="p/LowNodeUtilization"
    )


def release_req() -> ReleaseRequest:
    return ReleaseRequest("taint", SOFT, "PreferNoSchedule", "no longer qualifies", "p/LowNodeUtilization")


def test_a_release_retries_on_conflict_and_removes_only_desched_s_taint() -> None:
    nodes = Nodes(node_doc(taints=[MAINTENANCE]))
    calls = [0]
    other = {"key": "example.com/other", "value": "", "effect": "PreferNoSchedule"}

    def once(n: dict[str, Any]) -> bool:
        calls[0] += 1
        if calls[0] == 1:  # another writer adds a taint between desched's read and its write
            n["spec"]["taints"].append(other)
        return calls[0] == 1

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        assert (await d.downgrade(as_node(nodes.nodes["n1"]), soft_req())).result is ActionResult.DOWNGRADED
        assert nodes.nodes["n1"]["spec"]["taints"][-1] == {
            "key": SOFT,
            "value": "",
            "effect": "PreferNoSchedule",
        }
        calls[0] = 0
        nodes.meanwhile = once
        [record] = await d.release(as_node(nodes.nodes["n1"]), release_req())
        assert (record.action, record.result, record.key, record.reason) == (
            "restore",
            ActionResult.RESTORED,
            SOFT,
            "no longer qualifies",
        )
        assert d.downgraded_count() == 0
        # nothing of desched's left: nothing written
        before = len(nodes.patches)
        assert await d.release(as_node(nodes.nodes["n1"]), release_req()) == []
        assert len(nodes.patches) == before

    run(nodes, test)
    assert nodes.conflicts == 1
    node = nodes.nodes["n1"]
    assert node["spec"]["taints"] == [MAINTENANCE, other]
    assert DOWNGRADE_ANNOTATION not in (node["metadata"].get("annotations") or {})


def test_a_release_leaves_a_taint_with_the_key_desched_did_not_set() -> None:
    theirs = {"key": SOFT, "value": "", "effect": "PreferNoSchedule"}
    nodes = Nodes(node_doc(taints=[theirs]))

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        assert await d.release(as_node(nodes.nodes["n1"]), release_req()) == []

    run(nodes, test)
    assert nodes.patches == [] and nodes.nodes["n1"]["spec"]["taints"] == [theirs]


def test_a_dry_run_release_says_what_it_would_do_and_writes_nothing() -> None:
    nodes = Nodes(node_doc())

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        await d.downgrade(as_node(nodes.nodes["n1"]), soft_req())

    run(nodes, test)
    written = len(nodes.patches)

    async def dry(d: NodeDowngrades, clock: list[datetime]) -> None:
        [record] = await d.release(as_node(nodes.nodes["n1"]), release_req())
        assert record.dry_run and record.result is ActionResult.RESTORED

    run(nodes, dry, dry_run=True)
    assert len(nodes.patches) == written and nodes.nodes["n1"]["spec"]["taints"]


def test_a_soft_taint_is_not_counted_as_a_downgraded_node_but_expires_like_one() -> None:
    nodes = Nodes(node_doc())

    async def test(d: NodeDowngrades, clock: list[datetime]) -> None:
        record = await d.downgrade(as_node(nodes.nodes["n1"]), soft_req())
        assert record.result is ActionResult.DOWNGRADED
        assert d.downgraded_count() == 0  # descheduler_anomaly_nodes_downgraded: anomalies only
        assert d.next_expiry() == NOW + timedelta(hours=1)  # the timer still removes it when due
        d.observe([as_node(nodes.nodes["n1"])])
        assert d.downgraded_count() == 0 and d.next_expiry() == NOW + timedelta(hours=1)

    run(nodes, test)
