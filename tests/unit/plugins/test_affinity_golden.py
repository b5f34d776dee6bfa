"""The two pod-affinity plugins' decisions on generated benchmark clusters, against a recorded
fixture: which pods they evict, in which order, with which reason, and every finding they report.

The fixture (``fixtures/affinity_golden.json``) was recorded from the plugins as they were before
their rewrite into per-cycle objects over one affinity core (issue 29); any change in a decision,
a reason or the order of findings fails here. The generated cluster has required anti-affinity
but no required pod affinity, so a second variant turns part of its preferred anti-affinity terms
into required anti-affinity and required pod-affinity terms (some with a ``namespaceSelector``,
some with two terms), giving both plugins work of every kind.

Re-record (only when a change of decisions is intended, and say so in the commit):
``.venv/bin/python tests/unit/plugins/test_affinity_golden.py``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.generator import ClusterSpec, generate  # noqa: E402

from desched.api.policy import load_policy  # noqa: E402
from desched.backends.simulated_eviction import SimulatedBackend  # noqa: E402
from desched.cluster.file_source import parse_snapshot_bytes, snapshot_from_objects  # noqa: E402
from desched.framework.findings import Finding  # noqa: E402
from desched.framework.framework import Framework  # noqa: E402
from desched.plugins import default_registry  # noqa: E402

FIXTURE = Path(__file__).with_name("fixtures") / "affinity_golden.json"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
ANTI = "RemovePodsViolatingInterPodAntiAffinity"
AFFINITY = "RemovePodsViolatingPodAffinity"
SPEC = ClusterSpec(nodes=60, pods_per_node=30, seed=3)
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

Obj = dict[str, Any]


def _required(objects: list[Obj]) -> list[Obj]:
    """The cluster with part of its preferred anti-affinity made required: a third as required
    anti-affinity, a third as required pod affinity to the pod's own workload in its zone, a third
    as two pod-affinity terms (zone, and hostname through an ``In`` expression); every other one
    also reaches every namespace through ``namespaceSelector: {}``."""
    out: list[Obj] = []
    n = 0
    for obj in objects:
        affinity = obj.get("spec", {}).get("affinity") if obj.get("kind") == "Pod" else None
        preferred = (
            (affinity or {}).get("podAntiAffinity", {}).get("preferredDuringSchedulingIgnoredDuringExecution")
        )
        if not preferred:
            out.append(obj)
            continue
        obj = copy.deepcopy(obj)
        affinity = obj["spec"]["affinity"]
        term = dict(preferred[0]["podAffinityTerm"])
        if n % 2:
            term["namespaceSelector"] = {}
        kind = n % 3
        n += 1
        if kind == 0:
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            out.append(obj)
            continue
        del affinity["podAntiAffinity"]
        terms = [{**term, "topologyKey": ZONE}]
        if kind == 2:
            labels = term["labelSelector"].get("matchLabels") or {}
            key, value = next(iter(labels.items()))
            terms.append(
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": key, "operator": "In", "values": [value, "x"]}]
                    },
                    "topologyKey": HOST,
                }
            )
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": terms}
        out.append(obj)
    return out


def _policy(plugins: list[str], evictor_args: Obj, limits: Obj) -> Obj:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "affinity",
                "pluginConfig": [{"name": "DefaultEvictor", "args": evictor_args}]
                + [{"name": p, "args": {}} for p in plugins],
                "plugins": {"deschedule": {"enabled": plugins}},
            }
        ],
        **limits,
    }


#: name -> (cluster variant, plugins, DefaultEvictor args, top-level limits)
SCENARIOS: dict[str, tuple[str, list[str], Obj, Obj]] = {
    "generated-anti": ("generated", [ANTI], {}, {}),
    "required-both": ("required", [ANTI, AFFINITY], {"minReplicas": 2}, {}),
    "required-both-nodefit-limits": (
        "required",
        [ANTI, AFFINITY],
        {"nodeFit": True},
        {"maxNoOfPodsToEvictPerNode": 1, "maxNoOfPodsToEvictPerNamespace": 8, "maxNoOfPodsToEvictTotal": 25},
    ),
}


def _cluster(variant: str) -> tuple[list[Obj], str]:
    objects = list(generate(SPEC))
    if variant == "required":
        objects = _required(objects)
    digest = hashlib.sha256(msgspec.json.encode(objects)).hexdigest()
    return objects, digest


def outcome(name: str) -> dict[str, Any]:
    """What the scenario's cycle decides: the evictions and every finding, in order."""
    variant, plugins, evictor_args, limits = SCENARIOS[name]
    objects, digest = _cluster(variant)
    data = msgspec.json.encode({"apiVersion": "v1", "kind": "List", "items": objects})
    snapshot = snapshot_from_objects(parse_snapshot_bytes(data))  # a snapshot file's path
    registry = default_registry(entry_points=False)
    framework = Framework(
        load_policy(_policy(plugins, evictor_args, limits), registry), registry, clock=lambda: NOW
    )
    found: list[Finding] = []
    framework.findings.attach(found.append)
    result = framework.run_cycle(snapshot, SimulatedBackend(snapshot))
    evictions = [f"{r.plugin} {r.namespace}/{r.name} {r.node}: {r.reason}" for r in result.evictions]
    findings = [f"{f.plugin} {f.namespace}/{f.name} {f.node} {f.verdict.value}: {f.reason}" for f in found]
    return {
        "cluster_sha256": digest,
        "evicted_by_plugin": {p: sum(1 for r in result.evictions if r.plugin == p) for p in plugins},
        "evictions": evictions,
        "findings": len(findings),
        "findings_sha256": hashlib.sha256("\n".join(findings).encode()).hexdigest(),
    }


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_affinity_plugins_decide_identically_on_generated_cluster(
    name: str, recorded: dict[str, Any]
) -> None:
    want = recorded[name]
    got = outcome(name)
    assert got["cluster_sha256"] == want["cluster_sha256"], (
        "the generated cluster changed (benchmarks/generator/): the fixture no longer describes it"
    )
    assert got["evictions"] == want["evictions"]
    assert got["evicted_by_plugin"] == want["evicted_by_plugin"]
    assert (got["findings"], got["findings_sha256"]) == (want["findings"], want["findings_sha256"])


def test_golden_scenarios_give_both_plugins_work(recorded: dict[str, Any]) -> None:
    """The fixture is worth comparing against: each plugin evicts, and the limits stop them."""
    assert recorded["generated-anti"]["evicted_by_plugin"][ANTI] > 0
    both = recorded["required-both"]["evicted_by_plugin"]
    assert both[ANTI] > 0 and both[AFFINITY] > 0
    limited = recorded["required-both-nodefit-limits"]["evicted_by_plugin"]
    assert limited[AFFINITY] > 0 and limited[ANTI] > 0
    assert sum(limited.values()) == 25  # the total limit stops the second plugin


if __name__ == "__main__":
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps({name: outcome(name) for name in sorted(SCENARIOS)}, indent=1) + "\n")
    print(f"wrote {FIXTURE}")
