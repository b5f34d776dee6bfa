"""RemoveDuplicates: spread the pods of one owner over the nodes they can run on.

After a node outage the replicas of a ReplicaSet (ReplicationController, StatefulSet, Job, ...)
that were rescheduled elsewhere can pile up on the nodes that stayed up. This plugin evicts such
duplicates so that kube-scheduler spreads them again (upstream ``removeduplicates.go``):

1. **Duplicates.** On each node, the pods the profile's Filter and PreEvictionFilter let go (and
   that ``namespaces`` selects) and that have owner references, none of a kind in
   ``excludeOwnerKinds``, are grouped by their owners and container images: two pods are
   duplicates when they have the same set of ``namespace/ownerKind/ownerName/image`` keys (every
   owner reference with every container image). The first pod of a group stays; the others are
   its duplicates. Finished pods hold no place and are not looked at.
2. **Even spread.** For each owner (namespace, kind, name and the pod's sorted images) the plugin
   counts its pods on all nodes, and finds the nodes its duplicates could run on: nodes whose
   NoSchedule/NoExecute taints they tolerate and that match their node selector and required node
   affinity (only counted when more than one node fits). With fewer than two such nodes nothing
   is evicted. Otherwise a node keeps at most ``ceil(pods / feasible nodes)`` pods of the owner
   and the rest of its duplicates are evicted: upstream's upper-bound rule, which never evicts
   below an even spread.
3. **Order and limits.** Which duplicates go first follows the profile's Sort plugins, then the
   youngest pod first, then by namespace and name (upstream takes them in listing order).
   Reaching the per-node limit moves on to the next node; reaching the total limit ends the plugin.

A pod with several owner references counts for each owner; upstream can then evict it twice,
desched evicts it once.

With ``evictionPolicy.predictive``, a duplicate whose replacement the placement model puts on a
node that already holds as many pods of its owner as a node keeps (``ceil(pods / feasible
nodes)``, counting the cycle's earlier replacements) is left where it is: the move would only pile
it up elsewhere (skip reason ``predicted_duplicate``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import msgspec

from desched.framework import Handle, NoGain, PluginFindings, PredictedMove, Status
from desched.k8s import affinity as k8s_affinity
from desched.k8s import taints as k8s_taints
from desched.k8s.objects import Node, Pod
from desched.k8s.pods import is_terminating, pod_creation_time
from desched.plugins._shared import pod_selector
from desched.plugins.removeduplicates.args import RemoveDuplicatesArgs

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder

OwnerKey = tuple[str, str, str, str]
"""(namespace, owner kind, owner name, the pod's sorted images joined by '#')."""

_FINISHED = ("Succeeded", "Failed")  # finished pods hold no place on their node
_SCHEDULING_EFFECTS = frozenset((k8s_taints.TAINT_NO_SCHEDULE, k8s_taints.TAINT_NO_EXECUTE))


@dataclass(slots=True)
class _Candidate:
    pod: Pod
    keys: tuple[str, ...]
    owners: tuple[OwnerKey, ...]


@dataclass(slots=True)
class _Duplicates:
    """One owner's pods: how many in all, and its duplicates per node (in keep-first order)."""

    occurrences: int = 0
    by_node: dict[str, list[Pod]] = field(default_factory=dict)
    #: The pod each node keeps first (only gathered while findings are reported).
    first: dict[str, Pod] = field(default_factory=dict)


def _could_run_on(pod: Pod, node: Node) -> bool:
    """Taints (NoSchedule, NoExecute), node selector and required node affinity allow it."""
    taint = k8s_taints.untolerated_taint(node.spec.taints, pod.spec.tolerations, _SCHEDULING_EFFECTS)
    return taint is None and k8s_affinity.pod_matches_node_selector(pod, node)


def youngest_first_key(pod: Pod) -> tuple[float, str, str]:
    return (-pod_creation_time(pod).timestamp(), pod.metadata.namespace, pod.metadata.name)


class RemoveDuplicates:
    name: ClassVar[str] = "RemoveDuplicates"
    Args: ClassVar[type[RemoveDuplicatesArgs]] = RemoveDuplicatesArgs

    def __init__(self, args: RemoveDuplicatesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        ns = args.namespaces
        self._selected = pod_selector(ns, None) if ns is not None and (ns.include or ns.exclude) else None
        self._excluded_kinds = frozenset(args.exclude_owner_kinds or ())
        #: this cycle's pods per node each owner keeps (for :meth:`judge_move`)
        self._keep: dict[OwnerKey, int] = {}

    # ------------------------------------------------------------------ finding duplicates

    def _candidate(self, pod: Pod) -> _Candidate | None:
        """The pod's duplicate keys, if it can be a candidate at all (checks that cost nothing)."""
        refs = pod.metadata.owner_references
        containers = pod.spec.containers
        if not refs or not containers or pod.status.phase in _FINISHED:
            return None
        excluded = self._excluded_kinds
        if excluded and any(r.kind in excluded for r in refs):
            return None
        selected = self._selected
        if selected is not None and not selected(pod):
            return None
        ns = pod.metadata.namespace
        if len(refs) == 1 and len(containers) == 1:  # the common case, without the sorting
            ref, image = refs[0], containers[0].image
            owner = (ns, ref.kind, ref.name, image)
            return _Candidate(pod, (f"{ns}/{ref.kind}/{ref.name}/{image}",), (owner,))
        images = sorted(c.image for c in containers)
        images_hash = "#".join(images)
        keys = tuple(sorted(f"{ns}/{r.kind}/{r.name}/{image}" for r in refs for image in images))
        owners = tuple((ns, r.kind, r.name, images_hash) for r in refs)
        return _Candidate(pod, keys, owners)

    def find_duplicates(self, nodes: Sequence[Node]) -> dict[OwnerKey, _Duplicates]:
        """Each owner with duplicates somewhere: its pod count and its duplicates per node."""
        snapshot = self.handle.snapshot
        position = {n.metadata.name: i for i, n in enumerate(nodes)}
        # Duplicates share every owner reference, so only owners with two pods on one node can
        # have any: the snapshot's owner index finds them without reading every pod's spec.
        crowded = []
        for ref in snapshot.owners():
            if snapshot.owner_pod_count(*ref) < 2:
                continue
            names = [p.spec.node_name for p in snapshot.pods_of_owner(*ref)]
            if len(set(names)) == len(names):
                continue  # no two pods of the owner on one node
            seen: set[str] = set()
            for node_name in names:
                if node_name in position:
                    if node_name in seen:
                        crowded.append(ref)
                        break
                    seen.add(node_name)
        by_node: dict[str, dict[str, _Candidate | None]] = {}
        for ref in crowded:
            for pod in snapshot.pods_of_owner(*ref):
                node_name = pod.spec.node_name
                if node_name in position:
                    bucket = by_node.setdefault(node_name, {})
                    if pod.key not in bucket:
                        bucket[pod.key] = self._candidate(pod)
        per_node: list[tuple[str, list[_Candidate]]] = []
        # Owner keys with two same-keyed candidates on one node. Only their pods are put to the
        # profile's filters (the PreEvictionFilter may be costly: node fit): filters only remove
        # pods, so no other owner can have duplicates, and every pod of these owners is counted.
        hot: set[OwnerKey] = set()
        for node_name in sorted(by_node, key=position.__getitem__):
            cands = [c for c in by_node[node_name].values() if c is not None]
            seen_keys: dict[tuple[str, ...], tuple[OwnerKey, ...]] = {}
            for c in cands:
                first = seen_keys.setdefault(c.keys, c.owners)
                if first is not c.owners:
                    hot.update(first)
                    hot.update(c.owners)
            per_node.append((node_name, cands))
        if not hot:
            return {}
        ev = self.handle.evictor
        reporting = self.handle.findings.enabled
        owners: dict[OwnerKey, _Duplicates] = {}
        for node_name, cands in per_node:
            kept = [
                c
                for c in cands
                if any(o in hot for o in c.owners) and ev.filter(c.pod) and ev.pre_eviction_filter(c.pod)
            ]
            if len(kept) > 1:
                # Keep-first order: the pods to evict first come last.
                by_key = {c.pod.key: c for c in kept}
                ordered = self.handle.sort_pods([c.pod for c in kept], key=youngest_first_key)
                kept = [by_key[p.key] for p in reversed(ordered)]
            first_of: set[tuple[str, ...]] = set()
            for c in kept:
                for owner in c.owners:
                    owners.setdefault(owner, _Duplicates()).occurrences += 1
                if c.keys not in first_of:
                    first_of.add(c.keys)
                    if reporting:
                        for owner in c.owners:
                            owners[owner].first.setdefault(node_name, c.pod)
                    continue
                for owner in c.owners:
                    owners[owner].by_node.setdefault(node_name, []).append(c.pod)
        return {owner: dups for owner, dups in owners.items() if dups.by_node}

    # ------------------------------------------------------------------ where they could go

    def _feasible_node_count(
        self, pods: Sequence[Pod], nodes: Sequence[Node], cache: dict[bytes, frozenset[str]]
    ) -> int:
        """How many nodes at least one of ``pods`` fits on by taints, node selector and node
        affinity (a pod counts only when it fits more than one node)."""
        found: dict[bytes, frozenset[str]] = {}
        for pod in pods:
            spec = pod.spec
            affinity = spec.affinity.node_affinity if spec.affinity is not None else None
            required = (
                affinity.required_during_scheduling_ignored_during_execution if affinity is not None else None
            )
            signature = msgspec.json.encode((spec.tolerations, spec.node_selector, required))
            if signature in found:
                continue
            fits = cache.get(signature)
            if fits is None:
                fits = frozenset(n.metadata.name for n in nodes if _could_run_on(pod, n))
                cache[signature] = fits
            found[signature] = fits
        sets = [fits for fits in found.values() if len(fits) > 1]
        if len(sets) == 1:
            return len(sets[0])
        return len(frozenset().union(*sets))

    # ------------------------------------------------------------------ the extension point

    def judge_move(self, move: PredictedMove) -> NoGain | None:
        """The replacement's node must hold fewer pods of the owner than a node keeps."""
        candidate = self._candidate(move.pod)
        if candidate is None:
            return None
        keeps = [self._keep[o] for o in candidate.owners if o in self._keep]
        keep = min(keeps) if keeps else 1
        target = move.destination.metadata.name
        there = 0
        for pod in move.cluster.pods_on_node(target):
            if pod.status.phase in _FINISHED or is_terminating(pod):
                continue
            other = self._candidate(pod)
            if other is not None and other.keys == candidate.keys:
                there += 1
        if there < keep:
            return None
        return NoGain(
            "predicted_duplicate",
            f"its replacement would land on {target}, which already runs {there} pod(s) of its owner "
            f"(a node keeps at most {keep})",
        )

    def balance(self, nodes: Sequence[Node]) -> Status | None:
        self._keep = {}
        duplicates = self.find_duplicates(nodes)
        if not duplicates:
            return None
        ev = self.handle.evictor
        findings = self.handle.findings
        cache: dict[bytes, frozenset[str]] = {}
        for owner, dups in duplicates.items():
            ns, kind, owner_name, _ = owner
            feasible = self._feasible_node_count(
                [p for ps in dups.by_node.values() for p in ps], nodes, cache
            )
            if feasible < 2:
                log.debug(
                    "RemoveDuplicates: %s %s/%s fits fewer than two nodes; skipped", kind, ns, owner_name
                )
                if findings.enabled:
                    for node_name, pods in dups.by_node.items():
                        why = (
                            f"{len(pods)} duplicates of owner {kind}/{owner_name} on node {node_name}, but "
                            "its pods fit fewer than 2 nodes (taints, node selector, node affinity): "
                            "nothing to spread them over"
                        )
                        first = dups.first.get(node_name)
                        for pod in pods if first is None else [first, *pods]:
                            findings.left(pod, why)
                continue
            keep = self._keep[owner] = math.ceil(dups.occurrences / feasible)
            for node_name, pods in dups.by_node.items():
                # ``pods`` are the duplicates: the node holds one more pod of the owner.
                excess = len(pods) + 1 - keep
                if findings.enabled:
                    _report_kept(findings, dups, owner, node_name, pods, keep, feasible, max(excess, 0))
                if excess <= 0:
                    continue
                reason = (
                    f"{len(pods) + 1} pods of {kind} {ns}/{owner_name} on node {node_name}; "
                    f"at most {keep} per node spreads its {dups.occurrences} pods over "
                    f"{feasible} feasible nodes"
                )
                if ev.evict_in_order(reversed(pods[-excess:]), reason):
                    return None
        return None


def _report_kept(
    findings: PluginFindings,
    dups: _Duplicates,
    owner: OwnerKey,
    node_name: str,
    duplicates: list[Pod],
    keep: int,
    feasible: int,
    excess: int,
) -> None:
    """Reports the pods of ``owner`` that ``node_name`` keeps: its first pod, and the duplicates
    within the per-node share (the last ``excess`` duplicates are the ones evicted)."""
    _, kind, owner_name, _ = owner
    share = (
        f"node {node_name} holds {len(duplicates) + 1} pods of owner {kind}/{owner_name} "
        f"({len(duplicates)} duplicates), {excess} above the per-node share {keep} (its "
        f"{dups.occurrences} pods over {feasible} feasible nodes: average {dups.occurrences / feasible:.3g}, "
        "rounded up)"
    )
    first = dups.first.get(node_name)
    if first is not None:
        findings.left(first, f"the first pod of its owner on the node stays; {share}")
    for pod in duplicates[: len(duplicates) - excess]:
        findings.left(pod, f"within the per-node share; {share}")


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import BalancePlugin, JudgesMoves

    _balance_plugin: type[BalancePlugin] = RemoveDuplicates
    _judges_moves: type[JudgesMoves] = RemoveDuplicates
