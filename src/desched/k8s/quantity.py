"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``), exactly.

A quantity is ``<sign><digits>[.<digits>]<suffix>`` where the suffix is a decimal SI prefix
(``n u m "" k M G T P E``), a binary one (``Ki Mi Gi Ti Pi Ei``) or a decimal exponent
(``e3``, ``E-2``). Parsing follows ``ParseQuantity``:

- the magnitude is rounded *up* to a whole nano (``0.1n`` → ``1n``): every parsed value is an exact
  multiple of 10**-9, which is why desched sums quantities as integer nano-units and rounds only
  once at the end, the way Go sums ``Quantity`` values and then calls ``MilliValue()``;
- binary-suffixed values are capped at 2**63 - 1 in magnitude;
- the scanner's leniencies are kept (``"1."`` and ``".5"`` parse; so do ``"+"`` and a bare suffix
  such as ``"Ki"``, both meaning 0), because the API server accepted them and a snapshot may hold
  them. Surrounding whitespace is trimmed, as ``Quantity.UnmarshalJSON`` does.

A JSON/YAML number (``cpu: 1``, ``cpu: 0.5``) is parsed from its shortest decimal spelling, which is
the text Go's decoder would have seen. ``bool`` is rejected.

Decimal exponents beyond ±1000 and numbers of more than 1000 digits are refused (Go wraps such
exponents to int32 and overflows on use; no real object has them), so parsing cannot be made to
build giant integers.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from desched.k8s.objects import QuantityValue

__all__ = [
    "NANO",
    "QuantityError",
    "format_amount",
    "int_value",
    "milli_value",
    "nano_to_amount",
    "nano_value",
    "parse_quantity",
    "resource_amount",
]

#: Nano-units per unit: ``nano_value`` returns value * NANO as an exact int.
NANO = 1_000_000_000

_MAX_INT64 = (1 << 63) - 1
_MAX_BINARY_NANO = _MAX_INT64 * NANO
_MAX_EXPONENT = 1000
_MAX_DIGITS = 1000

_DECIMAL_SUFFIXES: dict[str, int] = {
    "": 0,
    "n": -9,
    "u": -6,
    "m": -3,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_FORMAT_HINT = "quantities must look like <number><suffix>, e.g. '100m', '0.5', '1Gi', '1e3'"


class QuantityError(ValueError):
    """A malformed Kubernetes quantity."""


def _ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def _scan_int(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64) without the range check: optional sign, ASCII digits."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not all(c in _DIGITS for c in body):
        return None
    return int(text)


@functools.lru_cache(maxsize=8192)
def _parse_nano(text: str) -> int:
    s = text.strip()
    if not s:
        raise QuantityError(f"invalid quantity {text!r}: empty string")
    end = len(s)
    pos = 0
    negative = False
    if s[0] in "+-":
        negative = s[0] == "-"
        pos = 1
    start = pos
    while pos < end and s[pos] in _DIGITS:
        pos += 1
    num = s[start:pos]
    denom = ""
    if pos < end and s[pos] == ".":
        pos += 1
        start = pos
        while pos < end and s[pos] in _DIGITS:
            pos += 1
        denom = s[start:pos]
    suffix = s[pos:]
    # The suffix must be: letters from the suffix alphabet, an optional sign, then digits.
    i = 0
    n = len(suffix)
    while i < n and suffix[i] in _SUFFIX_LETTERS:
        i += 1
    if i < n and suffix[i] in "+-":
        i += 1
    while i < n and suffix[i] in _DIGITS:
        i += 1
    if i != n:
        raise QuantityError(f"invalid quantity {text!r}: {_FORMAT_HINT}")

    if len(num) + len(denom) > _MAX_DIGITS:
        raise QuantityError(f"invalid quantity {text!r}: more than {_MAX_DIGITS} digits")
    mantissa = int(num + denom) if (num or denom) else 0
    scale = len(denom)
    # Lookup order as quantitySuffixer.interpret: decimal SI, binary SI, then a decimal exponent.
    binary = suffix in _BINARY_SUFFIXES
    if binary:
        numerator = mantissa << _BINARY_SUFFIXES[suffix]
        shift = 9 - scale
        nano = numerator * 10**shift if shift >= 0 else _ceil_div(numerator, 10**-shift)
    else:
        exponent = _DECIMAL_SUFFIXES.get(suffix)
        if exponent is None:
            parsed = _scan_int(suffix[1:]) if len(suffix) > 1 and suffix[0] in "eE" else None
            if parsed is None:
                raise QuantityError(f"invalid quantity {text!r}: unknown suffix {suffix!r}")
            if abs(parsed) > _MAX_EXPONENT:
                raise QuantityError(f"invalid quantity {text!r}: exponent {parsed} is out of range")
            exponent = parsed
        shift = exponent - scale + 9  # value * 10**9 == mantissa * 10**shift
        nano = mantissa * 10**shift if shift >= 0 else _ceil_div(mantissa, 10**-shift)
    if binary and nano > _MAX_BINARY_NANO:
        nano = _MAX_BINARY_NANO
    return -nano if negative else nano


def nano_value(v: QuantityValue) -> int:
    """The quantity * 10**9 as an exact int (every parsed quantity is a whole number of nano-units)."""
    if isinstance(v, str):
        return _parse_nano(v)
    if isinstance(v, bool):
        raise QuantityError(f"invalid quantity {v!r}: a boolean is not a quantity")
    if isinstance(v, int):
        return v * NANO
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            raise QuantityError(f"invalid quantity {v!r}: not a finite number")
        return _parse_nano(repr(v))
    raise QuantityError(f"invalid quantity {v!r}: expected a string or a number")


def parse_quantity(v: QuantityValue) -> Fraction:
    """The exact value of a quantity, as ParseQuantity computes it (rounded up to a whole nano)."""
    return Fraction(nano_value(v), NANO)


def milli_value(v: QuantityValue) -> int:
    """``Quantity.MilliValue()``: value * 1000, rounded up."""
    return _ceil_div(nano_value(v), 1_000_000)


def int_value(v: QuantityValue) -> int:
    """``Quantity.Value()``: the value rounded up to an integer."""
    return _ceil_div(nano_value(v), NANO)


def resource_amount(name: str, v: QuantityValue) -> int:
    """The integer desched stores for resource ``name``: millicores for cpu, ``Value()`` otherwise."""
    if name == "cpu":
        return milli_value(v)
    return int_value(v)


def nano_to_amount(name: str, nano: int) -> int:
    """Turn a nano-unit total into the canonical amount for ``name`` (rounding up, like Go)."""
    if name == "cpu":
        return _ceil_div(nano, 1_000_000)
    return _ceil_div(nano, NANO)


_BINARY_UNITS = (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10))
_BYTE_RESOURCES = frozenset({"memory", "ephemeral-storage", "storage"})


def _is_byte_resource(name: str) -> bool:
    return name in _BYTE_RESOURCES or name.startswith("hugepages-") or name.endswith("/memory")


def format_amount(name: str, amount: int) -> str:
    """A short human-readable spelling of a canonical amount: ``250m``, ``2``, ``1.5Gi``, ``110``."""
    if name == "cpu":
        if amount % 1000 == 0:
            return str(amount // 1000)
        return f"{amount}m"
    if _is_byte_resource(name):
        magnitude = abs(amount)
        for suffix, power in _BINARY_UNITS:
            unit = 1 << power
            if magnitude >= unit:
                if amount % unit == 0:
                    return f"{amount // unit}{suffix}"
                text = f"{amount / unit:.2f}".rstrip("0").rstrip(".")
                return f"{text}{suffix}"
    return str(amount)
