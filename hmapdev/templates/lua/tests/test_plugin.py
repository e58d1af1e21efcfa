"""Checks that main.lua loads and its tool answers (runs the script in a plain Lua state)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lupa


def test_main_lua_registers_a_greeting_tool() -> None:
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    plugin = lua.execute((Path(__file__).resolve().parents[1] / "main.lua").read_text(encoding="utf-8"))
    tools: dict[str, Any] = {}
    sdk = lua.table_from({"register_tool": lambda name, definition, handler: tools.__setitem__(name, handler)})
    plugin["start"](sdk)
    assert tools["__ident___greet"](lua.table_from({"who": "Ada"})) == "Hello, Ada!"
