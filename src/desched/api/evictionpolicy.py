"""The ``evictionPolicy`` block (desched only): the safety rules every eviction passes.

A policy may carry one block at its top level and one in any profile; a profile's block overrides
the top-level one key by key (a key the profile sets replaces the top-level key whole, a key it
leaves out is inherited). Everything is off by default, so a policy written for upstream behaves as
upstream: an absent block, or an empty one, changes nothing.

This module only reads and validates the block; the framework applies it
(:mod:`desched.framework.safety`). Percentages (:class:`Percent`) are also what the top-level
``maxNoOfPodsToEvict*`` limits accept (upstream issue #1778); a percentage is rounded DOWN, so a
limit or budget never allows more than the percentage says (10% of 15 pods is 1; 10% of 9 is 0).
"""

from __future__ import annotations

import base64
import binascii
import enum
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import cronsim
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from desched.api.documents import excerpt
from desched.api.types import FieldValueError, format_go_duration, parse_go_duration

_PERCENT = re.compile(r"(\d{1,3})%")
#: any start for checking that a cron expression parses
_EPOCH = datetime(2000, 1, 1)


@dataclass(frozen=True, slots=True)
class Percent:
    """``"10%"``: a share of some population, rounded down (see the module docstring)."""

    value: int

    def of(self, total: int) -> int:
        return math.floor(self.value * total / 100)

    def __str__(self) -> str:
        return f"{self.value}%"


#: An absolute count or a percentage, as a policy writes it (``3`` or ``"25%"``).
IntOrPercent = int | Percent


def parse_int_or_percent(value: Any) -> IntOrPercent:
    """``3`` -> 3, ``"25%"`` -> Percent(25); anything else is a ValueError naming the value."""
    if type(value) is int:
        if value < 0:
            raise ValueError(f"must not be negative, got {value}")
        return value
    if isinstance(value, str):
        m = _PERCENT.fullmatch(value.strip())
        if m is not None and int(m.group(1)) <= 100:
            return Percent(int(m.group(1)))
    raise ValueError(
        f"must be a non-negative integer or a percentage from '0%' to '100%', got {excerpt(value)}"
    )


def resolve_amount(amount: IntOrPercent, total: int) -> int:
    """The count an amount allows out of ``total``."""
    return amount.of(total) if isinstance(amount, Percent) else amount


def amount_to_wire(amount: IntOrPercent) -> int | str:
    return str(amount) if isinstance(amount, Percent) else amount


def _duration(value: Any) -> timedelta:
    if not isinstance(value, str):
        raise ValueError(f"must be a duration such as '10m' or '1h30m', got {excerpt(value)}")
    d = parse_go_duration(value)
    if d <= timedelta(0):
        raise ValueError(f"must be a positive duration, got {excerpt(value)}")
    return d


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class OptOutsWire(_Wire):
    """Annotations by which a pod opts out of voluntary disruption, beyond upstream's own."""

    #: ``karpenter.sh/do-not-disrupt: "true"`` protects the pod.
    karpenter_do_not_disrupt: bool = Field(default=False, alias="karpenterDoNotDisrupt")
    #: ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` protects the pod.
    cluster_autoscaler_safe_to_evict: bool = Field(default=False, alias="clusterAutoscalerSafeToEvict")


class CooldownWire(_Wire):
    base: str
    max: str | None = None
    window: str | None = None

    @model_validator(mode="after")
    def _check(self) -> CooldownWire:
        for name in ("base", "max", "window"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                _duration(value)
            except ValueError as e:
                raise FieldValueError(name, str(e)) from None
        base = _duration(self.base)
        if self.max is not None and _duration(self.max) < base:
            raise FieldValueError("max", f"must be at least base ({self.base}), got {self.max!r}")
        return self


class WindowAction(enum.StrEnum):
    ALLOW = "Allow"
    FORBID = "Forbid"


class DisruptionWindowWire(_Wire):
    schedule: str
    duration: str
    time_zone: str = Field(default="UTC", alias="timeZone")
    action: Literal["Allow", "Forbid"] = "Allow"

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        try:
            cronsim.CronSim(value, _EPOCH)
        except cronsim.CronSimError as e:
            raise ValueError(f"not a cron expression ({e}): {excerpt(value)}") from None
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str) -> str:
        _duration(value)
        return value

    @field_validator("time_zone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown time zone {excerpt(value)} (an IANA name such as 'Europe/Berlin' or 'UTC')"
            ) from None
        return value


class RateWire(_Wire):
    evictions_per_minute: float = Field(gt=0, le=1_000_000, alias="evictionsPerMinute")
    burst: int = Field(default=1, ge=1, le=1_000_000)


class RateLimitsWire(_Wire):
    """Token buckets: per workload, per namespace and cluster-wide."""

    workload: RateWire | None = None
    namespace: RateWire | None = None
    cluster: RateWire | None = None


class WaitForReplacementWire(_Wire):
    timeout: str = "10m"

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        _duration(value)
        return value


class SurgeWire(_Wire):
    """``surge``: move a small Deployment's pod by a rollout restart instead of an eviction."""

    max_replicas: int = Field(default=1, ge=1, le=1_000_000, alias="maxReplicas")
    timeout: str = "10m"

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        _duration(value)
        return value


class WebhookWire(_Wire):
    """``webhook``: an external service approves each eviction (an ``EvictionReview``)."""

    url: str
    ca_bundle: str | None = Field(default=None, alias="caBundle")
    ca_file: str | None = Field(default=None, alias="caFile")
    timeout: str = "2s"
    failure_policy: Literal["Ignore", "Fail"] = Field(default="Ignore", alias="failurePolicy")
    #: plain http allowed (loopback tests only)
    insecure: bool = False

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        scheme, sep, rest = value.partition("://")
        if not sep or scheme not in ("http", "https") or not rest or rest.startswith("/"):
            raise ValueError(f"must be an http(s) URL such as 'https://host/path', got {excerpt(value)}")
        return value

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: str) -> str:
        d = _duration(value)
        if d > timedelta(seconds=30):
            raise ValueError(f"must be at most 30s (each eviction waits for it), got {excerpt(value)}")
        return value

    @field_validator("ca_bundle")
    @classmethod
    def _ca_bundle(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                pem = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError("must be base64 of PEM certificates") from None
            if b"-----BEGIN CERTIFICATE-----" not in pem:
                raise ValueError("must be base64 of PEM certificates (no BEGIN CERTIFICATE found)")
        return value

    @model_validator(mode="after")
    def _check(self) -> WebhookWire:
        if self.url.startswith("http://") and not self.insecure:
            raise FieldValueError("url", "must be https (set insecure: true only for loopback tests)")
        if self.ca_bundle is not None and self.ca_file is not None:
            raise FieldValueError("caFile", "set caBundle or caFile, not both")
        return self


class EvictionPolicyWire(_Wire):
    """The block as written (top level or in a profile)."""

    opt_outs: OptOutsWire | None = Field(default=None, alias="optOuts")
    max_unavailable_per_workload: int | str | None = Field(default=None, alias="maxUnavailablePerWorkload")
    max_evictions_per_workload: int | None = Field(default=None, ge=0, alias="maxEvictionsPerWorkload")
    cooldown: CooldownWire | None = None
    disruption_windows: list[DisruptionWindowWire] | None = Field(default=None, alias="disruptionWindows")
    rate_limits: RateLimitsWire | None = Field(default=None, alias="rateLimits")
    wait_for_replacement: WaitForReplacementWire | None = Field(default=None, alias="waitForReplacement")
    predictive: bool | None = None
    surge: SurgeWire | None = None
    webhook: WebhookWire | None = None

    @field_validator("max_unavailable_per_workload")
    @classmethod
    def _amount(cls, value: int | str | None) -> int | str | None:
        if value is not None:
            parse_int_or_percent(value)
        return value


# ---------------------------------------------------------------------------- resolved


@dataclass(frozen=True, slots=True)
class Cooldown:
    """After a workload is moved, it is not moved again for ``base``, doubled for every earlier
    move within ``window`` (at most ``maximum``)."""

    base: timedelta
    maximum: timedelta
    window: timedelta

    def after_moves(self, moves: int) -> timedelta:
        """The cooldown after the ``moves``-th move within the window (1: ``base``)."""
        if moves <= 0:
            return timedelta(0)
        # in whole microseconds (Python ints do not overflow; a timedelta would past ~2.7M years)
        unit = timedelta(microseconds=1)
        grown = (self.base // unit) << (moves - 1)
        return min(
            timedelta(microseconds=grown) if grown < self.maximum // unit else self.maximum, self.maximum
        )


@dataclass(frozen=True, slots=True)
class DisruptionWindow:
    schedule: str
    duration: timedelta
    time_zone: str
    action: WindowAction

    def describe(self) -> str:
        zone, span = self.time_zone, format_duration(self.duration)
        return f"{self.action.value.lower()} window {self.schedule!r} ({zone}, {span})"


@dataclass(frozen=True, slots=True)
class Rate:
    """A token bucket's shape: ``burst`` tokens at most, refilled at ``per_minute`` a minute."""

    per_minute: float
    burst: int


class RateScope(enum.StrEnum):
    WORKLOAD = "workload"
    NAMESPACE = "namespace"
    CLUSTER = "cluster"


@dataclass(frozen=True, slots=True)
class Surge:
    """Pods of Deployments with at most ``max_replicas`` desired replicas are moved by a rollout
    restart (make before break), followed for at most ``timeout``."""

    max_replicas: int
    timeout: timedelta


class FailurePolicy(enum.StrEnum):
    """What a webhook that gives no usable answer means: ``Ignore`` allows, ``Fail`` skips."""

    IGNORE = "Ignore"
    FAIL = "Fail"


@dataclass(frozen=True, slots=True)
class Webhook:
    """``evictionPolicy.webhook``: asked before each eviction (:mod:`desched.backends.eviction_webhook`)."""

    url: str
    timeout: timedelta
    failure_policy: FailurePolicy
    #: PEM certificates to trust (from caBundle), or a file of them
    ca_pem: str | None = None
    ca_file: str | None = None
    insecure: bool = False


@dataclass(frozen=True, slots=True)
class EvictionPolicy:
    """The rules of one profile (its own block merged over the top-level one). All off: inactive."""

    karpenter_do_not_disrupt: bool = False
    cluster_autoscaler_safe_to_evict: bool = False
    max_unavailable_per_workload: IntOrPercent | None = None
    max_evictions_per_workload: int | None = None
    cooldown: Cooldown | None = None
    disruption_windows: tuple[DisruptionWindow, ...] = field(default=())
    #: token buckets by scope (only the scopes the policy sets)
    rate_limits: tuple[tuple[RateScope, Rate], ...] = field(default=())
    #: after an eviction, the workload's next one waits for the replacement (at most this long)
    wait_for_replacement: timedelta | None = None
    #: skip an eviction whose replacement the placement model puts back on its node or nowhere
    predictive: bool = False
    #: move a small Deployment's pod by a rollout restart instead of an eviction
    surge: Surge | None = None
    #: an external service approves each eviction
    webhook: Webhook | None = None

    @property
    def active(self) -> bool:
        return self != EvictionPolicy()


def format_duration(d: timedelta) -> str:
    """For messages: ``1h30m``, ``45s`` (whole seconds), a duration under a second exactly (``500ms``).
    The policy as ``desched validate`` prints it uses :func:`format_go_duration`, which is exact."""
    if timedelta(0) < d < timedelta(seconds=1):
        return format_go_duration(d)
    seconds = int(d.total_seconds())
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


def merge_wire(top: EvictionPolicyWire | None, profile: EvictionPolicyWire | None) -> EvictionPolicyWire:
    """A profile's block over the top-level one, key by key."""
    if top is None:
        return profile or EvictionPolicyWire()
    if profile is None:
        return top
    overrides = {name: getattr(profile, name) for name in profile.model_fields_set}
    return top.model_copy(update=overrides)


def resolve(wire: EvictionPolicyWire) -> EvictionPolicy:
    """The validated block as the framework uses it (a validated wire never fails here)."""
    opt = wire.opt_outs or OptOutsWire()
    cooldown = None
    if wire.cooldown is not None:
        base = _duration(wire.cooldown.base)
        cooldown = Cooldown(
            base=base,
            maximum=_duration(wire.cooldown.max) if wire.cooldown.max else base * 64,
            window=_duration(wire.cooldown.window) if wire.cooldown.window else timedelta(hours=24),
        )
    windows = tuple(
        DisruptionWindow(w.schedule, _duration(w.duration), w.time_zone, WindowAction(w.action))
        for w in wire.disruption_windows or ()
    )
    budget = wire.max_unavailable_per_workload
    rates = wire.rate_limits or RateLimitsWire()
    rate_limits = tuple(
        (scope, Rate(r.evictions_per_minute, r.burst))
        for scope, r in (
            (RateScope.WORKLOAD, rates.workload),
            (RateScope.NAMESPACE, rates.namespace),
            (RateScope.CLUSTER, rates.cluster),
        )
        if r is not None
    )
    return EvictionPolicy(
        karpenter_do_not_disrupt=opt.karpenter_do_not_disrupt,
        cluster_autoscaler_safe_to_evict=opt.cluster_autoscaler_safe_to_evict,
        max_unavailable_per_workload=parse_int_or_percent(budget) if budget is not None else None,
        max_evictions_per_workload=wire.max_evictions_per_workload,
        cooldown=cooldown,
        disruption_windows=windows,
        rate_limits=rate_limits,
        wait_for_replacement=_duration(wire.wait_for_replacement.timeout)
        if wire.wait_for_replacement is not None
        else None,
        predictive=bool(wire.predictive),
        surge=Surge(wire.surge.max_replicas, _duration(wire.surge.timeout))
        if wire.surge is not None
        else None,
        webhook=_webhook(wire.webhook) if wire.webhook is not None else None,
    )


def _webhook(w: WebhookWire) -> Webhook:
    return Webhook(
        url=w.url,
        timeout=_duration(w.timeout),
        failure_policy=FailurePolicy(w.failure_policy),
        ca_pem=base64.b64decode(w.ca_bundle).decode() if w.ca_bundle is not None else None,
        ca_file=w.ca_file,
        insecure=w.insecure,
    )


def to_wire(policy: EvictionPolicy) -> dict[str, Any]:
    """The resolved block with its defaults filled in (``desched validate``); {} when inactive."""
    out: dict[str, Any] = {}
    if policy.karpenter_do_not_disrupt or policy.cluster_autoscaler_safe_to_evict:
        out["optOuts"] = {
            "karpenterDoNotDisrupt": policy.karpenter_do_not_disrupt,
            "clusterAutoscalerSafeToEvict": policy.cluster_autoscaler_safe_to_evict,
        }
    if policy.max_unavailable_per_workload is not None:
        out["maxUnavailablePerWorkload"] = amount_to_wire(policy.max_unavailable_per_workload)
    if policy.max_evictions_per_workload is not None:
        out["maxEvictionsPerWorkload"] = policy.max_evictions_per_workload
    if policy.cooldown is not None:
        c = policy.cooldown
        out["cooldown"] = {
            "base": format_go_duration(c.base),
            "max": format_go_duration(c.maximum),
            "window": format_go_duration(c.window),
        }
    if policy.disruption_windows:
        out["disruptionWindows"] = [
            {
                "schedule": w.schedule,
                "duration": format_go_duration(w.duration),
                "timeZone": w.time_zone,
                "action": w.action.value,
            }
            for w in policy.disruption_windows
        ]
    if policy.predictive:
        out["predictive"] = True
    if policy.wait_for_replacement is not None:
        out["waitForReplacement"] = {"timeout": format_go_duration(policy.wait_for_replacement)}
    if policy.surge is not None:
        out["surge"] = {
            "maxReplicas": policy.surge.max_replicas,
            "timeout": format_go_duration(policy.surge.timeout),
        }
    if policy.webhook is not None:
        wh = policy.webhook
        hook: dict[str, Any] = {"url": wh.url}
        if wh.ca_pem is not None:
            hook["caBundle"] = base64.b64encode(wh.ca_pem.encode()).decode()
        if wh.ca_file is not None:
            hook["caFile"] = wh.ca_file
        hook["timeout"] = format_go_duration(wh.timeout)
        hook["failurePolicy"] = wh.failure_policy.value
        if wh.insecure:
            hook["insecure"] = True
        out["webhook"] = hook
    if policy.rate_limits:
        out["rateLimits"] = {
            scope.value: {"evictionsPerMinute": rate.per_minute, "burst": rate.burst}
            for scope, rate in policy.rate_limits
        }
    return out
