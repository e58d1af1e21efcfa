"""Registries handed to the ``register_*`` hooks; each is stamped with one plugin's name.

The kernel's own registries (tools, channels) live in ``homeagent_core.agent``; these are the
ones the application owns: settings, embedding providers, web routes and adapter folders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_sdk.errors import PluginValidationError
from homeagent_sdk.types import ConfigDef

if TYPE_CHECKING:
    from homeagent_core.config import ConfigStore
    from homeagent_core.plugins.manager import PluginHost
    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = [
    "AdapterFolders",
    "EmbeddingFactories",
    "PluginRoutes",
    "PluginSettings",
]


@dataclass
class PluginSettings:
    """``register_settings`` registry: declares ``plugin.<name>.*`` keys in the config store."""

    plugin: str
    config: ConfigStore
    host: PluginHost | None = None
    defined: list[ConfigDef] = field(default_factory=list)

    def add(self, definition: ConfigDef) -> None:
        if not isinstance(definition, ConfigDef):
            raise PluginValidationError(
                f"plugin {self.plugin!r}: register_settings expects ConfigDef objects, "
                f"got {type(definition).__name__}",
                plugin_name=self.plugin,
            )
        full = self.config.define_plugin(self.plugin, definition)
        self.defined.append(full)
        if self.host is not None:
            self.host.note_contribution(self.plugin, "settings", full.key)


@dataclass
class EmbeddingFactories:
    """``register_embedding_providers`` registry: named factories of embedding providers."""

    plugin: str
    factories: dict[str, Callable[[dict[str, Any]], EmbeddingProvider]] = field(default_factory=dict)
    host: PluginHost | None = None

    def add(self, name: str, factory: Callable[[dict[str, Any]], EmbeddingProvider]) -> None:
        if not callable(factory):
            raise PluginValidationError(
                f"plugin {self.plugin!r}: embedding provider {name!r} needs a callable factory",
                plugin_name=self.plugin,
            )
        self.factories[name] = factory
        if self.host is not None:
            self.host.note_contribution(self.plugin, "embedding_providers", name)


@dataclass
class PluginRoutes:
    """``register_routes`` registry: HTTP endpoints mounted under ``/plugins/<name>/``."""

    plugin: str
    routes: list[tuple[str, Callable[..., Any], list[str]]] = field(default_factory=list)

    def add(self, path: str, endpoint: Callable[..., Any], *, methods: list[str] | None = None) -> None:
        if not path.startswith("/"):
            raise PluginValidationError(
                f"plugin {self.plugin!r}: route path {path!r} must start with '/'", plugin_name=self.plugin
            )
        self.routes.append((path, endpoint, methods or ["GET"]))


@dataclass
class AdapterFolders:
    """``register_adapters`` registry: extra folders of Lua adapter scripts."""

    plugin: str
    folders: list[Path] = field(default_factory=list)

    def add(self, folder: Path | str) -> None:
        path = Path(folder)
        if not path.is_dir():
            raise PluginValidationError(
                f"plugin {self.plugin!r}: adapter folder {path} does not exist", plugin_name=self.plugin
            )
        self.folders.append(path)
