"""RemoveAnomalyPodsArgs: detection sources, the anomaly condition, the node downgrade policy; validation."""

from __future__ import annotations

import re
from datetime import timedelta

from pydantic import Field, field_validator

from desched.framework import (
    METHOD_LABEL,
    METHOD_TAINT,
    ArgsModel,
    FieldValueError,
    LabelSelectorArg,
    Namespaces,
    Seconds,
    parse_go_duration,
)
from desched.k8s import labels as k8s_labels

DEFAULT_EVENT_REASONS = ("FailedCreatePodSandBox", "FailedAttachVolume", "FailedMount")
DEFAULT_MIN_POD_STARTUP_SECONDS = 300
DEFAULT_TIMEOUT = "1m"
DEFAULT_CONSECUTIVE_ABNORMALITIES = 5
DEFAULT_CONSECUTIVE_NORMALITIES = 1
DEFAULT_TTL = "5m"
DEFAULT_DOWNGRADE_KEY = "desched.io/anomalous-node"
DEFAULT_DOWNGRADE_VALUE = "true"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule")


def _positive_duration(value: str) -> str:
    if parse_go_duration(value) <= timedelta(0):
        raise ValueError(f"must be a positive duration such as '1m' or '30s', got {value!r}")
    return value


class AnomalyConditionArgs(ArgsModel):
    """When a pod counts as anomalous (see the module docstring for the exact rules)."""

    timeout: str = DEFAULT_TIMEOUT
    consecutive_abnormalities: int = Field(default=DEFAULT_CONSECUTIVE_ABNORMALITIES, ge=1)
    consecutive_normalities: int = Field(default=DEFAULT_CONSECUTIVE_NORMALITIES, ge=1)

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, v: str) -> str:
        return _positive_duration(v)

    @property
    def timeout_duration(self) -> timedelta:
        return parse_go_duration(self.timeout)


class NodeDowngradePolicyArgs(ArgsModel):
    """How a node that produces anomalous pods is downgraded, and for how long."""

    method: str = METHOD_LABEL
    ttl: str = DEFAULT_TTL
    key: str = DEFAULT_DOWNGRADE_KEY
    value: str = DEFAULT_DOWNGRADE_VALUE
    #: Taint effect (method ``taint``): ``NoSchedule`` isolates, ``PreferNoSchedule`` only downgrades.
    effect: str = "NoSchedule"
    #: At most this many nodes downgraded at a time (by any desched profile); unset: no limit.
    max_downgraded_nodes: int | None = Field(default=None, ge=1)

    @field_validator("method")
    @classmethod
    def _method(cls, v: str) -> str:
        if v not in (METHOD_LABEL, METHOD_TAINT):
            raise ValueError(f"must be {METHOD_LABEL!r} or {METHOD_TAINT!r}, got {v!r}")
        return v

    @field_validator("ttl")
    @classmethod
    def _ttl(cls, v: str) -> str:
        return _positive_duration(v)

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        why = k8s_labels.validate_label_key(v)
        if why:
            raise ValueError(f"must be a valid label/taint key ({why}), got {v!r}")
        return v

    @field_validator("value")
    @classmethod
    def _value(cls, v: str) -> str:
        why = k8s_labels.validate_label_value(v)
        if why:
            raise ValueError(f"must be a valid label/taint value ({why}), got {v!r}")
        return v

    @field_validator("effect")
    @classmethod
    def _effect(cls, v: str) -> str:
        if v not in TAINT_EFFECTS:
            raise ValueError(f"must be one of {', '.join(TAINT_EFFECTS)}, got {v!r}")
        return v

    @property
    def ttl_duration(self) -> timedelta:
        return parse_go_duration(self.ttl)


class RemoveAnomalyPodsArgs(ArgsModel):
    namespaces: Namespaces | None = None
    label_selector: LabelSelectorArg | None = None
    min_pod_startup_seconds: Seconds = DEFAULT_MIN_POD_STARTUP_SECONDS
    exclude_owner_kinds: list[str] | None = None
    event_reasons: list[str] = Field(default_factory=lambda: list(DEFAULT_EVENT_REASONS))
    reasons: list[str] | None = None
    annotation_hints: list[str] | None = None
    including_init_containers: bool = False
    anomaly_condition: AnomalyConditionArgs = Field(default_factory=AnomalyConditionArgs)
    node_downgrade_policy: NodeDowngradePolicyArgs | None = None

    @field_validator("reasons")
    @classmethod
    def _reasons(cls, v: list[str] | None) -> list[str] | None:
        for i, text in enumerate(v or ()):
            if not text:
                raise FieldValueError(f"[{i}]", "must not be empty (got '')")
            try:
                Pattern(text)
            except re.error as e:
                raise FieldValueError(
                    f"[{i}]", f"not a valid regular expression ({e}), got {text!r}"
                ) from None
        return v

    @field_validator("annotation_hints")
    @classmethod
    def _hints(cls, v: list[str] | None) -> list[str] | None:
        for i, key in enumerate(v or ()):
            why = k8s_labels.validate_label_key(key)
            if why:
                raise FieldValueError(f"[{i}]", f"must be a valid annotation key ({why}), got {key!r}")
        return v


class Pattern:
    """A ``reasons`` entry: a substring, or a regular expression between slashes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._regex = (
            re.compile(text[1:-1]) if len(text) >= 2 and text[0] == "/" and text[-1] == "/" else None
        )

    def matches(self, value: str) -> bool:
        if not value:
            return False
        if self._regex is not None:
            return self._regex.search(value) is not None
        return self.text in value
