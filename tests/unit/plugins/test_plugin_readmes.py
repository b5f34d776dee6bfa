"""Every in-tree plugin's README.md (beside its code) says what the code does.

Each plugin folder ``src/desched/plugins/<folder>/`` holds a README.md (``FOLDERS`` maps a plugin
to the folder its class is defined in). What a README claims that can be checked is checked
here, against the registry, the plugins' pydantic args models, the policy loader and the CLI:

- the ``**Extension points:**`` line names exactly the points the registry finds in the class;
- the args table (under ``## Args``, or ``## <Plugin> args`` in a folder shared by two plugins)
  lists exactly the policy keys the args model accepts (its aliases), a row ``a.b`` documenting a
  key of a nested model; its Default column is ``required``, ``unset`` (None) or a backticked
  YAML value equal to the model's default (a nested model's default as it dumps, without unset
  fields); a plugin without args says so and shows no table;
- the first ``yaml`` block is a complete DeschedulerPolicy that enables the plugin(s) at their
  extension points: it loads without warnings through the real policy loader, and
  ``desched validate FILE`` (the installed entry point, as users run it) exits 0;
- every relative link resolves, and a plugin with upstream conformance fixtures links to them;
- no fenced block is untagged (tests/unit/cli/test_docs_commands.py runs the commands these
  READMEs show, as it does the docs'), and docs/policy.md's plugin table links each README.
"""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from tests.unit.cli.test_docs_commands import DOC_FILES

from desched.api.policy import load_policy_file
from desched.framework.registry import PluginSpec
from desched.plugins import IN_TREE_PLUGINS, default_registry

ROOT = Path(__file__).resolve().parents[3]
PLUGINS_DIR = ROOT / "src" / "desched" / "plugins"
FIXTURES = ROOT / "tests" / "conformance" / "fixtures"

#: Plugin name -> the folder under src/desched/plugins/ its class is defined in (issue 13's layout).
FOLDERS: dict[str, str] = {
    cls.name: Path(inspect.getfile(cls)).resolve().parent.relative_to(PLUGINS_DIR).parts[0]
    for cls in IN_TREE_PLUGINS
}

REGISTRY = default_registry(entry_points=False)
IN_TREE = [REGISTRY.get(n) for n in REGISTRY.names()]
SPECS: list[PluginSpec] = [s for s in IN_TREE if s is not None and s.origin == "in-tree"]
FOLDER_NAMES = sorted(set(FOLDERS.values()))


def readme(folder: str) -> Path:
    return PLUGINS_DIR / folder / "README.md"


def shares_folder(name: str) -> bool:
    return sum(1 for f in FOLDERS.values() if f == FOLDERS[name]) > 1


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^```(\S*)\n(.*?)^```$", text, re.M | re.S)]


def section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next heading of level 2 or higher."""
    m = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^#{{1,2}} |\Z)", text, re.M | re.S)
    assert m is not None, f"no '## {heading}' section"
    return m.group(1)


def args_section(name: str) -> str:
    text = readme(FOLDERS[name]).read_text()
    return section(text, f"{name} args" if shares_folder(name) else "Args")


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the first Markdown table in ``text``, as cells."""
    lines = [ln.strip() for ln in text.split("\n") if ln.strip().startswith("|")]
    assert len(lines) >= 2 and re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[1]), "no args table"
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]


def nested_model(info: FieldInfo) -> type[BaseModel] | None:
    """The pydantic model a field holds (``Model`` or ``Model | None``), if any."""
    ann = info.annotation
    candidates = typing.get_args(ann) if isinstance(ann, types.UnionType) else (ann,)
    for c in candidates:
        if isinstance(c, type) and issubclass(c, BaseModel):
            return c
    return None


def by_alias(model: type[BaseModel]) -> dict[str, FieldInfo]:
    return {(info.alias or name): info for name, info in model.model_fields.items()}


def field_of(model: type[BaseModel], dotted: str) -> FieldInfo:
    *parents, leaf = dotted.split(".")
    for key in parents:
        info = by_alias(model).get(key)
        assert info is not None, f"{dotted}: {model.__name__} has no key {key!r}"
        inner = nested_model(info)
        assert inner is not None, f"{dotted}: {key!r} is not an object"
        model = inner
    info = by_alias(model).get(leaf)
    assert info is not None, f"{dotted}: {model.__name__} has no key {leaf!r}"
    return info


def shown_default(info: FieldInfo) -> str:
    """How the README's Default column must show this field's default (modulo YAML spelling)."""
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    return "yaml"


def jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


def test_every_in_tree_plugin_has_a_folder() -> None:
    # The mechanism sees every plugin (a registry that lists nothing proves nothing).
    assert SPECS and len(SPECS) == len(IN_TREE_PLUGINS)
    assert {s.name for s in SPECS} == set(FOLDERS), "FOLDERS is out of date with the registry"


@pytest.mark.parametrize("folder", FOLDER_NAMES)
def test_readme_exists(folder: str) -> None:
    assert readme(folder).is_file(), f"{readme(folder).relative_to(ROOT)} is missing"


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_extension_points_are_the_registrys(spec: PluginSpec) -> None:
    text = readme(FOLDERS[spec.name]).read_text()
    lines = re.findall(r"^\*\*Extension points?:\*\*(.*)$", text, re.M)
    assert lines, "no '**Extension points:**' line"
    shown = {w for ln in lines for w in re.findall(r"`(\w+)`", ln)}
    assert shown == {p.value for p in spec.extension_points}


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_args_table_is_the_args_model(spec: PluginSpec) -> None:
    body = args_section(spec.name)
    if spec.args_model is None:
        assert "|" not in body and "no args" in body, "a plugin without args must say it takes no args"
        return
    rows = table_rows(body)
    keys = [re.fullmatch(r"`([\w.]+)`", r[0]) for r in rows]
    assert all(keys), f"a key cell is not one `key`: {[r[0] for r in rows]}"
    shown = [k.group(1) for k in keys if k is not None]
    assert len(shown) == len(set(shown)), f"a key is listed twice: {shown}"
    top = {k for k in shown if "." not in k}
    assert top == set(by_alias(spec.args_model)), "the table's keys are not the args model's policy keys"
    for key, row in zip(shown, rows, strict=True):
        assert len(row) == 4, f"{key}: expected | key | type | default | meaning |, got {row}"
        info = field_of(spec.args_model, key)
        want = shown_default(info)
        cell = row[2]
        if want != "yaml":
            assert cell == want, f"{key}: default shown {cell!r}, the model's is {want}"
            continue
        m = re.fullmatch(r"`([^`]*)`", cell)
        assert m is not None, f"{key}: default {cell!r} is not one `value`"
        default = jsonable(info.get_default(call_default_factory=True))
        assert yaml.safe_load(m.group(1)) == default, f"{key}: README shows {cell}, the model has {default!r}"


def example_file(folder: str, tmp_path: Path) -> Path:
    yamls = [body for lang, body in blocks(readme(folder).read_text()) if lang == "yaml"]
    assert yamls, "no ```yaml example"
    path = tmp_path / "policy.yaml"
    path.write_text(yamls[0])
    return path


@pytest.mark.parametrize("folder", FOLDER_NAMES)
def test_example_policy_loads_and_enables_the_plugin(folder: str, tmp_path: Path) -> None:
    policy = load_policy_file(example_file(folder, tmp_path), REGISTRY)
    assert not policy.warnings, policy.warnings
    for spec in SPECS:
        if FOLDERS[spec.name] != folder:
            continue
        assert any(
            all(spec.name in prof.enabled(p) for p in spec.extension_points) for prof in policy.profiles
        ), f"the example does not enable {spec.name} at {sorted(spec.extension_points)}"


@pytest.mark.parametrize("folder", FOLDER_NAMES)
def test_desched_validate_accepts_the_example(folder: str, tmp_path: Path) -> None:
    path = example_file(folder, tmp_path)
    entry = Path(sys.executable).parent / "desched"
    proc = subprocess.run(
        [str(entry), "validate", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout
    assert "apiVersion: descheduler/v1alpha2" in proc.stdout


@pytest.mark.parametrize("folder", FOLDER_NAMES)
def test_relative_links_resolve(folder: str) -> None:
    path = readme(folder)
    text = path.read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links, "no links"
    for link in links:
        if re.match(r"[a-z]+://|#", link):
            continue
        target = (path.parent / link.split("#")[0]).resolve()
        assert target.exists(), f"{link} does not resolve"


@pytest.mark.parametrize("spec", SPECS, ids=[s.name for s in SPECS])
def test_links_its_conformance_fixtures(spec: PluginSpec) -> None:
    if not (FIXTURES / spec.name).is_dir():
        return  # no upstream test feeds this plugin (desched-only, or never run upstream)
    path = readme(FOLDERS[spec.name])
    targets = {
        (path.parent / ln.split("#")[0]).resolve() for ln in re.findall(r"\]\(([^)\s]+)\)", path.read_text())
    }
    assert (FIXTURES / spec.name).resolve() in targets, f"no link to tests/conformance/fixtures/{spec.name}"


@pytest.mark.parametrize("folder", FOLDER_NAMES)
def test_fences_are_tagged_and_the_commands_are_run(folder: str) -> None:
    langs = [lang for lang, _ in blocks(readme(folder).read_text())]
    assert "" not in langs, "an untagged fence"
    # the commands its shell blocks show are run (and their output compared) there
    assert readme(folder) in DOC_FILES


def test_policy_docs_link_every_readme() -> None:
    doc = ROOT / "docs" / "policy.md"
    text = doc.read_text()
    for name, folder in FOLDERS.items():
        link = f"[{name}](../src/desched/plugins/{folder}/README.md)"
        assert link in text, f"docs/policy.md does not link {name}'s README: {link}"
        assert (doc.parent / link.split("(")[1].rstrip(")")).resolve() == readme(folder).resolve()
