"""Fuzzing from the schemas: policies generated from every plugin's args model, snapshots from
generated nodes and pods, each then mutated, all through the real ``desched validate`` /
``desched simulate`` (``desched.cli.main`` in-process).

Policies: for each plugin with args, a document enabling it with args generated field by field
from its pydantic model (types, nested models, literals, bounds: type-correct, not always
meaningful), then mutated at one place: a value of another type, out of range, an unknown key,
an empty string, null, deep nesting. Snapshots: nodes and pods from :mod:`tests.builders` with
generated fields, one of them mutated the same ways, written as JSON *and* YAML.

Properties, for every example:

- no traceback; exit 0 or 2;
- exit 2 is one line ``desched: error: <where>: <why>``; a policy's names a field of the args
  (the mutated one, or where the generated args break a rule), a snapshot's names the object;
- exit 0: a policy's normalised form (what ``validate`` prints) validates to itself; a
  snapshot's decisions name only its pods;
- a snapshot reads the same as JSON and as YAML: the same exit, the same error line (but the
  file's name), the same decisions (one decoder contract);
- bounded time: every run ends within :data:`BOUND` seconds.

Each failing example hypothesis found is kept below as an ``@example`` (see the notes there).
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
import time
import types
import typing
from pathlib import Path
from typing import Any

import pydantic
import pytest
import yaml
from annotated_types import Ge, Gt, Le, Lt
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.builders import list_doc, node_doc, pod_doc
from tests.unit.fuzz.profiles import EXAMPLES, LONG_FACTOR, PROFILE, budget

from desched.api.documents import MAX_SNAPSHOT_DEPTH, measure_depth
from desched.api.evictionpolicy import EvictionPolicyWire
from desched.api.policy import load_policy
from desched.cli import main
from desched.errors import UserError
from desched.plugins import default_registry

ROOT = Path(__file__).resolve().parents[3]
NOW = "2026-11-21T12:00:00Z"
#: Seconds one run of desched may take on a tiny input (it takes ~0.1 s; the bound allows for a
#: loaded 2-core machine, and catches a run that hangs or goes quadratic).
BOUND = 20.0
WORK = Path(tempfile.mkdtemp(prefix="desched-fuzz-schema-"))
REGISTRY = default_registry(entry_points=False)

#: Plugins whose args have no valid default: the least args that make them valid.
BASE_ARGS: dict[str, dict[str, Any]] = {
    "LowNodeUtilization": {
        "thresholds": {"cpu": 20, "memory": 20},
        "targetThresholds": {"cpu": 50, "memory": 50},
    },
    "HighNodeUtilization": {"thresholds": {"cpu": 20, "memory": 20}},
    "PodLifeTime": {"maxPodLifeTimeSeconds": 3600},
    "RemovePodsHavingTooManyRestarts": {"podRestartThreshold": 10},
    "RemovePodsViolatingNodeAffinity": {
        "nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]
    },
}
POINTS = ("deschedule", "balance", "filter", "sort")
PLUGINS = sorted(
    name
    for name in REGISTRY.names()
    if (spec := REGISTRY.get(name)) is not None and spec.args_model is not None
)

#: Strings a field may meaningfully hold, to reach valid documents often (plus arbitrary text).
WORDS = [
    "",
    "x",
    "1m",
    "30s",
    "1h30m",
    "500ms",
    "Running",
    "Pending",
    "default",
    "kube-system",
    "app=web",
    "app",
    "In",
    "NotIn",
    "Exists",
    "NoSchedule",
    "Preferred",
    "Mandatory",
    "cpu",
    "memory",
    "ReplicaSet",
    "DoNotSchedule",
    "ScheduleAnyway",
    "taint",
    "label",
    "KubernetesMetrics",
    "requiredDuringSchedulingIgnoredDuringExecution",
]


# ---------------------------------------------------------------------------- running desched


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``desched.cli.main`` in-process: (exit code, stdout, stderr); a traceback propagates."""
    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    logging.getLogger().addHandler(handler)
    start = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        logging.getLogger().removeHandler(handler)
    elapsed = time.monotonic() - start
    assert elapsed < BOUND, f"desched {' '.join(argv)} took {elapsed:.1f} s"
    assert code in (0, 2), (code, err.getvalue())
    return code, out.getvalue(), err.getvalue()


def error_line(err: str) -> str:
    """The one line of a refusal, without ``desched: error: ``."""
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1, err
    assert lines[0].startswith("desched: error: "), lines[0]
    assert "Traceback" not in err and len(lines[0]) < 1200, lines[0]
    return lines[0][len("desched: error: ") :]


# ---------------------------------------------------------------------------- values from a schema


def _bounds(metadata: list[Any]) -> tuple[float | None, float | None]:
    low = high = None
    for m in metadata:
        if isinstance(m, Ge):
            low = m.ge  # type: ignore[assignment]
        elif isinstance(m, Gt):
            low = m.gt + (1 if isinstance(m.gt, int) else 1e-9)  # type: ignore[operator]
        elif isinstance(m, Le):
            high = m.le  # type: ignore[assignment]
        elif isinstance(m, Lt):
            high = m.lt - (1 if isinstance(m.lt, int) else 1e-9)  # type: ignore[operator]
    return low, high


def of_type(annotation: Any, metadata: list[Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Type-correct values of ``annotation`` (JSON shapes: a model is an object of its aliases)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return of_type(args[0], [*metadata, *args[1:]], depth)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([of_type(a, metadata, depth) for a in args])
    if annotation is type(None):
        return st.none()
    if origin is typing.Literal:
        return st.sampled_from(args)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        low, high = _bounds(metadata)
        return st.integers(
            min_value=int(low) if low is not None else -5, max_value=int(high) if high is not None else 200
        )
    if annotation is float:
        low, high = _bounds(metadata)
        return st.floats(
            min_value=low if low is not None else -5.0, max_value=high if high is not None else 200.0
        ) | st.integers(min_value=0, max_value=100)
    if annotation is str:
        return st.sampled_from(WORDS) | st.text(max_size=12)
    if depth > 3:
        return st.none()
    if origin is list:
        return st.lists(of_type(args[0], [], depth + 1), max_size=3)
    if origin is dict:
        return st.dictionaries(st.sampled_from(WORDS[1:]), of_type(args[1], [], depth + 1), max_size=3)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return of_model(annotation, depth + 1)
    return st.none()  # (a type this generator does not know: leave it out)


def alias(model: type[pydantic.BaseModel], name: str) -> str:
    info = model.model_fields[name]
    return info.serialization_alias or info.alias or name


@st.composite
def _sparse(draw: st.DrawFn, model: type[pydantic.BaseModel], depth: int) -> dict[str, Any]:
    fields = sorted(model.model_fields)
    chosen = draw(st.lists(st.sampled_from(fields), unique=True, max_size=3)) if fields else []
    out: dict[str, Any] = {}
    for name in chosen:
        info = model.model_fields[name]
        out[alias(model, name)] = draw(of_type(info.annotation, list(info.metadata), depth))
    return out


def of_model(model: type[pydantic.BaseModel], depth: int = 0) -> st.SearchStrategy[dict[str, Any]]:
    """An object of a few of ``model``'s fields (by their wire names), each of its type."""
    return _sparse(model, depth)


def policy(plugin: str, args: dict[str, Any]) -> dict[str, Any]:
    spec = REGISTRY.get(plugin)
    assert spec is not None
    point = next(p for p in POINTS if any(e.value == p for e in spec.extension_points))
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerPolicy",
        "profiles": [
            {
                "name": "fuzz",
                "pluginConfig": [{"name": plugin, "args": args}],
                "plugins": {point: {"enabled": [plugin]}},
            }
        ],
    }


ARGS_PATH = "profiles[0].pluginConfig[0].args"


def valid(doc: Any) -> bool:
    try:
        load_policy(doc, REGISTRY)
    except UserError:
        return False
    return True


def validate(doc: Any, name: str = "policy") -> tuple[int, str, str]:
    path = WORK / f"{name}.yaml"
    path.write_text(json.dumps(doc))
    code, out, err = run_cli(["validate", str(path)])
    if code == 0:
        again = WORK / f"{name}-normalised.yaml"
        again.write_text(out)
        code2, out2, err2 = run_cli(["validate", str(again)])
        assert code2 == 0, (out, err2)
        assert out2 == out  # the normalised policy validates to itself
        return code, out, ""
    return code, out, error_line(err)


# ---------------------------------------------------------------------------- mutations


def nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


def key_paths(doc: Any) -> list[tuple[Any, ...]]:
    """Every path to a value below ``doc`` (dict keys and list indexes), sorted."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    while stack:
        value, where = stack.pop()
        if where:
            out.append(where)
        if isinstance(value, dict):
            stack.extend((v, (*where, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*where, i)) for i, v in enumerate(value))
    return sorted(out, key=repr)


MUTATIONS = ("wrong type", "out of range", "unknown key", "empty string", "null", "deep nesting", "delete")


def mutated_value(data: st.DataObject, kind: str, old: Any) -> Any:
    if kind == "wrong type":
        others: list[Any] = [True, 7, 2.5, "7", "yes", [1], {"a": 1}]
        return data.draw(st.sampled_from([v for v in others if type(v) is not type(old)]), label="value")
    if kind == "out of range":
        return data.draw(
            st.sampled_from([-1, -(2**63) - 1, 2**63, 2**64, 10**30, 1e300, -1e300]), label="value"
        )
    if kind == "empty string":
        return ""
    if kind == "null":
        return None
    if kind == "deep nesting":
        return nest(old, data.draw(st.sampled_from([10, 40, 70, 200]), label="depth"))
    raise AssertionError(kind)


def mutate(data: st.DataObject, doc: dict[str, Any]) -> tuple[dict[str, Any], str, tuple[Any, ...]]:
    """``doc`` (a copy) with one mutation; the path of what changed (for an unknown key: its own)."""
    doc = copy.deepcopy(doc)
    kind = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    paths = key_paths(doc)
    if kind == "unknown key" or not paths:
        holders = [()] + [p for p in paths if isinstance(_get(doc, p), dict)]
        where = data.draw(st.sampled_from(holders), label="holder")
        key = data.draw(st.sampled_from(["treshold", "x y", "Enabled", "parms", "a:b"]), label="key")
        _get(doc, where)[key] = data.draw(st.sampled_from([1, "x", None, {"a": 1}]), label="value")
        return doc, "unknown key", (*where, key)
    where = data.draw(st.sampled_from(paths), label="path")
    parent = _get(doc, where[:-1])
    if kind == "delete":
        del parent[where[-1]]
    else:
        parent[where[-1]] = mutated_value(data, kind, parent[where[-1]])
    return doc, kind, where


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def names_one_of(line: str, path: tuple[Any, ...]) -> bool:
    """The error line names a key on ``path`` (as error paths write keys, quoted or not)."""
    keys = [str(k) for k in path if isinstance(k, str)]
    if not keys:
        return True
    return any(k in line or repr(k) in line for k in keys)


# ---------------------------------------------------------------------------- policies


@budget(40)
@given(data=st.data())
def test_fuzz_generated_args_validate_or_name_the_field(data: st.DataObject) -> None:
    """Type-correct args generated from the schema: valid (and normalised to a fixed point) or
    refused naming a field below the plugin's args."""
    plugin = data.draw(st.sampled_from(PLUGINS), label="plugin")
    spec = REGISTRY.get(plugin)
    assert spec is not None and spec.args_model is not None
    args = {**BASE_ARGS.get(plugin, {}), **data.draw(of_model(spec.args_model), label="args")}
    code, _, line = validate(policy(plugin, args))
    if code == 2:
        assert line.startswith(ARGS_PATH) or line.startswith("profiles[0]"), line


@budget(80)
@given(data=st.data())
def test_fuzz_mutated_args_are_refused_naming_the_field(data: st.DataObject) -> None:
    """Generated args, then one mutation: accepted only as a valid policy, else refused in one
    line that names the mutated key (or one above it); an unknown key of the args is refused."""
    plugin = data.draw(st.sampled_from(PLUGINS), label="plugin")
    spec = REGISTRY.get(plugin)
    assert spec is not None and spec.args_model is not None
    args = {**BASE_ARGS.get(plugin, {}), **data.draw(of_model(spec.args_model), label="args")}
    mutated, kind, where = mutate(data, args)
    code, _, line = validate(policy(plugin, mutated))
    if code == 2:
        line = line.removeprefix(f"{WORK / 'policy.yaml'}: ")  # (the depth bound names the file too)
        assert line.startswith(ARGS_PATH), (kind, where, line)
        if valid(policy(plugin, args)):  # (else the error may be the generated args' own)
            assert names_one_of(line, where), (kind, where, line)
    else:
        assert not (kind == "unknown key" and len(where) == 1), f"unknown key accepted: {where}"


@budget(40)
@given(data=st.data())
def test_fuzz_eviction_policy_from_its_schema(data: st.DataObject) -> None:
    """The top-level ``evictionPolicy`` (desched's safety rules) generated from its model, then
    mutated: valid and normalised to a fixed point (durations print exactly), or refused naming
    a field of the block."""
    block = data.draw(of_model(EvictionPolicyWire), label="evictionPolicy")
    base = {**policy("PodLifeTime", {"maxPodLifeTimeSeconds": 3600}), "evictionPolicy": block}
    if data.draw(st.booleans(), label="mutate"):
        block, kind, where = mutate(data, block)
    else:
        kind, where = "none", ()
    code, _, line = validate({**base, "evictionPolicy": block})
    if code == 2:
        line = line.removeprefix(f"{WORK / 'policy.yaml'}: ")  # (the depth bound names the file too)
        assert line.startswith("evictionPolicy"), (kind, where, line)
        if valid(base):  # (else the error may be the generated block's own)
            assert names_one_of(line, where), (kind, where, line)
    else:
        assert not (kind == "unknown key" and len(where) == 1), f"unknown key accepted: {where}"


# ---------------------------------------------------------------------------- snapshots

SNAP_POLICY = WORK / "snapshot-policy.yaml"
SNAP_POLICY.write_text(
    json.dumps(
        {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "profiles": [
                {
                    "name": "fuzz",
                    "pluginConfig": [
                        {"name": "PodLifeTime", "args": {"maxPodLifeTimeSeconds": 3600}},
                        {
                            "name": "LowNodeUtilization",
                            "args": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}},
                        },
                    ],
                    "plugins": {
                        "deschedule": {"enabled": ["PodLifeTime", "RemovePodsViolatingNodeTaints"]},
                        "balance": {"enabled": ["RemoveDuplicates", "LowNodeUtilization"]},
                    },
                }
            ],
        }
    )
)
QUANTITIES = ["100m", "1", "2", "500Mi", "1Gi", 1, 0.5]
TIMES = ["2026-11-21T11:00:00Z", "2025-05-01T00:00:00Z", "2026-11-21T11:59:30+00:00"]


@st.composite
def nodes(draw: st.DrawFn, name: str) -> dict[str, Any]:
    return node_doc(
        name,
        cpu=draw(st.sampled_from(["2", "4", "8", "500m"])),
        memory=draw(st.sampled_from(["4Gi", "8Gi", "16Gi"])),
        ready=draw(st.sampled_from([True, True, False])),
        unschedulable=draw(st.sampled_from([None, False, True])),
        taints=draw(st.sampled_from([None, [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]])),
        labels=draw(st.sampled_from([None, {"zone": "a"}, {"zone": "b"}])),
    )


@st.composite
def pods(draw: st.DrawFn, name: str, node_names: list[str]) -> dict[str, Any]:
    return pod_doc(
        name,
        node=draw(st.sampled_from(node_names)),
        owner=draw(st.sampled_from([("ReplicaSet", "web"), ("ReplicaSet", "api"), None])),
        cpu=draw(st.sampled_from(QUANTITIES)),
        memory=draw(st.sampled_from([None, "128Mi", "1Gi"])),
        created=draw(st.sampled_from(TIMES)),
        labels=draw(st.sampled_from([None, {"app": "web"}])),
        priority=draw(st.sampled_from([None, 0, 1000, 2_000_000_000])),
        priority_class=draw(st.sampled_from([None, "system-node-critical"])),
        restarts=draw(st.sampled_from([None, 0, 50])),
        phase=draw(st.sampled_from(["Running", "Running", "Pending", "Failed"])),
        tolerations=draw(st.sampled_from([None, [{"key": "dedicated", "operator": "Exists"}]])),
    )


@st.composite
def snapshots(draw: st.DrawFn) -> dict[str, Any]:
    node_names = [f"node-{i}" for i in range(draw(st.integers(min_value=1, max_value=3)))]
    items: list[dict[str, Any]] = [draw(nodes(n)) for n in node_names]
    items += [draw(pods(f"pod-{i}", node_names)) for i in range(draw(st.integers(min_value=0, max_value=5)))]
    return list_doc(items)


def simulate(doc: Any, fmt: str) -> tuple[int, str, str, Path]:
    path = WORK / f"snapshot.{fmt}"
    path.write_text(json.dumps(doc) if fmt == "json" else yaml.safe_dump(doc))
    argv = ["simulate", str(path), "--policy", str(SNAP_POLICY), "--now", NOW, "-o", "json", "--no-placement"]
    code, out, err = run_cli(argv)
    return code, out, err, path


def evictions(out: str) -> list[tuple[str, str, str]]:
    return [(e["namespace"], e["name"], e["plugin"]) for e in json.loads(out)["evictions"]]


@budget(40)
@given(doc=snapshots(), data=st.data())
def test_fuzz_snapshot_items_read_alike_as_json_and_yaml(doc: dict[str, Any], data: st.DataObject) -> None:
    """Generated nodes and pods with one field mutated: the same outcome from JSON and YAML; a
    refusal is one line naming the object; accepted decisions name only the snapshot's pods."""
    index = data.draw(st.integers(min_value=0, max_value=len(doc["items"]) - 1), label="item")
    item, kind, where = mutate(data, doc["items"][index])
    doc["items"][index] = item
    code, out, err, path = simulate(doc, "json")
    code_yaml, out_yaml, err_yaml, path_yaml = simulate(doc, "yaml")
    if measure_depth(doc, 200) > MAX_SNAPSHOT_DEPTH - 8:
        # YAML's bound on nesting (128 levels) is below JSON's (about a thousand), as
        # docs/simulation.md says: past it only the YAML file is refused, for its depth
        assert code_yaml == 2 and "nested more than" in error_line(err_yaml), err_yaml
        if code == 2:
            error_line(err)
        return
    assert code_yaml == code, (kind, where, err, err_yaml)
    if code == 2:
        line = error_line(err)
        assert error_line(err_yaml).replace(str(path_yaml), str(path)) == line, (kind, where)
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        assert (
            f"items[{index}]" in line or (isinstance(name, str) and name in line) or names_one_of(line, where)
        ), (kind, where, line)
        return
    assert evictions(out_yaml) == evictions(out)
    pods = {
        (i["metadata"].get("namespace"), i["metadata"].get("name"))
        for i in doc["items"]
        if isinstance(i, dict) and isinstance(i.get("metadata"), dict)
    }
    assert all((ns, name) in pods for ns, name, _ in evictions(out)), out


# ---------------------------------------------------------------------------- the profiles


def test_the_long_profile_command_runs() -> None:
    """docs/testing.md's long campaign, as the docs write it, cut to two examples of one test."""
    command = "HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/unit/fuzz -q"
    assert command in (ROOT / "docs" / "testing.md").read_text()
    env = {**os.environ, "HYPOTHESIS_PROFILE": "long", "DESCHED_FUZZ_EXAMPLES": "2"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/unit/fuzz",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "generated_args",
            "-o",
            "addopts=",
            "--hypothesis-show-statistics",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout, proc.stdout[-2000:]
    assert "2 passing, 0 failing" in proc.stdout, proc.stdout[-3000:]


def test_the_profiles_are_what_the_docs_say() -> None:
    fast, long = settings.get_profile("fast"), settings.get_profile("long")
    assert fast.derandomize and not long.derandomize  # the long campaign draws fresh examples
    assert long.max_examples == LONG_FACTOR * fast.max_examples == 25 * 100
    assert budget(40).max_examples == (
        40 if PROFILE == "fast" and EXAMPLES is None else budget(40).max_examples
    )


# ---------------------------------------------------------------------------- found by the fuzzer


def test_deeply_nested_kind_json_names_the_field_yaml_its_depth(tmp_path: Path) -> None:
    """Found by the long profile (a test expectation, not a defect): a Node's ``kind`` nested 200
    lists deep is refused from JSON for its type, from YAML for its depth (YAML's bound is 128),
    naming where."""
    doc = list_doc(node_doc("node-0"))
    doc["items"][0]["kind"] = nest("Node", 200)
    code, _, err, path = simulate(doc, "json")
    assert code == 2 and error_line(err) == f"{path}: items[0]: kind: expected `str`, got `array`"
    code, _, err, path = simulate(doc, "yaml")
    assert code == 2 and error_line(err) == f"{path}: items[0].kind[...]: nested more than 128 levels deep"


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_too_deep_a_policy_value_names_its_field(fmt: str) -> None:
    """Found by the fuzzer: a value nested past the policy's bound (64) was refused naming only
    the file; the line names the field it is under."""
    doc = {
        **policy("PodLifeTime", {"maxPodLifeTimeSeconds": 3600}),
        "evictionPolicy": {"cooldown": nest(1, 70)},
    }
    path = WORK / f"deep.{fmt}"
    path.write_text(json.dumps(doc) if fmt == "json" else yaml.safe_dump(doc))
    code, _, err = run_cli(["validate", str(path)])
    assert code == 2
    assert error_line(err) == f"{path}: evictionPolicy.cooldown[...]: nested more than 64 levels deep"
    doc = policy("DefaultEvictor", {"evictDaemonSetPods": nest(False, 70)})
    path.write_text(json.dumps(doc) if fmt == "json" else yaml.safe_dump(doc))
    code, _, err = run_cli(["validate", str(path)])
    assert error_line(err) == (
        f"{path}: profiles[0].pluginConfig[0].args.evictDaemonSetPods[...]: nested more than 64 levels deep"
    )
