"""HighNodeUtilization's ``compactWhenAllUnderutilized`` (desched only; upstream #725).

Upstream's HighNodeUtilization does nothing when every node is under-utilised: there is no node
above the thresholds to pack onto. That is exactly the cluster the cluster autoscaler wants to
shrink, and it cannot while each node keeps a few pods. With the arg set, the plugin then empties
whole nodes, least-utilised first, as long as the pods fit on the nodes it keeps:

- the nodes are the under-utilised ones given to the plugin, ordered by the sum of their raw
  usage amounts (least first; ties by name), as HighNodeUtilization orders its sources;
- a node is emptied only when it can be emptied entirely: each of its pods is either one the
  plugin may evict (the profile's Filter, ``evictableNamespaces``, ``evictionModes``) or one the
  cluster autoscaler ignores when it removes a node (a DaemonSet or mirror pod). A node holding
  any other pod (say, one with local storage that DefaultEvictor protects) is left whole:
  evicting its other pods would disrupt them without freeing the node;
- its pods must all fit on the nodes kept: a plan places each (lowest priority first) on the
  fullest kept node that passes the handle's node fit (``handle.fits_node``: cordon, node
  selector and affinity, taints, anti-affinity, resources as the cluster stands) and that still
  has room for the requests of the pods planned onto it before (every requested resource, and a
  pod slot). Without a full plan nothing is evicted from the node;
- a node that receives planned pods is kept from then on, and an emptied node receives none, so
  no pod is planned onto a node that is emptied, and the cluster keeps at least one node;
- then its pods are evicted in the plan's order; the per-node limit moves on to the next node (its
  planned room stays reserved), the total limit ends the plugin.

The plan is desched's own reckoning of where the pods can go; kube-scheduler places the
replacements itself (pair this with its ``MostAllocated`` scoring, as for HighNodeUtilization).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from desched.framework.types import EvictResult, Handle
from desched.k8s import nodes as k8s_nodes
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Node, Pod
from desched.k8s.resources import PODS, Resources
from desched.plugins._shared import priority_low_to_high_key


def ignored_by_autoscaler(pod: Pod) -> bool:
    """A pod the cluster autoscaler does not move when it removes a node (DaemonSet, mirror)."""
    return k8s_pods.is_daemonset_pod(pod) or k8s_pods.is_mirror_pod(pod)


class _Room:
    """What each kept node can still take: allocatable minus the requests of its pods and of the
    pods planned onto it."""

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self.planned: dict[str, Resources] = {}

    def fits(self, pod: Pod, node: Node, extra: Resources) -> bool:
        snapshot = self._handle.snapshot
        name = node.metadata.name
        allocatable = snapshot.allocatable(node)
        requested = snapshot.requested_on(name)
        planned = self.planned.get(name, {})
        if snapshot.pod_count_on(name) + planned.get(PODS, 0) + extra.get(PODS, 0) + 1 > allocatable.get(
            PODS, 0
        ):
            return False
        for resource, amount in snapshot.requests(pod).items():
            if resource == PODS or amount <= 0:
                continue
            free = (
                allocatable.get(resource, 0)
                - requested.get(resource, 0)
                - planned.get(resource, 0)
                - extra.get(resource, 0)
            )
            if amount > free:
                return False
        return True


def compact(
    handle: Handle,
    nodes: Sequence[Node],
    may_evict: Callable[[Pod], bool],
    reason: Callable[[Node], str],
) -> None:
    """Empty ``nodes`` (under-utilised, least-utilised first) while their pods fit on the others."""
    snapshot = handle.snapshot
    findings = handle.findings
    room = _Room(handle)
    emptied: set[str] = set()
    receiving: set[str] = set()
    #: the nodes pods may be planned onto, fullest first (they pack)
    targets = [n for n in reversed(nodes) if not k8s_nodes.is_node_unschedulable(n)]
    ev = handle.evictor
    for node in nodes:
        name = node.metadata.name
        if name in receiving:
            continue
        kept = [n for n in targets if n.metadata.name != name and n.metadata.name not in emptied]
        if not kept:
            break
        movable: list[Pod] = []
        blocker: Pod | None = None
        for pod in snapshot.pods_on_node(name):
            if not k8s_pods.occupies_node(pod):
                continue
            if may_evict(pod):
                movable.append(pod)
            elif not ignored_by_autoscaler(pod):
                blocker = pod
                break
        if blocker is not None:
            if findings.enabled:
                findings.node_left(
                    name,
                    f"not compacted: pod {blocker.key} may not be evicted, so the node stays",
                )
            continue
        if not movable:
            continue  # nothing the autoscaler would have to move
        ordered = handle.sort_pods(movable, key=priority_low_to_high_key)
        plan = _plan(handle, room, ordered, kept)
        if plan is None:
            if findings.enabled:
                findings.node_left(name, "not compacted: its pods do not all fit on the nodes kept")
            continue
        for pod, target in plan:
            added = room.planned.setdefault(target, {})
            for resource, amount in snapshot.requests(pod).items():
                if resource != PODS:
                    added[resource] = added.get(resource, 0) + amount
            added[PODS] = added.get(PODS, 0) + 1
            receiving.add(target)
        emptied.add(name)
        why = reason(node)
        for pod in ordered:
            result = ev.evict(pod, reason=why)
            if result is EvictResult.TOTAL_LIMIT:
                return
            if result is EvictResult.NODE_LIMIT:
                break


def _plan(
    handle: Handle, room: _Room, pods: Sequence[Pod], kept: Sequence[Node]
) -> list[tuple[Pod, str]] | None:
    """Each pod on the first of ``kept`` that fits it, counting the pods planned before it; None
    when one fits nowhere."""
    snapshot = handle.snapshot
    extra: dict[str, Resources] = {}
    plan: list[tuple[Pod, str]] = []
    for pod in pods:
        for target in kept:
            name = target.metadata.name
            here = extra.get(name, {})
            if room.fits(pod, target, here) and handle.fits_node(pod, target):
                for resource, amount in snapshot.requests(pod).items():
                    if resource != PODS:
                        here[resource] = here.get(resource, 0) + amount
                here[PODS] = here.get(PODS, 0) + 1
                extra[name] = here
                plan.append((pod, name))
                break
        else:
            return None
    return plan
