"""Start and stop installed packages in a running agent, without a restart.

A package installed after start (``<data>/plugins/<name>/`` with a ``plugin.pyz`` /
``plugin.bin``, a ``main.lua`` or a ``SKILL.md``) goes live the way a plugin found at start
does: it is registered on the host, its settings are declared, its tools and channels are
attached to the kernel, its ``startup(sdk)`` runs with its own scoped SDK and its
``on_event`` is subscribed. An out-of-process or Lua plugin that is already loaded is
reloaded instead; a skill package makes the skill index rescan. A package that fails to
start is marked failed with the reason (``/plugin list``, the web UI) and everything it
attached is removed again; the agent keeps running.

Python distributions (``homeagent install``) are not handled here: their modules cannot be
imported safely into a running process, so they load when the daemon starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from homeagent_core.plugins.packages import NAME_RE, PackageError, load_manifest
from homeagent_sdk.errors import PluginError, PluginLoadError

if TYPE_CHECKING:
    from homeagent_core.agent.kernel import Kernel
    from homeagent_core.config import ConfigStore
    from homeagent_core.events import EventBus
    from homeagent_core.plugins.manager import HookHandler, PluginHost
    from homeagent_core.plugins.registries import PluginSettings
    from homeagent_core.plugins.sdk import ScopedSDK
    from homeagent_core.plugins.supervisor import Supervisor
    from homeagent_sdk.types import Event

__all__ = ["STARTUP_TIMEOUT", "LiveHost", "LivePlugins", "package_kind", "start_after_install"]

log = logging.getLogger(__name__)

#: Seconds one plugin's ``startup`` may take when it is started live (as at daemon start).
STARTUP_TIMEOUT = 30.0


def package_kind(directory: Path) -> str:
    """``proc``, ``lua`` or ``skill`` for an installed package folder ("" when it is none of them)."""
    from homeagent_core.plugins.proc import proc_entry

    if proc_entry(directory) is not None:
        return "proc"
    if (directory / "main.lua").is_file():
        return "lua"
    if (directory / "SKILL.md").is_file():
        return "skill"
    return ""


class LiveHost(Protocol):
    """What starting and stopping packages uses of the running app (:class:`~homeagent_core.app.App`)."""

    data_dir: Path
    config: ConfigStore
    bus: EventBus
    host: PluginHost
    supervisor: Supervisor | None
    kernel: Kernel | None
    settings: dict[str, PluginSettings]

    def sdk_for(self, name: str) -> ScopedSDK:
        """The scoped SDK a plugin's ``startup`` gets."""
        ...


class LivePlugins:
    """The running app's door for starting and stopping installed packages."""

    def __init__(self, app: LiveHost) -> None:
        self.app = app
        self._events: dict[str, list[Callable[[], None]]] = {}
        # One start or stop at a time: two doors (the web UI and the terminal, say) starting the
        # same package at once must not register it twice and then undo each other.
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ queries

    def loaded(self, name: str) -> bool:
        """Whether ``name`` is registered (started or loaded) in this agent."""
        host = self.app.host
        info = host.info(name)
        return info is not None and info.status not in ("failed", "blocked") and host.pm.get_plugin(name) is not None

    def _directory(self, name: str) -> Path:
        directory = self.app.data_dir / "plugins" / name
        if not NAME_RE.match(name) or not directory.is_dir():
            raise PluginLoadError(
                f"plugin {name} is not installed in {self.app.data_dir / 'plugins'}; install its .hmap first "
                "(homeagent plugins install FILE, or the web UI's Plugins page)",
                plugin_name=name,
            )
        return directory

    # ------------------------------------------------------------------ start

    async def start(self, name: str) -> dict[str, Any]:
        """Start installed package ``name`` now (reload it when it is loaded already).

        Returns ``{"status": "started" | "reloaded" | "rescanned", "name", "kind", "tools"}``.

        Raises:
            PluginLoadError: not installed, disabled, or it failed to start (the message says
                why; the plugin is listed as failed and nothing of it stays attached).
        """
        async with self._lock:
            return await self._start(name)

    async def _start(self, name: str) -> dict[str, Any]:
        directory = self._directory(name)
        kind = package_kind(directory)
        if not kind:
            raise PluginLoadError(
                f"plugin {name}: {directory} has no plugin.pyz, plugin.bin, main.lua or SKILL.md; reinstall its .hmap",
                plugin_name=name,
            )
        if kind == "skill":
            return await self._rescan_skills(name, directory)
        app = self.app
        if kind == "proc" and app.supervisor is None:
            raise PluginLoadError(
                f"plugin {name}: this agent runs no installed plugins (it was created with local_plugins=False)",
                plugin_name=name,
            )
        if name in app.config.disabled_plugins():
            raise PluginLoadError(
                f"plugin {name} is disabled; enable it first (/plugin enable {name}, or the web UI)", plugin_name=name
            )
        if self.loaded(name):
            return await self._reload(name, kind)
        plugin = await asyncio.to_thread(self._load, directory, kind)
        return await self.attach(plugin, name, kind)

    def _load(self, directory: Path, kind: str) -> object:
        """The plugin object for one package folder (not yet registered)."""
        if kind == "lua":
            from homeagent_core.plugins.lua_plugins import LuaPlugin

            return LuaPlugin(directory)
        from homeagent_core.plugins.proc import ProcPlugin

        try:
            manifest = load_manifest(directory)
        except PackageError as exc:
            raise PluginLoadError(f"plugin {directory.name}: {exc}", plugin_name=directory.name) from None
        supervisor = self.app.supervisor
        assert supervisor is not None  # _start refuses out-of-process packages in an agent without one
        return ProcPlugin(directory, supervisor=supervisor, manifest=manifest)

    async def attach(self, plugin: object, name: str, kind: str) -> dict[str, Any]:
        """Register ``plugin`` and run what start-up runs for it: settings, tools, ``startup``, events.

        Raises:
            PluginLoadError: registration or ``startup`` failed (recorded on the host, detached).
        """
        app = self.app
        host, kernel = app.host, app.kernel
        if kernel is None:
            raise PluginLoadError(f"plugin {name}: the agent is not running", plugin_name=name)
        if host.pm.is_blocked(name):
            raise PluginLoadError(
                f"plugin {name} is blocked in this agent (HOMEAGENT_DISABLE_PLUGINS or HOMEAGENT_LOAD_PLUGINS)",
                plugin_name=name,
            )
        try:
            version = str(getattr(getattr(plugin, "manifest", None), "version", "") or "")
            host.register(plugin, name=name, kind=kind, version=version)
            self._declare_settings(name)
            kernel.attach_plugin(name)
            await self._startup(name)
        except Exception as exc:
            self._undo(name)
            host.record_failure(name, exc, kind=kind)
            raise PluginLoadError(f"plugin {name} did not start: {_reason(exc, name)}", plugin_name=name) from None
        info = host.info(name)
        if info is not None:
            info.status = "started"
        for handler in host.handlers("on_event"):
            if handler.plugin_name == name:
                self._events.setdefault(name, []).append(app.bus.subscribe(self._deliverer(handler), label=name))
        tools = sorted(t.name for t in kernel.tools.by_plugin().get(name, []))
        log.info("plugin %s (%s) started live with %d tools", name, kind, len(tools))
        return {"status": "started", "name": name, "kind": kind, "tools": tools}

    def _deliverer(self, handler: HookHandler) -> Callable[[Event], Awaitable[None]]:
        """The bus callback that hands each event to one plugin's ``on_event``."""
        host = self.app.host

        def deliver(event: Event) -> Awaitable[None]:
            return host.deliver_event(handler, event)

        return deliver

    def _declare_settings(self, name: str) -> None:
        from homeagent_core.plugins.registries import PluginSettings

        app = self.app
        for handler in app.host.handlers("register_settings"):
            if handler.plugin_name == name:
                settings = PluginSettings(name, app.config, app.host)
                app.host.call_registration("register_settings", name, registry=settings)
                app.settings[name] = settings

    async def _startup(self, name: str) -> None:
        app = self.app
        for handler in app.host.handlers("startup"):
            if handler.plugin_name != name:
                continue
            try:
                async with asyncio.timeout(STARTUP_TIMEOUT):
                    await app.host.acall("startup", handler, sdk=app.sdk_for(name))
            except TimeoutError:
                raise PluginLoadError(
                    f"startup did not finish within {STARTUP_TIMEOUT:g} s", plugin_name=name
                ) from None

    def _undo(self, name: str) -> None:
        """Remove whatever a failed start attached (tools, channels, ledger entry)."""
        app = self.app
        if app.kernel is not None:
            app.kernel.detach_plugin(name)
        if app.supervisor is not None:
            app.supervisor.detach(name)
        app.settings.pop(name, None)

    async def _reload(self, name: str, kind: str) -> dict[str, Any]:
        app = self.app
        info = app.host.info(name)
        if info is not None and info.kind != kind:
            raise PluginLoadError(
                f"plugin {name}: the name is taken by a {info.kind} plugin already running in this agent; "
                "rename the package (the \"name\" in its plugin.json)",
                plugin_name=name,
            )
        try:
            if kind == "proc" and app.supervisor is not None and app.supervisor.get(name) is not None:
                await app.supervisor.reload(name)
            else:
                plugin = app.host.pm.get_plugin(name)
                reload = getattr(plugin, "reload", None)
                if callable(reload):
                    await asyncio.to_thread(reload, force=True)
        except PluginError as exc:
            raise PluginLoadError(f"plugin {name} did not reload: {_reason(exc, name)}", plugin_name=name) from None
        tools = sorted(t.name for t in app.kernel.tools.by_plugin().get(name, [])) if app.kernel else []
        return {"status": "reloaded", "name": name, "kind": kind, "tools": tools}

    async def _rescan_skills(self, name: str, directory: Path) -> dict[str, Any]:
        skills = self.app.host.pm.get_plugin("skills")
        if skills is None or not callable(getattr(skills, "reload", None)):
            raise PluginLoadError(f"skill {name}: the skills plugin is not running in this agent", plugin_name=name)
        roots = skills.index.roots
        if all(path != directory for _, path in roots):
            # A skill package is its own root (as found at start): after the data dir's skills and the
            # other packages, before extra and Python-package roots.
            at = next((i for i, (origin, _) in enumerate(roots) if origin not in ("data", "plugin")), len(roots))
            roots.insert(at, ("plugin", directory))
        await asyncio.to_thread(skills.reload)
        loaded = {skill.path.resolve() for skill in skills.index.skills.values()}
        if directory.resolve() not in loaded:
            why = next((p.error for p in skills.index.problems if Path(p.path).resolve() == directory.resolve()),
                       "its SKILL.md was not found")
            raise PluginLoadError(f"skill package {name} was not loaded: {why}", plugin_name=name)
        found = sorted(getattr(skills.index, "skills", {}))
        return {"status": "rescanned", "name": name, "kind": "skill", "tools": [], "skills": found}

    # ------------------------------------------------------------------ stop

    async def stop(self, name: str) -> bool:
        """Stop a live out-of-process or Lua plugin and forget it; False when it was not loaded.

        Its ``shutdown`` runs (an out-of-process plugin gets ``plugin.stop``, then SIGKILL after
        the grace), its tools, channels, settings declarations and event subscription go.
        """
        async with self._lock:
            return await self._stop(name)

    async def _stop(self, name: str) -> bool:
        app = self.app
        host = app.host
        info = host.info(name)
        if info is None or info.kind not in ("proc", "lua"):
            return False
        for unsubscribe in self._events.pop(name, []):
            unsubscribe()
        if host.pm.get_plugin(name) is not None:
            for handler in host.handlers("shutdown"):
                if handler.plugin_name == name:
                    try:
                        async with asyncio.timeout(STARTUP_TIMEOUT):
                            await host.acall("shutdown", handler)
                    except Exception:
                        log.exception("plugin %s: shutdown failed", name)
        if app.kernel is not None:
            app.kernel.detach_plugin(name)
        if app.supervisor is not None:
            app.supervisor.detach(name)
        host.unregister(name)
        host.forget(name)
        app.settings.pop(name, None)
        log.info("plugin %s stopped and unloaded", name)
        return True


async def start_after_install(services: Any, result: dict[str, Any]) -> dict[str, Any]:
    """Start the package an install just put on disk; ``result`` (the installer's) gains the outcome.

    ``action`` becomes ``started`` (``reloaded`` for a loaded Lua plugin, ``rescanned`` for a
    skill) with the plugin's ``tools``; a plugin that fails to start stays installed and gets
    ``"action": "start_failed"`` with ``start_error`` saying why; a disabled one stays
    ``"action": "disabled"``. Without a running agent (``services.live`` is None) nothing changes.
    """
    live: LivePlugins | None = getattr(services, "live", None)
    name = str(result.get("name", ""))
    if live is None or not name or live.app.kernel is None:
        return result
    if name in services.config.disabled_plugins():
        result["action"] = "disabled"
        return result
    try:
        started = await live.start(name)
    except PluginLoadError as exc:
        result.update(action="start_failed", start_error=str(exc))
        return result
    result.update(action=started["status"], tools=started["tools"])
    result.setdefault("kind", started["kind"])
    return result


def _reason(exc: BaseException, name: str) -> str:
    """The message of a start failure without the ``plugin <name>:`` prefix it often carries."""
    text = str(exc) or type(exc).__name__
    for prefix in (f"plugin {name}: ", f"plugin {name!r}: "):
        text = text.removeprefix(prefix)
    return text
