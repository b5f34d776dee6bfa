"""The in-tree plugin list: one folder per plugin, and the registry built from it by the caller."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

import desched.plugins
from desched.plugins import IN_TREE_PLUGINS, default_registry

PLUGINS_DIR = Path(desched.plugins.__file__).parent
ROOT = PLUGINS_DIR.parents[2]


def test_every_plugin_folder_is_in_the_in_tree_list_and_exports_its_plugin_and_args() -> None:
    folders = sorted(p.name for p in PLUGINS_DIR.iterdir() if (p / "__init__.py").is_file())
    by_folder: dict[str, list[type]] = {}
    for cls in IN_TREE_PLUGINS:
        # desched.plugins.<folder>.plugin
        _, _, folder, module = cls.__module__.split(".")
        assert module == "plugin", cls
        by_folder.setdefault(folder, []).append(cls)
    assert sorted(by_folder) == folders
    for folder, classes in by_folder.items():
        package = getattr(desched.plugins, folder)
        for cls in classes:
            assert getattr(package, cls.__name__) is cls
            args = getattr(cls, "Args", None)
            if args is not None:
                assert args.__module__ == f"desched.plugins.{folder}.args"
                assert getattr(package, args.__name__) is args


def test_default_registry_holds_exactly_the_in_tree_plugins() -> None:
    registry = default_registry(entry_points=False)
    names = [cls.__name__ for cls in IN_TREE_PLUGINS]
    assert registry.names() == sorted(names)
    assert len(set(names)) == len(names) and names, names
    for cls in IN_TREE_PLUGINS:
        spec = registry.get(cls.__name__)
        assert spec is not None and spec.factory is cls and spec.origin == "in-tree"


def test_the_independence_contract_lists_every_plugin_folder() -> None:
    """.importlinter's ``plugins-independent`` contract names exactly the plugin folders (those on
    disk, which the first test ties to the in-tree list): a new plugin cannot sit outside it."""
    config = configparser.ConfigParser()
    assert config.read(ROOT / ".importlinter"), "no .importlinter at the repository root"
    contract = config["importlinter:contract:plugins-independent"]
    assert contract["type"] == "independence"
    listed = contract["modules"].split()
    folders = sorted(p.name for p in PLUGINS_DIR.iterdir() if (p / "__init__.py").is_file())
    in_tree = sorted({cls.__module__.split(".")[2] for cls in IN_TREE_PLUGINS})
    assert folders == in_tree
    assert listed == [f"desched.plugins.{folder}" for folder in folders], (
        "add the plugin's folder to [importlinter:contract:plugins-independent] in .importlinter, "
        "in alphabetical order"
    )


def _loaded_after(module: str, then: str = "") -> list[str]:
    code = (
        f"import sys, {module}\n{then}\n"
        "print('\\n'.join(sorted(m for m in sys.modules "
        "if m.startswith(('desched.framework', 'desched.plugins')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return out.stdout.split()


def test_policy_loading_imports_neither_the_framework_nor_a_plugin() -> None:
    assert _loaded_after("desched.api.policy") == []


def test_the_framework_registry_imports_no_plugin() -> None:
    loaded = _loaded_after(
        "desched.framework.registry", "desched.framework.registry.build_registry((), entry_points=False)"
    )
    assert "desched.framework.registry" in loaded
    assert [m for m in loaded if m.startswith("desched.plugins")] == []
