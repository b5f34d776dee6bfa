"""Live policy reload for ``desched run`` (``--reload-policy``, on by default).

The policy file is read again before each cycle (and at once on SIGHUP): a ConfigMap mount is
updated by kubelet through an atomic rename of its ``..data`` symlink, which keeps the file's path
and may keep its mtime, so a change is told by the sha256 of the content, never by the mtime. A
changed policy is loaded and checked as at start (the same one-line error naming the field); one
that does not load, or that changes what only a restart applies, leaves the running policy in
place. This module holds what is pure: the content hash, the summary of what changed between two
policies, and the check of what needs a restart; :mod:`desched.app.run` applies a reload between
two cycles.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from desched.api.policy import ExtensionPoint, Policy, ProfileConfig, load_policy_bytes, read_policy_file
from desched.framework.framework import Framework
from desched.framework.registry import Registry
from desched.framework.types import LiveInputs

#: the length of the hash shown in logs and in ``desched_policy_info{hash=...}``
HASH_DIGITS = 16


def content_hash(data: bytes) -> str:
    """The hash of a policy file's content (sha256, its first :data:`HASH_DIGITS` hex digits)."""
    return hashlib.sha256(data).hexdigest()[:HASH_DIGITS]


def read_policy(path: str | Path, registry: Registry) -> tuple[Policy, str]:
    """Load the policy file and hash the very bytes loaded (a PolicyError names the field)."""
    data = read_policy_file(path)
    return load_policy_bytes(data, path, registry), content_hash(data)


def _plugins(profile: ProfileConfig) -> dict[str, tuple[str, ...]]:
    """Each plugin of the profile and the extension points it is enabled at."""
    out: dict[str, list[str]] = {}
    for point in ExtensionPoint:
        for name in profile.enabled(point):
            out.setdefault(name, []).append(point.value)
    for name in profile.args:
        out.setdefault(name, [])
    return {name: tuple(points) for name, points in out.items()}


def _args(profile: ProfileConfig, name: str) -> object:
    args = profile.args.get(name)
    return None if args is None else args.model_dump(mode="json", by_alias=True)


def describe_changes(old: Policy, new: Policy) -> list[str]:
    """What a reload changes, one short phrase each: profiles added or removed, plugins added or
    removed (``profile/plugin``), plugins whose args or extension points changed, a profile's
    evictionPolicy, and the top-level settings. Empty when only formatting or comments changed."""
    changes: list[str] = []
    before = {p.name: p for p in old.profiles}
    after = {p.name: p for p in new.profiles}
    changes += [f"profile {name} added" for name in after if name not in before]
    changes += [f"profile {name} removed" for name in before if name not in after]
    for name, prof in after.items():
        was = before.get(name)
        if was is None:
            continue
        old_plugins, new_plugins = _plugins(was), _plugins(prof)
        changes += [f"plugin {name}/{p} added" for p in new_plugins if p not in old_plugins]
        changes += [f"plugin {name}/{p} removed" for p in old_plugins if p not in new_plugins]
        for p in new_plugins:
            if p not in old_plugins:
                continue
            if _args(was, p) != _args(prof, p):
                changes.append(f"plugin {name}/{p} args changed")
            if old_plugins[p] != new_plugins[p]:
                changes.append(f"plugin {name}/{p} extension points changed")
        if was.eviction_policy != prof.eviction_policy:
            changes.append(f"profile {name} evictionPolicy changed")
        if was.allow_disabling_default_evictor != prof.allow_disabling_default_evictor:
            changes.append(f"profile {name} allowDisablingDefaultEvictor changed")
    if [p.name for p in old.profiles] != [p.name for p in new.profiles] and set(before) == set(after):
        changes.append("profiles reordered")
    for what, a, b in (
        ("nodeSelector", old.node_selector, new.node_selector),
        ("maxNoOfPodsToEvict*", old.limits, new.limits),
        ("gracePeriodSeconds", old.grace_period_seconds, new.grace_period_seconds),
        (
            "evictionFailureEventNotification",
            old.eviction_failure_event_notification,
            new.eviction_failure_event_notification,
        ),
        ("evictionPolicy", old.eviction_policy, new.eviction_policy),
    ):
        if a != b:
            changes.append(f"{what} changed")
    return changes


def restart_needed(
    old: Policy, new: Policy, watched: LiveInputs, needs: LiveInputs
) -> tuple[str, str] | None:
    """(field, reason) when ``new`` changes what only a restart applies, else None: the metrics
    providers (their clients and queries are made at start), or a plugin that reads objects the
    running cache does not watch (``watched``: what the start-up policy's plugins declared)."""
    if old.metrics_providers != new.metrics_providers:
        return "metricsProviders", "changed: a restart applies it"
    if needs.prometheus_queries != watched.prometheus_queries:
        return "profiles", "the plugins' Prometheus queries changed: a restart applies them"
    if needs.warning_events and not watched.warning_events:
        return (
            "profiles",
            "a plugin now reads Warning Events, which desched watches only from a start that needs them",
        )
    if needs.workloads and not watched.workloads:
        return (
            "profiles",
            "a plugin now reads workloads, which desched watches only from a start that needs them",
        )
    return None


def carry_over(old: Framework, new: Framework) -> None:
    """What a reload keeps: the evictionPolicy's memory (cooldowns, rate limits, awaited
    replacements; for the rules the new policy has on) and the metrics providers. Plugins'
    caches stay with the old framework: the new profiles start fresh."""
    if old.safety is not None and new.safety is not None:
        now = old.ctx.clock()
        new.safety.restore(old.safety.state(now), now)
    new.use_metrics(old.ctx.metrics)
