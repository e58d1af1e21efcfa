"""The slash commands of the ``cli`` socket: ``/status``, ``/plugin …``, ``/agents …``, ``/settings …``.

:class:`Commands` answers one command line with the text the client shows (or raises
:class:`~homeagent_sdk.HomeAgentError` with the reason, which the socket sends as an error);
the socket, its protocol and chat turns live in :mod:`homeagent_core.builtin.cli_socket`.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from homeagent_core import loopwatch, workers
from homeagent_sdk import HomeAgentError, ToolCall

if TYPE_CHECKING:
    from homeagent_core.plugins.privileged import KernelAccess, PluginHostAccess
    from homeagent_core.plugins.sdk import ScopedSDK, Services

__all__ = ["HELP", "CommandOwner", "Commands"]

HELP = """Commands:
  /help                        this text
  /status                      uptime, model, turns, plugins, tools
  /kernel                      the kernel status as JSON
  /doctor                      plugins, LLM sources, worker pools, loop stalls as JSON (`homeagent doctor`)
  /plugins                     plugins and their state (same as /plugin list)
  /plugin info <name>          one plugin: kind, state, version, tools, files
  /plugin install <file|url> [--force]  install a .hmap package and start it (--force: upgrade)
  /plugin start <name>         start an installed package now (restart it when it runs)
  /plugin reload [name]        restart a plugin package (no name: those whose entry changed)
  /plugin enable <name>        enable a plugin (starts it again when it can)
  /plugin disable <name>       disable a plugin (stops it when it runs out of process)
  /plugin remove <name>        uninstall a plugin package
  /agents [list]               resident sub-agents and spawn_child sub-agents, and their state
  /agents send <name> <text>   queue a message for a resident sub-agent
  /agents stop <name>          cancel a resident's work in progress and drop its queue
  /agents destroy <name> [keep|drop]  remove a resident (its queue goes to the main agent, or is dropped)
  /memory <query>              recall from the memory graph
  /knowledge <query>           search the knowledge base
  /settings [prefix]           list settings (secrets masked)
  /settings get <key>          one setting
  /settings set <key> <value>  change a setting
  /stop                        stop the running reply and drop what is queued
  /approvals [list]            tool calls waiting for the owner's decision (JSON)
  /approvals approve|deny <id> decide one: approve runs it with the asker's rights
Anything else is a message to the agent."""


class CommandOwner(Protocol):
    """What the commands use of the plugin that serves them (the ``cli`` socket's ``CliSocket``)."""

    name: str
    started_at: float

    @property
    def sdk(self) -> ScopedSDK: ...


class Commands:
    """The commands of one ``cli`` plugin; ``owner`` gives the SDK and the start time."""

    def __init__(self, owner: CommandOwner) -> None:
        self.owner = owner

    @property
    def sdk(self) -> ScopedSDK:
        return self.owner.sdk

    def handler(self, name: str) -> Callable[[str], Awaitable[str]] | None:
        """The handler of ``/<name>`` (case-insensitive), called with the rest of the line; None if unknown."""
        return {
            "help": self._help,
            "status": self._status,
            "kernel": self._kernel,
            "plugins": self._plugin,
            "plugin": self._plugin,
            "agents": self._agents,
            "memory": self._memory,
            "knowledge": self._knowledge,
            "settings": self._settings,
            "stop": self._stop,
            "doctor": self._doctor,
            "approvals": self._approvals,
        }.get(name.lower())

    def _kernel_or_fail(self) -> KernelAccess:
        kernel = self.sdk.services.kernel if self.sdk.services is not None else None
        if kernel is None:
            raise HomeAgentError("the kernel is not running")
        return kernel

    async def _doctor(self, _rest: str) -> str:
        """What this running daemon knows about its plugins, LLM sources, worker pools and loop (JSON).

        ``llm`` names the source that answered last (``answered``), else the one tried next.
        """
        services = self.sdk.services
        host = services.host if services is not None else None
        plugins = [{"name": p.name, "status": _live_status(services, p.name) or p.status, "kind": p.kind,
                    "error": p.error or ""}
                   for p in (host.plugins() if host is not None else [])]
        kernel = services.kernel if services is not None else None
        provider = kernel.provider if kernel is not None else None
        list_sources = getattr(provider, "list_sources", None)
        sources = list_sources() if callable(list_sources) else None
        report: dict[str, Any] = {"pid": os.getpid(), "plugins": plugins, "llm_sources": sources}
        watch = loopwatch.active()
        report["workers"] = workers.stats()
        report["loop_watch"] = watch.stats() if watch is not None else None
        active = getattr(provider, "active_source", None)
        if callable(active):
            source, model, answered = active()
            report["llm"] = {"source": source, "model": model, "answered": answered}
        return json.dumps(report, ensure_ascii=False, default=str)

    async def _help(self, _rest: str) -> str:
        return HELP

    async def _status(self, rest: str) -> str:
        services = self.sdk.services
        lines = [f"uptime: {_uptime(time.time() - self.owner.started_at)}"]
        kernel = services.kernel if services is not None else None
        if kernel is not None:
            status = kernel.status()
            provider = kernel.provider
            lines.append(f"model: {_model_line(provider)}")
            lines.append(
                f"turns: {status['turns']} ({status['failed_turns']} failed), queued: {status['queued']}, "
                f"busy: {'yes' if status['busy'] else 'no'}"
            )
            lines.append(f"tools: {status['tools']}; output channels: {', '.join(status['output_channels'])}")
        else:
            lines.append("kernel: not running")
        host = services.host if services is not None else None
        if host is not None:
            infos = host.plugins()
            started = sum(1 for p in infos if p.status == "started")
            failed = [p.name for p in infos if p.status == "failed"]
            lines.append(f"plugins: {started} started" + (f", failed: {', '.join(failed)}" if failed else ""))
        rss = _rss_mb()
        lines.append(
            f"process: {threading.active_count()} threads, {len(asyncio.all_tasks())} tasks"
            + (f", {rss:.1f} MB resident" if rss is not None else "")
        )
        return "\n".join(lines)

    async def _kernel(self, _rest: str) -> str:
        return json.dumps(self._kernel_or_fail().status(), ensure_ascii=False, indent=2, default=str)

    # ------------------------------------------------------------------ /plugin

    def _services(self) -> Services:
        services = self.sdk.services
        if services is None:
            raise HomeAgentError("plugin management needs the privileged services of a built-in plugin")
        return services

    async def _plugin(self, rest: str) -> str:
        words = rest.split()
        action = words[0].lower() if words else "list"
        args = words[1:]
        if action == "list":
            return await self._plugin_list()
        if action == "install":
            return await self._plugin_install(args)
        if action == "reload":
            return await self._plugin_reload(args[0] if args else "")
        handler = {
            "info": self._plugin_info,
            "start": self._plugin_start,
            "enable": self._plugin_enable,
            "disable": self._plugin_disable,
            "remove": self._plugin_remove,
        }.get(action)
        if handler is None:
            raise HomeAgentError(
                f"unknown /plugin action {action!r}; use list, info <name>, install <file-or-url> [--force], "
                "start <name>, reload [name], enable <name>, disable <name> or remove <name>"
            )
        if len(args) != 1:
            raise HomeAgentError(f"usage: /plugin {action} <name>")
        return await handler(args[0])

    def _host(self) -> PluginHostAccess:
        host = self._services().host
        if host is None:
            raise HomeAgentError("the plugin host is not available")
        return host

    async def _plugin_list(self) -> str:
        from homeagent_core.plugins import packages

        services = self._services()
        host = self._host()
        kernel = services.kernel
        groups = kernel.tools.by_plugin() if kernel is not None else {}
        disabled = services.config.disabled_plugins()
        installed = {p["name"]: p for p in await asyncio.to_thread(packages.installed_plugins, services.data_dir)}
        lines = []
        for info in host.plugins():
            tools = len(groups.get(info.name, []))
            version = installed.pop(info.name, {}).get("version") or info.version
            status = _live_status(services, info.name) or info.status
            flags = " (disabled)" if info.name in disabled else ""
            error = f" — {info.error}" if info.error else ""
            lines.append(f"{info.name:<16} {info.kind:<10} {status:<10} {tools} tools"
                         f"{f'  v{version}' if version else ''}{flags}{error}")
        for name, package in installed.items():
            note = package.get("error") or ("disabled" if name in disabled else f"not running; /plugin start {name}")
            lines.append(f"{name:<16} {'package':<10} {'installed':<10} 0 tools  v{package.get('version', '?')}"
                         f" — {note}")
        return "\n".join(lines) or "no plugins"

    async def _plugin_info(self, name: str) -> str:
        from homeagent_core.plugins import packages

        services = self._services()
        info = self._host().info(name)
        try:
            details: dict[str, Any] | None = await asyncio.to_thread(packages.plugin_details, services.data_dir, name)
        except packages.PackageError:
            details = None
        if info is None and details is None:
            raise HomeAgentError(f"unknown plugin {name!r}; /plugin list shows the plugins")
        out: dict[str, Any] = {"name": name}
        if info is not None:
            row = info.to_dict()
            out.update(kind=row["kind"], status=row["status"], error=row["error"],
                       contributions=row["contributions"])
        supervisor = services.supervisor
        running = supervisor.get(name) if supervisor is not None else None
        if running is not None:
            live = running.runtime_info()
            out.update(status=live["status"], pid=live["pid"], crash_count=live["crash_count"],
                       auto_restart=live["auto_restart"], tools=live["tools"])
            out["error"] = live["error"] or out.get("error", "")
        out["disabled"] = name in services.config.disabled_plugins()
        if details is not None:
            out["package"] = details
        return json.dumps(out, ensure_ascii=False, indent=2)

    def _known(self, name: str) -> bool:
        """Loaded (or failed) in this agent, or installed as a package."""
        from homeagent_core.plugins.packages import NAME_RE

        if self._host().info(name) is not None:
            return True
        return bool(NAME_RE.match(name)) and (Path(self._services().data_dir) / "plugins" / name).is_dir()

    async def _plugin_reload(self, name: str) -> str:
        services = self._services()
        supervisor = services.supervisor
        if not name:
            changed = await supervisor.reload_changed() if supervisor is not None else []
            rescan = getattr(self._host().pm.get_plugin("skills"), "reload", None)
            rescanned = callable(rescan)
            if rescan is not None and rescanned:
                await asyncio.to_thread(rescan)
            parts = [f"reloaded: {', '.join(changed)}" if changed else "no out-of-process plugin changed"]
            if rescanned:
                parts.append("skills rescanned")
            return "; ".join(parts)
        if name in services.config.disabled_plugins():
            if not self._known(name):
                raise HomeAgentError(f"unknown plugin {name!r}; /plugin list shows the plugins")
            raise HomeAgentError(f"{name} is disabled; /plugin enable {name} first")
        live = getattr(services, "live", None)
        running = supervisor.get(name) if supervisor is not None else None
        if self._installed(name) and (running is None or (live is not None and not live.loaded(name))):
            return await self._plugin_start(name)  # installed but not running (or a Lua plugin): start it
        if supervisor is None or running is None:
            if not self._known(name):
                raise HomeAgentError(f"unknown plugin {name!r}; /plugin list shows the plugins")
            raise HomeAgentError(
                f"{name} is not an installed plugin package; built-in and Python (pip) plugins load once per "
                "process: restart the daemon (homeagent serve) to load a new version"
            )
        await supervisor.reload(name)
        running = supervisor.get(name)
        return f"reloaded {name} (pid {running.runtime_info()['pid'] if running is not None else '?'})"

    def _installed(self, name: str) -> bool:
        """An installed package (``<data>/plugins/<name>/``), running or not."""
        from homeagent_core.plugins.packages import NAME_RE

        return bool(NAME_RE.match(name)) and (Path(self._services().data_dir) / "plugins" / name).is_dir()

    async def _plugin_start(self, name: str) -> str:
        """Start (or restart) an installed package now; its tools are usable in the next turn."""
        from homeagent_sdk.errors import PluginLoadError

        live = getattr(self._services(), "live", None)
        if live is None:
            raise HomeAgentError("this agent cannot start plugins while running; restart the daemon")
        if not self._installed(name):
            if self._known(name):
                raise HomeAgentError(
                    f"{name} is not an installed plugin package; built-in and Python (pip) plugins start with the "
                    "daemon (restart it with homeagent serve)"
                )
            raise HomeAgentError(f"unknown plugin {name!r}; /plugin list shows the plugins")
        try:
            result = await live.start(name)
        except PluginLoadError as exc:
            raise HomeAgentError(str(exc)) from None
        return _started_line(result)

    async def _plugin_install(self, args: list[str]) -> str:
        from homeagent_core.builtin.pluginmgr import install_source
        from homeagent_core.plugins import packages

        force = "--force" in args
        rest = [a for a in args if a != "--force"]
        if len(rest) != 1:
            raise HomeAgentError("usage: /plugin install <file-or-url> [--force]")
        source = rest[0]
        services = self._services()
        fetched: Path | None = None
        try:
            if source.startswith(("http://", "https://")):
                fetched = await packages.download(source, Path(tempfile.gettempdir()))
            result = await install_source(services, fetched or Path(source).expanduser(), overwrite=force)
        except packages.PackageError as exc:
            raise HomeAgentError(str(exc)) from None
        finally:
            if fetched is not None:
                fetched.unlink(missing_ok=True)
        head = f"installed {result['name']} {result['version']}"
        action = result.get("action")
        if action == "start_failed":
            raise HomeAgentError(f"{head}, but it did not start: {result['start_error']}")
        if action == "disabled":
            return f"{head}; it is disabled (/plugin enable {result['name']} starts it)"
        if action in ("started", "reloaded", "rescanned"):
            return f"{head}; " + _started_line({**result, "status": action})
        return f"{head} ({action})"

    async def _plugin_enable(self, name: str) -> str:
        services = self._services()
        if not self._known(name):
            raise HomeAgentError(f"unknown plugin {name!r}; /plugin list shows the plugins")
        services.config.set_plugin_disabled(name, False)
        live = getattr(services, "live", None)
        if live is not None and self._installed(name) and not live.loaded(name):
            return f"enabled {name}; " + await self._plugin_start(name)
        supervisor = services.supervisor
        running = supervisor.get(name) if supervisor is not None else None
        if running is not None and supervisor is not None:
            if not running.runtime_info()["alive"]:
                await supervisor.reload(name)
            return f"enabled {name}; it is running"
        return f"enabled {name}; it starts with the next restart of the daemon"

    async def _plugin_disable(self, name: str) -> str:
        services = self._services()
        if name == self.owner.name:
            raise HomeAgentError(
                "refusing to disable cli from its own socket (you would lose this connection for good); "
                "use `homeagent plugins disable cli` if you mean it"
            )
        if not self._known(name):
            raise HomeAgentError(f"unknown plugin {name!r}; /plugin list shows the plugins")
        services.config.set_plugin_disabled(name, True, by="cli")
        supervisor = services.supervisor
        running = supervisor.get(name) if supervisor is not None else None
        if running is not None:
            await running.stop()
            return f"disabled {name}; it was stopped and its tools removed"
        return f"disabled {name}; it is not loaded after the next restart of the daemon"

    async def _plugin_remove(self, name: str) -> str:
        from homeagent_core.builtin.pluginmgr import remove_installed
        from homeagent_core.plugins.packages import PackageError

        try:
            await remove_installed(self._services(), name)
        except PackageError as exc:
            info = self._host().info(name)
            built_in = info is not None and info.kind in ("builtin", "core")
            if exc.to_dict().get("error") == "plugin not found" and built_in:
                raise HomeAgentError(
                    f"{name} is built in, not an installed package (built-in plugins cannot be removed; "
                    f"/plugin disable {name} instead)"
                ) from None
            raise HomeAgentError(str(exc)) from None
        return f"removed {name}: its files and settings are deleted"

    # ------------------------------------------------------------------ /agents

    async def _agents(self, rest: str) -> str:
        """``/agents [list|send <name> <text>|stop <name>|destroy <name> [keep|drop]]``."""
        kernel = self._kernel_or_fail()
        action, _, rest = rest.partition(" ")
        action = action.lower() or "list"
        residents = kernel.residents
        if action == "list":
            return self._agents_list(kernel)
        name, _, text = rest.strip().partition(" ")
        if not name:
            raise HomeAgentError(f"usage: /agents {action} <name>" + (" <text>" if action == "send" else ""))
        if action == "send":
            position = await residents.send(name, text)
            return f"queued for resident {name} (position {position}); it reports to the main agent when done"
        if action == "stop":
            dropped = await residents.stop(name)
            return f"stopped resident {name}: work in progress cancelled, {dropped} queued message(s) dropped"
        if action == "destroy":
            residual = text.strip() or "keep"
            result = await residents.destroy(name, cast(Literal["keep", "drop"], residual))  # checked there
            return (
                f"destroyed resident {name}: {result['pending']} unfinished message(s) "
                + (f"handed to the main agent ({result['handed_to_main']})" if residual == "keep" else "dropped")
            )
        raise HomeAgentError(f"unknown /agents action {action!r}; use list, send, stop or destroy")

    def _agents_list(self, kernel: KernelAccess) -> str:
        lines = []
        for info in kernel.residents.list():
            doing = info["current"] or "-"
            lines.append(
                f"resident {info['name']:<12} {info['status']:<11} queued {len(info['queued']):<3} "
                f"done {info['done']:<4} "
                f"doing: {_one_line(doing, 40)}  last: {_one_line(info['last_output'] or '-', 50)}"
            )
        children = kernel.children.children
        if not lines and not children:
            return "no sub-agents have been started (the model starts them with spawn_child or resident_agents)"
        now = time.monotonic()
        for task_id, child in children.items():
            took = (child.finished if child.finished is not None else now) - child.started
            detail = {"failed": f" — {child.error}", "done": f" — {_one_line(child.result or '', 60)}"}.get(
                child.status, ""
            )
            lines.append(f"{task_id:<10} {child.status:<8} {took:6.1f}s  {_one_line(child.task, 60)}{detail}")
        return "\n".join(lines)

    async def _run_tool(self, tool: str, arguments: dict[str, Any], what: str) -> str:
        kernel = self._kernel_or_fail()
        if tool not in kernel.tools:
            raise HomeAgentError(f"{what} is not available: no {tool} tool is registered in this agent")
        result = await kernel.tools.execute(ToolCall(id="cli", name=tool, arguments=arguments))
        if not result.success:
            raise HomeAgentError(result.result)
        return str(result.result)

    async def _memory(self, rest: str) -> str:
        query = rest.removeprefix("query ").strip()
        if not query:
            raise HomeAgentError("usage: /memory <query>")
        return await self._run_tool("memory_recall", {"query_intent": query}, "memory")

    async def _knowledge(self, rest: str) -> str:
        if not rest:
            raise HomeAgentError("usage: /knowledge <query>")
        return await self._run_tool("knowledge_search", {"query": rest}, "the knowledge base")

    async def _settings(self, rest: str) -> str:
        config = self.sdk.config
        if config is None:
            raise HomeAgentError("settings are not available to this plugin")
        words = rest.split(maxsplit=2)
        if words and words[0] == "set":
            if len(words) < 3:
                raise HomeAgentError("usage: /settings set <key> <value>")
            key, value = words[1], words[2]
            typed = config.set(key, value)
            definition = config.definition(key)
            shown = "****" if definition is not None and (definition.secret or definition.type == "password") else typed
            note = " (takes effect after a restart)" if definition is not None and definition.restart_required else ""
            return f"{key} = {shown}{note}"
        if words and words[0] == "get":
            if len(words) != 2:
                raise HomeAgentError("usage: /settings get <key>")
            rows = [r for r in config.describe(words[1]) if r["key"] == words[1]]
            if not rows:
                raise HomeAgentError(f"unknown setting {words[1]!r}; /settings lists them")
            return f"{rows[0]['key']} = {rows[0]['value']}  ({rows[0]['source']})"
        rows = config.describe(words[0] if words else "")
        if not rows:
            raise HomeAgentError(f"no settings start with {rest!r}")
        return "\n".join(f"{r['key']} = {r['value']}" for r in rows)

    async def _approvals(self, rest: str) -> str:
        rights = self._services().rights
        if rights is None:
            raise HomeAgentError("this agent runs without a person registry, so nothing waits for approval")
        words = rest.split()
        if not words or words == ["list"]:
            return json.dumps([a.to_dict() for a in rights.approvals.list()], ensure_ascii=False, default=str)
        if len(words) == 2 and words[0] in ("approve", "deny") and words[1].lstrip("#").isdigit():
            decided = await rights.approvals.decide(int(words[1].lstrip("#")), words[0] == "approve", by="owner (cli)")
            who = decided.principal.person or "a guest"
            return f"approval #{decided.id} {decided.status}: {decided.call.name} for {who}"
        raise HomeAgentError("usage: /approvals [list] | /approvals approve <id> | /approvals deny <id>")

    async def _stop(self, _rest: str) -> str:
        dropped = self._kernel_or_fail().stop()
        return f"stopped; {dropped} queued input(s) dropped"


def _live_status(services: Services | None, name: str) -> str:
    """The supervisor's status of an out-of-process plugin ("" for others)."""
    supervisor = services.supervisor if services is not None else None
    running = supervisor.get(name) if supervisor is not None else None
    return str(running.runtime_info()["status"]) if running is not None else ""


def _started_line(result: dict[str, Any]) -> str:
    """``started NAME (kind); tools: a, b`` for a live start's result."""
    name, status = result["name"], result["status"]
    if status == "rescanned":
        return f"skills rescanned; {name} is available"
    tools = ", ".join(result.get("tools") or []) or "none"
    verb = "restarted" if status == "reloaded" else "started"
    return f"{verb} {name} ({result.get('kind', '')}); tools: {tools}"


def _one_line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _uptime(seconds: float) -> str:
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s"


def _rss_mb() -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _model_line(provider: Any) -> str:
    """``source/model`` of the source a request goes to first (a plain provider: its name)."""
    if hasattr(provider, "list_sources"):
        sources = provider.list_sources()
        default = next((s for s in sources if s.get("default")), None)
        ready = [s for s in sources if s.get("available")]
        first = default if default is not None and default.get("available") else (ready[0] if ready else default)
        if first is not None:
            note = "" if first.get("available") else " (not available: " + str(
                first.get("disabled") or first.get("last_error") or "cooling down") + ")"
            return f"{first['name']}/{first['model']}{note}"
        return "no LLM source configured"
    return str(getattr(provider, "name", "") or type(provider).__name__)
