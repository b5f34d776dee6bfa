"""Benchmarks of desched on generated clusters: ``python -m benchmarks --nodes 100 1000``.

:mod:`benchmarks.generator` makes realistic cluster snapshots of any size; ``__main__`` measures
snapshot loading, one descheduling cycle per plugin, peak memory and the end-to-end
``desched simulate`` on them (method and figures: docs/performance.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from desched.framework.registry import Registry

BENCH_DIR = Path(__file__).resolve().parent
POLICIES = {
    "all": BENCH_DIR / "policy-all.yaml",
    "nodefit": BENCH_DIR / "policy-all-nodefit.yaml",
}


def drop_unregistered(doc: dict[str, Any], registry: Registry) -> tuple[dict[str, Any], list[str]]:
    """The policy document without the plugins the registry does not know, and their names.

    The benchmark policies name every in-tree plugin; while some are still being written, this
    lets the benchmark measure the ones that exist instead of failing on an unknown name.
    """
    dropped: list[str] = []
    profiles = []
    for profile in doc.get("profiles") or []:
        profile = dict(profile)
        configs = []
        for cfg in profile.get("pluginConfig") or []:
            if cfg.get("name") in registry:
                configs.append(cfg)
            elif cfg.get("name") not in dropped:
                dropped.append(str(cfg.get("name")))
        profile["pluginConfig"] = configs
        plugins = {}
        for point, pset in (profile.get("plugins") or {}).items():
            pset = dict(pset or {})
            enabled = []
            for name in pset.get("enabled") or []:
                if name in registry:
                    enabled.append(name)
                elif name not in dropped:
                    dropped.append(str(name))
            pset["enabled"] = enabled
            plugins[point] = pset
        profile["plugins"] = plugins
        profiles.append(profile)
    out = dict(doc)
    out["profiles"] = profiles
    return out, dropped


def plugin_names(doc: dict[str, Any]) -> list[str]:
    """Every plugin a policy document enables, in policy order (deschedule, then balance, ...)."""
    names: list[str] = []
    for point in ("deschedule", "balance", "sort", "presort", "filter", "preEvictionFilter"):
        for profile in doc.get("profiles") or []:
            for name in ((profile.get("plugins") or {}).get(point) or {}).get("enabled") or []:
                if name not in names:
                    names.append(name)
    return names
