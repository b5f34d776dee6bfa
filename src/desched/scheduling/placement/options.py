"""How the placement simulator scores and when it places: :class:`PlacementOptions`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from desched.k8s.topologyspread import SYSTEM_DEFAULTS, DefaultConstraints
from desched.scheduling.scorer import GenericScorerArgs

SCORE_DEFAULT: Final = "default"
SCORE_GENERIC: Final = "generic"

#: kube-scheduler's default profile: score plugins and their weights (those modelled here).
DEFAULT_WEIGHTS: Final[Mapping[str, int]] = {
    "NodeResourcesFit": 1,
    "NodeResourcesBalancedAllocation": 1,
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "InterPodAffinity": 2,
    "PodTopologySpread": 2,
}
#: The name the generic scorer's contribution goes by in ``PlacementOptions.weights()``.
GENERIC_PLUGIN: Final = "NodeResourcesGeneric"


# =============================================================================== options

#: Replacements are placed as each pod is evicted (the ReplicaSet controller re-creates a pod
#: within milliseconds and kube-scheduler places it while the cycle is still evicting).
ORDER_INTERLEAVED: Final = "interleaved"
#: Replacements are placed after the cycle's last eviction, higher priority first.
ORDER_AFTER_CYCLE: Final = "after-cycle"
#: An evicted pod holds its node's resources (and its anti-affinity) while it terminates.
TERMINATING_HOLD: Final = "hold"
#: An evicted pod is gone at once.
TERMINATING_GONE: Final = "gone"


@dataclass(frozen=True)
class PlacementOptions:
    """How replacements are scored (the filters are always kube-scheduler's)."""

    #: ``default`` (kube-scheduler's default profile) or ``generic`` (KEP-2143 scorer).
    score: str = SCORE_DEFAULT
    #: The generic scorer's args; required with ``score="generic"``.
    generic: GenericScorerArgs | None = None
    #: The generic score's weight: it stands in for NodeResourcesFit and BalancedAllocation (1 + 1).
    generic_weight: int = 2
    #: kube-scheduler's ``percentageOfNodesToScore``; None is its adaptive default, 100 all nodes.
    percentage_of_nodes_to_score: int | None = None
    #: When replacements are placed: :data:`ORDER_INTERLEAVED` (each as its pod is evicted, the
    #: rest of the cycle's evictions not made yet) or :data:`ORDER_AFTER_CYCLE` (all after the
    #: cycle, higher priority first).
    order: str = ORDER_INTERLEAVED
    #: What an evicted pod does while replacements are placed: :data:`TERMINATING_HOLD` (it stays
    #: on its node, terminating, holding its requests, until the cycle's placements are done, as
    #: during a kubelet's graceful termination) or :data:`TERMINATING_GONE` (it is gone at once,
    #: as kwok deletes it).
    terminating: str = TERMINATING_HOLD
    #: kube-scheduler's cluster-level default spread constraints (``--kube-scheduler-config``;
    #: default: its built-in system defaults, as a kube-scheduler without a configuration).
    default_constraints: DefaultConstraints = SYSTEM_DEFAULTS

    def __post_init__(self) -> None:
        if self.order not in (ORDER_INTERLEAVED, ORDER_AFTER_CYCLE):
            raise ValueError(f"order must be {ORDER_INTERLEAVED} or {ORDER_AFTER_CYCLE}, got {self.order!r}")
        if self.terminating not in (TERMINATING_HOLD, TERMINATING_GONE):
            raise ValueError(
                f"terminating must be {TERMINATING_HOLD} or {TERMINATING_GONE}, got {self.terminating!r}"
            )
        if self.score not in (SCORE_DEFAULT, SCORE_GENERIC):
            raise ValueError(f"score must be {SCORE_DEFAULT} or {SCORE_GENERIC}, got {self.score!r}")
        if self.score == SCORE_GENERIC and self.generic is None:
            raise ValueError("the generic score needs the scorer's args")
        if self.generic_weight < 1:
            raise ValueError(f"generic_weight must be at least 1, got {self.generic_weight}")
        pct = self.percentage_of_nodes_to_score
        if pct is not None and not 0 < pct <= 100:
            raise ValueError(f"percentage_of_nodes_to_score must be in 1..100, got {pct}")

    def weights(self) -> dict[str, int]:
        """The score plugins in use and their weights."""
        out = dict(DEFAULT_WEIGHTS)
        if self.score == SCORE_GENERIC:
            del out["NodeResourcesFit"]
            del out["NodeResourcesBalancedAllocation"]
            out = {GENERIC_PLUGIN: self.generic_weight, **out}
        return out
