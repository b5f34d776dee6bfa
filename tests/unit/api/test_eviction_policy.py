"""The ``evictionPolicy`` block and percentage limits: parsing, merging per profile, validation
errors (one line naming the field), and ``desched validate``'s normalised form."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desched.api import evictionpolicy as ep
from desched.api.policy import load_policy
from desched.errors import PolicyError
from desched.plugins import default_registry


def doc(profiles: list[dict[str, Any]] | None = None, **top: Any) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": profiles
        if profiles is not None
        else [{"name": "p", "plugins": {"deschedule": {"enabled": ["RemoveFailedPods"]}}}],
        **top,
    }


def test_absent_or_empty_block_is_inactive_and_not_printed() -> None:
    for policy in (
        load_policy(doc(), default_registry()),
        load_policy(doc(evictionPolicy={}), default_registry()),
    ):
        assert not policy.safety_active
        assert all(not p.eviction_policy.active for p in policy.profiles)
        assert "evictionPolicy" not in policy.normalised()


def test_full_block_resolves_with_defaults() -> None:
    policy = load_policy(
        doc(
            evictionPolicy={
                "optOuts": {"karpenterDoNotDisrupt": True},
                "maxUnavailablePerWorkload": "25%",
                "maxEvictionsPerWorkload": 1,
                "cooldown": {"base": "10m"},
                "disruptionWindows": [
                    {"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}
                ],
                "rateLimits": {
                    "cluster": {"evictionsPerMinute": 0.5},
                    "workload": {"evictionsPerMinute": 2, "burst": 3},
                },
            }
        ),
        default_registry(),
    )
    rules = policy.profiles[0].eviction_policy
    assert rules.karpenter_do_not_disrupt and not rules.cluster_autoscaler_safe_to_evict
    assert rules.max_unavailable_per_workload == ep.Percent(25)
    assert rules.max_evictions_per_workload == 1
    assert rules.cooldown == ep.Cooldown(timedelta(minutes=10), timedelta(minutes=640), timedelta(hours=24))
    assert rules.disruption_windows[0].action is ep.WindowAction.ALLOW
    assert policy.normalised()["evictionPolicy"] == {
        "optOuts": {"karpenterDoNotDisrupt": True, "clusterAutoscalerSafeToEvict": False},
        "maxUnavailablePerWorkload": "25%",
        "maxEvictionsPerWorkload": 1,
        "cooldown": {"base": "10m", "max": "10h40m", "window": "24h"},
        "disruptionWindows": [
            {"schedule": "0 22 * * *", "duration": "4h", "timeZone": "Europe/Berlin", "action": "Allow"}
        ],
        "rateLimits": {
            "workload": {"evictionsPerMinute": 2.0, "burst": 3},
            "cluster": {"evictionsPerMinute": 0.5, "burst": 1},
        },
    }


def test_predictive_is_off_unless_true() -> None:
    on = load_policy(doc(evictionPolicy={"predictive": True}), default_registry())
    off = load_policy(doc(evictionPolicy={"predictive": False}), default_registry())
    assert on.profiles[0].eviction_policy.predictive and on.normalised()["evictionPolicy"] == {
        "predictive": True
    }
    assert not off.safety_active
    with pytest.raises(PolicyError) as err:
        load_policy(doc(evictionPolicy={"predictive": "yes"}), default_registry())
    assert err.value.path == "evictionPolicy.predictive"


def test_wait_for_replacement_defaults_to_ten_minutes() -> None:
    policy = load_policy(doc(evictionPolicy={"waitForReplacement": {}}), default_registry())
    assert policy.profiles[0].eviction_policy.wait_for_replacement == timedelta(minutes=10)
    assert policy.normalised()["evictionPolicy"] == {"waitForReplacement": {"timeout": "10m"}}


_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
_PEM_B64 = base64.b64encode(_PEM.encode()).decode()


def test_webhook_defaults_and_prints_resolved() -> None:
    block = {"webhook": {"url": "https://freeze.example.svc/desched", "caBundle": _PEM_B64}}
    policy = load_policy(doc(evictionPolicy=block), default_registry())
    assert policy.profiles[0].eviction_policy.webhook == ep.Webhook(
        "https://freeze.example.svc/desched", timedelta(seconds=2), ep.FailurePolicy.IGNORE, ca_pem=_PEM
    )
    assert policy.normalised()["evictionPolicy"] == {
        "webhook": {
            "url": "https://freeze.example.svc/desched",
            "caBundle": _PEM_B64,
            "timeout": "2s",
            "failurePolicy": "Ignore",
        }
    }
    loopback = {
        "url": "http://127.0.0.1:8080/r",
        "insecure": True,
        "failurePolicy": "Fail",
        "timeout": "500ms",
    }
    hook = load_policy(doc(evictionPolicy={"webhook": loopback}), default_registry()).profiles[0]
    assert hook.eviction_policy.webhook == ep.Webhook(
        "http://127.0.0.1:8080/r", timedelta(milliseconds=500), ep.FailurePolicy.FAIL, insecure=True
    )


def test_surge_defaults_and_prints_resolved() -> None:
    policy = load_policy(doc(evictionPolicy={"surge": {}}), default_registry())
    assert policy.profiles[0].eviction_policy.surge == ep.Surge(1, timedelta(minutes=10))
    assert policy.safety_active
    assert policy.normalised()["evictionPolicy"] == {"surge": {"maxReplicas": 1, "timeout": "10m"}}
    set_ = load_policy(
        doc(evictionPolicy={"surge": {"maxReplicas": 3, "timeout": "90s"}}), default_registry()
    )
    assert set_.profiles[0].eviction_policy.surge == ep.Surge(3, timedelta(seconds=90))


def test_profile_block_overrides_top_level_key_by_key() -> None:
    profiles = [
        {"name": "a", "plugins": {"deschedule": {"enabled": ["RemoveFailedPods"]}}},
        {
            "name": "b",
            "plugins": {"deschedule": {"enabled": ["RemoveFailedPods"]}},
            "evictionPolicy": {"maxEvictionsPerWorkload": 3},
        },
        {
            "name": "c",
            "plugins": {"deschedule": {"enabled": ["RemoveFailedPods"]}},
            "evictionPolicy": {"maxUnavailablePerWorkload": None, "maxEvictionsPerWorkload": None},
        },
    ]
    policy = load_policy(
        doc(profiles, evictionPolicy={"maxUnavailablePerWorkload": 1, "maxEvictionsPerWorkload": 1}),
        default_registry(),
    )
    a, b, c = (p.eviction_policy for p in policy.profiles)
    assert (a.max_unavailable_per_workload, a.max_evictions_per_workload) == (1, 1)
    assert (b.max_unavailable_per_workload, b.max_evictions_per_workload) == (1, 3)
    assert not c.active  # a profile may switch the rules off with explicit nulls
    normalised = policy.normalised()["profiles"]
    assert "evictionPolicy" not in normalised[0]
    assert normalised[1]["evictionPolicy"] == {"maxUnavailablePerWorkload": 1, "maxEvictionsPerWorkload": 3}


@pytest.mark.parametrize(
    ("block", "path", "message"),
    [
        ({"maxUnavailablePerWorkload": "ten"}, "evictionPolicy.maxUnavailablePerWorkload", "percentage"),
        ({"maxUnavailablePerWorkload": "101%"}, "evictionPolicy.maxUnavailablePerWorkload", "'101%'"),
        ({"maxUnavailablePerWorkload": -1}, "evictionPolicy.maxUnavailablePerWorkload", "negative"),
        ({"maxEvictionsPerWorkload": -1}, "evictionPolicy.maxEvictionsPerWorkload", "greater than or equal"),
        ({"maxEvictionsPerWorkload": "1"}, "evictionPolicy.maxEvictionsPerWorkload", "valid integer"),
        ({"cooldown": {"base": "soon"}}, "evictionPolicy.cooldown.base", "invalid duration"),
        ({"cooldown": {"base": "0s"}}, "evictionPolicy.cooldown.base", "positive"),
        ({"cooldown": {"base": "1h", "max": "10m"}}, "evictionPolicy.cooldown.max", "at least base"),
        ({"cooldown": {}}, "evictionPolicy.cooldown.base", "required"),
        ({"optOuts": {"karpenter": True}}, "evictionPolicy.optOuts.karpenter", "unknown field"),
        (
            {"optOuts": {"karpenterDoNotDisrupt": "yes"}},
            "evictionPolicy.optOuts.karpenterDoNotDisrupt",
            "bool",
        ),
        (
            {"disruptionWindows": [{"schedule": "61 * * * *", "duration": "1h"}]},
            "evictionPolicy.disruptionWindows[0].schedule",
            "cron",
        ),
        (
            {"disruptionWindows": [{"schedule": "0 * * * *", "duration": "1h", "timeZone": "Mars/Olympus"}]},
            "evictionPolicy.disruptionWindows[0].timeZone",
            "unknown time zone",
        ),
        (
            {"disruptionWindows": [{"schedule": "0 * * * *", "duration": "1h", "action": "Maybe"}]},
            "evictionPolicy.disruptionWindows[0].action",
            "Allow",
        ),
        (
            {"disruptionWindows": [{"schedule": "0 * * * *"}]},
            "evictionPolicy.disruptionWindows[0].duration",
            "required",
        ),
        ({"maxEvictionPerWorkload": 1}, "evictionPolicy.maxEvictionPerWorkload", "unknown field"),
        (
            {"waitForReplacement": {"timeout": "later"}},
            "evictionPolicy.waitForReplacement.timeout",
            "duration",
        ),
        ({"waitForReplacement": True}, "evictionPolicy.waitForReplacement", "valid dictionary"),
        ({"surge": {"maxReplicas": 0}}, "evictionPolicy.surge.maxReplicas", "greater than or equal to 1"),
        ({"surge": {"timeout": "soon"}}, "evictionPolicy.surge.timeout", "duration"),
        ({"surge": {"timeout": "0s"}}, "evictionPolicy.surge.timeout", "positive"),
        ({"surge": {"maxSurge": 1}}, "evictionPolicy.surge.maxSurge", "unknown field"),
        ({"webhook": {"url": "http://h/r"}}, "evictionPolicy.webhook.url", "must be https"),
        ({"webhook": {"url": "ftp://h/r"}}, "evictionPolicy.webhook.url", "http(s) URL"),
        ({"webhook": {}}, "evictionPolicy.webhook.url", "required"),
        (
            {"webhook": {"url": "https://h/r", "timeout": "soon"}},
            "evictionPolicy.webhook.timeout",
            "duration",
        ),
        ({"webhook": {"url": "https://h/r", "timeout": "0s"}}, "evictionPolicy.webhook.timeout", "positive"),
        (
            {"webhook": {"url": "https://h/r", "timeout": "1m"}},
            "evictionPolicy.webhook.timeout",
            "at most 30s",
        ),
        (
            {"webhook": {"url": "https://h/r", "failurePolicy": "Allow"}},
            "evictionPolicy.webhook.failurePolicy",
            "'Ignore' or 'Fail'",
        ),
        ({"webhook": {"url": "https://h/r", "caBundle": "%%%"}}, "evictionPolicy.webhook.caBundle", "base64"),
        (
            {"webhook": {"url": "https://h/r", "caBundle": _PEM_B64, "caFile": "/ca.crt"}},
            "evictionPolicy.webhook.caFile",
            "not both",
        ),
        (
            {"rateLimits": {"cluster": {"evictionsPerMinute": 0}}},
            "evictionPolicy.rateLimits.cluster.evictionsPerMinute",
            "greater than 0",
        ),
        (
            {"rateLimits": {"workload": {"burst": 2}}},
            "evictionPolicy.rateLimits.workload.evictionsPerMinute",
            "required",
        ),
        (
            {"rateLimits": {"namespace": {"evictionsPerMinute": 1, "burst": 0}}},
            "evictionPolicy.rateLimits.namespace.burst",
            "greater than or equal to 1",
        ),
    ],
)
def test_invalid_block_names_the_field(block: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(PolicyError) as err:
        load_policy(doc(evictionPolicy=block), default_registry())
    assert err.value.path == path
    assert message in err.value.reason
    assert "\n" not in str(err.value)
    # the same inside a profile, under the profile's path
    profiles = [
        {"name": "p", "plugins": {"deschedule": {"enabled": ["RemoveFailedPods"]}}, "evictionPolicy": block}
    ]
    with pytest.raises(PolicyError) as err:
        load_policy(doc(profiles), default_registry())
    assert err.value.path == "profiles[0]." + path


@pytest.mark.parametrize(
    "field", ["maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal"]
)
def test_limits_accept_percentages(field: str) -> None:
    policy = load_policy(doc(**{field: "10%"}), default_registry())
    assert ep.Percent(10) in (policy.limits.per_node, policy.limits.per_namespace, policy.limits.total)
    assert policy.normalised()[field] == "10%"
    for bad in ("10", "10.5%", "-1%", "200%", True, 1.5):
        with pytest.raises(PolicyError) as err:
            load_policy(doc(**{field: bad}), default_registry())
        assert err.value.path == field


@given(st.integers(0, 100), st.integers(0, 10_000))
def test_percent_rounds_down_and_never_exceeds_the_share(value: int, total: int) -> None:
    n = ep.Percent(value).of(total)
    assert 0 <= n <= total
    assert n * 100 <= value * total < (n + 1) * 100


@given(
    st.integers(1, 10**9),
    st.integers(1, 64),
    st.integers(0, 100),
)
def test_cooldown_doubles_per_move_up_to_its_maximum(base_s: int, max_factor: int, moves: int) -> None:
    base = timedelta(seconds=base_s)
    cd = ep.Cooldown(base, base * max_factor, timedelta(days=1))
    got = cd.after_moves(moves)
    if moves == 0:
        assert got == timedelta(0)
    else:
        assert got == min(base * min(2 ** (moves - 1), max_factor), base * max_factor)
        assert cd.after_moves(moves + 1) >= got  # never shrinks with more moves
