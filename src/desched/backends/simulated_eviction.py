"""The simulated eviction backend: answers each eviction as the eviction API would.

``desched simulate`` evicts nothing, but it must predict what ``desched run`` does, and the API
refuses evictions that PodDisruptionBudgets forbid. :class:`SimulatedEvictionApi` keeps, for the
cycle, each PDB's budget (from its status, or computed as the disruption controller would:
:mod:`desched.k8s.disruption`) and spends it eviction by eviction, so that the third eviction
under a budget of two is refused with the same 429 a live run gets; the plugin goes on with its
next pod, and the refusal is counted and reported as a live one is.

Budgets are taken from the pods as they were when the backend was made (the cycle's start), so
evictions and placements during the cycle change them only through what the API itself does:
one ``disruptionsAllowed`` spent per eviction (the disruption controller's later recount is not
modelled within a cycle). What the cycle sees after an eviction is not decided here: the framework
takes the evicted pod out of the cycle's working snapshot, whatever the backend.

Beside it, the two simplest backends, for tests and for tools that need no PDB answers:
:class:`SimulatedBackend` lets every eviction through, :class:`RecordingBackend` does too and
remembers each request in order (upstream's tests' fake clientset). They live here, beside the
live backend's simulated twin, so that every backend of the tree is found in ``desched.backends``.
"""

from __future__ import annotations

import msgspec

from desched.api.evictionpolicy import Surge
from desched.cluster.snapshot import ClusterSnapshot
from desched.framework.evictor import EvictAnswer, EvictionBackend, EvictionRequest, Surged
from desched.k8s import deployments, disruption
from desched.k8s import labels as k8s_labels
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import LabelSelector, Pod, PodDisruptionBudget


class SimulatedBackend:
    """Evicts nothing for real and lets every eviction through (no PodDisruptionBudgets: see
    :class:`SimulatedEvictionApi` for the eviction API's answers). The framework takes the pod
    out of the cycle's working snapshot, as for every backend."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot

    def evict(self, pod: Pod, request: EvictionRequest) -> str | None:
        return None


class RecordingBackend:
    """Lets every eviction through and remembers each one asked for, in order (the fake
    clientset of upstream's tests: the pods stay listed in the snapshot the test holds)."""

    def __init__(self) -> None:
        self.requests: list[tuple[Pod, EvictionRequest]] = []

    @property
    def evicted(self) -> list[tuple[str, str]]:
        """(namespace, name) of each pod asked for, in order."""
        return [(p.metadata.namespace, p.metadata.name) for p, _ in self.requests]

    def evict(self, pod: Pod, request: EvictionRequest) -> str | None:
        self.requests.append((pod, request))
        return None


class SimulatedEvictionApi:
    """An eviction backend for simulations: PDB answers as the API's; ``then`` (optional) is told
    about every eviction the API would have let through (e.g. the placement simulator's recorder)."""

    def __init__(self, snapshot: ClusterSnapshot, then: EvictionBackend | None = None) -> None:
        self.snapshot = snapshot
        self.then = then
        self._budgets: dict[tuple[str, str], disruption.Budget] = {}
        #: The pods of each namespace that has PDBs, as the cycle started.
        self._pods_by_namespace: dict[str, list[Pod]] = {
            ns: snapshot.pods_in_namespace(ns) for ns in {p.metadata.namespace for p in snapshot.pdbs}
        }
        #: Those pods by namespace and label, then value (see :meth:`_candidates`).
        self._by_label: dict[tuple[str, str], dict[str, list[Pod]]] = {}
        #: (namespace, name, HTTP code) of each refusal, in order.
        self.refusals: list[tuple[str, str, int]] = []
        #: the Deployments (``ns/name``) surged in this cycle (``evictionPolicy.surge``)
        self._surged: set[str] = set()

    def budget(self, pdb: PodDisruptionBudget) -> disruption.Budget:
        """The PDB's budget as it stands (what is left of it after this cycle's evictions)."""
        key = (pdb.metadata.namespace, pdb.metadata.name)
        found = self._budgets.get(key)
        if found is None:
            match = k8s_labels.compile_label_selector(pdb.spec.selector, none_matches=False)
            pods = [p for p in self._candidates(key[0], pdb.spec.selector) if match(p.metadata.labels or {})]
            found = self._budgets[key] = disruption.compute_budget(pdb, pods)
        return found

    def _candidates(self, namespace: str, selector: LabelSelector | None) -> list[Pod]:
        """The namespace's pods a selector can match: those with its first matchLabels pair
        (by a per-label index made on demand, in the namespace's order), else all of them."""
        pods = self._pods_by_namespace.get(namespace, [])
        if selector is None or not selector.match_labels:
            return pods
        label, value = min(selector.match_labels.items())
        index = self._by_label.get((namespace, label))
        if index is None:
            index = self._by_label[(namespace, label)] = {}
            for p in pods:
                v = (p.metadata.labels or {}).get(label)
                if v is not None:
                    index.setdefault(v, []).append(p)
        return index.get(value, [])

    def surge_target(self, pod: Pod, surge: Surge) -> str | None:
        """The Deployment (``ns/name``) ``run`` would restart in place of evicting ``pod``, judged
        on the snapshot's ReplicaSets and Deployments as :mod:`desched.backends.surge` judges the
        live ones (None: the pod is evicted; so is one whose objects the snapshot lacks)."""
        ref = k8s_pods.controller_ref(pod)
        if ref is None or ref.kind != "ReplicaSet":
            return None
        ns = pod.metadata.namespace
        rs = self.snapshot.controller(ns, "ReplicaSet", ref.name)
        owner = next((r for r in (rs.metadata.owner_references or ()) if r.controller), None) if rs else None
        if owner is None or owner.kind != "Deployment":
            return None
        dep = self.snapshot.deployment(ns, owner.name)
        if dep is None or deployments.surge_refusal(msgspec.to_builtins(dep), surge.max_replicas):
            return None
        return f"{ns}/{owner.name}"

    def evict(self, pod: Pod, request: EvictionRequest) -> EvictAnswer:
        target = self.surge_target(pod, request.surge) if request.surge is not None else None
        if target is not None and target in self._surged:
            return f"not surged: Deployment {target} was already surged in this cycle"
        answer = disruption.answer_eviction(pod, self.snapshot.pdbs_for_pod(pod), self.budget)
        if not answer.evicted:
            self.refusals.append((pod.metadata.namespace, pod.metadata.name, answer.code))
            return answer.error()
        if answer.spends is not None:
            self._budgets[answer.spends] = self._budgets[answer.spends].spend()
        then = self.then.evict(pod, request) if self.then is not None else None
        if target is not None and then is None:
            self._surged.add(target)
            return Surged(f"Deployment {target}")
        return then
