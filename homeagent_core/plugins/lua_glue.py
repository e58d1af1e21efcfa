"""The glue between Python and a Lua plugin's script, and the values that cross it.

:data:`GLUE` is loaded into each plugin's sandbox; its ``build`` makes the script's ``sdk``
table (registration functions, data functions grouped as ``sdk.memory``, ``sdk.doc`` ...,
``sdk.json``), and its small trampolines call handlers with JSON-encoded arguments. Python
callables stay inside the glue's closures (upvalues): scripts never see them. Data functions
return ``(result, err)`` to Lua; registration failures raise a Lua error.

The helpers below turn Lua's JSON back into Python values and map the stage context to the
table a handler sees (and its writes back onto the context).
"""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path
from typing import Any

import orjson

from homeagent_sdk.types import STAGES, StageContext, ToolCall, ToolResult

__all__ = [
    "CTX_FIELDS",
    "CTX_WRITABLE",
    "DATA_GROUPS",
    "GLUE",
    "SCOPES",
    "STAGES",
    "apply_ctx",
    "as_text",
    "ctx_view",
    "fingerprint",
    "fix_schema",
    "jsonable",
    "loads_obj",
    "stat_key",
]

SCOPES = ("", "global", "own_tools")
#: Stage-context fields a Lua handler sees, and those it may change.
CTX_FIELDS = ("raw_message", "source", "channel", "user_id", "group_id", "phase", "llm_text",
              "final_text", "no_memory", "response", "tool_calls", "tool_results", "extra", "drop",
              "interrupt")
CTX_WRITABLE = frozenset(CTX_FIELDS) - {"phase", "source", "channel", "interrupt"}

#: Data functions of the script's ``sdk`` table, by group (``sdk.<group>.<name>``).
DATA_GROUPS: dict[str, tuple[str, ...]] = {
    "settings": ("get_core", "set_core", "list_core", "get_plugin", "set_plugin", "list_plugin",
                 "list", "defs", "dump", "plugins", "register_def"),
    "memory": ("recall", "commit", "introspect", "merge", "purge", "entities", "relations"),
    "doc": ("query", "insert", "remove", "stats"),
    "knowledge": ("search", "add", "list"),
    "text_memory": ("append",),
    "llm": ("list_sources", "set_source", "current_source", "chat"),
    "social": ("get_person", "get_network", "get_trait", "get_relations", "list_persons"),
    "http": ("get", "post"),
}


def _lua_groups() -> str:
    rows = []
    for group, names in DATA_GROUPS.items():
        rows.append(f"    {group} = {{ " + ", ".join(f'"{n}"' for n in names) + " },")
    return "\n".join(rows)



_GLUE_TEMPLATE = r"""
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
@GROUPS@
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
#: The Lua source of the glue (``api.build(py_call, py_register)`` returns the ``sdk`` table).
GLUE = _GLUE_TEMPLATE.replace("@GROUPS@", _lua_groups())


def fingerprint(directory: Path) -> str:
    """Hash of ``plugin.json`` + ``main.lua`` (what a reload compares)."""
    h = hashlib.sha256()
    for name in ("plugin.json", "main.lua"):
        with contextlib.suppress(OSError):
            h.update((directory / name).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def stat_key(directory: Path) -> tuple[int, ...]:
    """mtime and size of the two files (what the watcher polls)."""
    out: list[int] = []
    for name in ("plugin.json", "main.lua"):
        try:
            st = (directory / name).stat()
            out += [st.st_mtime_ns, st.st_size]
        except OSError:
            out += [0, 0]
    return tuple(out)


def fix_schema(value: Any) -> Any:
    """Undo Lua's empty-table ambiguity in a JSON schema (``properties: []`` -> ``{}``)."""
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            if k in ("properties", "additionalProperties", "items") and v == []:
                out[k] = {} if k != "additionalProperties" else True
            else:
                out[k] = fix_schema(v)
        return out
    if isinstance(value, list):
        return [fix_schema(v) for v in value]
    return value


def as_text(value: Any) -> str:
    """A Lua string (bytes or str), number, boolean or nil as Python text.

    Tables and other Lua objects are named by type, never converted with ``str()``: that would
    run their ``__tostring`` from Python.
    """
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if value is None:
        return ""
    if isinstance(value, str | int | float | bool):
        return str(value)
    from lupa import lua_type  # lazy: lupa is only loaded with a Lua plugin

    return f"(a Lua {lua_type(value) or type(value).__name__})"


def loads_obj(raw: Any) -> dict[str, Any]:
    """A JSON object from Lua (anything else, e.g. an empty table encoded as ``[]``, is ``{}``)."""
    data = orjson.loads(as_text(raw) or "{}")
    return data if isinstance(data, dict) else {}


def jsonable(value: Any) -> Any:
    """``orjson`` fallback: SDK wire types by ``to_dict``, sets and tuples as lists, else text."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(value, set | tuple):
        return list(value)
    return str(value)


def ctx_view(ctx: StageContext) -> dict[str, Any]:
    """The stage-context table a Lua handler sees (None fields are left out: nil in Lua)."""
    out: dict[str, Any] = {}
    for name in CTX_FIELDS:
        value = getattr(ctx, name)
        if value is None:
            continue
        if name == "tool_calls" or name == "tool_results":
            value = [item.to_dict() for item in value]
        out[name] = value
    return out


def apply_ctx(ctx: StageContext, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Write back only the writable fields the handler changed (concurrent handlers)."""
    for name in CTX_WRITABLE:
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
