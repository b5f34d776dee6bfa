"""The generic node-resources scorer (KEP-2143): every portion x value x preference against
hand-computed scores, normalisation, the left-out-resource rules, the args and the KEP's stories."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from tests import builders

from desched.api.types import validate_model
from desched.errors import PolicyError, UserError
from desched.k8s.objects import Pod
from desched.scheduling.scorer import (
    MAX_WEIGHT,
    GenericScorer,
    GenericScorerArgs,
    NodeResourcesPartArgs,
    allocated_of,
    load_scorer_args,
    requesting_of,
    to_extender_score,
)

GI = 1024**3
MI = 1024**2


def scorer(**parts: dict[str, Any]) -> GenericScorer:
    return GenericScorer(GenericScorerArgs.model_validate(parts))


def part(values: str, prefer: str, resources: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"values": values, "prefer": prefer}
    if resources is not None:
        out["resources"] = resources
    return out


def make_pod(name: str, node: str = "", *, phase: str = "Running", gpu: str = "", **requests: str) -> Pod:
    if gpu:
        requests["nvidia.com/gpu"] = gpu
    return builders.pod(name, node=node, phase=phase, requests=requests or None)


# --------------------------------------------------------------------------- hand-computed scores
#
# One node, one pod, weights cpu 1 and memory 3 (W = 4):
#
#   allocatable A = cpu 4000, memory 8000
#   already on the node   = cpu 1500, memory 1000
#   requesting  R = cpu  500, memory 1000
#   allocated   U = cpu 2000, memory 2000      (the node's pods + the pod)
#   left        L = cpu 2000, memory 6000      (A - U)
#
#   ratios (to A):  allocatable 1, 1   allocated .5, .25   requesting .125, .125   left .5, .75
#
# Most = +sum(w*v), Least = -sum(w*v). With weights (1, 3) the weighted mean is (v1 + 3 v2)/4 and
# the weighted population sd is sqrt((1 (v1-m)^2 + 3 (v2-m)^2) / 4) = sqrt(3)/4 |v1 - v2|, so
# MostBalanced = -W*sd = -sqrt(3) |v1 - v2| and LeastBalanced = +sqrt(3) |v1 - v2|.

A = {"cpu": 4000, "memory": 8000}
ON_NODE = {"cpu": 1500, "memory": 1000}
R = {"cpu": 500, "memory": 1000}
W13 = {"cpu": 1, "memory": 3}
S3 = math.sqrt(3)

HAND = [
    # portion, values, prefer, expected raw score
    ("allocatable", "AbsoluteValue", "Most", 4000 + 3 * 8000),
    ("allocatable", "AbsoluteValue", "Least", -(4000 + 3 * 8000)),
    ("allocatable", "AbsoluteValue", "MostBalanced", -S3 * 4000),
    ("allocatable", "AbsoluteValue", "LeastBalanced", S3 * 4000),
    ("allocatable", "RatioToAllocatable", "Most", 1 + 3 * 1),
    ("allocatable", "RatioToAllocatable", "Least", -(1 + 3 * 1)),
    ("allocatable", "RatioToAllocatable", "MostBalanced", 0.0),
    ("allocatable", "RatioToAllocatable", "LeastBalanced", 0.0),
    ("allocated", "AbsoluteValue", "Most", 2000 + 3 * 2000),
    ("allocated", "AbsoluteValue", "Least", -(2000 + 3 * 2000)),
    ("allocated", "AbsoluteValue", "MostBalanced", 0.0),
    ("allocated", "AbsoluteValue", "LeastBalanced", 0.0),
    ("allocated", "RatioToAllocatable", "Most", 0.5 + 3 * 0.25),
    ("allocated", "RatioToAllocatable", "Least", -(0.5 + 3 * 0.25)),
    ("allocated", "RatioToAllocatable", "MostBalanced", -S3 * 0.25),
    ("allocated", "RatioToAllocatable", "LeastBalanced", S3 * 0.25),
    ("requesting", "AbsoluteValue", "Most", 500 + 3 * 1000),
    ("requesting", "AbsoluteValue", "Least", -(500 + 3 * 1000)),
    ("requesting", "AbsoluteValue", "MostBalanced", -S3 * 500),
    ("requesting", "AbsoluteValue", "LeastBalanced", S3 * 500),
    ("requesting", "RatioToAllocatable", "Most", 0.125 + 3 * 0.125),
    ("requesting", "RatioToAllocatable", "Least", -(0.125 + 3 * 0.125)),
    ("requesting", "RatioToAllocatable", "MostBalanced", 0.0),
    ("requesting", "RatioToAllocatable", "LeastBalanced", 0.0),
    ("left", "AbsoluteValue", "Most", 2000 + 3 * 6000),
    ("left", "AbsoluteValue", "Least", -(2000 + 3 * 6000)),
    ("left", "AbsoluteValue", "MostBalanced", -S3 * 4000),
    ("left", "AbsoluteValue", "LeastBalanced", S3 * 4000),
    ("left", "RatioToAllocatable", "Most", 0.5 + 3 * 0.75),
    ("left", "RatioToAllocatable", "Least", -(0.5 + 3 * 0.75)),
    ("left", "RatioToAllocatable", "MostBalanced", -S3 * 0.25),
    ("left", "RatioToAllocatable", "LeastBalanced", S3 * 0.25),
]


def test_every_combination_is_in_the_table() -> None:
    combos = {(p, v, f) for p, v, f, _ in HAND}
    assert len(combos) == 4 * 2 * 4 == len(HAND)


@pytest.mark.parametrize(("portion", "values", "prefer", "expected"), HAND, ids=lambda x: str(x))
def test_hand_computed_raw_score(portion: str, values: str, prefer: str, expected: float) -> None:
    s = scorer(**{portion: part(values, prefer, W13)})
    assert s.score(R, A, ON_NODE) == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(("portion", "values", "prefer", "expected"), HAND, ids=lambda x: str(x))
def test_batch_form_agrees_with_single_node_form(
    portion: str, values: str, prefer: str, expected: float
) -> None:
    s = scorer(**{portion: part(values, prefer, W13)})
    others = [
        ({"cpu": 8000, "memory": 4000}, {"cpu": 0, "memory": 3000}),
        ({"cpu": 2000, "memory": 16000}, {}),
    ]
    allocs = [A, *(a for a, _ in others)]
    used = [ON_NODE, *(u for _, u in others)]
    batch = s.score_nodes(R, allocs, used)
    assert batch == [s.score(R, a, u) for a, u in zip(allocs, used, strict=True)]
    assert batch[0] == pytest.approx(expected, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(
    ("prefer", "expected"),
    [
        # bounded (ratio parts): 100 * (raw - lo) / (hi - lo) with the part's range
        ("Most", 100 * 2.75 / 4),  # range [0, 4]
        ("Least", 100 * (4 - 2.75) / 4),  # range [-4, 0]
        ("MostBalanced", 100 * (4 - S3 * 0.25) / 4),  # range [-4, 0]: 100 (1 - sd), as BalancedAllocation
        ("LeastBalanced", 100 * S3 * 0.25 / 4),  # range [0, 4]
    ],
)
def test_ratio_parts_normalise_on_their_fixed_range(prefer: str, expected: float) -> None:
    s = scorer(left=part("RatioToAllocatable", prefer, W13))
    assert s.bounded
    (score,) = s.node_scores(R, [A], [ON_NODE])
    assert score == pytest.approx(expected)
    # a node's score does not depend on the other candidates
    assert s.node_scores(R, [A, {"cpu": 1, "memory": 1}], [ON_NODE, {}])[0] == pytest.approx(expected)


def test_several_ratio_parts_add_their_ranges() -> None:
    s = scorer(
        allocated=part("RatioToAllocatable", "Most", {"cpu": 1}),  # .5, range [0, 1]
        left=part("RatioToAllocatable", "Least", {"memory": 3}),  # -3 * .75, range [-3, 0]
    )
    (score,) = s.node_scores(R, [A], [ON_NODE])
    assert score == pytest.approx(100 * (0.5 - 2.25 + 3) / 4)


def test_absolute_parts_normalise_min_max_over_the_candidates() -> None:
    s = scorer(allocatable=part("AbsoluteValue", "Least", {"cpu": 1}))
    assert not s.bounded
    allocs = [{"cpu": 4000}, {"cpu": 8000}, {"cpu": 6000}]
    assert s.score_nodes({}, allocs, [{}, {}, {}]) == [-4000, -8000, -6000]
    assert s.node_scores({}, allocs, [{}, {}, {}]) == [100.0, 0.0, 50.0]
    assert s.extender_scores({}, allocs, [{}, {}, {}]) == [10, 0, 5]
    # all equal: no preference, every node 0 (as NodeResourcesAllocatable)
    assert s.node_scores({}, [{"cpu": 1}, {"cpu": 1}], [{}, {}]) == [0.0, 0.0]
    assert s.normalize([]) == []


@pytest.mark.parametrize(
    ("score", "expected"),
    [
        (0, 0),
        (4.99, 0),
        (5, 1),
        (14.999, 1),
        (15, 2),
        (50, 5),
        (94.9, 9),
        (95, 10),
        (100, 10),
        (-3, 0),
        (130, 10),
    ],
)
def test_extender_score_is_a_tenth_rounded_half_up(score: float, expected: int) -> None:
    assert to_extender_score(score) == expected


# --------------------------------------------------------------------------- clamping and left-out resources


def test_ratios_are_clamped_and_left_never_negative() -> None:
    # non-zero stand-ins can make the allocated exceed allocatable
    over = {"cpu": 1000}
    used = {"cpu": 1500}
    assert (
        scorer(allocated=part("RatioToAllocatable", "Most", {"cpu": 1})).score({"cpu": 100}, over, used)
        == 1.0
    )
    assert scorer(left=part("RatioToAllocatable", "Most", {"cpu": 1})).score({"cpu": 100}, over, used) == 0.0
    assert scorer(left=part("AbsoluteValue", "Most", {"cpu": 1})).score({"cpu": 100}, over, used) == 0.0


def test_ratio_leaves_out_an_extended_resource_the_pod_does_not_request() -> None:
    s = scorer(left=part("RatioToAllocatable", "Most", {"cpu": 1, "nvidia.com/gpu": 5}))
    node = {"cpu": 4000, "nvidia.com/gpu": 8}
    # without gpus requested: cpu only, but still scaled to the part's W = 6
    assert s.score({"cpu": 1000}, node, {}) == pytest.approx(6 * 0.75)
    # with: the weighted sum of both
    assert s.score({"cpu": 1000, "nvidia.com/gpu": 2}, node, {}) == pytest.approx(0.75 + 5 * 6 / 8)
    # AbsoluteValue keeps it: the node's gpus are a fact about the node
    absolute = scorer(left=part("AbsoluteValue", "Most", {"cpu": 1, "nvidia.com/gpu": 5}))
    assert absolute.score({"cpu": 1000}, node, {}) == 3000 + 5 * 8


def test_ratio_leaves_out_a_resource_the_node_does_not_have() -> None:
    s = scorer(left=part("RatioToAllocatable", "Most", {"cpu": 1, "ephemeral-storage": 3}))
    with_disk = {"cpu": 4000, "ephemeral-storage": 100}
    without = {"cpu": 4000}
    raw = s.score_nodes({"cpu": 1000}, [with_disk, without], [{}, {"ephemeral-storage": 0}])
    # the node without ephemeral storage is judged on cpu alone: mean .75, times W = 4
    assert raw == pytest.approx([0.75 + 3 * 1.0, 4 * 0.75])


def test_a_part_with_nothing_left_to_score_gives_its_worst_value() -> None:
    most = scorer(left=part("RatioToAllocatable", "Most", {"example.com/foo": 2}))
    least = scorer(left=part("RatioToAllocatable", "Least", {"example.com/foo": 2}))
    balanced = scorer(left=part("RatioToAllocatable", "MostBalanced", {"example.com/foo": 2, "cpu": 1}))
    node = {"example.com/foo": 4, "cpu": 1000}
    assert most.score({}, node, {}) == 0.0
    assert least.score({}, node, {}) == -2.0
    # one resource left: sd = 0, as kube-scheduler's BalancedAllocation
    assert balanced.score({"cpu": 100}, node, {}) == 0.0
    # some nodes have it, some do not (per-node weight sums)
    varying = scorer(
        left=part("RatioToAllocatable", "MostBalanced", {"cpu": 1, "memory": 1, "example.com/foo": 1})
    )
    raw = varying.score_nodes(
        {"example.com/foo": 1}, [{"cpu": 10, "memory": 10, "example.com/foo": 2}, {"cpu": 10}], [{}, {}]
    )
    # node 1: values 1, 1, .5: mean 5/6, sd = sqrt((2 (1/6)^2 + (1/3)^2) / 3); node 2: cpu only: sd 0
    assert raw[0] == pytest.approx(-3 * math.sqrt((2 / 36 + 1 / 9) / 3))
    assert raw[1] == 0.0


def test_pods_is_a_resource_the_pod_requests_one_of() -> None:
    s = scorer(allocated=part("RatioToAllocatable", "Least", {"pods": 1}))
    pod = make_pod("p", cpu="100m")
    assert requesting_of(pod)["pods"] == 1
    busy = allocated_of([make_pod(f"x{i}", "n") for i in range(9)])
    assert busy["pods"] == 9
    assert s.score(requesting_of(pod), {"pods": 10}, busy) == -1.0
    assert s.score(requesting_of(pod), {"pods": 10}, {}) == -0.1


def test_resource_order_does_not_change_the_score() -> None:
    a = scorer(
        left=part("RatioToAllocatable", "MostBalanced", {"cpu": 1, "memory": 3, "ephemeral-storage": 2})
    )
    b = scorer(
        left=part("RatioToAllocatable", "MostBalanced", {"ephemeral-storage": 2, "memory": 3, "cpu": 1})
    )
    node = {"cpu": 4000, "memory": 8000, "ephemeral-storage": 100}
    assert a.score(R, node, ON_NODE) == b.score(R, node, ON_NODE)


# --------------------------------------------------------------------------- pod amounts


def test_requesting_uses_the_non_zero_stand_ins() -> None:
    bare = make_pod("bare")
    assert requesting_of(bare) == {"cpu": 100, "memory": 200 * MI, "pods": 1}
    explicit = make_pod("explicit", cpu="0", memory="1Gi", gpu="2")
    assert requesting_of(explicit) == {"cpu": 0, "memory": GI, "nvidia.com/gpu": 2, "pods": 1}
    assert allocated_of([bare, explicit]) == {
        "cpu": 100,
        "memory": 200 * MI + GI,
        "nvidia.com/gpu": 2,
        "pods": 2,
    }


# --------------------------------------------------------------------------- args


def test_defaults_and_the_list_form() -> None:
    args = GenericScorerArgs.model_validate({"left": {"values": "RatioToAllocatable", "prefer": "Most"}})
    assert args.left is not None and args.left.resources == {"cpu": 1, "memory": 1}
    listed = NodeResourcesPartArgs.model_validate(
        {
            "values": "AbsoluteValue",
            "prefer": "Least",
            "resources": [{"name": "cpu", "weight": 1 << 20}, {"name": "memory"}],
        }
    )
    assert listed.resources == {"cpu": 1 << 20, "memory": 1}
    assert [
        p
        for p, _ in GenericScorerArgs.model_validate(
            {"requesting": part("AbsoluteValue", "Most"), "allocatable": part("AbsoluteValue", "Most")}
        ).parts()
    ] == ["allocatable", "requesting"]


@pytest.mark.parametrize(
    ("doc", "path", "message"),
    [
        ({}, "", "at least one of allocatable, allocated, left, requesting must be set"),
        ({"left": None}, "", "at least one of"),
        ({"lefts": part("AbsoluteValue", "Most")}, "lefts", "unknown field"),
        ({"left": {"prefer": "Most"}}, "left.values", "required field is missing"),
        ({"left": {"values": "AbsoluteValue"}}, "left.prefer", "required field is missing"),
        (
            {"left": part("Absolute", "Most")},
            "left.values",
            "'AbsoluteValue' or 'RatioToAllocatable', got 'Absolute'",
        ),
        ({"left": part("AbsoluteValue", "Max")}, "left.prefer", "got 'Max'"),
        (
            {"left": part("AbsoluteValue", "Most", {"cpu": 0})},
            "left.resources.cpu",
            "greater than or equal to 1, got 0",
        ),
        (
            {"left": part("AbsoluteValue", "Most", {"cpu": -5})},
            "left.resources.cpu",
            "greater than or equal to 1",
        ),
        (
            {"left": part("AbsoluteValue", "Most", {"cpu": MAX_WEIGHT + 1})},
            "left.resources.cpu",
            "less than or equal",
        ),
        ({"left": part("AbsoluteValue", "Most", {"cpu": "1"})}, "left.resources.cpu", "valid integer"),
        ({"left": part("AbsoluteValue", "Most", {"cpu": 1.5})}, "left.resources.cpu", "valid integer"),
        ({"left": part("AbsoluteValue", "Most", {"cpu": True})}, "left.resources.cpu", "valid integer"),
        ({"left": part("AbsoluteValue", "Most", {})}, "left.resources", "must name at least one resource"),
        (
            {"left": part("AbsoluteValue", "Most", {"bad name": 1})},
            "left.resources",
            "invalid resource name 'bad name'",
        ),
        ({"left": part("AbsoluteValue", "Most", {"Example.com/x": 1})}, "left.resources", "prefix part"),
        ({"left": part("AbsoluteValue", "Most", "cpu")}, "left.resources", "valid dictionary"),
        (
            {"left": part("AbsoluteValue", "Most", [{"name": "cpu"}, {"name": "cpu", "weight": 2}])},
            "left.resources",
            "resource 'cpu' is listed twice",
        ),
        (
            {"left": part("AbsoluteValue", "Most", [{"weight": 2}])},
            "left.resources",
            "item 0 must be an object",
        ),
        (
            {"left": part("AbsoluteValue", "Most", [{"name": "cpu", "wieght": 2}])},
            "left.resources",
            "unknown field",
        ),
        ({"left": {**part("AbsoluteValue", "Most"), "extra": 1}}, "left.extra", "unknown field"),
        ({"kind": "Policy", "left": part("AbsoluteValue", "Most")}, "kind", "'GenericNodeResourcesArgs'"),
    ],
)
def test_bad_args_name_the_field(doc: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(PolicyError) as info:
        validate_model(GenericScorerArgs, doc, "")
    assert info.value.path == path
    assert message in info.value.reason


def test_kep_weights_above_100_are_accepted() -> None:
    # the KEP's own story 2 (and NodeResourcesAllocatable's default cpu weight, 2^20) need them
    args = GenericScorerArgs.model_validate(
        {"allocatable": part("AbsoluteValue", "Least", {"cpu": 10_000_000_000_000, "memory": 10})}
    )
    assert args.allocatable is not None and args.allocatable.resources["cpu"] == 10**13


def test_load_scorer_args_errors_name_the_file_and_field(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("kind: GenericNodeResourcesArgs\nleft:\n  values: AbsoluteValue\n  prefer: Least\n")
    assert load_scorer_args(good).left is not None
    bad = tmp_path / "bad.yaml"
    bad.write_text("left:\n  values: AbsoluteValue\n  prefer: Least\n  resources: {cpu: 0}\n")
    with pytest.raises(UserError) as info:
        load_scorer_args(bad)
    assert str(info.value) == f"{bad}: left.resources.cpu: input should be greater than or equal to 1, got 0"
    broken = tmp_path / "broken.yaml"
    broken.write_text("left: [\n")
    with pytest.raises(UserError, match=r"not valid YAML( or JSON)? at line 2"):
        load_scorer_args(broken)
    listed = tmp_path / "list.yaml"
    listed.write_text("- left\n")
    with pytest.raises(UserError, match="must be an object"):
        load_scorer_args(listed)
    with pytest.raises(UserError, match="cannot read scorer config"):
        load_scorer_args(tmp_path / "missing.yaml")


def test_the_shipped_example_loads() -> None:
    example = Path(__file__).resolve().parents[3] / "deploy" / "extender" / "scorer.yaml"
    args = load_scorer_args(example)
    assert [p for p, _ in args.parts()] == ["allocatable", "left"]


# --------------------------------------------------------------------------- the KEP's stories


def best(
    s: GenericScorer, pod: Pod, nodes: dict[str, dict[str, int]], pods: dict[str, list[Pod]]
) -> list[str]:
    """The nodes ranked best first (ties by name)."""
    names = sorted(nodes)
    scores = s.node_scores(
        requesting_of(pod), [nodes[n] for n in names], [allocated_of(pods.get(n, [])) for n in names]
    )
    return [n for _, n in sorted(zip(scores, names, strict=True), key=lambda t: (-t[0], t[1]))]


def place(s: GenericScorer, pod: Pod, nodes: dict[str, dict[str, int]], pods: dict[str, list[Pod]]) -> str:
    """Bind the pod to the best node it fits (a tiny scheduler: resources only)."""
    req = requesting_of(pod)
    fitting = {
        n: a
        for n, a in nodes.items()
        if all(v <= a.get(r, 0) - allocated_of(pods.get(n, [])).get(r, 0) for r, v in req.items())
    }
    assert fitting, "the pod fits nowhere"
    choice = best(s, pod, fitting, pods)[0]
    pods.setdefault(choice, []).append(pod)
    return choice


def test_story_1_pods_go_where_the_fewest_gpus_are_left() -> None:
    story = scorer(left=part("AbsoluteValue", "Least", {"nvidia.com/gpu": 1}))
    nodes = {
        "gpu-a": {"cpu": 32000, "memory": 256 * GI, "pods": 110, "nvidia.com/gpu": 8},
        "gpu-b": {"cpu": 32000, "memory": 256 * GI, "pods": 110, "nvidia.com/gpu": 8},
        "gpu-c": {"cpu": 32000, "memory": 256 * GI, "pods": 110, "nvidia.com/gpu": 4},
    }
    pods = {
        "gpu-a": [make_pod("a1", "gpu-a", cpu="1", memory="1Gi", gpu="6")],
        "gpu-c": [make_pod("c1", "gpu-c", cpu="1", memory="1Gi", gpu="1")],
    }
    one = make_pod("one", cpu="1", memory="1Gi", gpu="1")
    # gpus left after placing it: a 1, b 7, c 2
    assert best(story, one, nodes, pods) == ["gpu-a", "gpu-c", "gpu-b"]
    # placing one-gpu pods keeps gpu-b empty for a pod that needs a whole node
    placed = [place(story, make_pod(f"p{i}", cpu="1", memory="1Gi", gpu="1"), nodes, pods) for i in range(5)]
    assert placed == ["gpu-a", "gpu-a", "gpu-c", "gpu-c", "gpu-c"]
    whole = make_pod("whole", cpu="1", memory="1Gi", gpu="8")
    assert place(story, whole, nodes, pods) == "gpu-b"


STORY_2 = {
    "allocatable": part("AbsoluteValue", "Least", {"cpu": 10000000000000, "memory": 10}),
    "left": part("RatioToAllocatable", "Least", {"cpu": 1000000000000, "memory": 1}),
}


def test_story_2_small_nodes_fill_first() -> None:
    story = scorer(**STORY_2)
    nodes = {
        "big": {"cpu": 16000, "memory": 64 * GI, "pods": 110},
        "medium": {"cpu": 8000, "memory": 32 * GI, "pods": 110},
        "small": {"cpu": 4000, "memory": 16 * GI, "pods": 110},
    }
    pods: dict[str, list[Pod]] = {}
    placed = [place(story, make_pod(f"p{i}", cpu="1", memory="1Gi"), nodes, pods) for i in range(28)]
    assert placed == ["small"] * 4 + ["medium"] * 8 + ["big"] * 16


def test_story_2_among_equal_nodes_the_fullest_first() -> None:
    story = scorer(**STORY_2)
    nodes = {
        "small-a": {"cpu": 4000, "memory": 16 * GI, "pods": 110},
        "small-b": {"cpu": 4000, "memory": 16 * GI, "pods": 110},
        "big": {"cpu": 16000, "memory": 64 * GI, "pods": 110},
    }
    pods = {"small-b": [make_pod("x", "small-b", cpu="1", memory="1Gi")], "big": []}
    assert best(story, make_pod("p", cpu="500m", memory="1Gi"), nodes, pods) == ["small-b", "small-a", "big"]
    # a smaller node wins over a fuller bigger one: "small" first, "full" second
    pods = {"big": [make_pod(f"b{i}", "big", cpu="1", memory="1Gi") for i in range(15)]}
    assert best(story, make_pod("p", cpu="500m", memory="1Gi"), nodes, pods)[-1] == "big"


def test_just_fits_prefers_the_least_left() -> None:
    just_fits = scorer(left=part("AbsoluteValue", "Least", {"cpu": 1 << 20, "memory": 1}))
    nodes = {
        "roomy": {"cpu": 8000, "memory": 32 * GI, "pods": 110},
        "snug": {"cpu": 8000, "memory": 32 * GI, "pods": 110},
    }
    pods = {"snug": [make_pod("x", "snug", cpu="6", memory="24Gi")]}
    assert best(just_fits, make_pod("p", cpu="2", memory="8Gi"), nodes, pods) == ["snug", "roomy"]
