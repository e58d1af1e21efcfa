"""Built-in ``pluginmgr``: lets the model install, list, inspect, reload and remove ``.hmap`` plugins.

Every tool answers with the installer's JSON (``{"status": "installed", ...}`` or
``{"error": ..., "details": ...}``), so a refused package reaches the model with the reason.
A package comes from a local path or an http(s) URL. Installing over a running out-of-process
plugin stops it first and starts the new version (``"action": "reloaded"``); a fresh install
is picked up by ``homeagent plugins reload`` or a restart (``"action": "reload_required"``).
Removing stops the plugin and deletes its directory and settings.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from homeagent_core.plugins.packages import (
    PackageError,
    download,
    install_package,
    installed_plugins,
    plugin_details,
    remove_plugin,
)
from homeagent_sdk import ToolError, hookimpl

PLUGIN_NAME = "pluginmgr"

__all__ = ["PLUGIN_NAME", "PluginMgr", "make_plugin"]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class PluginMgr:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._services: Any = None

    @hookimpl
    def startup(self, sdk: Any) -> None:
        services = getattr(sdk, "services", None)
        if services is None:
            raise ToolError("pluginmgr needs the privileged services of a built-in plugin")
        self._services = services

    @property
    def data_dir(self) -> Path:
        if self._services is None:
            raise ToolError("pluginmgr has not started yet")
        return Path(self._services.data_dir)

    @property
    def _supervisor(self) -> Any:
        return getattr(self._services, "supervisor", None)

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        registry.add(self.plugin_install, serial=True)
        registry.add(self.plugin_list, parallel_safe=True)
        registry.add(self.plugin_info, parallel_safe=True)
        registry.add(self.plugin_remove, serial=True)
        registry.add(self.plugin_reload, serial=True)

    async def plugin_install(self, source: str, overwrite: bool = False) -> str:
        """Install a .hmap plugin package.

        Args:
            source: a local file path or an http(s) URL of the .hmap.
            overwrite: replace an installed plugin of the same name (upgrade/downgrade; settings are kept).
        """
        fetched: Path | None = None
        try:
            if source.startswith(("http://", "https://")):
                fetched = await download(source, Path(tempfile.gettempdir()))
                path = fetched
            else:
                path = Path(source).expanduser()
            supervisor = self._supervisor
            running = supervisor.get(_name_of(path)) if supervisor is not None else None
            if running is not None and overwrite:
                await running.stop()
            result = install_package(self.data_dir, path, overwrite=overwrite)
            if running is not None and overwrite:
                await supervisor.reload(result["name"])
                result["action"] = "reloaded"
            return _json(result)
        except PackageError as exc:
            return _json(exc.to_dict())
        finally:
            if fetched is not None:
                fetched.unlink(missing_ok=True)

    def plugin_list(self) -> str:
        """List installed plugin packages (name, version, description, author, entry, deprecated)."""
        rows = installed_plugins(self.data_dir)
        supervisor = self._supervisor
        if supervisor is not None:
            live = {r["name"]: r for r in supervisor.status()}
            for row in rows:
                info = live.get(row["name"])
                if info is not None:
                    row.update(status=info["status"], pid=info["pid"], crash_count=info["crash_count"])
        return _json(rows)

    def plugin_info(self, name: str) -> str:
        """Everything known about one installed plugin, including its files.

        Args:
            name: the plugin's name.
        """
        try:
            return _json(plugin_details(self.data_dir, name))
        except PackageError as exc:
            return _json(exc.to_dict())

    async def plugin_remove(self, name: str) -> str:
        """Uninstall a plugin: stop it, delete its directory and its settings.

        Args:
            name: the plugin's name.
        """
        supervisor = self._supervisor
        running = supervisor.get(name) if supervisor is not None else None
        if running is not None:
            await running.stop()
            supervisor.detach(name)
        try:
            return _json(remove_plugin(self.data_dir, name, config=getattr(self._services, "config", None)))
        except PackageError as exc:
            return _json(exc.to_dict())

    async def plugin_reload(self, name: str = "") -> str:
        """Reload one out-of-process plugin by name, or (empty name) every one whose entry file changed.

        Args:
            name: the plugin's name; empty reloads the changed ones.
        """
        supervisor = self._supervisor
        if supervisor is None:
            return _json({"error": "no out-of-process plugins are supervised in this agent"})
        if name:
            try:
                await supervisor.reload(name)
            except KeyError:
                return _json({"error": f"plugin {name} is not a loaded out-of-process plugin"})
            return _json({"status": "reloaded", "name": name})
        return _json({"status": "reloaded", "names": await supervisor.reload_changed()})


def _name_of(path: Path) -> str:
    try:
        from homeagent_core.plugins.packages import validate_package

        return validate_package(path).name
    except PackageError:
        return ""


def make_plugin() -> PluginMgr:
    return PluginMgr()
