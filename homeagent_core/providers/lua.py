"""Sandboxed Lua 5.4 runtime (lupa) shared by LLM adapters and Lua plugins.

Why a sandbox: adapter scripts are user-editable files in ``<data>/adapters/`` and may come
from anywhere, so they get a fresh environment holding only pure functions (``string`` without
``dump``, ``table``, ``math``, ``utf8``, a hooked ``coroutine``, ``pairs``...), plus the VM
globals ``json.encode`` / ``json.decode`` / ``json.null`` / ``json.array`` / ``log`` and the
``compat`` helpers for OpenAI-shaped payloads. There is no ``os``, ``io``, ``require``,
``load``, ``dofile``, ``debug``, ``package`` or ``python``; Python objects are never handed to
scripts (Python callables sit behind Lua closures, and an attribute filter refuses every
attribute access should one leak). Text chunks only: binary (``string.dump``) chunks are
rejected.

Limits: every call runs under an instruction budget (a count hook, also installed on
coroutines the script creates) and each runtime has a memory ceiling (lupa ``max_memory``).
A runaway script raises :class:`LuaScriptError` with ``kind`` ``"instructions"`` or
``"memory"``; ``pcall`` inside the script cannot swallow either. Known gap: a single
pathological pattern match runs inside one C call, which the count hook cannot interrupt; the
memory ceiling still bounds ``string.rep`` and friends.

One :class:`LuaSandbox` per adapter (the documented alternative to the original's single shared
state): a broken or hostile adapter cannot disturb another one's globals or memory budget, and
lupa's per-runtime lock serialises calls into the same script.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_INSTRUCTION_LIMIT", "DEFAULT_MEMORY_LIMIT", "LuaSandbox", "LuaScriptError"]

DEFAULT_INSTRUCTION_LIMIT = 20_000_000
"""Lua VM instructions one call may execute (≈ 0.1-0.3 s of pure Lua)."""
DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024
"""Bytes one runtime may allocate in total."""
_HOOK_STEP = 10_000

_log = logging.getLogger("homeagent.lua")

_BOOTSTRAP = r"""
local json_src, compat_src, py_log, limit, step = ...
local real_pcall, real_xpcall, real_error = pcall, xpcall, error
local sethook, tpack, tunpack, select, type = debug.sethook, table.pack, table.unpack, select, type
local co_create, co_resume, co_status, co_yield = coroutine.create, coroutine.resume,
  coroutine.status, coroutine.yield
local co_running, co_isyieldable, co_close = coroutine.running, coroutine.isyieldable,
  coroutine.close

string.dump = nil
getmetatable("").__metatable = "locked"

local state = { count = 0, killed = nil }
local function hook()
  state.count = state.count + step
  if state.killed or state.count > limit then
    state.killed = state.killed or ("instruction limit exceeded (" .. limit .. " instructions)")
    real_error(state.killed, 0)
  end
end

local function is_oom(msg)
  return msg == "not enough memory"
end

local function rethrow_fatal(ok, ...)
  if not ok then
    local msg = ...
    if state.killed then real_error(state.killed, 0) end
    if is_oom(msg) then real_error(msg, 0) end
  end
  return ok, ...
end

local env = {}
local function safe_pcall(f, ...) return rethrow_fatal(real_pcall(f, ...)) end
local function safe_xpcall(f, handler, ...)
  return rethrow_fatal(real_xpcall(f, function(m)
    if state.killed or is_oom(m) then return m end
    return handler(m)
  end, ...))
end

local function safe_create(f)
  local co = co_create(f)
  sethook(co, hook, "", step)
  return co
end
local function safe_resume(co, ...) return rethrow_fatal(co_resume(co, ...)) end
local function safe_wrap(f)
  local co = safe_create(f)
  return function(...)
    local r = tpack(safe_resume(co, ...))
    if not r[1] then real_error(r[2], 0) end
    return tunpack(r, 2, r.n)
  end
end

local function copy(t, skip)
  local out = {}
  for k, v in pairs(t) do if not (skip and skip[k]) then out[k] = v end end
  return out
end

env.string = copy(string, { dump = true })
env.table = copy(table)
env.math = copy(math)
env.utf8 = copy(utf8)
env.coroutine = { create = safe_create, resume = safe_resume, wrap = safe_wrap,
  status = co_status, yield = co_yield, running = co_running, isyieldable = co_isyieldable,
  close = co_close }
for _, k in ipairs({ "assert", "error", "ipairs", "next", "pairs", "rawequal", "rawget",
    "rawlen", "rawset", "select", "tonumber", "tostring", "type", "setmetatable",
    "getmetatable" }) do
  env[k] = _G[k]
end
env.pcall, env.xpcall = safe_pcall, safe_xpcall
env.unpack = table.unpack
env._VERSION = _VERSION

local function lua_log(level, msg)
  if msg == nil then level, msg = "info", level end
  py_log(tostring(level), tostring(msg))
end
env.log = lua_log

local function run_private(src, name)
  local priv = setmetatable({}, { __index = env })
  local chunk = assert(load(src, "=" .. name, "t", priv))
  return chunk()
end

-- JSON work runs in a coroutine created before any hook exists: an active count hook makes
-- Lua 5.4 trap every instruction (~2x slower), and encode/decode always terminate (linear in
-- their input, depth-capped, no metamethods), so they need no instruction budget.
local function unhooked(f)
  local co = co_create(function(...)
    local args = tpack(...)
    while true do
      args = tpack(co_yield(tpack(real_pcall(f, tunpack(args, 1, args.n)))))
    end
  end)
  return function(...)
    local ok, res = co_resume(co, ...)
    if not ok then real_error(res, 0) end
    if not res[1] then real_error(res[2], 0) end
    return tunpack(res, 2, res.n)
  end
end

local json = run_private(json_src, "json")
env.json = {
  encode = unhooked(json.encode), decode = unhooked(json.decode), null = json.null,
  array = function(t) return setmetatable(t or {}, json.array_mt) end,
}
env.compat = run_private(compat_src, "compat")

local function begin()
  state.count, state.killed = 0, nil
  sethook(hook, "", step)
end
local function finish(ok, ...)
  sethook()
  if not ok then
    local msg = ...
    if state.killed then return false, "instructions", state.killed end
    if is_oom(msg) then return false, "memory", "memory limit exceeded" end
    return false, "runtime", tostring(msg)
  end
  return true, ...
end

local api = {}

function api.load(src, name)
  local script_env = setmetatable({}, { __index = env })
  local chunk, err = load(src, "=" .. name, "t", script_env)
  if not chunk then return false, "syntax", err end
  begin()
  return finish(real_pcall(chunk))
end

function api.call(f, ...)
  begin()
  return finish(real_pcall(f, ...))
end

function api.field(t, k)
  if type(t) ~= "table" then return nil end
  return rawget(t, k)
end

function api.kind(v) return type(v) end

function api.string_table(t)
  -- copy a string->string table into a flat array {k1, v1, k2, v2...}
  if type(t) ~= "table" then return nil end
  local out, n = {}, 0
  for k, v in pairs(t) do
    if type(k) == "string" and (type(v) == "string" or type(v) == "number") then
      out[n + 1] = k; out[n + 2] = tostring(v); n = n + 2
    end
  end
  return out, n
end

function api.make_table(flat, n)
  local out = {}
  for i = 1, n, 2 do out[flat[i]] = flat[i + 1] end
  return out
end

return api
"""


class LuaScriptError(Exception):
    """A Lua script failed to load or run.

    ``kind`` is ``"syntax"``, ``"runtime"``, ``"instructions"`` (budget exhausted) or
    ``"memory"`` (ceiling reached); ``script`` names the chunk.
    """

    def __init__(self, script: str, kind: str, message: str) -> None:
        super().__init__(f"lua script {script!r}: {kind} error: {message}")
        self.script = script
        self.kind = kind
        self.reason = message


def _deny_attribute(obj: object, name: object, is_setting: bool) -> str:
    raise AttributeError("Python attribute access is disabled in the HomeAgent Lua sandbox")


def _read_lua(name: str) -> str:
    return (Path(__file__).resolve().parent / name).read_text(encoding="utf-8")


_SOURCES: dict[str, str] = {}


def _source(name: str) -> str:
    src = _SOURCES.get(name)
    if src is None:
        src = _SOURCES[name] = _read_lua(name)
    return src


class LuaSandbox:
    """One sandboxed Lua 5.4 state; load scripts with :meth:`load`, call with :meth:`call`."""

    def __init__(
        self,
        name: str,
        *,
        instruction_limit: int = DEFAULT_INSTRUCTION_LIMIT,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        logger: logging.Logger | None = None,
    ) -> None:
        from lupa.lua54 import LuaRuntime  # lazy: keeps `import homeagent_core` light

        self.name = name
        self.instruction_limit = instruction_limit
        self.memory_limit = memory_limit
        self._logger = logger or _log.getChild(name)
        self._rt = LuaRuntime(
            register_eval=False,
            register_builtins=False,
            unpack_returned_tuples=True,
            attribute_filter=_deny_attribute,
            max_memory=memory_limit + 8 * 1024 * 1024,
        )
        api = self._rt.execute(
            _BOOTSTRAP,
            _source("sandbox_json.lua"),
            _source("sandbox_compat.lua"),
            self._py_log,
            instruction_limit,
            _HOOK_STEP,
        )
        # Scripts must never reach the Python bridge, even through the real globals.
        g = self._rt.globals()
        g.python = None
        self._api_load: Callable[..., Any] = api.load
        self._api_call: Callable[..., Any] = api.call
        self._api_field: Callable[..., Any] = api.field
        self._api_kind: Callable[..., Any] = api.kind
        self._api_string_table: Callable[..., Any] = api.string_table
        self._api_make_table: Callable[..., Any] = api.make_table
        self._rt.gccollect()
        # The ceiling counts from here: the bootstrap's own allocations are not the script's.
        self._rt.set_max_memory(int(self._rt.get_memory_used() or 0) + memory_limit)

    def _py_log(self, level: str, msg: str) -> None:
        lvl = {"debug": logging.DEBUG, "warn": logging.WARNING, "warning": logging.WARNING,
               "error": logging.ERROR}.get(level.lower(), logging.INFO)
        self._logger.log(lvl, "[lua/%s] %s", level, msg[:2000])

    def _unwrap(self, script: str, res: Any) -> Any:
        if not isinstance(res, tuple):
            res = (res,)
        if res[0] is True:
            return res[1] if len(res) > 1 else None
        _, kind, msg = res[0], res[1], res[2]
        if kind == "memory":
            self._rt.gccollect()
        raise LuaScriptError(script, str(kind), str(msg))

    def load(self, source: str, chunk_name: str) -> Any:
        """Compile and run ``source`` (text only) in a fresh child environment; return its value.

        Raises:
            LuaScriptError: syntax error, runtime error or a limit hit.
        """
        from lupa import LuaError

        try:
            res = self._api_load(source, chunk_name)
        except LuaError as exc:  # e.g. an allocation failure outside the protected call
            raise LuaScriptError(chunk_name, "runtime", str(exc)) from exc
        return self._unwrap(chunk_name, res)

    def call(self, func: Any, *args: Any, script: str | None = None) -> Any:
        """Call a Lua function under the instruction budget; return its first result.

        Raises:
            LuaScriptError: the function raised, or a limit was hit.
        """
        from lupa import LuaError

        try:
            res = self._api_call(func, *args)
        except LuaError as exc:
            raise LuaScriptError(script or self.name, "runtime", str(exc)) from exc
        return self._unwrap(script or self.name, res)

    def field(self, table: Any, key: str) -> Any:
        """``rawget(table, key)``: read a field without running metamethods."""
        return self._api_field(table, key)

    def kind(self, value: Any) -> str:
        """Lua ``type()`` of a value handed back by the runtime."""
        return str(self._api_kind(value))

    def string_table(self, table: Any) -> dict[str, str]:
        """Copy a Lua ``string -> string|number`` table into a dict (other entries skipped)."""
        res = self._api_string_table(table)
        if not isinstance(res, tuple) or res[0] is None:
            return {}
        flat, n = res
        return {str(flat[i]): str(flat[i + 1]) for i in range(1, int(n) + 1, 2)}

    def make_table(self, mapping: dict[str, Any]) -> Any:
        """Build a Lua table of plain values (strings, numbers, booleans, nested dicts)."""
        flat: list[Any] = []
        for k, v in mapping.items():
            flat.append(k)
            flat.append(self.make_table(v) if isinstance(v, dict) else v)
        return self._api_make_table(self._rt.table_from(flat), len(flat))

    @property
    def memory_used(self) -> int:
        """Bytes currently allocated by this runtime."""
        return int(self._rt.get_memory_used() or 0)
