"""The Lua sandbox: escapes fail cleanly, limits stop runaway scripts, json behaves."""

from __future__ import annotations

import orjson
import pytest

from homeagent_core.providers.lua import LuaSandbox, LuaScriptError


@pytest.fixture
def sandbox() -> LuaSandbox:
    return LuaSandbox("t", instruction_limit=2_000_000, memory_limit=16 * 1024 * 1024)


@pytest.mark.parametrize(
    ("code", "needle"),
    [
        ('os.execute("touch /tmp/pwned")', "global 'os'"),
        ('return io.open("/etc/passwd"):read("a")', "global 'io'"),
        ("return python.eval(\"__import__('os')\")", "global 'python'"),
        ("return require('os')", "global 'require'"),
        ("return load('return 1')()", "global 'load'"),
        ("return loadstring('return 1')()", "global 'loadstring'"),
        ("return dofile('/etc/passwd')", "global 'dofile'"),
        ("return debug.getregistry()", "global 'debug'"),
        ("return package.loaded", "global 'package'"),
        ("return string.dump(function() end)", "field 'dump'"),
        ('return ("").dump(function() end)', "field 'dump'"),
        ("return collectgarbage('count')", "global 'collectgarbage'"),
        ("return json.encode.__globals__", "index a function"),
        ("return log.__class__", "index a function"),
    ],
)
def test_escape_attempts_fail_with_a_clear_error(sandbox: LuaSandbox, code: str, needle: str) -> None:
    with pytest.raises(LuaScriptError) as info:
        sandbox.load(code, "evil")
    assert info.value.kind == "runtime"
    assert needle in str(info.value)
    assert "evil" in str(info.value)


def test_string_metatable_is_locked(sandbox: LuaSandbox) -> None:
    assert sandbox.load('return getmetatable("")', "m") == "locked"
    with pytest.raises(LuaScriptError):
        sandbox.load('getmetatable("").__index = {}', "m")


def test_infinite_loop_hits_instruction_limit(sandbox: LuaSandbox) -> None:
    with pytest.raises(LuaScriptError) as info:
        sandbox.load("while true do end", "loop")
    assert info.value.kind == "instructions"
    assert "instruction limit" in str(info.value)


def test_pcall_cannot_swallow_the_instruction_limit(sandbox: LuaSandbox) -> None:
    code = "while true do pcall(function() while true do end end) end"
    with pytest.raises(LuaScriptError) as info:
        sandbox.load(code, "sneaky")
    assert info.value.kind == "instructions"


def test_coroutines_inherit_the_instruction_limit(sandbox: LuaSandbox) -> None:
    code = "local f = coroutine.wrap(function() while true do end end) f()"
    with pytest.raises(LuaScriptError) as info:
        sandbox.load(code, "co")
    assert info.value.kind == "instructions"


def test_huge_allocations_hit_the_memory_limit_and_the_runtime_survives(sandbox: LuaSandbox) -> None:
    for code in (
        'return string.rep("x", 1e9)',
        "local t = {} for i = 1, 1e9 do t[i] = i end",
        'local ok = pcall(string.rep, "x", 1e9) return "swallowed"',
    ):
        with pytest.raises(LuaScriptError) as info:
            sandbox.load(code, "hog")
        assert info.value.kind == "memory"
    assert sandbox.load("return 1 + 1", "after") == 2


def test_syntax_error_names_the_chunk(sandbox: LuaSandbox) -> None:
    with pytest.raises(LuaScriptError) as info:
        sandbox.load("return {", "broken")
    assert info.value.kind == "syntax"
    assert "broken" in str(info.value)


def test_binary_chunks_are_rejected(sandbox: LuaSandbox) -> None:
    with pytest.raises(LuaScriptError) as info:
        sandbox.load("\x1bLua\x54\x00", "bin")
    assert info.value.kind == "syntax"


def test_scripts_do_not_share_globals(sandbox: LuaSandbox) -> None:
    sandbox.load("leaked = 42", "a")
    assert sandbox.load("return leaked", "b") is None


def test_json_round_trip_keeps_arrays_unicode_and_escapes(sandbox: LuaSandbox) -> None:
    doc = {
        "a": [],
        "b": {},
        "s": '中文 "q" \\ \n\t\u0001 😀',
        "n": [1, 2.5, -3e-7, True],
        "nested": [{"x": [[]]}],
        "big": 2**53,
    }
    f = sandbox.load("return function(s) return json.encode(json.decode(s)) end", "j")
    out = sandbox.call(f, orjson.dumps(doc).decode())
    assert orjson.loads(out) == doc


def test_json_decode_reports_errors_as_nil(sandbox: LuaSandbox) -> None:
    f = sandbox.load("return function(s) local v, e = json.decode(s) return tostring(v) .. '|' .. tostring(e) end", "j")
    assert sandbox.call(f, "{bad").startswith("nil|json:")
    assert sandbox.call(f, '{"a":1} trailing').startswith("nil|json: trailing")


def test_json_encode_of_unencodable_value_is_null(sandbox: LuaSandbox) -> None:
    assert sandbox.load("return json.encode({f = function() end})", "j") == "null"
    assert sandbox.load("return json.encode(0/0)", "j") == "null"


def test_log_goes_to_python_logging(sandbox: LuaSandbox, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="homeagent.lua"):
        sandbox.load('log("warn", "careful") log("plain")', "l")
    assert "[lua/warn] careful" in caplog.text
    assert "[lua/info] plain" in caplog.text


def test_call_counts_instructions_per_call(sandbox: LuaSandbox) -> None:
    f = sandbox.load("return function() local x = 0 for i = 1, 50000 do x = x + i end return x end", "c")
    for _ in range(100):  # 100 × 50k loop iterations > limit in total, but each call is fresh
        assert sandbox.call(f) == 1250025000


def test_json_encode_never_runs_script_metamethods(sandbox: LuaSandbox) -> None:
    # json.* runs outside the instruction hook, so it must not call back into script code.
    code = """
      local spin = function() while true do end end
      local evil = setmetatable({a = 1}, {__index = spin, __len = spin, __eq = spin,
                                           __pairs = spin, __tostring = spin})
      return json.encode({evil, evil, json.null})
    """
    assert orjson.loads(sandbox.load(code, "meta")) == [{"a": 1}, {"a": 1}, None]


def test_json_work_does_not_reset_the_budget_of_the_caller(sandbox: LuaSandbox) -> None:
    code = "while true do json.decode('[1,2,3]') end"
    with pytest.raises(LuaScriptError) as info:
        sandbox.load(code, "jsonloop")
    assert info.value.kind == "instructions"


def test_memory_limit_inside_json_encode_is_reported(sandbox: LuaSandbox) -> None:
    code = 'local s = string.rep("x", 3e6) local t = {} for i = 1, 8 do t[i] = s end ' \
           "return json.encode(t)"
    with pytest.raises(LuaScriptError) as info:
        sandbox.load(code, "bigjson")
    assert info.value.kind == "memory"
    assert sandbox.load('return json.encode({1, "ok"})', "after") == '[1,"ok"]'
