"""The plugin registry: the in-tree plugins the caller passes, plus out-of-tree ones found through
entry points.

A plugin is a class with a ``name`` class attribute, an optional ``Args`` class attribute (a
pydantic model, see :class:`desched.api.types.ArgsModel`) and a constructor
``Plugin(args, handle)``. Which extension points it serves follows from the extension-point
protocols its class satisfies (:data:`desched.framework.types.EXTENSION_PROTOCOLS`).

Out-of-tree plugins are Python packages that declare, in their packaging metadata::

    [project.entry-points."desched.plugins"]
    MyPlugin = "my_package.module:MyPlugin"

and are then configured in a policy exactly like in-tree plugins, by name.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from desched.framework.types import (
    EXTENSION_PROTOCOLS,
    ExtensionPoint,
    HasPreSortStep,
    Plugin,
    PluginWithArgs,
)

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "desched.plugins"


class RegistryError(Exception):
    pass


@dataclass(frozen=True)
class PluginSpec:
    name: str
    factory: Callable[[Any, Any], object]
    args_model: type[BaseModel] | None
    extension_points: frozenset[ExtensionPoint]
    origin: str
    #: the class declares a pre-sort step (:class:`~desched.framework.types.HasPreSortStep`)
    presorts: bool = False

    def default_args(self) -> BaseModel | None:
        return self.args_model() if self.args_model is not None else None


def extension_points_of(cls: type) -> frozenset[ExtensionPoint]:
    """The extension points a plugin class implements: the protocols of :data:`EXTENSION_PROTOCOLS`
    its class satisfies."""
    return frozenset(p for p, proto in EXTENSION_PROTOCOLS.items() if isinstance(cls, proto))


class Registry:
    def __init__(self) -> None:
        self._specs: dict[str, PluginSpec] = {}
        self._broken: dict[str, str] = {}

    def register(self, cls: type, *, origin: str = "in-tree") -> PluginSpec:
        name = cls.name if isinstance(cls, Plugin) else None
        if not isinstance(name, str) or not name:
            raise RegistryError(f"plugin class {cls.__qualname__} has no 'name' class attribute")
        if name in self._specs:
            raise RegistryError(
                f"plugin {name!r} from {origin} is already registered from {self._specs[name].origin}"
            )
        args_model: object = cls.Args if isinstance(cls, PluginWithArgs) else None
        if args_model is not None and not (
            isinstance(args_model, type) and issubclass(args_model, BaseModel)
        ):
            raise RegistryError(f"plugin {name!r}: Args must be a pydantic model class")
        points = extension_points_of(cls)
        if not points:
            raise RegistryError(f"plugin {name!r} implements no extension point")
        presorts = isinstance(cls, HasPreSortStep) and cls.presorts is True
        spec = PluginSpec(name, cls, args_model, points, origin, presorts)
        self._specs[name] = spec
        return spec

    def register_all(self, classes: Iterable[type], *, origin: str = "in-tree") -> None:
        for cls in classes:
            self.register(cls, origin=origin)

    def load_entry_points(self) -> None:
        """Register every plugin exposed under the ``desched.plugins`` entry-point group.

        A package that fails to import is not fatal: it is warned about (on every command that
        builds the registry) and remembered, so that a policy using it is refused naming why.
        """
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
                classes = obj if isinstance(obj, (list, tuple)) else [obj]
                for cls in classes:
                    self.register(cls, origin=f"entry point {ep.value}")
            except Exception as e:  # a broken third-party package must not break desched
                self._broken[ep.name] = f"entry point {ep.value} failed to load: {e}"
                log.warning("out-of-tree plugin %s not loaded: %s", ep.name, e)

    def get(self, name: str) -> PluginSpec | None:
        return self._specs.get(name)

    def why_missing(self, name: str) -> str:
        if name in self._broken:
            return self._broken[name]
        return f"unknown plugin {name!r} (known: {', '.join(sorted(self._specs))})"

    def names(self) -> list[str]:
        return sorted(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs


def build_registry(in_tree: Iterable[type], *, entry_points: bool = True) -> Registry:
    """The given in-tree plugins, and (unless disabled) every installed out-of-tree plugin.

    The framework names no plugin: the caller passes the in-tree list
    (:func:`desched.plugins.default_registry` passes desched's own).
    """
    reg = Registry()
    reg.register_all(in_tree)
    if entry_points:
        reg.load_entry_points()
    return reg
