"""DefaultEvictorArgs: the pod protections, selectors and thresholds, and their validation."""

from __future__ import annotations

import enum
from datetime import timedelta

from pydantic import Field, field_validator, model_validator

from desched.framework import (
    ArgsModel,
    FieldValueError,
    LabelSelectorArg,
    PriorityThreshold,
    parse_go_duration,
)
from desched.k8s import labels as k8s_labels


class PodProtection(enum.StrEnum):
    PODS_WITH_LOCAL_STORAGE = "PodsWithLocalStorage"
    DAEMON_SET_PODS = "DaemonSetPods"
    SYSTEM_CRITICAL_PODS = "SystemCriticalPods"
    FAILED_BARE_PODS = "FailedBarePods"
    PODS_WITH_PVC = "PodsWithPVC"
    PODS_WITHOUT_PDB = "PodsWithoutPDB"
    PODS_WITH_RESOURCE_CLAIMS = "PodsWithResourceClaims"


#: Enabled unless listed in ``podProtections.defaultDisabled`` (upstream's order).
DEFAULT_POD_PROTECTIONS: tuple[PodProtection, ...] = (
    PodProtection.PODS_WITH_LOCAL_STORAGE,
    PodProtection.SYSTEM_CRITICAL_PODS,
    PodProtection.FAILED_BARE_PODS,
    PodProtection.DAEMON_SET_PODS,
)
#: Enabled only when listed in ``podProtections.extraEnabled``.
EXTRA_POD_PROTECTIONS: tuple[PodProtection, ...] = (
    PodProtection.PODS_WITH_PVC,
    PodProtection.PODS_WITHOUT_PDB,
    PodProtection.PODS_WITH_RESOURCE_CLAIMS,
)

NO_EVICTION_PREFERRED = "Preferred"
NO_EVICTION_MANDATORY = "Mandatory"

#: The deprecated booleans, by wire name, and what each stands for.
_DEPRECATED = {
    "evictLocalStoragePods": "podProtections.defaultDisabled: [PodsWithLocalStorage]",
    "evictDaemonSetPods": "podProtections.defaultDisabled: [DaemonSetPods]",
    "evictSystemCriticalPods": "podProtections.defaultDisabled: [SystemCriticalPods]",
    "evictFailedBarePods": "podProtections.defaultDisabled: [FailedBarePods]",
    "ignorePvcPods": "podProtections.extraEnabled: [PodsWithPVC]",
    "ignorePodsWithoutPDB": "podProtections.extraEnabled: [PodsWithoutPDB]",
}


class ProtectedStorageClass(ArgsModel):
    name: str


class PodsWithPVCConfig(ArgsModel):
    protected_storage_classes: list[ProtectedStorageClass] | None = None


class PodProtectionsConfig(ArgsModel):
    pods_with_pvc: PodsWithPVCConfig | None = Field(default=None, alias="PodsWithPVC")


def _check_protections(values: list[str] | None, allowed: tuple[PodProtection, ...], what: str) -> None:
    seen: set[str] = set()
    for i, v in enumerate(values or ()):
        if v not in allowed:
            valid = ", ".join(allowed)
            raise FieldValueError(f"[{i}]", f"must be one of {valid} (the {what} protections), got {v!r}")
        if v in seen:
            raise FieldValueError(f"[{i}]", f"{v!r} is listed twice")
        seen.add(v)


class PodProtections(ArgsModel):
    extra_enabled: list[str] | None = None
    default_disabled: list[str] | None = None
    config: PodProtectionsConfig | None = None

    @field_validator("extra_enabled")
    @classmethod
    def _extra(cls, v: list[str] | None) -> list[str] | None:
        _check_protections(v, EXTRA_POD_PROTECTIONS, "extraEnabled")
        return v

    @field_validator("default_disabled")
    @classmethod
    def _disabled(cls, v: list[str] | None) -> list[str] | None:
        _check_protections(v, DEFAULT_POD_PROTECTIONS, "defaultDisabled")
        return v

    @property
    def in_use(self) -> bool:
        """Whether these settings replace the deprecated booleans (upstream's rule)."""
        return bool(self.extra_enabled) or bool(self.default_disabled)

    def protected_storage_classes(self) -> frozenset[str]:
        cfg = self.config.pods_with_pvc if self.config is not None else None
        if cfg is None:
            return frozenset()
        return frozenset(sc.name for sc in cfg.protected_storage_classes or ())


class DefaultEvictorArgs(ArgsModel):
    node_selector: str = ""
    label_selector: LabelSelectorArg | None = None
    namespace_label_selector: LabelSelectorArg | None = None
    priority_threshold: PriorityThreshold | None = None
    node_fit: bool = False
    min_replicas: int = Field(default=0, ge=0)
    min_pod_age: str | None = None
    no_eviction_policy: str = ""
    pod_protections: PodProtections = Field(default_factory=PodProtections)
    # deprecated (upstream still reads them when podProtections is not in use)
    evict_local_storage_pods: bool = False
    evict_daemon_set_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    ignore_pods_without_pdb: bool = Field(default=False, alias="ignorePodsWithoutPDB")
    evict_failed_bare_pods: bool = False

    @field_validator("node_selector")
    @classmethod
    def _node_selector(cls, v: str) -> str:
        if v:
            try:
                k8s_labels.parse_selector_string(v)
            except k8s_labels.SelectorError as e:
                raise ValueError(str(e)) from None
        return v

    @field_validator("min_pod_age")
    @classmethod
    def _min_pod_age(cls, v: str | None) -> str | None:
        if v is not None:
            parse_go_duration(v)
        return v

    @field_validator("no_eviction_policy")
    @classmethod
    def _no_eviction_policy(cls, v: str) -> str:
        if v not in ("", NO_EVICTION_PREFERRED, NO_EVICTION_MANDATORY):
            raise ValueError(
                f"must be {NO_EVICTION_PREFERRED!r} or {NO_EVICTION_MANDATORY!r} (or empty), got {v!r}"
            )
        return v

    @model_validator(mode="after")
    def _no_mixing(self) -> DefaultEvictorArgs:
        if self.pod_protections.in_use:
            used = [name for name in _DEPRECATED if getattr(self, _field_of(name))]
            if used:
                hint = "; ".join(f"{name} -> {_DEPRECATED[name]}" for name in used)
                raise FieldValueError(
                    used[0],
                    f"deprecated, cannot be combined with podProtections.extraEnabled or "
                    f"podProtections.defaultDisabled (got {', '.join(f'{n}: true' for n in used)}; "
                    f"use instead: {hint})",
                )
        return self

    @property
    def min_pod_age_duration(self) -> timedelta | None:
        return parse_go_duration(self.min_pod_age) if self.min_pod_age is not None else None

    def effective_protections(self) -> frozenset[PodProtection]:
        """Upstream's getEffectivePodProtections."""
        pp = self.pod_protections
        if pp.in_use:
            disabled = set(pp.default_disabled or ())
            out = {p for p in DEFAULT_POD_PROTECTIONS if p not in disabled}
            out.update(PodProtection(p) for p in pp.extra_enabled or ())
            return frozenset(out)
        legacy: set[PodProtection] = set()
        if not self.evict_local_storage_pods:
            legacy.add(PodProtection.PODS_WITH_LOCAL_STORAGE)
        if not self.evict_daemon_set_pods:
            legacy.add(PodProtection.DAEMON_SET_PODS)
        if not self.evict_system_critical_pods:
            legacy.add(PodProtection.SYSTEM_CRITICAL_PODS)
        if not self.evict_failed_bare_pods:
            legacy.add(PodProtection.FAILED_BARE_PODS)
        if self.ignore_pvc_pods:
            legacy.add(PodProtection.PODS_WITH_PVC)
        if self.ignore_pods_without_pdb:
            legacy.add(PodProtection.PODS_WITHOUT_PDB)
        return frozenset(legacy)


def _field_of(wire: str) -> str:
    return {
        "evictLocalStoragePods": "evict_local_storage_pods",
        "evictDaemonSetPods": "evict_daemon_set_pods",
        "evictSystemCriticalPods": "evict_system_critical_pods",
        "evictFailedBarePods": "evict_failed_bare_pods",
        "ignorePvcPods": "ignore_pvc_pods",
        "ignorePodsWithoutPDB": "ignore_pods_without_pdb",
    }[wire]
