"""Fuzzing the inputs a user hands desched: policies, snapshots, and the CLI that reads them.

Valid documents (the examples, a v1alpha1 policy) are mutated by hypothesis: type swaps, deep
nesting, huge numbers, bad quantities, bad timestamps, missing fields, unknown fields,
duplicates. The contract, for every case:

- exit 2 and exactly one line on stderr, ``desched: error: <where>: <why>``, short; when the
  mutation is one the API server (or upstream's decoder) refuses, the line names the field;
- or exit 0: a policy's normalised form validates to itself; a snapshot's decisions are
  deterministic and name only pods of the snapshot, and a mutation of what desched does not read
  leaves them unchanged;
- never a traceback (any exception out of ``desched.cli.main`` fails the test).

The budget is small by default so that ``.ci/run`` stays fast (the ``fast`` profile of
:mod:`tests.unit.fuzz.profiles`); ``HYPOTHESIS_PROFILE=long`` or ``DESCHED_FUZZ_EXAMPLES=5000`` runs
a long campaign, and ``DESCHED_FUZZ_STATS=FILE`` appends one JSON line per case (what the figures
in the report are counted from).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.fuzz.profiles import budget

from desched.cli import main

ROOT = Path(__file__).resolve().parents[3]
NOW = "2026-11-21T12:00:00Z"
STATS = os.environ.get("DESCHED_FUZZ_STATS")
WORK = Path(tempfile.mkdtemp(prefix="desched-fuzz-"))

POLICIES = [
    ROOT / "examples" / name for name in ("policy.yaml", "policy-anomaly.yaml", "policy-binpacking.yaml")
]
V1ALPHA1 = {
    "apiVersion": "descheduler/v1alpha1",
    "kind": "DeschedulerPolicy",
    "maxNoOfPodsToEvictPerNode": 3,
    "strategies": {
        "LowNodeUtilization": {
            "enabled": True,
            "params": {
                "namespaces": {"exclude": ["kube-system"]},
                "nodeResourceUtilizationThresholds": {
                    "thresholds": {"cpu": 20, "memory": 20},
                    "targetThresholds": {"cpu": 50, "memory": 50},
                },
            },
        },
        "PodLifeTime": {
            "enabled": True,
            "params": {"podLifeTime": {"maxPodLifeTimeSeconds": 86400, "podStatusPhases": ["Pending"]}},
        },
    },
}


def base_policies() -> list[Any]:
    return [yaml.safe_load(p.read_text()) for p in POLICIES] + [V1ALPHA1]


BASE_POLICIES = base_policies()
BASE_SNAPSHOT: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "cluster.yaml").read_text())
POLICY = ROOT / "examples" / "policy.yaml"


# ---------------------------------------------------------------------------- running desched


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``desched.cli.main`` in-process: (exit code, stdout, stderr). An exception propagates."""
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handler = logging.StreamHandler(err)
    root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        root.removeHandler(handler)
    return code, out.getvalue(), err.getvalue()


def record(kind: str, mutation: str, code: int | str) -> None:
    if STATS:
        with open(STATS, "a") as f:
            f.write(json.dumps({"input": kind, "mutation": mutation, "exit": code}) + "\n")


def check_refusal(code: int, err: str, source: str, field: str | None) -> None:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("desched: error: "), line
    assert len(line) < 600, line[:700]
    assert "Traceback" not in line
    assert source in line or line.startswith("desched: error: profiles") or ": " in line, line
    if field is not None:
        assert field in line, (field, line)


def guarded(kind: str, mutation: str, argv: list[str]) -> tuple[int, str, str]:
    try:
        code, out, err = run_cli(argv)
    except BaseException as e:  # a traceback: the contract is broken
        record(kind, mutation, f"traceback {type(e).__name__}")
        raise
    record(kind, mutation, code)
    return code, out, err


# ---------------------------------------------------------------------------- mutations


def json_leaf() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**30, 0, -1]),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.sampled_from(
            ["", "7", "true", "yes", "1h", "12Qi", "1 Gi", "NaN", "1e400", "2025-05-01T00:00:00"]
        ),
    )


def json_value() -> st.SearchStrategy[Any]:
    return st.recursive(
        json_leaf(),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=6,
    )


def paths(doc: Any, limit: int = 4000) -> list[tuple[Any, ...]]:
    """Every path to a value in ``doc`` (keys and indexes)."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    while stack and len(out) < limit:
        value, where = stack.pop()
        out.append(where)
        if isinstance(value, dict):
            stack.extend((v, (*where, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*where, i)) for i, v in enumerate(value))
    return out


def get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


def mutate_generic(data: st.DataObject, doc: Any) -> tuple[Any, str]:
    """One structural mutation at a random place of ``doc`` (a copy)."""
    doc = copy.deepcopy(doc)
    all_paths = [p for p in paths(doc) if p]
    path = data.draw(st.sampled_from(sorted(all_paths, key=repr)), label="path")
    parent = get(doc, path[:-1])
    key = path[-1]
    kind = data.draw(
        st.sampled_from(["swap", "delete", "unknown-key", "huge", "deep", "string", "duplicate"]),
        label="mutation",
    )
    if kind == "swap":
        parent[key] = data.draw(json_value(), label="value")
    elif kind == "delete":
        del parent[key]
    elif kind == "unknown-key":
        target = parent if isinstance(parent, dict) else None
        if target is None:
            parent[key] = {"unexpected": 1}
        else:
            target[data.draw(st.sampled_from(["parms", "treshold", "x", "Enabled"]))] = data.draw(json_leaf())
    elif kind == "huge":
        parent[key] = data.draw(st.sampled_from([2**64, 2**63, -(2**64), 10**400, 9999999999999]))
    elif kind == "deep":
        parent[key] = nest(parent[key], data.draw(st.sampled_from([70, 200, 1100])))
    elif kind == "string":
        parent[key] = data.draw(st.sampled_from(["x" * 10_000, "\u0000", "é", "-1", "1e400"]))
    else:  # duplicate a list entry
        if isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        else:
            parent[key] = [parent[key], parent[key]]
    return doc, kind


def dump(doc: Any, fmt: str, name: str) -> Path:
    path = WORK / f"{name}.{fmt}"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # (the deep mutations; the writer's own recursion only)
    try:
        if fmt == "json":
            path.write_text(json.dumps(doc))
        else:
            path.write_text(yaml.safe_dump(doc))
    finally:
        sys.setrecursionlimit(limit)
    return path


# ---------------------------------------------------------------------------- policies


def validate_policy(path: Path, kind: str, field: str | None = None) -> tuple[int, str]:
    code, out, err = guarded("policy", kind, ["validate", str(path)])
    if code == 0:
        # the normalised policy is valid and normalises to itself
        again = dump(yaml.safe_load(out), "yaml", "normalised")
        code2, out2, err2 = run_cli(["validate", str(again)])
        assert code2 == 0, err2
        assert yaml.safe_load(out2) == yaml.safe_load(out)
        assert field is None, f"accepted an invalid {field}"
    else:
        check_refusal(code, err, str(path), field)
    return code, out


@budget(80)
@given(data=st.data())
def test_fuzz_policy_mutations(data: st.DataObject) -> None:
    doc = data.draw(st.sampled_from(BASE_POLICIES), label="base")
    mutated, kind = mutate_generic(data, doc)
    fmt = data.draw(st.sampled_from(["yaml", "json"]), label="format")
    validate_policy(dump(mutated, fmt, "policy"), kind)


#: (field, a value upstream's decoder or validation refuses) for DefaultEvictor's and plugins' args.
INVALID_ARGS: list[tuple[str, str, Any]] = [
    ("DefaultEvictor", "nodeFit", "yes"),
    ("DefaultEvictor", "nodeFit", 1),
    ("DefaultEvictor", "minPodAge", "9999999999999h"),
    ("DefaultEvictor", "minPodAge", 60),
    ("DefaultEvictor", "evictLocalStoragePods", "true"),
    ("RemovePodsHavingTooManyRestarts", "podRestartThreshold", True),
    ("RemovePodsHavingTooManyRestarts", "podRestartThreshold", "7"),
    ("RemovePodsHavingTooManyRestarts", "podRestartThreshold", 2**64),
    ("RemoveFailedPods", "minPodLifetimeSeconds", 2**64),
    ("RemoveFailedPods", "minPodLifetimeSeconds", -1),
    ("LowNodeUtilization", "thresholds", {"cpu": 120, "memory": 20, "pods": 20}),
    ("LowNodeUtilization", "numberOfNodes", "2"),
    ("RemoveDuplicates", "excludeOwnerKinds", "ReplicaSet"),
    ("RemovePodsViolatingNodeTaints", "includePreferNoSchedule", "yes"),
]


@budget(30)
@given(data=st.data())
def test_fuzz_policy_invalid_values_name_the_field(data: st.DataObject) -> None:
    doc = copy.deepcopy(BASE_POLICIES[0])
    plugin, field, value = data.draw(st.sampled_from(INVALID_ARGS), label="case")
    configs = doc["profiles"][0]["pluginConfig"]
    entry = next(c for c in configs if c["name"] == plugin)
    entry.setdefault("args", {})
    entry["args"] = dict(entry["args"] or {}, **{field: value})
    fmt = data.draw(st.sampled_from(["yaml", "json"]), label="format")
    validate_policy(dump(doc, fmt, "policy"), f"invalid {field}", field)


# ---------------------------------------------------------------------------- snapshots


def decisions(out: str) -> list[tuple[str, str, str]]:
    doc = json.loads(out)
    return [(e["namespace"], e["name"], e["plugin"]) for e in doc["evictions"]]


def simulate(path: Path, kind: str) -> tuple[int, str, str]:
    return guarded(
        "snapshot",
        kind,
        ["simulate", str(path), "--policy", str(POLICY), "--now", NOW, "-o", "json", "--no-placement"],
    )


_BASE_DECISIONS: dict[str, list[tuple[str, str, str]]] = {}


def base_decisions(fmt: str) -> list[tuple[str, str, str]]:
    if fmt not in _BASE_DECISIONS:
        base = str(dump(BASE_SNAPSHOT, fmt, "base"))
        code, out, err = run_cli(
            ["simulate", base, "--policy", str(POLICY), "--now", NOW, "-o", "json", "--no-placement"]
        )
        assert code == 0, err
        _BASE_DECISIONS[fmt] = decisions(out)
        assert _BASE_DECISIONS[fmt]  # the example evicts: a change would show
    return _BASE_DECISIONS[fmt]


def items(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [i for i in doc["items"] if i.get("kind") == kind]


def check_accepted(out: str, doc: dict[str, Any], path: Path, kind: str) -> list[tuple[str, str, str]]:
    got = decisions(out)
    pods = {(i["metadata"].get("namespace"), i["metadata"].get("name")) for i in items(doc, "Pod")}
    assert all((ns, name) in pods for ns, name, _ in got), got
    code, out2, err = run_cli(
        ["simulate", str(path), "--policy", str(POLICY), "--now", NOW, "-o", "json", "--no-placement"]
    )
    assert code == 0 and decisions(out2) == got, err  # deterministic
    return got


@budget(30)
@given(data=st.data())
def test_fuzz_snapshot_mutations(data: st.DataObject) -> None:
    doc = copy.deepcopy(BASE_SNAPSHOT)
    index = data.draw(st.integers(min_value=0, max_value=len(doc["items"]) - 1), label="item")
    item, kind = mutate_generic(data, {"item": doc["items"][index]})
    if "item" in item:
        doc["items"][index] = item["item"]
    else:  # the whole item deleted
        del doc["items"][index]
    fmt = data.draw(st.sampled_from(["json", "json", "yaml"]), label="format")
    path = dump(doc, fmt, "snapshot")
    code, out, err = simulate(path, kind)
    if code == 0:
        check_accepted(out, doc, path, kind)
    else:
        check_refusal(code, err, str(path), None)


def _set_request(value: Any) -> Callable[[dict[str, Any], int], str]:
    def apply(doc: dict[str, Any], i: int) -> str:
        pod = items(doc, "Pod")[i]
        pod["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})["cpu"] = value
        return "cpu"

    return apply


def _set_allocatable(value: Any) -> Callable[[dict[str, Any], int], str]:
    def apply(doc: dict[str, Any], i: int) -> str:
        node = items(doc, "Node")[i % len(items(doc, "Node"))]
        node["status"]["allocatable"] = dict(node["status"]["allocatable"], memory=value)
        return "memory"

    return apply


def _pod_field(path: tuple[str, ...], value: Any, field: str) -> Callable[[dict[str, Any], int], str]:
    def apply(doc: dict[str, Any], i: int) -> str:
        target = items(doc, "Pod")[i]
        for p in path[:-1]:
            target = target.setdefault(p, {})
        target[path[-1]] = value
        return field

    return apply


def _append_pod(change: Callable[[dict[str, Any]], None], field: str) -> Callable[[dict[str, Any], int], str]:
    def apply(doc: dict[str, Any], i: int) -> str:
        pod = copy.deepcopy(items(doc, "Pod")[i])
        change(pod)
        doc["items"].append(pod)
        return field

    return apply


def _other_name(pod: dict[str, Any]) -> None:
    pod["metadata"]["name"] += "-copy"


def _other_uid(pod: dict[str, Any]) -> None:
    pod["metadata"]["uid"] = pod["metadata"].get("uid", "") + "-copy"


def _no_spec(pod: dict[str, Any]) -> None:
    _other_name(pod)
    _other_uid(pod)
    del pod["spec"]


def _nameless_node(doc: dict[str, Any], i: int) -> str:
    doc["items"].insert(i % len(doc["items"]), {"apiVersion": "v1", "kind": "Node"})
    return "metadata.name"


def _empty_taint(doc: dict[str, Any], i: int) -> str:
    node = items(doc, "Node")[i % len(items(doc, "Node"))]
    node.setdefault("spec", {})["taints"] = [{"key": "", "effect": "NoExecute"}]
    return "taints[0].key"


def _deep_skipped(doc: dict[str, Any], i: int) -> str:
    items(doc, "Pod")[i]["metadata"]["managedFields"] = nest(1, 1100)
    return ""


#: Mutations the API server refuses: each must end in exit 2 naming the field.
INVALID_SNAPSHOT: dict[str, Callable[[dict[str, Any], int], str]] = {
    "quantity 12Qi": _set_request("12Qi"),
    "quantity '1 Gi'": _set_request("1 Gi"),
    "quantity NaN": _set_request("NaN"),
    "quantity 2000 digits": _set_request("9" * 2000),
    "quantity 1e400": _set_request("1e400"),
    "negative request": _set_request("-1"),
    "node quantity 12Qi": _set_allocatable("12Qi"),
    "node quantity 1e400": _set_allocatable("1e400"),
    "negative allocatable": _set_allocatable("-1"),
    "zone-less creationTimestamp": _pod_field(
        ("metadata", "creationTimestamp"), "2025-05-01T00:00:00", "creationTimestamp"
    ),
    "zone-less startTime": _pod_field(("status", "startTime"), "2025-05-01T00:00:00", "startTime"),
    "garbage timestamp": _pod_field(("metadata", "creationTimestamp"), "yesterday", "creationTimestamp"),
    "priority beyond int32": _pod_field(("spec", "priority"), 2**31, "priority"),
    "tolerationSeconds beyond int64": _pod_field(
        ("spec", "tolerations"), [{"operator": "Exists", "tolerationSeconds": 2**70}], "tolerationSeconds"
    ),
    "maxSkew beyond int32": _pod_field(
        ("spec", "topologySpreadConstraints"),
        [{"maxSkew": 2**64, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
        "maxSkew",
    ),
    "no namespace": _pod_field(("metadata", "namespace"), "", "namespace"),
    "non-DNS name": _pod_field(("metadata", "name"), "Web_1", "metadata.name"),
    "kind a list": _pod_field(("kind",), ["Pod"], "kind"),
    "same namespace/name twice": _append_pod(_other_uid, "listed twice"),
    "same uid twice": _append_pod(_other_name, "uid"),
    "pod without spec": _append_pod(_no_spec, "spec.containers"),
    "node without name": _nameless_node,
    "taint with an empty key": _empty_taint,
    "deep skipped field": _deep_skipped,
}


@budget(30)
@given(data=st.data())
def test_fuzz_snapshot_invalid_objects_are_refused_naming_the_field(data: st.DataObject) -> None:
    doc = copy.deepcopy(BASE_SNAPSHOT)
    name = data.draw(st.sampled_from(sorted(INVALID_SNAPSHOT)), label="mutation")
    i = data.draw(st.integers(min_value=0, max_value=len(items(doc, "Pod")) - 1), label="object")
    field = INVALID_SNAPSHOT[name](doc, i)
    fmt = data.draw(st.sampled_from(["json", "json", "yaml"]), label="format")
    path = dump(doc, fmt, "snapshot")
    code, out, err = simulate(path, name)
    if name == "deep skipped field":
        # libyaml refuses it ("exceeded maximum nesting depth"); msgspec skips an unknown field
        # within the interpreter's recursion limit (1,000 in a desched process) and refuses it
        # past that ("nested too deeply"), which hypothesis may have raised: either way no
        # traceback, and no change in decisions
        if code == 0:
            assert fmt == "json" and check_accepted(out, doc, path, name) == base_decisions(fmt)
            return
        field = "nest"
    check_refusal(code, err, str(path), field)


#: Fields desched does not read: changing them changes no decision.
IGNORED = [
    ("metadata", "managedFields"),
    ("metadata", "finalizers"),
    ("spec", "dnsPolicy"),
    ("status", "podIP"),
    ("unknownTopLevel",),
]


@budget(15)
@given(data=st.data())
def test_fuzz_snapshot_noise_changes_no_decision(data: st.DataObject) -> None:
    doc = copy.deepcopy(BASE_SNAPSHOT)
    pods = items(doc, "Pod")
    pod = pods[data.draw(st.integers(min_value=0, max_value=len(pods) - 1), label="pod")]
    where = data.draw(st.sampled_from(IGNORED), label="field")
    target = pod
    for p in where[:-1]:
        target = target.setdefault(p, {})
    target[where[-1]] = data.draw(json_value(), label="value")
    fmt = data.draw(st.sampled_from(["json", "json", "yaml"]), label="format")
    path = dump(doc, fmt, "snapshot")
    code, out, err = simulate(path, "noise " + ".".join(where))
    assert code == 0, err
    assert check_accepted(out, doc, path, "noise") == base_decisions(fmt)


# ---------------------------------------------------------------------------- the CLI as a process


def desched(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "desched.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


@pytest.mark.parametrize(
    ("what", "field"),
    [
        ("policy not UTF-8", "not UTF-8 text"),
        ("policy alias bomb", "YAML expands to more than"),
        ("snapshot zone-less timestamp", "metadata.creationTimestamp"),
        ("snapshot nested 100000 deep", "nested too deeply"),
        ("snapshot given as policy", "this is a cluster snapshot"),
        ("policy given as snapshot", "this is a DeschedulerPolicy"),
    ],
)
def test_cli_process_refuses_in_one_line(tmp_path: Path, what: str, field: str) -> None:
    policy, snapshot = str(POLICY), str(ROOT / "examples" / "cluster.yaml")
    if what == "policy not UTF-8":
        p = tmp_path / "p.yaml"
        p.write_bytes(POLICY.read_bytes() + b"\n# \xff\n")
        policy = str(p)
    elif what == "policy alias bomb":
        text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
        for prev, n in zip("abcdefgh", "bcdefghi", strict=True):
            text += f"{n}: &{n} [" + ",".join(["*" + prev] * 9) + "]\n"
        p = tmp_path / "p.yaml"
        p.write_text(text + "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: *i\n")
        policy = str(p)
    elif what == "snapshot zone-less timestamp":
        doc = copy.deepcopy(BASE_SNAPSHOT)
        items(doc, "Pod")[3]["metadata"]["creationTimestamp"] = "2025-05-01T00:00:00"
        p = tmp_path / "s.json"
        p.write_text(json.dumps(doc))
        snapshot = str(p)
    elif what == "snapshot nested 100000 deep":
        doc = copy.deepcopy(BASE_SNAPSHOT)
        items(doc, "Pod")[3]["metadata"]["managedFields"] = "HOLE"
        p = tmp_path / "s.json"
        p.write_text(json.dumps(doc).replace('"HOLE"', "[" * 100_000 + "]" * 100_000))
        snapshot = str(p)
    elif what == "snapshot given as policy":
        policy = snapshot
    else:
        snapshot = policy
    proc = desched("simulate", snapshot, "--policy", policy, "--now", NOW)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("desched: error: "), proc.stderr
    assert field in lines[0], lines[0]
    assert len(lines[0]) < 600


def test_cli_process_accepts_the_example() -> None:
    proc = desched("simulate", str(ROOT / "examples" / "cluster.yaml"), "--policy", str(POLICY), "--now", NOW)
    assert proc.returncode == 0, proc.stderr
    proc = desched("validate", str(POLICY))
    assert proc.returncode == 0, proc.stderr
