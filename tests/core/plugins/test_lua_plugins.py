"""Lua script plugins: loading, tools and stages in a real turn, sandboxing, failures, HTTP, reload."""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.agent.kernel import Kernel
from homeagent_core.config import ConfigStore
from homeagent_core.events import EventBus
from homeagent_core.plugins.lua_discovery import discover_lua_plugins
from homeagent_core.plugins.lua_plugins import LuaPlugin, read_manifest
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_core.plugins.registries import PluginSettings
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.errors import PluginLoadError
from homeagent_sdk.types import Event, StageContext, ToolCall, ToolResult

FIXTURES = Path(__file__).resolve().parents[2] / "plugins" / "lua"


def install(data: Path, *names: str) -> Path:
    for name in names:
        shutil.copytree(FIXTURES / name, data / "plugins" / name)
    return data


def load(tmp_path: Path, name: str, **kwargs: Any) -> LuaPlugin:
    install(tmp_path, name)
    return LuaPlugin(tmp_path / "plugins" / name, watch_interval=0, **kwargs)


class Agent:
    """A real kernel + plugin host + config store with Lua plugins registered as the app does."""

    def __init__(self, tmp_path: Path, plugins: list[LuaPlugin], model: FakeModel) -> None:
        self.host = create_plugin_manager(load_entrypoints=False, builtins=())
        for plugin in plugins:
            self.host.register(plugin, name=plugin.name, kind="lua")
        self.bus = EventBus()
        self.events: list[Event] = []
        self.bus.subscribe(self.events.append, label="test")
        self.config = ConfigStore(":memory:")
        self.model = model
        self.kernel = Kernel(self.host, self.bus, model, data_dir=tmp_path)
        self.services = Services(config=self.config, bus=self.bus, data_dir=tmp_path, kernel=self.kernel)

    async def start(self) -> None:
        self.host.call_register("register_settings", lambda n: PluginSettings(n, self.config, self.host))
        await self.kernel.start()
        failed = await self.host.startup(lambda n: ScopedSDK.for_plugin(n, self.services, privileged=True))
        assert failed == []

    async def stop(self) -> None:
        await self.host.shutdown()
        await self.kernel.aclose()
        await self.bus.aclose()
        self.config.close()


@pytest.fixture
async def agent_factory(tmp_path: Path) -> AsyncIterator[Any]:
    made: list[Agent] = []

    async def make(plugins: list[LuaPlugin], model: FakeModel) -> Agent:
        agent = Agent(tmp_path, plugins, model)
        await agent.start()
        made.append(agent)
        return agent

    yield make
    for agent in made:
        await agent.stop()


# --------------------------------------------------------------------------- a real turn


async def test_a_lua_tool_and_stage_handlers_take_part_in_a_real_turn(tmp_path: Path, agent_factory: Any) -> None:
    plugin = load(tmp_path, "greeter")
    model = FakeModel([ToolCallReply("lua_greet", {"name": "小王"}), "打过招呼了"])
    agent = await agent_factory([plugin], model)
    agent.config.set("plugin.greeter.prefix", "欢迎")

    reply = await agent.kernel.ask("跟小王打个招呼")

    assert str(reply) == "打过招呼了 [lua]"
    tool_messages = [m for m in model.requests[1]["messages"] if m.get("role") == "tool"]
    # before_toolcall rewrote the argument, the handler read the setting, after_toolcall tagged it
    assert tool_messages[-1]["content"] == "欢迎，小王同学！(#1) [checked]"
    assert "lua_greet" in agent.kernel.tools
    assert agent.config.get("plugin.greeter.started") is True


async def test_a_stage_handler_can_answer_without_the_model(tmp_path: Path, agent_factory: Any) -> None:
    plugin = load(tmp_path, "greeter")
    model = FakeModel(default="model answered")
    agent = await agent_factory([plugin], model)
    assert str(await agent.kernel.ask("ping")) == "pong from lua"
    assert model.requests == []


async def test_a_before_toolcall_rejection_ends_the_tool_loop_with_the_reason(
        tmp_path: Path, agent_factory: Any) -> None:
    plugin = load(tmp_path, "greeter")
    model = FakeModel([ToolCallReply("lua_greet", {"name": "Voldemort"}), "unused"])
    agent = await agent_factory([plugin], model)
    reply = str(await agent.kernel.ask("greet him"))
    assert "this name may not be greeted" in reply
    assert len(model.requests) == 1


async def test_output_channel_and_input_channel_are_registered_with_the_kernel(
        tmp_path: Path, agent_factory: Any) -> None:
    plugin = load(tmp_path, "greeter")
    agent = await agent_factory([plugin], FakeModel(default="ok"))
    assert agent.kernel.channels.output("lua_sink") is not None
    assert agent.kernel.channels.input("lua_in").no_memory is True
    result = await agent.kernel.tools.execute(
        ToolCall("c1", "output_send__lua_sink", {"payload": "hello", "type": "text"}))
    assert result.success, result.result
    assert "stored hello as text" in result.result


async def test_shutdown_calls_the_scripts_stop(tmp_path: Path) -> None:
    plugin = load(tmp_path, "greeter")
    agent = Agent(tmp_path, [plugin], FakeModel(default="ok"))
    await agent.start()
    await agent.host.shutdown()
    assert agent.config.get("plugin.greeter.stopped") is True
    await agent.kernel.aclose()
    await agent.bus.aclose()
    agent.config.close()


# --------------------------------------------------------------------------- direct hook calls


def test_tool_results_are_text_and_tables_become_json(tmp_path: Path) -> None:
    plugin = load(tmp_path, "greeter")
    result = plugin.call_tool("lua_table", {"x": "中文"})
    assert result.success
    assert json.loads(result.result) == {"ok": True, "items": [1, 2, 3], "echo": {"x": "中文"}}


async def test_stage_context_writes_are_synced_back_but_phase_is_read_only(tmp_path: Path) -> None:
    plugin = load(tmp_path, "greeter")
    ctx = StageContext(raw_message="hi", final_text="answer", phase="before_output")
    await plugin.before_output(ctx)
    assert ctx.final_text == "answer [lua]"
    assert ctx.phase == "before_output"
    ctx2 = StageContext(raw_message="ping")
    await plugin.on_input(ctx2)
    assert ctx2.response == "pong from lua"
    assert ctx2.extra == {"seen_by": "greeter"}


async def test_stages_without_lua_handlers_return_immediately(tmp_path: Path) -> None:
    plugin = load(tmp_path, "greeter")
    ctx = StageContext(llm_text="unchanged")
    assert await plugin.post_action(ctx) is None
    assert await plugin.pre_action(ctx) is None
    assert ctx.llm_text == "unchanged" and ctx.errors == []


async def test_own_tools_scope_skips_calls_of_other_plugins(tmp_path: Path) -> None:
    plugin = load(tmp_path, "greeter")
    foreign = ToolCall("c1", "files_read", {"name": "x"}, plugin="files")
    assert await plugin.before_toolcall(StageContext(), foreign) is None
    assert foreign.arguments == {"name": "x"}
    own = ToolCall("c2", "lua_greet", {"name": "x"}, plugin="greeter")
    await plugin.before_toolcall(StageContext(), own)
    assert own.arguments == {"name": "x同学"}
    result = ToolResult("c2", "lua_greet", True, "done", "greeter")
    await plugin.after_toolcall(StageContext(), own, result)
    assert result.result == "done [checked]"


# --------------------------------------------------------------------------- sandbox


@pytest.mark.parametrize(
    ("probe", "needle"),
    [
        ("os", "global 'os'"),
        ("io", "global 'io'"),
        ("require", "global 'require'"),
        ("load", "global 'load'"),
        ("dofile", "global 'dofile'"),
        ("debug", "global 'debug'"),
        ("python", "global 'python'"),
        ("dump", "field 'dump'"),
        ("sdk_attr", "index a function"),
        ("metatable", "blocked"),
        ("http", '缺少 "http" 能力'),
        ("inject", '缺少 "io" 能力'),
    ],
)
async def test_escape_attempts_from_a_plugin_fail(tmp_path: Path, agent_factory: Any, probe: str,
                                                  needle: str) -> None:
    plugin = load(tmp_path, "evil")
    agent = await agent_factory([plugin], FakeModel(default="ok"))
    result = await agent.kernel.tools.execute(ToolCall("c", "evil_probe", {"probe": probe}))
    assert result.success
    assert result.result.startswith("blocked: "), result.result
    assert needle in result.result
    assert not Path("/tmp/homeagent-pwned").exists()


def test_a_script_touching_io_at_load_is_refused_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "plugins" / "reader"
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text('{"name": "reader", "version": "1"}')
    (folder / "main.lua").write_text('local f = io.open("/etc/passwd")\nreturn {}')
    with pytest.raises(PluginLoadError) as info:
        LuaPlugin(folder, watch_interval=0)
    assert "reader/main.lua:1" in str(info.value)
    assert "global 'io'" in str(info.value)


# --------------------------------------------------------------------------- failures


def test_a_syntax_error_is_reported_and_the_other_plugins_load(tmp_path: Path) -> None:
    install(tmp_path, "broken_syntax", "greeter", "faulty")
    failures: list[tuple[str, Exception]] = []
    found = discover_lua_plugins(tmp_path, watch_interval=0, on_error=lambda n, e: failures.append((n, e)))
    assert [name for name, _ in found] == ["faulty", "greeter"]
    assert len(failures) == 1
    name, error = failures[0]
    assert name == "broken_syntax"
    assert "syntax error" in str(error) and "broken_syntax/main.lua:3" in str(error)


async def test_runtime_errors_in_handlers_are_reported_and_the_plugin_keeps_working(
        tmp_path: Path, agent_factory: Any) -> None:
    plugin = load(tmp_path, "faulty")
    agent = await agent_factory([plugin], FakeModel(default="ok"))
    execute = agent.kernel.tools.execute
    raised = await execute(ToolCall("1", "faulty_raise", {}))
    assert not raised.success and "attempt to index a nil value" in raised.result
    assert "faulty/main.lua:4" in raised.result
    returned = await execute(ToolCall("2", "faulty_err", {}))
    assert not returned.success and returned.result == "error: disk is full"
    assert (await execute(ToolCall("3", "faulty_fine", {}))).result == "fine"
    ctx = StageContext()
    await plugin.pre_action(ctx)
    assert any("stage exploded" in e for e in ctx.errors)
    assert ctx.llm_text == "second handler ran"
    await agent.bus.drain()
    reported = [e.data for e in agent.events if e.name == "system" and e.data.get("type") == "plugin_error"]
    assert any("faulty_raise" in str(d["what"]) for d in reported)


async def test_a_runaway_handler_is_stopped_and_the_plugin_goes_on(tmp_path: Path, agent_factory: Any) -> None:
    plugin = load(tmp_path, "runaway", instruction_limit=2_000_000, memory_limit=16 * 1024 * 1024)
    agent = await agent_factory([plugin], FakeModel(default="ok"))
    execute = agent.kernel.tools.execute
    looped = await execute(ToolCall("1", "runaway_loop", {}))
    assert not looped.success and "exceeded 2000000 instructions" in looped.result
    hog = await execute(ToolCall("2", "runaway_hog", {}))
    assert not hog.success and "memory limit" in hog.result
    assert (await execute(ToolCall("3", "runaway_ok", {}))).result == "still here"
    ctx = StageContext()
    await plugin.after_output(ctx)
    assert any("instructions" in e for e in ctx.errors)
    assert len(plugin.errors) == 3


def test_manifest_problems_name_the_field_to_fix(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "plugin.json").write_text('{"name": "p"}')
    with pytest.raises(PluginLoadError, match="'version'"):
        read_manifest(folder)
    (folder / "plugin.json").write_text('{"name": "p", "version": "1", "capabilities": ["root"]}')
    with pytest.raises(PluginLoadError, match="unknown capabilities \\['root'\\]"):
        read_manifest(folder)
    (folder / "plugin.json").write_text('{"name": "p", "version": "1"}')
    (folder / "main.lua").write_text("return 42")
    with pytest.raises(PluginLoadError, match="must end with `return"):
        LuaPlugin(folder, watch_interval=0)


def test_data_functions_called_at_load_time_return_an_error(tmp_path: Path) -> None:
    plugin = load(tmp_path, "nohttp")
    result = plugin.call_tool("nohttp_load_err", {})
    assert "only available once the plugin is started" in result.result


# --------------------------------------------------------------------------- http


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/big":
            body = b"x" * (64 * 1024)
        else:
            body = f"got {self.path} probe={self.headers.get('X-Probe')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        payload = json.loads(data)
        body = json.dumps({"ctype": self.headers.get("Content-Type"), "city": payload["city"]},
                          ensure_ascii=False).encode()
        self.send_response(201)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


async def test_http_get_and_post_reach_a_loopback_server(tmp_path: Path, agent_factory: Any,
                                                         http_server: str) -> None:
    plugin = load(tmp_path, "fetcher", http_max_bytes=16 * 1024)
    agent = await agent_factory([plugin], FakeModel(default="ok"))
    execute = agent.kernel.tools.execute
    got = await execute(ToolCall("1", "fetch_get", {"url": f"{http_server}/hello"}))
    assert got.result == "200 got /hello probe=lua"
    posted = await execute(ToolCall("2", "fetch_post", {"url": f"{http_server}/p"}))
    assert posted.result.startswith("201 ")
    assert json.loads(posted.result[4:]) == {"ctype": "application/json", "city": "杭州"}
    big = await execute(ToolCall("3", "fetch_get", {"url": f"{http_server}/big"}))
    assert not big.success and "exceeds 16384 bytes" in big.result
    refused = await execute(ToolCall("4", "fetch_get", {"url": "file:///etc/passwd"}))
    assert not refused.success and "only http:// and https://" in refused.result
    denied = await execute(ToolCall("5", "fetch_memory", {}))
    assert denied.result.startswith("nil|") and '缺少 "memory" 能力' in denied.result


async def test_http_is_refused_without_the_capability(tmp_path: Path, agent_factory: Any, http_server: str) -> None:
    plugin = load(tmp_path, "nohttp")
    agent = await agent_factory([plugin], FakeModel(default="ok"))
    result = await agent.kernel.tools.execute(ToolCall("1", "nohttp_get", {"url": f"{http_server}/x"}))
    assert result.result.startswith("nil|")
    assert 'add "http" to the capabilities array of plugin.json' in result.result


# --------------------------------------------------------------------------- reload


NEW_SCRIPT = """
sdk.register_tool("lua_greet", { description = "Greet v2",
  parameters = { type = "object", properties = { name = { type = "string" } } } },
  function(args) return "v2 " .. (args.name or "?") end)
sdk.register_tool("lua_new", { description = "new tool" }, function() return "new" end)
return { name = "greeter" }
"""


async def test_reload_swaps_tools_and_keeps_the_old_version_when_the_new_one_is_broken(
        tmp_path: Path, agent_factory: Any) -> None:
    plugin = load(tmp_path, "greeter")
    agent = await agent_factory([plugin], FakeModel(default="ok"))
    main = tmp_path / "plugins" / "greeter" / "main.lua"
    assert await asyncio.to_thread(plugin.reload) is False  # unchanged

    main.write_text("return {", encoding="utf-8")
    with pytest.raises(PluginLoadError, match="syntax error"):
        await asyncio.to_thread(plugin.reload)
    assert (await agent.kernel.tools.execute(ToolCall("1", "lua_greet", {"name": "a"}))).success

    main.write_text(NEW_SCRIPT, encoding="utf-8")
    assert await asyncio.to_thread(plugin.reload) is True
    tools = agent.kernel.tools
    assert "lua_new" in tools and "lua_table" not in tools
    assert tools.get("lua_greet").description == "Greet v2"
    assert (await tools.execute(ToolCall("2", "lua_greet", {"name": "b"}))).result == "v2 b"
    assert agent.kernel.channels.output("lua_sink") is None
    assert plugin.describe()["stages"] == {}


async def test_the_watcher_reloads_a_changed_script(tmp_path: Path, agent_factory: Any) -> None:
    install(tmp_path, "greeter")
    plugin = LuaPlugin(tmp_path / "plugins" / "greeter", watch_interval=0.02)
    agent = await agent_factory([plugin], FakeModel(default="ok"))
    (tmp_path / "plugins" / "greeter" / "main.lua").write_text(NEW_SCRIPT, encoding="utf-8")
    async with asyncio.timeout(10):
        while plugin.reloads == 0:
            await asyncio.sleep(0.02)
    assert "lua_new" in agent.kernel.tools


# --------------------------------------------------------------------------- data functions and template

DATA_SCRIPT = """
sdk.settings.register_def({ key = "mode", type = "select", options = { "a", "b" }, default = "a" })
sdk.register_input_channel("lua_feed", {})
sdk.register_tool("data_probe", { description = "data functions" }, function()
  local recalled, rerr = sdk.memory.recall({ "小王" }, 2)
  local ok, ierr = sdk.inject_text("data", "lua_feed", "来自 Lua 的输入")
  sdk.set_setting("counter", { n = 1 })
  return { recalled = recalled, rerr = rerr, injected = ok, ierr = ierr, mode = sdk.get_setting("mode"),
           counter = sdk.get_setting("counter") }
end)
return { name = "data" }
"""


async def test_data_functions_reach_the_kernel_and_unwired_services_return_empty_values(
        tmp_path: Path, agent_factory: Any) -> None:
    folder = tmp_path / "plugins" / "data"
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text('{"name": "data", "version": "1"}')
    (folder / "main.lua").write_text(DATA_SCRIPT, encoding="utf-8")
    plugin = LuaPlugin(folder, watch_interval=0)
    model = FakeModel(default="ok")
    agent = await agent_factory([plugin], model)
    result = await agent.kernel.tools.execute(ToolCall("1", "data_probe", {}))
    assert result.success, result.result
    data = json.loads(result.result)
    assert data["recalled"] == {"entities": [], "relations": []}
    assert data["injected"] is True and "ierr" not in data
    assert data["mode"] == "a" and data["counter"] == {"n": 1}
    assert agent.config.definition("plugin.data.mode").options == ["a", "b"]
    async with asyncio.timeout(10):
        await model.wait_started(1)
    assert model.requests[0]["messages"][-1]["content"] == "来自 Lua 的输入"


def test_the_lua_template_loads_as_a_plugin(tmp_path: Path) -> None:
    template = Path(__file__).resolve().parents[3] / "homeagent_core" / "plugins" / "lua_template"
    folder = tmp_path / "plugins" / "demo"
    folder.mkdir(parents=True)
    for path in template.iterdir():
        (folder / path.name).write_text(path.read_text(encoding="utf-8").replace("{{name}}", "demo"), encoding="utf-8")
    plugin = LuaPlugin(folder, watch_interval=0)
    assert plugin.describe()["tools"] == ["demo_hello"]
    assert plugin.describe()["stages"] == {"before_output": 1}
