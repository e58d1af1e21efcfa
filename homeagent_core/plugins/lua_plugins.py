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
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from homeagent_sdk import hookimpl
from homeagent_sdk.errors import HomeAgentError, PluginLoadError, PluginValidationError, ToolError
from homeagent_sdk.types import (
    ChannelDef,
    ConfigDef,
    InjectOptions,
    Priority,
    StageContext,
    ToolCall,
    ToolDef,
    ToolResult,
)

if TYPE_CHECKING:
    from homeagent_core.providers.lua import LuaSandbox

__all__ = [
    "CAPABILITIES",
    "DEFAULT_HTTP_MAX_BYTES",
    "DEFAULT_HTTP_TIMEOUT",
    "LuaPlugin",
    "LuaPluginManifest",
    "discover_lua_plugins",
    "read_manifest",
]

log = logging.getLogger(__name__)

DEFAULT_HTTP_TIMEOUT = 15.0
"""Seconds one ``sdk.http`` request may take (connect + read)."""
DEFAULT_HTTP_MAX_BYTES = 4 * 1024 * 1024
"""Largest response body ``sdk.http`` returns; a bigger one is an error."""
DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds a data function waits for the SDK service it calls."""

#: Capability groups a Lua plugin may declare (as for out-of-process plugins, plus ``http``).
CAPABILITIES: tuple[str, ...] = (
    "doc_memory", "events", "http", "io", "knowledge", "llm", "memory", "plugin_mgr",
    "settings_cross", "social", "text_memory",
)
_STAGES = ("on_input", "pre_action", "post_action", "before_toolcall", "after_toolcall",
           "before_output", "after_output")
_SCOPES = ("", "global", "own_tools")
# Stage-context fields a Lua handler sees, and those it may change.
_CTX_FIELDS = ("raw_message", "source", "channel", "user_id", "group_id", "phase", "llm_text",
               "final_text", "no_memory", "response", "tool_calls", "tool_results", "extra", "drop",
               "interrupt")
_CTX_WRITABLE = frozenset(_CTX_FIELDS) - {"phase", "source", "channel", "interrupt"}

# The glue between Python and the script, loaded into the plugin's sandbox. Python callables
# stay inside these closures (upvalues): scripts never see them.
_GLUE = r"""
local json_encode, json_decode, json_null, json_array = json.encode, json.decode, json.null, json.array
local select, type, tostring, error, pairs = select, type, tostring, error, pairs

local function pack(...)
  local n = select("#", ...)
  local out = json_array({})
  for i = 1, n do
    local v = select(i, ...)
    if v == nil then v = json_null end
    out[i] = v
  end
  return json_encode(out)
end

local function split_def(def)
  if type(def) ~= "table" then return "{}", nil end
  local copy, cleaner = {}, nil
  for k, v in pairs(def) do
    if k == "cleaner" then cleaner = v elseif type(v) ~= "function" then copy[k] = v end
  end
  return json_encode(copy), cleaner
end

local function as_text(v)
  if v == nil then return "" end
  if type(v) == "table" then return json_encode(v) end
  return tostring(v)
end

local api = {}

function api.build(py_call, py_register)
  local function data(op)
    return function(...)
      local rj, err = py_call(op, pack(...))
      if err ~= nil then return nil, err end
      if rj == nil then return nil, nil end
      local v, derr = json_decode(rj)
      if derr ~= nil then return nil, derr end
      return v, nil
    end
  end
  local function check(err) if err ~= nil then error(err, 3) end end
  local sdk = {}
  function sdk.log(level, msg)
    if msg == nil then level, msg = "info", level end
    py_register("log", tostring(level), tostring(msg))
  end
  function sdk.register_tool(name, def, handler)
    local dj, cleaner = split_def(def)
    check(py_register("tool", name, dj, handler, cleaner))
  end
  function sdk.register_stage(stage, handler, scope)
    check(py_register("stage", stage, handler, scope))
  end
  function sdk.register_output_channel(name, caps, desc, def, handler)
    local dj, cleaner = split_def(def)
    check(py_register("output", name, caps, desc, dj, handler, cleaner))
  end
  function sdk.register_input_channel(name, def)
    local dj, cleaner = split_def(def)
    check(py_register("input", name, dj, cleaner))
  end
  function sdk.register_api(name) check(py_register("api", name)) end
  function sdk.set_auto_restart(flag) check(py_register("auto_restart", flag and true or false)) end
  sdk.get_setting = data("get_setting")
  sdk.set_setting = data("set_setting")
  sdk.inject_text = data("inject_text")
  sdk.inject_interrupt = data("inject_interrupt")
  sdk.inject_text_no_memory = data("inject_text_no_memory")
  local groups = {
    settings = { "get_core", "set_core", "list_core", "get_plugin", "set_plugin", "list_plugin",
                 "list", "defs", "dump", "plugins", "register_def" },
    memory = { "recall", "commit", "introspect", "merge", "purge" },
    doc = { "query", "insert", "remove", "stats" },
    knowledge = { "search", "add", "list" },
    text_memory = { "append" },
    llm = { "list_sources", "set_source", "current_source", "chat" },
    social = { "get_person", "get_network", "get_trait", "get_relations", "list_persons" },
    http = { "get", "post" },
  }
  for group, names in pairs(groups) do
    local t = {}
    for _, n in pairs(names) do t[n] = data(group .. "." .. n) end
    sdk[group] = t
  end
  sdk.json = { encode = json_encode, decode = json_decode, null = json_null, array = json_array }
  return sdk
end

function api.tool(h, args_json)
  local args = json_decode(args_json)
  local r, e = h(args)
  if e ~= nil then return { false, as_text(e) } end
  return { true, as_text(r) }
end

function api.stage(h, ctx_json, call_json, result_json)
  local ctx = json_decode(ctx_json)
  local call = call_json and json_decode(call_json) or nil
  local result = result_json and json_decode(result_json) or nil
  local r, e = h(ctx, call, result)
  return { json_encode(ctx), call and json_encode(call) or nil, result and json_encode(result) or nil,
           r ~= nil and as_text(r) or nil, e ~= nil and as_text(e) or nil }
end

function api.channel(h, payload, meta_json, kind)
  local r, e = h(payload, json_decode(meta_json), kind)
  if e ~= nil then return { false, as_text(e) } end
  return { true, as_text(r) }
end

function api.cleaner(h, text)
  local r = h(text)
  if r == nil then return "" end
  return tostring(r)
end

function api.invoke(f, ...) return f(...) end

function api.field(t, k) if type(t) == "table" then return t[k] end return nil end

return api
"""


@dataclass
class LuaPluginManifest:
    """The fields of ``plugin.json`` a Lua plugin uses (unknown keys are ignored)."""

    name: str
    version: str
    entry: str = "main.lua"
    description: str = ""
    capabilities: list[str] = field(default_factory=list)
    settings: list[ConfigDef] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)


def read_manifest(directory: Path) -> LuaPluginManifest:
    """Read and check ``<directory>/plugin.json``.

    Raises:
        PluginLoadError: missing or malformed file, missing ``name``/``version``, an entry
            other than ``main.lua``, or an unknown capability (the message lists valid ones).
    """
    path = directory / "plugin.json"
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise PluginLoadError(f"{path} is missing: a Lua plugin needs plugin.json next to main.lua",
                              plugin_name=directory.name) from None
    except orjson.JSONDecodeError as exc:
        raise PluginLoadError(f"{path} is not valid JSON: {exc}", plugin_name=directory.name) from None
    if not isinstance(data, dict):
        raise PluginLoadError(f"{path} must hold a JSON object", plugin_name=directory.name)
    name = data.get("name") or directory.name
    version = data.get("version")
    if not isinstance(name, str) or not isinstance(version, str) or not version:
        raise PluginLoadError(f"{path}: 'name' and 'version' must be non-empty strings "
                              f'(e.g. {{"name": "{directory.name}", "version": "0.1.0", "entry": "main.lua"}})',
                              plugin_name=directory.name)
    entry = data.get("entry") or "main.lua"
    if entry != "main.lua":
        raise PluginLoadError(f"{path}: entry is {entry!r}; a Lua plugin's entry must be 'main.lua'",
                              plugin_name=name)
    caps = data.get("capabilities") or []
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        raise PluginLoadError(f"{path}: 'capabilities' must be a list of strings", plugin_name=name)
    unknown = sorted(set(caps) - set(CAPABILITIES) - {"core"})
    if unknown:
        raise PluginLoadError(f"{path}: unknown capabilities {unknown}; valid: {', '.join(CAPABILITIES)}",
                              plugin_name=name)
    settings: list[ConfigDef] = []
    for i, spec in enumerate(data.get("settings") or []):
        if not isinstance(spec, dict) or not isinstance(spec.get("key"), str):
            raise PluginLoadError(f"{path}: settings[{i}] must be an object with a 'key' "
                                  '(e.g. {"key": "city", "type": "string", "default": "杭州"})', plugin_name=name)
        settings.append(ConfigDef.from_dict(spec))
    return LuaPluginManifest(name=name, version=version, entry=entry, description=str(data.get("description") or ""),
                             capabilities=list(caps), settings=settings, raw=data)


@dataclass
class _Tool:
    definition: ToolDef
    handler: Any
    cleaner: Any


@dataclass
class _Stage:
    handler: Any
    scope: str


@dataclass
class _Channel:
    definition: ChannelDef
    handler: Any
    cleaner: Any


class _Script:
    """One loaded version of ``main.lua``: its sandbox and what it registered."""

    def __init__(self) -> None:
        self.sandbox: LuaSandbox | None = None
        self.api: Any = None
        self.sdk_table: Any = None
        self.module: Any = None
        self.tools: dict[str, _Tool] = {}
        self.stages: dict[str, list[_Stage]] = {}
        self.outputs: dict[str, _Channel] = {}
        self.inputs: dict[str, _Channel] = {}
        self.apis: list[str] = []
        self.setting_defs: list[ConfigDef] = []
        self.auto_restart = False
        self.fingerprint = ""


def _fingerprint(directory: Path) -> str:
    h = hashlib.sha256()
    for name in ("plugin.json", "main.lua"):
        with contextlib.suppress(OSError):
            h.update((directory / name).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _stat_key(directory: Path) -> tuple[int, ...]:
    out: list[int] = []
    for name in ("plugin.json", "main.lua"):
        try:
            st = (directory / name).stat()
            out += [st.st_mtime_ns, st.st_size]
        except OSError:
            out += [0, 0]
    return tuple(out)


def _fix_schema(value: Any) -> Any:
    """Undo Lua's empty-table ambiguity in a JSON schema (``properties: []`` -> ``{}``)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in ("properties", "additionalProperties", "items") and v == []:
                out[k] = {} if k != "additionalProperties" else True
            else:
                out[k] = _fix_schema(v)
        return out
    if isinstance(value, list):
        return [_fix_schema(v) for v in value]
    return value


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _loads_obj(text: Any) -> dict[str, Any]:
    data = orjson.loads(_text(text) or "{}")
    return data if isinstance(data, dict) else {}


class LuaPlugin:
    """A ``main.lua`` plugin wrapped as a pluggy plugin object.

    :param directory: the plugin folder (``plugin.json`` + ``main.lua``).
    :param instruction_limit: Lua VM instructions one call may execute.
    :param memory_limit: bytes the plugin's Lua state may allocate.
    :param http_timeout: seconds per ``sdk.http`` request.
    :param http_max_bytes: largest ``sdk.http`` response body.
    :param watch_interval: seconds between checks of the files for changes once started
        (``0`` disables the watcher; :meth:`reload` can always be called).

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
    ) -> None:
        from homeagent_core.providers.lua import DEFAULT_INSTRUCTION_LIMIT, DEFAULT_MEMORY_LIMIT

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
        self.log = logging.getLogger(f"homeagent.plugin.{self.name}")
        self.errors: list[str] = []
        self.reloads = 0
        self._lock = threading.RLock()
        self._sdk: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False
        self._watcher: asyncio.Task[None] | None = None
        self._tool_registry: Any = None
        self._input_registry: Any = None
        self._output_registry: Any = None
        self._warned: set[str] = set()
        self._loading: _Script | None = None
        self._script = self._load()

    # ------------------------------------------------------------------ loading

    @property
    def chunk(self) -> str:
        return f"{self.name}/main.lua"

    def _load(self) -> _Script:
        """Run ``main.lua`` in a fresh sandbox, buffering its registrations."""
        from homeagent_core.providers.lua import LuaSandbox, LuaScriptError

        script = _Script()
        script.fingerprint = _fingerprint(self.directory)
        path = self.directory / "main.lua"
        try:
            source = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PluginLoadError(f"{path} is missing", plugin_name=self.name) from None
        except UnicodeDecodeError as exc:
            raise PluginLoadError(f"{path} is not UTF-8 text: {exc}", plugin_name=self.name) from None
        sandbox = LuaSandbox(self.name, instruction_limit=self.instruction_limit,
                             memory_limit=self.memory_limit, logger=self.log)
        script.sandbox = sandbox
        self._loading = script
        # The body runs as a function of `sdk`; the prefix sits on line 1 so line numbers match.
        wrapped = "return function(sdk, ...) " + source + "\nend"
        try:
            script.api = sandbox.load(_GLUE, "homeagent-lua-glue")
            script.sdk_table = sandbox.call(
                script.api.build, self._bridge_call, lambda *a: self._bridge_register(script, *a),
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
            self._loading = None
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

    def _bridge_register(self, script: _Script, kind: str, *args: Any) -> str | None:
        """Called by the script's ``sdk.register_*``; returns an error text or None."""
        try:
            if kind == "log":
                self._lua_log(_text(args[0]), _text(args[1]))
            elif kind == "tool":
                self._register_tool(script, *args)
            elif kind == "stage":
                self._register_stage(script, *args)
            elif kind == "output":
                self._register_output(script, *args)
            elif kind == "input":
                self._register_input(script, *args)
            elif kind == "api":
                script.apis.append(_text(args[0]))
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

    def _need_function(self, script: _Script, value: Any, what: str) -> Any:
        assert script.sandbox is not None
        if value is None or script.sandbox.kind(value) != "function":
            raise ValueError(f"{what} needs a handler function")
        return value

    def _register_tool(self, script: _Script, name: Any, def_json: Any, handler: Any, cleaner: Any = None) -> None:
        from homeagent_core.agent.tools import TOOL_NAME_RE

        name = _text(name)
        if not TOOL_NAME_RE.match(name):
            raise ValueError(f"register_tool: tool name {name!r} is invalid: use 1-64 characters from "
                             "a-z, A-Z, 0-9, '_' and '-'")
        if name in script.tools:
            raise ValueError(f"register_tool: tool {name!r} is already registered by this plugin")
        self._need_function(script, handler, f"register_tool({name!r})")
        spec = _loads_obj(def_json)
        params = _fix_schema(spec.get("parameters") or {"type": "object", "properties": {}})
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
        script.tools[name] = _Tool(definition, handler, cleaner)
        if self._script_is_live(script) and self._tool_registry is not None:
            self._tool_registry.add(definition)

    def _register_stage(self, script: _Script, stage: Any, handler: Any, scope: Any = None) -> None:
        stage, scope = _text(stage), _text(scope)
        if stage not in _STAGES:
            raise ValueError(f"register_stage: unknown stage {stage!r}; stages are {', '.join(_STAGES)}")
        if scope not in _SCOPES:
            raise ValueError(f"register_stage: scope must be nil, 'global' or 'own_tools', got {scope!r}")
        self._need_function(script, handler, f"register_stage({stage!r})")
        script.stages.setdefault(stage, []).append(_Stage(handler, scope))

    def _register_output(self, script: _Script, name: Any, caps: Any, desc: Any, def_json: Any,
                         handler: Any, cleaner: Any = None) -> None:
        name = _text(name)
        self._need_function(script, handler, f"register_output_channel({name!r})")
        spec = _loads_obj(def_json)
        channel = ChannelDef(
            name=name, description=_text(desc), caps=int(caps or 1), sync=bool(spec.get("sync", False)),
            no_memory=bool(spec.get("no_memory")), context_policy=str(spec.get("context_policy") or ""),
            recall_policy=str(spec.get("recall_policy") or ""), help=str(spec.get("help") or ""),
            send=self._sender(name), cleaner=self._cleaner("output", name) if cleaner is not None else None,
        )
        script.outputs[name] = _Channel(channel, handler, cleaner)
        if self._script_is_live(script) and self._output_registry is not None:
            self._output_registry.add(channel)

    def _register_input(self, script: _Script, name: Any, def_json: Any, cleaner: Any = None) -> None:
        name = _text(name)
        spec = _loads_obj(def_json)
        channel = ChannelDef(
            name=name, description=str(spec.get("description") or ""), no_memory=bool(spec.get("no_memory")),
            context_policy=str(spec.get("context_policy") or ""), recall_policy=str(spec.get("recall_policy") or ""),
            cleaner=self._cleaner("input", name) if cleaner is not None else None,
        )
        script.inputs[name] = _Channel(channel, None, cleaner)
        if self._script_is_live(script) and self._input_registry is not None:
            self._input_registry.add(channel)

    def _script_is_live(self, script: _Script) -> bool:
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
        events = getattr(self._sdk, "events", None)
        if events is None or self._loop is None:
            return
        try:
            if _on_loop(self._loop):
                events.publish(name, data)
            else:
                self._loop.call_soon_threadsafe(events.publish, name, data)
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
        ok, text = res[1], _text(res[2])
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

            table = {"tool": self._script.tools, "output": self._script.outputs, "input": self._script.inputs}[kind]
            entry = table.get(name)
            if entry is None or entry.cleaner is None:
                return text
            try:
                return _text(self._call(f"cleaner of {kind} {name}", self._script.api.cleaner, entry.cleaner, text))
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
                raise ToolError(f"output channel {name}: {_text(res[2])}")
            return _text(res[2])

        return send

    def _run_stage(self, stage: str, ctx: StageContext, call: ToolCall | None, result: ToolResult | None) -> str | None:
        """Run this plugin's Lua handlers of ``stage`` in order, syncing writes back."""
        from homeagent_core.providers.lua import LuaScriptError

        rejection: str | None = None
        for entry in list(self._script.stages.get(stage, ())):
            if entry.scope == "own_tools" and call is not None and not self._owns(call):
                continue
            before = _ctx_view(ctx)
            ctx_json = orjson.dumps(before).decode()
            call_json = orjson.dumps(call.to_dict()).decode() if call is not None else None
            result_json = orjson.dumps(result.to_dict()).decode() if result is not None else None
            try:
                res = self._call(f"{stage} handler", self._script.api.stage, entry.handler, ctx_json, call_json,
                                 result_json)
            except LuaScriptError as exc:
                ctx.errors.append(f"{stage}: plugin {self.name}: {self._report(f'{stage} handler', exc)}")
                continue
            _apply_ctx(ctx, before, _loads_obj(res[1]))
            if call is not None and res[2] is not None:
                changed = _loads_obj(res[2])
                if isinstance(changed.get("arguments"), dict):
                    call.arguments = changed["arguments"]
            if result is not None and res[3] is not None:
                changed = _loads_obj(res[3])
                if isinstance(changed.get("result"), str):
                    result.result = changed["result"]
                if isinstance(changed.get("success"), bool):
                    result.success = changed["success"]
            if res[5] is not None:
                ctx.errors.append(f"{stage}: plugin {self.name}: {_text(res[5])}")
            elif res[4] is not None and stage == "before_toolcall" and rejection is None:
                rejection = _text(res[4])
        return rejection

    def _owns(self, call: ToolCall) -> bool:
        return call.plugin == self.name or call.name in self._script.tools

    async def _stage(self, stage: str, ctx: StageContext, call: ToolCall | None = None,
                     result: ToolResult | None = None) -> str | None:
        if not self._script.stages.get(stage):
            return None
        return await asyncio.to_thread(self._run_stage, stage, ctx, call, result)

    # ------------------------------------------------------------------ data functions

    def _bridge_call(self, op: Any, args_json: Any) -> tuple[str | None, str | None]:
        """Called by the script's data functions; returns ``(result JSON, error text)``."""
        op = _text(op)
        try:
            args = orjson.loads(_text(args_json) or "[]")
            if isinstance(args, dict):  # an empty Lua array encodes as {}
                args = []
            value = self._dispatch(op, args)
        except _Denied as exc:
            return None, str(exc)
        except (HomeAgentError, ValueError, TypeError, KeyError, OSError, TimeoutError) as exc:
            return None, f"{op}: {exc}"
        if value is None:
            return None, None
        return orjson.dumps(value, default=_jsonable).decode(), None

    def _allowed(self, op: str, capability: str) -> None:
        caps = self.manifest.capabilities
        if capability == "http":
            if "http" not in caps:
                raise _Denied(f'插件 {self.name} 调用 {op} 被拒：缺少 "http" 能力。请在 plugin.json 的 capabilities '
                              f'数组中声明它 (plugin {self.name} may not use sdk.http: add "http" to the '
                              "capabilities array of plugin.json)")
            return
        if caps and capability not in caps:
            raise _Denied(f'插件 {self.name} 调用 {op} 被拒：缺少 "{capability}" 能力。请在 plugin.json 的 '
                          f"capabilities 数组中声明它（可用能力：{', '.join(c for c in CAPABILITIES if c != 'http')}）")

    def _dispatch(self, op: str, args: list[Any]) -> Any:
        group, _, method = op.partition(".")
        if op in ("get_setting", "set_setting"):
            return self._own_setting(op, args)
        if op == "settings.register_def" and self._sdk is None:
            spec = args[0] if args and isinstance(args[0], dict) else {}
            self._loading_script().setting_defs.append(ConfigDef.from_dict(spec))
            return True
        if op.startswith("inject_"):
            return self._inject(op, args)
        if group == "http":
            self._allowed(op, "http")
            return self._http(method, args)
        if group == "settings":
            return self._settings(method, args)
        capability = {"memory": "memory", "doc": "doc_memory", "knowledge": "knowledge",
                      "text_memory": "text_memory", "llm": "llm", "social": "social"}[group]
        self._allowed(op, capability)
        return self._service(group, method, args)

    def _loading_script(self) -> _Script:
        script = getattr(self, "_loading", None)
        if script is None:
            raise HomeAgentError("settings.register_def: no script is loading")
        return script

    def _config(self) -> Any:
        sdk = self._sdk
        return getattr(sdk, "config", None) or getattr(getattr(sdk, "services", None), "config", None)

    def _own_setting(self, op: str, args: list[Any]) -> Any:
        """``get_setting(key)`` / ``set_setting(key, value)`` in ``plugin.<name>.*``.

        A key the plugin did not declare is declared on first write as a ``json`` setting
        (Lua plugins own their namespace, as in the original); reading one gives nil.
        """
        from homeagent_sdk.errors import ConfigError, UnknownConfigKey

        settings = self._require_sdk(op).settings
        key = str(args[0]) if args else ""
        if not key:
            raise ValueError(f"{op} needs a key")
        if op == "get_setting":
            try:
                return settings.get(key)
            except ConfigError:
                return None
        value = args[1] if len(args) > 1 else None
        try:
            settings.set(key, value)
        except UnknownConfigKey:
            config = self._config()
            if config is None:
                raise
            config.define_plugin(self.name, ConfigDef(key=key, type="json", description="set by the Lua script"))
            settings.set(key, value)
        return True

    def _require_sdk(self, op: str) -> Any:
        if self._sdk is None:
            raise HomeAgentError(f"sdk.{op} is only available once the plugin is started (call it from start() "
                                 "or a handler, not at load time)")
        return self._sdk

    def _run_async(self, coro: Any) -> Any:
        """Run a coroutine of the (async) SDK from the worker thread a Lua call runs in."""
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            raise HomeAgentError("the plugin's event loop is not running")
        if _on_loop(loop):
            coro.close()
            raise HomeAgentError("Lua data functions cannot run on the event-loop thread")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=self.call_timeout)

    def _inject(self, op: str, args: list[Any]) -> Any:
        self._allowed(op, "io")
        sdk = self._require_sdk(op)
        source, channel, text = [*args, None, None, None][:3]
        if text is None:  # inject_text(channel, text) short form
            source, channel, text = None, source, channel
        channel = str(channel or self.name)
        io = _io_of(sdk)
        if io is None:
            raise HomeAgentError("input injection is not available here (the kernel is not running)")
        if op == "inject_interrupt":
            opts = InjectOptions(priority=Priority.L1, no_memory=True)
            self._run_async(io.inject_interrupt(str(text), channel, opts))
        else:
            opts = InjectOptions(no_memory=op == "inject_text_no_memory")
            self._run_async(io.inject_text(str(text), channel, opts))
        if source:
            self.log.debug("injected on %s from %s", channel, source)
        return True

    def _settings(self, method: str, args: list[Any]) -> Any:
        sdk = self._require_sdk(f"settings.{method}")
        own = sdk.settings
        a = [*args, None, None, None]
        if method == "list":
            return own.all()
        if method == "register_def":
            spec = a[0] if isinstance(a[0], dict) else {}
            config = self._config()
            if config is None:
                raise HomeAgentError("settings.register_def: the config store is not available to this plugin")
            return config.define_plugin(self.name, ConfigDef.from_dict(spec)).to_dict()
        self._allowed(f"settings.{method}", "settings_cross")
        config = self._config()
        if config is None:
            raise HomeAgentError(f"settings.{method}: the config store is not available to this plugin")
        if method == "defs":
            return [d.to_dict() for d in config.definitions(f"plugin.{self.name}.{a[0] or ''}")]
        if method == "get_core":
            return config.get(f"core.{a[0]}")
        if method == "set_core":
            config.set(f"core.{a[0]}", a[1])
            return True
        if method == "list_core":
            return config.items(f"core.{a[0] or ''}")
        if method == "get_plugin":
            return config.get(f"plugin.{a[0]}.{a[1]}")
        if method == "set_plugin":
            config.set(f"plugin.{a[0]}.{a[1]}", a[2])
            return True
        if method == "list_plugin":
            return config.items(f"plugin.{a[0]}.{a[1] or ''}")
        if method == "dump":
            secret = {d.key for d in config.definitions("") if d.secret}
            return {k: v for k, v in config.items("").items() if k not in secret}
        if method == "plugins":
            return sorted({k.split(".")[1] for k in config.items("plugin.") if k.count(".") >= 2})
        raise ValueError(f"unknown settings function {method!r}")

    _SERVICE_CALLS: ClassVar[dict[str, tuple[str, str, Any]]] = {
        # op -> (service attribute, method, empty value when the service is not running)
        "memory.recall": ("memory", "recall", {"entities": [], "relations": []}),
        "memory.commit": ("memory", "commit", None),
        "memory.introspect": ("memory", "introspect", {}),
        "memory.merge": ("memory", "merge", {"merged": 0}),
        "memory.purge": ("memory", "purge", {"purged": 0}),
        "doc.query": ("doc", "query", []),
        "doc.insert": ("doc", "commit", None),
        "doc.remove": ("doc", "remove", None),
        "doc.stats": ("doc", "stats", {}),
        "knowledge.search": ("knowledge", "search", []),
        "knowledge.add": ("knowledge", "create", None),
        "knowledge.list": ("knowledge", "list", []),
        "text_memory.append": ("memory", "append_text", None),
        "llm.list_sources": ("llm", "list_sources", []),
        "llm.set_source": ("llm", "set_source", None),
        "llm.current_source": ("llm", "current_source", ""),
        "llm.chat": ("llm", "quick_chat", ""),
        "social.get_person": ("social", "person", {}),
        "social.get_network": ("social", "network", {}),
        "social.get_trait": ("social", "trait", {"value": "", "found": False}),
        "social.get_relations": ("social", "relations", []),
        "social.list_persons": ("social", "persons", []),
    }

    def _service(self, group: str, method: str, args: list[Any]) -> Any:
        op = f"{group}.{method}"
        attr, name, empty = self._SERVICE_CALLS[op]
        sdk = self._require_sdk(op)
        service = getattr(sdk, attr, None)
        fn = None
        if service is not None:
            try:
                fn = getattr(service, name, None)
            except HomeAgentError:  # a service the running agent does not have
                fn = None
        if fn is None:
            if op not in self._warned:
                self._warned.add(op)
                self.log.warning("sdk.%s: %s is not available in this agent; returning an empty value", op, attr)
            return empty
        call_args = _adapt_args(op, args)
        value = fn(*call_args)
        if asyncio.iscoroutine(value):
            value = self._run_async(value)
        return value

    def _http(self, method: str, args: list[Any]) -> dict[str, Any]:
        import httpx

        a = [*args, None, None, None, None]
        url = str(a[0] or "")
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"http.{method}: only http:// and https:// URLs are allowed, got {url[:80]!r}")
        headers = a[1] if method == "get" and isinstance(a[1], dict) else {}
        body: bytes | None = None
        if method == "post":
            raw = a[1]
            body = (orjson.dumps(raw) if isinstance(raw, dict | list) else _text(raw).encode("utf-8"))
            headers = a[3] if isinstance(a[3], dict) else {}
            headers = {**headers, "content-type": str(a[2] or "application/json")}
        verb = "GET" if method == "get" else "POST"
        sent = {str(k): str(v) for k, v in headers.items()}
        with httpx.Client(timeout=self.http_timeout, follow_redirects=True, max_redirects=5) as client, \
                client.stream(verb, url, headers=sent, content=body) as resp:
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > self.http_max_bytes:
                    raise ValueError(f"http.{method}: response from {url} exceeds {self.http_max_bytes} bytes")
                chunks.append(chunk)
            return {"status": resp.status_code, "body": b"".join(chunks).decode("utf-8", "replace"),
                    "headers": dict(resp.headers.items())}

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def register_settings(self, registry: Any) -> None:
        for definition in [*self.manifest.settings, *self._script.setting_defs]:
            registry.add(definition)

    @hookimpl
    def register_tools(self, registry: Any) -> None:
        self._tool_registry = registry
        for tool in self._script.tools.values():
            registry.add(tool.definition)

    @hookimpl
    def register_output_channels(self, registry: Any) -> None:
        self._output_registry = registry
        for channel in self._script.outputs.values():
            registry.add(channel.definition)

    @hookimpl
    def register_input_channels(self, registry: Any) -> None:
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
        self._sdk = sdk
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._start_script)
        self._started = True
        if self.watch_interval > 0:
            self._watcher = self._loop.create_task(self._watch(_stat_key(self.directory)),
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

    def _stop_script(self, script: _Script) -> None:
        from homeagent_core.providers.lua import LuaScriptError

        assert script.sandbox is not None
        stop = script.sandbox.field(script.module, "stop")
        if stop is None:
            return
        with self._lock:
            try:
                script.sandbox.call(script.api.invoke, stop, script=self.chunk)
            except (LuaScriptError, UnicodeDecodeError) as exc:
                self._report("stop", exc)

    # ------------------------------------------------------------------ reload

    def changed(self) -> bool:
        """True when ``main.lua`` or ``plugin.json`` differ from the loaded version."""
        return _fingerprint(self.directory) != self._script.fingerprint

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
            self._script = new
            self.version = manifest.version
            self._reconcile(old, new)
            self.reloads += 1
            if self._started:
                self._start_script()
        self.log.info("Lua plugin %s reloaded (version %s)", self.name, self.version)
        self._publish("system", {"type": "plugin_reloaded", "plugin": self.name, "version": self.version})
        return True

    def _reconcile(self, old: _Script, new: _Script) -> None:
        """Bring the kernel's tools and channels in line with the new script."""
        kernel = _kernel_of(self._sdk)
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
            now = _stat_key(self.directory)
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


class _Denied(Exception):
    """A capability the plugin did not declare."""


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _kernel_of(sdk: Any) -> Any:
    """The running kernel behind a privileged scoped SDK (``sdk.services.kernel``), or None."""
    return getattr(getattr(sdk, "services", None), "kernel", None)


def _io_of(sdk: Any) -> Any:
    kernel = _kernel_of(sdk)
    io = getattr(kernel, "io", None)
    if io is not None:
        return io
    try:
        return getattr(sdk, "io", None)
    except HomeAgentError:
        return None


def _adapt_args(op: str, args: list[Any]) -> list[Any]:
    """Lua argument lists -> the Python SDK's parameters where they differ."""
    from homeagent_sdk.types import Triple

    if op == "memory.recall":
        query = args[0] if args else []
        keywords = query if isinstance(query, list) else [str(query)]
        return [keywords, int(args[1]) if len(args) > 1 and args[1] else 2]
    if op == "memory.commit":
        raw = args[0] if args else []
        if isinstance(raw, dict):
            raw = raw.get("triples", [])
        return [[Triple.from_dict(t) for t in raw if isinstance(t, dict)]]
    if op == "doc.insert":
        doc = args[0] if args and isinstance(args[0], dict) else {}
        return [str(doc.get("title", "")), str(doc.get("content", ""))]
    return [a for a in args if a is not None]


def _jsonable(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(value, set | tuple):
        return list(value)
    return str(value)


def _ctx_view(ctx: StageContext) -> dict[str, Any]:
    """The stage-context table a Lua handler sees (None fields are left out: nil in Lua)."""
    out: dict[str, Any] = {}
    for name in _CTX_FIELDS:
        value = getattr(ctx, name)
        if value is None:
            continue
        if name == "tool_calls" or name == "tool_results":
            value = [item.to_dict() for item in value]
        out[name] = value
    return out


def _apply_ctx(ctx: StageContext, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Write back only the writable fields the handler changed (concurrent handlers)."""
    for name in _CTX_WRITABLE:
        old, new = before.get(name), after.get(name)
        if name == "extra" and new == []:
            new = {}
        if name in ("tool_calls", "tool_results") and new == {}:
            new = []
        if new == old:
            continue
        if name == "tool_calls":
            ctx.tool_calls = [ToolCall.from_dict(c) for c in new or [] if isinstance(c, dict)]
        elif name == "tool_results":
            ctx.tool_results = [ToolResult.from_dict(r) for r in new or [] if isinstance(r, dict)]
        elif name in ("no_memory", "drop"):
            setattr(ctx, name, bool(new))
        elif name == "extra":
            ctx.extra = new if isinstance(new, dict) else {}
        elif name == "response":
            ctx.response = None if new is None else str(new)
        else:
            setattr(ctx, name, "" if new is None else str(new))


def discover_lua_plugins(
    data_dir: Path | str,
    *,
    instruction_limit: int | None = None,
    memory_limit: int | None = None,
    http_timeout: float = DEFAULT_HTTP_TIMEOUT,
    http_max_bytes: int = DEFAULT_HTTP_MAX_BYTES,
    watch_interval: float = 2.0,
    on_error: Callable[[str, Exception], None] | None = None,
) -> list[tuple[str, LuaPlugin]]:
    """Load every ``<data>/plugins/<name>/`` whose entry is ``main.lua``.

    Returns ``(name, plugin object)`` pairs for the app to register. A plugin that fails to
    load is passed to ``on_error(name, error)`` (default: logged) and skipped.
    """
    root = Path(data_dir) / "plugins"
    found: list[tuple[str, LuaPlugin]] = []
    if not root.is_dir():
        return found
    for directory in sorted(p for p in root.iterdir() if p.is_dir()):
        if not (directory / "main.lua").is_file():
            continue
        try:
            manifest_entry = orjson.loads((directory / "plugin.json").read_bytes()).get("entry", "main.lua")
        except (OSError, orjson.JSONDecodeError, AttributeError):
            manifest_entry = "main.lua"  # read_manifest reports it properly below
        if manifest_entry not in ("main.lua", "", None):
            continue
        started = time.perf_counter()
        try:
            plugin = LuaPlugin(directory, instruction_limit=instruction_limit, memory_limit=memory_limit,
                               http_timeout=http_timeout, http_max_bytes=http_max_bytes,
                               watch_interval=watch_interval)
        except PluginLoadError as exc:
            if on_error is not None:
                on_error(directory.name, exc)
            else:
                log.error("Lua plugin %s not loaded: %s", directory.name, exc)
            continue
        log.debug("Lua plugin %s loaded in %.1f ms", plugin.name, (time.perf_counter() - started) * 1000)
        found.append((plugin.name, plugin))
    return found
