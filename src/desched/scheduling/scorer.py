"""The generic node-resources scorer of KEP-2143: one configurable score for "which node should
this pod go to", covering kube-scheduler's LeastAllocated, MostAllocated, BalancedAllocation and
the out-of-tree NodeResourcesAllocatable, and the KEP's new stories ("just fits", "small nodes
fill first"). docs/scorer.md has the model, the formulas and the mapping of each of those plugins.

For one pod and one node, each resource ``r`` has four *portions* (canonical amounts, see
:mod:`desched.k8s.resources`; ``pods`` counts pods):

- ``allocatable``  A_r: the node's status.allocatable;
- ``requesting``   R_r: the pod's requests, with kube-scheduler's non-zero stand-ins (100m cpu,
  200Mi memory for a container that sets none) and ``pods`` = 1;
- ``allocated``    U_r: what the pods already on the node request (non-zero, as above) plus R_r;
- ``left``         L_r: max(A_r - U_r, 0).

A *part* of the args picks a portion, how to value it (``AbsoluteValue``: the amount;
``RatioToAllocatable``: amount / A_r, clamped to [0, 1]) and which values to prefer (``Most``,
``Least``, ``MostBalanced``, ``LeastBalanced``), over weighted resources. With W the sum of the
part's weights and mean/sd the weight-weighted mean and population standard deviation of the
resources' values, a part contributes

    Most: +W·mean     Least: -W·mean     MostBalanced: -W·sd     LeastBalanced: +W·sd

(W·mean is simply Σ w_r·v_r when every resource counts), and the node's raw score is the sum of
the parts' contributions: higher is better. Weights therefore scale parts against each other as
well as resources within a part, which is how the KEP's story 2 puts "small nodes first" before
"fullest first".

In a ``RatioToAllocatable`` part, as kube-scheduler does, a resource is left out for a node that
has none of it allocatable, and an extended resource (anything but cpu, memory,
ephemeral-storage and pods) the pod does not request is left out altogether; mean and sd are then
taken over the resources that remain (no resource left: the part's worst value for Most/Least,
sd = 0 for the balanced ones, as kube-scheduler's BalancedAllocation).

Normalisation to 0..100 (:meth:`GenericScorer.normalize`): when every part is a ratio, each
part's contribution lies in a known range ([0, W] for Most and LeastBalanced, [-W, 0] for Least
and MostBalanced) and the raw score is mapped linearly from the sum of those ranges, so the
score of a node does not depend on the other candidates (LeastAllocated expressed this way
scores exactly as kube-scheduler before its integer truncation). With an ``AbsoluteValue`` part
there is no such range: scores are mapped min..max over the nodes being compared (as
NodeResourcesAllocatable's NormalizeScore; all equal gives 0). The extender's 0..10 is the 0..100
score divided by ten, rounded half up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import Field, StrictInt, field_validator, model_validator

from desched.api import documents
from desched.api.types import ArgsModel, validate_model
from desched.errors import PolicyError, UserError
from desched.k8s import labels as k8s_labels
from desched.k8s import resources as k8s_resources
from desched.k8s.objects import Pod
from desched.k8s.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources

__all__ = [
    "ABSOLUTE_VALUE",
    "ALLOCATABLE",
    "ALLOCATED",
    "LEAST",
    "LEAST_BALANCED",
    "LEFT",
    "MAX_EXTENDER_SCORE",
    "MAX_NODE_SCORE",
    "MAX_WEIGHT",
    "MOST",
    "MOST_BALANCED",
    "PORTIONS",
    "RATIO_TO_ALLOCATABLE",
    "REQUESTING",
    "GenericScorer",
    "GenericScorerArgs",
    "NodeResourcesPartArgs",
    "allocated_of",
    "load_scorer_args",
    "requesting_of",
    "to_extender_score",
]

ALLOCATABLE: Final = "allocatable"
ALLOCATED: Final = "allocated"
LEFT: Final = "left"
REQUESTING: Final = "requesting"
#: The portions, in the order their parts are applied and reported.
PORTIONS: Final = (ALLOCATABLE, ALLOCATED, LEFT, REQUESTING)

ABSOLUTE_VALUE: Final = "AbsoluteValue"
RATIO_TO_ALLOCATABLE: Final = "RatioToAllocatable"
MOST: Final = "Most"
LEAST: Final = "Least"
MOST_BALANCED: Final = "MostBalanced"
LEAST_BALANCED: Final = "LeastBalanced"

#: kube-scheduler's framework.MaxNodeScore and extenderv1.MaxExtenderPriority.
MAX_NODE_SCORE: Final = 100
MAX_EXTENDER_SCORE: Final = 10

#: The largest weight: 2**53, so that weights stay exact in double precision. The KEP's type
#: comment says "1 to 100", but its own story 2 uses 10**13, and NodeResourcesAllocatable (which
#: the KEP replaces) defaults cpu to 2**20 with no upper bound: with AbsoluteValue, weights are
#: also the unit conversion between millicores and bytes.
MAX_WEIGHT: Final = 1 << 53

#: Resources kube-scheduler scores even when the pod does not request them.
_ALWAYS_SCORED: Final = frozenset((CPU, MEMORY, EPHEMERAL_STORAGE, PODS))

ValueResourceOn = Literal["AbsoluteValue", "RatioToAllocatable"]
ScoreResourceBy = Literal["Most", "Least", "MostBalanced", "LeastBalanced"]
Weight = Annotated[StrictInt, Field(ge=1, le=MAX_WEIGHT)]


# --------------------------------------------------------------------------- args


def _default_resources() -> dict[str, int]:
    return {CPU: 1, MEMORY: 1}


class NodeResourcesPartArgs(ArgsModel):
    """One part: a portion of the node's resources, how it is valued and which values win.

    ``resources`` maps resource names to weights (``{cpu: 1, memory: 1}``, the KEP's stories'
    form); kube-scheduler's list form ``[{name: cpu, weight: 1}]`` is accepted too.
    """

    values: ValueResourceOn
    prefer: ScoreResourceBy
    resources: dict[str, Weight] = Field(default_factory=_default_resources)

    @field_validator("resources", mode="before")
    @classmethod
    def _list_form(cls, value: Any) -> Any:
        if value is None:
            return _default_resources()
        if not isinstance(value, list):
            return value
        out: dict[str, Any] = {}
        for i, item in enumerate(value):
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
                raise ValueError(f"item {i} must be an object with a name and a weight, got {item!r}")
            extra = set(item) - {"name", "weight"}
            if extra:
                raise ValueError(f"item {i} has unknown field {sorted(extra)[0]!r}")
            name = item["name"]
            if name in out:
                raise ValueError(f"resource {name!r} is listed twice")
            out[name] = item.get("weight", 1)
        return out

    @field_validator("resources")
    @classmethod
    def _names(cls, value: dict[str, int]) -> dict[str, int]:
        if not value:
            raise ValueError("must name at least one resource")
        for name in value:
            problem = k8s_labels.validate_label_key(name)
            if problem is not None:
                raise ValueError(f"invalid resource name {name!r}: {problem}")
        return value


class GenericScorerArgs(ArgsModel):
    """KEP-2143's ``GenericNodeResourcesArgs``: one optional part per portion, at least one set."""

    api_version: str | None = None
    kind: Literal["GenericNodeResourcesArgs"] | None = None
    allocatable: NodeResourcesPartArgs | None = None
    allocated: NodeResourcesPartArgs | None = None
    left: NodeResourcesPartArgs | None = None
    requesting: NodeResourcesPartArgs | None = None

    @model_validator(mode="after")
    def _some_part(self) -> GenericScorerArgs:
        if not self.parts():
            raise ValueError("at least one of allocatable, allocated, left, requesting must be set")
        return self

    def parts(self) -> list[tuple[str, NodeResourcesPartArgs]]:
        """The configured parts as (portion, part), in :data:`PORTIONS` order."""
        out = []
        for portion in PORTIONS:
            part = getattr(self, portion)
            if part is not None:
                out.append((portion, part))
        return out


def load_scorer_args(path: str | Path) -> GenericScorerArgs:
    """Read and validate a scorer file (YAML or JSON); a problem is one :class:`UserError`
    naming the file and the field."""
    fail = documents.user_error(UserError)
    text = documents.read_regular_file(path, "scorer config", documents.MAX_POLICY_BYTES, fail)
    data = documents.load_yaml_or_json(
        documents.decode_utf8(text, str(path), fail),
        str(path),
        fail,
        max_nodes=documents.MAX_POLICY_NODES,
        max_depth=documents.MAX_POLICY_DEPTH,
    )
    try:
        return validate_model(GenericScorerArgs, data, "")
    except PolicyError as e:
        raise UserError(f"{path}: {e.path}" if e.path else str(path), e.reason) from None


# --------------------------------------------------------------------------- pod and node amounts


def requesting_of(pod: Pod) -> Resources:
    """The Requesting portion of a pod: its non-zero requests, and ``pods`` = 1."""
    out = k8s_resources.non_zero_pod_requests(pod)
    out[PODS] = 1
    return out


def allocated_of(pods: Iterable[Pod]) -> Resources:
    """What pods already on a node take there: the sum of their :func:`requesting_of`
    (kube-scheduler's ``NodeInfo.NonZeroRequested``, plus the pod count). The caller chooses the
    pods: those bound to the node and not finished (Succeeded or Failed)."""
    out: Resources = {}
    for pod in pods:
        for name, value in requesting_of(pod).items():
            out[name] = out.get(name, 0) + value
    return out


def to_extender_score(score: float) -> int:
    """A 0..100 score as a kube-scheduler extender priority, 0..10 (rounded half up)."""
    value = math.floor(score / (MAX_NODE_SCORE / MAX_EXTENDER_SCORE) + 0.5)
    return min(max(value, 0), MAX_EXTENDER_SCORE)


# --------------------------------------------------------------------------- the scorer


class _Part:
    __slots__ = ("balanced", "names", "portion", "ratio", "sign", "total", "weights")

    def __init__(self, portion: str, args: NodeResourcesPartArgs) -> None:
        self.portion = portion
        self.ratio = args.values == RATIO_TO_ALLOCATABLE
        self.balanced = args.prefer in (MOST_BALANCED, LEAST_BALANCED)
        # Most and LeastBalanced add their measure; Least and MostBalanced subtract it
        self.sign = 1 if args.prefer in (MOST, LEAST_BALANCED) else -1
        # sorted: a part's arithmetic does not depend on the order the user listed resources in
        items = sorted(args.resources.items())
        self.names: tuple[str, ...] = tuple(name for name, _ in items)
        self.weights: tuple[int, ...] = tuple(w for _, w in items)
        self.total = sum(self.weights)

    @property
    def bounds(self) -> tuple[float, float]:
        """The range of a ratio part's contribution."""
        return (0.0, float(self.total)) if self.sign > 0 else (-float(self.total), 0.0)


Column = list[float] | list[int]
if TYPE_CHECKING:
    # numpy is imported by the array methods only (``desched extender``): the other commands
    # do not pay its import (0.1-0.4 s)
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]
    Ints = npt.NDArray[np.int64]

#: Amounts up to this magnitude are exact in float64, and so are their sums with a pod's
#: requests: :meth:`GenericScorer.score_arrays` gives the same floats as :meth:`score_nodes`.
EXACT_IN_FLOAT: Final = float(1 << 52)


class GenericScorer:
    """Scores nodes for a pod as :class:`GenericScorerArgs` say (see the module docstring).

    Amounts are canonical integers by resource name (:data:`desched.k8s.resources.Resources`).
    ``requesting`` is the pod's :func:`requesting_of`; a node's ``allocated`` is what the pods
    already on it take (:func:`allocated_of`), *without* the pod being scored, which the scorer
    adds itself.
    """

    def __init__(self, args: GenericScorerArgs) -> None:
        self.args = args
        self.parts: tuple[_Part, ...] = tuple(_Part(portion, part) for portion, part in args.parts())
        #: every part values its resources relative to allocatable: scores have a fixed range
        self.bounded: bool = all(p.ratio for p in self.parts)
        lo = hi = 0.0
        for p in self.parts:
            plo, phi = p.bounds
            lo += plo
            hi += phi
        self._lo, self._hi = lo, hi
        self.resources: tuple[str, ...] = tuple(sorted({n for p in self.parts for n in p.names}))

    # ---------------------------------------------------------------- raw scores

    def score(
        self,
        pod_requests: Mapping[str, int],
        node_allocatable: Mapping[str, int],
        node_allocated: Mapping[str, int],
    ) -> float:
        """The raw score of one node (higher is better; comparable between nodes for one pod)."""
        return self.score_nodes(pod_requests, (node_allocatable,), (node_allocated,))[0]

    def score_nodes(
        self,
        pod_requests: Mapping[str, int],
        allocatable: Sequence[Mapping[str, int]],
        allocated: Sequence[Mapping[str, int]],
    ) -> list[float]:
        """Raw scores of many nodes at once (``allocatable[i]``, ``allocated[i]`` describe node i).

        Column-wise: one pass per (part, resource) over the nodes, so the per-node cost is a few
        list-comprehension steps, not a Python call per node.
        """
        n = len(allocatable)
        if len(allocated) != n:
            raise ValueError(f"{n} allocatable amounts but {len(allocated)} allocated amounts")
        if n == 0:
            return []
        alloc_cols: dict[str, list[int]] = {}
        used_cols: dict[str, list[int]] = {}

        def alloc_col(name: str) -> list[int]:
            col = alloc_cols.get(name)
            if col is None:
                col = alloc_cols[name] = [a.get(name, 0) for a in allocatable]
            return col

        def used_col(name: str) -> list[int]:
            # allocated, the pod included
            col = used_cols.get(name)
            if col is None:
                req = pod_requests.get(name, 0)
                col = used_cols[name] = [u.get(name, 0) + req for u in allocated]
            return col

        total: list[float] | None = None
        for part in self.parts:
            contribution = self._part_scores(part, n, pod_requests, alloc_col, used_col)
            total = (
                contribution if total is None else [t + c for t, c in zip(total, contribution, strict=True)]
            )
        assert total is not None
        return total

    def _portion(
        self,
        portion: str,
        name: str,
        n: int,
        pod_requests: Mapping[str, int],
        alloc_col: Any,
        used_col: Any,
    ) -> list[int]:
        if portion == ALLOCATABLE:
            col: list[int] = alloc_col(name)
            return col
        if portion == ALLOCATED:
            col = used_col(name)
            return col
        if portion == REQUESTING:
            return [pod_requests.get(name, 0)] * n
        return [a - u if a > u else 0 for a, u in zip(alloc_col(name), used_col(name), strict=True)]

    def _part_scores(
        self,
        part: _Part,
        n: int,
        pod_requests: Mapping[str, int],
        alloc_col: Any,
        used_col: Any,
    ) -> list[float]:
        # per resource: the values, and the weight each node gives them (0: left out there)
        values: list[Column] = []
        weights: list[list[int] | int] = []
        for name, w in zip(part.names, part.weights, strict=True):
            amounts = self._portion(part.portion, name, n, pod_requests, alloc_col, used_col)
            if not part.ratio:
                values.append(amounts)
                weights.append(w)
                continue
            if name not in _ALWAYS_SCORED and pod_requests.get(name, 0) == 0:
                continue  # an extended resource this pod does not ask for says nothing about it
            alloc = alloc_col(name)
            values.append(
                [(x / a if x < a else 1.0) if a > 0 else 0.0 for x, a in zip(amounts, alloc, strict=True)]
            )
            weights.append(w if min(alloc) > 0 else [w if a > 0 else 0 for a in alloc])

        if all(isinstance(w, int) for w in weights):
            return self._uniform(part, n, values, [w for w in weights if isinstance(w, int)])
        return self._varying(part, n, values, [w if isinstance(w, list) else [w] * n for w in weights])

    @staticmethod
    def _uniform(part: _Part, n: int, values: list[Column], weights: list[int]) -> list[float]:
        """Every listed resource counts on every node (the common case: cpu and memory)."""
        den = sum(weights)
        if den == 0:  # nothing left to score this pod on
            return [_worst(part)] * n
        if not part.balanced:
            # W·mean = sign·Σ w·v when every resource counts; fold the sign and W/den into the
            # weights so that the sum is the contribution
            scale = part.sign * part.total / den
            acc: list[float] | None = None
            for col, w in zip(values, weights, strict=True):
                fw = scale * w
                if acc is None:
                    acc = [fw * v for v in col]
                else:
                    acc = [s + fw * v for s, v in zip(acc, col, strict=True)]
            return acc if acc is not None else [0.0] * n
        if len(values) < 2:
            return [0.0] * n
        mean: list[float] = [0.0] * n
        for col, w in zip(values, weights, strict=True):
            mean = [m + w * v for m, v in zip(mean, col, strict=True)]
        mean = [m / den for m in mean]
        var: list[float] = [0.0] * n
        for col, w in zip(values, weights, strict=True):
            var = [s + w * (v - m) * (v - m) for s, v, m in zip(var, col, mean, strict=True)]
        scale = part.sign * part.total
        return [scale * math.sqrt(s / den) for s in var]

    @staticmethod
    def _varying(part: _Part, n: int, values: list[Column], weights: list[list[int]]) -> list[float]:
        """Some resources are left out on some nodes: per-node weight sums."""
        den = [0] * n
        for wcol in weights:
            den = [d + w for d, w in zip(den, wcol, strict=True)]
        mean: list[float] = [0.0] * n
        for col, wcol in zip(values, weights, strict=True):
            mean = [m + w * v for m, v, w in zip(mean, col, wcol, strict=True)]
        mean = [m / d if d else 0.0 for m, d in zip(mean, den, strict=True)]
        worst = _worst(part)
        if not part.balanced:
            scale = part.sign * part.total
            return [scale * m if d else worst for m, d in zip(mean, den, strict=True)]
        var: list[float] = [0.0] * n
        count = [0] * n
        for col, wcol in zip(values, weights, strict=True):
            var = [s + w * (v - m) * (v - m) for s, v, m, w in zip(var, col, mean, wcol, strict=True)]
            count = [c + (1 if w else 0) for c, w in zip(count, wcol, strict=True)]
        scale = part.sign * part.total
        return [scale * math.sqrt(s / d) if c >= 2 else 0.0 for s, d, c in zip(var, den, count, strict=True)]

    # ---------------------------------------------------------------- raw scores, as arrays

    def score_arrays(
        self,
        pod_requests: Mapping[str, int],
        allocatable: Mapping[str, Floats],
        allocated: Mapping[str, Floats],
    ) -> Floats:
        """:meth:`score_nodes` on columns: ``allocatable[r][i]``, ``allocated[r][i]`` are node i's
        amounts of resource ``r``, for every ``r`` in :attr:`resources`, as float64 arrays of one
        length; every amount and request at most :data:`EXACT_IN_FLOAT` in magnitude (the caller
        checks; :meth:`score_nodes` takes any integers).

        The same operations in the same order as :meth:`score_nodes`, elementwise in numpy: the
        answer is the same floats (``tests/unit/scheduling/test_scorer_arrays.py``), at a few
        microseconds per node-resource instead of a Python step each.
        """
        import numpy as np

        n = len(next(iter(allocatable.values()))) if allocatable else 0
        if n == 0:
            return np.zeros(0)
        used_cols: dict[str, Floats] = {}

        def used_col(name: str) -> Floats:
            col = used_cols.get(name)
            if col is None:
                col = used_cols[name] = allocated[name] + float(pod_requests.get(name, 0))
            return col

        total: Floats | None = None
        for part in self.parts:
            contribution = self._part_arrays(part, n, pod_requests, allocatable, used_col)
            total = contribution if total is None else total + contribution
        assert total is not None
        return total

    def _part_arrays(
        self,
        part: _Part,
        n: int,
        pod_requests: Mapping[str, int],
        allocatable: Mapping[str, Floats],
        used_col: Any,
    ) -> Floats:
        import numpy as np

        values: list[Floats] = []
        weights: list[Ints | int] = []
        for name, w in zip(part.names, part.weights, strict=True):
            alloc = allocatable[name]
            amounts: Floats
            if part.portion == ALLOCATABLE:
                amounts = alloc
            elif part.portion == ALLOCATED:
                amounts = used_col(name)
            elif part.portion == REQUESTING:
                amounts = np.full(n, float(pod_requests.get(name, 0)))
            else:
                used = used_col(name)
                amounts = np.where(alloc > used, alloc - used, 0.0)
            if not part.ratio:
                values.append(amounts)
                weights.append(w)
                continue
            if name not in _ALWAYS_SCORED and pod_requests.get(name, 0) == 0:
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = amounts / alloc
            values.append(np.where(alloc > 0, np.where(amounts < alloc, ratio, 1.0), 0.0))
            weights.append(w if alloc.min() > 0 else np.where(alloc > 0, w, 0).astype(np.int64))

        uniform = [w for w in weights if isinstance(w, int)]
        if len(uniform) == len(weights):
            return self._uniform_arrays(part, n, values, uniform)
        return self._varying_arrays(
            part, n, values, [w if not isinstance(w, int) else np.full(n, w, dtype=np.int64) for w in weights]
        )

    @staticmethod
    def _uniform_arrays(part: _Part, n: int, values: list[Floats], weights: list[int]) -> Floats:
        import numpy as np

        den = sum(weights)
        if den == 0:
            return np.full(n, _worst(part))
        if not part.balanced:
            scale = part.sign * part.total / den
            acc: Floats | None = None
            for col, w in zip(values, weights, strict=True):
                fw = scale * w
                acc = fw * col if acc is None else acc + fw * col
            return acc if acc is not None else np.zeros(n)
        if len(values) < 2:
            return np.zeros(n)
        mean = np.zeros(n)
        for col, w in zip(values, weights, strict=True):
            mean = mean + float(w) * col
        mean = mean / float(den)
        var = np.zeros(n)
        for col, w in zip(values, weights, strict=True):
            d = col - mean
            var = var + float(w) * d * d
        return float(part.sign * part.total) * np.sqrt(var / float(den))

    @staticmethod
    def _varying_arrays(part: _Part, n: int, values: list[Floats], weights: list[Ints]) -> Floats:
        import numpy as np

        den = np.zeros(n, dtype=np.int64)
        for wcol in weights:
            den = den + wcol
        mean = np.zeros(n)
        for col, wcol in zip(values, weights, strict=True):
            mean = mean + wcol * col
        some = den > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(some, mean / den, 0.0)
        scale = float(part.sign * part.total)
        if not part.balanced:
            return np.where(some, scale * mean, _worst(part))
        var = np.zeros(n)
        count = np.zeros(n, dtype=np.int64)
        for col, wcol in zip(values, weights, strict=True):
            d = col - mean
            var = var + wcol * d * d
            count = count + (wcol != 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.sqrt(var / den)
        return np.where(count >= 2, scale * sd, 0.0)

    def normalize_array(self, raw: Floats) -> Floats:
        """:meth:`normalize` on an array (the same floats)."""
        import numpy as np

        if len(raw) == 0:
            return np.zeros(0)
        if self.bounded:
            lo, span = self._lo, self._hi - self._lo
            return np.minimum(
                np.maximum((raw - lo) * float(MAX_NODE_SCORE) / span, 0.0), float(MAX_NODE_SCORE)
            )
        lo, hi = float(raw.min()), float(raw.max())
        if hi == lo:
            return np.zeros(len(raw))
        return np.minimum((raw - lo) * float(MAX_NODE_SCORE) / (hi - lo), float(MAX_NODE_SCORE))

    # ---------------------------------------------------------------- normalised scores

    def normalize(self, raw: Sequence[float]) -> list[float]:
        """Raw scores of the nodes being compared → 0..100 (see the module docstring)."""
        if not raw:
            return []
        if self.bounded:
            lo, span = self._lo, self._hi - self._lo
            return [min(max((s - lo) * MAX_NODE_SCORE / span, 0.0), float(MAX_NODE_SCORE)) for s in raw]
        lo, hi = min(raw), max(raw)
        if hi == lo:
            return [0.0] * len(raw)
        span = hi - lo
        top = float(MAX_NODE_SCORE)
        return [min((s - lo) * MAX_NODE_SCORE / span, top) for s in raw]

    def node_scores(
        self,
        pod_requests: Mapping[str, int],
        allocatable: Sequence[Mapping[str, int]],
        allocated: Sequence[Mapping[str, int]],
    ) -> list[float]:
        """0..100 scores of the nodes being compared."""
        return self.normalize(self.score_nodes(pod_requests, allocatable, allocated))

    def extender_scores(
        self,
        pod_requests: Mapping[str, int],
        allocatable: Sequence[Mapping[str, int]],
        allocated: Sequence[Mapping[str, int]],
    ) -> list[int]:
        """0..10 scores of the nodes being compared, as an extender's HostPriorityList carries."""
        step = MAX_NODE_SCORE / MAX_EXTENDER_SCORE
        # scores are in 0..100, so int() (truncation) is floor here
        return [int(s / step + 0.5) for s in self.node_scores(pod_requests, allocatable, allocated)]

    def __repr__(self) -> str:
        parts = ", ".join(f"{p.portion}" for p in self.parts)
        return f"GenericScorer({parts})"


def _worst(part: _Part) -> float:
    """A ratio part's value when none of its resources counts for the pod on a node: the bottom
    of its range for Most/Least (kube-scheduler scores 0 then), 0 (sd = 0) for the balanced ones."""
    if part.balanced:
        return 0.0
    return part.bounds[0]
