"""``GenericScorer.score_arrays`` / ``normalize_array`` (numpy, what ``desched extender`` scores
with) give exactly the floats of ``score_nodes`` / ``normalize`` (lists of Python integers), for
any scorer args and amounts up to ``EXACT_IN_FLOAT``: the extender's answers do not depend on
which of the two computed them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from desched.scheduling.scorer import EXACT_IN_FLOAT, GenericScorer, GenericScorerArgs

RESOURCES = ["cpu", "memory", "ephemeral-storage", "pods", "nvidia.com/gpu", "example.com/fpga"]
MAX = int(EXACT_IN_FLOAT)

weights = st.one_of(st.integers(1, 100), st.sampled_from([10**12, 10**13, 1 << 20, 1 << 53]))
parts = st.fixed_dictionaries(
    {
        "values": st.sampled_from(["AbsoluteValue", "RatioToAllocatable"]),
        "prefer": st.sampled_from(["Most", "Least", "MostBalanced", "LeastBalanced"]),
        "resources": st.dictionaries(st.sampled_from(RESOURCES), weights, min_size=1, max_size=4),
    }
)
scorer_args = st.dictionaries(
    st.sampled_from(["allocatable", "allocated", "left", "requesting"]), parts, min_size=1
)
# amounts as they come: often missing or 0 (left out of a ratio), sometimes huge
amount = st.one_of(
    st.just(0), st.integers(1, 8), st.integers(1, 256_000), st.integers(1, 2**40), st.integers(0, MAX // 2)
)
amounts = st.dictionaries(st.sampled_from(RESOURCES), amount, max_size=len(RESOURCES))


def columns(scorer: GenericScorer, rows: list[Mapping[str, int]]) -> dict[str, np.ndarray]:
    return {r: np.array([float(row.get(r, 0)) for row in rows]) for r in scorer.resources}


@settings(max_examples=400, deadline=None)
@given(scorer_args, amounts, st.lists(st.tuples(amounts, amounts), min_size=1, max_size=12))
def test_arrays_give_the_lists_floats(
    args: dict[str, object], pod: dict[str, int], nodes: list[tuple[dict[str, int], dict[str, int]]]
) -> None:
    scorer = GenericScorer(GenericScorerArgs.model_validate(args))
    allocatable = [a for a, _ in nodes]
    allocated = [u for _, u in nodes]
    expected = scorer.score_nodes(pod, allocatable, allocated)
    got = scorer.score_arrays(pod, columns(scorer, allocatable), columns(scorer, allocated))
    assert got.tolist() == expected
    assert scorer.normalize_array(got).tolist() == scorer.normalize(expected)


def test_all_equal_and_empty() -> None:
    scorer = GenericScorer(
        GenericScorerArgs.model_validate({"allocatable": {"values": "AbsoluteValue", "prefer": "Least"}})
    )
    same = [{"cpu": 1000, "memory": 10}] * 3
    raw = scorer.score_arrays({}, columns(scorer, same), columns(scorer, [{}, {}, {}]))
    assert scorer.normalize_array(raw).tolist() == [0.0, 0.0, 0.0] == scorer.normalize(raw.tolist())
    assert scorer.score_arrays({}, {}, {}).tolist() == []
    assert scorer.normalize_array(np.zeros(0)).tolist() == []
