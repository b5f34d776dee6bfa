"""RemovePodsViolatingTopologySpreadConstraint: rebalance pods that break topology spread constraints."""

from desched.plugins.removepodsviolatingtopologyspreadconstraint.args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
)
from desched.plugins.removepodsviolatingtopologyspreadconstraint.plugin import (
    RemovePodsViolatingTopologySpreadConstraint,
)

__all__ = ["RemovePodsViolatingTopologySpreadConstraint", "RemovePodsViolatingTopologySpreadConstraintArgs"]
