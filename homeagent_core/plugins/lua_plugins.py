"""Lua script plugins: ``<data>/plugins/<name>/`` holding ``plugin.json`` + ``main.lua``.

``main.lua`` runs once at load inside its own :class:`~homeagent_core.providers.lua.LuaSandbox`
(no os/io/require/load/debug, instruction and memory limits) with a global-like ``sdk`` table
in scope; what it registers there (tools, stage handlers, channels) is buffered. The script
returns ``{name=..., start=function(sdk) end, stop=function() end}``. Each plugin becomes an
ordinary pluggy plugin object (:class:`LuaPlugin`): its ``register_*`` hooks hand the buffered
registrations to the kernel, its seven stage hooks forward to the Lua handlers (the stage
context table's writes are synced back), ``startup(sdk)`` binds the real scoped SDK and calls
``start``, ``shutdown()`` calls ``stop``.

Lua data functions (``sdk.memory.recall`` ...) return ``(result, err)``; registration failures
raise a Lua error. A handler that raises, or exceeds its instruction or memory budget, is
stopped and reported (log, ``system`` event, ``ctx.errors`` or a failed tool result); the
plugin and the daemon go on. ``sdk.http.get/post`` is real HTTP (httpx) with a timeout and a
size cap, allowed only when ``plugin.json`` lists the ``http`` capability.

Every Lua call goes through one lock per plugin (the original's single-state mutex) and runs
off the event loop; data functions that need the (async) SDK are run on the loop the plugin
was started on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from homeagent_core.plugins.lua_bridge import LuaDataFunctions, kernel_of, on_loop
from homeagent_core.plugins.lua_glue import (
    GLUE,
    SCOPES,
    STAGES,
    apply_ctx,
    as_text,
    ctx_view,
    fingerprint,
    fix_schema,
    loads_obj,
    stat_key,
)
from homeagent_core.plugins.lua_http import DEFAULT_HTTP_MAX_BYTES, DEFAULT_HTTP_TIMEOUT
from homeagent_core.plugins.lua_manifest import CAPABILITIES, LuaPluginManifest, read_manifest
from homeagent_core.plugins.lua_script import LoadedScript, ScriptChannel, ScriptStage, ScriptTool
from homeagent_sdk import ChannelRegistry, SettingsRegistry, ToolRegistryProtocol, hookimpl
from homeagent_sdk.errors import PluginLoadError, PluginValidationError, ToolError
from homeagent_sdk.types import ChannelDef, StageContext, ToolCall, ToolDef, ToolResult

__all__ = [
    "CAPABILITIES",
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_HTTP_MAX_BYTES",
    "DEFAULT_HTTP_TIMEOUT",
    "LuaPlugin",
    "LuaPluginManifest",
    "read_manifest",
]

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds a data function waits for the SDK service it calls."""
STOP_WAIT = 10.0
"""Seconds ``shutdown`` waits for an interrupted call to end before giving up on ``stop()``."""

log = logging.getLogger(__name__)


class LuaPlugin:
    """A ``main.lua`` plugin wrapped as a pluggy plugin object.

    :param directory: the plugin folder (``plugin.json`` + ``main.lua``).
    :param instruction_limit: Lua VM instructions one call may execute.
    :param memory_limit: bytes the plugin's Lua state may allocate.
    :param http_timeout: seconds per ``sdk.http`` request.
    :param http_max_bytes: largest ``sdk.http`` response body.
    :param watch_interval: seconds between checks of the files for changes once started
        (``0`` disables the watcher; :meth:`reload` can always be called).
    :param time_limit: wall-clock seconds one call into the script may run.

    Raises:
        PluginLoadError: the manifest or the script is broken (syntax error, error at load,
            limit hit, no table returned, a registration refused).
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        instruction_limit: int | None = None,
        memory_limit: int | None = None,
        http_timeout: float = DEFAULT_HTTP_TIMEOUT,
        http_max_bytes: int = DEFAULT_HTTP_MAX_BYTES,
        watch_interval: float = 2.0,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        time_limit: float | None = None,
    ) -> None:
        from homeagent_core.providers.lua import DEFAULT_INSTRUCTION_LIMIT, DEFAULT_MEMORY_LIMIT, DEFAULT_TIME_LIMIT

        self.directory = Path(directory)
        self.manifest = read_manifest(self.directory)
        self.name = self.manifest.name
        self.version = self.manifest.version
        self.instruction_limit = instruction_limit or DEFAULT_INSTRUCTION_LIMIT
        self.memory_limit = memory_limit or DEFAULT_MEMORY_LIMIT
        self.http_timeout = http_timeout
        self.http_max_bytes = http_max_bytes
        self.watch_interval = watch_interval
        self.call_timeout = call_timeout
        self.time_limit = time_limit or DEFAULT_TIME_LIMIT
        self.log = logging.getLogger(f"homeagent.plugin.{self.name}")
        self.errors: list[str] = []
        self.reloads = 0
        self._lock = threading.RLock()
        self.sdk: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._watcher: asyncio.Task[None] | None = None
        self._tool_registry: Any = None
        self._input_registry: Any = None
        self._output_registry: Any = None
        #: The script being loaded (its registrations are buffered there), else None.
        self.loading: LoadedScript | None = None
        self._data = LuaDataFunctions(self)
        self._script = self._load()

    # ------------------------------------------------------------------ loading

    @property
    def chunk(self) -> str:
        return f"{self.name}/main.lua"

    def _load(self) -> LoadedScript:
        """Run ``main.lua`` in a fresh sandbox, buffering its registrations."""
        from homeagent_core.providers.lua import LuaSandbox, LuaScriptError

        script = LoadedScript()
        script.fingerprint = fingerprint(self.directory)
        path = self.directory / "main.lua"
        try:
            source = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PluginLoadError(f"{path} is missing", plugin_name=self.name) from None
        except UnicodeDecodeError as exc:
            raise PluginLoadError(f"{path} is not UTF-8 text: {exc}", plugin_name=self.name) from None
        sandbox = LuaSandbox(self.name, instruction_limit=self.instruction_limit,
                             memory_limit=self.memory_limit, time_limit=self.time_limit, logger=self.log)
        script.sandbox = sandbox
        self.loading = script
        # The body runs as a function of `sdk`; the prefix sits on line 1 so line numbers match.
        wrapped = "return function(sdk, ...) " + source + "\nend"
        try:
            script.api = sandbox.load(GLUE, "homeagent-lua-glue")
            script.sdk_table = sandbox.call(
                script.api.build, sandbox.blocking(self._data), lambda *a: self._bridge_register(script, *a),
                script="homeagent-lua-glue",
            )
            body = sandbox.load(wrapped, self.chunk)
            module = sandbox.call(body, script.sdk_table, script=self.chunk)
        except LuaScriptError as exc:
            raise PluginLoadError(f"Lua plugin {self.name!r} failed to load: {exc}", plugin_name=self.name) from exc
        except UnicodeDecodeError as exc:
            raise PluginLoadError(f"Lua plugin {self.name!r}: a value is not UTF-8 text: {exc}",
                                  plugin_name=self.name) from exc
        finally:
            self.loading = None
        if sandbox.kind(module) != "table":
            raise PluginLoadError(
                f"Lua plugin {self.name!r}: main.lua must end with `return {{name=..., start=function(sdk) end, "
                f"stop=function() end}}`, it returned a {sandbox.kind(module)}", plugin_name=self.name)
        for key in ("start", "stop"):
            value = sandbox.field(module, key)
            if value is not None and sandbox.kind(value) != "function":
                raise PluginLoadError(f"Lua plugin {self.name!r}: '{key}' must be a function", plugin_name=self.name)
        script.module = module
        return script

    def _bridge_register(self, script: LoadedScript, kind: str, *args: Any) -> str | None:
        """Called by the script's ``sdk.register_*``; returns an error text or None."""
        try:
            if kind == "log":
                self._lua_log(as_text(args[0]), as_text(args[1]))
            elif kind == "tool":
                self._register_tool(script, *args)
            elif kind == "stage":
                self._register_stage(script, *args)
            elif kind == "output":
                self._register_output(script, *args)
            elif kind == "input":
                self._register_input(script, *args)
            elif kind == "api":
                script.apis.append(as_text(args[0]))
            elif kind == "auto_restart":
                script.auto_restart = bool(args[0])
            else:
                return f"unknown registration {kind!r}"
        except (PluginValidationError, ValueError, TypeError, orjson.JSONDecodeError) as exc:
            return str(exc)
        return None

    def _lua_log(self, level: str, msg: str) -> None:
        lvl = {"debug": logging.DEBUG, "warn": logging.WARNING, "warning": logging.WARNING,
               "error": logging.ERROR}.get(level.lower(), logging.INFO)
        self.log.log(lvl, "%s", msg[:4000])

    def _need_function(self, script: LoadedScript, value: Any, what: str) -> Any:
        assert script.sandbox is not None
        if value is None or script.sandbox.kind(value) != "function":
            raise ValueError(f"{what} needs a handler function")
        return value

    def _register_tool(self, script: LoadedScript, name: Any, def_json: Any, handler: Any, cleaner: Any = None) -> None:
        from homeagent_core.agent.tools import TOOL_NAME_RE

        name = as_text(name)
        if not TOOL_NAME_RE.match(name):
            raise ValueError(f"register_tool: tool name {name!r} is invalid: use 1-64 characters from "
                             "a-z, A-Z, 0-9, '_' and '-'")
        if name in script.tools:
            raise ValueError(f"register_tool: tool {name!r} is already registered by this plugin")
        self._need_function(script, handler, f"register_tool({name!r})")
        spec = loads_obj(def_json)
        params = fix_schema(spec.get("parameters") or {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise ValueError(f"register_tool({name!r}): 'parameters' must be a JSON-schema table")
        params.setdefault("type", "object")
        definition = ToolDef(
            name=name,
            description=str(spec.get("description") or name),
            parameters=params,
            plugin=self.name,
            no_memory=bool(spec.get("no_memory")),
            parallel_safe=bool(spec.get("parallel_safe")),
            serial=bool(spec.get("serial")),
            timeout=float(spec["timeout"]) if isinstance(spec.get("timeout"), int | float) else None,
            handler=self._tool_handler(name),
            cleaner=self._cleaner("tool", name) if cleaner is not None else None,
        )
        script.tools[name] = ScriptTool(definition, handler, cleaner)
        if self._script_is_live(script) and self._tool_registry is not None:
            self._tool_registry.add(definition)

    def _register_stage(self, script: LoadedScript, stage: Any, handler: Any, scope: Any = None) -> None:
        stage, scope = as_text(stage), as_text(scope)
        if stage not in STAGES:
            raise ValueError(f"register_stage: unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        if scope not in SCOPES:
            raise ValueError(f"register_stage: scope must be nil, 'global' or 'own_tools', got {scope!r}")
        self._need_function(script, handler, f"register_stage({stage!r})")
        script.stages.setdefault(stage, []).append(ScriptStage(handler, scope))

    def _register_output(self, script: LoadedScript, name: Any, caps: Any, desc: Any, def_json: Any,
                         handler: Any, cleaner: Any = None) -> None:
        name = as_text(name)
        self._need_function(script, handler, f"register_output_channel({name!r})")
        spec = loads_obj(def_json)
        channel = ChannelDef(
            name=name, description=as_text(desc), caps=int(caps or 1), sync=bool(spec.get("sync", False)),
            no_memory=bool(spec.get("no_memory")), context_policy=str(spec.get("context_policy") or ""),
            recall_policy=str(spec.get("recall_policy") or ""), help=str(spec.get("help") or ""),
            send=self._sender(name), cleaner=self._cleaner("output", name) if cleaner is not None else None,
        )
        script.outputs[name] = ScriptChannel(channel, handler, cleaner)
        if self._script_is_live(script) and self._output_registry is not None:
            self._output_registry.add(channel)

    def _register_input(self, script: LoadedScript, name: Any, def_json: Any, cleaner: Any = None) -> None:
        name = as_text(name)
        spec = loads_obj(def_json)
        channel = ChannelDef(
            name=name, description=str(spec.get("description") or ""), no_memory=bool(spec.get("no_memory")),
            context_policy=str(spec.get("context_policy") or ""), recall_policy=str(spec.get("recall_policy") or ""),
            cleaner=self._cleaner("input", name) if cleaner is not None else None,
        )
        script.inputs[name] = ScriptChannel(channel, None, cleaner)
        if self._script_is_live(script) and self._input_registry is not None:
            self._input_registry.add(channel)

    def _script_is_live(self, script: LoadedScript) -> bool:
        return getattr(self, "_script", None) is script

    # ------------------------------------------------------------------ calling into Lua

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        """Run one glue function under the plugin lock; Lua failures become ``LuaScriptError``."""
        from homeagent_core.providers.lua import LuaScriptError

        script = self._script
        assert script.sandbox is not None
        with self._lock:
            try:
                return script.sandbox.call(fn, *args, script=self.chunk)
            except UnicodeDecodeError as exc:
                raise LuaScriptError(self.chunk, "runtime", f"{what}: returned text that is not UTF-8 ({exc})") from exc

    def _report(self, what: str, exc: BaseException) -> str:
        kind = getattr(exc, "kind", "")
        if kind == "instructions":
            text = f"Lua plugin {self.name}: {what} was stopped: it exceeded {self.instruction_limit} instructions"
        elif kind == "memory":
            text = (f"Lua plugin {self.name}: {what} was stopped: it exceeded its memory limit "
                    f"({self.memory_limit} bytes)")
        else:
            text = f"Lua plugin {self.name}: {what} failed: {getattr(exc, 'reason', exc)}"
        self.errors.append(text)
        del self.errors[:-50]
        self.log.error("%s", text)
        self._publish("system", {"type": "plugin_error", "plugin": self.name, "what": what, "error": text})
        return text

    def _publish(self, name: str, data: dict[str, Any]) -> None:
        events = getattr(self.sdk, "events", None)
        if events is None or self.loop is None:
            return
        try:
            if on_loop(self.loop):
                events.publish(name, data)
            else:
                self.loop.call_soon_threadsafe(events.publish, name, data)
        except RuntimeError:  # loop closed
            pass

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run the Lua handler of tool ``name`` (synchronously, in the calling thread)."""
        from homeagent_core.providers.lua import LuaScriptError

        tool = self._script.tools.get(name)
        if tool is None:
            return ToolResult("", name, False, f"tool {name} is no longer provided by Lua plugin {self.name}")
        try:
            res = self._call(f"tool {name}", self._script.api.tool, tool.handler, orjson.dumps(arguments).decode())
        except LuaScriptError as exc:
            return ToolResult("", name, False, self._report(f"tool {name}", exc), self.name)
        ok, text = res[1], as_text(res[2])
        if not ok:
            return ToolResult("", name, False, f"error: {text}", self.name)
        return ToolResult("", name, True, text, self.name)

    def _tool_handler(self, name: str) -> Callable[..., ToolResult]:
        def handler(**kwargs: Any) -> ToolResult:
            return self.call_tool(name, kwargs)

        handler.__name__ = name
        return handler

    def _cleaner(self, kind: str, name: str) -> Callable[[str], str]:
        def clean(text: str) -> str:
            from homeagent_core.providers.lua import LuaScriptError

            script = self._script
            channels = script.outputs if kind == "output" else script.inputs
            entry: ScriptTool | ScriptChannel | None = script.tools.get(name) if kind == "tool" else channels.get(name)
            if entry is None or entry.cleaner is None:
                return text
            try:
                return as_text(self._call(f"cleaner of {kind} {name}", self._script.api.cleaner, entry.cleaner, text))
            except LuaScriptError as exc:
                self._report(f"cleaner of {kind} {name}", exc)
                return text

        return clean

    def _sender(self, name: str) -> Callable[..., str]:
        def send(payload: str, meta: dict[str, Any] | None = None, type: str = "text") -> str:
            from homeagent_core.providers.lua import LuaScriptError

            entry = self._script.outputs.get(name)
            if entry is None:
                raise ToolError(f"output channel {name} is no longer provided by Lua plugin {self.name}")
            try:
                res = self._call(f"output channel {name}", self._script.api.channel, entry.handler, payload,
                                 orjson.dumps(meta or {}).decode(), type)
            except LuaScriptError as exc:
                raise ToolError(self._report(f"output channel {name}", exc)) from None
            if not res[1]:
                raise ToolError(f"output channel {name}: {as_text(res[2])}")
            return as_text(res[2])

        return send

    def _run_stage(self, stage: str, ctx: StageContext, call: ToolCall | None, result: ToolResult | None) -> str | None:
        """Run this plugin's Lua handlers of ``stage`` in order, syncing writes back."""
        from homeagent_core.providers.lua import LuaScriptError

        rejection: str | None = None
        for entry in list(self._script.stages.get(stage, ())):
            if entry.scope == "own_tools" and call is not None and not self._owns(call):
                continue
            before = ctx_view(ctx)
            ctx_json = orjson.dumps(before).decode()
            call_json = orjson.dumps(call.to_dict()).decode() if call is not None else None
            result_json = orjson.dumps(result.to_dict()).decode() if result is not None else None
            try:
                res = self._call(f"{stage} handler", self._script.api.stage, entry.handler, ctx_json, call_json,
                                 result_json)
            except LuaScriptError as exc:
                ctx.errors.append(f"{stage}: plugin {self.name}: {self._report(f'{stage} handler', exc)}")
                continue
            apply_ctx(ctx, before, loads_obj(res[1]))
            if call is not None and res[2] is not None:
                changed = loads_obj(res[2])
                if isinstance(changed.get("arguments"), dict):
                    call.arguments = changed["arguments"]
            if result is not None and res[3] is not None:
                changed = loads_obj(res[3])
                if isinstance(changed.get("result"), str):
                    result.result = changed["result"]
                if isinstance(changed.get("success"), bool):
                    result.success = changed["success"]
            if res[5] is not None:
                ctx.errors.append(f"{stage}: plugin {self.name}: {as_text(res[5])}")
            elif res[4] is not None and stage == "before_toolcall" and rejection is None:
                rejection = as_text(res[4])
        return rejection

    def _owns(self, call: ToolCall) -> bool:
        return call.plugin == self.name or call.name in self._script.tools

    async def _stage(self, stage: str, ctx: StageContext, call: ToolCall | None = None,
                     result: ToolResult | None = None) -> str | None:
        if not self._script.stages.get(stage):
            return None
        return await asyncio.to_thread(self._run_stage, stage, ctx, call, result)

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: SettingsRegistry) -> None:
        for definition in [*self.manifest.settings, *self._script.setting_defs]:
            registry.add(definition)

    @hookimpl
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        self._tool_registry = registry
        for tool in self._script.tools.values():
            registry.add(tool.definition)

    @hookimpl
    def register_output_channels(self, registry: ChannelRegistry) -> None:
        self._output_registry = registry
        for channel in self._script.outputs.values():
            registry.add(channel.definition)

    @hookimpl
    def register_input_channels(self, registry: ChannelRegistry) -> None:
        self._input_registry = registry
        for channel in self._script.inputs.values():
            registry.add(channel.definition)

    @hookimpl
    async def on_input(self, ctx: StageContext) -> None:
        await self._stage("on_input", ctx)

    @hookimpl
    async def pre_action(self, ctx: StageContext) -> None:
        await self._stage("pre_action", ctx)

    @hookimpl
    async def post_action(self, ctx: StageContext) -> None:
        await self._stage("post_action", ctx)

    @hookimpl
    async def before_toolcall(self, ctx: StageContext, call: ToolCall) -> str | None:
        return await self._stage("before_toolcall", ctx, call)

    @hookimpl
    async def after_toolcall(self, ctx: StageContext, call: ToolCall, result: ToolResult) -> None:
        await self._stage("after_toolcall", ctx, call, result)

    @hookimpl
    async def before_output(self, ctx: StageContext) -> None:
        await self._stage("before_output", ctx)

    @hookimpl
    async def after_output(self, ctx: StageContext) -> None:
        await self._stage("after_output", ctx)

    @hookimpl
    async def startup(self, sdk: Any) -> None:
        """Bind the real SDK, call the script's ``start(sdk)``, start the file watcher."""
        self.sdk = sdk
        self.loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._start_script)
        self._started = True
        if self.watch_interval > 0:
            self._watcher = self.loop.create_task(self._watch(stat_key(self.directory)),
                                                   name=f"lua-watch-{self.name}")

    @hookimpl
    async def shutdown(self) -> None:
        """Stop the watcher and call the script's ``stop()``."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        if self._started:
            self._started = False
            await asyncio.to_thread(self._stop_script, self._script)
        if self._script.sandbox is not None:
            self._script.sandbox.close()

    def _start_script(self) -> None:
        """Call ``start(sdk)``; a failure is raised (so the host marks the plugin failed)."""
        from homeagent_core.providers.lua import LuaScriptError

        script = self._script
        assert script.sandbox is not None
        start = script.sandbox.field(script.module, "start")
        if start is None:
            return
        try:
            self._call("start", script.api.invoke, start, script.sdk_table)
        except LuaScriptError as exc:
            raise PluginLoadError(self._report("start", exc), plugin_name=self.name) from exc

    def _stop_script(self, script: LoadedScript) -> None:
        """Call ``stop()``; a call still running (a stuck tool, say) is interrupted first."""
        from homeagent_core.providers.lua import LuaScriptError

        assert script.sandbox is not None
        script.sandbox.interrupt()
        if not self._lock.acquire(timeout=STOP_WAIT):
            self.log.warning("Lua plugin %s: a call did not end within %g s; stop() was not called",
                             self.name, STOP_WAIT)
            return
        try:
            stop = script.sandbox.field(script.module, "stop")
            if stop is not None:
                script.sandbox.call(script.api.invoke, stop, script=self.chunk)
        except (LuaScriptError, UnicodeDecodeError) as exc:
            self._report("stop", exc)
        finally:
            self._lock.release()

    # ------------------------------------------------------------------ reload

    def changed(self) -> bool:
        """True when ``main.lua`` or ``plugin.json`` differ from the loaded version."""
        return fingerprint(self.directory) != self._script.fingerprint

    def reload(self, *, force: bool = False) -> bool:
        """Load the files again if they changed (or ``force``); returns whether it reloaded.

        The new version is loaded completely before the old one is stopped: when it is broken,
        the old version keeps running and :class:`PluginLoadError` says why. Tools and channels
        that disappeared are removed, new or changed ones are added; ``start(sdk)`` runs again.

        Raises:
            PluginLoadError: the new version does not load or start.
        """
        with self._lock:
            if not force and not self.changed():
                return False
            manifest = read_manifest(self.directory)
            if manifest.name != self.name:
                raise PluginLoadError(f"Lua plugin {self.name!r}: plugin.json now names {manifest.name!r}; "
                                      "a rename needs a restart", plugin_name=self.name)
            old = self._script
            previous_manifest = self.manifest
            self.manifest = manifest
            try:
                new = self._load()
            except PluginLoadError:
                self.manifest = previous_manifest
                raise
            if self._started:
                self._stop_script(old)
            if old.sandbox is not None:
                old.sandbox.close()
            self._script = new
            self.version = manifest.version
            self._reconcile(old, new)
            self.reloads += 1
            if self._started:
                self._start_script()
        self.log.info("Lua plugin %s reloaded (version %s)", self.name, self.version)
        self._publish("system", {"type": "plugin_reloaded", "plugin": self.name, "version": self.version})
        return True

    def _reconcile(self, old: LoadedScript, new: LoadedScript) -> None:
        """Bring the kernel's tools and channels in line with the new script."""
        kernel = kernel_of(self.sdk)
        tools = getattr(kernel, "tools", None)
        for name, tool in old.tools.items():
            kept = new.tools.get(name)
            if kept is None or kept.definition.to_dict() != tool.definition.to_dict():
                if tools is not None:
                    tools.remove(name)
                else:
                    self.log.warning("tool %s changed but the kernel is not reachable to remove it", name)
        for name, tool in new.tools.items():
            before = old.tools.get(name)
            if (before is None or before.definition.to_dict() != tool.definition.to_dict()) \
                    and self._tool_registry is not None:
                self._tool_registry.add(tool.definition)
        channels = getattr(kernel, "channels", None)
        same_out = {k: v.definition.to_dict() for k, v in old.outputs.items()} == \
            {k: v.definition.to_dict() for k, v in new.outputs.items()}
        same_in = {k: v.definition.to_dict() for k, v in old.inputs.items()} == \
            {k: v.definition.to_dict() for k, v in new.inputs.items()}
        if same_out and same_in:
            return
        if channels is None:
            self.log.warning("channels of %s changed but the kernel is not reachable; restart to apply", self.name)
            return
        channels.remove_plugin(self.name)
        for registry, table in ((self._output_registry, new.outputs), (self._input_registry, new.inputs)):
            if registry is not None:
                for channel in table.values():
                    registry.add(channel.definition)

    async def _watch(self, key: tuple[int, ...]) -> None:
        """Poll the files' stat; reload when they changed (errors are logged, never raised)."""
        while True:
            await asyncio.sleep(self.watch_interval)
            now = stat_key(self.directory)
            if now == key:
                continue
            key = now
            try:
                await asyncio.to_thread(self.reload)
            except PluginLoadError as exc:
                self.errors.append(str(exc))
                self.log.error("reload of %s failed, the previous version keeps running: %s", self.name, exc)

    # ------------------------------------------------------------------ introspection

    def describe(self) -> dict[str, Any]:
        """What the script registered (for listings and tests)."""
        s = self._script
        return {
            "name": self.name, "version": self.version, "directory": str(self.directory),
            "tools": sorted(s.tools), "stages": {k: len(v) for k, v in s.stages.items() if v},
            "output_channels": sorted(s.outputs), "input_channels": sorted(s.inputs),
            "capabilities": list(self.manifest.capabilities), "errors": list(self.errors),
        }
