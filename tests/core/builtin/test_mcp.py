from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from homeagent_core.builtin.mcp import build_cli, parse_servers, tool_name
from homeagent_core.config import ConfigStore
from homeagent_sdk.errors import ConfigError, ToolError

MCP = "homeagent_core.builtin.mcp"
HERE = Path(__file__).parent
TIME_SERVER = {"name": "time", "command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
CALC_STDIO = {"name": "calc", "command": sys.executable, "args": [str(HERE / "mcp_http_server.py"), "stdio"]}
CALC_2025 = {**CALC_STDIO, "args": [str(HERE / "mcp_http_server.py"), "stdio-2025"]}  # no server/discover
FAST = {"plugin.mcp.ping_interval": "200ms", "plugin.mcp.max_backoff": "300ms"}


async def until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    """The SDK-built test server as a subprocess that can be killed and started again."""

    def __init__(self, transport: str = "http") -> None:
        self.port = _free_port()
        self.transport = transport
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/" + ("sse" if self.transport == "sse" else "mcp")

    async def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "mcp_http_server.py"), str(self.port), self.transport])

        def accepting() -> bool:
            assert self.proc is not None
            assert self.proc.poll() is None, "the test MCP server exited"
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        await until(accepting)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    yield server
    server.kill()


def test_importing_the_plugin_does_not_import_the_mcp_sdk():
    code = "import sys, homeagent_core.builtin.mcp; print('mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_server_settings_are_validated_with_messages_naming_the_entry():
    assert parse_servers("") == []
    (spec,) = parse_servers(json.dumps([TIME_SERVER]))
    assert spec.transport == "stdio" and spec.args[-1] == "UTC"
    assert parse_servers([{"name": "a", "url": "http://h/sse"}])[0].transport == "sse"
    assert parse_servers([{"name": "a", "url": "http://h/mcp"}])[0].transport == "http"
    cases = {
        "{": "not valid JSON",
        '{"name": "x"}': "must be a JSON array",
        '[{"name": "bad name", "command": "x"}]': "servers[0]: name 'bad name' is invalid",
        '[{"name": "a", "command": "x", "url": "http://h"}]': "either 'command'",
        '[{"name": "a"}]': "either 'command'",
        '[{"name": "a", "url": "ftp://h"}]': "must start with http",
        '[{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]': "servers[1]: the name 'a' is used twice",
        '[{"name": "a", "command": "x", "args": "--flag"}]': "'args' must be an array",
        '[{"name": "a", "url": "http://h", "transport": "ws"}]': "transport 'ws' is unknown",
    }
    for raw, message in cases.items():
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            parse_servers(raw)


def test_tool_names_are_made_safe_for_llm_function_names():
    assert tool_name("time", "get_current_time") == "time_get_current_time"
    assert tool_name("srv", "a.b/c d") == "srv_a_b_c_d"
    assert len(tool_name("s", "x" * 100)) == 64


async def test_the_real_time_server_tools_appear_and_a_call_returns_the_time(harness):
    h = await harness([MCP], {"plugin.mcp.servers": [TIME_SERVER]})
    connection = h.plugin("mcp").connections["time"]
    await connection.wait_connected()
    assert sorted(connection.registered) == ["time_convert_time", "time_get_current_time"]
    tool = h.tools.get("time_get_current_time")
    assert tool.plugin == "mcp" and tool.description.startswith("[MCP/time] Get current time")
    assert tool.parameters["required"] == ["timezone"]
    reply = json.loads(await h.ok("time_get_current_time", timezone="Asia/Shanghai"))
    assert reply["timezone"] == "Asia/Shanghai" and reply["datetime"].endswith("+08:00")
    assert "Invalid timezone" in await h.fails("time_get_current_time", timezone="Mars/Olympus")
    assert "missing required argument 'timezone'" in await h.fails("time_get_current_time")
    (status,) = json.loads(await h.ok("mcp_servers"))
    assert status["state"] == "connected" and status["transport"] == "stdio"


async def test_streamable_http_server_dies_tools_detach_and_come_back_on_reconnect(harness, http_server):
    await http_server.start()
    h = await harness([MCP], {**FAST, "plugin.mcp.servers": [{"name": "calc", "url": http_server.url}]})
    connection = h.plugin("mcp").connections["calc"]
    await connection.wait_connected()
    assert "calc_add" in h.tools and h.tools.get("calc_add").description == "[MCP/calc] Add two integers."
    assert await h.ok("calc_add", a=2, b=40) == "42"
    assert "boom" in await h.fails("calc_fail", reason="boom")

    http_server.kill()
    await until(lambda: "calc_add" not in h.tools)
    assert connection.state in ("reconnecting", "connecting")
    (status,) = json.loads(await h.ok("mcp_servers"))
    assert status["tools"] == [] and status["last_error"]
    with pytest.raises(ToolError, match="'calc' is not connected"):
        await connection.call("add", {"a": 1, "b": 2})

    await http_server.start()
    await until(lambda: connection.state == "connected" and "calc_add" in h.tools)
    assert await h.ok("calc_shout", text="back") == "BACK"
    assert connection.connects >= 2


async def test_sse_transport_works(harness):
    server = HttpServer("sse")
    await server.start()
    try:
        h = await harness([MCP], {"plugin.mcp.servers": [{"name": "legacy", "url": server.url}]})
        connection = h.plugin("mcp").connections["legacy"]
        await connection.wait_connected()
        assert connection.spec.transport == "sse"
        assert await h.ok("legacy_shout", text="hi") == "HI"
    finally:
        server.kill()


async def test_a_server_that_cannot_start_is_reported_and_nothing_crashes(harness, tmp_path: Path):
    broken = {"name": "ghost", "command": str(tmp_path / "no-such-binary")}
    h = await harness([MCP], {**FAST, "plugin.mcp.servers": [broken]})
    connection = h.plugin("mcp").connections["ghost"]
    await until(lambda: bool(connection.last_error))
    (status,) = json.loads(await h.ok("mcp_servers"))
    assert status["state"] in ("reconnecting", "connecting") and status["tools"] == []
    assert "no-such-binary" in status["last_error"] or "No such file" in status["last_error"]


def test_cli_lists_and_tests_configured_servers(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    config = ConfigStore(data / "config.db")
    from homeagent_sdk.types import ConfigDef

    config.define_plugin("mcp", ConfigDef(key="servers", type="json"))
    down = {"name": "down", "url": f"http://127.0.0.1:{_free_port()}/mcp"}
    config.set("plugin.mcp.servers", json.dumps([TIME_SERVER, down, CALC_STDIO]))
    config.close()
    runner = CliRunner()
    cli = build_cli()
    listed = runner.invoke(cli, ["list", "--data", str(data)])
    assert listed.exit_code == 0, listed.output
    assert "time" in listed.output and "stdio" in listed.output and "down" in listed.output
    tested = runner.invoke(cli, ["test", "time", "--data", str(data)])
    assert tested.exit_code == 0, tested.output
    assert "time: connected, 2 tools" in tested.output and "time_get_current_time" in tested.output
    assert "also:" not in tested.output  # empty resource and prompt lists are not worth a line
    calc = runner.invoke(cli, ["test", "calc", "--data", str(data)])
    assert calc.exit_code == 0, calc.output
    assert "calc_add: Add two integers." in calc.output
    assert "also: 2 resources, 1 resource templates, 1 prompts" in calc.output
    failed = runner.invoke(cli, ["test", "down", "--data", str(data), "--timeout", "5"])
    assert failed.exit_code == 1 and "MCP server 'down'" in failed.output
    unknown = runner.invoke(cli, ["test", "nope", "--data", str(data)])
    assert unknown.exit_code == 1 and "configured: time, down, calc" in unknown.output


async def test_homeagent_serves_its_memory_and_knowledge_over_stdio_to_an_mcp_client(tmp_path: Path):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    data = tmp_path / "served"
    data.mkdir()
    config = ConfigStore(data / "config.db")
    config.set("core.embeddings.provider", "none")  # TF-IDF tier: no model weights needed
    config.close()
    (data / "knowledge" / "home" / "wifi").mkdir(parents=True)
    (data / "knowledge" / "home" / "wifi" / "content.md").write_text("The wifi password is on the fridge.")
    code = f"from homeagent_core.builtin.mcp import build_cli; build_cli()(['serve', '--data', {str(data)!r}])"
    params = StdioServerParameters(command=sys.executable, args=["-c", code])
    with (tmp_path / "serve.stderr").open("w") as errlog:
        async with (
            asyncio.timeout(60),
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = sorted(t.name for t in (await session.list_tools()).tools)
            assert names == ["knowledge_search", "memory_commit", "memory_recall"]
            triple = {"subject": "小王", "relation": "住在", "object": "杭州"}
            committed = await session.call_tool("memory_commit", {"triples": [triple]})
            assert not committed.is_error, committed.content
            recalled = await session.call_tool("memory_recall", {"query_intent": "小王"})
            assert not recalled.is_error and "杭州" in recalled.content[0].text
            found = await session.call_tool("knowledge_search", {"query": "wifi password"})
            assert json.loads(found.content[0].text)["results"][0]["name"] == "home/wifi"
            bad = await session.call_tool("memory_recall", {"query_intent": "小王", "depth": 99})
            assert bad.is_error and "depth" in bad.content[0].text


LIBRARY_SERVER = {"name": "lib", "command": sys.executable, "args": [str(HERE / "mcp_library_server.py")]}


async def test_resources_and_prompts_become_tools_and_task_only_tools_say_so(harness):
    h = await harness([MCP], {"plugin.mcp.servers": [LIBRARY_SERVER, TIME_SERVER]})
    await until(lambda: "lib_resource_read" in h.tools and "time_get_current_time" in h.tools)
    listed = json.loads(await h.ok("lib_resource_list"))
    assert {"uri": "notes://shopping", "name": "shopping", "description": "The shopping list",
            "mime_type": "text/plain"} in listed
    assert any(r.get("uri_template") == "notes://day/{day}" for r in listed)
    assert await h.ok("lib_resource_read", uri="notes://shopping") == "牛奶\n鸡蛋\n香蕉"
    assert "water the plants" in await h.ok("lib_resource_read", uri="notes://day/monday")
    assert "notes://nothing" in await h.fails("lib_resource_read", uri="notes://nothing")
    prompts = json.loads(await h.ok("lib_prompt_list"))
    assert prompts[0]["name"] == "weekly_menu"
    assert {"name": "days", "required": True, "description": ""} in prompts[0]["arguments"]
    menu = await h.ok("lib_prompt_get", name="weekly_menu", arguments={"days": "3", "diet": "vegetarian"})
    assert "[user] Plan 3 days of dinners for a vegetarian diet" in menu
    assert await h.ok("lib_lookup", title="三体") == "三体: shelf B3"
    refused = await h.fails("lib_long_scan", folder="/")
    assert "only runs as an MCP task" in refused and "not supported" in refused
    # mcp-server-time offers tools only: no resource or prompt tools appear for it.
    assert not [n for n in h.tools.names() if n.startswith("time_resource") or n.startswith("time_prompt")]
    # The prompts are listed in the system prompt like skills.
    await h.kernel.ask("做个菜单")
    catalogue = [m["content"] for m in h.model.requests[-1]["messages"] if m["role"] == "system"
                 and "MCP 提示" in m["content"]]
    assert catalogue and "- lib/weekly_menu: Plan meals for some days（用 lib_prompt_get 取得）" in catalogue[0]


async def test_homeagent_serves_resources_prompts_and_its_version(tmp_path: Path):
    from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client

    from homeagent_sdk._version import __version__

    data = tmp_path / "served"
    data.mkdir()
    config = ConfigStore(data / "config.db")
    config.set("core.embeddings.provider", "none")
    config.close()
    (data / "knowledge" / "home" / "wifi").mkdir(parents=True)
    (data / "knowledge" / "home" / "wifi" / "content.md").write_text("The wifi password is on the fridge.")
    (data / "personal").mkdir()
    (data / "personal" / "personal.md").write_text("你是阿福。", encoding="utf-8")
    code = f"from homeagent_core.builtin.mcp import build_cli; build_cli()(['serve', '--data', {str(data)!r}])"
    params = StdioServerParameters(command=sys.executable, args=["-c", code])
    with (tmp_path / "serve.stderr").open("w") as errlog:
        async with (
            asyncio.timeout(60),
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "homeagent" and init.server_info.version == __version__
            listed = {str(r.uri): r for r in (await session.list_resources()).resources}
            assert set(listed) == {"knowledge://home/wifi", "persona://current"}
            assert listed["knowledge://home/wifi"].mime_type == "text/markdown"
            wifi = await session.read_resource("knowledge://home/wifi")
            assert wifi.contents[0].text == "The wifi password is on the fridge."
            persona = await session.read_resource("persona://current")
            assert persona.contents[0].text == "你是阿福。"
            with pytest.raises(MCPError, match="no knowledge entry 'home/nope'"):
                await session.read_resource("knowledge://home/nope")
            prompts = {p.name: p for p in (await session.list_prompts()).prompts}
            assert sorted(prompts) == ["knowledge_answer", "recall_about", "remember"]
            (topic,) = prompts["recall_about"].arguments
            assert topic.name == "topic" and topic.required
            triple = {"subject": "小王", "relation": "住在", "object": "杭州"}
            assert not (await session.call_tool("memory_commit", {"triples": [triple]})).is_error
            prompt = await session.get_prompt("recall_about", {"topic": "小王"})
            text = prompt.messages[0].content.text
            assert prompt.messages[0].role == "user" and "memory_recall" in text and "杭州" in text
            answer = await session.get_prompt("knowledge_answer", {"question": "wifi password"})
            assert "home/wifi" in answer.messages[0].content.text


async def test_error_answers_of_the_real_time_server_are_tool_errors_naming_it(harness):
    h = await harness([MCP], {"plugin.mcp.servers": [TIME_SERVER]})
    connection = h.plugin("mcp").connections["time"]
    await connection.wait_connected()
    with pytest.raises(ToolError, match=r"MCP server 'time' rejected resources/read time://now: Unknown resource"):
        await connection.session_call("resources/read time://now", lambda s: s.read_resource("time://now"))
    with pytest.raises(ToolError, match=r"MCP server 'time': prompts/get x failed: "):
        await connection.session_call("prompts/get x", lambda s: s.get_prompt("x"))
    assert connection.state == "connected"  # an error answer is not a broken connection
    assert await h.ok("time_get_current_time", timezone="UTC")


async def test_a_stdio_server_s_resources_and_prompts_are_tools_and_blobs_land_in_the_media_store(harness):
    h = await harness([MCP], {"plugin.mcp.servers": [CALC_STDIO]}, memory=True)
    connection = h.plugin("mcp").connections["calc"]
    await connection.wait_connected()
    for name in ("resource_list", "resource_read", "resource_subscribe", "resource_unsubscribe", "prompt_get"):
        assert f"calc_{name}" in h.tools, name
    listing = json.loads(await h.ok("calc_resource_list"))
    assert {r.get("uri") for r in listing} >= {"note://current", "image://pixel.png"}
    assert any(r.get("uri_template") == "greeting://{name}" for r in listing)
    assert await h.ok("calc_resource_read", uri="note://current") == "first note"
    assert await h.ok("calc_resource_read", uri="greeting://Ada") == "Hello, Ada!"
    stored = await h.ok("calc_resource_read", uri="image://pixel.png")
    assert stored.startswith("[image/png, 66 bytes from image://pixel.png, stored as media ")
    media = await h.app.services.media.get(stored.rsplit(" ", 1)[-1].rstrip("]"))
    assert media.mime == "image/png" and media.data[:4] == b"\x89PNG"
    assert "MCP server 'calc' rejected resources/read nope://x" in await h.fails("calc_resource_read", uri="nope://x")
    text = await h.ok("calc_prompt_get", name="review", arguments={"code": "x = 1"})
    assert text == "# Review a piece of code with a focus.\n[user] Please review this code, looking for bugs:\n\nx = 1"
    assert "MCP server 'calc'" in await h.fails("calc_prompt_get", name="review")  # a required argument missing
    assert "MCP server 'calc'" in await h.fails("calc_prompt_get", name="nope")


async def test_task_only_tools_and_minus_32601_answers_say_not_supported(harness):
    # Task-only tools are a 2025-11-25 notion (2026-07-28 lists no `execution`): a 2025-era server.
    h = await harness([MCP], {"plugin.mcp.servers": [CALC_2025]})
    connection = h.plugin("mcp").connections["calc"]
    await connection.wait_connected()
    declared = await h.fails("calc_render", scene="x")
    assert "not supported: calc requires task-augmented calls for 'render'" in declared
    answered = await h.fails("calc_batch_job", size=3)
    assert "not supported: calc requires task-augmented calls for 'batch_job'" in answered
    assert "-32601" in answered
    assert await h.ok("calc_add", a=1, b=2) == "3" and connection.state == "connected"


def _mentions(model: Any, text: str) -> bool:
    return any(text in json.dumps(r.get("messages"), ensure_ascii=False) for r in model.requests)


@pytest.mark.parametrize(("server", "modern"), [(CALC_STDIO, True), (CALC_2025, False)], ids=["2026", "2025"])
async def test_a_subscribed_resource_change_arrives_as_an_event_and_an_input(
    harness, server: dict[str, Any], modern: bool
):
    """2026-07-28 servers get a subscriptions/listen stream, 2025-era ones resources/subscribe."""
    from homeagent_core.builtin.mcp_connection import is_modern

    h = await harness([MCP], {"plugin.mcp.servers": [server]})
    connection = h.plugin("mcp").connections["calc"]
    await connection.wait_connected()
    assert is_modern(connection._session) is modern
    assert "subscribed to note://current" in await h.ok("calc_resource_subscribe", uri="note://current")
    assert await h.ok("calc_set_note", text="second note") == "noted"
    (event,) = await h.wait_event("mcp_resource_updated", timeout=20)
    assert event.data == {"server": "calc", "uri": "note://current"}
    await until(lambda: _mentions(h.model, "the subscribed resource note://current changed"))
    assert await h.ok("calc_resource_read", uri="note://current") == "second note"
    (status,) = json.loads(await h.ok("mcp_servers"))
    assert status["subscriptions"] == ["note://current"] and status["resource_updates"] == ["note://current"]
    assert "unsubscribed" in await h.ok("calc_resource_unsubscribe", uri="note://current")
    assert "not subscribed to 'note://current'" in await h.fails("calc_resource_unsubscribe", uri="note://current")


async def test_each_change_of_a_subscribed_resource_is_its_own_input(harness):
    h = await harness([MCP], {"plugin.mcp.servers": [CALC_STDIO]})
    connection = h.plugin("mcp").connections["calc"]
    await connection.wait_connected()
    await h.ok("calc_resource_subscribe", uri="note://current")
    for n in range(3):
        assert await h.ok("calc_set_note", text=f"note {n}") == "noted"
    await h.wait_event("mcp_resource_updated", count=3, timeout=20)
    # Three changes, three inputs and three turns: the same text is not a duplicate message.
    changed = "the subscribed resource note://current changed"
    inputs = await h.wait_event("raw_input", lambda e: changed in e.data["text"], count=3, timeout=20)
    assert [e.data["channel"] for e in inputs] == ["mcp"] * 3


async def test_resources_prompts_and_subscriptions_over_streamable_http(harness, http_server):
    await http_server.start()
    # FAST: the liveness check notices the restarted server within a second, not a minute
    h = await harness([MCP], {"plugin.mcp.servers": [{"name": "calc", "url": http_server.url}], **FAST})
    connection = h.plugin("mcp").connections["calc"]
    await connection.wait_connected()
    assert await h.ok("calc_resource_read", uri="greeting://Bo") == "Hello, Bo!"
    stored = await h.ok("calc_resource_read", uri="image://pixel.png")  # no media store without memory
    assert stored == (
        "[image/png, 66 bytes from image://pixel.png: binary content, not stored (this agent has no media store)]"
    )
    fast = await h.ok("calc_prompt_get", name="review", arguments={"code": "x", "focus": "speed"})
    assert "looking for speed" in fast
    await h.ok("calc_resource_subscribe", uri="note://current")
    await h.ok("calc_set_note", text="over http")
    (event,) = await h.wait_event("mcp_resource_updated", timeout=20)
    assert event.data["uri"] == "note://current"
    # the server restarts: the reconnected session listens for the same resource again
    connects = connection.connects
    http_server.kill()
    await http_server.start()
    await until(lambda: connection.state == "connected" and connection.connects > connects)
    await until(lambda: connection._listening is not None and "note://current" in connection._listening[1])
    await h.ok("calc_set_note", text="after a restart")
    await h.wait_event("mcp_resource_updated", count=2, timeout=20)


async def test_homeagent_answers_a_bad_prompts_get_with_invalid_params_and_no_traceback(tmp_path: Path):
    from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
    from mcp.types import INVALID_PARAMS

    data = tmp_path / "served"
    data.mkdir()
    config = ConfigStore(data / "config.db")
    config.set("core.embeddings.provider", "none")
    config.close()
    code = f"from homeagent_core.builtin.mcp import build_cli; build_cli()(['serve', '--data', {str(data)!r}])"
    params = StdioServerParameters(command=sys.executable, args=["-c", code])
    stderr = tmp_path / "serve.stderr"
    with stderr.open("w") as errlog:
        async with (
            asyncio.timeout(60),
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            with pytest.raises(MCPError) as missing:
                await session.get_prompt("recall_about", {})
            assert missing.value.code == INVALID_PARAMS
            assert missing.value.message == "prompt 'recall_about' needs the argument topic; pass it in arguments"
            with pytest.raises(MCPError) as unknown:
                await session.get_prompt("nope", {"x": "1"})
            assert unknown.value.code == INVALID_PARAMS
            assert unknown.value.message == "unknown prompt 'nope'; known: knowledge_answer, recall_about, remember"
            prompt = await session.get_prompt("remember", {"fact": "小王住在杭州"})
            assert "小王住在杭州" in prompt.messages[0].content.text
    assert "Traceback" not in stderr.read_text(), stderr.read_text()


async def test_an_image_a_tool_returns_is_stored_as_media_and_shown_to_the_model(harness):
    import base64

    from homeagent_sdk.testing import FakeModel, ToolCallReply

    model = FakeModel([ToolCallReply("calc_snapshot", {"label": "door"}), "一个像素"])
    h = await harness([MCP], {"plugin.mcp.servers": [CALC_STDIO]}, memory=True, model=model)
    await h.plugin("mcp").connections["calc"].wait_connected()
    result = await h.call("calc_snapshot", label="door")
    assert result.success, result.result
    (shot,) = result.attachments
    assert shot.mime == "image/png" and shot.data[:4] == b"\x89PNG" and len(shot.data) == 66
    assert result.result == f"snapshot door\n[image image/png, 66 bytes, stored as media {shot.digest}; attached below]"
    stored = await h.app.services.media.get(shot.digest)
    assert stored.mime == "image/png" and stored.data == shot.data
    assert await h.kernel.ask("拍一张门口的照片") == "一个像素"
    after_tool = model.requests[1]["messages"]
    (image_turn,) = [m for m in after_tool if m["role"] == "user" and isinstance(m["content"], list)]
    url = f"data:image/png;base64,{base64.b64encode(shot.data).decode('ascii')}"
    assert {"type": "image_url", "image_url": {"url": url}} in image_turn["content"]


async def test_without_a_media_store_the_image_still_reaches_the_model(harness):
    h = await harness([MCP], {"plugin.mcp.servers": [CALC_STDIO]})
    await h.plugin("mcp").connections["calc"].wait_connected()
    result = await h.call("calc_snapshot", label="x")
    note = "[image image/png, 66 bytes, not stored (this agent has no media store); attached below]"
    assert result.result == f"snapshot x\n{note}"
    assert [a.data[:4] for a in result.attachments] == [b"\x89PNG"]
