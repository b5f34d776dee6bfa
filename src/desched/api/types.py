"""Building blocks of plugin args shared by many plugins, and turning pydantic errors into one line.

Field names on the wire are upstream's (camelCase); the Python attributes are snake_case.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Protocol, TypeVar, runtime_checkable

import msgspec
import pydantic
from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from desched.api.documents import excerpt
from desched.errors import PolicyError, format_path, join_path
from desched.k8s import labels as k8s_labels
from desched.k8s.namespaces import namespace_rule
from desched.k8s.objects import LabelSelector


class ArgsModel(BaseModel):
    """Base of every plugin's args: camelCase on the wire, unknown fields rejected, immutable.

    Rejecting unknown fields differs from upstream (which silently ignores them): a typo such as
    ``treshold`` would otherwise quietly run a plugin with its defaults.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        arbitrary_types_allowed=True,
    )


@runtime_checkable
class ReadsMetricsSource(Protocol):
    """Args of a plugin that reads actual usage from one of the policy's ``metricsProviders``
    (LowNodeUtilization's ``metricsUtilization``): the policy loader checks that source is configured."""

    @property
    def metrics_source(self) -> str | None:
        """The ``metricsProviders`` source read (None: the plugin reads no metrics)."""
        ...


class Namespaces(ArgsModel):
    include: list[str] | None = None
    exclude: list[str] | None = None

    @model_validator(mode="after")
    def _one_of(self) -> Namespaces:
        if self.include and self.exclude:
            raise FieldValueError(
                "exclude",
                f"cannot be set with include (got include={self.include!r}, exclude={self.exclude!r})",
            )
        return self

    def allows(self, namespace: str) -> bool:
        allowed = namespace_rule(self.include, self.exclude)
        return allowed is None or allowed(namespace)


class LabelSelectorRequirementArg(ArgsModel):
    """One ``matchExpressions`` entry (unknown keys refused, like everywhere in args)."""

    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class LabelSelectorArg(ArgsModel):
    """A metav1.LabelSelector in args; validated with the semantics package's rules."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[LabelSelectorRequirementArg] | None = None

    @model_validator(mode="after")
    def _valid(self) -> LabelSelectorArg:
        try:
            k8s_labels.validate_label_selector(self.to_selector())
        except (k8s_labels.SelectorError, msgspec.ValidationError) as e:
            raise ValueError(str(e)) from None
        return self

    def to_selector(self) -> LabelSelector:
        return msgspec.convert(self.model_dump(by_alias=True, exclude_none=True), LabelSelector, strict=False)


class PriorityThreshold(ArgsModel):
    value: int | None = None
    name: str = ""

    @model_validator(mode="after")
    def _one_of(self) -> PriorityThreshold:
        if self.value is not None and self.name:
            raise FieldValueError(
                "name", f"cannot be set with value (got value={self.value}, name={self.name!r})"
            )
        return self


class EvictionLimits(ArgsModel):
    node: int | None = pydantic.Field(default=None, ge=0)


#: Pydantic validation-context key. Upstream checks plugin args (its ``Validate*Args``) when it
#: loads a policy, not when it builds a plugin, and its unit tests build plugins straight from
#: args. ``Model.model_validate(raw, context={SKIP_POLICY_CHECKS: True})`` builds args that way
#: (the conformance harness does): checks that upstream makes only at policy load are skipped;
#: parsing, and the checks upstream's plugin constructors make, still run.
SKIP_POLICY_CHECKS = "skipPolicyChecks"


def policy_checks_enabled(info: pydantic.ValidationInfo) -> bool:
    """False when validating with ``context={SKIP_POLICY_CHECKS: True}``."""
    ctx = info.context
    return not (isinstance(ctx, Mapping) and ctx.get(SKIP_POLICY_CHECKS))


class FieldValueError(ValueError):
    """A validator's error about one field below the model it checks (``path`` is relative to the
    model, e.g. ``thresholds.cpu``), so that the message names the leaf field."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason)
        self.path = path


#: Go's time.Duration holds at most this many seconds (2^63 - 1 ns, about 292 years); upstream's
#: ``...Seconds`` fields become Durations, so a larger value would overflow there.
MAX_DURATION_SECONDS = (2**63 - 1) // 1_000_000_000

#: An ``int`` field of whole seconds, as upstream's ``*uint`` args that become a time.Duration.
Seconds = Annotated[int, pydantic.Field(ge=0, le=MAX_DURATION_SECONDS)]

#: Go's int64 and uint64: upstream decodes plain integers into int, int64 or uint; a number past
#: both is refused by its decoder whatever the field.
INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1

_GO_DURATION = re.compile(r"(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NANOS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 micro sign
    "μs": 1_000,  # U+03BC Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NANOS = 2**63 - 1


def parse_go_duration(text: str) -> timedelta:
    """A Go ``time.Duration`` string (``"50m0s"``, ``"1h"``, ``"1.5s"``), as metav1.Duration accepts.

    Summed exactly in whole nanoseconds as Go does (a fraction below 1ns is dropped), then kept to
    the microsecond a timedelta holds, so that :func:`format_go_duration` prints it back exactly."""
    s = text.strip()
    if not s:
        # (Go's time.ParseDuration refuses "" too)
        raise ValueError("must be a duration such as '5m', '1h30m' or '90s', got an empty string")
    negative = False
    if s[0] in "+-":
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return timedelta(0)
    pos = 0
    nanos = 0
    for m in _GO_DURATION.finditer(s):
        whole, frac, unit = m.group(1), m.group(2) or "", m.group(3)
        if m.start() != pos or not (whole or frac):
            break
        if len(whole) > 20:
            raise ValueError(f"duration {excerpt(text)} is out of range (at most about 292 years)")
        frac = frac[:18]  # (digits past a nanosecond of an hour change nothing)
        scale = _UNIT_NANOS[unit]
        nanos += int(whole or "0") * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
        pos = m.end()
        if nanos > _MAX_NANOS:
            # time.ParseDuration refuses what does not fit in an int64 of nanoseconds
            raise ValueError(f"duration {excerpt(text)} is out of range (at most about 292 years)")
    if pos != len(s) or not s:
        raise ValueError(f"invalid duration {excerpt(text)} (expected e.g. '5m', '1h30m', '90s')")
    micros = min((nanos + 500) // 1000, _MAX_NANOS // 1000)  # (rounded, and still in range)
    return timedelta(microseconds=-micros if negative else micros)


def format_go_duration(d: timedelta) -> str:
    """``d`` as a Go duration string that :func:`parse_go_duration` reads back to the same value,
    to the microsecond: ``1h30m``, ``45s``, ``1m0.5s``, ``500ms``, ``1.25ms``, ``7us``, ``0s``."""
    micros = d // timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros == 0:
        return "0s"
    if micros < 1000:
        return f"{sign}{micros}us"
    if micros < 1_000_000:
        ms, rest = divmod(micros, 1000)
        return f"{sign}{ms}{_fraction(rest, 3)}ms"
    h, rest = divmod(micros, 3_600_000_000)
    m, rest = divmod(rest, 60_000_000)
    sec, rest = divmod(rest, 1_000_000)
    out = sign + (f"{h}h" if h else "") + (f"{m}m" if m else "")
    if sec or rest:
        out += f"{sec}{_fraction(rest, 6)}s"
    return out


def _fraction(value: int, digits: int) -> str:
    return f".{value:0{digits}d}".rstrip("0") if value else ""


_MODEL = TypeVar("_MODEL", bound=BaseModel)

_MESSAGES = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field",
}


def describe_validation_error(err: pydantic.ValidationError, prefix: str = "") -> tuple[str, str]:
    """The first error of a pydantic ValidationError as (field path, reason)."""
    first = err.errors(include_url=False)[0]
    loc = [p for p in first["loc"] if p not in ("function-after", "function-before")]
    path = join_path(prefix, format_path([p if isinstance(p, int) else str(p) for p in loc]))
    kind = first["type"]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldValueError):
        path = join_path(path, cause.path)
    msg = _MESSAGES.get(kind) or str(first["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    elif msg.startswith("Assertion failed, "):
        msg = msg[len("Assertion failed, ") :]
    elif kind not in _MESSAGES:
        msg = msg[:1].lower() + msg[1:]
        if "input" in first and kind not in ("missing",):
            msg += f", got {_describe_input(first['input'])}"
    # a validator may quote a value whole: keep any long quoted string to a short excerpt
    msg = _LONG_QUOTED.sub(lambda m: excerpt(m.group(1)), msg)
    if len(msg) > 1000:  # (a net: values are quoted as short excerpts already)
        msg = msg[:997] + "..."
    more = err.error_count() - 1
    if more > 0:
        msg += f" (and {more} more error{'s' if more > 1 else ''})"
    return path, msg


_LONG_QUOTED = re.compile(r"'([^'\n]{80,})'")


def _describe_input(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return excerpt(value)


def check_integers(data: Any, path: str) -> None:
    """Refuse an integer outside Go's int64 anywhere in ``data`` (upstream's decoder does)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        item, where = stack.pop()
        if isinstance(item, Mapping):
            stack.extend((v, (*where, str(k))) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, (*where, i)) for i, v in enumerate(item))
        elif type(item) is int and not INT64_MIN <= item <= UINT64_MAX:
            raise PolicyError(
                join_path(path, format_path(list(where))), f"number {excerpt(item)} is out of range"
            )
        elif type(item) is float and not math.isfinite(item):
            raise PolicyError(join_path(path, format_path(list(where))), f"{item} is not a number")


def validate_model(model: type[_MODEL], data: Any, path: str) -> _MODEL:
    """Validate ``data`` into ``model``; a failure is one PolicyError naming the field path.

    Strict, as upstream's decoder: ``true`` is not 1, ``"7"`` is not 7, ``"yes"`` is not a
    boolean; JSON and YAML give ints, floats, booleans and strings natively.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise PolicyError(path, f"must be an object, got {_describe_input(data)}")
    check_integers(data, path)
    try:
        return model.model_validate(data, strict=True)
    except pydantic.ValidationError as e:
        raise PolicyError(*describe_validation_error(e, path)) from None
