"""The ``descheduler/v1alpha2`` DeschedulerPolicy: loading, defaulting and validation.

Loading gives a :class:`Policy`: every profile with its plugins resolved per extension point and
each plugin's args validated by the model that lives with the plugin. The caller passes the known
plugins as a :class:`PluginCatalog` (the framework's registry is one), so this module depends on no
plugin and not on the framework. Any problem is one :class:`PolicyError` naming the field path.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from desched.api import documents
from desched.api import evictionpolicy as ep
from desched.api.types import (
    INT64_MAX,
    FieldValueError,
    ReadsMetricsSource,
    check_integers,
    describe_validation_error,
    validate_model,
)
from desched.errors import PolicyError, format_path, key_path
from desched.k8s import labels as k8s_labels

log = logging.getLogger(__name__)

API_VERSION = "descheduler/v1alpha2"
API_VERSION_V1ALPHA1 = "descheduler/v1alpha1"
KIND = "DeschedulerPolicy"
DEFAULT_EVICTOR = "DefaultEvictor"


class ExtensionPoint(enum.StrEnum):
    """The extension points a profile enables plugins at (the keys of a profile's ``plugins``)."""

    PRESORT = "presort"
    SORT = "sort"
    DESCHEDULE = "deschedule"
    BALANCE = "balance"
    FILTER = "filter"
    PRE_EVICTION_FILTER = "preEvictionFilter"


class PluginInfo(Protocol):
    """What loading a policy needs to know of one plugin (the registry's ``PluginSpec`` is one)."""

    @property
    def presorts(self) -> bool:
        """The plugin has a pre-sort step (it considers its pods in the profile's PreSort order)."""
        ...

    @property
    def args_model(self) -> type[BaseModel] | None: ...

    @property
    def extension_points(self) -> frozenset[ExtensionPoint]: ...


class PluginCatalog(Protocol):
    """The plugins a policy may name, by name (the framework's ``Registry`` is one)."""

    def get(self, name: str) -> PluginInfo | None: ...

    def why_missing(self, name: str) -> str: ...

    def __contains__(self, name: object) -> bool: ...


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class PluginSet(_Wire):
    enabled: list[str] = Field(default_factory=list)
    disabled: list[str] = Field(default_factory=list)


class Plugins(_Wire):
    presort: PluginSet = Field(default_factory=PluginSet)
    sort: PluginSet = Field(default_factory=PluginSet)
    deschedule: PluginSet = Field(default_factory=PluginSet)
    balance: PluginSet = Field(default_factory=PluginSet)
    filter: PluginSet = Field(default_factory=PluginSet)
    pre_eviction_filter: PluginSet = Field(default_factory=PluginSet, alias="preEvictionFilter")

    @model_validator(mode="before")
    @classmethod
    def _lowercase_alias(cls, data: Any) -> Any:
        # upstream's docs spell it both ways; accept the lower-case one too
        if isinstance(data, dict) and "preevictionfilter" in data and "preEvictionFilter" not in data:
            data = dict(data)
            data["preEvictionFilter"] = data.pop("preevictionfilter")
        return data

    def of(self, point: ExtensionPoint) -> PluginSet:
        return {
            ExtensionPoint.PRESORT: self.presort,
            ExtensionPoint.SORT: self.sort,
            ExtensionPoint.DESCHEDULE: self.deschedule,
            ExtensionPoint.BALANCE: self.balance,
            ExtensionPoint.FILTER: self.filter,
            ExtensionPoint.PRE_EVICTION_FILTER: self.pre_eviction_filter,
        }[point]


class PluginConfigWire(_Wire):
    name: str
    args: dict[str, Any] | None = None


class ProfileWire(_Wire):
    name: str = Field(min_length=1)
    plugin_config: list[PluginConfigWire] = Field(default_factory=list, alias="pluginConfig")
    plugins: Plugins = Field(default_factory=Plugins)
    #: desched only: let ``disabled: [DefaultEvictor]`` (or ``"*"``) remove DefaultEvictor from
    #: filter / preEvictionFilter. Without it DefaultEvictor is always enabled, as upstream does.
    allow_disabling_default_evictor: bool = Field(default=False, alias="allowDisablingDefaultEvictor")
    #: desched only: this profile's safety rules over the top-level ``evictionPolicy``, key by key
    eviction_policy: ep.EvictionPolicyWire | None = Field(default=None, alias="evictionPolicy")


class SecretReference(_Wire):
    namespace: str = ""
    name: str = ""

    @model_validator(mode="after")
    def _both(self) -> SecretReference:
        if not (self.namespace and self.name):
            missing = "namespace" if not self.namespace else "name"
            raise FieldValueError(
                missing,
                "the token Secret needs both namespace and name "
                f"(got namespace={self.namespace!r}, name={self.name!r})",
            )
        return self


class AuthToken(_Wire):
    secret_reference: SecretReference | None = Field(default=None, alias="secretReference")

    @model_validator(mode="after")
    def _secret(self) -> AuthToken:
        if self.secret_reference is None:
            raise FieldValueError(
                "secretReference",
                "required when authToken is given (got authToken without it); name the Secret "
                "holding the token, or drop authToken to use the pod's ServiceAccount token",
            )
        return self


#: TLS versions ``min_version`` / ``max_version`` accept (upstream's names, from prometheus/common).
TLS_VERSIONS = ("TLS10", "TLS11", "TLS12", "TLS13")


class PrometheusTLSConfig(_Wire):
    """How desched's Prometheus client checks the server and presents itself.

    Upstream's ``prometheus.tlsConfig`` is prometheus/common's ``TLSConfig``, so the keys are its
    snake_case ones. Its rules apply: at most one of ``ca`` / ``ca_file`` (and likewise for the
    client certificate and key), a client certificate needs its key and the reverse, and the
    versions are ``TLS10`` ... ``TLS13``. The ``*_ref`` keys name a secret manager that neither
    upstream's descheduler nor desched configures, so they are refused here (upstream fails when
    it builds its client).
    """

    #: PEM text of the CAs to trust instead of the default (system CAs and the pod's cluster CA).
    ca: str | None = None
    #: A PEM file of the CAs to trust instead of the default.
    ca_file: str | None = None
    ca_ref: str | None = None
    #: Client certificate (PEM text or file) to present, for a Prometheus that asks for one.
    cert: str | None = None
    cert_file: str | None = None
    cert_ref: str | None = None
    #: The client certificate's private key (PEM text or file).
    key: str | None = None
    key_file: str | None = None
    key_ref: str | None = None
    #: The name the server's certificate must carry, when it is not the URL's host.
    server_name: str | None = None
    #: Do not verify the server's certificate at all.
    insecure_skip_verify: bool = False
    min_version: str | None = None
    max_version: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> PrometheusTLSConfig:
        for ref in ("ca_ref", "cert_ref", "key_ref"):
            value = getattr(self, ref)
            if value:
                plain = ref[: -len("_ref")]
                raise FieldValueError(
                    ref,
                    f"needs a secret manager, which the descheduler does not configure (got {value!r}); "
                    f"give {plain} or {plain}_file",
                )
        for text, file in (("ca", "ca_file"), ("cert", "cert_file"), ("key", "key_file")):
            if getattr(self, text) and getattr(self, file):
                raise FieldValueError(
                    file, f"cannot be given with {text} (got {file}={getattr(self, file)!r} and {text} too)"
                )
        has_cert = bool(self.cert or self.cert_file)
        has_key = bool(self.key or self.key_file)
        if has_cert != has_key:
            if has_cert:
                given, missing = ("cert_file" if self.cert_file else "cert"), "key or key_file"
            else:
                given, missing = ("key_file" if self.key_file else "key"), "cert or cert_file"
            got = f"{given}={getattr(self, given)!r}" if given.endswith("_file") else f"{given} (PEM text)"
            raise FieldValueError(
                missing.rpartition(" ")[2], f"required with {given}: give {missing} (got {got} alone)"
            )
        for name in ("min_version", "max_version"):
            version = getattr(self, name)
            if version is not None and version not in TLS_VERSIONS:
                raise FieldValueError(name, f"must be one of {', '.join(TLS_VERSIONS)}, got {version!r}")
        if (
            self.min_version
            and self.max_version
            and TLS_VERSIONS.index(self.max_version) < TLS_VERSIONS.index(self.min_version)
        ):
            raise FieldValueError(
                "max_version",
                f"must not be below min_version (got max_version={self.max_version!r}, "
                f"min_version={self.min_version!r})",
            )
        return self


class PrometheusProvider(_Wire):
    url: str = ""
    auth_token: AuthToken | None = Field(default=None, alias="authToken")
    tls_config: PrometheusTLSConfig | None = Field(default=None, alias="tlsConfig")

    @model_validator(mode="after")
    def _url(self) -> PrometheusProvider:
        if self.url:
            problem = prometheus_url_problem(self.url)
            if problem:
                raise FieldValueError("url", f"not a usable URL: {problem}, got {self.url!r}")
        return self


def prometheus_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a Prometheus server address (None if it can).

    Upstream parses it with Go's ``url.Parse`` (an invalid port, a bad escape, a control
    character fail); desched also wants the http(s) scheme and the host its client needs, which
    upstream's client would only miss at the first query.
    """
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        return "invalid character in URL"
    try:
        parts = urlsplit(url)
    except ValueError as e:
        return str(e)
    try:
        parts.port  # noqa: B018  (parses the port)
    except ValueError:
        return f"invalid port {':' + parts.netloc.rpartition(':')[2]!r} after host"
    if parts.scheme not in ("http", "https"):
        return f"the scheme must be http or https, not {parts.scheme!r}" if parts.scheme else "no scheme"
    if not parts.hostname:
        return "no host"
    if _BAD_ESCAPE.search(url):
        return "invalid URL escape"
    return None


_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


class MetricsProvider(_Wire):
    source: Literal["KubernetesMetrics", "Prometheus"]
    prometheus: PrometheusProvider | None = None

    @model_validator(mode="after")
    def _prometheus_url(self) -> MetricsProvider:
        if self.source == "Prometheus" and not (self.prometheus and self.prometheus.url):
            raise FieldValueError("prometheus.url", "required with source: Prometheus (got no url)")
        return self


class MetricsCollector(_Wire):
    enabled: bool = False


class PolicyWire(_Wire):
    """The document as written, before plugins are resolved."""

    api_version: str = Field(alias="apiVersion")
    kind: str
    profiles: list[ProfileWire] = Field(default_factory=list)
    node_selector: str | None = Field(default=None, alias="nodeSelector")
    # an integer as upstream, or (desched only, upstream #1778) a percentage such as "10%"
    max_pods_per_node: int | str | None = Field(default=None, alias="maxNoOfPodsToEvictPerNode")
    max_pods_per_namespace: int | str | None = Field(default=None, alias="maxNoOfPodsToEvictPerNamespace")
    max_pods_total: int | str | None = Field(default=None, alias="maxNoOfPodsToEvictTotal")
    eviction_failure_event_notification: bool | None = Field(
        default=None, alias="evictionFailureEventNotification"
    )
    grace_period_seconds: int | None = Field(default=None, ge=0, le=INT64_MAX, alias="gracePeriodSeconds")
    metrics_providers: list[MetricsProvider] = Field(default_factory=list, alias="metricsProviders")
    metrics_collector: MetricsCollector | None = Field(default=None, alias="metricsCollector")
    #: desched only: the safety rules every eviction passes (:mod:`desched.api.evictionpolicy`)
    eviction_policy: ep.EvictionPolicyWire | None = Field(default=None, alias="evictionPolicy")

    @field_validator("max_pods_per_node", "max_pods_per_namespace", "max_pods_total", mode="before")
    @classmethod
    def _limit(cls, value: Any) -> Any:
        if value is None:
            return value
        if type(value) is int and value < 0:
            raise ValueError(f"input should be greater than or equal to 0, got {value}")
        ep.parse_int_or_percent(value)
        return value

    @model_validator(mode="after")
    def _unique(self) -> PolicyWire:
        seen: set[str] = set()
        for i, p in enumerate(self.metrics_providers):
            if p.source in seen:
                raise FieldValueError(
                    f"metricsProviders[{i}].source",
                    f"{p.source!r} is listed twice (each source may be configured once)",
                )
            seen.add(p.source)
        # (upstream v0.36 refuses the deprecated collector beside a KubernetesMetrics provider only:
        # beside Prometheus alone it configures KubernetesMetrics, as it does with no provider)
        if (
            "KubernetesMetrics" in seen
            and self.metrics_collector is not None
            and self.metrics_collector.enabled
        ):
            sources = ", ".join(p.source for p in self.metrics_providers)
            raise FieldValueError(
                "metricsCollector.enabled",
                "cannot be true together with a KubernetesMetrics entry of metricsProviders "
                f"(got true, with metricsProviders: {sources}); drop the deprecated metricsCollector: "
                "the KubernetesMetrics entry replaces it",
            )
        return self


# ---------------------------------------------------------------------------- resolved policy


@dataclass(frozen=True)
class ProfileConfig:
    name: str
    #: Enabled plugins per extension point, in execution order.
    plugins: Mapping[ExtensionPoint, tuple[str, ...]]
    #: Validated args of every plugin the profile uses (``None`` for plugins without args).
    args: Mapping[str, BaseModel | None]
    #: The profile opted in to running without DefaultEvictor (``allowDisablingDefaultEvictor``).
    allow_disabling_default_evictor: bool = False
    #: The safety rules of this profile: its ``evictionPolicy`` over the top-level one (all off
    #: unless a block sets them).
    eviction_policy: ep.EvictionPolicy = field(default_factory=ep.EvictionPolicy)
    #: The profile's own ``evictionPolicy`` block was set (``desched validate`` prints it).
    overrides_eviction_policy: bool = False

    def enabled(self, point: ExtensionPoint) -> tuple[str, ...]:
        return self.plugins.get(point, ())


@dataclass(frozen=True)
class EvictionLimits:
    """``maxNoOfPodsToEvict*``: a count, or a percentage of the pods on the node, in the namespace
    or in the cluster at the cycle's start (:class:`desched.api.evictionpolicy.Percent`)."""

    per_node: ep.IntOrPercent | None = None
    per_namespace: ep.IntOrPercent | None = None
    total: ep.IntOrPercent | None = None

    @property
    def has_percent(self) -> bool:
        return any(isinstance(v, ep.Percent) for v in (self.per_node, self.per_namespace, self.total))


@dataclass(frozen=True)
class Policy:
    profiles: tuple[ProfileConfig, ...]
    node_selector: str | None = None
    limits: EvictionLimits = field(default_factory=EvictionLimits)
    eviction_failure_event_notification: bool = False
    grace_period_seconds: int | None = None
    metrics_providers: tuple[MetricsProvider, ...] = ()
    wire: PolicyWire | None = None
    warnings: tuple[str, ...] = ()
    #: The top-level ``evictionPolicy`` (each profile's own is in its ProfileConfig).
    eviction_policy: ep.EvictionPolicy = field(default_factory=ep.EvictionPolicy)

    @property
    def safety_active(self) -> bool:
        """Some profile has an ``evictionPolicy`` rule switched on."""
        return any(p.eviction_policy.active for p in self.profiles)

    def normalised(self) -> dict[str, Any]:
        """The policy as v1alpha2 with every default filled in (what ``desched validate`` prints)."""
        out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "profiles": []}
        for prof in self.profiles:
            plugins: dict[str, Any] = {}
            for point in ExtensionPoint:
                names = prof.enabled(point)
                pset: dict[str, list[str]] = {"enabled": list(names)} if names else {}
                if (
                    point in (ExtensionPoint.FILTER, ExtensionPoint.PRE_EVICTION_FILTER)
                    and DEFAULT_EVICTOR not in names
                ):
                    pset["disabled"] = [DEFAULT_EVICTOR]
                if pset:
                    plugins[point.value] = pset
            cfgs = []
            for name, args in prof.args.items():
                cfgs.append(
                    {
                        "name": name,
                        "args": args.model_dump(mode="json", by_alias=True, exclude_none=True)
                        if args is not None
                        else {},
                    }
                )
            entry: dict[str, Any] = {"name": prof.name, "pluginConfig": cfgs, "plugins": plugins}
            if prof.allow_disabling_default_evictor:
                entry["allowDisablingDefaultEvictor"] = True
            if prof.overrides_eviction_policy:
                entry["evictionPolicy"] = ep.to_wire(prof.eviction_policy)
            out["profiles"].append(entry)
        if self.node_selector is not None:
            out["nodeSelector"] = self.node_selector
        for key, value in (
            ("maxNoOfPodsToEvictPerNode", self.limits.per_node),
            ("maxNoOfPodsToEvictPerNamespace", self.limits.per_namespace),
            ("maxNoOfPodsToEvictTotal", self.limits.total),
            ("gracePeriodSeconds", self.grace_period_seconds),
        ):
            if value is not None:
                out[key] = ep.amount_to_wire(value)
        out["evictionFailureEventNotification"] = self.eviction_failure_event_notification
        wire = self.wire
        if wire is not None and wire.metrics_collector is not None and wire.metrics_collector.enabled:
            # (deprecated, but what configures KubernetesMetrics when no provider entry does)
            out["metricsCollector"] = {"enabled": True}
        if self.metrics_providers:
            out["metricsProviders"] = [
                p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in self.metrics_providers
            ]
        if self.eviction_policy.active:
            out["evictionPolicy"] = ep.to_wire(self.eviction_policy)
        return out


# ---------------------------------------------------------------------------- loading


def read_document(text: str, source: str) -> Any:
    """Parse YAML or JSON text, bounded in size and depth (see :mod:`desched.api.documents`)."""
    return documents.load_yaml_or_json(
        text,
        source,
        documents.user_error(PolicyError),
        max_nodes=documents.MAX_POLICY_NODES,
        max_depth=documents.MAX_POLICY_DEPTH,
    )


def load_policy_file(path: str | Path, registry: PluginCatalog) -> Policy:
    return load_policy_bytes(read_policy_file(path), path, registry)


def read_policy_file(path: str | Path) -> bytes:
    """The bytes of a policy file (a regular file, bounded in size), or a PolicyError."""
    fail = documents.user_error(PolicyError)
    return documents.read_regular_file(path, "policy file", documents.MAX_POLICY_BYTES, fail)


def load_policy_bytes(data: bytes, path: str | Path, registry: PluginCatalog) -> Policy:
    """Load a policy from the bytes read from ``path`` (``desched run`` hashes what it loads)."""
    fail = documents.user_error(PolicyError)
    doc = read_document(documents.decode_utf8(data, str(path), fail), str(path))
    if doc is None:
        raise PolicyError(str(path), "empty file (expected a DeschedulerPolicy)")
    if not isinstance(doc, Mapping):
        raise PolicyError(
            str(path),
            "expected a DeschedulerPolicy (an object with apiVersion, kind and profiles), "
            f"got {_type_name(doc)}",
        )
    return load_policy(doc, registry)


def load_policy(doc: Any, registry: PluginCatalog) -> Policy:
    """Validate a parsed policy document (v1alpha2, or v1alpha1 converted with a warning)."""
    if doc is None:
        raise PolicyError("", "empty document (expected a DeschedulerPolicy)")
    if not isinstance(doc, Mapping):
        raise PolicyError("", f"a policy must be an object, got {_type_name(doc)}")
    warnings: list[str] = []
    api_version = doc.get("apiVersion")
    if doc.get("kind") != KIND and (doc.get("kind") == "List" or "items" in doc):
        raise PolicyError(
            "kind",
            f"this is a cluster snapshot ({documents.excerpt(doc.get('kind'))}), not a DeschedulerPolicy "
            "(a snapshot is the first argument of simulate; the policy goes to --policy)",
        )
    if api_version == API_VERSION_V1ALPHA1:
        from desched.api.v1alpha1 import convert_v1alpha1

        doc = convert_v1alpha1(doc)
        msg = (
            f"policy apiVersion {API_VERSION_V1ALPHA1} is deprecated (upstream removed it in v0.31); "
            f"converted to {API_VERSION}: run 'desched validate' to print the converted policy"
        )
        warnings.append(msg)
    elif api_version != API_VERSION:
        raise PolicyError(
            "apiVersion",
            f"must be {API_VERSION} (or {API_VERSION_V1ALPHA1}), got {documents.excerpt(api_version)}",
        )
    if doc.get("kind") != KIND:
        raise PolicyError("kind", f"must be {KIND}, got {documents.excerpt(doc.get('kind'))}")
    try:
        policy = _load_v1alpha2(doc, registry, tuple(warnings))
    except PolicyError as e:
        if api_version != API_VERSION_V1ALPHA1:
            raise
        raise PolicyError(_v1alpha1_path(doc, e.path), e.reason) from None
    for msg in warnings:  # (once the policy is valid: a refused one gets one line, the error)
        log.warning(msg)
    return policy


def _type_name(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _v1alpha1_path(converted: Mapping[str, Any], path: str) -> str:
    """Name a converted v1alpha1 policy's error by the strategy it came from."""
    if path.startswith("profiles["):
        index = int(path[len("profiles[") : path.index("]")])
        profiles = converted.get("profiles") or []
        if index < len(profiles):
            name = str(profiles[index]["name"])[len("strategy-") : -len("-profile")]
            return f"strategies.{name} (as v1alpha2: {path})"
    return path


def _load_v1alpha2(doc: Mapping[str, Any], registry: PluginCatalog, warnings: tuple[str, ...]) -> Policy:
    try:
        check_integers(doc, "")
        wire = PolicyWire.model_validate(doc, strict=True)
    except pydantic.ValidationError as e:
        raise PolicyError(*describe_validation_error(e)) from None
    if wire.node_selector:
        try:
            k8s_labels.parse_selector_string(wire.node_selector)
        except k8s_labels.SelectorError as e:
            raise PolicyError("nodeSelector", str(e)) from None

    profiles = []
    seen: set[str] = set()
    for i, prof in enumerate(wire.profiles):
        if prof.name in seen:
            raise PolicyError(f"profiles[{i}].name", f"duplicate profile name {prof.name!r}")
        seen.add(prof.name)
        profile = _resolve_profile(i, prof, registry)
        merged = ep.resolve(ep.merge_wire(wire.eviction_policy, prof.eviction_policy))
        profiles.append(
            dataclasses.replace(
                profile, eviction_policy=merged, overrides_eviction_policy=prof.eviction_policy is not None
            )
        )
    _check_metrics_sources(wire, profiles)
    warnings = warnings + _default_evictor_warnings(wire) + _presort_warnings(profiles, registry)
    return Policy(
        profiles=tuple(profiles),
        node_selector=wire.node_selector or None,
        limits=EvictionLimits(
            _limit(wire.max_pods_per_node), _limit(wire.max_pods_per_namespace), _limit(wire.max_pods_total)
        ),
        eviction_failure_event_notification=bool(wire.eviction_failure_event_notification),
        grace_period_seconds=wire.grace_period_seconds,
        metrics_providers=tuple(wire.metrics_providers),
        wire=wire,
        warnings=warnings,
        eviction_policy=ep.resolve(wire.eviction_policy or ep.EvictionPolicyWire()),
    )


def _limit(value: int | str | None) -> ep.IntOrPercent | None:
    return None if value is None else ep.parse_int_or_percent(value)


def _default_evictor_warnings(wire: PolicyWire) -> tuple[str, ...]:
    """Upstream re-adds DefaultEvictor to every profile's filter and preEvictionFilter whatever
    ``disabled`` says; desched does too (a policy written for upstream keeps its protections), and
    says that the ``disabled`` entry changed nothing unless the profile opted in to removing it."""
    out: list[str] = []
    for i, prof in enumerate(wire.profiles):
        if prof.allow_disabling_default_evictor:
            continue
        for point in (ExtensionPoint.FILTER, ExtensionPoint.PRE_EVICTION_FILTER):
            disabled = prof.plugins.of(point).disabled
            entry = DEFAULT_EVICTOR if DEFAULT_EVICTOR in disabled else "*" if "*" in disabled else None
            if entry is None:
                continue
            msg = (
                f"profiles[{i}].plugins.{point.value}.disabled: {entry!r} does not disable "
                f"{DEFAULT_EVICTOR}, which every profile runs (as upstream); set "
                f"profiles[{i}].allowDisablingDefaultEvictor: true to evict without its protections"
            )
            out.append(msg)
            log.warning(msg)
    return tuple(out)


def _presort_warnings(profiles: list[ProfileConfig], registry: PluginCatalog) -> tuple[str, ...]:
    """PreSort plugins order the pods a strategy considers, but only strategies that have a
    pre-sort step (their class says ``presorts = True``) ask for that order: say so for the others
    rather than accept a ``presort`` that changes nothing."""
    out: list[str] = []
    for i, prof in enumerate(profiles):
        presorters = prof.enabled(ExtensionPoint.PRESORT)
        if not presorters:
            continue
        for point in (ExtensionPoint.DESCHEDULE, ExtensionPoint.BALANCE):
            for name in prof.enabled(point):
                spec = registry.get(name)
                if spec is not None and not spec.presorts:
                    msg = (
                        f"profiles[{i}].plugins.presort: {name} has no pre-sort step, so "
                        f"{', '.join(presorters)} does not change the order it considers pods in"
                    )
                    out.append(msg)
                    log.warning(msg)
    return tuple(out)


def _check_metrics_sources(wire: PolicyWire, profiles: list[ProfileConfig]) -> None:
    """A plugin that reads actual usage (its args' ``metrics_source``) needs that source among the
    policy's ``metricsProviders`` (deprecated ``metricsCollector.enabled`` means KubernetesMetrics)."""
    configured = {p.source for p in wire.metrics_providers}
    if wire.metrics_collector is not None and wire.metrics_collector.enabled:
        configured.add("KubernetesMetrics")
    for i, (prof_wire, prof) in enumerate(zip(wire.profiles, profiles, strict=True)):
        for name, args in prof.args.items():
            source = args.metrics_source if isinstance(args, ReadsMetricsSource) else None
            if source is None or source in configured:
                continue
            j = next((k for k, c in enumerate(prof_wire.plugin_config) if c.name == name), 0)
            raise PolicyError(
                f"profiles[{i}].pluginConfig[{j}].args.metricsUtilization",
                f"{name} reads {source} metrics but metricsProviders configures no {source} provider "
                f"(add `metricsProviders: [{{source: {source}}}]`"
                + (", with prometheus.url" if source == "Prometheus" else "")
                + ")",
            )


def _resolve_profile(index: int, prof: ProfileWire, registry: PluginCatalog) -> ProfileConfig:
    base = f"profiles[{index}]"
    configs: dict[str, tuple[int, dict[str, Any] | None]] = {}
    for j, cfg in enumerate(prof.plugin_config):
        path = f"{base}.pluginConfig[{j}]"
        if cfg.name in configs:
            raise PolicyError(f"{path}.name", f"plugin {cfg.name!r} is configured more than once")
        if cfg.name not in registry:
            raise PolicyError(f"{path}.name", registry.why_missing(cfg.name))
        spec = registry.get(cfg.name)
        if spec is not None and spec.args_model is None and cfg.args:
            key = next(iter(cfg.args))
            raise PolicyError(
                key_path(f"{path}.args", key),
                f"unknown field ({cfg.name} takes no args)",
            )
        configs[cfg.name] = (j, cfg.args)

    plugins: dict[ExtensionPoint, tuple[str, ...]] = {}
    for point in ExtensionPoint:
        pset = prof.plugins.of(point)
        enabled = list(pset.enabled)
        disabled = set(pset.disabled)
        # DefaultEvictor guards every profile (upstream re-adds it whatever `disabled` says);
        # only a profile that opts in with allowDisablingDefaultEvictor may disable it.
        if (
            point in (ExtensionPoint.FILTER, ExtensionPoint.PRE_EVICTION_FILTER)
            and DEFAULT_EVICTOR not in enabled
            and not (
                prof.allow_disabling_default_evictor and (DEFAULT_EVICTOR in disabled or "*" in disabled)
            )
        ):
            enabled.insert(0, DEFAULT_EVICTOR)
        names: list[str] = []
        for k, name in enumerate(enabled):
            path = format_path(["profiles", index, "plugins", point.value, "enabled", k])
            spec = registry.get(name)
            if spec is None:
                raise PolicyError(path, registry.why_missing(name))
            if point not in spec.extension_points:
                served = ", ".join(sorted(p.value for p in spec.extension_points))
                raise PolicyError(
                    path, f"plugin {name!r} does not implement {point.value} (it serves: {served})"
                )
            if name in names:
                raise PolicyError(path, f"plugin {name!r} is enabled twice")
            if name in disabled and name != DEFAULT_EVICTOR:
                raise PolicyError(path, f"plugin {name!r} is both enabled and disabled")
            names.append(name)
        plugins[point] = tuple(names)

    used: list[str] = []
    for enabled_names in plugins.values():
        for name in enabled_names:
            if name not in used:
                used.append(name)
    for name, (j, raw) in configs.items():
        if name not in used:
            # validated all the same: a mistake in a plugin's args should not wait until it is enabled
            spec = registry.get(name)
            if spec is not None and spec.args_model is not None:
                validate_model(spec.args_model, raw, f"{base}.pluginConfig[{j}].args")
            log.info("profile %s: pluginConfig for %s, which no extension point enables", prof.name, name)

    args: dict[str, BaseModel | None] = {}
    for name in used:
        spec = registry.get(name)
        assert spec is not None
        if spec.args_model is None:
            args[name] = None
            continue
        if name in configs:
            j, raw = configs[name]
            args[name] = validate_model(spec.args_model, raw, f"{base}.pluginConfig[{j}].args")
        else:
            try:
                args[name] = spec.args_model()
            except pydantic.ValidationError as e:
                field_path, reason = describe_validation_error(e)
                raise PolicyError(
                    f"{base}.pluginConfig",
                    f"plugin {name!r} is enabled but has no pluginConfig, and its args have no default "
                    f"({field_path + ': ' if field_path else ''}{reason})",
                ) from None
    return ProfileConfig(
        name=prof.name,
        plugins=plugins,
        args=args,
        allow_disabling_default_evictor=prof.allow_disabling_default_evictor,
    )
