"""The evictionPolicy's memory across cycles, as it is kept across restarts and leader changes.

:class:`desched.framework.safety.Safety` remembers three things between cycles: the moves the
``cooldown`` counts, the ``rateLimits`` token buckets and the workloads waiting for a replacement
(``waitForReplacement``). :class:`SafetyState` is that memory as plain records, and this module turns
it into the JSON document ``desched run`` keeps in a ConfigMap (:mod:`desched.runtime.statestore`)
and back. Talking to the API server is not done here (the framework never reaches the transport).

The document (key ``state.json``)::

    {"version": 1, "savedAt": "2026-11-25T01:00:00Z",
     "moves": [{"workload": ["ns", "ReplicaSet", "web-7d9"], "at": ["2026-11-25T00:58:00Z"]}],
     "buckets": [{"scope": "namespace", "key": "ns", "tokens": 0.0,
                  "updated": "2026-11-25T00:58:00Z", "evictionsPerMinute": 1.0, "burst": 1}],
     "waiting": [{"workload": ["ns", "ReplicaSet", "web-7d9"], "since": "2026-11-25T00:58:00Z",
                  "pod": "ns/web-7d9-abcde", "before": 3}]}

It is bounded (:data:`MAX_BYTES`, under a ConfigMap's 1 MiB): past the bound the entries touched
longest ago are left out (those workloads lose their memory at the next restart, not in the running
process). A document that does not parse, has another ``version`` or a field of the wrong shape is
refused as a whole with a :class:`StateError` naming the reason (the caller starts afresh).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from desched.api.evictionpolicy import Rate, RateScope

#: The document's format; another value is refused (a newer desched's state is not guessed at).
VERSION = 1
#: The JSON document's size bound: a ConfigMap holds at most 1 MiB, metadata included.
MAX_BYTES = 900 * 1024

#: (namespace, owner kind, owner name), as desched.framework.safety.WorkloadKey
Workload = tuple[str, str, str]


@dataclass(frozen=True, slots=True)
class Move:
    """The cycles (their start) that moved a workload, oldest first."""

    workload: Workload
    at: tuple[datetime, ...]


@dataclass(frozen=True, slots=True)
class Bucket:
    """A token bucket: ``tokens`` left at ``updated``, refilled at ``rate``."""

    scope: RateScope
    key: str
    tokens: float
    updated: datetime
    rate: Rate


@dataclass(frozen=True, slots=True)
class Waiting:
    """A workload waiting for the replacement of ``pod`` (evicted at ``since``), which had
    ``before`` available pods before that eviction."""

    workload: Workload
    since: datetime
    pod: str
    before: int


@dataclass(slots=True)
class SafetyState:
    moves: list[Move] = field(default_factory=list)
    buckets: list[Bucket] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.moves) + len(self.buckets) + len(self.waiting)


class StateError(ValueError):
    """The stored document is not a safety state this desched reads."""


# ---------------------------------------------------------------------------- wire


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class _MoveWire(_Wire):
    workload: tuple[str, str, str]
    at: list[AwareDatetime] = Field(min_length=1)


class _BucketWire(_Wire):
    scope: Literal["workload", "namespace", "cluster"]
    key: str
    tokens: float = Field(allow_inf_nan=False)
    updated: AwareDatetime
    evictions_per_minute: float = Field(gt=0, alias="evictionsPerMinute", allow_inf_nan=False)
    burst: int = Field(ge=1)


class _WaitingWire(_Wire):
    workload: tuple[str, str, str]
    since: AwareDatetime
    pod: str
    before: int = Field(ge=0)


class _StateWire(_Wire):
    version: Literal[1]
    saved_at: AwareDatetime | None = Field(default=None, alias="savedAt")
    moves: list[_MoveWire] = Field(default_factory=list)
    buckets: list[_BucketWire] = Field(default_factory=list)
    waiting: list[_WaitingWire] = Field(default_factory=list)


def _ts(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _move(m: Move) -> dict[str, object]:
    return {"workload": list(m.workload), "at": [_ts(t) for t in m.at]}


def _bucket(b: Bucket) -> dict[str, object]:
    return {
        "scope": b.scope.value,
        "key": b.key,
        "tokens": round(b.tokens, 6),
        "updated": _ts(b.updated),
        "evictionsPerMinute": b.rate.per_minute,
        "burst": b.rate.burst,
    }


def _waiting(w: Waiting) -> dict[str, object]:
    return {"workload": list(w.workload), "since": _ts(w.since), "pod": w.pod, "before": w.before}


@dataclass(frozen=True, slots=True)
class Encoded:
    text: str
    #: entries left out to stay under the bound (the oldest)
    dropped: int


def encode(state: SafetyState, now: datetime, limit: int = MAX_BYTES) -> Encoded:
    """The document for ``state``, at most ``limit`` bytes: the entries touched longest ago go first."""
    entries: list[tuple[datetime, str, str]] = []  # (last touched, section, entry's JSON)
    entries += [(m.at[-1], "moves", json.dumps(_move(m), separators=(",", ":"))) for m in state.moves]
    entries += [(b.updated, "buckets", json.dumps(_bucket(b), separators=(",", ":"))) for b in state.buckets]
    entries += [(w.since, "waiting", json.dumps(_waiting(w), separators=(",", ":"))) for w in state.waiting]
    entries.sort(key=lambda e: e[0], reverse=True)
    head = f'{{"version":{VERSION},"savedAt":"{_ts(now)}",'
    size = len(head) + len('"moves":[],"buckets":[],"waiting":[]}')
    kept: dict[str, list[str]] = {"moves": [], "buckets": [], "waiting": []}
    dropped = 0
    for _, section, text in entries:
        cost = len(text.encode()) + 1  # and its comma
        if size + cost > limit:
            dropped += 1
            continue
        size += cost
        kept[section].append(text)
    body = ",".join(f'"{name}":[{",".join(items)}]' for name, items in kept.items())
    return Encoded(head + body + "}", dropped)


def decode(text: str) -> SafetyState:
    """The state in a stored document, or :class:`StateError` naming what is wrong with it."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise StateError(f"not JSON: {e}") from None
    if not isinstance(data, dict):
        raise StateError("not a JSON object")
    if data.get("version") != VERSION:
        raise StateError(f"version {json.dumps(data.get('version'))[:40]}, this desched reads {VERSION}")
    try:
        wire = _StateWire.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise StateError(f"{where}: {first['msg']}") from None
    return SafetyState(
        moves=[Move(m.workload, tuple(sorted(m.at))) for m in wire.moves],
        buckets=[
            Bucket(RateScope(b.scope), b.key, b.tokens, b.updated, Rate(b.evictions_per_minute, b.burst))
            for b in wire.buckets
        ],
        waiting=[Waiting(w.workload, w.since, w.pod, w.before) for w in wire.waiting],
    )
