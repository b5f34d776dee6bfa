"""``evictionPolicy.surge`` for real: a rollout restart instead of an eviction, and its follow-up.

For a pod whose owner chain is ReplicaSet -> Deployment, :func:`try_surge` reads both (one GET
each), asks :func:`desched.k8s.deployments.surge_refusal` whether the Deployment may surge, asks
the Eviction API in dry-run (``?dryRun=All``) whether the pod's PodDisruptionBudgets allow one
disruption (the Deployment controller does not consult PDBs, so desched does, as an eviction
would), then patches the pod template's ``kubectl.kubernetes.io/restartedAt`` annotation, with the
resourceVersion it judged (a Deployment changed meanwhile answers 409: not surged).

Its answer is one of: :data:`NOT_ELIGIBLE` (the pod is evicted as usual), a refusal (a string:
nothing happened, as a refused eviction), :class:`~desched.framework.evictor.OutcomeUnknown` (the
patch may have been applied) or a :class:`Started` surge. A dry run reads and judges, asks the
PDBs, and patches nothing.

:func:`follow_surge` then follows the rollout, at most ``timeout``: done when the Deployment
observed the restart's generation, every desired replica is updated and available, no old pod is
counted, and the old pod is gone; failed otherwise. A failed surge is reported and counted, never
retried by desched (the Deployment controller goes on with the rollout it started).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from kubernetes_asyncio import client

from desched.api.evictionpolicy import Surge, format_duration
from desched.framework.evictor import OutcomeUnknown
from desched.k8s import deployments
from desched.k8s import pods as k8s_pods
from desched.k8s.objects import Pod
from desched.kube import client as kube
from desched.kube.client import ApiError


class NotEligible:
    def __repr__(self) -> str:
        return "NOT_ELIGIBLE"


#: :func:`try_surge`'s answer for a pod that cannot surge: it is evicted as usual.
NOT_ELIGIBLE: Final = NotEligible()

#: How often :func:`follow_surge` reads the Deployment and the old pod.
FOLLOW_POLL_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Started:
    """A rollout restart desched made (or, in a dry run, would make) in place of an eviction."""

    namespace: str
    deployment: str
    #: the Deployment's generation after the restart (the rollout to follow)
    generation: int
    pod: str
    pod_uid: str
    node: str
    profile: str
    plugin: str
    timeout: float
    started: float
    dry_run: bool = False

    @property
    def target(self) -> str:
        return f"Deployment {self.namespace}/{self.deployment}"


@dataclass(frozen=True, slots=True)
class Followed:
    """How a surge ended: ``succeeded`` or ``failed`` (``detail`` says what was seen)."""

    surge: Started
    succeeded: bool
    detail: str
    seconds: float


SurgeAnswer = NotEligible | str | OutcomeUnknown | Started


async def _get(api: client.ApiClient, path: str, timeout: float) -> Mapping[str, Any]:
    raw = await kube.request(api, "GET", path, timeout=timeout)
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


def _controller(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            return str(ref.get("kind", "")), str(ref.get("name", ""))
    return None


async def try_surge(
    api: client.ApiClient,
    pod: Pod,
    surge: Surge,
    *,
    profile: str,
    plugin: str,
    dry_run: bool,
    timeout: float,
    already: set[str],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    clock: Callable[[], float] = time.monotonic,
) -> SurgeAnswer:
    """Surge ``pod`` if it may (see the module docstring); ``already`` holds the Deployments
    (``ns/name``) surged in this cycle: a Deployment is surged at most once a cycle."""
    ref = k8s_pods.controller_ref(pod)
    if ref is None or ref.kind != "ReplicaSet":
        return NOT_ELIGIBLE
    ns = pod.metadata.namespace
    try:
        rs = await _get(api, f"/apis/apps/v1/namespaces/{ns}/replicasets/{ref.name}", timeout)
    except ApiError as e:
        return (
            NOT_ELIGIBLE if e.status == 404 else f"not surged: could not read ReplicaSet {ns}/{ref.name}: {e}"
        )
    owner = _controller(rs)
    if owner is None or owner[0] != "Deployment":
        return NOT_ELIGIBLE
    name = owner[1]
    key = f"{ns}/{name}"
    if key in already:
        return f"not surged: Deployment {key} was already surged in this cycle"
    try:
        dep = await _get(api, f"/apis/apps/v1/namespaces/{ns}/deployments/{name}", timeout)
    except ApiError as e:
        return NOT_ELIGIBLE if e.status == 404 else f"not surged: could not read Deployment {key}: {e}"
    if deployments.surge_refusal(dep, surge.max_replicas) is not None:
        return NOT_ELIGIBLE
    # the PDBs' budget, as the Eviction API judges it, without evicting
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.metadata.name, "namespace": ns},
    }
    try:
        await kube.request(
            api,
            "POST",
            f"/api/v1/namespaces/{ns}/pods/{pod.metadata.name}/eviction",
            params=[("dryRun", "All")],
            body=body,
            timeout=timeout,
        )
    except ApiError as e:
        return f"not surged: {e}"
    meta = dep.get("metadata") or {}
    generation = int(meta.get("generation") or 0)
    if not dry_run:
        patch = deployments.restart_patch(now(), str(meta.get("resourceVersion", "")))
        try:
            raw = await kube.request(
                api,
                "PATCH",
                f"/apis/apps/v1/namespaces/{ns}/deployments/{name}",
                body=patch,
                timeout=timeout,
                content_type="application/merge-patch+json",
            )
        except ApiError as e:
            if e.status >= 500:
                return OutcomeUnknown(f"rollout restart of Deployment {key}: {e}")
            return f"not surged: rollout restart of Deployment {key} refused: {e}"
        except TimeoutError:
            return OutcomeUnknown(f"rollout restart of Deployment {key}: no answer within {timeout:.1f}s")
        patched = json.loads(raw)
        generation = int(
            ((patched.get("metadata") or {}) if isinstance(patched, dict) else {}).get("generation") or 0
        )
    already.add(key)
    return Started(
        ns,
        name,
        generation,
        pod.metadata.name,
        pod.metadata.uid,
        pod.spec.node_name,
        profile,
        plugin,
        surge.timeout.total_seconds(),
        clock(),
        dry_run,
    )


async def follow_surge(
    api: client.ApiClient,
    surge: Started,
    *,
    poll: float = FOLLOW_POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Followed:
    """Follow ``surge``'s rollout until it is done or its timeout has passed (see the module)."""
    ns = surge.namespace
    seen = "the Deployment was not read"
    pod_gone = False
    while True:
        try:
            dep = await _get(api, f"/apis/apps/v1/namespaces/{ns}/deployments/{surge.deployment}", 10.0)
            done = deployments.rollout_done(dep, surge.generation)
            seen = deployments.describe_rollout(dep)
            if not pod_gone:
                try:
                    old = await _get(api, f"/api/v1/namespaces/{ns}/pods/{surge.pod}", 10.0)
                    pod_gone = (old.get("metadata") or {}).get("uid") != surge.pod_uid
                except ApiError as e:
                    if e.status != 404:
                        raise
                    pod_gone = True
            if done and pod_gone:
                return Followed(surge, True, seen, clock() - surge.started)
        except ApiError as e:
            if e.status == 404:
                return Followed(surge, False, "the Deployment was deleted", clock() - surge.started)
            seen = f"could not read it: {e}"
        except (OSError, TimeoutError, ValueError) as e:
            seen = f"could not read it: {type(e).__name__}: {e}"
        left = surge.started + surge.timeout - clock()
        if left <= 0:
            gone = "the old pod is gone" if pod_gone else f"the old pod {ns}/{surge.pod} is still there"
            return Followed(
                surge,
                False,
                f"not done after {format_duration(timedelta(seconds=surge.timeout))}: {seen}; {gone}",
                clock() - surge.started,
            )
        await asyncio.sleep(min(poll, left))
