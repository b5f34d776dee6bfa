"""``desched simulate``'s engine: descheduling cycles on a snapshot, each cycle's evicted pods placed
again as kube-scheduler would (:mod:`desched.scheduling.placement`), and the cluster pictured
before the first cycle and after the last.

:mod:`.driver` runs the cycles (:func:`simulate`), :mod:`.replacements` makes the pods the
controllers re-create, :mod:`.results` holds what became of them, :mod:`.picture` the before/after
picture.
"""

from desched.simulation.driver import EvictionRecorder, ProgressFn, simulate
from desched.simulation.picture import (
    VIOLATION_KINDS,
    ClusterPicture,
    ConstraintSkew,
    NodeUsage,
    Stats,
    cluster_picture,
)
from desched.simulation.results import (
    GONE,
    PENDING,
    PLACED,
    THRASH_RE_EVICTED,
    THRASH_SAME_NODE,
    CyclePlacement,
    PodPlacement,
    Simulation,
    Thrash,
)

__all__ = [
    "GONE",
    "PENDING",
    "PLACED",
    "THRASH_RE_EVICTED",
    "THRASH_SAME_NODE",
    "VIOLATION_KINDS",
    "ClusterPicture",
    "ConstraintSkew",
    "CyclePlacement",
    "EvictionRecorder",
    "NodeUsage",
    "PodPlacement",
    "ProgressFn",
    "Simulation",
    "Stats",
    "Thrash",
    "cluster_picture",
    "simulate",
]
