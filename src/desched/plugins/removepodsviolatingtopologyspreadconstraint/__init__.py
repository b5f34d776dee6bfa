"""RemovePodsViolatingTopologySpreadConstraint: rebalance pods that break topology spread constraints."""

from desched.plugins.removepodsviolatingtopologyspreadconstraint.plugin import (
    RemovePodsViolatingTopologySpreadConstraint,
    RemovePodsViolatingTopologySpreadConstraintArgs,
)

__all__ = ["RemovePodsViolatingTopologySpreadConstraint", "RemovePodsViolatingTopologySpreadConstraintArgs"]
