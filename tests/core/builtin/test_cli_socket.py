from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.builtin.cli_socket import _clear_stale_socket
from homeagent_sdk import PluginError
from homeagent_sdk._fake_model import FakeModel, FakeReply

CLI = "homeagent_core.builtin.cli_socket"


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, path: Path) -> Client:
        return cls(*await asyncio.open_unix_connection(str(path)))

    async def send(self, line: str) -> None:
        self.writer.write(line.encode() + b"\n")
        await self.writer.drain()

    async def read(self) -> dict[str, Any] | None:
        async with asyncio.timeout(10):
            raw = await self.reader.readline()
        return json.loads(raw) if raw else None

    async def until_response(self) -> list[dict[str, Any]]:
        events = []
        while True:
            event = await self.read()
            assert event is not None, f"connection closed after {events}"
            events.append(event)
            if event["type"] in ("response", "error"):
                return events

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def test_the_socket_is_private_and_removed_on_shutdown(harness):
    h = await harness([CLI])
    path = h.app.data_dir / "cli.sock"
    mode = path.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    with pytest.raises(PluginError, match="already listening"):
        _clear_stale_socket(path)
    await h.stop()
    assert not path.exists()


async def test_the_socket_never_appears_at_its_path_with_a_looser_mode(harness, monkeypatch: pytest.MonkeyPatch):
    """With a permissive umask, the file a client can connect to already has mode 0600."""
    seen: list[tuple[str, int | None]] = []
    real_chmod = os.chmod

    def chmod(target: Any, mode: int, *args: Any, **kwargs: Any) -> None:
        public = Path(target).name == "cli.sock"
        seen.append((Path(target).name, stat.S_IMODE(os.stat(target).st_mode) if public else None))
        real_chmod(target, mode, *args, **kwargs)

    monkeypatch.setattr(os, "chmod", chmod)
    old_umask = os.umask(0)
    try:
        h = await harness([CLI])
    finally:
        os.umask(old_umask)
    path = h.app.data_dir / "cli.sock"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert seen and all(name != "cli.sock" for name, _ in seen), seen  # the mode was set before it was there
    await h.stop()


async def test_a_stale_socket_file_is_replaced_and_a_plain_file_is_refused(tmp_path: Path):
    import socket

    stale = tmp_path / "stale.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()  # bound but nobody listens: a dead daemon's leftover
    _clear_stale_socket(stale)
    assert not stale.exists()
    plain = tmp_path / "plain.sock"
    plain.write_text("x")
    with pytest.raises(PluginError, match="not a socket"):
        _clear_stale_socket(plain)


async def test_a_message_streams_deltas_then_the_response_with_usage(harness):
    usage = {"prompt": 5, "completion": 9, "total": 14}
    model = FakeModel([FakeReply(content="你好，我是小宅，很高兴见到你。", usage=usage)])
    h = await harness([CLI], model=model)
    client = await Client.connect(h.app.data_dir / "cli.sock")
    await client.send("你好")
    events = await client.until_response()
    deltas = [e["content"] for e in events if e["type"] == "delta"]
    response = events[-1]
    assert len(deltas) > 1 and "".join(deltas) == response["content"] == "你好，我是小宅，很高兴见到你。"
    assert response["usage"] == {"prompt": 5, "completion": 9, "total": 14}
    assert model.requests[0]["messages"][-1]["content"].endswith("你好")
    (raw,) = await h.wait_event("raw_input", lambda e: e.data["channel"] == "cli")
    assert raw.data["source"] == "cli"
    await client.close()


async def test_json_lines_carry_multi_line_messages(harness):
    h = await harness([CLI])
    client = await Client.connect(h.app.data_dir / "cli.sock")
    await client.send(json.dumps({"text": "line one\nline two"}))
    response = (await client.until_response())[-1]
    assert response["type"] == "response" and response["content"] == "ok"
    assert "line one\nline two" in h.model.requests[-1]["messages"][-1]["content"]
    await client.close()


async def test_an_api_key_must_come_first_as_auth_line(harness):
    h = await harness([CLI], {"plugin.cli.api_key": "s3cret"})
    path = h.app.data_dir / "cli.sock"
    rude = await Client.connect(path)
    await rude.send("hello")
    assert await rude.read() == {"type": "error", "error": "unauthorized"}
    assert await rude.read() is None  # closed
    await rude.close()
    wrong = await Client.connect(path)
    await wrong.send("/auth nope")
    assert await wrong.read() == {"type": "error", "error": "unauthorized"}
    assert await wrong.read() is None
    await wrong.close()
    good = await Client.connect(path)
    await good.send("/auth s3cret")
    assert await good.read() == {"type": "response", "content": "authenticated"}
    await good.send("/help")
    assert "/memory <query>" in (await good.read())["content"]
    await good.close()


async def test_slash_commands_report_real_state(harness):
    h = await harness([CLI, "homeagent_core.builtin.cfgmgr"])
    client = await Client.connect(h.app.data_dir / "cli.sock")

    async def command(line: str) -> dict[str, Any]:
        await client.send(line)
        return (await client.until_response())[-1]

    status = (await command("/status"))["content"]
    started = sum(1 for p in h.app.host.plugins() if p.status == "started")
    assert "uptime:" in status and f"tools: {len(h.tools)}" in status and f"plugins: {started} started" in status
    assert json.loads((await command("/kernel"))["content"])["tools"] == len(h.tools)
    plugins = (await command("/plugins"))["content"]
    assert "cli" in plugins and "cfgmgr" in plugins and "started" in plugins
    mode = (await command("/settings get plugin.cli.socket_mode"))["content"]
    assert mode.startswith("plugin.cli.socket_mode = 0600")
    assert (await command("/settings set plugin.cli.api_key abc"))["content"] == "plugin.cli.api_key = ****"
    assert h.config.get("plugin.cli.api_key") == "abc"
    assert "expected one of" in (await command("/settings set plugin.cli.socket_mode 0777"))["error"]
    assert "plugin.cli.api_key = ****" in (await command("/settings plugin.cli"))["content"]
    assert "no memory_recall tool" in (await command("/memory 小王"))["error"]
    assert "usage: /knowledge" in (await command("/knowledge"))["error"]
    assert "unknown command /frobnicate" in (await command("/frobnicate"))["error"]
    assert (await command("/stop"))["content"].startswith("stopped; 0 queued")
    await client.close()


async def test_memory_and_knowledge_commands_use_the_real_memory_tools(harness):
    h = await harness([CLI], memory=True)
    await h.ok("memory_commit", triples=[{"subject": "小王", "relation": "住在", "object": "杭州"}])
    await h.ok("knowledge_create", name="home/wifi", content="The wifi password is on the fridge.")
    client = await Client.connect(h.app.data_dir / "cli.sock")
    await client.send("/memory 小王")
    memory = (await client.until_response())[-1]
    assert memory["type"] == "response" and "杭州" in memory["content"]
    await client.send("/knowledge wifi password")
    knowledge = (await client.until_response())[-1]
    assert knowledge["type"] == "response" and "home/wifi" in knowledge["content"]
    await client.close()


async def test_messages_the_agent_sends_to_the_cli_channel_reach_connected_clients(harness):
    h = await harness([CLI])
    client = await Client.connect(h.app.data_dir / "cli.sock")
    await client.send("/help")
    await client.until_response()
    await h.kernel.channels.send("cli", "timer went off")
    assert await client.read() == {"type": "message", "content": "timer went off"}
    await client.close()


async def test_a_failing_model_is_reported_as_an_error_line_and_the_connection_stays_usable(harness):
    from homeagent_sdk.errors import ProviderError

    h = await harness([CLI], model=FakeModel([ProviderError("upstream 500"), "recovered"]))
    client = await Client.connect(h.app.data_dir / "cli.sock")
    await client.send("first")
    assert (await client.until_response())[-1] == {"type": "error", "error": "upstream 500"}
    await client.send("second")
    assert (await client.until_response())[-1]["content"] == "recovered"
    await client.close()


async def test_socket_mode_setting_is_respected(harness):
    h = await harness([CLI], {"plugin.cli.socket_mode": "0660"})
    assert stat.S_IMODE((h.app.data_dir / "cli.sock").stat().st_mode) == 0o660


# --------------------------------------------------------------------------- /plugin and /agents

RAW_PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "raw_ndjson_plugin.py"


def install_raw(data: Path) -> Path:
    """The stdlib-only protocol plugin, installed as ``<data>/plugins/raw`` (version 1.0)."""
    import sys

    folder = data / "plugins" / "raw"
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text(json.dumps({"name": "raw", "version": "1.0", "entry": "plugin.bin"}))
    entry = folder / "plugin.bin"
    entry.write_text(f"#!{sys.executable}\n" + RAW_PLUGIN.read_text())
    entry.chmod(0o755)
    return entry


async def commander(path: Path) -> tuple[Client, Any]:
    client = await Client.connect(path)

    async def command(line: str) -> dict[str, Any]:
        await client.send(line)
        return (await client.until_response())[-1]

    return client, command


async def test_plugin_commands_inspect_disable_enable_reload_and_remove_a_proc_plugin(harness, tmp_path: Path):
    data = tmp_path / "data"
    entry = install_raw(data)
    h = await harness([CLI], data=data)
    client, command = await commander(data / "cli.sock")
    supervisor = h.app.supervisor

    listed = (await command("/plugin list"))["content"]
    row = next(line for line in listed.splitlines() if line.startswith("raw "))
    assert "proc" in row and "started" in row and "v1.0" in row
    assert (await command("/plugins"))["content"] == listed

    info = json.loads((await command("/plugin info raw"))["content"])
    pid = info["pid"]
    assert info["kind"] == "proc" and pid > 0 and "raw_echo" in info["tools"] and not info["disabled"]
    assert info["package"]["version"] == "1.0" and "plugin.bin" in info["package"]["files"]

    disabled = await command("/plugin disable raw")
    assert disabled["content"] == "disabled raw; it was stopped and its tools removed"
    assert "raw" in h.config.disabled_plugins() and "raw_echo" not in h.tools
    row = next(line for line in (await command("/plugin list"))["content"].splitlines() if line.startswith("raw "))
    assert "stopped" in row and "(disabled)" in row
    assert "is disabled; /plugin enable raw first" in (await command("/plugin reload raw"))["error"]

    assert (await command("/plugin enable raw"))["content"] == "enabled raw; it is running"
    assert "raw" not in h.config.disabled_plugins()
    assert await h.ok("raw_echo", text="back") == "back"

    reloaded = (await command("/plugin reload raw"))["content"]
    new_pid = supervisor.get("raw").runtime_info()["pid"]
    assert reloaded == f"reloaded raw (pid {new_pid})" and new_pid != pid
    assert (await command("/plugin reload"))["content"] == "no out-of-process plugin changed; skills rescanned"
    entry.write_text(entry.read_text() + "\n# a new build\n")
    assert (await command("/plugin reload"))["content"] == "reloaded: raw; skills rescanned"
    assert supervisor.get("raw").runtime_info()["alive"]

    removed = await command("/plugin remove raw")
    assert removed["content"] == "removed raw: its files and settings are deleted"
    assert not (data / "plugins" / "raw").exists() and "raw_echo" not in h.tools
    assert (await command("/plugin remove raw"))["error"] == "plugin raw is not installed"
    await client.close()


async def test_plugin_commands_refuse_what_they_cannot_do_with_a_reason(harness):
    h = await harness([CLI, "homeagent_core.builtin.cfgmgr"])
    client, command = await commander(h.app.data_dir / "cli.sock")
    assert (await command("/plugin install"))["error"] == "usage: /plugin install <file-or-url> [--force]"
    missing = (await command(f"/plugin install {h.app.data_dir / 'weather.hmap'}"))["error"]
    assert "weather.hmap" in missing
    assert "built-in plugins cannot be removed" in (await command("/plugin remove cfgmgr"))["error"]
    assert "unknown plugin 'nope'" in (await command("/plugin info nope"))["error"]
    assert "unknown plugin 'nope'" in (await command("/plugin enable nope"))["error"]
    assert "unknown plugin 'nope'" in (await command("/plugin reload nope"))["error"]
    assert "not an installed plugin package" in (await command("/plugin reload cfgmgr"))["error"]
    assert "restart it with homeagent serve" in (await command("/plugin start cfgmgr"))["error"]
    assert "refusing to disable cli" in (await command("/plugin disable cli"))["error"]
    assert "cli" not in h.config.disabled_plugins()
    assert (await command("/plugin enable"))["error"] == "usage: /plugin enable <name>"
    assert "unknown /plugin action 'frob'" in (await command("/plugin frob"))["error"]
    info = json.loads((await command("/plugin info cfgmgr"))["content"])
    assert info["kind"] == "builtin" and info["status"] == "started" and "package" not in info
    disabled = (await command("/plugin disable cfgmgr"))["content"]
    assert disabled == "disabled cfgmgr; it is not loaded after the next restart of the daemon"
    assert "cfgmgr" in h.config.disabled_plugins()
    await client.close()


async def test_agents_lists_the_kernels_sub_agents(harness):
    from homeagent_sdk.errors import ProviderError

    model = FakeModel([FakeReply(content="笔记整理完毕：三条待办。"), ProviderError("upstream down")], default="ok")
    h = await harness([CLI], model=model)
    client, command = await commander(h.app.data_dir / "cli.sock")
    assert (await command("/agents"))["content"].startswith("no sub-agents have been started")

    first = h.kernel.children.spawn("整理今天的笔记", 2)
    await h.kernel.children.wait(first.task_id)
    second = h.kernel.children.spawn("查一下天气", 1)
    await h.kernel.children.wait(second.task_id)
    lines = (await command("/agents"))["content"].splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("child_1") and " done " in lines[0]
    assert "整理今天的笔记" in lines[0] and "笔记整理完毕：三条待办。" in lines[0]
    assert lines[1].startswith("child_2") and " failed " in lines[1] and "upstream down" in lines[1]
    await client.close()


async def test_plugin_install_starts_the_package_at_once_and_its_tool_answers_the_next_turn(harness, tmp_path: Path):
    from hmapdev.build import pack_project, render_template

    render_template("proc", "greeter", tmp_path / "greeter")
    package = pack_project(tmp_path / "greeter")
    model = FakeModel([FakeReply(tool_calls=[("greeter_greet", {"who": "小王"})]), FakeReply(content="好了")])
    h = await harness([CLI], model=model)
    client, command = await commander(h.app.data_dir / "cli.sock")
    installed = (await command(f"/plugin install {package}"))["content"]
    assert installed.startswith("installed greeter 0.1.0; started greeter (proc); tools: greeter_greet")
    await client.send("跟小王打个招呼")
    assert (await client.until_response())[-1]["content"] == "好了"
    assert [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"] == ["Hello, 小王!"]

    assert (await command("/plugin start greeter"))["content"].startswith("restarted greeter (proc)")
    assert (await command("/plugin remove greeter"))["content"].startswith("removed greeter")
    assert "greeter_greet" not in h.tools and "greeter" not in h.app.supervisor.live()
    await client.close()
