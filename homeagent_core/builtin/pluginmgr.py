"""Built-in ``pluginmgr``: install, list, inspect, reload and remove ``.hmap`` plugins.

Two doors onto the same operations (all through :mod:`homeagent_core.plugins.packages`):

* **Tools** for the model: ``plugin_install``, ``plugin_list``, ``plugin_info``,
  ``plugin_remove``, ``plugin_reload``. Each answers with the installer's JSON
  (``{"status": "installed", ...}`` or ``{"error": ..., "details": ...}``), so a refused
  package reaches the model with the reason. ``plgreload(name)`` (the original's name)
  reloads a plugin of any kind: an out-of-process one is restarted, a Lua one loads its
  ``main.lua`` again (a broken new version leaves the old one running), skills are rescanned,
  and built-in or entry-point Python plugins answer why they need a restart instead.
* **HTTP** is the web UI's ``/api/v1/plugins`` (list, details, install, upgrade, remove,
  reload), behind the web UI's credentials and its Host/Origin/CSRF rules. The plugin manager
  opens no listener of its own: an unauthenticated port on loopback is reachable from every
  web page the user visits (and, at a fixed port, a second daemon on the host loses it).

Installing over a running out-of-process plugin stops it first and starts the new version
(``"action": "reloaded"``; if the install fails the old version is started again); a fresh
install is started at once (``"action": "started"`` with its ``tools``, or ``"start_failed"``
with ``start_error`` when it does not start: it stays installed and listed as failed). Removing
stops and unloads the plugin, then deletes its directory and settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.live import start_after_install
from homeagent_core.plugins import packages
from homeagent_core.plugins.packages import PackageError
from homeagent_sdk import ToolError, ToolRegistryProtocol, hookimpl
from homeagent_sdk.errors import PluginError, PluginLoadError

if TYPE_CHECKING:
    from homeagent_core.plugins.privileged import SupervisorAccess
    from homeagent_core.plugins.sdk import ScopedSDK, Services

PLUGIN_NAME = "pluginmgr"

__all__ = [
    "PLUGIN_NAME",
    "PluginMgr",
    "install_source",
    "installed_rows",
    "make_plugin",
    "remove_installed",
]

log = logging.getLogger("homeagent.pluginmgr")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


# --------------------------------------------------------------------------- operations


def _supervisor(services: Services) -> SupervisorAccess | None:
    return services.supervisor


def installed_rows(services: Services) -> list[dict[str, Any]]:
    """Installed packages' summaries, with live status for running out-of-process plugins."""
    rows = packages.installed_plugins(Path(services.data_dir))
    supervisor = _supervisor(services)
    if supervisor is not None:
        live = {r["name"]: r for r in supervisor.status()}
        for row in rows:
            info = live.get(row["name"])
            if info is not None:
                row.update(status=info["status"], pid=info["pid"], crash_count=info["crash_count"])
    return rows


async def install_source(services: Services, source: Path | bytes, *, overwrite: bool = False) -> dict[str, Any]:
    """Validate and install a package (a local path or its bytes); returns the install result.

    A running out-of-process plugin of the same name is stopped, upgraded and started again
    (``"action": "reloaded"``); when the install fails it is started again on its old version.

    Raises:
        PackageExistsError: installed already and ``overwrite`` is false.
        PackageError: the package is invalid (the message names the problem).
    """
    manifest = await asyncio.to_thread(packages.validate_package, source)
    supervisor = _supervisor(services)
    running = supervisor.get(manifest.name) if supervisor is not None and overwrite else None
    if running is not None:
        await running.stop()
    try:
        result = await asyncio.to_thread(
            packages.install_package, Path(services.data_dir), source, overwrite=overwrite
        )
    except BaseException:
        if running is not None and supervisor is not None:
            with contextlib.suppress(Exception):
                await supervisor.reload(manifest.name)
        raise
    if running is not None and supervisor is not None:
        await supervisor.reload(manifest.name)
        result["action"] = "reloaded"
        return result
    return await start_after_install(services, result)


async def remove_installed(services: Services, name: str) -> dict[str, Any]:
    """Stop a running out-of-process plugin, then delete its directory and settings.

    Raises:
        PackageError: no such installed plugin (``to_dict()`` is ``{"error": "plugin not found"}``).
    """
    if not packages.NAME_RE.match(name) or not (Path(services.data_dir) / "plugins" / name).is_dir():
        raise PackageError(f"plugin {name} is not installed", plugin_name=name, result={"error": "plugin not found"})
    live = getattr(services, "live", None)
    supervisor = _supervisor(services)
    running = supervisor.get(name) if supervisor is not None else None
    stopped_live = live is not None and await live.stop(name)
    if not stopped_live and running is not None and supervisor is not None:  # started with the daemon
        await running.stop()
        supervisor.detach(name)
    return await asyncio.to_thread(
        packages.remove_plugin, Path(services.data_dir), name, config=services.config
    )


async def _start_installed(services: Services, name: str) -> dict[str, Any]:
    """Start an installed package that is not running; ``{"error": ...}`` when it cannot."""
    live = getattr(services, "live", None)
    if live is None:
        return {"error": f"plugin {name} is not loaded and this agent cannot start plugins while running"}
    try:
        return dict(await live.start(name))
    except PluginError as exc:
        return {"error": str(exc)}


# --------------------------------------------------------------------------- the plugin


class PluginMgr:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._services: Services | None = None

    @hookimpl
    async def startup(self, sdk: ScopedSDK) -> None:
        services = sdk.services
        if services is None:
            raise PluginLoadError("pluginmgr needs the privileged services of a built-in plugin", plugin_name=self.name)
        self._services = services
        stale = sorted(services.config.items("plugin.pluginmgr.http_"))
        if stale:
            log.warning(
                "%s no longer does anything: the plugin manager opens no port of its own; use the web UI's "
                "/api/v1/plugins with the API key or a login (remove the setting with `homeagent config unset`)",
                ", ".join(stale),
            )

    @property
    def services(self) -> Services:
        if self._services is None:
            raise ToolError("pluginmgr has not started yet")
        return self._services

    # ------------------------------------------------------------------ tools

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        registry.add(self.plugin_install, serial=True)
        registry.add(self.plugin_list, parallel_safe=True)
        registry.add(self.plugin_info, parallel_safe=True)
        registry.add(self.plugin_remove, serial=True)
        registry.add(self.plugin_reload, serial=True)
        registry.add(self.plgreload, serial=True)

    async def plugin_install(self, source: str, overwrite: bool = False) -> str:
        """Install a .hmap plugin package.

        Args:
            source: a local file path or an http(s) URL of the .hmap.
            overwrite: replace an installed plugin of the same name (upgrade/downgrade; settings are kept).
        """
        fetched: Path | None = None
        try:
            if source.startswith(("http://", "https://")):
                fetched = await packages.download(source, Path(tempfile.gettempdir()))
            path = fetched or Path(source).expanduser()
            return _json(await install_source(self.services, path, overwrite=overwrite))
        except PackageError as exc:
            return _json(exc.to_dict())
        finally:
            if fetched is not None:
                fetched.unlink(missing_ok=True)

    def plugin_list(self) -> str:
        """List installed plugin packages (name, version, description, author, entry, deprecated)."""
        return _json(installed_rows(self.services))

    def plugin_info(self, name: str) -> str:
        """Everything known about one installed plugin, including its files.

        Args:
            name: the plugin's name.
        """
        try:
            return _json(packages.plugin_details(Path(self.services.data_dir), name))
        except PackageError as exc:
            return _json(exc.to_dict())

    async def plugin_remove(self, name: str) -> str:
        """Uninstall a plugin: stop it, delete its directory and its settings.

        Args:
            name: the plugin's name.
        """
        try:
            return _json(await remove_installed(self.services, name))
        except PackageError as exc:
            return _json(exc.to_dict())

    async def plugin_reload(self, name: str = "") -> str:
        """Reload (or start, if installed but not running) one plugin by name, or every changed one.

        An empty name reloads every out-of-process plugin whose entry file changed.

        Args:
            name: the plugin's name; empty reloads the changed ones.
        """
        supervisor = _supervisor(self.services)
        if supervisor is None:
            return _json({"error": "no out-of-process plugins are supervised in this agent"})
        if name:
            try:
                await supervisor.reload(name)
            except KeyError:
                return _json(await _start_installed(self.services, name))
            return _json({"status": "reloaded", "name": name})
        return _json({"status": "reloaded", "names": await supervisor.reload_changed()})

    async def plgreload(self, name: str) -> str:
        """重新加载一个插件（任何类型）。

        进程外插件重启，Lua 插件重新载入 main.lua，技能重新扫描；内置和 Python 包插件会说明为什么不能热重载。

        Args:
            name: 插件名（见 get_plugin_tools / plugin_list）；技能可用技能名或 skills
        """
        services = self.services
        host = services.host
        if host is None:
            raise ToolError(f"no plugin named {name!r}; loaded plugins: none")
        info = host.info(name)
        skills = host.pm.get_plugin("skills")
        if info is None and skills is not None and name.casefold() in getattr(skills.index, "skills", {}):
            info = host.info("skills")
        if (info is None or info.status == "failed") and (Path(services.data_dir) / "plugins" / name).is_dir():
            result = await _start_installed(services, name)
            if "error" in result:
                raise ToolError(result["error"])
            return _json(result)
        if info is None:
            known = ", ".join(sorted(host.plugin_names()))
            raise ToolError(f"no plugin named {name!r}; loaded plugins: {known}")
        if info.kind == "proc":
            supervisor = _supervisor(services)
            if supervisor is None or supervisor.get(info.name) is None:
                raise ToolError(f"{info.name} is an out-of-process plugin that is not running under the supervisor")
            await supervisor.reload(info.name)
            return _json({"status": "reloaded", "name": info.name, "kind": "proc"})
        if info.kind == "lua":
            plugin = host.pm.get_plugin(info.name)
            if plugin is None:
                raise ToolError(f"Lua plugin {info.name} is not loaded ({info.status}); restart the daemon to load it")
            try:
                await asyncio.to_thread(plugin.reload, force=True)
            except PluginError as exc:
                raise ToolError(
                    f"Lua plugin {info.name} did not reload; the old version keeps running: {exc}"
                ) from None
            return _json({"status": "reloaded", "name": info.name, "kind": "lua"})
        if info.kind == "skill" and skills is not None:
            await asyncio.to_thread(skills.reload)
            return _json({"status": "rescanned", "name": name, "kind": "skill",
                          "skills": sorted(getattr(skills.index, "skills", {}))})
        if info.kind in ("builtin", "core"):
            raise ToolError(
                f"{info.name} is a built-in plugin: its code ships with the installed homeagent package and is "
                "loaded once per process, so it cannot be reloaded while running. Its settings apply without a "
                "reload; a new version needs a restart of the daemon (homeagent serve)"
            )
        raise ToolError(
            f"{info.name} is an in-process Python plugin ({info.kind}); Python modules cannot be re-imported safely "
            "in a running process. Restart the daemon (homeagent serve) to load a new version"
        )


def make_plugin() -> PluginMgr:
    return PluginMgr()
