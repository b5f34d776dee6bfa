"""Keeping the evictionPolicy's memory across restarts and leader changes, in a ConfigMap.

The cooldown's moves, the ``rateLimits`` buckets and the workloads waiting for a replacement
(:mod:`desched.framework.safetystate`) are kept in the ConfigMap ``desched-safety-state`` (key
``state.json``) in desched's own namespace, so that a restarted desched, a CronJob's next run or a
new leader goes on where the last one stopped. Only when the policy has one of those rules on: any
other policy reads and writes nothing (and needs no more RBAC than upstream's).

Why a ConfigMap: it exists with or without leader election (a Lease only with it, and the elector
rewrites the Lease every few seconds), ``kubectl get configmap desched-safety-state -o yaml`` shows
it, and a namespaced Role limited to that one name grants it. Recomputing from eviction Events
would need ``list events`` cluster-wide, and Events expire (1 h by default).

The namespace: ``--safety-state-configmap NAMESPACE/NAME`` when given with a namespace, else
``$POD_NAMESPACE``, else the namespace of the pod's ServiceAccount (in-cluster), else the leader
election Lease's (``--leader-elect-resource-namespace``, kube-system by default).

- Loading: before the first cycle, and again whenever this replica becomes the leader; bounded in
  time; an object that is absent starts an empty state; one that cannot be read (no access, the
  server away) or does not hold a state (another format, corrupted) is reported in one warning line
  and the run goes on with an empty state, never a traceback.
- Saving: after every cycle that changed the state (a cycle that evicted nothing, the first one
  too, writes nothing), by the leader (or the only replica), never in
  dry-run (no eviction happened). Read, merge, write with the ``resourceVersion`` read (optimistic
  concurrency): when someone else wrote the object since this replica last read or wrote it (a former
  leader's last cycle, or a load that failed) its entries are merged in first; a conflict (409) starts
  over, at most :data:`ATTEMPTS` times, all within :data:`SAVE_SECONDS`. A save that fails is logged
  and counted (``descheduler_safety_state_saves_total{result="failed"}``) and retried after the next
  cycle; it never stops the run.
- Size: expired entries are left out of every save; past :data:`desched.framework.safetystate.MAX_BYTES`
  the entries touched longest ago are left out too, with a warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from desched.framework import safetystate
from desched.framework.safety import Safety
from desched.kube.client import ApiError, request

log = logging.getLogger(__name__)

DEFAULT_NAME = "desched-safety-state"
KEY = "state.json"
#: Read-merge-write rounds a save tries when the object changed under it (409).
ATTEMPTS = 3
#: A load or a save gives up after this long (the next cycle tries again).
SAVE_SECONDS = 15.0
#: One request's bound.
REQUEST_SECONDS = 5.0
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def state_location(
    flag: str, fallback_namespace: str, *, sa_file: Path = SERVICE_ACCOUNT_NAMESPACE
) -> tuple[str, str]:
    """(namespace, name) of the ConfigMap: see the module docstring for the order."""
    namespace, _, name = flag.rpartition("/")
    if namespace:
        return namespace, name
    env = os.environ.get("POD_NAMESPACE", "").strip()
    if env:
        return env, name
    try:
        from_sa = sa_file.read_text().strip()
    except OSError:
        from_sa = ""
    return from_sa or fallback_namespace, name


@dataclass
class _Object:
    resource_version: str
    text: str | None


class StateStore:
    """The ConfigMap, read and written with its resourceVersion."""

    def __init__(self, api: Any, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name

    @property
    def where(self) -> str:
        return f"ConfigMap {self.namespace}/{self.name}"

    @property
    def _path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/configmaps/{self.name}"

    async def read(self) -> _Object | None:
        try:
            raw = await request(self.api, "GET", self._path, timeout=REQUEST_SECONDS)
        except ApiError as e:
            if e.status == 404:
                return None
            raise
        obj = json.loads(raw)
        data = obj.get("data") or {}
        text = data.get(KEY)
        return _Object(
            str(obj["metadata"].get("resourceVersion", "")), text if isinstance(text, str) else None
        )

    async def write(self, text: str, resource_version: str | None) -> str:
        """PUT with ``resource_version`` (or POST when None); the new resourceVersion.
        ApiError 409 when the object changed (or appeared) meanwhile."""
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "desched"},
                "annotations": {
                    "desched.io/what": "the evictionPolicy's cooldowns, rate-limit buckets and "
                    "awaited replacements, kept across restarts and leader changes"
                },
            },
            "data": {KEY: text},
        }
        if resource_version is None:
            path = f"/api/v1/namespaces/{self.namespace}/configmaps"
            raw = await request(self.api, "POST", path, body=body, timeout=REQUEST_SECONDS)
        else:
            body["metadata"]["resourceVersion"] = resource_version
            raw = await request(self.api, "PUT", self._path, body=body, timeout=REQUEST_SECONDS)
        return str(json.loads(raw)["metadata"].get("resourceVersion", ""))


class SafetyPersistence:
    """Loads the state into a :class:`Safety` and saves it back (see the module docstring)."""

    def __init__(
        self,
        safety: Safety,
        store: StateStore,
        clock: Callable[[], datetime],
        *,
        on_save: Callable[[str], None] | None = None,
    ) -> None:
        self.safety = safety
        self.store = store
        self.clock = clock
        self.on_save = on_save
        #: the resourceVersion this replica last read or wrote ("" : none yet, merge what is there)
        self._known: str | None = None
        #: the state's change count when it was last saved: what a fresh state has (nothing to
        #: write until a cycle changes it; a cycle that evicts nothing writes nothing)
        self._saved_changes = safety.changes
        #: a load succeeded (or found nothing) since the last call to forget()
        self.loaded = False

    def forget(self) -> None:
        """This replica is no longer the leader: what the object holds is merged in again before
        its next cycle (a leader elsewhere may have written it)."""
        self._known = None
        self.loaded = False

    async def load(self) -> None:
        """Merge the stored state in; a failure is one warning line, never an exception."""
        try:
            obj = await asyncio.wait_for(self.store.read(), SAVE_SECONDS)
        except Exception as e:  # the run goes on with what it has: an empty state at start
            log.warning(
                "could not read the safety state from %s (%s): starting without it; "
                "the next save merges it in",
                self.store.where,
                _reason(e),
            )
            return
        self.loaded = True
        if obj is None:
            self._known = None
            log.info("no safety state in %s yet: starting with an empty one", self.store.where)
            return
        taken = self._merge(obj)
        if taken is not None:
            log.info("loaded the safety state from %s: %d entries", self.store.where, taken)

    def _merge(self, obj: _Object) -> int | None:
        """Merge the object's state in and remember its version; None if it holds no state."""
        self._known = obj.resource_version
        try:
            if obj.text is None:
                raise safetystate.StateError(f"no {KEY} key")
            state = safetystate.decode(obj.text)
        except safetystate.StateError as e:
            log.warning(
                "%s does not hold a desched safety state (%s): ignoring it; the next save replaces it",
                self.store.where,
                e,
            )
            return None
        return self.safety.restore(state, self.clock())

    @property
    def dirty(self) -> bool:
        return self.safety.changes != self._saved_changes

    async def save(self) -> bool:
        """Save if the state changed since the last save; False when the save failed."""
        if not self.dirty:
            return True
        changes = self.safety.changes
        try:
            await asyncio.wait_for(self._save(), SAVE_SECONDS)
        except Exception as e:
            log.warning(
                "could not save the safety state to %s (%s): trying again after the next cycle",
                self.store.where,
                _reason(e),
            )
            if self.on_save is not None:
                self.on_save("failed")
            return False
        self._saved_changes = changes
        if self.on_save is not None:
            self.on_save("saved")
        return True

    async def _save(self) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            obj = await self.store.read()
            if obj is not None and obj.resource_version != self._known:
                self._merge(obj)  # written by someone else since we last read or wrote it
            now = self.clock()
            encoded = safetystate.encode(self.safety.state(now), now)
            if encoded.dropped:
                log.warning(
                    "the safety state exceeds %d KiB: its %d oldest entries are not saved "
                    "(a restart forgets them)",
                    safetystate.MAX_BYTES // 1024,
                    encoded.dropped,
                )
            try:
                self._known = await self.store.write(
                    encoded.text, obj.resource_version if obj is not None else None
                )
                self.loaded = True
                return
            except ApiError as e:
                if e.status != 409 or attempt == ATTEMPTS:
                    raise
                log.info("%s changed while saving: reading it again", self.store.where)


def _reason(e: BaseException) -> str:
    if isinstance(e, TimeoutError | asyncio.TimeoutError):
        return f"no answer within {SAVE_SECONDS:g}s"
    return str(e) or type(e).__name__
