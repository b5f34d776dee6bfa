"""RemovePodsViolatingTopologySpreadConstraint with ``defaultConstraints`` (upstream #1502): pods
without constraints are balanced by kube-scheduler's cluster-level defaults, over the selector
made of their Services and controller, only when the policy asks for it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import builders

from desched.api.policy import load_policy
from desched.backends.simulated_eviction import SimulatedBackend
from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.framework.framework import Framework
from desched.k8s.objects import Node, Pod, Workload
from desched.plugins import default_registry

NOW = datetime(2026, 1, 1, tzinfo=UTC)
REG = default_registry(entry_points=False)
PLUGIN = "RemovePodsViolatingTopologySpreadConstraint"
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d", "controller": True}


def policy(args: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [{"name": PLUGIN, "args": args}],
                "plugins": {"balance": {"enabled": [PLUGIN]}},
            }
        ],
    }


def nodes(n: int = 3) -> list[Node]:
    return [builders.node(f"n{i}", zone=f"z{i}", cpu="8", memory="16Gi") for i in range(n)]


def web(name: str, on: str, *, tsc: list[dict[str, Any]] | None = None, app: str = "web") -> Pod:
    spec = {"topologySpreadConstraints": tsc} if tsc else None
    return builders.pod(name, node=on, labels={"app": app}, owner=RS, cpu="100m", spec=spec)


def run(pods: list[Pod], args: dict[str, Any], workloads: list[Workload] | None = None) -> list[str]:
    if workloads is None:
        workloads = [builders.replica_set("web-5d", {"app": "web"})]
    snapshot = ClusterSnapshot(nodes=nodes(), pods=pods, workloads=workloads)
    fw = Framework(load_policy(policy(args), REG), REG, clock=lambda: NOW)
    result = fw.run_cycle(snapshot, SimulatedBackend(snapshot))
    assert not [r.error for r in result.plugin_runs if r.error]
    return sorted(e.name for e in result.evictions)


def crowded(n: int = 6) -> list[Pod]:
    """``n`` replicas without constraints, all on n0."""
    return [web(f"w{i}", "n0") for i in range(n)]


BOTH = ["DoNotSchedule", "ScheduleAnyway"]


def test_off_by_default_as_upstream() -> None:
    assert run(crowded(), {"constraints": BOTH}) == []


def test_system_defaults_balance_pods_without_constraints() -> None:
    # hostname maxSkew 3: 6-0 is skewed by 6; zone maxSkew 5 too. Ideal 2 per node.
    evicted = run(crowded(), {"constraints": BOTH, "defaultConstraints": {}})
    assert evicted and all(name.startswith("w") for name in evicted)
    assert len(evicted) == 3  # 6 -> 3: within maxSkew 3 of the empty nodes
    # within the system defaults' maxSkew: nothing to do
    assert run(crowded(3), {"constraints": BOTH, "defaultConstraints": {}}) == []


def test_system_defaults_are_schedule_anyway_so_the_default_constraints_arg_ignores_them() -> None:
    assert run(crowded(), {"defaultConstraints": {}}) == []


def test_no_selector_no_default_constraints() -> None:
    # no Service, and the controller is not in the snapshot: kube-scheduler's selector is empty
    assert run(crowded(), {"constraints": BOTH, "defaultConstraints": {}}, workloads=[]) == []
    # a Service selecting them is enough
    svc = [builders.service("web", {"app": "web"})]
    assert len(run(crowded(), {"constraints": BOTH, "defaultConstraints": {}}, workloads=svc)) == 3


def test_pods_with_their_own_constraints_get_no_defaults() -> None:
    own = {
        "maxSkew": 10,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    pods = [web(f"w{i}", "n0", tsc=[own]) for i in range(6)]
    assert run(pods, {"constraints": BOTH, "defaultConstraints": {}}) == []


def scheduler_config(tmp_path: Path, *constraints: dict[str, Any]) -> str:
    path = tmp_path / "kube-scheduler.yaml"
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {
                        "name": "PodTopologySpread",
                        "args": {"defaultingType": "List", "defaultConstraints": list(constraints)},
                    }
                ],
            }
        ],
    }
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_defaults_from_a_kube_scheduler_configuration(tmp_path: Path) -> None:
    zone = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
    args = {"defaultConstraints": {"kubeSchedulerConfigFile": scheduler_config(tmp_path, zone)}}
    # DoNotSchedule: the plugin's default constraints arg balances it. 3-0-0 -> 1-1-1
    assert len(run(crowded(3), args)) == 2
    # List without any constraint: no defaults, nothing to balance
    none = {
        "defaultConstraints": {"kubeSchedulerConfigFile": scheduler_config(tmp_path)},
        "constraints": BOTH,
    }
    assert run(crowded(), none) == []


def test_a_bad_kube_scheduler_configuration_fails_the_policy(tmp_path: Path) -> None:
    bad = {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    path = scheduler_config(tmp_path, bad)
    with pytest.raises(PolicyError) as e:
        load_policy(policy({"defaultConstraints": {"kubeSchedulerConfigFile": path}}), REG)
    msg = str(e.value)
    assert msg.startswith("profiles[0].pluginConfig[0].args.defaultConstraints: ")
    assert f"{path}: profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew" in msg
    with pytest.raises(PolicyError, match="cannot read kube-scheduler configuration"):
        load_policy(policy({"defaultConstraints": {"kubeSchedulerConfigFile": str(tmp_path / "none")}}), REG)
    with pytest.raises(PolicyError, match=r"defaultConstraints\.schedulerNme"):
        load_policy(policy({"defaultConstraints": {"schedulerNme": "x"}}), REG)


def test_live_runs_watch_the_workloads_only_when_defaults_are_on() -> None:
    on = Framework(load_policy(policy({"defaultConstraints": {}}), REG), REG, clock=lambda: NOW)
    off = Framework(load_policy(policy({}), REG), REG, clock=lambda: NOW)
    assert on.live_inputs().workloads and not off.live_inputs().workloads


ZONE_TSC = [
    {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
]


@pytest.mark.parametrize("names", [("web-5d-aaaaa", "web-5d-zzzzz"), ("web-5d-zzzzz", "web-5d-aaaaa")])
def test_equal_pods_of_a_domain_leave_by_node_whatever_their_names(names: tuple[str, str]) -> None:
    """Zone z0 (nodes a and b) holds 3 pods of the ReplicaSet, z1 holds 1: one of z0's leaves. Of
    equal pods the one on the later node leaves, whichever of the two names sorts first: a
    replacement's name is the random suffix its controller gave it, so the name must not decide
    which node loses a pod (simulate could not tell; tests/e2e/test_simulate_predicts_run.py)."""
    zoned = [
        builders.node("a", zone="z0", cpu="8", memory="16Gi"),
        builders.node("b", zone="z0", cpu="8", memory="16Gi"),
        builders.node("c", zone="z1", cpu="8", memory="16Gi"),
    ]
    on_a, on_b = names
    pods = [
        web("web-5d-mmmmm", "a", tsc=ZONE_TSC),
        web(on_a, "a", tsc=ZONE_TSC),
        web(on_b, "b", tsc=ZONE_TSC),
        web("web-5d-ccccc", "c", tsc=ZONE_TSC),
    ]
    snapshot = ClusterSnapshot(
        nodes=zoned, pods=pods, workloads=[builders.replica_set("web-5d", {"app": "web"})]
    )
    fw = Framework(load_policy(policy({"constraints": BOTH}), REG), REG, clock=lambda: NOW)
    result = fw.run_cycle(snapshot, SimulatedBackend(snapshot))
    assert [(e.name, e.node) for e in result.evictions] == [(on_b, "b")]
