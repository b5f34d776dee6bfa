"""The rules of docs/design.md's "Layers and layout" that import-linter cannot see.

The layer contracts themselves are `.importlinter`, checked by `lint-imports` in `.ci/run` (and
here, so that a broken contract fails the test command too). This file checks what lies beside
them: module sizes, the Handle as a plugin's only door (no probing of plugin instances), the
process layers never naming a plugin, and each in-tree plugin's folder holding its whole story.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from desched.framework.registry import extension_points_of
from desched.framework.types import EXTENSION_PROTOCOLS, HOOK_PROTOCOLS
from desched.plugins import IN_TREE_PLUGINS

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "desched"
PLUGINS = SRC / "plugins"
PLUGIN_NAMES = sorted({cls.name for cls in IN_TREE_PLUGINS})
PLUGIN_FOLDERS = sorted({Path(inspect.getfile(cls)).resolve().parent.name for cls in IN_TREE_PLUGINS})


def _modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if "__pycache__" not in p.parts)


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_is_too_long() -> None:
    """No module over 1,500 lines; none outside scheduling/placement/ over 1,000 (issue 13)."""
    placement = SRC / "scheduling" / "placement"
    too_long = [
        f"{p.relative_to(SRC)}: {_lines(p)} lines"
        for p in _modules()
        if _lines(p) > (1500 if placement in p.parents else 1000)
    ]
    assert not too_long


def test_nothing_probes_a_plugin_instance() -> None:
    """A plugin's hooks are declared protocols, found at registration: no ``getattr(inst, ...)``."""
    probes = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in {"getattr", "hasattr"}
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in {"inst", "instance", "plugin"}
            ):
                probes.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not probes


def _names_a_plugin(tree: ast.AST) -> list[tuple[int, str]]:
    """Identifiers, imports and bare-word strings that name an in-tree plugin. Prose (a docstring,
    a metric's help text, a log message: strings with a space) may mention one; code that selects
    behaviour by a plugin's name, or imports a plugin's module, may not."""
    found: list[tuple[int, str]] = []
    modules = {f"desched.plugins.{folder}" for folder in PLUGIN_FOLDERS}
    for node in ast.walk(tree):
        words: list[str] = []
        if isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and " " not in node.value:
            words = [node.value]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if any(node.module == m or node.module.startswith(m + ".") for m in modules):
                found.append((node.lineno, node.module))
            words = [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            found.extend(
                (node.lineno, a.name)
                for a in node.names
                if any(a.name == m or a.name.startswith(m + ".") for m in modules)
            )
        found.extend((getattr(node, "lineno", 0), w) for w in words if w in PLUGIN_NAMES)
    return found


def test_the_mechanism_sees_plugin_names() -> None:
    # the check below proves nothing unless it recognises a plugin named in code
    tree = ast.parse(
        'from desched.plugins.podlifetime import PodLifeTime\nif name == "RemoveAnomalyPods": pass'
    )
    assert [w for _, w in _names_a_plugin(tree)] == [
        "desched.plugins.podlifetime",
        "PodLifeTime",
        "RemoveAnomalyPods",
    ]


@pytest.mark.parametrize("layer", ["app", "runtime", "report"])
def test_process_layers_name_no_plugin(layer: str) -> None:
    """app/, runtime/ and report/ see plugins only through the framework (declared live inputs,
    the cycle result's reports); the in-tree list itself (``desched.plugins.default_registry``) is
    what app hands the framework."""
    found = [
        f"{path.relative_to(SRC)}:{line}: {word}"
        for path in sorted((SRC / layer).rglob("*.py"))
        for line, word in _names_a_plugin(ast.parse(path.read_text()))
    ]
    assert not found


@pytest.mark.parametrize("folder", PLUGIN_FOLDERS)
def test_a_plugin_folder_holds_its_story(folder: str) -> None:
    """args.py, plugin.py and README.md beside each other; its tests under tests/unit/plugins/<folder>/."""
    here = PLUGINS / folder
    assert {"__init__.py", "args.py", "plugin.py", "README.md"} <= {p.name for p in here.iterdir()}
    tests = ROOT / "tests" / "unit" / "plugins" / folder
    assert sorted(tests.glob("test_*.py")), f"no tests under {tests.relative_to(ROOT)}"


def test_every_plugin_class_lives_in_its_own_folder() -> None:
    for cls in IN_TREE_PLUGINS:
        path = Path(inspect.getfile(cls)).resolve()
        assert path.parent.parent == PLUGINS, f"{cls.name} is defined in {path.relative_to(SRC)}"


def _desched_imports(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """(line, module) of every ``desched`` module the code imports (relative ones resolved
    against ``package``), at any depth (``if TYPE_CHECKING:`` blocks and functions too)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            if module == "desched" or module.startswith("desched."):
                found.append((node.lineno, module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names if a.name.startswith("desched"))
    return found


def _outside_the_sdk(module: str, folder: str) -> bool:
    """An in-tree plugin imports the SDK (``desched.framework``, the package, never the modules
    behind it), the Kubernetes helpers (``desched.k8s``: pure functions, below the framework),
    the plugins' shared code and its own folder; nothing else of desched."""
    allowed = ("desched.k8s", "desched.plugins._shared", f"desched.plugins.{folder}")
    return module != "desched.framework" and not any(
        module == a or module.startswith(a + ".") for a in allowed
    )


def test_the_sdk_check_sees_an_import_behind_the_sdk() -> None:
    # the check below proves nothing unless it refuses the imports it is meant to refuse
    tree = ast.parse(
        "from desched.framework import Handle\nfrom desched.k8s import pods\n"
        "from desched.framework.types import Status\nfrom desched.cluster.view import ClusterView\n"
        "from desched.plugins.podlifetime import PodLifeTime\nfrom . import args\n"
        "if TYPE_CHECKING:\n    import desched.api.types\n"
    )
    imports = _desched_imports(tree, "desched.plugins.sorters")
    assert [m for _, m in imports if _outside_the_sdk(m, "sorters")] == [
        "desched.framework.types",
        "desched.cluster.view",
        "desched.plugins.podlifetime",
        "desched.api.types",
    ]


@pytest.mark.parametrize("folder", [*PLUGIN_FOLDERS, "_shared"])
def test_in_tree_plugins_import_only_the_sdk(folder: str) -> None:
    """Every in-tree plugin is built on the SDK an out-of-tree one gets (``from desched.framework
    import ...``), so the in-tree plugins prove it, not the example alone."""
    here = PLUGINS / folder
    paths = sorted(here.rglob("*.py")) if here.is_dir() else [PLUGINS / f"{folder}.py"]
    found = []
    for path in paths:
        package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
        if path.name != "__init__.py":
            package = package.rpartition(".")[0]
        found.extend(
            f"{path.relative_to(SRC)}:{line}: {module}"
            for line, module in _desched_imports(ast.parse(path.read_text()), package)
            if _outside_the_sdk(module, folder)
        )
    assert not found


def _static_checks(tree: ast.Module, cls: str) -> set[str]:
    """The protocols ``cls`` is checked against in the module's ``if TYPE_CHECKING:`` blocks:
    ``_x: type[Protocol] = cls`` (mypy --strict refuses the assignment if it does not conform)."""
    found: set[str] = set()
    for block in tree.body:
        if not (isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"):
            continue
        for node in block.body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.value, ast.Name)
                and node.value.id == cls
                and isinstance(node.annotation, ast.Subscript)
                and ast.unparse(node.annotation.value) == "type"
            ):
                found.add(ast.unparse(node.annotation.slice))
    return found


def test_the_static_check_is_seen() -> None:
    tree = ast.parse(
        "if TYPE_CHECKING:\n    _a: type[DeschedulePlugin] = X\n    _b: type[JudgesMoves] = Y\n"
        "_c: type[BalancePlugin] = X\n"  # outside the block: it would run, and it is not the form
    )
    assert _static_checks(tree, "X") == {"DeschedulePlugin"}


@pytest.mark.parametrize("cls", IN_TREE_PLUGINS, ids=lambda cls: cls.name)
def test_each_plugin_class_is_checked_against_its_protocols_statically(cls: type) -> None:
    """Registration finds a plugin's extension points and hooks by ``isinstance`` (names only);
    each class is also assigned to the ``type[...]`` of each, for mypy to check the signatures
    (upstream's ``var _ framework.DeschedulePlugin = &PodLifeTime{}``)."""
    served = {EXTENSION_PROTOCOLS[p].__name__ for p in extension_points_of(cls)}
    served |= {hook.__name__ for hook in HOOK_PROTOCOLS if isinstance(cls, hook)}
    assert served
    assert _static_checks(ast.parse(Path(inspect.getfile(cls)).read_text()), cls.__name__) == served


def test_the_import_contracts_hold() -> None:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


#: Class names defined twice in src/desched before issue 29 and not yet renamed (each pair lives in
#: different layers: a policy model and its runtime twin, a plugin's private helper). No name may
#: join this list: a new class takes a name of its own.
_KNOWN_TWICE = {"EvictionLimits", "Plan", "SpreadConstraint"}


def _classes_by_name() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in _modules():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(str(path.relative_to(SRC)))
    return found


def test_a_class_name_has_one_meaning() -> None:
    """One public class per name in the tree (issue 29: the extender's cache was a second
    ``ClusterState`` beside the placement model's)."""
    found = _classes_by_name()
    assert found["ClusterState"] == ["scheduling/placement/state.py"]
    twice = {name: where for name, where in found.items() if len(where) > 1 and name not in _KNOWN_TWICE}
    assert not twice


#: Backends the framework needs before any backend is given (it cannot import desched.backends,
#: a layer above it): its null defaults, which refuse or skip every request.
_FRAMEWORK_DEFAULTS = {"framework/nodeactions.py:NoNodeActions"}
#: The placement driver's recorder: it removes each evicted pod from the simulation's snapshot and
#: keeps it for placement. desched.simulation and desched.backends are independent siblings
#: (.importlinter), so the driver cannot take it from backends; app/simulate.py hands the driver
#: SimulatedEvictionApi, which answers as the API and then tells this recorder.
_SIMULATION_OWN = {"simulation/driver.py:EvictionRecorder"}


def _backend_classes(root: Path) -> list[str]:
    """Public classes that carry out evictions (``evict(self, pod, request)``) or node actions
    (``downgrade(self, node, request)``), as ``path:Class`` relative to ``root``. Private classes
    are the framework's and tracing's wrappers around the backend a caller gives."""
    found = []
    for path in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            if any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases):
                continue  # the seam itself (framework/evictor.py, framework/nodeactions.py)
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in {"evict", "downgrade"}:
                    params = [a.arg for a in item.args.args]
                    if params[:1] == ["self"] and params[2:] == ["request"]:
                        found.append(f"{path.relative_to(root)}:{node.name}")
                        break
    return found


def test_every_backend_lives_in_backends() -> None:
    """Every eviction and node-action backend, the simulated ones and the simple ones tests use,
    lives in desched.backends (issue 29), beside its live twin."""
    outside = [
        c
        for c in _backend_classes(SRC)
        if not c.startswith("backends/") and c not in _FRAMEWORK_DEFAULTS | _SIMULATION_OWN
    ]
    assert not outside
    shared_doubles = _backend_classes(ROOT / "tests" / "conformance")
    assert not shared_doubles, "the conformance harness uses desched.backends' RecordingBackend"


def test_backends_come_in_pairs() -> None:
    """Each seam has its live (``api_*``) and its simulated (``simulated_*``) implementation."""
    names = {p.stem for p in (SRC / "backends").glob("*.py")}
    live = {n.removeprefix("api_") for n in names if n.startswith("api_")}
    simulated = {n.removeprefix("simulated_") for n in names if n.startswith("simulated_")}
    assert live == simulated == {"eviction", "nodeactions"}


#: What only app/ builds (issue 29): the plugin registry, a framework, the serving TLS context,
#: the tracer, the cron schedule, the event loop of a command. (cli/flags.py parses a cron
#: expression and the curves to check them: checking a flag is the CLI's.)
_BUILT_BY_APP = {
    "default_registry",
    "Framework",
    "server_context",
    "setup",
    "parse_schedule",
    "run_until_complete",
}


def test_the_cli_builds_nothing_app_builds() -> None:
    called = set()
    for path in sorted((SRC / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = (
                    func.id
                    if isinstance(func, ast.Name)
                    else func.attr
                    if isinstance(func, ast.Attribute)
                    else ""
                )
                if name in _BUILT_BY_APP - ({"parse_schedule"} if path.name == "flags.py" else set()):
                    called.add(f"cli/{path.name}:{node.lineno} {name}")
    assert not called


def test_the_registry_is_built_by_app_entry_points_only() -> None:
    """``default_registry()`` is called by app's entry points only (``run`` built it three times
    before issue 29, and a throwaway Framework): ``run``, ``simulate``, ``validate``, and the live
    loop's fallback when a test builds one without a registry."""
    calls = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "default_registry"
                ):
                    calls.append(f"{path.relative_to(SRC)}:{fn.name}")
    assert sorted(calls) == [
        "app/run.py:__init__",
        "app/run.py:_run",
        "app/simulate.py:run_simulate",
        "app/validate.py:normalised_policy",
    ], calls


def test_the_unit_tests_mirror_the_packages() -> None:
    """tests/unit/ holds one folder of tests per package of desched (docs/testing.md)."""
    packages = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file())
    missing = [name for name in packages if not sorted((ROOT / "tests" / "unit" / name).glob("test_*.py"))]
    assert packages and not missing, f"no tests/unit/<package>/test_*.py for {missing}"
