"""Plugin management behind the web UI: packages on disk, the process supervisor, the host.

Install, upgrade and removal go through the same installer as ``homeagent plugins`` and the
``pluginmgr`` tools, so a package is checked the same way whichever door it comes through.
Everything installed here goes live at once: a new out-of-process or Lua plugin is started,
an upgraded one restarted, skill folders rescanned. Only Python distributions (``homeagent
install``) need a restart, and they never come through here.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.live import start_after_install
from homeagent_core.plugins import packages
from homeagent_sdk.errors import PluginLoadError

if TYPE_CHECKING:
    from homeagent_core.plugins.privileged import SupervisorAccess
    from homeagent_core.plugins.sdk import Services

__all__ = ["disabled_details", "install", "plugin_list", "reload", "remove", "start"]


def _supervisor(services: Services) -> SupervisorAccess | None:
    return services.supervisor


async def install(services: Services, data: bytes | Path, *, overwrite: bool = False) -> dict[str, Any]:
    """Validate and install a ``.hmap`` (its bytes or a local path); a running plugin is upgraded in place.

    Raises:
        packages.PackageExistsError: installed already and ``overwrite`` is false.
        packages.PackageError: the package is invalid (the installer's message says why).
    """
    manifest = await asyncio.to_thread(packages.validate_package, data)
    supervisor = _supervisor(services)
    running = supervisor.get(manifest.name) if supervisor is not None and overwrite else None
    if running is not None:
        await running.stop()
    try:
        result = await asyncio.to_thread(packages.install_package, services.data_dir, data, overwrite=overwrite)
    except BaseException:
        if running is not None and supervisor is not None:  # the old version is still on disk: bring it back
            await supervisor.reload(manifest.name)
        raise
    result["kind"] = manifest.kind
    if running is not None and supervisor is not None:
        await supervisor.reload(manifest.name)
        result["action"] = "reloaded"
        return result
    return await start_after_install(services, result)


async def start(services: Services, name: str) -> dict[str, Any]:
    """Start an installed package now (reload it when it runs already).

    Raises:
        PluginLoadError: not installed, disabled, or it failed to start (the message says why).
    """
    live = getattr(services, "live", None)
    if live is None:
        raise PluginLoadError(f"plugin {name}: this agent cannot start plugins while running", plugin_name=name)
    return dict(await live.start(name))


async def remove(services: Services, name: str) -> dict[str, Any]:
    """Stop a running out-of-process plugin, delete its folder and its settings.

    Raises:
        packages.PackageError: no such installed plugin.
    """
    supervisor = _supervisor(services)
    running = supervisor.get(name) if supervisor is not None else None
    live = getattr(services, "live", None)
    stopped = live is not None and await live.stop(name)
    if running is not None and supervisor is not None and not stopped:
        await running.stop()
        supervisor.detach(name)
    result = await asyncio.to_thread(packages.remove_plugin, services.data_dir, name, config=services.config)
    result["stopped"] = stopped or running is not None
    result["action"] = "stopped" if result["stopped"] else "removed"
    return result


async def reload(services: Services) -> dict[str, Any]:
    """Apply what changed on disk without a restart.

    Out-of-process plugins whose entry file changed are restarted by the supervisor; the
    skill folders are rescanned; Lua plugins reload themselves when ``main.lua`` changes.
    Installed packages the running agent does not run yet (and that are not disabled) are
    started (``started``); those that fail are in ``failed`` (name -> why). ``restart_required``
    lists what could not be started while running (an agent without live plugin support).
    """
    supervisor = _supervisor(services)
    reloaded = await supervisor.reload_changed() if supervisor is not None else []
    skills = _skills(services)
    if skills is not None:
        await asyncio.to_thread(skills.reload)
    rows = await asyncio.to_thread(packages.installed_plugins, services.data_dir)
    disabled = services.config.disabled_plugins()
    pending = [r["name"] for r in rows if "error" not in r and r["name"] not in disabled and not _loaded(services, r)]
    live = getattr(services, "live", None)
    started: list[str] = []
    failed: dict[str, str] = {}
    if live is not None:
        for name in list(pending):
            try:
                await live.start(name)
                started.append(name)
            except PluginLoadError as exc:
                failed[name] = str(exc)
            pending.remove(name)
    return {"status": "reloaded", "reloaded": reloaded, "skills_rescanned": skills is not None,
            "started": started, "failed": failed, "restart_required": pending}


def _skills(services: Services) -> Any:
    host = services.host
    plugin = host.pm.get_plugin("skills") if host is not None else None
    return plugin if plugin is not None and hasattr(plugin, "reload") else None


def _loaded(services: Services, package: dict[str, Any]) -> bool:
    """Whether the running agent serves this installed package."""
    if package.get("entry") == "SKILL.md":
        skills = _skills(services)
        return skills is not None and str(package["name"]).casefold() in skills.index.skills
    host = services.host
    info = host.info(package["name"]) if host is not None else None
    return info is not None and info.status != "failed"


def plugin_list(services: Services, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Host plugin rows merged with installed packages (version, and those not loaded yet)."""
    by_name = {r["name"]: r for r in rows}
    supervisor = _supervisor(services)
    live = {r["name"]: r for r in supervisor.status()} if supervisor is not None else {}
    disabled = services.config.disabled_plugins()
    for package in packages.installed_plugins(services.data_dir):
        name = package["name"]
        row = by_name.get(name)
        if row is None:
            loaded = "error" not in package and _loaded(services, package)
            row = by_name[name] = {"name": name, "kind": _kind(package), "status": "started" if loaded else "installed",
                                   "error": "", "hooks": [], "contributions": {}, "disabled": name in disabled,
                                   "restart_required": not loaded}
            rows.append(row)
        row["package"] = package
        row["version"] = row.get("version") or package.get("version", "")
        if package.get("error"):
            row["error"] = row.get("error") or package["error"]
        info = live.get(name)
        if info is not None:
            row.update(pid=info.get("pid"), crash_count=info.get("crash_count"))
    return rows


def _kind(package: dict[str, Any]) -> str:
    entry = str(package.get("entry", ""))
    if entry in packages.PROC_ENTRIES or entry.startswith("plugin.bin"):
        return "proc"
    return {"main.lua": "lua", "SKILL.md": "skill"}.get(entry, "unknown")


def disabled_details(config: Any) -> list[dict[str, Any]]:
    """``[{name, disabled_at, disabled_by}]`` from the config database (read-only connection)."""
    path = getattr(config, "path", ":memory:")
    names = sorted(config.disabled_plugins())
    if path == ":memory:":
        return [{"name": n, "disabled_at": None, "disabled_by": None} for n in names]
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT name, disabled_at, disabled_by FROM disabled_plugins ORDER BY name").fetchall()
    finally:
        db.close()
    return [{"name": n, "disabled_at": at, "disabled_by": by} for n, at, by in rows]
