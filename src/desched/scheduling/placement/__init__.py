"""kube-scheduler 1.36's model: where it would put the pods a descheduling cycle evicts.

Upstream descheduler's dry run says what it would evict, never where the pods would go (its
issue #1584). ``desched simulate`` answers it: every evicted pod that a controller re-creates (a
ReplicaSet's, StatefulSet's, Job's, DaemonSet's replacement; a bare pod is gone, and so is a
finished one, which its controller already counted as done) is scheduled again the way
kube-scheduler 1.36's default profile would, one pod at a time, each placement changing what the
next pod sees. By default each replacement is placed right after its pod's eviction (the
ReplicaSet controller and kube-scheduler act within milliseconds, while the cycle still evicts),
with the evicted pods still terminating on their nodes (holding their requests and
anti-affinity; spread constraints no longer count them); ``PlacementOptions.order`` and
``terminating`` choose placement after the cycle (higher priority first) and evicted pods gone
at once (kwok). Replacements that fit nowhere stay Pending, with the message
kube-scheduler would put in their ``PodScheduled`` condition
("0/7 nodes are available: 3 Insufficient cpu, 4 node(s) had untolerated taint {dedicated: gpu}.").

**Filters** (kube-scheduler's, in its order; a node reports the first that fails):

1. NodeUnschedulable: a cordoned node, unless the pod tolerates
   ``node.kubernetes.io/unschedulable:NoSchedule``;
2. TaintToleration: every ``NoSchedule``/``NoExecute`` taint must be tolerated. A node whose
   Ready condition is not True carries the ``node.kubernetes.io/not-ready`` (``unreachable`` when
   Unknown) ``NoSchedule`` taint the node lifecycle controller would add, if the snapshot lacks it;
3. NodeAffinity: ``spec.nodeSelector`` and required node affinity;
4. NodeResourcesFit: ``Too many pods``, then ``Insufficient <resource>`` for every requested
   resource that exceeds allocatable minus the requests of the pods occupying the node;
5. PodTopologySpread, ``DoNotSchedule`` constraints: the node must carry every constraint's
   topology key; placing the pod must not make its domain exceed the global minimum (0 below
   ``minDomains`` domains) by more than ``maxSkew``. Domains are the values of the nodes that pass
   ``nodeAffinityPolicy`` (default Honor) and ``nodeTaintsPolicy`` (default Ignore); counted are
   the namespace's pods that match the selector (``matchLabelKeys`` merged in), not terminating;
6. InterPodAffinity: no existing pod's required anti-affinity term may match the pod in the
   node's domain; the pod's own required anti-affinity terms must match no pod in the node's
   domain; its required affinity terms must each be satisfied in the node's domain by pods that
   match all of them (or, as kube-scheduler allows for the first pod of a group, no pod matches
   anywhere and the pod matches its own terms).

As kube-scheduler, only the first ``numFeasibleNodesToFind`` feasible nodes are looked for
(all nodes below 100; 50% minus 1% per 125 nodes, at least 5% and 100 nodes, above), starting
where the previous pod's search stopped, over the nodes in kube-scheduler's order (round-robin
over zones, by name within a zone).

**Scores** (``--score default``, kube-scheduler's default profile): each plugin scores the feasible
nodes 0..100, normalised as kube-scheduler normalises it, times its weight:
NodeResourcesFit LeastAllocated (cpu and memory, weight 1; requests with kube-scheduler's 100m /
200Mi stand-ins for containers that set none), NodeResourcesBalancedAllocation (1; 1.36's change
in balance the pod causes, kubernetes#135573; skipped for best-effort pods), TaintToleration
(3; ``PreferNoSchedule`` taints not tolerated, fewer is better),
NodeAffinity (2; the weights of the matching preferred terms), InterPodAffinity (2; the pod's
preferred (anti-)affinity terms against the pods in each domain) and PodTopologySpread (2;
``ScheduleAnyway`` constraints, or, for a pod without constraints that a ReplicaSet,
StatefulSet or ReplicationController owns, kube-scheduler's system defaults: hostname maxSkew 3
and zone maxSkew 5 over the pods of the same owner). ``--score generic`` replaces the two
node-resources scores with the KEP-2143 generic scorer (:mod:`desched.scheduling.scorer`),
weighted 2 (the weight of the two plugins it replaces). The highest total wins; ties go to the
root of the Go heap kube-scheduler 1.36 builds over its feasible list (:func:`heap_winner`).

Simplifications (documented in docs/simulation.md): ImageLocality and the volume plugins are not
modelled (the snapshot has no node images, PersistentVolumes or CSI limits); InterPodAffinity's
score counts only the incoming pod's preferred terms, not the existing pods' terms towards it;
NodePorts, DRA and preemption are not modelled; a pod that fits nowhere stays Pending (the
scheduler would try to preempt lower-priority pods).

Speed: what the checks take from a pod alone is memoised per pod *class* (the replicas of a
workload share one: requests, selectors, affinity, tolerations, spread constraints), what they
read of a node per node; pods are indexed by namespace and label for selectors; spread domain
counts, the pods matching each (anti-)affinity term (per domain, per node) and existing pods'
anti-affinity (with the nodes it rules out) are kept incrementally as pods are placed, and so is
each request class's list of fitting nodes (a bind drops the node from the classes it no longer
fits). Scoring sums the non-resource plugins once per distinct node *signature* (what they read of
a node) and computes the resource scores only of the nodes whose upper bound can still win. The
picture after the cycles is the picture before, brought up to date with the pods that came and
went (:mod:`desched.simulation.picture`). No pods-by-pods scans (figures: docs/performance.md).

Modules, in the layers .importlinter keeps (each imports only those below it): :mod:`.simulator`
(one scheduling cycle per pod; owns the state below and keeps it up to date as pods are bound);
:mod:`.scores` (the score plugins); :mod:`.classes` (pod classes, the PreFilter, the existing
pods' anti-affinity); :mod:`.nodes` (the node table: requests per node, and each request class's
fitting nodes) and :mod:`.state` (the cluster state: node order and memos, spread counters, term
indexes); :mod:`.filters` (the filters and their messages, shared with the scheduler extender),
:mod:`.order` (node order, how many nodes a search looks for, the queue's order), :mod:`.shapes`
(what is read of a pod alone) and :mod:`.options`. The parts take the state they read, never the
simulator: no import cycle and no reference cycle (a dropped simulator is freed at once). The
multi-cycle driver, the replacement pods, the results and the before/after picture live in
:mod:`desched.simulation`.
"""

from desched.scheduling.placement.filters import fit_error_message
from desched.scheduling.placement.options import (
    DEFAULT_WEIGHTS,
    GENERIC_PLUGIN,
    ORDER_AFTER_CYCLE,
    ORDER_INTERLEAVED,
    SCORE_DEFAULT,
    SCORE_GENERIC,
    TERMINATING_GONE,
    TERMINATING_HOLD,
    PlacementOptions,
)
from desched.scheduling.placement.order import num_feasible_nodes_to_find, queue_order, scheduler_node_order
from desched.scheduling.placement.scores import balanced_allocation_score, heap_winner, tie_preference
from desched.scheduling.placement.simulator import Decision, PlacementSimulator

__all__ = [
    "DEFAULT_WEIGHTS",
    "GENERIC_PLUGIN",
    "ORDER_AFTER_CYCLE",
    "ORDER_INTERLEAVED",
    "SCORE_DEFAULT",
    "SCORE_GENERIC",
    "TERMINATING_GONE",
    "TERMINATING_HOLD",
    "Decision",
    "PlacementOptions",
    "PlacementSimulator",
    "balanced_allocation_score",
    "fit_error_message",
    "heap_winner",
    "num_feasible_nodes_to_find",
    "queue_order",
    "scheduler_node_order",
    "tie_preference",
]
