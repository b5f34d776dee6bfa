"""HighNodeUtilization's ``compactWhenAllUnderutilized`` (desched only; upstream #725).

Upstream's HighNodeUtilization does nothing when every node is under-utilised: there is no node
above the thresholds to pack onto. That is exactly the cluster the cluster autoscaler wants to
shrink, and it cannot while each node keeps a few pods. With the arg set, the plugin then empties
whole nodes, least-utilised first, as long as the pods fit on the nodes it keeps:

- the nodes are the under-utilised ones given to the plugin, ordered by the sum of their raw
  usage amounts (least first), as HighNodeUtilization orders its sources; of nodes that tie, the
  one kube-scheduler would bind to among equals (:func:`desched.scheduling.placement.tie_preference`)
  comes last, so it is kept and its equals are emptied onto it: with ``MostAllocated`` scoring
  kube-scheduler sends the first replacement to that node and every later one follows, so the
  other way round replacements land back on the node being emptied;
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

Cost: each node's free room is read from the snapshot once; a plan is first-fit over the kept
nodes, fullest first, so a pod looks past the nodes already filled (full ones are dropped):
measured 0.9 s for 1,000 nodes / 3,400 pods and 4.8 s for 3,000 nodes / 10,200 pods, all
under-utilised (87% of the nodes emptied).

The plan is desched's own reckoning of where the pods can go; kube-scheduler places the
replacements itself (pair this with its ``MostAllocated`` scoring, as for HighNodeUtilization).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from desched.framework import EvictResult, Handle
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
    pods planned onto it (``PODS``: free pod slots), read from the snapshot once per node."""

    def __init__(self, handle: Handle) -> None:
        self._snapshot = handle.snapshot
        self._free: dict[str, Resources] = {}

    def free(self, node: Node) -> Resources:
        name = node.metadata.name
        free = self._free.get(name)
        if free is None:
            snapshot = self._snapshot
            allocatable = snapshot.allocatable(node)
            free = dict(allocatable)
            for resource, amount in snapshot.requested_on(name).items():
                free[resource] = free.get(resource, 0) - amount
            free[PODS] = allocatable.get(PODS, 0) - snapshot.pod_count_on(name)
            self._free[name] = free
        return free

    def fits(self, needs: Resources, node: Node, extra: Resources) -> bool:
        """``needs`` (a pod's requests and one pod slot) fit in what is free beyond ``extra``."""
        free = self._free.get(node.metadata.name) or self.free(node)
        for resource, amount in needs.items():  # (a loop: this is the hot path of a plan)
            if amount > free.get(resource, 0) - extra.get(resource, 0):
                return False
        return True

    def take(self, needs: Resources, node: Node) -> None:
        free = self.free(node)
        for resource, amount in needs.items():
            free[resource] = free.get(resource, 0) - amount


def _needs(handle: Handle, pod: Pod) -> Resources:
    """What placing ``pod`` takes of a node: its positive requests and one pod slot."""
    needs = {r: a for r, a in handle.snapshot.requests(pod).items() if r != PODS and a > 0}
    needs[PODS] = 1
    return needs


def compact(
    handle: Handle,
    nodes: Sequence[Node],
    may_evict: Callable[[Pod], bool],
    reason: Callable[[Node], str],
    *,
    emptied: set[str] | None = None,
) -> None:
    """Empty ``nodes`` (under-utilised, least-utilised first) while their pods fit on the others
    (``emptied`` hears of each node it empties, before its pods are evicted)."""
    snapshot = handle.snapshot
    findings = handle.findings
    room = _Room(handle)
    receiving: set[str] = set()
    #: the nodes pods may be planned onto, fullest first (they pack)
    targets = {n.metadata.name: n for n in reversed(nodes) if not k8s_nodes.is_node_unschedulable(n)}
    ev = handle.evictor
    for node in nodes:
        name = node.metadata.name
        if name in receiving:
            continue
        if not targets or (len(targets) == 1 and name in targets):
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
        plan = _plan(handle, room, ordered, targets.values(), node)
        if plan is None:
            if findings.enabled:
                findings.node_left(name, "not compacted: its pods do not all fit on the nodes kept")
            continue
        for needs, target in plan:
            room.take(needs, target)
            receiving.add(target.metadata.name)
            if room.free(target)[PODS] <= 0:
                targets.pop(target.metadata.name, None)  # full: no need to look at it again
        targets.pop(name, None)  # emptied: it receives nothing
        if emptied is not None:
            emptied.add(name)
        why = reason(node)
        for pod in ordered:
            result = ev.evict(pod, reason=why)
            if result is EvictResult.TOTAL_LIMIT:
                return
            if result is EvictResult.NODE_LIMIT:
                break


def _plan(
    handle: Handle, room: _Room, pods: Sequence[Pod], kept: Iterable[Node], source: Node
) -> list[tuple[Resources, Node]] | None:
    """Each pod on the first of ``kept`` (but ``source``) that fits it, counting the pods planned
    before it: what it takes and where; None when one fits nowhere."""
    extra: dict[str, Resources] = {}
    plan: list[tuple[Resources, Node]] = []
    for pod in pods:
        needs = _needs(handle, pod)
        for target in kept:
            if target is source:
                continue
            name = target.metadata.name
            here = extra.get(name, {})
            if room.fits(needs, target, here) and handle.fits_node(pod, target):
                for resource, amount in needs.items():
                    here[resource] = here.get(resource, 0) + amount
                extra[name] = here
                plan.append((needs, target))
                break
        else:
            return None
    return plan
