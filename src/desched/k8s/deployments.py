"""Deployments as ``evictionPolicy.surge`` needs them: may one surge, and is its rollout done.

A surge moves a Deployment's pod by a rollout restart (the ``kubectl.kubernetes.io/restartedAt``
pod template annotation, as ``kubectl rollout restart`` sets it): the Deployment controller starts
the new pod and scales the old ReplicaSet down only when the new pod is available, which it can
do without taking the Deployment down only when the RollingUpdate strategy lets a pod surge.

The objects are the API's JSON (``apps/v1`` Deployment) as read for the one decision: desched
keeps no Deployments in its snapshots. The rules follow the Deployment controller
(``pkg/controller/deployment/util``): ``maxSurge`` defaults to 25% and a percentage of the desired
replicas is rounded UP (``GetScaledValueFromIntOrPercent(maxSurge, replicas, true)``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

#: The pod template annotation ``kubectl rollout restart`` sets to the time of the restart.
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
#: The API server's default ``maxSurge`` of a RollingUpdate Deployment.
DEFAULT_MAX_SURGE = "25%"

_PERCENT = re.compile(r"(\d+)%")


def _int(value: Any) -> int:
    return value if type(value) is int else 0


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def desired_replicas(deployment: Mapping[str, Any]) -> int:
    """``spec.replicas`` (1 when unset, as the API server defaults it)."""
    replicas = _dict(deployment.get("spec")).get("replicas")
    return 1 if replicas is None else _int(replicas)


def resolve_max_surge(value: Any, replicas: int) -> int | None:
    """``maxSurge`` as a number of pods: an int as is, a percentage of ``replicas`` rounded up;
    None when the value is neither (the API server would not have accepted it)."""
    if value is None:
        value = DEFAULT_MAX_SURGE
    if type(value) is int:
        return value if value >= 0 else None
    if isinstance(value, str):
        m = _PERCENT.fullmatch(value.strip())
        if m is not None:
            return math.ceil(int(m.group(1)) * replicas / 100)
        if value.strip().isdigit():
            return int(value.strip())
    return None


def surge_refusal(deployment: Mapping[str, Any], max_replicas: int) -> str | None:
    """Why the Deployment's pod cannot be surged (it is then evicted as usual); None: it can."""
    meta, spec, status = (_dict(deployment.get(k)) for k in ("metadata", "spec", "status"))
    replicas = desired_replicas(deployment)
    if replicas < 1:
        return "the Deployment wants no replicas"
    if replicas > max_replicas:
        return f"the Deployment wants {replicas} replicas (surge maxReplicas: {max_replicas})"
    strategy = _dict(spec.get("strategy"))
    kind = strategy.get("type") or "RollingUpdate"
    if kind != "RollingUpdate":
        return f"the Deployment's strategy is {kind}, not RollingUpdate"
    raw = _dict(strategy.get("rollingUpdate")).get("maxSurge")
    surge = resolve_max_surge(raw, replicas)
    if surge is None:
        return f"the Deployment's maxSurge {raw!r} is not a number or a percentage"
    if surge < 1:
        return (
            f"the Deployment's maxSurge ({raw if raw is not None else DEFAULT_MAX_SURGE}) lets no pod surge"
        )
    if spec.get("paused") is True:
        return "the Deployment is paused"
    generation, observed = _int(meta.get("generation")), _int(status.get("observedGeneration"))
    if observed < generation:
        return f"a rollout is in progress (observedGeneration {observed} < generation {generation})"
    counts = {
        name: _int(status.get(name))
        for name in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")
    }
    if any(v != replicas for v in counts.values()):
        seen = ", ".join(f"{k} {v}" for k, v in counts.items())
        return f"a rollout is in progress or a pod is not available ({seen}; desired {replicas})"
    return None


def rollout_done(deployment: Mapping[str, Any], generation: int) -> bool:
    """The rollout of ``generation`` (the one a surge's restart made) is complete: observed, every
    desired replica updated and available, and no old pod left counted (status.replicas)."""
    meta, status = _dict(deployment.get("metadata")), _dict(deployment.get("status"))
    replicas = desired_replicas(deployment)
    return (
        _int(meta.get("generation")) >= generation
        and _int(status.get("observedGeneration")) >= generation
        and _int(status.get("updatedReplicas")) >= replicas
        and _int(status.get("availableReplicas")) >= replicas
        and _int(status.get("replicas")) <= replicas
    )


def describe_rollout(deployment: Mapping[str, Any]) -> str:
    """The rollout's counts, for a failed surge's message."""
    status = _dict(deployment.get("status"))
    return (
        f"{_int(status.get('updatedReplicas'))} updated, {_int(status.get('availableReplicas'))} available "
        f"of {desired_replicas(deployment)} desired ({_int(status.get('replicas'))} pods in all)"
    )


def restart_patch(now: datetime, resource_version: str) -> dict[str, Any]:
    """The merge patch of a rollout restart at ``now`` (RFC 3339, as kubectl writes it); the
    resourceVersion makes it fail (409) if the Deployment changed since it was judged."""
    stamp = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "metadata": {"resourceVersion": resource_version},
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}},
    }
