"""``desched simulate --webhook`` asks the policy's ``evictionPolicy.webhook`` (a loopback server
here, denying the ``shop`` namespace's pods) with ``dryRun: true``, and its denials are the
report's skips; without the flag simulate contacts nothing and predicts the evictions regardless."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "cluster.yaml"
POLICY = ROOT / "examples" / "policy.yaml"
NOW = "2026-11-21T12:00:00Z"


class Reviews:
    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []


@pytest.fixture
def webhook() -> Iterator[tuple[str, Reviews]]:
    reviews = Reviews()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["request"]
            reviews.asked.append(req)
            denied = req["pod"]["namespace"] == "shop"
            body = json.dumps(
                {
                    "apiVersion": "desched.io/v1alpha1",
                    "kind": "EvictionReview",
                    "response": {"uid": req["uid"], "allowed": not denied, "reason": "shop is frozen"},
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/review", reviews
    finally:
        server.shutdown()
        server.server_close()


def simulate(policy: Path, *extra: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(run(policy, "-o", "json", *extra))
    return doc


def run(policy: Path, *extra: str) -> str:
    args = ["simulate", str(EXAMPLE), "--policy", str(policy), "--now", NOW, *extra]
    proc = subprocess.run(
        [sys.executable, "-m", "desched.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("placement", ["--no-placement", "--placement"])
def test_simulate_webhook_lists_the_denials_as_skips(
    webhook: tuple[str, Reviews], tmp_path: Path, placement: str
) -> None:
    url, reviews = webhook
    doc = yaml.safe_load(POLICY.read_text())
    doc["evictionPolicy"] = {"webhook": {"url": url, "insecure": True}}
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(doc))

    offline = simulate(policy, placement)
    assert reviews.asked == []  # off by default: nothing contacted
    assert any(e["namespace"] == "shop" for e in offline["evictions"])
    assert not offline.get("evictionsSkipped")

    asked = simulate(policy, placement, "--webhook")
    assert reviews.asked and all(r["dryRun"] is True for r in reviews.asked)
    skipped = asked["evictionsSkipped"]
    denied = sorted(
        (r["pod"]["namespace"], r["pod"]["name"]) for r in reviews.asked if r["pod"]["namespace"] == "shop"
    )
    assert denied and sorted((s["namespace"], s["name"]) for s in skipped) == denied
    assert all(s["reason"] == "webhook_denied" and "shop is frozen" in s["detail"] for s in skipped)
    assert not [e for e in asked["evictions"] if e["namespace"] == "shop"]
    # the pods it allows are evicted as without it, and it was asked about each of them
    allowed = sorted((e["namespace"], e["name"]) for e in asked["evictions"])
    assert allowed == sorted(
        (e["namespace"], e["name"]) for e in offline["evictions"] if e["namespace"] != "shop"
    )
    assert (
        sorted(
            (r["pod"]["namespace"], r["pod"]["name"])
            for r in reviews.asked
            if r["pod"]["namespace"] != "shop"
        )
        == allowed
    )
    # the table's summary counts them
    table = run(policy, placement, "--webhook")
    assert f"skipped by evictionPolicy {len(skipped)} (webhook_denied {len(skipped)})" in table, table


@pytest.mark.parametrize("failure_policy", ["Ignore", "Fail"])
def test_simulate_webhook_down_follows_the_failure_policy(tmp_path: Path, failure_policy: str) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc = yaml.safe_load(POLICY.read_text())
    hook = {"url": f"http://127.0.0.1:{port}/review", "insecure": True, "failurePolicy": failure_policy}
    doc["evictionPolicy"] = {"webhook": hook}
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(doc))
    offline = simulate(policy, "--no-placement")
    asked = simulate(policy, "--no-placement", "--webhook")
    if failure_policy == "Ignore":  # no usable answer: allowed, as without the flag
        assert asked["evictions"] == offline["evictions"] and not asked.get("evictionsSkipped")
    else:  # every eviction it would have made is skipped as webhook_error
        assert asked["evictions"] == []
        skipped = asked["evictionsSkipped"]
        assert {s["reason"] for s in skipped} == {"webhook_error"}
        assert {(s["namespace"], s["name"]) for s in skipped} >= {
            (e["namespace"], e["name"]) for e in offline["evictions"]
        }
