"""DefaultEvictor: which pods may be evicted at all (Filter), and a last check before (PreEvictionFilter).

Upstream's ``pkg/framework/plugins/defaultevictor`` (v0.36), rule for rule.

``filter(pod)``, in upstream's order:

1. the ``descheduler.alpha.kubernetes.io/evict`` annotation makes any pod evictable;
2. with ``noEvictionPolicy: Mandatory``, the ``descheduler.alpha.kubernetes.io/prefer-no-eviction``
   annotation makes it not evictable (``Preferred`` only sorts such pods last);
3. mirror, static and terminating pods are not evictable;
4. then the pod protections, each a reason to keep the pod:

   - ``SystemCriticalPods`` (default): priority ≥ 2·10⁹; and, with a ``priorityThreshold`` that
     sets ``value`` or ``name``, a priority ≥ the threshold. A pod's priority is its
     ``spec.priority``, or, when a hand-written snapshot leaves that out, the value of the class
     its ``priorityClassName`` names (the snapshot's PriorityClass, or the built-in
     ``system-cluster-critical`` / ``system-node-critical``), as admission would have set it; a pod
     that says neither passes. With this protection disabled the threshold is ignored, as upstream.
   - ``FailedBarePods`` (default): a pod without owner references; disabled, such a pod is kept
     unless it is Failed.
   - ``PodsWithLocalStorage`` (default): an emptyDir or hostPath volume.
   - ``DaemonSetPods`` (default): owned by a DaemonSet.
   - ``PodsWithPVC`` (extra): a persistentVolumeClaim volume; with
     ``config.PodsWithPVC.protectedStorageClasses`` only claims of those classes protect, and a
     claim that is not in the snapshot, or has no storage class, protects too (it cannot be told).
   - ``PodsWithoutPDB`` (extra): no PodDisruptionBudget selects the pod.
   - ``PodsWithResourceClaims`` (extra): ``spec.resourceClaims`` is set.

   Protections come from ``podProtections`` when its ``extraEnabled`` or ``defaultDisabled`` is
   non-empty, else from the deprecated booleans (``evictLocalStoragePods`` ...);
5. ``labelSelector`` must match the pod's labels;
6. ``minReplicas`` (> 1): a pod with exactly one owner reference is kept when fewer than
   ``minReplicas`` pods of the snapshot name that owner (same uid) at the start of the cycle;
   pods with no or several owners pass. The count is the cycle's first one: upstream checks it
   once, when a plugin lists a node's pods, and then evicts from that list (and a live cluster
   still lists the pods evicted during the cycle, terminating), so two replicas on a tainted node
   are both evicted;
7. ``minPodAge``: a pod without ``status.startTime``, or started less than ``minPodAge`` ago, is
   kept.

Within a cycle, what ``filter`` finds from the pod itself and the cycle's settings (steps 1-5)
is remembered per pod; ``minReplicas`` (from the counts taken at the cycle's start) and
``minPodAge`` (the clock) are checked at every call.

``pre_eviction_filter(pod)``: with ``nodeFit``, the pod must fit (``handle.fits_other_node``)
some *other* ready node of the snapshot matching ``nodeSelector`` (all of them, not only the nodes
the strategy was given); then, with a non-empty ``namespaceLabelSelector``, the pod's Namespace
must exist in the snapshot and match it.

A ``priorityThreshold.name`` is resolved at the start of every cycle from the snapshot's
PriorityClasses (the built-in ``system-*-critical`` classes are always known). If the class does
not exist, upstream fails to build the profile and skips it for the cycle; desched does the same
in effect: the profile's DefaultEvictor refuses every pod for that cycle and logs an error, so the
profile evicts nothing rather than more than intended.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from desched.framework import ClusterView
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s import priority as k8s_priority
from desched.k8s.objects import Node, Pod
from desched.plugins.defaultevictor.args import NO_EVICTION_MANDATORY, DefaultEvictorArgs, PodProtection

if TYPE_CHECKING:
    from desched.framework import Handle

log = logging.getLogger(__name__.rpartition(".")[0])  # the plugin's package: --vmodule names the folder


#: (why the pod is kept, the test that says it is kept)
_Constraint = tuple[str, Callable[[Pod], bool]]

_BELOW_MIN_REPLICAS = "owner has fewer replicas than minReplicas"
_TOO_YOUNG = "pod is younger than minPodAge"

#: What ``filter`` found out about a pod once per cycle, from the pod alone (see ``_verdict``).
_REFUSE = 0
_ACCEPT = 1
_CHECK = 2  # passes the checks that depend on the pod alone; minReplicas and minPodAge still apply

#: (namespace, owner kind, owner name, owner uid)
_OwnerKey = tuple[str, str, str, str]


#: The owner counts last made, with the snapshot (weakly) and its version and additions they were
#: made of, in one tuple (replaced whole): each profile's DefaultEvictor counts the same snapshot at
#: the start of a cycle, and the second one takes the first one's counts (read only) instead of a
#: pass over every pod.
_last_count: tuple[weakref.ref[ClusterView], int, int, dict[_OwnerKey, int]] | None = None


class DefaultEvictor:
    """Filter + PreEvictionFilter, as upstream's DefaultEvictor."""

    name: ClassVar[str] = "DefaultEvictor"
    Args: ClassVar[type[DefaultEvictorArgs]] = DefaultEvictorArgs

    def __init__(self, args: DefaultEvictorArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.protections = args.effective_protections()
        self._mandatory = args.no_eviction_policy == NO_EVICTION_MANDATORY
        self._min_pod_age = args.min_pod_age_duration
        self._protected_classes = args.pod_protections.protected_storage_classes()
        sel = args.label_selector.to_selector() if args.label_selector is not None else None
        self._label_match: k8s_labels.Matcher | None = None
        if sel is not None and (sel.match_labels or sel.match_expressions):
            self._label_match = k8s_labels.compile_label_selector(sel, none_matches=True)
        ns_sel = args.namespace_label_selector.to_selector() if args.namespace_label_selector else None
        self._namespace_match: k8s_labels.Matcher | None = None
        if ns_sel is not None and (ns_sel.match_labels or ns_sel.match_expressions):
            self._namespace_match = k8s_labels.compile_label_selector(ns_sel, none_matches=True)
        if args.min_replicas == 1:
            log.info("DefaultEvictor: minReplicas 1 has no effect (it must be greater than 1 to apply)")
        self._threshold_spec = args.priority_threshold
        if self._threshold_spec is not None and (
            PodProtection.SYSTEM_CRITICAL_PODS not in self.protections
            or (self._threshold_spec.value is None and not self._threshold_spec.name)
        ):
            self._threshold_spec = None  # upstream ignores it then
        # per cycle
        self._snapshot: ClusterView | None = None
        self._broken: str | None = None
        self._threshold: int | None = None
        self._constraints: list[_Constraint] = []
        self._static_checks: tuple[Callable[[Pod], bool], ...] = ()
        self._ready_nodes: list[Node] | None = None
        #: owner -> how many pods named it when the cycle started (minReplicas > 1 only)
        self._owner_counts: dict[_OwnerKey, int] = {}
        #: id(pod) -> (pod, verdict, the owner minReplicas counts or None), for this cycle
        self._verdicts: dict[int, tuple[Pod, int, _OwnerKey | None]] = {}

    # ---------------------------------------------------------------- cycle

    def on_cycle_start(self) -> None:
        """Bind to this cycle's snapshot: resolve the priority threshold, drop per-cycle caches."""
        snapshot = self.handle.snapshot
        self._snapshot = snapshot
        self._broken = None
        self._threshold = None
        self._ready_nodes = None
        self._owner_counts = self._count_owners(snapshot) if self.args.min_replicas > 1 else {}
        self._verdicts = {}
        spec = self._threshold_spec
        if spec is not None:
            if spec.value is not None:
                self._threshold = spec.value
            else:
                self._threshold = k8s_priority.class_value(spec.name, snapshot.priority_classes)
                if self._threshold is None:
                    self._broken = (
                        f"priorityThreshold.name: PriorityClass {spec.name!r} does not exist; "
                        f"profile {self.handle.profile_name!r} evicts nothing this cycle"
                    )
                    log.error("DefaultEvictor: %s", self._broken)
        self._constraints = self._build_constraints()
        # Every constraint but minReplicas (evictions change the counts) and minPodAge (the clock)
        # depends on the pod, the cycle's settings and what evictions leave alone.
        self._static_checks = tuple(
            kept for reason, kept in self._constraints if reason not in (_BELOW_MIN_REPLICAS, _TOO_YOUNG)
        )

    def on_cycle_end(self) -> None:
        """Let go of the cycle's verdicts, owner counts and snapshot (a later call rebinds), and
        of the counts shared by the profiles (not kept through a simulation's placements)."""
        global _last_count
        self._snapshot = None
        self._ready_nodes = None
        self._owner_counts = {}
        self._verdicts = {}
        _last_count = None

    def _current(self) -> None:
        if self._snapshot is not self.handle.snapshot:
            self.on_cycle_start()

    @property
    def error(self) -> str | None:
        """Why this evictor refuses every pod in the current cycle, if it does."""
        self._current()
        return self._broken

    def _build_constraints(self) -> list[_Constraint]:
        on = self.protections
        out: list[_Constraint] = []
        if PodProtection.SYSTEM_CRITICAL_PODS in on:
            # a pod's priority: spec.priority, or its priorityClassName's value (k8s.priority)
            classes = self._snapshot.priority_classes if self._snapshot is not None else {}
            out.append(
                ("pod has system critical priority", lambda p: k8s_priority.is_critical_pod(p, classes))
            )
            threshold = self._threshold
            if threshold is not None:

                def above_threshold(p: Pod) -> bool:
                    priority = k8s_priority.pod_priority(p, classes)
                    return priority is not None and priority >= threshold

                out.append(("pod has higher priority than the priority threshold", above_threshold))
        if PodProtection.FAILED_BARE_PODS in on:
            out.append(("pod does not have any ownerRefs", k8s_pods.is_bare_pod))
        else:
            out.append(
                (
                    "pod does not have any ownerRefs and is not in failed phase",
                    lambda p: k8s_pods.is_bare_pod(p) and p.status.phase != "Failed",
                )
            )
        if PodProtection.PODS_WITH_LOCAL_STORAGE in on:
            out.append(("pod has local storage", k8s_pods.has_local_storage))
        if PodProtection.DAEMON_SET_PODS in on:
            out.append(("pod is owned by a DaemonSet", k8s_pods.is_daemonset_pod))
        if PodProtection.PODS_WITH_PVC in on:
            if self._protected_classes:
                out.append(("pod uses a protected storage class", self._uses_protected_storage_class))
            else:
                out.append(("pod has a PVC", k8s_pods.has_pvc))
        if PodProtection.PODS_WITHOUT_PDB in on:
            out.append(("pod is not covered by a PodDisruptionBudget", self._without_pdb))
        if PodProtection.PODS_WITH_RESOURCE_CLAIMS in on:
            out.append(("pod has ResourceClaims", k8s_pods.has_resource_claims))
        label_match = self._label_match
        if label_match is not None:
            out.append(("pod labels do not match labelSelector", lambda p: not label_match(p.labels)))
        if self.args.min_replicas > 1:
            out.append((_BELOW_MIN_REPLICAS, self._below_min_replicas))
        if self._min_pod_age is not None:
            out.append((_TOO_YOUNG, self._too_young))
        return out

    # ---------------------------------------------------------------- constraints

    def _uses_protected_storage_class(self, pod: Pod) -> bool:
        snapshot = self.handle.snapshot
        protected = self._protected_classes
        for claim_name in k8s_pods.pvc_claim_names(pod):
            claim = snapshot.pvc(pod.namespace, claim_name)
            if claim is None or not claim.spec.storage_class_name:
                return True  # cannot tell the class: keep the pod
            if claim.spec.storage_class_name in protected:
                return True
        return False

    def _without_pdb(self, pod: Pod) -> bool:
        return not self.handle.snapshot.pdbs_for_pod(pod)

    def _below_min_replicas(self, pod: Pod) -> bool:
        key = self._owner_key(pod)
        return key is not None and self._owner_replicas(key) < self.args.min_replicas

    @staticmethod
    def _owner_key(pod: Pod) -> _OwnerKey | None:
        """The owner whose replicas minReplicas counts: the only owner reference (None if the pod
        has none or several)."""
        refs = pod.metadata.owner_references
        if not refs or len(refs) > 1:
            return None
        ref = refs[0]
        return (pod.metadata.namespace, ref.kind, ref.name, ref.uid)

    def _owner_replicas(self, key: _OwnerKey) -> int:
        """How many pods of the snapshot named this owner (same kind, name and uid) when the cycle
        started: evictions during the cycle do not lower it (see the module docstring)."""
        return self._owner_counts.get(key, 0)

    @staticmethod
    def _count_owners(snapshot: ClusterView) -> dict[_OwnerKey, int]:
        """Pods per owner reference (each pod once per distinct reference), over the snapshot as
        it is now: at the start of the cycle. Counted once per snapshot and version
        (``_last_count``): the dict is shared, never to be changed."""
        global _last_count
        version, additions = snapshot.version, snapshot.additions
        last = _last_count
        if last is not None and last[0]() is snapshot and last[1] == version and last[2] == additions:
            return last[3]
        counts = DefaultEvictor._count_all(snapshot)
        try:
            _last_count = (weakref.ref(snapshot), version, additions, counts)
        except TypeError:  # a view that cannot be referred to weakly: not kept
            _last_count = None
        return counts

    @staticmethod
    def _count_all(snapshot: ClusterView) -> dict[_OwnerKey, int]:
        counts: dict[_OwnerKey, int] = {}
        for pod in snapshot.iter_pods():
            refs = pod.metadata.owner_references
            if not refs:
                continue
            namespace = pod.metadata.namespace
            if len(refs) == 1:
                ref = refs[0]
                key = (namespace, ref.kind, ref.name, ref.uid)
                counts[key] = counts.get(key, 0) + 1
                continue
            for key in {(namespace, ref.kind, ref.name, ref.uid) for ref in refs}:
                counts[key] = counts.get(key, 0) + 1
        return counts

    def _too_young(self, pod: Pod) -> bool:
        started = pod.status.start_time
        assert self._min_pod_age is not None
        return started is None or self.handle.now() - started < self._min_pod_age

    # ---------------------------------------------------------------- extension points

    def filter(self, pod: Pod) -> bool:
        snapshot = self.handle.snapshot
        if self._snapshot is not snapshot:
            self.on_cycle_start()
        if self._broken is not None:
            return False
        hit = self._verdicts.get(id(pod))
        if hit is not None and hit[0] is pod:
            _, verdict, owner = hit
        else:
            verdict = self._verdict(pod)
            owner = self._owner_key(pod) if verdict == _CHECK and self.args.min_replicas > 1 else None
            # (the entry holds the pod, so its id is not reused while cached)
            self._verdicts[id(pod)] = (pod, verdict, owner)
        if verdict != _CHECK:
            return verdict == _ACCEPT
        if owner is not None and self._owner_counts.get(owner, 0) < self.args.min_replicas:
            return False
        return self._min_pod_age is None or not self._too_young(pod)

    def _verdict(self, pod: Pod) -> int:
        """Upstream's filter up to the checks whose answer can change within a cycle."""
        meta = pod.metadata
        annotations = meta.annotations
        if annotations:
            if k8s_pods.EVICT_ANNOTATION in annotations:
                return _ACCEPT
            if self._mandatory and k8s_pods.PREFER_NO_EVICTION_ANNOTATION in annotations:
                return _REFUSE
            if k8s_pods.MIRROR_POD_ANNOTATION in annotations:  # k8s_pods.is_mirror_pod
                return _REFUSE
            source = annotations.get(k8s_pods.CONFIG_SOURCE_ANNOTATION)
            if source is not None and source != "api":  # k8s_pods.is_static_pod
                return _REFUSE
        if meta.deletion_timestamp is not None:  # k8s_pods.is_terminating
            return _REFUSE
        for kept in self._static_checks:
            if kept(pod):
                return _REFUSE
        return _CHECK

    def filter_reasons(self, pod: Pod) -> list[str]:
        """Every reason ``filter`` refuses the pod ([] if it accepts it), for explanations."""
        self._current()
        if self._broken is not None:
            return [self._broken]
        annotations = pod.annotations
        if k8s_pods.EVICT_ANNOTATION in annotations:
            return []
        if self._mandatory and k8s_pods.PREFER_NO_EVICTION_ANNOTATION in annotations:
            return ["pod has the prefer-no-eviction annotation and noEvictionPolicy is Mandatory"]
        out = []
        if k8s_pods.is_mirror_pod(pod):
            out.append("pod is a mirror pod")
        if k8s_pods.is_static_pod(pod):
            out.append("pod is a static pod")
        if k8s_pods.is_terminating(pod):
            out.append("pod is terminating")
        out.extend(reason for reason, kept in self._constraints if kept(pod))
        return out

    def nodes_for_fit(self) -> list[Node]:
        """The ready nodes matching ``nodeSelector``: where nodeFit looks (one list per cycle)."""
        self._current()
        if self._ready_nodes is None:
            self._ready_nodes = self.handle.snapshot.ready_nodes(self.args.node_selector or None)
        return self._ready_nodes

    def pre_eviction_filter(self, pod: Pod) -> bool:
        self._current()
        if self._broken is not None:
            return False
        snapshot = self.handle.snapshot
        if self.args.node_fit and not self.handle.fits_other_node(pod, self.nodes_for_fit()):
            log.debug("pod %s fits no other node; not evicted", pod.key)
            return False
        match = self._namespace_match
        if match is not None:
            ns = snapshot.namespace(pod.namespace)
            if ns is None or not match(ns.metadata.labels or {}):
                log.debug("namespace of pod %s does not match namespaceLabelSelector", pod.key)
                return False
        return True

    def pre_eviction_filter_reasons(self, pod: Pod) -> list[str]:
        """Why ``pre_eviction_filter`` refuses the pod, with each other node's first misfit."""
        self._current()
        if self._broken is not None:
            return [self._broken]
        out: list[str] = []
        snapshot = self.handle.snapshot
        if self.args.node_fit and not self.handle.fits_other_node(pod, self.nodes_for_fit()):
            others = [n for n in self.nodes_for_fit() if n.metadata.name != pod.spec.node_name]
            misfits = [
                f"{n.metadata.name}: {'; '.join(self.handle.node_fit_failures(pod, n)) or 'no fit'}"
                for n in others[:3]
            ]
            more = f" and {len(others) - 3} more" if len(others) > 3 else ""
            out.append(f"nodeFit: fits no other node ({', '.join(misfits) or 'no other ready node'}{more})")
        match = self._namespace_match
        if match is not None:
            ns = snapshot.namespace(pod.namespace)
            if ns is None or not match(ns.metadata.labels or {}):
                out.append(f"namespace {pod.namespace} does not match namespaceLabelSelector")
        return out


if TYPE_CHECKING:  # mypy checks the class against what it serves (upstream: var _ DeschedulePlugin = &X{})
    from desched.framework import (
        CycleEndHook,
        CycleStartHook,
        ExplainsFilter,
        ExplainsPreEvictionFilter,
        FilterPlugin,
        PreEvictionFilterPlugin,
    )

    _filter_plugin: type[FilterPlugin] = DefaultEvictor
    _pre_eviction_filter_plugin: type[PreEvictionFilterPlugin] = DefaultEvictor
    _cycle_start_hook: type[CycleStartHook] = DefaultEvictor
    _cycle_end_hook: type[CycleEndHook] = DefaultEvictor
    _explains_filter: type[ExplainsFilter] = DefaultEvictor
    _explains_pre_eviction_filter: type[ExplainsPreEvictionFilter] = DefaultEvictor
