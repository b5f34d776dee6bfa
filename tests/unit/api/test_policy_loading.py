"""Policy loading: v1alpha2 structure, defaults, errors with field paths, v1alpha1 conversion."""

from __future__ import annotations

from typing import Any

import pytest

from desched.api.policy import load_policy
from desched.errors import PolicyError
from desched.framework.types import ExtensionPoint
from desched.plugins import default_registry

REG = default_registry(entry_points=False)


def v2(**top: Any) -> dict[str, Any]:
    return {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerPolicy", **top}


def err(doc: dict[str, Any]) -> str:
    with pytest.raises(PolicyError) as e:
        load_policy(doc, REG)
    return str(e.value)


def test_default_evictor_is_added_to_every_profile() -> None:
    policy = load_policy(
        v2(
            profiles=[
                {"name": "a"},
                {"name": "b", "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}}},
            ]
        ),
        REG,
    )
    for prof in policy.profiles:
        assert prof.enabled(ExtensionPoint.FILTER) == ("DefaultEvictor",)
        assert prof.enabled(ExtensionPoint.PRE_EVICTION_FILTER) == ("DefaultEvictor",)
        assert "DefaultEvictor" in prof.args


def test_default_evictor_is_re_added_when_disabled_as_upstream_does(caplog: pytest.LogCaptureFixture) -> None:
    doc = v2(
        profiles=[
            {
                "name": "a",
                "plugins": {
                    "filter": {"disabled": ["DefaultEvictor"]},
                    "preEvictionFilter": {"disabled": ["*"]},
                },
            }
        ]
    )
    with caplog.at_level("WARNING", logger="desched.api.policy"):
        policy = load_policy(doc, REG)
    assert policy.profiles[0].enabled(ExtensionPoint.FILTER) == ("DefaultEvictor",)
    assert policy.profiles[0].enabled(ExtensionPoint.PRE_EVICTION_FILTER) == ("DefaultEvictor",)
    assert policy.warnings == (
        "profiles[0].plugins.filter.disabled: 'DefaultEvictor' does not disable DefaultEvictor, which "
        "every profile runs (as upstream); set profiles[0].allowDisablingDefaultEvictor: true to evict "
        "without its protections",
        "profiles[0].plugins.preEvictionFilter.disabled: '*' does not disable DefaultEvictor, which "
        "every profile runs (as upstream); set profiles[0].allowDisablingDefaultEvictor: true to evict "
        "without its protections",
    )
    assert [r.getMessage() for r in caplog.records] == list(policy.warnings)


def test_default_evictor_can_be_disabled_with_the_opt_in() -> None:
    doc = v2(
        profiles=[
            {
                "name": "a",
                "allowDisablingDefaultEvictor": True,
                "plugins": {
                    "filter": {"disabled": ["DefaultEvictor"]},
                    "preEvictionFilter": {"disabled": ["*"]},
                },
            },
            {"name": "b", "allowDisablingDefaultEvictor": True},  # opted in, disables nothing
        ]
    )
    policy = load_policy(doc, REG)
    a, b = policy.profiles
    assert a.enabled(ExtensionPoint.FILTER) == () and a.enabled(ExtensionPoint.PRE_EVICTION_FILTER) == ()
    assert b.enabled(ExtensionPoint.FILTER) == ("DefaultEvictor",)
    assert policy.warnings == ()
    # what `desched validate` prints loads back to the same plugins
    again = load_policy(policy.normalised(), REG)
    assert [p.plugins for p in again.profiles] == [p.plugins for p in policy.profiles]
    assert policy.normalised()["profiles"][0]["allowDisablingDefaultEvictor"] is True
    assert (
        "allowDisablingDefaultEvictor"
        not in load_policy(v2(profiles=[{"name": "c"}]), REG).normalised()["profiles"][0]
    )


def test_top_level_fields() -> None:
    policy = load_policy(
        v2(
            profiles=[],
            nodeSelector="pool=a",
            maxNoOfPodsToEvictPerNode=1,
            maxNoOfPodsToEvictPerNamespace=2,
            maxNoOfPodsToEvictTotal=3,
            evictionFailureEventNotification=True,
            gracePeriodSeconds=30,
            metricsProviders=[{"source": "KubernetesMetrics"}],
        ),
        REG,
    )
    assert (policy.limits.per_node, policy.limits.per_namespace, policy.limits.total) == (1, 2, 3)
    assert policy.node_selector == "pool=a" and policy.grace_period_seconds == 30
    assert policy.eviction_failure_event_notification is True


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"apiVersion": "v1", "kind": "DeschedulerPolicy"}, "apiVersion: must be descheduler/v1alpha2"),
        (v2(kind="Policy"), "kind: must be DeschedulerPolicy"),
        (
            v2(maxNoOfPodsToEvictPerNode=-1),
            "maxNoOfPodsToEvictPerNode: input should be greater than or equal to 0",
        ),
        (
            v2(profiles=[{"name": "a", "plugins": {"deschedule": {"enabled": ["Nope"]}}}]),
            "profiles[0].plugins.deschedule.enabled[0]: unknown plugin 'Nope'",
        ),
        (
            v2(profiles=[{"name": "a", "plugins": {"balance": {"enabled": ["PodLifeTime"]}}}]),
            "profiles[0].plugins.balance.enabled[0]: plugin 'PodLifeTime' does not implement balance",
        ),
        (v2(profiles=[{"name": "a"}, {"name": "a"}]), "profiles[1].name: duplicate profile name 'a'"),
        (
            v2(profiles=[{"name": "a", "pluginConfig": [{"name": "Nope"}]}]),
            "profiles[0].pluginConfig[0].name: unknown plugin 'Nope'",
        ),
        (v2(profiles=[{"name": "a", "extra": 1}]), "profiles[0].extra: unknown field"),
        (v2(nodeSelector="a in (b"), "nodeSelector:"),
        (
            v2(metricsProviders=[{"source": "Prometheus"}]),
            "metricsProviders[0].prometheus.url: required with source: Prometheus (got no url)",
        ),
        (
            v2(
                profiles=[
                    {"name": "a", "pluginConfig": [{"name": "DefaultEvictor", "args": {"nodeFit": "maybe"}}]}
                ]
            ),
            "profiles[0].pluginConfig[0].args.nodeFit:",
        ),
        (
            v2(
                profiles=[
                    {"name": "a", "pluginConfig": [{"name": "DefaultEvictor", "args": {"nodefit": True}}]}
                ]
            ),
            "profiles[0].pluginConfig[0].args.nodefit: unknown field",
        ),
    ],
)
def test_errors_name_the_field(doc: dict[str, Any], message: str) -> None:
    assert message in err(doc)


def test_error_is_one_line() -> None:
    text = err(
        v2(profiles=[{"name": "a", "pluginConfig": [{"name": "DefaultEvictor", "args": {"nodefit": 1}}]}])
    )
    assert "\n" not in text


V1ALPHA1 = {
    "apiVersion": "descheduler/v1alpha1",
    "kind": "DeschedulerPolicy",
    "evictLocalStoragePods": True,
    "maxNoOfPodsToEvictPerNode": 4,
    "strategies": {
        "RemoveDuplicates": {"enabled": True, "params": {"removeDuplicates": {"excludeOwnerKinds": ["Job"]}}},
        "LowNodeUtilization": {
            "enabled": True,
            "params": {
                "nodeResourceUtilizationThresholds": {
                    "thresholds": {"cpu": 20, "memory": 20, "pods": 20},
                    "targetThresholds": {"cpu": 50, "memory": 50, "pods": 50},
                }
            },
        },
        "RemovePodsHavingTooManyRestarts": {
            "enabled": True,
            "params": {
                "podsHavingTooManyRestarts": {"podRestartThreshold": 100},
                "thresholdPriority": 1000,
                "nodeFit": True,
            },
        },
        "PodLifeTime": {"enabled": False},
    },
}


def test_v1alpha1_converts_with_a_warning() -> None:
    policy = load_policy(V1ALPHA1, REG)
    assert policy.warnings and "v1alpha1" in policy.warnings[0]
    names = [p.name for p in policy.profiles]
    assert names == [
        "strategy-RemoveDuplicates-profile",
        "strategy-LowNodeUtilization-profile",
        "strategy-RemovePodsHavingTooManyRestarts-profile",
    ]
    assert policy.limits.per_node == 4
    restarts = policy.profiles[2]
    assert restarts.enabled(ExtensionPoint.DESCHEDULE) == ("RemovePodsHavingTooManyRestarts",)
    evictor = restarts.args["DefaultEvictor"]
    assert evictor is not None
    dumped = evictor.model_dump(by_alias=True, exclude_none=True)
    assert dumped["nodeFit"] is True and dumped["evictLocalStoragePods"] is True
    assert dumped["priorityThreshold"]["value"] == 1000


def test_v1alpha1_errors_name_the_strategy() -> None:
    doc = {
        **V1ALPHA1,
        "strategies": {
            "RemovePodsHavingTooManyRestarts": {
                "enabled": True,
                "params": {"podsHavingTooManyRestarts": {"podRestartThreshold": 0}},
            }
        },
    }
    assert err(doc).startswith("strategies.RemovePodsHavingTooManyRestarts")
    assert "strategies.Bogus: unknown strategy" in err(
        {**V1ALPHA1, "strategies": {"Bogus": {"enabled": True}}}
    )
