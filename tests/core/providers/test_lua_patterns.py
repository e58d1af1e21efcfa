"""The sandbox's Lua pattern matcher gives exactly what Lua's C functions give.

``sandbox_patterns.lua`` runs find/match/gmatch/gsub in Lua when a pattern could backtrack for
long (so the instruction hook can stop it); its results and error texts must not differ from
``lstrlib``'s. Random patterns built from every pattern item, quantifier, capture, anchor,
``%b``, ``%f`` and back-reference, against random subjects, compared one by one.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

SOURCE = Path(__file__).resolve().parents[3] / "homeagent_core" / "providers" / "sandbox_patterns.lua"

COMPARE = r"""function(M, s, p, init, repl)
  local function pk(ok, ...)
    if not ok then return "ERR:" .. tostring((...)) end
    local t, o = table.pack(...), {}
    for i = 1, t.n do o[i] = tostring(t[i]) end
    return table.concat(o, "|") .. "#" .. t.n
  end
  local function gm(f)
    local ok, it = pcall(f, s, p, init)
    if not ok then return "ERR:" .. tostring(it) end
    local o = {}
    for _ = 1, 50 do
      local r = table.pack(pcall(it))
      if not r[1] then o[#o + 1] = "ERR:" .. tostring(r[2]) break end
      if r[2] == nil then break end
      o[#o + 1] = pk(table.unpack(r, 1, r.n))
    end
    return table.concat(o, ";")
  end
  local checks = {
    { "find", pk(pcall(string.find, s, p, init)), pk(pcall(M.lua.find, s, p, init)) },
    { "plain find", pk(pcall(string.find, s, p, init, true)), pk(pcall(M.lua.find, s, p, init, true)) },
    { "match", pk(pcall(string.match, s, p, init)), pk(pcall(M.lua.match, s, p, init)) },
    { "gmatch", gm(string.gmatch), gm(M.lua.gmatch) },
    { "gsub", pk(pcall(string.gsub, s, p, repl)), pk(pcall(M.lua.gsub, s, p, repl)) },
    { "gsub max 2", pk(pcall(string.gsub, s, p, repl, 2)), pk(pcall(M.lua.gsub, s, p, repl, 2)) },
  }
  for _, c in ipairs(checks) do
    if c[2] ~= c[3] then return c[1] .. ": C " .. c[2] .. " / Lua " .. c[3] end
  end
  return nil
end"""

ATOMS = ["a", "b", ".", "%a", "%d", "%s", "%W", "[ab]", "[^a]", "[a-c]", "[%d_]", "%.", "%%", "(", ")", "()",
         "%1", "%2", "%bab", "%f[%w]", "%f[%W]", "^", "$", "x", "[]a]", "[^]]", "%", "[", "%g", "%p"]
QUANTS = ["", "", "", "*", "+", "-", "?"]


@pytest.fixture(scope="module")
def lua() -> tuple[Any, Any, Any]:
    from lupa.lua54 import LuaRuntime

    rt = LuaRuntime(register_eval=False, unpack_returned_tuples=True)
    c = [rt.eval(f"string.{name}") for name in ("find", "match", "gmatch", "gsub")]
    module = rt.execute(SOURCE.read_text(encoding="utf-8"), *c, -1)
    return rt, module, rt.eval(COMPARE)


def test_lua_matcher_matches_the_c_functions(lua: tuple[Any, Any, Any]) -> None:
    rt, module, compare = lua
    repls = ["<%0>", "%1", "[%2]", "%%", "z", "%", 7, rt.table_from({"a": "A", "b": False}),
             rt.eval("function(...) return select('#', ...) > 1 and (...) or nil end")]
    rng = random.Random(20260)
    mismatches = []
    for _ in range(4000):
        p = "".join(rng.choice(ATOMS) + rng.choice(QUANTS) for _ in range(rng.randint(0, 5)))
        s = "".join(rng.choice("aabbc1_ .()x]") for _ in range(rng.randint(0, 12)))
        init = rng.choice([None, None, 1, 2, -3, 0, 20, 3.0])
        diff = compare(module, s, p, init, rng.choice(repls))
        if diff is not None:
            mismatches.append((s, p, init, diff))
    assert mismatches == []


@pytest.mark.parametrize(
    ("s", "p"),
    [
        ("hello world from Lua", "(%w+) (%w+)"),
        ('{"model": "gpt-x"}', '"model":%s*"(.-)"'),
        ("THE (quick) fox", "%f[%a]%a+"),
        ("x = [[a]] y = [[b]]", "%[%[(.-)%]%]"),
        ("data:image/png;base64,AAAA", "^data:([^;,]+);base64,(.*)$"),
        ("key=val; k2=v2", "(%w+)=(%w+)"),
        ("f(a(b)c)d", "%b()"),
        ("abcabc", "(a)(b)c%1%2"),
    ],
)
def test_everyday_patterns(lua: tuple[Any, Any, Any], s: str, p: str) -> None:
    _, module, compare = lua
    assert compare(module, s, p, None, "<%0>") is None
