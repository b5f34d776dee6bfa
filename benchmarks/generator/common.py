"""What every part of the generator shares: the spec, the clock, the one random source and what is
drawn from it, the tallies, and the small JSON helpers.

Everything is drawn from one ``random.Random(seed)`` (:class:`Context`), in one order, so a spec
always gives the same bytes: a part that draws more, less or earlier changes every object after it.
"""

from __future__ import annotations

import calendar
import hashlib
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Bump whenever the output for a given spec changes: it keys the snapshot cache.
GENERATOR_VERSION = 1

#: Also in the cache key, so that editing the generator never serves a stale snapshot.
_SOURCE_HASH = hashlib.sha256(
    b"".join(p.read_bytes() for p in sorted(Path(__file__).resolve().parent.glob("*.py")))
).hexdigest()[:8]

#: The generated cluster's "now"; run cycles on it with this clock (``desched simulate --now``).
NOW = "2026-11-21T12:00:00Z"
_NOW_EPOCH = calendar.timegm(time.strptime(NOW, "%Y-%m-%dT%H:%M:%SZ"))

MIN_NODES = 20
REGION = "eu-west-1"
ZONES = (f"{REGION}a", f"{REGION}b", f"{REGION}c")
K8S_VERSION = "v1.31.4"

Obj = dict[str, Any]

DAY = 86400
HOUR = 3600
MI = 1024 * 1024
GI = 1024 * MI
_HASH_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes uses for generated names


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int
    pods_per_node: int = 30
    seed: int = 1

    def __post_init__(self) -> None:
        if self.nodes < MIN_NODES:
            raise ValueError(f"nodes must be at least {MIN_NODES}, got {self.nodes}")
        if not 8 <= self.pods_per_node <= 100:
            raise ValueError(f"pods_per_node must be in [8, 100], got {self.pods_per_node}")

    @property
    def cache_name(self) -> str:
        size = f"n{self.nodes}-ppn{self.pods_per_node}-s{self.seed}"
        return f"cluster-{size}-g{GENERATOR_VERSION}-{_SOURCE_HASH}.json"


@dataclass
class GenerationStats:
    """What was generated, by kind (and the byte size once written)."""

    counts: dict[str, int] = field(default_factory=dict)
    pod_bytes: int = 0
    total_bytes: int = 0

    def add(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1


def ts(age_seconds: float) -> str:
    """The RFC 3339 time ``age_seconds`` before :data:`NOW`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_NOW_EPOCH - int(age_seconds)))


def count(rate: float, base: int, minimum: int) -> int:
    """``rate`` of ``base``, at least ``minimum``."""
    return max(minimum, round(rate * base))


class Context:
    """One generation's spec, random source, names taken, tallies and drift quotas."""

    def __init__(self, spec: ClusterSpec, stats: GenerationStats | None = None) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.stats = stats if stats is not None else GenerationStats()
        self.used_names: set[tuple[str, str]] = set()
        #: (namespace, name) of the pods with a random suffix, see :meth:`pod_name`
        self.pod_names: set[tuple[str, str]] = set()
        #: drift every cluster gets at least this much of, however small, so every plugin has work
        self.min_left = {"preview": 2, "bare": 1, "crashloop": 3, "anti_violation": 2}

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def suffix(self, k: int = 5) -> str:
        return "".join(self.rng.choices(_HASH_CHARS, k=k))

    def hexid(self, bits: int = 256) -> str:
        return f"{self.rng.getrandbits(bits):0{bits // 4}x}"

    def pod_name(self, namespace: str, prefix: str) -> str:
        """``prefix-<5 random characters>``, drawn again while the namespace has a pod of that
        name (27^5 suffixes: 5,000 DaemonSet pods collide about once, and the API server
        refuses a duplicate); a first draw that is free changes nothing in the output."""
        name = f"{prefix}-{self.suffix()}"
        while (namespace, name) in self.pod_names:
            name = f"{prefix}-{self.suffix()}"
        self.pod_names.add((namespace, name))
        return name

    def name(self, namespace: str, base: str) -> str:
        """``base``, or ``base-2``, ``base-3``, ... when the namespace has a workload of that name."""
        name = base
        i = 2
        while (namespace, name) in self.used_names:
            name = f"{base}-{i}"
            i += 1
        self.used_names.add((namespace, name))
        return name


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fields_v1(obj: Any, depth: int = 5) -> Any:
    """The managedFields ``fieldsV1`` set of an object (``f:`` keys, ``k:`` keys for named list items).

    Cut at ``depth`` levels: the API server would go all the way down, which makes a pod 2-3 times
    the 5-8 KB that pods of real clusters average.
    """
    if depth <= 0:
        return {}
    if isinstance(obj, dict):
        out: Obj = {".": {}} if obj else {}
        for key, value in obj.items():
            out[f"f:{key}"] = fields_v1(value, depth - 1)
        return out
    if isinstance(obj, list):
        out = {}
        for item in obj:
            if isinstance(item, dict) and "name" in item:
                out[f'k:{{"name":"{item["name"]}"}}'] = fields_v1(item, depth - 1)
            elif isinstance(item, dict) and "uid" in item:
                out[f'k:{{"uid":"{item["uid"]}"}}'] = {}
            elif isinstance(item, dict) and "type" in item:
                out[f'k:{{"type":"{item["type"]}"}}'] = fields_v1(item, depth - 1)
            elif isinstance(item, str):
                out[f'v:"{item}"'] = {}
        return out
    return {}


class Part:
    """A concern of the generator (nodes, workloads, pods, ...): it draws from the one context."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.spec = ctx.spec
        self.rng = ctx.rng
        self.stats = ctx.stats
        self.uid = ctx.uid
        self.suffix = ctx.suffix
        self.hexid = ctx.hexid


#: A DaemonSet: namespace, name, image, cpu m, memory Mi, pool (None = every node)
DaemonSetRow = tuple[str, str, str, int, int, "str | None"]
