"""ClusterSnapshot.pdbs_for_pod: the PDBs of the pod's namespace whose selector matches it, in the
snapshot's order, whatever the shape of their selectors (an index by matchLabels pair finds them)."""

from __future__ import annotations

import itertools
from typing import Any

from tests import builders as b

from desched.k8s import labels as k8s_labels
from desched.k8s.objects import PodDisruptionBudget

SPECS: list[tuple[str, dict[str, Any]]] = [
    ("by-app-web", {"selector": {"matchLabels": {"app": "web"}}}),
    ("by-tier", {"selector": {"matchLabels": {"tier": "front"}}}),
    ("app-and-tier", {"selector": {"matchLabels": {"tier": "front", "app": "web"}}}),
    (
        "expr-only",
        {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]}},
    ),
    (
        "labels-and-expr",
        {
            "selector": {
                "matchLabels": {"app": "db"},
                "matchExpressions": [{"key": "tier", "operator": "Exists"}],
            }
        },
    ),
    ("empty", {"selector": {}}),
    ("by-app-web-again", {"selector": {"matchLabels": {"app": "web"}}}),
    ("nil", {"selector": None}),
    ("by-zone", {"selector": {"matchLabels": {"zone": "a"}}}),
]


def _pdbs(namespace: str) -> list[PodDisruptionBudget]:
    return [b.pdb(name, namespace=namespace, min_available=1, spec=spec) for name, spec in SPECS]


def _expected(pdbs: list[PodDisruptionBudget], namespace: str, labels: dict[str, str]) -> list[str]:
    return [
        p.metadata.name
        for p in pdbs
        if p.metadata.namespace == namespace
        and k8s_labels.compile_label_selector(p.spec.selector, none_matches=False)(labels)
    ]


def test_pdbs_for_pod_match_every_selector_shape_in_snapshot_order() -> None:
    pdbs = _pdbs("a") + _pdbs("b")[:3]
    choices = {"app": [None, "web", "db"], "tier": [None, "front", "back"], "zone": [None, "a"]}
    pods = []
    for n, values in enumerate(itertools.product(*choices.values())):
        labels = {k: v for k, v in zip(choices, values, strict=True) if v is not None}
        pods.append(b.pod(f"p{n}", namespace="a" if n % 3 else "b", labels=labels))
    snap = b.snapshot(pods=pods, pdbs=pdbs)
    seen = set()
    for pod in snap.pods:
        labels = dict(pod.metadata.labels or {})
        got = [p.metadata.name for p in snap.pdbs_for_pod(pod)]
        assert got == _expected(pdbs, pod.metadata.namespace, labels), labels
        seen.add(tuple(got))
    # the cases are not all alike: several PDBs at once, in snapshot order, and none
    assert ("by-app-web", "by-tier", "app-and-tier", "expr-only", "empty", "by-app-web-again") in seen
    assert () in seen


def test_pdbs_for_pod_in_a_namespace_without_pdbs() -> None:
    snap = b.snapshot(pods=[b.pod("x", namespace="c", labels={"app": "web"})], pdbs=_pdbs("a"))
    assert snap.pdbs_for_pod(snap.pods[0]) == []
