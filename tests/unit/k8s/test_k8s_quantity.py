"""desched.k8s.quantity against apimachinery's ParseQuantity / MilliValue / Value."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desched.k8s.quantity import (
    QuantityError,
    format_amount,
    int_value,
    milli_value,
    nano_value,
    parse_quantity,
    resource_amount,
)

MAX_INT64 = 2**63 - 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", Fraction(0)),
        ("100m", Fraction(1, 10)),
        ("0.5", Fraction(1, 2)),
        ("1", Fraction(1)),
        ("1k", Fraction(1000)),
        ("1M", Fraction(10**6)),
        ("1G", Fraction(10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),
        ("1n", Fraction(1, 10**9)),
        ("1u", Fraction(1, 10**6)),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(2**20)),
        ("1Gi", Fraction(2**30)),
        ("1.5Gi", Fraction(3 * 2**29)),
        (".5Mi", Fraction(2**19)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e-3", Fraction(1, 1000)),
        ("1E-3", Fraction(1, 1000)),
        ("12e+3", Fraction(12000)),
        ("1.1E+2", Fraction(110)),
        ("+1", Fraction(1)),
        ("-1.5", Fraction(-3, 2)),
        ("007", Fraction(7)),
        ("1.", Fraction(1)),
        (".5", Fraction(1, 2)),
        # ParseQuantity rounds the magnitude up to a whole nano.
        ("0.1n", Fraction(1, 10**9)),
        ("1e-12", Fraction(1, 10**9)),
        ("-0.1n", Fraction(-1, 10**9)),
        ("1.0000000001", Fraction(10**9 + 1, 10**9)),
        # Binary values are capped at 2^63-1; decimal ones are not.
        ("8Ei", Fraction(MAX_INT64)),
        ("-16Ei", Fraction(-MAX_INT64)),
        ("9223372036854775808", Fraction(2**63)),
        # UnmarshalJSON trims whitespace.
        (" 250m ", Fraction(1, 4)),
        # The scanner's leniencies.
        ("+", Fraction(0)),
        ("-", Fraction(0)),
        (".", Fraction(0)),
        ("Ki", Fraction(0)),
    ],
)
def test_parse_quantity_strings(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, Fraction(1)),
        (0, Fraction(0)),
        (0.5, Fraction(1, 2)),
        (0.1, Fraction(1, 10)),
        (2.0, Fraction(2)),
        (1e-05, Fraction(1, 100000)),
        (1e20, Fraction(10**20)),
    ],
)
def test_parse_quantity_numbers(value: int | float, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("abc", "<number><suffix>"),
        ("1.5.5", "<number><suffix>"),
        ("1 Gi", "<number><suffix>"),
        ("1e", "unknown suffix 'e'"),
        ("e", "unknown suffix 'e'"),
        ("1ki", "unknown suffix 'ki'"),
        ("1Ki3", "unknown suffix 'Ki3'"),
        ("1kk", "unknown suffix 'kk'"),
        ("1-3", "unknown suffix '-3'"),
        ("1e99999", "out of range"),
        ("0x10", "<number><suffix>"),
        ("1_000", "<number><suffix>"),
    ],
)
def test_malformed_quantities_raise(text: str, fragment: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert fragment in str(info.value)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("value", [True, float("nan"), float("inf")])
def test_non_quantity_numbers_raise(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


def test_quantity_error_is_a_value_error() -> None:
    assert issubclass(QuantityError, ValueError)


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("0", 0, 0),
        ("1m", 1, 1),
        ("100m", 100, 1),
        ("1500m", 1500, 2),
        ("1", 1000, 1),
        ("1.001", 1001, 2),
        ("0.0001", 1, 1),  # MilliValue rounds up
        ("1n", 1, 1),
        ("1Gi", 2**30 * 1000, 2**30),
        ("0.3Ki", 307200, 308),
    ],
)
def test_milli_value_and_value_round_up(text: str, milli: int, value: int) -> None:
    assert milli_value(text) == milli
    assert int_value(text) == value


def test_resource_amount_is_millicores_for_cpu_only() -> None:
    assert resource_amount("cpu", "250m") == 250
    assert resource_amount("cpu", 2) == 2000
    assert resource_amount("memory", "1Gi") == 2**30
    assert resource_amount("memory", "1500m") == 2
    assert resource_amount("pods", "110") == 110
    assert resource_amount("ephemeral-storage", "10G") == 10 * 10**9
    assert resource_amount("nvidia.com/gpu", 1) == 1


@pytest.mark.parametrize(
    ("name", "amount", "text"),
    [
        ("cpu", 250, "250m"),
        ("cpu", 2000, "2"),
        ("cpu", 0, "0"),
        ("memory", 2**30, "1Gi"),
        ("memory", 3 * 2**29, "1.5Gi"),
        ("memory", 1536 * 2**20 + 1, "1.5Gi"),
        ("memory", 1000, "1000"),
        ("memory", 4096, "4Ki"),
        ("ephemeral-storage", 10 * 2**30, "10Gi"),
        ("hugepages-2Mi", 2**21, "2Mi"),
        ("pods", 110, "110"),
        ("nvidia.com/gpu", 4, "4"),
    ],
)
def test_format_amount(name: str, amount: int, text: str) -> None:
    assert format_amount(name, amount) == text


# --------------------------------------------------------------------------- properties

DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def reference(sign: str, whole: str, frac: str | None, suffix: str) -> Fraction:
    """ParseQuantity's value, from the documented rules, computed with Fractions."""
    magnitude = Fraction(int(whole or "0"))
    if frac:
        magnitude += Fraction(int(frac), 10 ** len(frac))
    if suffix in BINARY_SUFFIXES:
        magnitude *= 2 ** BINARY_SUFFIXES[suffix]
    elif suffix in DECIMAL_SUFFIXES:
        magnitude *= Fraction(10) ** DECIMAL_SUFFIXES[suffix]
    else:  # e<exp>
        magnitude *= Fraction(10) ** int(suffix[1:])
    magnitude = Fraction(math.ceil(magnitude * 10**9), 10**9)
    if suffix in BINARY_SUFFIXES:
        magnitude = min(magnitude, Fraction(MAX_INT64))
    return -magnitude if sign == "-" else magnitude


suffixes = st.one_of(
    st.sampled_from(sorted(DECIMAL_SUFFIXES)),
    st.sampled_from(sorted(BINARY_SUFFIXES)),
    st.builds(lambda e, x: f"{e}{x}", st.sampled_from(["e", "E"]), st.integers(-30, 30)),
)


@given(
    sign=st.sampled_from(["", "+", "-"]),
    whole=st.text("0123456789", min_size=1, max_size=25),
    frac=st.one_of(st.none(), st.text("0123456789", max_size=15)),
    suffix=suffixes,
)
def test_parse_agrees_with_reference_formula(sign: str, whole: str, frac: str | None, suffix: str) -> None:
    text = f"{sign}{whole}{'' if frac is None else '.' + frac}{suffix}"
    assert parse_quantity(text) == reference(sign, whole, frac, suffix)


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_nano_amounts_round_trip(nano: int) -> None:
    value = Fraction(nano, 10**9)
    assert parse_quantity(f"{nano}n") == value
    sign = "-" if nano < 0 else ""
    whole, frac = divmod(abs(nano), 10**9)
    assert parse_quantity(f"{sign}{whole}.{frac:09d}") == value
    assert nano_value(f"{sign}{whole}.{frac:09d}") == nano


@given(st.integers(0, 10**15), st.integers(0, 10**15))
def test_milli_and_int_value_are_monotonic_ceilings(a: int, b: int) -> None:
    lo, hi = sorted((a, b))
    assert milli_value(f"{lo}n") <= milli_value(f"{hi}n")
    assert int_value(f"{lo}n") <= int_value(f"{hi}n")
    assert milli_value(f"{lo}n") == math.ceil(Fraction(lo, 10**6))
    assert int_value(f"{lo}n") == math.ceil(Fraction(lo, 10**9))


@given(st.integers(0, 10**6))
def test_format_amount_of_whole_cpus_and_millis_parses_back(millis: int) -> None:
    assert milli_value(format_amount("cpu", millis)) == millis
