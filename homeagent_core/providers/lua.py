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
coroutines the script creates), a wall-clock limit the hook checks, and each runtime has a
memory ceiling (lupa ``max_memory``). A runaway script raises :class:`LuaScriptError` with
``kind`` ``"instructions"``, ``"time"`` or ``"memory"``; ``pcall`` inside the script cannot
swallow any of them. No script code runs with the hook off: error objects are turned into text
before the hook is removed, ``__gc`` is refused (Lua 5.4 runs finalizers with hooks disabled),
the host's table helpers iterate raw, and ``string.find/match/gmatch/gsub`` fall back to a Lua
matcher (``sandbox_patterns.lua``) whenever the C matcher's worst case is large.

A call into an idle runtime runs on the caller's thread; a call that finds the runtime busy
waits for it on the sandbox's own daemon worker thread, and a host function that can block
(:meth:`LuaSandbox.blocking`: a plugin's data functions, which do I/O) runs on a second daemon
thread while the script waits. :meth:`LuaSandbox.interrupt` and :meth:`LuaSandbox.close` stop
the running call at its next hook tick; ``close`` also releases every caller waiting on either
thread, so a stuck script can hold up neither shutdown nor another plugin. (Handing every call
to the worker, as the first version did, cost two thread switches per call: most of a short
tool call or a stream chunk.)

One :class:`LuaSandbox` per adapter (the documented alternative to the original's single shared
state): a broken or hostile adapter cannot disturb another one's globals or memory budget, and
lupa's per-runtime lock serialises calls into the same script.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_INSTRUCTION_LIMIT",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_TIME_LIMIT",
    "PATTERN_FAST_COST",
    "LuaSandbox",
    "LuaScriptError",
]

DEFAULT_INSTRUCTION_LIMIT = 20_000_000
"""Lua VM instructions one call may execute (≈ 0.1-0.3 s of pure Lua)."""
DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024
"""Bytes one runtime may allocate in total."""
DEFAULT_TIME_LIMIT = 120.0
"""Wall-clock seconds one call may run (checked by the count hook, so time spent waiting in a
host function counts once the script runs again)."""
PATTERN_FAST_COST = 4_000_000
"""Worst-case matcher steps up to which a pattern call runs in C (above: the hooked Lua matcher)."""
STRING_TABLE_CAP = 1_000
"""Entries :meth:`LuaSandbox.string_table` looks at (a header table is small)."""
_HOOK_STEP = 10_000

_log = logging.getLogger("homeagent.lua")

_BOOTSTRAP = r"""
local json_src, compat_src, patterns_src, py_log, py_stop, limit, step, fast_cost = ...
local real_pcall, real_xpcall, real_error = pcall, xpcall, error
local real_setmetatable, rawget, next, tostring = setmetatable, rawget, next, tostring
local sethook, tpack, tunpack, select, type = debug.sethook, table.pack, table.unpack, select, type
local co_create, co_resume, co_status, co_yield = coroutine.create, coroutine.resume,
  coroutine.status, coroutine.yield
local co_running, co_isyieldable, co_close = coroutine.running, coroutine.isyieldable,
  coroutine.close

string.dump = nil
getmetatable("").__metatable = "locked"

local state = { count = 0, killed = nil, kind = nil, ticks = 0 }
local function hook()
  state.count = state.count + step
  state.ticks = state.ticks + 1
  if not state.killed then
    if state.count > limit then
      state.kind, state.killed = "instructions", "instruction limit exceeded (" .. limit .. " instructions)"
    elseif state.ticks >= 8 then
      -- the host's verdict: the call's wall-clock deadline passed, or the runtime is closing
      -- (asked every 8 ticks, ~1 ms of Lua: a Python call costs more than the ticks between)
      state.ticks = 0
      local kind, why = py_stop()
      if kind then state.kind, state.killed = kind, why end
    end
  end
  if state.killed then real_error(state.killed, 0) end
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
    "rawlen", "rawset", "select", "tonumber", "tostring", "type", "getmetatable" }) do
  env[k] = _G[k]
end
-- Finalizers run with hooks disabled (Lua 5.4 turns them off during __gc), so no __gc may be
-- set from a script: Lua only marks an object for finalization when its metatable has a __gc
-- field at setmetatable time, and that is the only way scripts can set a metatable.
env.setmetatable = function(t, mt)
  if type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    real_error("__gc metamethods are not allowed in the sandbox (finalizers cannot be stopped)", 2)
  end
  return real_setmetatable(t, mt)
end
env.pcall, env.xpcall = safe_pcall, safe_xpcall
env.unpack = table.unpack
env._VERSION = _VERSION

local function lua_log(level, msg)
  if msg == nil then level, msg = "info", level end
  py_log(tostring(level), tostring(msg))
end
env.log = lua_log

local function run_private(src, name, ...)
  local priv = setmetatable({}, { __index = env })
  local chunk = assert(load(src, "=" .. name, "t", priv))
  return chunk(...)
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
  array = function(t)
    t = t or {}
    if getmetatable(t) ~= "json.array" then real_setmetatable(t, json.array_mt) end
    return t
  end,
}

-- Pattern functions a count hook can stop (see sandbox_patterns.lua); the JSON code above keeps
-- the C ones (its patterns are linear). The string metatable's __index is the real string
-- table, so both it and the scripts' copy get them.
local patterns = run_private(patterns_src, "patterns", string.find, string.match, string.gmatch,
  string.gsub, fast_cost)
for _, k in ipairs({ "find", "match", "gmatch", "gsub" }) do
  string[k] = patterns[k]
  env.string[k] = patterns[k]
end
env.compat = run_private(compat_src, "compat")

local function begin()
  state.count, state.killed, state.kind = 0, nil, nil
  sethook(hook, "", step)
end
-- An error object is turned into text while the hook still runs: its __tostring is script code.
local function describe(msg)
  local t = type(msg)
  if t == "string" then return msg end
  if t == "number" or t == "boolean" or t == "nil" then return tostring(msg) end
  local ok, text = real_pcall(tostring, msg)
  if ok and type(text) == "string" then return text end
  return "(error object of type " .. t .. ")"
end
local function finish(ok, ...)
  local text
  if not ok then
    local msg = ...
    if not state.killed and not is_oom(msg) then text = describe(msg) end
  end
  sethook()
  if not ok then
    local msg = ...
    if state.killed then return false, state.kind, state.killed end
    if is_oom(msg) or text == nil then return false, "memory", "memory limit exceeded" end
    return false, "runtime", text
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

function api.string_table(t, cap)
  -- copy a string->string table into a flat array {k1, v1, k2, v2...}; raw (next, not pairs:
  -- no __pairs runs here, outside the hook) and at most `cap` entries looked at
  if type(t) ~= "table" then return nil end
  local out, n, seen = {}, 0, 0
  for k, v in next, t do
    seen = seen + 1
    if seen > cap then break end
    if type(k) == "string" and (type(v) == "string" or math.type(v)) then
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

    ``kind`` is ``"syntax"``, ``"runtime"``, ``"instructions"`` (budget exhausted), ``"memory"``
    (ceiling reached), ``"time"`` (the call's wall-clock limit passed) or ``"closed"`` (the
    runtime was interrupted or shut down); ``script`` names the chunk.
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


class _Worker:
    """The one daemon thread that runs every call into one Lua runtime.

    Why a thread of its own: a caller waits on a future it can abandon, so interrupting or
    closing the runtime always releases the caller, and the thread (a daemon) never holds up
    the process's exit even if a call could not be stopped.
    """

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = \
            queue.SimpleQueue()
        self.pending: set[Future[Any]] = set()
        self.error: BaseException | None = None
        """Set by :meth:`stop`: what later submissions fail with at once."""
        self.thread = threading.Thread(target=self._run, name=f"lua-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            self._one(*item)
            del item  # hold nothing (the sandbox, its arguments) while idle

    @staticmethod
    def _one(fut: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            if not fut.set_running_or_notify_cancel():
                return
        except RuntimeError:  # failed by stop() before it started
            return
        try:
            result = fn(*args)
        except BaseException as exc:  # handed to the waiting caller
            with contextlib.suppress(InvalidStateError):
                fut.set_exception(exc)
        else:
            with contextlib.suppress(InvalidStateError):
                fut.set_result(result)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self.pending.add(fut)
        fut.add_done_callback(self.pending.discard)
        if self.error is not None:  # stopped (checked after joining `pending`: stop() fails one or the other)
            with contextlib.suppress(InvalidStateError):
                fut.set_exception(self.error)
            return fut
        self._queue.put((fut, fn, args))
        return fut

    def stop(self, error: BaseException) -> None:
        """Fail every waiting caller with ``error`` and let the thread end after its current item."""
        self.error = error
        for fut in list(self.pending):
            with contextlib.suppress(InvalidStateError):
                fut.set_exception(error)
        self.end()

    def end(self) -> None:
        """Let the thread end once the queue is drained (the sandbox is gone)."""
        self._queue.put(None)


def _weak_callbacks(sandbox: LuaSandbox) -> tuple[Callable[[str, str], None], Callable[[], tuple[str, str] | None]]:
    """``log`` and the hook's stop check, holding the sandbox weakly.

    Lua keeps what it is given alive, and Python's collector cannot see through the Lua state:
    bound methods would tie the sandbox (and its worker thread) to its own runtime forever.
    """
    ref = weakref.ref(sandbox)

    def log(level: str, msg: str) -> None:
        owner = ref()
        if owner is not None:
            owner._py_log(level, msg)

    def stop_reason() -> tuple[str, str] | None:
        owner = ref()
        return owner._stop_reason() if owner is not None else ("closed", "the Lua runtime was closed")

    return log, stop_reason


class LuaSandbox:
    """One sandboxed Lua 5.4 state; load scripts with :meth:`load`, call with :meth:`call`.

    A call runs on the caller's thread when the runtime is idle, else it waits on the sandbox's
    own worker thread (see the module docstring). :meth:`interrupt` stops the call in progress
    at its next hook tick; :meth:`close` stops it, releases the callers waiting and refuses
    further calls.
    """

    def __init__(
        self,
        name: str,
        *,
        instruction_limit: int = DEFAULT_INSTRUCTION_LIMIT,
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        time_limit: float = DEFAULT_TIME_LIMIT,
        logger: logging.Logger | None = None,
    ) -> None:
        from lupa.lua54 import LuaRuntime  # lazy: keeps `import homeagent_core` light

        self.name = name
        self.instruction_limit = instruction_limit
        self.memory_limit = memory_limit
        self.time_limit = time_limit
        self._logger = logger or _log.getChild(name)
        self._deadline = float("inf")
        self._interrupted = False
        self._closed = False
        self._worker = _Worker(name)
        weakref.finalize(self, self._worker.end)  # an unused sandbox does not keep its thread
        self._host: _Worker | None = None
        """Where :meth:`blocking` host functions run while a caller's thread holds the runtime."""
        self._idle = threading.Lock()
        """Held by whichever thread is in the runtime (a caller inline, or the worker)."""
        self._owner: int | None = None
        """Thread id of the caller running a call inline."""
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
            _source("sandbox_patterns.lua"),
            *_weak_callbacks(self),
            instruction_limit,
            _HOOK_STEP,
            PATTERN_FAST_COST,
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

    def _stop_reason(self) -> tuple[str, str] | None:
        """Asked by the count hook: why the running call must stop now, if it must."""
        if self._closed:
            return "closed", "the Lua runtime was closed"
        if self._interrupted:
            return "closed", "the call was interrupted (the plugin or adapter is stopping)"
        if time.monotonic() > self._deadline:
            return "time", f"time limit exceeded ({self.time_limit:g} s)"
        return None

    def _run(self, script: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn`` in the runtime: on this thread when the runtime is idle (or this thread is
        already in it), else queued on the worker thread, whose future :meth:`close` fails."""
        me = threading.get_ident()
        if me == self._owner or me == self._worker.thread.ident:
            return fn(*args)
        if self._closed:
            raise LuaScriptError(script, "closed", "the Lua runtime was closed")
        if not self._idle.acquire(blocking=False):
            return self._worker.submit(self._queued, script, fn, *args).result()
        self._owner = me
        try:
            result = fn(*args)
        finally:
            self._owner = None
            self._idle.release()
        if self._closed:  # as a caller waiting on the worker would be: released with "closed"
            raise LuaScriptError(script, "closed", "the Lua runtime was closed")
        return result

    def _queued(self, script: str, fn: Callable[..., Any], *args: Any) -> Any:
        """On the worker: wait for the call running inline to end, then run ``fn``."""
        with self._idle:
            if self._closed:
                raise LuaScriptError(script, "closed", "the Lua runtime was closed")
            return fn(*args)

    def blocking(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a host function handed to scripts that may block (I/O, waits on the event loop).

        Called from a call running inline, it runs on the sandbox's host thread while the
        caller waits on a future that :meth:`close` fails, so a script blocked in it cannot hold
        its caller past ``close``; the failure reaches the script as an error, and the hook ends
        the call at its next tick. Called on the worker, it runs there, as before. The wrapper
        holds the sandbox weakly (Lua keeps what it is given alive).
        """
        ref = weakref.ref(self)

        def call(*args: Any) -> Any:
            owner = ref()
            if owner is None or threading.get_ident() != owner._owner:
                return fn(*args)
            if owner._host is None:
                owner._host = _Worker(f"{owner.name}-host")
                weakref.finalize(owner, owner._host.end)
                if owner._closed:  # closed meanwhile: close() may have missed the new thread
                    owner._host.stop(LuaScriptError(owner.name, "closed", "the Lua runtime was closed"))
            return owner._host.submit(fn, *args).result()

        return call

    def _timed(self, fn: Callable[..., Any], *args: Any) -> Any:
        """One budgeted call: the wall-clock deadline starts when the call starts running."""
        self._interrupted = False
        self._deadline = time.monotonic() + self.time_limit
        try:
            return fn(*args)
        finally:
            self._deadline = float("inf")

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
            res = self._run(chunk_name, self._timed, self._api_load, source, chunk_name)
        except LuaError as exc:  # e.g. an allocation failure outside the protected call
            raise LuaScriptError(chunk_name, "runtime", str(exc)) from exc
        return self._unwrap(chunk_name, res)

    def call(self, func: Any, *args: Any, script: str | None = None) -> Any:
        """Call a Lua function under the instruction budget and time limit; return its first result.

        Raises:
            LuaScriptError: the function raised, a limit was hit, or the runtime was
                interrupted or closed.
        """
        from lupa import LuaError

        try:
            res = self._run(script or self.name, self._timed, self._api_call, func, *args)
        except LuaError as exc:
            raise LuaScriptError(script or self.name, "runtime", str(exc)) from exc
        return self._unwrap(script or self.name, res)

    def field(self, table: Any, key: str) -> Any:
        """``rawget(table, key)``: read a field without running metamethods."""
        return self._run(self.name, self._api_field, table, key)

    def kind(self, value: Any) -> str:
        """Lua ``type()`` of a value handed back by the runtime."""
        return str(self._run(self.name, self._api_kind, value))

    def string_table(self, table: Any) -> dict[str, str]:
        """Copy a Lua ``string -> string|number`` table into a dict (other entries skipped).

        Raw iteration of at most :data:`STRING_TABLE_CAP` entries: no metamethod runs.
        """
        def copy() -> dict[str, str]:
            res = self._api_string_table(table, STRING_TABLE_CAP)
            if not isinstance(res, tuple) or res[0] is None:
                return {}
            flat, n = res
            return {str(flat[i]): str(flat[i + 1]) for i in range(1, int(n) + 1, 2)}

        return self._run(self.name, copy)  # type: ignore[no-any-return]

    def make_table(self, mapping: dict[str, Any]) -> Any:
        """Build a Lua table of plain values (strings, numbers, booleans, nested dicts)."""
        def build(m: dict[str, Any]) -> Any:
            flat: list[Any] = []
            for k, v in m.items():
                flat.append(k)
                flat.append(build(v) if isinstance(v, dict) else v)
            return self._api_make_table(self._rt.table_from(flat), len(flat))

        return self._run(self.name, build, mapping)

    def interrupt(self) -> None:
        """Stop the call in progress (if any) at its next hook tick; later calls run normally."""
        self._interrupted = True

    def close(self) -> None:
        """Stop the call in progress, release its caller and refuse every later call."""
        if self._closed:
            return
        self._closed = True
        self._worker.stop(LuaScriptError(self.name, "closed", "the Lua runtime was closed"))
        if self._host is not None:
            self._host.stop(LuaScriptError(self.name, "closed", "the Lua runtime was closed"))

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    @property
    def memory_used(self) -> int:
        """Bytes currently allocated by this runtime."""
        return int(self._rt.get_memory_used() or 0)
