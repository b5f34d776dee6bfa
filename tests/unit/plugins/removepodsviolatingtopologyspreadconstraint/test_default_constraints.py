"""RemovePodsViolatingTopologySpreadConstraint with ``defaultConstraints`` (upstream #1502): pods
without constraints are balanced by kube-scheduler's cluster-level defaults, over the selector
made of their Services and controller, only when the policy asks for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import builders
from tests.unit.plugins.harness import Bound

from desched.cluster.snapshot import ClusterSnapshot
from desched.errors import PolicyError
from desched.k8s.objects import Node, Pod, Workload

PLUGIN = "RemovePodsViolatingTopologySpreadConstraint"
#: The plugin with DefaultEvictor on, as an operator enables it.
TSC = Bound(PLUGIN, {"evictor": True})
RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d", "controller": True}


def nodes(n: int = 3) -> list[Node]:
    return [builders.node(f"n{i}", zone=f"z{i}", cpu="8", memory="16Gi") for i in range(n)]


def web(name: str, on: str, *, tsc: list[dict[str, Any]] | None = None, app: str = "web") -> Pod:
    spec = {"topologySpreadConstraints": tsc} if tsc else None
    return builders.pod(name, node=on, labels={"app": app}, owner=RS, cpu="100m", spec=spec)


def cluster(pods: list[Pod], workloads: list[Workload] | None = None) -> ClusterSnapshot:
    """Three nodes, the pods, and (by default) their ReplicaSet."""
    if workloads is None:
        workloads = [builders.replica_set("web-5d", {"app": "web"})]
    return ClusterSnapshot(nodes=nodes(), pods=pods, workloads=workloads)


def crowded(n: int = 6) -> list[Pod]:
    """``n`` replicas without constraints, all on n0."""
    return [web(f"w{i}", "n0") for i in range(n)]


BOTH = ["DoNotSchedule", "ScheduleAnyway"]


def test_off_by_default_as_upstream() -> None:
    assert TSC.evicted(args={"constraints": BOTH}, snapshot=cluster(crowded())) == []


def test_system_defaults_balance_pods_without_constraints() -> None:
    # hostname maxSkew 3: 6-0 is skewed by 6; zone maxSkew 5 too. Ideal 2 per node.
    evicted = TSC.evicted(args={"constraints": BOTH, "defaultConstraints": {}}, snapshot=cluster(crowded()))
    assert evicted and all(name.startswith("w") for name in evicted)
    assert len(evicted) == 3  # 6 -> 3: within maxSkew 3 of the empty nodes
    # within the system defaults' maxSkew: nothing to do
    assert (
        TSC.evicted(args={"constraints": BOTH, "defaultConstraints": {}}, snapshot=cluster(crowded(3))) == []
    )


def test_system_defaults_are_schedule_anyway_so_the_default_constraints_arg_ignores_them() -> None:
    assert TSC.evicted(args={"defaultConstraints": {}}, snapshot=cluster(crowded())) == []


def test_no_selector_no_default_constraints() -> None:
    # no Service, and the controller is not in the snapshot: kube-scheduler's selector is empty
    assert (
        TSC.evicted(args={"constraints": BOTH, "defaultConstraints": {}}, snapshot=cluster(crowded(), []))
        == []
    )
    # a Service selecting them is enough
    svc = [builders.service("web", {"app": "web"})]
    assert (
        len(
            TSC.evicted(
                args={"constraints": BOTH, "defaultConstraints": {}}, snapshot=cluster(crowded(), svc)
            )
        )
        == 3
    )


def test_pods_with_their_own_constraints_get_no_defaults() -> None:
    own = {
        "maxSkew": 10,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "web"}},
    }
    pods = [web(f"w{i}", "n0", tsc=[own]) for i in range(6)]
    assert TSC.evicted(args={"constraints": BOTH, "defaultConstraints": {}}, snapshot=cluster(pods)) == []


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
    assert len(TSC.evicted(args=args, snapshot=cluster(crowded(3)))) == 2
    # List without any constraint: no defaults, nothing to balance
    none = {
        "defaultConstraints": {"kubeSchedulerConfigFile": scheduler_config(tmp_path)},
        "constraints": BOTH,
    }
    assert TSC.evicted(args=none, snapshot=cluster(crowded())) == []


def test_a_bad_kube_scheduler_configuration_fails_the_policy(tmp_path: Path) -> None:
    bad = {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    path = scheduler_config(tmp_path, bad)
    with pytest.raises(PolicyError) as e:
        TSC.load({"defaultConstraints": {"kubeSchedulerConfigFile": path}})
    msg = str(e.value)
    assert msg.startswith("profiles[0].pluginConfig[0].args.defaultConstraints: ")
    assert f"{path}: profiles[0].pluginConfig[0].args.defaultConstraints[0].maxSkew" in msg
    with pytest.raises(PolicyError, match="cannot read kube-scheduler configuration"):
        TSC.load({"defaultConstraints": {"kubeSchedulerConfigFile": str(tmp_path / "none")}})
    with pytest.raises(PolicyError, match=r"defaultConstraints\.schedulerNme"):
        TSC.load({"defaultConstraints": {"schedulerNme": "x"}})


def test_live_runs_watch_the_workloads_only_when_defaults_are_on() -> None:
    on = TSC.framework({"defaultConstraints": {}})
    off = TSC.framework({})
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
    result = TSC.run(args={"constraints": BOTH}, snapshot=snapshot)
    assert [(e.name, e.node) for e in result.evictions] == [(on_b, "b")]
