"""kube-scheduler's cluster-level default spread constraints, read from its configuration file.

A ``KubeSchedulerConfiguration`` (``kubescheduler.config.k8s.io/v1``, what kube-scheduler's
``--config`` reads) configures, per profile, the PodTopologySpread plugin's ``defaultingType``
and ``defaultConstraints``. This module reads them for one profile (by ``schedulerName``) into a
:class:`~desched.k8s.topologyspread.DefaultConstraints`, with kube-scheduler's defaults (no file
section: ``defaultingType: System``, the built-in system defaults) and its validation rules
(``ValidatePodTopologySpreadArgs``); and ``percentageOfNodesToScore`` (top-level, or the
profile's own). Everything else in the file is ignored.

Hand-written rather than a schema library: only one plugin's args are read, and the errors must
name the field in the file the way the rest of desched names fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import msgspec

from desched.api.documents import decode_utf8, excerpt, load_yaml_or_json, read_regular_file, user_error
from desched.errors import PolicyError
from desched.k8s import labels as k8s_labels
from desched.k8s import topologyspread as k8s_tsc
from desched.k8s.objects import TopologySpreadConstraint

API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
KIND: Final = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
PLUGIN: Final = "PodTopologySpread"
SYSTEM: Final = "System"
LIST: Final = "List"
_MAX_BYTES: Final = 1 << 20
_PERCENTAGE: Final = "percentageOfNodesToScore"
_CONSTRAINT_FIELDS: Final = frozenset(
    {
        "maxSkew",
        "topologyKey",
        "whenUnsatisfiable",
        "labelSelector",
        "minDomains",
        "nodeAffinityPolicy",
        "nodeTaintsPolicy",
        "matchLabelKeys",
    }
)
_POLICIES: Final = (k8s_tsc.HONOR, k8s_tsc.IGNORE)
_ACTIONS: Final = (k8s_tsc.DO_NOT_SCHEDULE, k8s_tsc.SCHEDULE_ANYWAY)


def load_default_constraints(
    path: str, scheduler_name: str = DEFAULT_SCHEDULER_NAME
) -> k8s_tsc.DefaultConstraints:
    """The default spread constraints the profile ``scheduler_name`` of the kube-scheduler
    configuration at ``path`` applies; raises :class:`PolicyError` naming the file and field."""
    return default_constraints_of(_load(path), path, scheduler_name)


@dataclass(frozen=True)
class SchedulerConfig:
    """What placement reads of one profile of a kube-scheduler configuration."""

    #: PodTopologySpread's default constraints.
    default_constraints: k8s_tsc.DefaultConstraints
    #: ``percentageOfNodesToScore`` (the profile's, else the file's); None: kube-scheduler's
    #: adaptive default (a 0 in the file means the same).
    percentage_of_nodes_to_score: int | None


def load_scheduler_config(path: str, scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> SchedulerConfig:
    """The default spread constraints and ``percentageOfNodesToScore`` of the profile
    ``scheduler_name`` of the kube-scheduler configuration at ``path``; raises
    :class:`PolicyError` naming the file and field."""
    doc = _load(path)
    defaults = default_constraints_of(doc, path, scheduler_name)
    return SchedulerConfig(defaults, percentage_of_nodes_to_score_of(doc, path, scheduler_name))


def _load(path: str) -> Any:
    fail = user_error(PolicyError)
    data = read_regular_file(path, "kube-scheduler configuration", _MAX_BYTES, fail)
    return load_yaml_or_json(decode_utf8(data, path, fail), path, fail, max_nodes=100_000, max_depth=64)


def percentage_of_nodes_to_score_of(doc: Any, source: str, scheduler_name: str) -> int | None:
    """``percentageOfNodesToScore`` of a decoded configuration (checked by
    :func:`default_constraints_of` first): the profile's own (kube-scheduler 1.27+) over the
    top-level one; each an integer from 0 to 100, 0 or absent meaning the adaptive default."""
    found = _percentage(doc.get(_PERCENTAGE), f"{source}: {_PERCENTAGE}")
    for i, profile in enumerate(doc.get("profiles") or []):
        if (profile.get("schedulerName") or DEFAULT_SCHEDULER_NAME) == scheduler_name:
            own = _percentage(profile.get(_PERCENTAGE), f"{source}: profiles[{i}].{_PERCENTAGE}")
            if own is not None:
                found = own
            break
    return found or None


def _percentage(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= 100:
        raise PolicyError(where, f"must be an integer from 0 to 100, got {excerpt(value)}")
    return value


def default_constraints_of(doc: Any, source: str, scheduler_name: str) -> k8s_tsc.DefaultConstraints:
    """:func:`load_default_constraints` on a decoded document."""

    def fail(where: str, why: str) -> PolicyError:
        return PolicyError(f"{source}: {where}" if where else source, why)

    if not isinstance(doc, dict):
        raise fail("", f"must be a {KIND} object, got {excerpt(doc)}")
    if doc.get("kind") != KIND or doc.get("apiVersion") != API_VERSION:
        raise fail(
            "kind",
            f"must be {KIND} of apiVersion {API_VERSION}, got {excerpt(doc.get('kind'))} of "
            f"{excerpt(doc.get('apiVersion'))}",
        )
    profiles = doc.get("profiles")
    if profiles is None or profiles == []:
        # kube-scheduler then runs one profile, default-scheduler, with every default
        if scheduler_name != DEFAULT_SCHEDULER_NAME:
            raise fail("profiles", f"no profile has schedulerName {scheduler_name!r}")
        return k8s_tsc.SYSTEM_DEFAULTS
    if not isinstance(profiles, list):
        raise fail("profiles", f"must be a list, got {excerpt(profiles)}")
    for i, profile in enumerate(profiles):
        if not isinstance(profile, dict):
            raise fail(f"profiles[{i}]", f"must be an object, got {excerpt(profile)}")
        if (profile.get("schedulerName") or DEFAULT_SCHEDULER_NAME) == scheduler_name:
            return _profile_defaults(profile, f"profiles[{i}]", fail)
    raise fail("profiles", f"no profile has schedulerName {scheduler_name!r}")


def _profile_defaults(profile: dict[str, Any], where: str, fail: Any) -> k8s_tsc.DefaultConstraints:
    configs = profile.get("pluginConfig") or []
    if not isinstance(configs, list):
        raise fail(f"{where}.pluginConfig", f"must be a list, got {excerpt(configs)}")
    for j, entry in enumerate(configs):
        if isinstance(entry, dict) and entry.get("name") == PLUGIN:
            return _args(entry.get("args") or {}, f"{where}.pluginConfig[{j}].args", fail)
    return k8s_tsc.SYSTEM_DEFAULTS


def _args(args: Any, where: str, fail: Any) -> k8s_tsc.DefaultConstraints:
    if not isinstance(args, dict):
        raise fail(where, f"must be an object, got {excerpt(args)}")
    unknown = sorted(set(args) - {"apiVersion", "kind", "defaultingType", "defaultConstraints"})
    if unknown:
        raise fail(f"{where}.{unknown[0]}", "unknown field")
    defaulting = args.get("defaultingType") or SYSTEM
    raw = args.get("defaultConstraints") or []
    if defaulting not in (SYSTEM, LIST):
        raise fail(f"{where}.defaultingType", f"must be {SYSTEM} or {LIST}, got {excerpt(defaulting)}")
    if not isinstance(raw, list):
        raise fail(f"{where}.defaultConstraints", f"must be a list, got {excerpt(raw)}")
    if defaulting == SYSTEM:
        if raw:
            raise fail(
                f"{where}.defaultConstraints",
                'must be empty when defaultingType is "System" (set defaultingType: List)',
            )
        return k8s_tsc.SYSTEM_DEFAULTS
    seen: set[tuple[str, str]] = set()
    out: list[TopologySpreadConstraint] = []
    for k, item in enumerate(raw):
        at = f"{where}.defaultConstraints[{k}]"
        c = _constraint(item, at, fail)
        pair = (c.topology_key, c.when_unsatisfiable)
        if pair in seen:
            raise fail(
                at, f"duplicate topologyKey {c.topology_key!r} with whenUnsatisfiable {c.when_unsatisfiable}"
            )
        seen.add(pair)
        out.append(c)
    return k8s_tsc.DefaultConstraints(tuple(out))


def _constraint(item: Any, at: str, fail: Any) -> TopologySpreadConstraint:
    if not isinstance(item, dict):
        raise fail(at, f"must be an object, got {excerpt(item)}")
    unknown = sorted(set(item) - _CONSTRAINT_FIELDS)
    if unknown:
        raise fail(f"{at}.{unknown[0]}", "unknown field")
    if item.get("labelSelector") is not None:
        raise fail(f"{at}.labelSelector", "must not be set: the selector is deduced for each pod")
    skew = item.get("maxSkew")
    if type(skew) is not int or skew <= 0:
        raise fail(f"{at}.maxSkew", f"must be an integer greater than 0, got {excerpt(skew)}")
    key = item.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise fail(f"{at}.topologyKey", f"required (a label key), got {excerpt(key)}")
    why = k8s_labels.validate_label_key(key)
    if why:
        raise fail(f"{at}.topologyKey", why)
    action = item.get("whenUnsatisfiable")
    if action not in _ACTIONS:
        raise fail(f"{at}.whenUnsatisfiable", f"must be {' or '.join(_ACTIONS)}, got {excerpt(action)}")
    min_domains = item.get("minDomains")
    if min_domains is not None and (type(min_domains) is not int or min_domains <= 0):
        raise fail(f"{at}.minDomains", f"must be an integer greater than 0, got {excerpt(min_domains)}")
    if min_domains is not None and action != k8s_tsc.DO_NOT_SCHEDULE:
        raise fail(f"{at}.minDomains", "may only be set with whenUnsatisfiable: DoNotSchedule")
    for name in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        value = item.get(name)
        if value is not None and value not in _POLICIES:
            raise fail(f"{at}.{name}", f"must be {' or '.join(_POLICIES)}, got {excerpt(value)}")
    # matchLabelKeys are accepted and dropped: kube-scheduler replaces each default constraint's
    # selector with the pod's default selector
    try:
        return msgspec.convert({**item, "matchLabelKeys": None}, TopologySpreadConstraint)
    except msgspec.ValidationError as e:
        raise fail(at, str(e)) from None
