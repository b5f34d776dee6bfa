"""The metrics a plugin exports (``handle.metrics_registry``), as upstream gives plugins their own.

A plugin registers its metrics under its own names, once, when it is built (the same name asked
again, by another profile's instance or after a policy reload, gives the same metric), and sets
them while it runs. A live run hands the framework a registry that ``/metrics`` exposes
(:class:`desched.runtime.metrics.Metrics`); ``simulate`` and tests have one that keeps nothing
(:class:`NoMetricsRegistry`) but checks the same rules, so a plugin that breaks them fails there
too: names of ``[a-zA-Z_:][a-zA-Z0-9_:]*``, a counter's ending in ``_total`` (as exposed), one
kind, help text and label set per name, and as many label values as label names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class CounterValue(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class GaugeValue(Protocol):
    def set(self, value: float) -> None: ...


class CounterMetric(Protocol):
    """A counter: ``labels(*values)`` gives the series of those label values."""

    def labels(self, *values: str) -> CounterValue: ...


class GaugeMetric(Protocol):
    """A gauge: ``labels(*values)`` gives the series of those label values."""

    def labels(self, *values: str) -> GaugeValue: ...


class MetricsRegistry(Protocol):
    """Where a plugin registers the metrics it exports."""

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> CounterMetric:
        """The counter ``name`` (ending in ``_total``), registered on the first call."""
        ...

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> GaugeMetric:
        """The gauge ``name``, registered on the first call."""
        ...


class MetricsRegistryError(ValueError):
    """A metric's name, labels or registration breaks the rules (a plugin's bug)."""


def check_metric(kind: str, name: str, labelnames: Sequence[str]) -> None:
    """Raise :class:`MetricsRegistryError` if ``name`` or ``labelnames`` break the rules."""
    if not _NAME.fullmatch(name):
        raise MetricsRegistryError(f"metric name {name!r} is not a Prometheus metric name")
    if kind == "counter" and not name.endswith("_total"):
        raise MetricsRegistryError(f"counter {name!r}: a counter's name ends in _total")
    bad = [label for label in labelnames if not _LABEL.fullmatch(label) or label.startswith("__")]
    if bad or len(set(labelnames)) < len(labelnames):
        raise MetricsRegistryError(f"metric {name!r}: invalid or repeated label names {list(labelnames)}")


class _Discarded:
    __slots__ = ("_labels", "_name")

    def __init__(self, name: str, labels: int) -> None:
        self._name = name
        self._labels = labels

    def labels(self, *values: str) -> _Discarded:
        if len(values) != self._labels:
            raise MetricsRegistryError(
                f"metric {self._name!r}: {len(values)} label values for {self._labels} labels"
            )
        return self

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise MetricsRegistryError(f"counter {self._name!r}: cannot decrease")

    def set(self, value: float) -> None:
        pass


class NoMetricsRegistry:
    """A registry that exports nothing (``simulate``, tests) but checks what a real one checks."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, str, tuple[str, ...]]] = {}

    def _register(self, kind: str, name: str, documentation: str, labelnames: Sequence[str]) -> _Discarded:
        check_metric(kind, name, labelnames)
        spec = (kind, documentation, tuple(labelnames))
        if self._known.setdefault(name, spec) != spec:
            raise MetricsRegistryError(f"metric {name!r} is already registered differently")
        return _Discarded(name, len(labelnames))

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> CounterMetric:
        return self._register("counter", name, documentation, labelnames)

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> GaugeMetric:
        return self._register("gauge", name, documentation, labelnames)
