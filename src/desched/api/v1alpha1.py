"""Converting an old ``descheduler/v1alpha1`` policy (the ``strategies:`` format) to v1alpha2.

As KEP-753's upgrade section describes (and upstream did until v0.31 removed v1alpha1): every
enabled strategy becomes its own profile ``strategy-<Name>-profile`` with that one plugin and a
DefaultEvictor configured from the policy-wide evictor flags and the strategy's
``thresholdPriority`` / ``thresholdPriorityClassName`` / ``nodeFit``. Disabled strategies are
dropped. The result is an ordinary v1alpha2 document, validated like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from desched.api.documents import excerpt
from desched.errors import PolicyError, key_path

_EVICTOR_FLAGS = (
    "evictLocalStoragePods",
    "evictDaemonSetPods",
    "evictSystemCriticalPods",
    "ignorePvcPods",
    "evictFailedBarePods",
)
_TOP_LEVEL = {
    "apiVersion",
    "kind",
    "strategies",
    "nodeSelector",
    "maxNoOfPodsToEvictPerNode",
    "maxNoOfPodsToEvictPerNamespace",
    "maxNoOfPodsToEvictTotal",
    *_EVICTOR_FLAGS,
}
_STRATEGY_KEYS = {"enabled", "weight", "params"}
_COMMON_PARAMS = {"namespaces", "thresholdPriority", "thresholdPriorityClassName", "labelSelector", "nodeFit"}
#: Strategies upstream's v1alpha1 never filtered by ``params.labelSelector`` (its docs leave them out
#: of "Label filtering", and its conversion to plugins drops the field without a word): desched
#: refuses the field there rather than evict pods the selector was meant to leave alone.
_NO_LABEL_SELECTOR = frozenset({"RemoveDuplicates", "LowNodeUtilization", "HighNodeUtilization"})

Args = dict[str, Any]


def _pick(params: Mapping[str, Any], *keys: str) -> Args:
    return {k: params[k] for k in keys if params.get(k) is not None}


def _nested(params: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = params.get(key) or {}
    if not isinstance(value, Mapping):
        raise PolicyError(f"{path}.{key}", f"must be an object, got {excerpt(value)}")
    return value


def _string_list(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(path, f"must be a list of strings, got {excerpt(value)}")
    return value


def _check_namespaces(params: Mapping[str, Any], path: str) -> None:
    """``namespaces`` as upstream's v1alpha1 Namespaces: an object of ``include``/``exclude`` lists."""
    value = params.get("namespaces")
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise PolicyError(
            f"{path}.namespaces", f"must be an object with include or exclude, got {excerpt(value)}"
        )
    for key, names in value.items():
        if key not in ("include", "exclude"):
            raise PolicyError(key_path(f"{path}.namespaces", key), "unknown field")
        if names is not None:
            _string_list(names, f"{path}.namespaces.{key}")


def _lnu(p: Mapping[str, Any], path: str) -> Args:
    t = _nested(p, "nodeResourceUtilizationThresholds", path)
    args = _pick(t, "thresholds", "targetThresholds", "numberOfNodes", "useDeviationThresholds")
    if p.get("namespaces"):
        args["evictableNamespaces"] = p["namespaces"]
    return args


def _hnu(p: Mapping[str, Any], path: str) -> Args:
    t = _nested(p, "nodeResourceUtilizationThresholds", path)
    args = _pick(t, "thresholds", "numberOfNodes")
    if p.get("namespaces"):
        args["evictableNamespaces"] = p["namespaces"]
    return args


def _duplicates(p: Mapping[str, Any], path: str) -> Args:
    return {**_pick(p, "namespaces"), **_pick(_nested(p, "removeDuplicates", path), "excludeOwnerKinds")}


def _restarts(p: Mapping[str, Any], path: str) -> Args:
    return {
        **_pick(p, "namespaces", "labelSelector"),
        **_pick(
            _nested(p, "podsHavingTooManyRestarts", path), "podRestartThreshold", "includingInitContainers"
        ),
    }


def _lifetime(p: Mapping[str, Any], path: str) -> Args:
    lt = _nested(p, "podLifeTime", path)
    args = {**_pick(p, "namespaces", "labelSelector"), **_pick(lt, "maxPodLifeTimeSeconds", "states")}
    phases = lt.get("podStatusPhases")
    if phases is not None:
        _string_list(phases, f"{path}.podLifeTime.podStatusPhases")
    if lt.get("states") is not None:
        _string_list(lt["states"], f"{path}.podLifeTime.states")
    if phases:
        args["states"] = list(dict.fromkeys([*args.get("states", []), *phases]))
    return args


def _failed(p: Mapping[str, Any], path: str) -> Args:
    return {
        **_pick(p, "namespaces", "labelSelector"),
        **_pick(
            _nested(p, "failedPods", path),
            "excludeOwnerKinds",
            "minPodLifetimeSeconds",
            "reasons",
            "includingInitContainers",
        ),
    }


def _taints(p: Mapping[str, Any], path: str) -> Args:
    return _pick(
        p, "namespaces", "labelSelector", "includePreferNoSchedule", "excludedTaints", "includedTaints"
    )


def _affinity(p: Mapping[str, Any], path: str) -> Args:
    return _pick(p, "namespaces", "labelSelector", "nodeAffinityType")


def _anti_affinity(p: Mapping[str, Any], path: str) -> Args:
    return _pick(p, "namespaces", "labelSelector")


def _topology(p: Mapping[str, Any], path: str) -> Args:
    args = _pick(p, "namespaces", "labelSelector")
    if p.get("includeSoftConstraints"):
        args["constraints"] = ["DoNotSchedule", "ScheduleAnyway"]
    return args


#: strategy name -> (extension point, args converter, its own params keys)
_STRATEGIES: dict[str, tuple[str, Callable[[Mapping[str, Any], str], Args], set[str]]] = {
    "RemoveDuplicates": ("balance", _duplicates, {"removeDuplicates"}),
    "LowNodeUtilization": ("balance", _lnu, {"nodeResourceUtilizationThresholds"}),
    "HighNodeUtilization": ("balance", _hnu, {"nodeResourceUtilizationThresholds"}),
    "RemovePodsViolatingTopologySpreadConstraint": ("balance", _topology, {"includeSoftConstraints"}),
    "RemovePodsHavingTooManyRestarts": ("deschedule", _restarts, {"podsHavingTooManyRestarts"}),
    "PodLifeTime": ("deschedule", _lifetime, {"podLifeTime"}),
    "RemoveFailedPods": ("deschedule", _failed, {"failedPods"}),
    "RemovePodsViolatingNodeTaints": (
        "deschedule",
        _taints,
        {"includePreferNoSchedule", "excludedTaints", "includedTaints"},
    ),
    "RemovePodsViolatingNodeAffinity": ("deschedule", _affinity, {"nodeAffinityType"}),
    "RemovePodsViolatingInterPodAntiAffinity": ("deschedule", _anti_affinity, set()),
}


def convert_v1alpha1(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A v1alpha1 DeschedulerPolicy as an equivalent v1alpha2 document."""
    for key in doc:
        if key not in _TOP_LEVEL:
            raise PolicyError(key_path("", key), "unknown field in a descheduler/v1alpha1 policy")
    strategies = doc.get("strategies") or {}
    if not isinstance(strategies, Mapping):
        raise PolicyError("strategies", "must be an object mapping strategy names to their settings")
    evictor_base: Args = {k: doc[k] for k in _EVICTOR_FLAGS if doc.get(k) is not None}

    profiles = []
    for name, strategy in strategies.items():
        path = key_path("strategies", name)
        if name not in _STRATEGIES:
            raise PolicyError(path, f"unknown strategy (known: {', '.join(sorted(_STRATEGIES))})")
        if strategy is None:
            strategy = {}
        if not isinstance(strategy, Mapping):
            raise PolicyError(path, "must be an object with 'enabled' and 'params'")
        for key in strategy:
            if key not in _STRATEGY_KEYS:
                raise PolicyError(
                    key_path(path, key),
                    "unknown field (a strategy has enabled, weight, params)",
                )
        enabled = strategy.get("enabled", False)
        if not isinstance(enabled, bool):
            raise PolicyError(f"{path}.enabled", "must be true or false")
        params = strategy.get("params") or {}
        if not isinstance(params, Mapping):
            raise PolicyError(f"{path}.params", "must be an object")
        point, convert, own = _STRATEGIES[name]
        for key in params:
            if key not in _COMMON_PARAMS | own:
                raise PolicyError(key_path(f"{path}.params", key), f"not a parameter of {name}")
        if name in _NO_LABEL_SELECTOR and params.get("labelSelector") is not None:
            raise PolicyError(
                f"{path}.params.labelSelector",
                f"{name} does not filter pods by label (upstream's v1alpha1 ignored the selector, "
                f"so every pod would be considered, got {excerpt(params['labelSelector'])}); "
                "remove it, or select pods with DefaultEvictor's labelSelector in a v1alpha2 policy",
            )
        if not enabled:
            continue
        _check_namespaces(params, f"{path}.params")
        evictor = dict(evictor_base)
        if params.get("nodeFit") is not None:
            evictor["nodeFit"] = params["nodeFit"]
        if params.get("thresholdPriority") is not None or params.get("thresholdPriorityClassName"):
            if params.get("thresholdPriority") is not None and params.get("thresholdPriorityClassName"):
                raise PolicyError(
                    f"{path}.params",
                    "only one of thresholdPriority and thresholdPriorityClassName may be set",
                )
            evictor["priorityThreshold"] = (
                {"value": params["thresholdPriority"]}
                if params.get("thresholdPriority") is not None
                else {"name": params["thresholdPriorityClassName"]}
            )
        if name in ("LowNodeUtilization", "HighNodeUtilization") and (params.get("namespaces") or {}).get(
            "include"
        ):
            raise PolicyError(f"{path}.params.namespaces.include", f"{name} only supports namespaces.exclude")
        profiles.append(
            {
                "name": f"strategy-{name}-profile",
                "pluginConfig": [
                    {"name": "DefaultEvictor", "args": evictor},
                    {"name": name, "args": convert(params, f"{path}.params")},
                ],
                "plugins": {
                    "filter": {"enabled": ["DefaultEvictor"]},
                    "preEvictionFilter": {"enabled": ["DefaultEvictor"]},
                    point: {"enabled": [name]},
                },
            }
        )
    out: dict[str, Any] = {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": profiles,
    }
    for key in (
        "nodeSelector",
        "maxNoOfPodsToEvictPerNode",
        "maxNoOfPodsToEvictPerNamespace",
        "maxNoOfPodsToEvictTotal",
    ):
        if doc.get(key) is not None:
            out[key] = doc[key]
    return out
