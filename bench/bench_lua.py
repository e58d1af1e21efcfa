"""Lua plugin costs: a trivial tool call, a stage handler, a call through the tool registry, load.

``--json`` keys: ``lua_tool_call_us`` (one call of a trivial Lua tool: arguments to Lua,
handler, result back; target <= 50 µs), ``lua_stage_us`` (one stage handler with context
write-back), ``lua_registry_execute_us`` (the same tool through ``ToolRegistry.execute``,
which adds validation and the worker-thread hop), ``lua_load_ms`` (loading a plugin: new
sandbox, glue, ``main.lua``), ``skills_index_ms`` (indexing 50 skills).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import Row, arg_parser, emit, time_calls

from homeagent_core.agent.tools import PluginToolRegistry, ToolRegistry
from homeagent_core.plugins.lua_plugins import LuaPlugin
from homeagent_core.plugins.skills import discover_skills
from homeagent_sdk.types import StageContext, ToolCall

SCRIPT = """
sdk.register_tool("bench_echo", {
  description = "echo",
  parameters = { type = "object", properties = { text = { type = "string" } }, required = { "text" } },
}, function(args) return args.text end)
sdk.register_stage("before_output", function(ctx) ctx.final_text = ctx.final_text .. "!" end)
return { name = "bench" }
"""


def _plugin(root: Path) -> Path:
    folder = root / "plugins" / "bench"
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text('{"name": "bench", "version": "1.0.0", "entry": "main.lua"}')
    (folder / "main.lua").write_text(SCRIPT)
    return folder


def _skills(root: Path, count: int) -> None:
    for i in range(count):
        folder = root / "skills" / f"skill-{i}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: skill-{i}\ndescription: Skill number {i}.\n---\nBody {i}\n")


async def _registry_samples(plugin: LuaPlugin, repeat: int) -> list[float]:
    registry = ToolRegistry()
    plugin.register_tools(PluginToolRegistry(registry, plugin.name))
    call = ToolCall("c", "bench_echo", {"text": "hello"})
    for _ in range(20):
        await registry.execute(call)
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await registry.execute(call)
        samples.append(time.perf_counter() - t0)
    return samples


def main() -> None:
    args = arg_parser(__doc__ or "").parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = _plugin(root)
        plugin = LuaPlugin(folder, watch_interval=0)
        tool = time_calls(lambda: plugin.call_tool("bench_echo", {"text": "hello"}), repeat=20000, warmup=200)
        ctx = StageContext(final_text="x")

        def stage() -> None:
            ctx.final_text = "x"
            plugin._run_stage("before_output", ctx, None, None)

        stage_samples = time_calls(stage, repeat=5000, warmup=100)
        execute = asyncio.run(_registry_samples(plugin, 3000))
        load = time_calls(lambda: LuaPlugin(folder, watch_interval=0), repeat=30)
        _skills(root, 50)
        index = time_calls(lambda: discover_skills(root, packages=False), repeat=20)
    rows = [
        Row.of("Lua tool call (trivial echo)", tool, scale=1e6, unit="µs"),
        Row.of("Lua stage handler (before_output, write-back)", stage_samples, scale=1e6, unit="µs"),
        Row.of("ToolRegistry.execute -> Lua tool (thread hop)", execute, scale=1e6, unit="µs"),
        Row.of("Lua plugin load (sandbox + main.lua)", load, scale=1e6, unit="µs"),
        Row.of("index 50 skills", index, scale=1e6, unit="µs"),
    ]
    figures = {
        "lua_tool_call_us": rows[0]["p50 (µs)"],
        "lua_stage_us": rows[1]["p50 (µs)"],
        "lua_registry_execute_us": rows[2]["p50 (µs)"],
        "lua_load_ms": rows[3]["p50 (µs)"] / 1000,
        "skills_index_ms": rows[4]["p50 (µs)"] / 1000,
    }
    emit(args, "Lua plugins and skills", rows, figures)


if __name__ == "__main__":
    main()
