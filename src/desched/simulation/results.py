"""What a simulation found: per cycle, its framework result, where each evicted pod's replacement
went (:class:`PodPlacement`) and the signs of thrashing; over all cycles, :class:`Simulation` with
the cluster before and after."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from desched.framework.framework import CycleResult
from desched.scheduling.placement import PlacementOptions
from desched.simulation.picture import ClusterPicture

PLACED: Final = "placed"
PENDING: Final = "pending"
GONE: Final = "gone"

THRASH_SAME_NODE: Final = "same-node"
THRASH_RE_EVICTED: Final = "re-evicted"


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """What became of one evicted pod (or of a replacement that was still Pending)."""

    cycle: int
    namespace: str
    #: The evicted pod.
    name: str
    evicted_from: str
    outcome: str
    #: The replacement's name ("" when gone).
    replacement: str = ""
    #: Where the replacement lands ("" unless placed).
    node: str = ""
    #: Pending: kube-scheduler's message; gone: why nothing replaces the pod.
    reason: str = ""
    priority: int = 0
    score: int | None = None
    #: ``profile/plugin`` that evicted it ("" for a retried pending replacement).
    evicted_by: str = ""
    #: A Pending replacement of an earlier cycle, tried again.
    retried: bool = False

    @property
    def same_node(self) -> bool:
        return self.outcome == PLACED and self.node == self.evicted_from


@dataclass(frozen=True, slots=True)
class Thrash:
    """A sign that the policy does not converge."""

    cycle: int
    #: :data:`THRASH_SAME_NODE` or :data:`THRASH_RE_EVICTED`.
    kind: str
    namespace: str
    name: str
    node: str
    detail: str


@dataclass
class CyclePlacement:
    cycle: int
    result: CycleResult
    placements: list[PodPlacement] = field(default_factory=list)
    thrashing: list[Thrash] = field(default_factory=list)
    seconds: float = 0.0

    def outcomes(self, outcome: str) -> list[PodPlacement]:
        return [p for p in self.placements if p.outcome == outcome]


@dataclass
class Simulation:
    """Cycles, where their evicted pods went, and the cluster before the first and after the last."""

    cycles: list[CyclePlacement]
    before: ClusterPicture
    after: ClusterPicture
    options: PlacementOptions
    placement: bool
    #: Why the cycles stopped.
    stop_reason: str
    #: A cycle evicted nothing: the policy reached a fixed point.
    converged: bool

    @property
    def placements(self) -> list[PodPlacement]:
        return [p for c in self.cycles for p in c.placements]

    @property
    def thrashing(self) -> list[Thrash]:
        return [t for c in self.cycles for t in c.thrashing]
