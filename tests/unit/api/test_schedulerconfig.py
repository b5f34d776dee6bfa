"""Reading kube-scheduler's PodTopologySpread default constraints from a KubeSchedulerConfiguration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.api.schedulerconfig import load_default_constraints, load_scheduler_config
from desched.errors import PolicyError
from desched.k8s.topologyspread import SYSTEM_DEFAULTS


def config(*profiles: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
    }
    if profiles:
        doc["profiles"] = list(profiles)
    return doc


def spread_args(**args: Any) -> dict[str, Any]:
    return {
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {}},
            {"name": "PodTopologySpread", "args": args},
        ]
    }


def write(tmp_path: Path, doc: Any) -> str:
    path = tmp_path / "sched.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_without_profiles_or_plugin_config_kube_scheduler_uses_the_system_defaults(tmp_path: Path) -> None:
    assert load_default_constraints(write(tmp_path, config())) is SYSTEM_DEFAULTS
    assert (
        load_default_constraints(write(tmp_path, config({"schedulerName": "default-scheduler"})))
        is SYSTEM_DEFAULTS
    )
    assert (
        load_default_constraints(write(tmp_path, config(spread_args(defaultingType="System"))))
        is SYSTEM_DEFAULTS
    )


def test_list_defaults_of_the_named_profile(tmp_path: Path) -> None:
    zone = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
    host = {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}
    path = write(
        tmp_path,
        config(
            {
                **spread_args(defaultingType="List", defaultConstraints=[zone]),
                "schedulerName": "default-scheduler",
            },
            {
                **spread_args(defaultingType="List", defaultConstraints=[host, {**zone, "minDomains": 3}]),
                "schedulerName": "batch",
            },
        ),
    )
    got = load_default_constraints(path)
    assert not got.system
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in got.constraints] == [
        ("topology.kubernetes.io/zone", 1, "DoNotSchedule")
    ]
    batch = load_default_constraints(path, "batch")
    assert [(c.topology_key, c.max_skew, c.min_domains) for c in batch.constraints] == [
        ("kubernetes.io/hostname", 2, None),
        ("topology.kubernetes.io/zone", 1, 3),
    ]
    # List with nothing listed: no defaults at all
    empty = load_default_constraints(write(tmp_path, config(spread_args(defaultingType="List"))))
    assert empty.constraints == () and not empty.system


@pytest.mark.parametrize(
    ("doc", "where", "words"),
    [
        ({"kind": "Policy"}, "kind", "must be KubeSchedulerConfiguration"),
        (
            config(spread_args(defaultingType="Sometimes")),
            "profiles[0].pluginConfig[1].args.defaultingType",
            "System or List",
        ),
        (
            config(
                spread_args(
                    defaultConstraints=[
                        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                    ]
                )
            ),
            "profiles[0].pluginConfig[1].args.defaultConstraints",
            'must be empty when defaultingType is "System"',
        ),
        (
            config(
                spread_args(
                    defaultingType="List",
                    defaultConstraints=[
                        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                    ],
                )
            ),
            "defaultConstraints[0].maxSkew",
            "greater than 0",
        ),
        (
            config(
                spread_args(
                    defaultingType="List",
                    defaultConstraints=[
                        {
                            "maxSkew": 1,
                            "topologyKey": "zone",
                            "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {},
                        }
                    ],
                )
            ),
            "defaultConstraints[0].labelSelector",
            "deduced for each pod",
        ),
        (
            config(
                spread_args(
                    defaultingType="List",
                    defaultConstraints=[
                        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                    ]
                    * 2,
                )
            ),
            "defaultConstraints[1]",
            "duplicate topologyKey 'zone'",
        ),
        (
            config(
                spread_args(
                    defaultingType="List",
                    defaultConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Never"}],
                )
            ),
            "defaultConstraints[0].whenUnsatisfiable",
            "DoNotSchedule or ScheduleAnyway",
        ),
        (config({"schedulerName": "batch"}), "profiles", "no profile has schedulerName 'default-scheduler'"),
    ],
)
def test_invalid_files_name_the_field(tmp_path: Path, doc: Any, where: str, words: str) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(PolicyError) as e:
        load_default_constraints(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and where in msg and words in msg and "\n" not in msg


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read kube-scheduler configuration"):
        load_default_constraints(str(tmp_path / "missing.yaml"))


def test_percentage_of_nodes_to_score_top_level_and_per_profile(tmp_path: Path) -> None:
    """kube-scheduler's ``percentageOfNodesToScore``: the profile's own (1.27+) over the
    file's; 0 or absent is the adaptive default (None), also when a profile's 0 overrides a
    top-level figure."""
    assert load_scheduler_config(write(tmp_path, config())).percentage_of_nodes_to_score is None
    doc = {**config(), "percentageOfNodesToScore": 10}
    got = load_scheduler_config(write(tmp_path, doc))
    assert got.percentage_of_nodes_to_score == 10 and got.default_constraints is SYSTEM_DEFAULTS
    doc = {
        **config({"schedulerName": "batch", "percentageOfNodesToScore": 70}, {"percentageOfNodesToScore": 1}),
        "percentageOfNodesToScore": 10,
    }
    path = write(tmp_path, doc)
    assert load_scheduler_config(path).percentage_of_nodes_to_score == 1
    assert load_scheduler_config(path, "batch").percentage_of_nodes_to_score == 70
    doc = {**config({"percentageOfNodesToScore": 0}), "percentageOfNodesToScore": 10}
    assert load_scheduler_config(write(tmp_path, doc)).percentage_of_nodes_to_score is None
    doc = {**config({"schedulerName": "other"}, {}), "percentageOfNodesToScore": 100}
    assert load_scheduler_config(write(tmp_path, doc)).percentage_of_nodes_to_score == 100


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ({**config(), "percentageOfNodesToScore": 101}, "percentageOfNodesToScore"),
        ({**config(), "percentageOfNodesToScore": "50%"}, "percentageOfNodesToScore"),
        (config({"percentageOfNodesToScore": -1}), "profiles[0].percentageOfNodesToScore"),
        (config({"percentageOfNodesToScore": True}), "profiles[0].percentageOfNodesToScore"),
    ],
)
def test_invalid_percentage_of_nodes_to_score_names_the_field(tmp_path: Path, doc: Any, where: str) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(PolicyError) as e:
        load_scheduler_config(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {where}: ") and "must be an integer from 0 to 100" in msg, msg
    assert "\n" not in msg
