"""The value types of the ``desched`` command's options, as argparse ``type=`` converters: Go-style
booleans and durations, klog's verbosity and ``--vmodule``, Kubernetes byte quantities,
component-base's ``--feature-gates`` map, comma lists. Each raises ``argparse.ArgumentTypeError``
with the reason; the flag table (:mod:`desched.cli.flags`) then names the option."""

from __future__ import annotations

import argparse
from typing import Any


def go_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "t", "yes"):
        return True
    if value in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"must be true or false, got {text!r}")


#: how a Go (pflag) boolean flag is taken: ``--flag``, ``--flag=true|false`` or ``--flag true|false``
GO_BOOL: dict[str, Any] = {"type": go_bool, "nargs": "?", "const": True, "metavar": "BOOL"}


def duration(text: str) -> float:
    from desched.api.types import parse_go_duration

    if not text.strip():
        raise argparse.ArgumentTypeError("must be a duration such as 30s or 5m, got ''")
    try:
        seconds = parse_go_duration(text).total_seconds()
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return seconds


def verbosity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


def vmodule(text: str) -> dict[str, int]:
    """``pattern=N,...`` as klog's --vmodule: a glob over module (file) names, a verbosity each."""
    result: dict[str, int] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        pattern, sep, level = item.partition("=")
        if not sep or not pattern.strip():
            raise argparse.ArgumentTypeError(f"expected pattern=N, got {item!r}")
        try:
            result[pattern.strip()] = verbosity(level.strip())
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{item!r}: the level must be a whole number >= 0") from None
    return result


def byte_quantity(text: str) -> int:
    """A Kubernetes quantity of bytes (512, 1K, 2Ki, 5Mi), as the --log-*-info-buffer-size flags take."""
    from desched.k8s.quantity import QuantityError, int_value

    try:
        value = int_value(text)
    except QuantityError:
        raise argparse.ArgumentTypeError(f"must be a quantity such as 512, 1k or 2Ki, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return value


#: upstream's --feature-gates (pkg/features): name -> pre-release stage
FEATURE_GATES = {"EvictionsInBackground": "ALPHA"}


def feature_gates(text: str) -> dict[str, bool]:
    """``key=bool,...`` as component-base's MapStringBool; every key must be a known gate."""
    gates: dict[str, bool] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise argparse.ArgumentTypeError(f"expected key=true|false, got {item!r}")
        if key not in FEATURE_GATES and key not in ("AllAlpha", "AllBeta"):
            known = ", ".join(["AllAlpha", "AllBeta", *sorted(FEATURE_GATES)])
            raise argparse.ArgumentTypeError(f"unrecognized feature gate {key!r} (known: {known})")
        try:
            gates[key] = go_bool(value)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{key}: must be true or false, got {value!r}") from None
    return gates


class MergeGates(argparse.Action):
    """--feature-gates may be given several times; later keys win, as pflag's map flag."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        merged = dict(getattr(namespace, self.dest, None) or {})
        merged.update(values)
        setattr(namespace, self.dest, merged)


def string_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def sample_rate(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None


def positive_duration(text: str) -> float:
    seconds = duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text!r}")
    return seconds
