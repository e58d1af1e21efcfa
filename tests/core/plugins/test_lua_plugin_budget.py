"""A Lua plugin's stuck calls are stopped: its other tools keep working and shutdown ends."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from homeagent_core.plugins.lua_plugins import LuaPlugin

SCRIPT = """
sdk.register_tool("spin", { description = "loops" }, function(args)
  error(setmetatable({}, { __tostring = function() while true do end end }))
end)
sdk.register_tool("loop", { description = "loops" }, function(args) while true do end end)
sdk.register_tool("echo", { description = "echo" }, function(args) return "echo " .. tostring(args.text) end)
return { name = "stuck" }
"""


def plugin_at(tmp_path: Path, **kwargs: Any) -> LuaPlugin:
    folder = tmp_path / "plugins" / "stuck"
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text(json.dumps({"name": "stuck", "version": "1", "entry": "main.lua"}))
    (folder / "main.lua").write_text(SCRIPT)
    return LuaPlugin(folder, watch_interval=0, **kwargs)


def in_thread(fn: Any, *args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: box.update(value=fn(*args)), daemon=True)
    thread.start()
    return thread, box


def test_error_object_tostring_fails_the_tool_and_the_plugin_goes_on(tmp_path: Path) -> None:
    plugin = plugin_at(tmp_path, instruction_limit=2_000_000)
    thread, box = in_thread(plugin.call_tool, "spin", {})
    thread.join(60)
    assert not thread.is_alive(), "the tool call never finished"
    result = box["value"]
    assert not result.success and "exceeded" in result.result
    assert plugin.call_tool("echo", {"text": "hi"}).result == "echo hi"


def test_shutdown_ends_a_call_in_progress(tmp_path: Path) -> None:
    plugin = plugin_at(tmp_path, instruction_limit=10**15)

    async def main() -> tuple[threading.Thread, dict[str, Any]]:
        await plugin.startup(None)
        thread, box = in_thread(plugin.call_tool, "loop", {})
        await asyncio.wait_for(plugin.shutdown(), 60)
        return thread, box

    thread, box = asyncio.run(main())
    thread.join(60)
    assert not thread.is_alive(), "the tool call survived shutdown"
    assert not box["value"].success
