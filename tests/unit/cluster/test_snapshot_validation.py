"""A snapshot holding what the API server would have refused is refused when it is loaded: one
line naming the object and the field, exit 2 (issue 17: "Tracebacks from bad input", "Worse than a
traceback", "Malformed objects that cause evictions that should not happen")."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from desched.cli import main

ROOT = Path(__file__).resolve().parents[3]
POLICY = ROOT / "examples" / "policy.yaml"
BASE: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "cluster.yaml").read_text())
NOW = "2026-11-21T12:00:00Z"

Mutation = Callable[[dict[str, Any]], None]


def pods(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in doc["items"] if i.get("kind") == "Pod"]


def nodes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in doc["items"] if i.get("kind") == "Node"]


def web(doc: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in pods(doc) if p["metadata"]["name"] == "web-7d9f8b6c5-0")


def request(value: Any) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        web(doc)["spec"]["containers"][0]["resources"]["requests"]["cpu"] = value

    return apply


def allocatable(key: str, value: Any) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        node = nodes(doc)[1]
        node["status"]["allocatable"] = dict(node["status"]["allocatable"], **{key: value})

    return apply


def web_field(*path: str, value: Any) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        target = web(doc)
        for p in path[:-1]:
            target = target.setdefault(p, {})
        target[path[-1]] = value

    return apply


def append(item: Any) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        doc["items"].append(item)

    return apply


def copy_of_web(change: Callable[[dict[str, Any]], None]) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        pod = copy.deepcopy(web(doc))
        change(pod)
        doc["items"].append(pod)

    return apply


def _rename(pod: dict[str, Any]) -> None:
    pod["metadata"]["name"] = "web-7d9f8b6c5-9"


def _new_uid(pod: dict[str, Any]) -> None:
    pod["metadata"]["uid"] = "0000"


def _no_spec(pod: dict[str, Any]) -> None:
    _rename(pod)
    _new_uid(pod)
    del pod["spec"]


def _empty_taint(doc: dict[str, Any]) -> None:
    nodes(doc)[1]["spec"]["taints"] = [{"key": "", "effect": "NoExecute"}]


def _pdb_selector(selector: dict[str, Any]) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        pdb = next(i for i in doc["items"] if i.get("kind") == "PodDisruptionBudget")
        pdb["spec"]["selector"] = selector

    return apply


def _cart_anti_affinity_key(doc: dict[str, Any]) -> None:
    cart = next(p for p in pods(doc) if p["metadata"]["name"] == "cart-0")
    terms = cart["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms[0]["labelSelector"] = {"matchLabels": {"bad key!": "cart"}}


def _node_label(doc: dict[str, Any]) -> None:
    nodes(doc)[1]["metadata"]["labels"]["example.com/Bad_Prefix/x"] = "1"


def _deep(doc: dict[str, Any]) -> None:
    web(doc)["metadata"]["managedFields"] = "HOLE"


EVENT = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "shop"}}
WHO = "Pod shop/web-7d9f8b6c5-0"
AT = "(Pod shop/web-7d9f8b6c5-0)"

CASES: dict[str, tuple[Mutation, str]] = {
    # invalid quantities, on pods or nodes
    "12Qi": (
        request("12Qi"),
        f"{WHO}: spec.containers[0].resources.requests.cpu: '12Qi' is not a valid quantity",
    ),
    "1 Gi": (
        request("1 Gi"),
        f"{WHO}: spec.containers[0].resources.requests.cpu: '1 Gi' is not a valid quantity",
    ),
    "NaN": (
        request("NaN"),
        f"{WHO}: spec.containers[0].resources.requests.cpu: 'NaN' is not a valid quantity",
    ),
    "2000 digits": (request("9" * 2000), f"{WHO}: spec.containers[0].resources.requests.cpu: '999"),
    "1e400": (request("1e400"), f"{WHO}: spec.containers[0].resources.requests.cpu: '1e400' is out of range"),
    "node 12Qi": (allocatable("cpu", "12Qi"), "Node node-a1: status.allocatable.cpu: '12Qi' is not a valid"),
    "node 1e400": (allocatable("memory", "1e400"), "Node node-a1: status.allocatable.memory: '1e400' is out"),
    # items that are not objects, kinds that are not strings, events.k8s.io fields
    "item not an object": (append(5), "items[54]"),
    "kind a list": (append({"kind": ["Pod"]}), "items[54]"),
    "kind a map": (append({"kind": {"a": 1}}), "items[54]"),
    "regarding not an object": (
        append({**EVENT, "regarding": "x"}),
        "(Event shop/e): regarding: must be an object",
    ),
    "series not an object": (
        append({**EVENT, "series": [1]}),
        "(Event shop/e): series: must be an object, got [1]",
    ),
    # nested ~1,000 deep in a field desched skips
    "deep skipped field": (_deep, "nest"),
    # beyond 64 (or 32) bits
    "tolerationSeconds": (
        web_field("spec", "tolerations", value=[{"operator": "Exists", "tolerationSeconds": 2**64}]),
        f"{AT}: spec.tolerations[0].tolerationSeconds: expected `int` <= 9223372036854775807",
    ),
    "maxSkew": (
        web_field(
            "spec",
            "topologySpreadConstraints",
            value=[{"maxSkew": 2**64, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        ),
        f"{AT}: spec.topologySpreadConstraints[0].maxSkew: expected `int` <= 2147483647",
    ),
    "priority beyond int32": (
        web_field("spec", "priority", value=2**31),
        f"{AT}: spec.priority: expected `int` <= 2147483647",
    ),
    # zone-less timestamps: refused, as the API server refuses them
    "zone-less timestamp": (
        web_field("metadata", "creationTimestamp", value="2025-05-01T00:00:00"),
        f"{AT}: metadata.creationTimestamp: expected `datetime` with a timezone component",
    ),
    # malformed objects that changed decisions
    "node without name": (append({"kind": "Node"}), "the 8th Node listed: metadata.name: required"),
    "same uid twice": (
        copy_of_web(_rename),
        "Pod shop/web-7d9f8b6c5-9: metadata.uid: '",
    ),
    "same namespace/name twice": (
        copy_of_web(_new_uid),
        f"{WHO}: metadata.name: listed twice (also the ",
    ),
    "pod without spec": (copy_of_web(_no_spec), "Pod shop/web-7d9f8b6c5-9: spec.containers: required"),
    "pod without namespace": (
        web_field("metadata", "namespace", value=""),
        "Pod web-7d9f8b6c5-0: metadata.namespace: required for a namespaced object",
    ),
    "pod with a non-DNS name": (
        web_field("metadata", "name", value="Web_1"),
        "Pod shop/Web_1: metadata.name: 'Web_1' is not a valid name",
    ),
    "negative request": (
        request("-1"),
        f"{WHO}: spec.containers[0].resources.requests.cpu: must not be negative",
    ),
    "allocatable.pods -1": (
        allocatable("pods", "-1"),
        "Node node-a1: status.allocatable.pods: must not be negative",
    ),
    "taint with an empty key": (_empty_taint, "Node node-a1: spec.taints[0].key: required"),
    # labels and the label selectors the API server validates: an invalid selector made every
    # plugin reading it fail (or skip its pods) while the others evicted
    "PDB selector key": (
        _pdb_selector({"matchLabels": {"bad key!": "web"}}),
        "PodDisruptionBudget shop/web: spec.selector: matchLabels[bad key!]: key 'bad key!': name part",
    ),
    "PDB selector value": (
        _pdb_selector({"matchLabels": {"app": "bad value!"}}),
        "PodDisruptionBudget shop/web: spec.selector: matchLabels[app]: value 'bad value!'",
    ),
    "PDB selector operator": (
        _pdb_selector({"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["web"]}]}),
        "PodDisruptionBudget shop/web: spec.selector: matchExpressions[0]: 'Equals' is not a valid",
    ),
    "PDB selector In without values": (
        _pdb_selector({"matchExpressions": [{"key": "app", "operator": "In"}]}),
        "PodDisruptionBudget shop/web: spec.selector: matchExpressions[0]: ",
    ),
    "pod label key": (
        web_field("metadata", "labels", value={"app": "web", "-bad": "x"}),
        f"{WHO}: metadata.labels: key '-bad': name part must consist of",
    ),
    "pod label value": (
        web_field("metadata", "labels", value={"app": "web", "tier": "x" * 64}),
        f"{WHO}: metadata.labels.tier: 'xxx",
    ),
    "node label key": (_node_label, "Node node-a1: metadata.labels: key 'example.com/Bad_Prefix/x'"),
    "nodeSelector value": (
        web_field("spec", "nodeSelector", value={"disk": "fast ssd"}),
        f"{WHO}: spec.nodeSelector.disk: 'fast ssd': a valid label value",
    ),
    "spread constraint selector": (
        web_field(
            "spec",
            "topologySpreadConstraints",
            value=[
                {
                    "maxSkew": 1,
                    "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {
                        "matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]
                    },
                }
            ],
        ),
        f"{WHO}: spec.topologySpreadConstraints[0].labelSelector: matchExpressions[0]: ",
    ),
    "pod anti-affinity selector": (
        _cart_anti_affinity_key,
        "Pod shop/cart-0: spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
        ".labelSelector: matchLabels[bad key!]",
    ),
    "pod affinity namespaceSelector": (
        web_field(
            "spec",
            "affinity",
            value={
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "podAffinityTerm": {
                                "topologyKey": "zone",
                                "namespaceSelector": {"matchLabels": {"bad key!": "a"}},
                            },
                        }
                    ]
                }
            },
        ),
        f"{WHO}: spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm"
        ".namespaceSelector: matchLabels[bad key!]",
    ),
}


def one_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("desched: error: "), captured.err
    assert len(lines[0]) < 400, lines[0][:500]
    return lines[0]


def simulate(path: Path) -> list[str]:
    return ["simulate", str(path), "--policy", str(POLICY), "--now", NOW, "--no-placement"]


@pytest.mark.parametrize("fmt", ["json", "yaml"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_naming_the_object_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, fmt: str
) -> None:
    mutate, expected = CASES[case]
    doc = copy.deepcopy(BASE)
    mutate(doc)
    path = tmp_path / f"snap.{fmt}"
    text = json.dumps(doc) if fmt == "json" else yaml.safe_dump(doc)
    path.write_text(text.replace('"HOLE"' if fmt == "json" else "HOLE", "[" * 1100 + "]" * 1100))
    line = one_error(simulate(path), capsys)
    assert expected in line, line


def test_the_valid_example_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(simulate(ROOT / "examples" / "cluster.yaml")) == 0


def test_empty_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "snap.yaml"
    path.write_text("\n")
    assert one_error(simulate(path), capsys).endswith(
        "empty file (expected a v1 List of the cluster's objects)"
    )


def test_a_policy_given_as_a_snapshot(capsys: pytest.CaptureFixture[str]) -> None:
    line = one_error(simulate(POLICY), capsys)
    assert "this is a DeschedulerPolicy, not a cluster snapshot" in line


@pytest.mark.timeout(20)
def test_not_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert one_error(simulate(Path("/dev/zero")), capsys).endswith("not a regular file or a pipe")
    assert one_error(simulate(tmp_path), capsys).endswith("is a directory")


def test_yaml_alias_bomb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    for prev, n in zip("abcdefgh", "bcdefghi", strict=True):
        text += f"{n}: &{n} [" + ",".join(["*" + prev] * 9) + "]\n"
    path = tmp_path / "snap.yaml"
    path.write_text(text + "kind: List\nitems: *i\n")
    assert "YAML expands to more than 1000000 values" in one_error(simulate(path), capsys)
