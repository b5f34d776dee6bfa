"""Memos by object identity first, then by the object's content: compiled matchers, content keys.

Selectors, node-selector terms and preferred-term lists repeat across tens of thousands of pods:
the same object (identity hit) or an equal one (encoding hit) is compiled once. The identity entry
holds a reference to its object, so an id is never reused for a different one while cached. Cached
objects must not be mutated after their first use. Both tables are bounded: when full, cleared.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import msgspec

K = TypeVar("K")
V = TypeVar("V")

_encode = msgspec.msgpack.Encoder().encode


class CompileCache(Generic[K, V]):
    def __init__(
        self,
        compile: Callable[[K], V],
        *,
        by_content: bool = True,
        id_limit: int = 1 << 18,
        content_limit: int = 1 << 16,
    ) -> None:
        self._compile = compile
        self._by_content = by_content
        self._id_limit = id_limit
        self._content_limit = content_limit
        self._by_id: dict[int, tuple[K, V]] = {}
        self._by_encoding: dict[bytes, V] = {}

    def get(self, obj: K) -> V:
        hit = self._by_id.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        if self._by_content:
            key = _encode(obj)
            value = self._by_encoding.get(key)
            if value is None:
                value = self._compile(obj)
                if len(self._by_encoding) >= self._content_limit:
                    self._by_encoding.clear()
                self._by_encoding[key] = value
        else:
            value = self._compile(obj)
        if len(self._by_id) >= self._id_limit:
            self._by_id.clear()
        self._by_id[id(obj)] = (obj, value)
        return value


class ContentKeys:
    """Content keys (the msgspec encoding) of records, computed once per object.

    The pods of one workload often share their records (the snapshot loader decodes equal JSON to
    one object: affinity, tolerations, spread constraints, ...): a key found by identity costs a
    lookup instead of an encoding. Equal content, equal key, whether the objects are shared or
    not. The table holds every object it has a key for, so an id is never reused while it lives:
    keep one only as long as the objects it was given are of interest (a plugin call).
    """

    __slots__ = ("_by_id",)

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[object, bytes]] = {}

    def __call__(self, obj: object) -> bytes:
        hit = self._by_id.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        key = _encode(obj)
        self._by_id[id(obj)] = (obj, key)
        return key
