"""Out-of-process plugins with real subprocesses: lifecycle, stages, gates, frames, crashes."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.config import ConfigStore
from homeagent_core.events import EventBus
from homeagent_core.plugins.proc import ProcPlugin, discover_proc_plugins
from homeagent_core.plugins.proc_capabilities import METHOD_CAPABILITIES, denial
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_core.plugins.supervisor import Supervisor
from homeagent_sdk.errors import PluginLoadError
from homeagent_sdk.types import Event, StageContext, ToolCall

RAW_SOURCE = Path(__file__).resolve().parents[2] / "plugins" / "raw_ndjson_plugin.py"


def install_raw(data_dir: Path, name: str = "raw", *, caps: list[str] | None = None, **behaviour: Any) -> Path:
    plugin_dir = data_dir / "plugins" / name
    plugin_dir.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"name": name, "version": "1.0.0", "entry": "plugin.bin"}
    if caps is not None:
        manifest["capabilities"] = caps
    (plugin_dir / "plugin.json").write_text(json.dumps(manifest))
    entry = plugin_dir / "plugin.bin"
    entry.write_text(f"#!{sys.executable}\n" + RAW_SOURCE.read_text())
    entry.chmod(0o755)
    if behaviour:
        (plugin_dir / "behaviour.json").write_text(json.dumps(behaviour))
    return plugin_dir


class Harness:
    """A config store, a bus and a supervisor with millisecond backoff."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.config = ConfigStore(":memory:")
        self.bus = EventBus()
        self.services = Services(config=self.config, bus=self.bus, data_dir=data_dir)
        self.supervisor = Supervisor(backoff=(0.01, 0.02, 0.03))
        self.system: asyncio.Queue[Event] = asyncio.Queue()
        self.bus.subscribe(self.system.put, "system")
        self.plugins: list[ProcPlugin] = []

    async def start(self, name: str = "raw", **options: Any) -> ProcPlugin:
        found = dict(discover_proc_plugins(self.data_dir, supervisor=self.supervisor, **options))
        plugin = found[name]
        self.plugins.append(plugin)
        await plugin.startup(ScopedSDK.for_plugin(name, self.services, privileged=True))
        return plugin

    async def event(self, kind: str) -> dict[str, Any]:
        async with asyncio.timeout(10):
            while True:
                event = await self.system.get()
                if event.data.get("event") == kind:
                    return event.data

    async def close(self) -> None:
        await self.supervisor.stop_all()
        await self.bus.aclose()
        self.config.close()


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path)
    yield h
    await h.close()


async def run_tool(plugin: ProcPlugin, name: str, **arguments: Any) -> Any:
    assert plugin.link is not None
    return await plugin.link.tools.execute(ToolCall("c1", name, arguments))


# --------------------------------------------------------------------------- lifecycle


async def test_a_raw_protocol_plugin_registers_tools_stage_and_output_channel(harness: Harness) -> None:
    install_raw(harness.data_dir)
    plugin = await harness.start()
    info = plugin.runtime_info()
    assert info["alive"] and info["pid"] > 0
    assert {"raw_echo", "raw_crash", "output_send__raw_out"} <= set(info["tools"])
    assert info["stages"] == ["before_output"]
    result = await run_tool(plugin, "raw_echo", text="你好")
    assert result.success and result.result == "你好"
    ctx = StageContext(final_text="done")
    await plugin.before_output(ctx)
    assert ctx.final_text == "done [raw]"
    sent = await run_tool(plugin, "output_send__raw_out", payload="hello channel", type="text")
    assert sent.success
    assert (harness.data_dir / "plugins" / "raw" / "sent.log").read_text() == "text:hello channel\n"


async def test_unregistered_stages_return_without_a_round_trip(harness: Harness) -> None:
    install_raw(harness.data_dir)
    plugin = await harness.start()
    ctx = StageContext(raw_message="unchanged")
    assert plugin.conn is not None
    before = plugin.conn.peer._next_id
    await plugin.on_input(ctx)
    await plugin.pre_action(ctx)
    assert plugin.conn.peer._next_id == before
    assert ctx.raw_message == "unchanged"


async def test_stop_is_not_a_crash_and_detaches_everything(harness: Harness) -> None:
    install_raw(harness.data_dir)
    plugin = await harness.start()
    assert plugin.conn is not None
    pid = plugin.conn.pid
    await plugin.shutdown()
    assert plugin.status == "stopped"
    assert plugin.link is not None and plugin.link.tool_names("raw") == []
    assert harness.supervisor.crash_count("raw") == 0
    assert harness.system.empty()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_protocol_mismatch_is_refused_loudly(harness: Harness) -> None:
    install_raw(harness.data_dir, protocol=2)
    with pytest.raises(PluginLoadError, match="协议版本不匹配") as info:
        await harness.start()
    assert "rebuild" in str(info.value) or "hmapdev" in str(info.value)


async def test_a_plugin_answering_a_different_protocol_is_refused(harness: Harness) -> None:
    plugin_dir = install_raw(harness.data_dir)
    source = (plugin_dir / "plugin.bin").read_text()
    # This child accepts the core's version but claims another one in its answer.
    source = source.replace('"protocol": claimed,', '"protocol": 99,')
    (plugin_dir / "plugin.bin").write_text(source)
    with pytest.raises(PluginLoadError, match="plugin speaks 99"):
        await harness.start()


async def test_missing_exec_bit_gets_a_chmod_hint(harness: Harness) -> None:
    plugin_dir = install_raw(harness.data_dir)
    (plugin_dir / "plugin.bin").chmod(0o644)
    with pytest.raises(PluginLoadError, match="chmod \\+x"):
        await harness.start()


async def test_discovery_reports_bad_manifests_and_skips_lua_and_skill_dirs(tmp_path: Path) -> None:
    install_raw(tmp_path, "good")
    bad = install_raw(tmp_path, "bad")
    (bad / "plugin.json").write_text('{"name": "bad"}')
    lua = tmp_path / "plugins" / "luaish"
    lua.mkdir()
    (lua / "plugin.json").write_text('{"name": "luaish", "version": "1", "entry": "main.lua"}')
    (lua / "main.lua").write_text("return {}")
    legacy = tmp_path / "plugins" / "old"
    legacy.mkdir()
    (legacy / "plugin.json").write_text('{"name": "old", "version": "1", "entry": "plugin.bin"}')
    (legacy / "plugin.so").write_bytes(b"\x7fELF")
    errors: dict[str, str] = {}
    found = discover_proc_plugins(tmp_path, supervisor=Supervisor(), errors=errors)
    assert [name for name, _ in found] == ["good"]
    assert "version" in errors["bad"] and "entry" in errors["bad"]
    assert "C ABI" in errors["old"]
    assert "luaish" not in errors


# --------------------------------------------------------------------------- capability gates


async def test_declared_capabilities_gate_core_calls_with_the_original_message(harness: Harness) -> None:
    install_raw(harness.data_dir, caps=["io"])
    plugin = await harness.start()
    result = await run_tool(plugin, "raw_call", method="memory.recall", params={"query": ["x"]})
    answer = json.loads(result.result)
    assert answer["error"] == denial("raw", "memory.recall", "memory")
    assert '缺少 "memory" 能力' in answer["error"] and "settings_cross" in answer["error"]
    # io is declared: the call passes the gate and reports the missing service by name.
    io = json.loads((await run_tool(plugin, "raw_call", method="io.injectText", params={"text": "x"})).result)
    assert "被拒" not in io["error"] and "io" in io["error"] and "不可用" in io["error"]


async def core_call(plugin: ProcPlugin, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One core method through the raw child: ``{"result": ..., "error": ...}``."""
    return json.loads((await run_tool(plugin, "raw_call", method=method, params=params or {})).result)  # type: ignore[no-any-return]


async def test_no_declared_capabilities_grant_none_and_publishing_and_social_writes_are_refused(
    harness: Harness,
) -> None:
    install_raw(harness.data_dir)
    harness.config.define_plugin("raw", __import__("homeagent_sdk").ConfigDef(key="colour", default="blue"))
    harness.config.set("core.llm.api_key", "sk-live-secret-123")
    plugin = await harness.start()
    assert (await core_call(plugin, "settings.get", {"key": "colour"}))["result"]["value"] == "blue"
    for method, capability in (
        ("settings.getCore", "settings_cross"),
        ("settings.dump", "settings_cross"),
        ("settings.getSecret", "secrets"),
        ("memory.recall", "memory"),
        ("llm.chat", "llm"),
        ("io.injectText", "io"),
    ):
        denied = await core_call(plugin, method, {"key": "core.llm.api_key", "query": ["x"]})
        assert denied["error"] == denial("raw", method, capability), method
    assert "not available to out-of-process" in (await core_call(plugin, "events.publish", {"name": "x"}))["error"]
    assert "read-only" in (await core_call(plugin, "social.setTrait", {"name": "a"}))["error"]
    assert (await core_call(plugin, "no.such.method"))["error"] == "未知 method: no.such.method"


async def test_settings_cross_masks_secrets_that_only_the_secrets_capability_reveals(harness: Harness) -> None:
    secret = "sk-live-secret-123"
    harness.config.set("core.llm.api_key", secret)
    harness.config.set("core.llm.sources.deepseek.api_key", "sk-source-456")
    harness.config.define_plugin("other", __import__("homeagent_sdk").ConfigDef(key="token", default=""))
    harness.config.set("plugin.other.token", "tok-789")
    install_raw(harness.data_dir, caps=["settings_cross"])
    plugin = await harness.start()
    assert (await core_call(plugin, "settings.getCore", {"key": "core.agent.max_tool_turns"}))["result"]["value"] == 10
    masked = await core_call(plugin, "settings.getCore", {"key": "core.llm.api_key"})
    assert masked["result"] == {"value": "****", "secret": True}
    assert (await core_call(plugin, "settings.getCore", {"key": "core.llm.sources.deepseek.api_key"}))["result"][
        "value"
    ] == "****"
    other = await core_call(plugin, "settings.getPlugin", {"plugin": "other", "key": "token"})
    assert other["result"]["value"] == "****"
    dump = json.dumps(await core_call(plugin, "settings.dump", {"prefix": ""}))
    assert secret not in dump and "sk-source-456" not in dump and "tok-789" not in dump
    assert (await core_call(plugin, "settings.getSecret", {"key": "core.llm.api_key"}))["error"] == denial(
        "raw", "settings.getSecret", "secrets"
    )
    for key in ("core.llm.api_key", "core.llm.base_url", "core.embeddings.base_url"):
        refused = await core_call(plugin, "settings.setCore", {"key": key, "value": "http://evil.example"})
        assert '缺少 "secrets" 能力' in refused["error"] and key in refused["error"], key
    assert harness.config.get("core.llm.api_key") == secret
    ok = await core_call(plugin, "settings.setCore", {"key": "core.agent.max_tool_turns", "value": 12})
    assert ok["error"] == "" and harness.config.get("core.agent.max_tool_turns") == 12

    await plugin.stop()
    install_raw(harness.data_dir, caps=["settings_cross", "secrets"])
    await plugin.reload()
    revealed = await core_call(plugin, "settings.getSecret", {"key": "core.llm.api_key"})
    assert revealed["result"]["value"] == secret


def test_every_gated_method_names_a_known_capability() -> None:
    from homeagent_core.plugins.packages import CAPABILITIES

    assert set(METHOD_CAPABILITIES.values()) == set(CAPABILITIES)


# --------------------------------------------------------------------------- frames


async def test_oversized_answers_are_explicit_errors_not_hangs(harness: Harness) -> None:
    install_raw(harness.data_dir)
    plugin = await harness.start(max_frame=64 * 1024)
    result = await run_tool(plugin, "raw_big", size=200 * 1024)
    assert not result.success and "frame cap" in result.result
    assert (await run_tool(plugin, "raw_echo", text="still fine")).result == "still fine"


async def test_large_payloads_under_the_cap_round_trip(harness: Harness) -> None:
    install_raw(harness.data_dir)
    plugin = await harness.start()
    result = await run_tool(plugin, "raw_big", size=3 * 1024 * 1024)
    assert result.success and len(result.result) == 3 * 1024 * 1024


# --------------------------------------------------------------------------- crashes


@pytest.mark.parametrize("how", ["exit", "kill", "raise", "garbage", "grandchild"])
async def test_a_crash_is_detected_detached_published_and_restarted(harness: Harness, how: str) -> None:
    install_raw(harness.data_dir)
    plugin = await harness.start()
    assert plugin.conn is not None
    first_pid = plugin.conn.pid
    call = asyncio.ensure_future(run_tool(plugin, "raw_crash", how=how))
    crashed = await harness.event("plugin_crashed")
    assert crashed["plugin"] == "raw" and crashed["crash_count"] == 1 and crashed["restart_in"] == 0.01
    if how == "garbage":
        assert "stdout" in crashed["error"]
    result = await asyncio.wait_for(call, 10)
    assert not result.success and "插件进程已退出" in result.result
    await harness.event("plugin_restarted")
    assert plugin.conn.pid != first_pid
    assert (await run_tool(plugin, "raw_echo", text="back")).result == "back"


async def test_the_fourth_crash_in_the_window_stops_restarts_until_a_manual_reload(harness: Harness) -> None:
    install_raw(harness.data_dir)
    plugin = await harness.start()
    for n in (1, 2, 3):
        await run_tool(plugin, "raw_crash", how="exit")
        crashed = await harness.event("plugin_crashed")
        assert crashed["crash_count"] == n
        await harness.event("plugin_restarted")
    await run_tool(plugin, "raw_crash", how="exit")
    crashed = await harness.event("plugin_crashed")
    assert crashed["crash_count"] == 4 and crashed["restart_in"] is None
    assert plugin.status == "stopped" and harness.supervisor.gave_up("raw")
    state = plugin.runtime_info()["state"]
    expected = r"stopped: crashed 4 times in 5 minutes \(last: exited with code 7\) since \d\d:\d\d:\d\d"
    assert re.fullmatch(expected, state), state
    # The tools stay listed, and a call says what happened and what to do.
    assert plugin.link is not None and "raw_echo" in plugin.link.tool_names("raw")
    down = await run_tool(plugin, "raw_echo", text="x")
    assert not down.success
    assert "plugin raw crashed and was stopped after 4 crashes; use plugin_reload" in down.result
    await harness.supervisor.reload("raw")
    assert harness.supervisor.crash_count("raw") == 0
    assert (await run_tool(plugin, "raw_echo", text="again")).result == "again"


async def test_a_replaced_entry_is_hot_reloaded_by_checksum(harness: Harness) -> None:
    plugin_dir = install_raw(harness.data_dir)
    plugin = await harness.start()
    assert await harness.supervisor.reload_changed() == []
    entry = plugin_dir / "plugin.bin"
    entry.write_text(entry.read_text().replace("[raw]", "[raw v2]"))
    assert await harness.supervisor.reload_changed() == ["raw"]
    ctx = StageContext(final_text="x")
    await plugin.before_output(ctx)
    assert ctx.final_text == "x [raw v2]"
    assert harness.supervisor.crash_count("raw") == 0


def _environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\0") if "=" in item)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc/<pid>/environ")
async def test_a_plugin_starts_without_the_daemons_secret_environment(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak")
    monkeypatch.setenv("HOMEAGENT_WEBUI_API_KEY", "ha-leak")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:leak")
    monkeypatch.setenv("LANG", "C.UTF-8")
    install_raw(harness.data_dir, "plain", caps=[])
    plain = _environ_of((await harness.start("plain")).runtime_info()["pid"])
    assert not {"OPENAI_API_KEY", "HOMEAGENT_WEBUI_API_KEY", "TELEGRAM_BOT_TOKEN"} & set(plain)
    assert plain["LANG"] == "C.UTF-8" and plain["HOMEAGENT_PLUGIN_NAME"] == "plain" and "PATH" in plain
    other = Harness(harness.data_dir / "other")
    try:
        install_raw(other.data_dir, "trusted", caps=["secrets"])
        trusted = _environ_of((await other.start("trusted")).runtime_info()["pid"])
        assert trusted["OPENAI_API_KEY"] == "sk-leak" and trusted["TELEGRAM_BOT_TOKEN"] == "123:leak"
    finally:
        await other.close()


async def test_no_plugin_settings_write_changes_a_guarded_setting(harness: Harness) -> None:
    install_raw(harness.data_dir, caps=["settings_cross", "secrets"])
    plugin = await harness.start()
    for method, params in (
        ("settings.setPlugin", {"plugin": "cmd", "key": "enabled", "value": True}),
        ("settings.setCore", {"key": "core.llm.provider", "value": "evil"}),
        ("settings.setCore", {"key": "core.people.approval_timeout", "value": "7d"}),
    ):
        refused = await core_call(plugin, method, params)
        assert "is a guarded setting" in refused["error"] and "plugin 'raw'" in refused["error"], method
    assert harness.config.get("core.llm.provider") == "deepseek"
    assert harness.config.get("core.people.approval_timeout") == 600
