"""The framework's key-based sort (sorters exposing sort_key/presort_key) orders pods exactly as
the pairwise ``less`` path does."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests import builders

from desched.framework.framework import _ordered
from desched.k8s.objects import Pod
from desched.plugins.sorters.args import PodAgeSortArgs
from desched.plugins.sorters.plugin import PodAgeSort, PrioritySort

_times = st.sampled_from(
    [
        None,
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:01Z",
        "2025-06-01T12:00:00Z",
        "2026-03-01T08:30:00+02:00",
    ]
)


@st.composite
def _pod(draw: Any, i: int) -> Pod:
    namespace = draw(st.sampled_from(["a", "b"]))
    created = draw(_times)
    annotations = {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""} if draw(st.booleans()) else None
    prio = draw(st.sampled_from([None, -5, 0, 100, 100000]))
    requests = draw(st.sampled_from([None, {"cpu": "100m"}, "same"]))
    limits = None
    if requests == "same":
        requests = limits = {"cpu": "1", "memory": "1Gi"}
    return builders.bare_pod(
        f"p{i}",
        namespace=namespace,
        created=created,
        annotations=annotations,
        priority=prio,
        requests=requests,
        limits=limits,
    )


@st.composite
def _pods(draw: Any) -> list[Pod]:
    n = draw(st.integers(min_value=0, max_value=25))
    return [draw(_pod(i)) for i in range(n)]


def _sorters(names: list[str]) -> list[Any]:
    out: list[Any] = []
    for name in names:
        if name == "PrioritySort":
            out.append(PrioritySort(None, None))  # type: ignore[arg-type]
        else:
            order = "NewestFirst" if name == "Newest" else "OldestFirst"
            out.append(PodAgeSort(PodAgeSortArgs(order=order), None))  # type: ignore[arg-type]
    return out


_configs = st.lists(st.sampled_from(["PrioritySort", "Oldest", "Newest"]), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(pods=_pods(), names=_configs, with_key=st.booleans())
def test_key_path_orders_like_the_less_path(pods: list[Pod], names: list[str], with_key: bool) -> None:
    sorters = _sorters(names)
    key = (lambda p: (p.metadata.namespace, p.metadata.name)) if with_key else None
    slow = _ordered(pods, [s.less for s in sorters], key)
    fast = _ordered(pods, [s.less for s in sorters], key, [s.sort_key for s in sorters])
    assert [p.key for p in fast] == [p.key for p in slow]
    slow_pre = _ordered(pods, [s.pre_less for s in sorters], key)
    fast_pre = _ordered(pods, [s.pre_less for s in sorters], key, [s.presort_key for s in sorters])
    assert [p.key for p in fast_pre] == [p.key for p in slow_pre]


def test_a_sorter_without_a_key_uses_the_less_path() -> None:
    class ByName:
        name = "ByName"

        def less(self, a: Pod, b: Pod) -> bool:
            return a.metadata.name > b.metadata.name

    pods = [builders.bare_pod(n) for n in ("a", "c", "b")]
    prio = PrioritySort(None, None)  # type: ignore[arg-type]
    sorters: list[Any] = [prio, ByName()]
    got = _ordered(pods, [s.less for s in sorters], None, [getattr(s, "sort_key", None) for s in sorters])
    assert [p.metadata.name for p in got] == ["c", "b", "a"]
