"""RemovePodsViolatingPodAffinity: args validation through the policy loader, kube-scheduler's
required pod-affinity semantics (domains, all terms, the first pod of a group), the pods that count
as peers, the safety rule (another node must take the pod), limits, findings, and `desched
simulate` as users run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from tests import builders
from tests.unit.plugins.harness import Bound, evicted

from desched.framework.findings import Finding, Verdict
from desched.k8s import affinity as k8s_affinity
from desched.k8s.objects import Node, Pod

PLUGIN = "RemovePodsViolatingPodAffinity"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ROOT = Path(__file__).resolve().parents[4]


class KeepProtected:
    """A Filter plugin: pods labelled protected=true are never evicted."""

    name: ClassVar[str] = "KeepProtected"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    def filter(self, p: Pod) -> bool:
        return p.labels.get("protected") != "true"


#: The plugin with KeepProtected as the only Filter (DefaultEvictor off: only the plugin's
#: decisions are under test).
AFF = Bound(PLUGIN, {"extra": [KeepProtected]})


def node(name: str, zone: str | None = None, **kw: Any) -> Node:
    return builders.node(name, zone=zone, **kw)


def term(match_labels: dict[str, str] | None, topology: str = ZONE, **extra: Any) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": topology, **extra}
    if match_labels is not None:
        t["labelSelector"] = {"matchLabels": match_labels}
    return t


def pod(
    name: str,
    node_name: str,
    *,
    labels: dict[str, str] | None = None,
    affine: list[dict[str, Any]] | None = None,
    ns: str = "default",
    priority: int | None = None,
    phase: str = "Running",
    cpu: str | None = None,
) -> Pod:
    affinity = None
    if affine is not None:
        affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": affine}}
    return builders.pod(
        name,
        namespace=ns,
        node=node_name,
        uid=f"{ns}/{name}",
        labels=labels or {},
        owner=("ReplicaSet", "rs"),
        controller=None,
        affinity=affinity,
        priority=priority,
        phase=phase,
        cpu=cpu,
    )


NEAR_DB = [term({"app": "db"})]
DB = {"app": "db"}


# ----------------------------------------------------------------------------- args


def test_namespaces_include_and_exclude_are_exclusive() -> None:
    msg = AFF.load_error({"namespaces": {"include": ["a"], "exclude": ["b"]}})
    assert msg == (
        "profiles[0].pluginConfig[0].args.namespaces.exclude: cannot be set with include "
        "(got include=['a'], exclude=['b'])"
    )


def test_invalid_label_selector_arg() -> None:
    msg = AFF.load_error({"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}})
    assert msg.startswith("profiles[0].pluginConfig[0].args.labelSelector")


def test_unknown_field_is_rejected() -> None:
    assert AFF.load_error({"nodeFit": True}) == "profiles[0].pluginConfig[0].args.nodeFit: unknown field"


# ----------------------------------------------------------------------------- the k8s rule


@pytest.mark.parametrize(
    ("keys", "labels", "counts", "self_affine", "expected"),
    [
        ([ZONE], {ZONE: "a"}, {(ZONE, "a"): 1}, False, True),
        ([ZONE], {ZONE: "a"}, {(ZONE, "b"): 1}, False, False),
        ([ZONE], {}, {(ZONE, "a"): 1}, True, False),  # the key must be on the node
        ([ZONE], {ZONE: "a"}, {}, True, True),  # first pod of a self-affine group
        ([ZONE], {ZONE: "a"}, {(ZONE, "b"): 0}, True, True),  # zero entries are no pods
        ([ZONE], {ZONE: "a"}, {}, False, False),
        ([ZONE], {ZONE: "a"}, {(ZONE, "b"): 1}, True, False),  # peers elsewhere: go there
        ([ZONE, HOST], {ZONE: "a", HOST: "n1"}, {(ZONE, "a"): 1, (HOST, "n2"): 1}, False, False),
        ([ZONE, HOST], {ZONE: "a", HOST: "n1"}, {(ZONE, "a"): 1, (HOST, "n1"): 1}, False, True),
    ],
)
def test_pod_affinity_satisfied(
    keys: list[str],
    labels: dict[str, str],
    counts: dict[tuple[str, str], int],
    self_affine: bool,
    expected: bool,
) -> None:
    assert k8s_affinity.pod_affinity_satisfied(keys, labels, counts, self_affine) is expected


def test_required_pod_affinity_terms() -> None:
    assert k8s_affinity.required_pod_affinity_terms(pod("x", "n1")) == []
    terms = k8s_affinity.required_pod_affinity_terms(pod("x", "n1", affine=NEAR_DB))
    assert [t.topology_key for t in terms] == [ZONE]


# ----------------------------------------------------------------------------- topology domains


def test_peer_in_the_same_zone_on_another_node_satisfies() -> None:
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b")]
    assert AFF.evicted(nodes, [pod("web", "n1", affine=NEAR_DB), pod("db", "n2", labels=DB)]) == []


def test_peer_gone_from_the_zone_evicts_when_another_zone_has_one() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    result = AFF.run(nodes, [pod("web", "n1", affine=NEAR_DB), pod("db", "n2", labels=DB)])
    assert evicted(result) == ["web"]
    assert result.evictions[0].reason == (
        "pod violates its required pod affinity: no matching pod in its domain "
        "(topology.kubernetes.io/zone=a); another node satisfies it and fits the pod"
    )


def test_hostname_affinity_after_the_peer_was_deleted() -> None:
    near_cache = [term({"app": "cache"}, HOST)]
    nodes = [node("n1", "a"), node("n2", "a")]
    both = [pod("web", "n1", affine=near_cache), pod("cache-1", "n1", labels={"app": "cache"})]
    other = pod("cache-2", "n2", labels={"app": "cache"})
    assert AFF.evicted(nodes, [*both, other]) == []
    assert AFF.evicted(nodes, [both[0], other]) == ["web"]


def test_no_peer_anywhere_leaves_the_pod() -> None:
    # its replacement could go nowhere: evicting it would only make it Pending
    nodes = [node("n1", "a"), node("n2", "b")]
    assert AFF.evicted(nodes, [pod("web", "n1", affine=NEAR_DB)]) == []


def test_node_without_the_topology_label_violates() -> None:
    nodes = [node("n1"), node("n2", "a")]
    pods = [pod("web", "n1", affine=NEAR_DB), pod("db", "n1", labels=DB), pod("db2", "n2", labels=DB)]
    assert AFF.evicted(nodes, pods) == ["web"]


def test_the_other_node_must_carry_every_key_and_have_peers_in_each_domain() -> None:
    terms = [term({"app": "db"}), term({"app": "db"}, HOST)]
    nodes = [node("n1", "a"), node("n2", "b"), node("n3", "b")]
    pods = [pod("web", "n1", affine=terms), pod("db", "n2", labels=DB)]
    assert AFF.evicted(nodes, pods) == ["web"]  # n2: zone b and host n2 both hold db
    pods = [pod("web", "n1", affine=terms), pod("db", "n2", labels=DB), pod("db2", "n1", labels=DB)]
    # on n1 (zone a, host n1) db2 satisfies both terms
    assert AFF.evicted(nodes, pods) == []


# ----------------------------------------------------------------------------- who is a peer


def test_a_peer_must_match_all_terms() -> None:
    terms = [term({"app": "db"}), term({"tier": "gold"})]
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("web", "n1", affine=terms),
        pod("db", "n1", labels=DB),
        pod("gold", "n1", labels={"tier": "gold"}),
        pod("db-gold", "n2", labels={"app": "db", "tier": "gold"}),
    ]
    # neither db nor gold alone is a peer: only db-gold, in zone b
    assert AFF.evicted(nodes, pods) == ["web"]


def test_finished_pods_are_no_peers() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("web", "n1", affine=NEAR_DB),
        pod("db-old", "n1", labels=DB, phase="Succeeded"),
        pod("db", "n2", labels=DB),
    ]
    assert AFF.evicted(nodes, pods) == ["web"]


def test_self_affine_group_alone_stays() -> None:
    group = [term({"app": "web"})]
    nodes = [node("n1", "a"), node("n2", "b")]
    assert AFF.evicted(nodes, [pod("web-0", "n1", labels={"app": "web"}, affine=group)]) == []


def test_two_self_affine_pods_apart_one_goes_to_the_other() -> None:
    group = [term({"app": "web"})]
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("web-0", "n1", labels={"app": "web"}, affine=group, priority=10),
        pod("web-1", "n2", labels={"app": "web"}, affine=group, priority=1),
    ]
    # n1 first: web-0 goes (web-1 is a peer in zone b); web-1 is then the first of its group
    assert AFF.evicted(nodes, pods) == ["web-0"]


def test_peers_count_on_nodes_not_given_to_the_plugin() -> None:
    # kube-scheduler sees every node's pods; the plugin's nodes only bound whom it evicts
    n1, n2, n3 = node("n1", "a", labels={"pool": "x"}), node("n2", "a"), node("n3", "b", labels={"pool": "x"})
    pods = [pod("web", "n1", affine=NEAR_DB), pod("db", "n2", labels=DB), pod("db2", "n3", labels=DB)]
    assert AFF.evicted([n1, n2, n3], pods, nodeSelector="pool=x") == []


def test_args_narrow_the_candidates_not_the_peers() -> None:
    cross_ns = [term({"app": "db"}, namespaces=["data"])]
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("web", "n1", affine=cross_ns, ns="shop"),
        pod("db", "n1", labels=DB, ns="data"),
        pod("db2", "n2", labels=DB, ns="data"),
    ]
    assert AFF.evicted(nodes, pods, {"namespaces": {"include": ["shop"]}}) == []
    assert AFF.evicted(nodes, pods, {"labelSelector": {"matchLabels": {"app": "web"}}}) == []
    moved = [pods[0], pods[2]]
    assert AFF.evicted(nodes, moved, {"namespaces": {"include": ["shop"]}}) == ["web"]
    assert AFF.evicted(nodes, moved, {"namespaces": {"exclude": ["shop"]}}) == []
    assert AFF.evicted(nodes, moved, {"labelSelector": {"matchLabels": {"app": "web"}}}) == []


def test_term_defaults_to_the_pods_own_namespace() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("web", "n1", affine=NEAR_DB, ns="shop"),
        pod("db", "n1", labels=DB),
        pod("db2", "n2", labels=DB, ns="shop"),
    ]
    assert AFF.evicted(nodes, pods) == ["web"]


def test_namespace_selector_reads_namespace_labels() -> None:
    by_team = [term({"app": "db"}, namespaceSelector={"matchLabels": {"team": "data"}})]
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("web", "n1", affine=by_team, ns="shop"),
        pod("db", "n1", labels=DB, ns="db-a"),
        pod("db2", "n2", labels=DB, ns="db-b"),
    ]
    data_a = [
        builders.namespace("db-a", labels={"team": "data"}),
        builders.namespace("db-b", labels={"team": "data"}),
    ]
    assert AFF.evicted(nodes, pods, namespaces=data_a) == []
    data_b = [
        builders.namespace("db-a", labels={"team": "web"}),
        builders.namespace("db-b", labels={"team": "data"}),
    ]
    assert AFF.evicted(nodes, pods, namespaces=data_b) == ["web"]


def test_term_without_label_selector_matches_nothing() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    assert AFF.evicted(nodes, [pod("web", "n1", affine=[term(None)]), pod("db", "n2", labels=DB)]) == []


def test_invalid_term_selector_leaves_the_pod() -> None:
    bad = [{"topologyKey": ZONE, "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}]
    nodes = [node("n1", "a"), node("n2", "b")]
    assert AFF.evicted(nodes, [pod("web", "n1", affine=bad), pod("db", "n2", labels=DB)]) == []


# ----------------------------------------------------------------------------- node fit and the evictor


def test_other_node_must_fit_the_pod() -> None:
    nodes = [node("n1", "a"), node("n2", "b", taints=[builders.taint("dedicated", "db")])]
    pods = [pod("web", "n1", affine=NEAR_DB), pod("db", "n2", labels=DB)]
    assert AFF.evicted(nodes, pods) == []
    nodes = [node("n1", "a"), node("n2", "b", cpu="1")]
    pods = [pod("web", "n1", affine=NEAR_DB, cpu="2"), pod("db", "n2", labels=DB)]
    assert AFF.evicted(nodes, pods) == []
    nodes = [node("n1", "a"), node("n2", "b", unschedulable=True), node("n3", "b")]
    assert AFF.evicted(nodes, pods) == ["web"]  # n3 shares zone b with db and fits


def test_the_evictor_filters_decide() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [pod("web", "n1", labels={"protected": "true"}, affine=NEAR_DB), pod("db", "n2", labels=DB)]
    assert AFF.evicted(nodes, pods) == []


def test_node_limit_moves_on_and_total_limit_stops() -> None:
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b")]
    pods = [pod(f"web-{n}-{i}", n, affine=NEAR_DB) for n in ("n1", "n2") for i in range(2)]
    pods.append(pod("db", "n3", labels=DB))
    assert AFF.evicted(nodes, pods, maxNoOfPodsToEvictPerNode=1) == ["web-n1-0", "web-n2-0"]
    assert AFF.evicted(nodes, pods, maxNoOfPodsToEvictTotal=3) == ["web-n1-0", "web-n1-1", "web-n2-0"]


def test_low_priority_first_and_evicted_peers_stop_counting() -> None:
    # web depends on db-x (same node); db-x itself depends on cache, which moved to zone b
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("db-x", "n1", labels=DB, affine=[term({"app": "cache"})], priority=1),
        pod("web", "n1", affine=NEAR_DB, priority=5),
        pod("cache", "n2", labels={"app": "cache"}),
        pod("db-y", "n2", labels=DB),
    ]
    assert AFF.evicted(nodes, pods) == ["db-x", "web"]


# ----------------------------------------------------------------------------- findings


def left_reasons(
    nodes: list[Node], pods: list[Pod], args: dict[str, Any] | None = None
) -> dict[str, list[str]]:
    found: list[Finding] = []
    AFF.run(nodes, pods, args, found=found)
    out: dict[str, list[str]] = {}
    for f in found:
        if f.verdict is Verdict.LEFT:
            assert f.plugin == PLUGIN
            out.setdefault(f.name, []).append(f.reason)
    return out


def test_findings_say_why_a_pod_stays() -> None:
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [
        pod("ok", "n1", affine=NEAR_DB),
        pod("db", "n1", labels=DB),
        pod("lonely", "n2", affine=[term({"app": "gone"})]),
        pod("other", "n2", affine=NEAR_DB, ns="elsewhere"),
    ]
    assert left_reasons(nodes, pods, {"namespaces": {"exclude": ["elsewhere"]}}) == {
        "ok": [f"its required pod affinity holds on its node ({ZONE}=a)"],
        "lonely": [
            "its required pod affinity no longer holds, but no other node both satisfies it and fits the pod"
        ],
        "other": ["not selected by the plugin's namespaces/labelSelector"],
    }


# ----------------------------------------------------------------------------- the command


def test_desched_simulate_evicts_the_pod_whose_peer_left(tmp_path: Path) -> None:
    nodes = [builders.node_doc("n1", zone="a"), builders.node_doc("n2", zone="b")]
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": NEAR_DB}}
    pods = [
        builders.pod_doc("web", node="n1", owner=("ReplicaSet", "web"), affinity=affinity),
        builders.pod_doc("db", node="n2", owner=("ReplicaSet", "db"), labels=DB),
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(builders.list_doc(nodes, pods)))
    policy = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "affinity",
                "pluginConfig": [{"name": "DefaultEvictor", "args": {"nodeFit": True}}, {"name": PLUGIN}],
                "plugins": {"deschedule": {"enabled": [PLUGIN]}},
            }
        ],
    }
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "desched.cli", "simulate", str(tmp_path / "cluster.yaml")),
            *("--policy", str(tmp_path / "policy.yaml"), "--now", "2026-01-01T00:00:00Z", "-o", "json"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [(e["name"], e["plugin"], e["reason"]) for e in doc["evictions"]] == [
        (
            "web",
            PLUGIN,
            "pod violates its required pod affinity: no matching pod in its domain "
            "(topology.kubernetes.io/zone=a); another node satisfies it and fits the pod",
        )
    ]
