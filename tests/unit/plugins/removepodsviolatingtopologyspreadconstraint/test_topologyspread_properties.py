"""Property tests of RemovePodsViolatingTopologySpreadConstraint on random small clusters.

An independent oracle counts every spread constraint's domains the way kube-scheduler does, before
and after the evictions of one cycle, and checks that:

- no constraint ends more skewed than ``max(its skew before, its maxSkew)``: evictions never create
  a violation nor deepen one, even when constraints of a namespace overlap;
- with a single constraint per namespace, no constraint ends more skewed than before at all;
- nothing is evicted when every balanced constraint is already within its maxSkew;
- per-node, per-namespace and total limits hold;
- every evicted pod was evictable, in an allowed namespace and selected by ``labelSelector``, and
  (with ``topologyBalanceNodeFit``) fits another node;
- the decision does not depend on the order the source listed pods in.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import builders
from tests.unit.plugins.harness import run

from desched.cluster.snapshot import ClusterSnapshot
from desched.k8s.objects import Node, Pod
from desched.scheduling import nodefit

PLUGIN = "RemovePodsViolatingTopologySpreadConstraint"
ZONE = "zone"
HOST = "kubernetes.io/hostname"


# ----------------------------------------------------------------------------- the oracle


def _selected(tsc: dict[str, Any], declaring: dict[str, Any], labels: dict[str, str]) -> bool:
    selector = tsc.get("labelSelector")
    if selector is None:
        return False
    wanted = dict(selector.get("matchLabels") or {})
    own = declaring["metadata"].get("labels") or {}
    for key in tsc.get("matchLabelKeys") or ():
        if key in own:
            wanted[key] = own[key]
    return all(labels.get(k) == v for k, v in wanted.items())


def _eligible(tsc: dict[str, Any], declaring: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = node["metadata"]["labels"]
    if tsc["topologyKey"] not in labels:
        return False
    spec = declaring["spec"]
    if tsc.get("nodeAffinityPolicy", "Honor") == "Honor":
        for k, v in (spec.get("nodeSelector") or {}).items():
            if labels.get(k) != v:
                return False
    if tsc.get("nodeTaintsPolicy", "Ignore") == "Honor":
        tolerated = {t["key"] for t in spec.get("tolerations") or ()}
        for taint in node["spec"].get("taints") or ():
            if taint["effect"] in ("NoSchedule", "NoExecute") and taint["key"] not in tolerated:
                return False
    return True


def _counted(pod: dict[str, Any]) -> bool:
    return pod["metadata"].get("deletionTimestamp") is None and pod["status"]["phase"] not in (
        "Succeeded",
        "Failed",
    )


def skews(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], gone: set[tuple[str, str]]
) -> dict[tuple[str, str, int], tuple[int, int, str]]:
    """(namespace, declaring pod, index) -> (skew, maxSkew, whenUnsatisfiable) of the constraints
    of live pods, without the pods in ``gone``."""
    out = {}
    for declaring in pods:
        if not _counted(declaring):
            continue  # a pod on its way out: its constraints bind nothing any more
        ns = declaring["metadata"]["namespace"]
        for idx, tsc in enumerate(declaring["spec"].get("topologySpreadConstraints") or ()):
            node_domain = {
                n["metadata"]["name"]: n["metadata"]["labels"][tsc["topologyKey"]]
                for n in nodes
                if _eligible(tsc, declaring, n)
            }
            sizes = dict.fromkeys(node_domain.values(), 0)
            for p in pods:
                meta = p["metadata"]
                if (
                    meta["namespace"] != ns
                    or (ns, meta["name"]) in gone
                    or not _counted(p)
                    or p["spec"]["nodeName"] not in node_domain
                    or not _selected(tsc, declaring, meta.get("labels") or {})
                ):
                    continue
                sizes[node_domain[p["spec"]["nodeName"]]] += 1
            values = list(sizes.values())
            min_domains = tsc.get("minDomains", 1) if tsc["whenUnsatisfiable"] == "DoNotSchedule" else 1
            if len(values) < min_domains:
                values.append(0)
            skew = max(values) - min(values) if values else 0
            out[(ns, declaring["metadata"]["name"], idx)] = (skew, tsc["maxSkew"], tsc["whenUnsatisfiable"])
    return out


# ----------------------------------------------------------------------------- random clusters


@dataclass
class Case:
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    args: dict[str, Any]
    limits: dict[str, int]
    single: bool


def _constraint(draw: st.DrawFn, single: bool) -> dict[str, Any]:
    when = draw(st.sampled_from(["DoNotSchedule", "ScheduleAnyway"]))
    tsc: dict[str, Any] = {
        "maxSkew": draw(st.integers(1, 2)),
        "topologyKey": draw(st.sampled_from([ZONE, HOST])),
        "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": draw(st.sampled_from(["x", "x", "y"]))}},
    }
    if when == "DoNotSchedule" and draw(st.booleans()):
        tsc["minDomains"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        tsc["nodeTaintsPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
    if not single:
        if draw(st.booleans()):
            tsc["nodeAffinityPolicy"] = draw(st.sampled_from(["Honor", "Ignore"]))
        if draw(st.integers(0, 4)) == 0:
            tsc["matchLabelKeys"] = ["rev"]
    return tsc


@st.composite
def cases(draw: st.DrawFn) -> Case:
    single = draw(st.booleans())
    n_nodes = draw(st.integers(2, 6))
    zones = draw(st.integers(1, 3))
    nodes = []
    for i in range(n_nodes):
        labels = {HOST: f"n{i}", "pool": draw(st.sampled_from(["p", "q"]))}
        if draw(st.integers(0, 5)):
            labels[ZONE] = f"z{draw(st.integers(0, zones - 1))}"
        taints = (
            [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
            if draw(st.integers(0, 4)) == 0
            else []
        )
        cpu = draw(st.sampled_from(["1", "4"]))
        nodes.append(
            builders.node_doc(
                f"n{i}", hostname_label=False, labels=labels, taints=taints, cpu=cpu, memory="8Gi"
            )
        )
    namespaces = ["a", "b"]
    shared = {ns: _constraint(draw, single) for ns in namespaces}
    pods = []
    crowded = draw(st.integers(0, n_nodes - 1))
    for i in range(draw(st.integers(0, 20))):
        ns = draw(st.sampled_from(["a", "a", "b"]))
        if single:
            tscs = [shared[ns]] if draw(st.integers(0, 3)) else []
        else:
            tscs = [_constraint(draw, single) for _ in range(draw(st.integers(0, 2)))]
        labels = {
            "app": draw(st.sampled_from(["x", "x", "x", "y"])),
            "rev": draw(st.sampled_from(["1", "2"])),
        }
        owned = bool(draw(st.integers(0, 5)))
        deleted = "2025-12-31T00:00:00Z" if draw(st.integers(0, 9)) == 0 else None
        node = f"n{draw(st.sampled_from([crowded, *range(n_nodes)]))}"
        cpu = draw(st.sampled_from(["100m", "600m"]))
        priority = draw(st.integers(0, 3)) if draw(st.booleans()) else None
        node_selector = None
        if not single and draw(st.integers(0, 3)) == 0:
            node_selector = {"pool": draw(st.sampled_from(["p", "q"]))}
        tolerations = None
        if not single and draw(st.integers(0, 3)) == 0:
            tolerations = [builders.toleration("dedicated", effect=None)]
        phase = draw(st.sampled_from(["Running"] * 6 + ["Pending", "Succeeded"]))
        pods.append(
            builders.pod_doc(
                f"p{i}",
                namespace=ns,
                uid=f"u{i}",
                labels=labels,
                owner=("ReplicaSet", "rs") if owned else None,
                deleted=deleted,
                node=node,
                cpu=cpu,
                priority=priority,
                node_selector=node_selector,
                tolerations=tolerations,
                phase=phase,
                spec={"topologySpreadConstraints": tscs},
            )
        )
    args: dict[str, Any] = {
        "constraints": draw(
            st.sampled_from([["DoNotSchedule"], ["ScheduleAnyway"], ["DoNotSchedule", "ScheduleAnyway"]])
        ),
        "topologyBalanceNodeFit": draw(st.booleans()),
    }
    if draw(st.integers(0, 3)) == 0:
        args["namespaces"] = {"exclude": ["b"]}
    if draw(st.integers(0, 3)) == 0:
        args["labelSelector"] = {"matchLabels": {"rev": "1"}}
    limits = {}
    for field in ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal"):
        if draw(st.integers(0, 3)) == 0:
            limits[field] = draw(st.integers(0, 3))
    return Case(nodes, pods, args, limits, single)


# ----------------------------------------------------------------------------- running


def decode(case: Case, pods: list[dict[str, Any]] | None = None) -> ClusterSnapshot:
    return ClusterSnapshot(
        nodes=[msgspec.convert(n, Node, strict=False) for n in case.nodes],
        pods=[msgspec.convert(p, Pod, strict=False) for p in (case.pods if pods is None else pods)],
    )


def evictions(case: Case, pods: list[dict[str, Any]] | None = None) -> list[tuple[str, str]]:
    """(namespace, name) of each pod one cycle on the case evicts (DefaultEvictor on)."""
    result = run(PLUGIN, case.args, snapshot=decode(case, pods), evictor=True, **case.limits)
    return [(r.namespace, r.name) for r in result.evictions]


# ----------------------------------------------------------------------------- properties


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_evictions_never_make_spreading_worse(case: Case) -> None:
    evicted = evictions(case)
    assert len(evicted) == len(set(evicted))
    gone = set(evicted)
    before = skews(case.nodes, case.pods, set())
    after = skews(case.nodes, case.pods, gone)
    for key, (skew, max_skew, _) in before.items():
        assert after[key][0] <= max(skew, max_skew), (key, skew, after[key])
        if case.single:
            assert after[key][0] <= skew, (key, skew, after[key])

    kinds = set(case.args["constraints"])
    excluded = set((case.args.get("namespaces") or {}).get("exclude") or ())
    if all(s <= m for (ns, _, _), (s, m, when) in before.items() if when in kinds and ns not in excluded):
        assert evicted == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_limits_filters_and_node_fit_hold(case: Case) -> None:
    evicted = evictions(case)
    by_name = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in case.pods}
    limits = case.limits
    if "maxNoOfPodsToEvictTotal" in limits:
        assert len(evicted) <= limits["maxNoOfPodsToEvictTotal"]
    per_node = Counter(by_name[k]["spec"]["nodeName"] for k in evicted)
    per_ns = Counter(ns for ns, _ in evicted)
    if "maxNoOfPodsToEvictPerNode" in limits:
        assert max(per_node.values(), default=0) <= limits["maxNoOfPodsToEvictPerNode"]
    if "maxNoOfPodsToEvictPerNamespace" in limits:
        assert max(per_ns.values(), default=0) <= limits["maxNoOfPodsToEvictPerNamespace"]

    snapshot = decode(case)
    ready = list(snapshot.nodes)
    excluded = set((case.args.get("namespaces") or {}).get("exclude") or ())
    selector = (case.args.get("labelSelector") or {}).get("matchLabels") or {}
    for key in evicted:
        raw = by_name[key]
        meta = raw["metadata"]
        assert key[0] not in excluded
        assert meta.get("ownerReferences") and "deletionTimestamp" not in meta  # DefaultEvictor's filter
        assert all(meta["labels"].get(k) == v for k, v in selector.items())
        if case.args["topologyBalanceNodeFit"]:
            pod = snapshot.pod(*key)
            assert pod is not None and nodefit.pod_fits_any_other_node(snapshot, pod, ready)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.randoms(use_true_random=False))
def test_listing_order_does_not_matter(case: Case, rnd: Any) -> None:
    shuffled = list(case.pods)
    rnd.shuffle(shuffled)
    assert evictions(case) == evictions(case, shuffled)
