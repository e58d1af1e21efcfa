"""Cleaners of out-of-process plugins: declared with ``has_cleaner``, run in the child through
``cleaner.invoke``, bounded by a timeout, and applied by the memory code to what it files."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.app import App
from homeagent_core.config import ConfigStore
from homeagent_core.events import EventBus
from homeagent_core.memory.context import ContextEvent, ToolOutput, atext_for_vector
from homeagent_core.plugins.proc import ProcPlugin, RemoteCleaner, discover_proc_plugins
from homeagent_core.plugins.sdk import ScopedSDK, Services
from homeagent_core.plugins.supervisor import Supervisor
from homeagent_sdk.errors import ToolError
from homeagent_sdk.testing import FakeEmbedder, FakeModel

CHILD = '''
import asyncio
import re

from homeagent_sdk import hookimpl
from homeagent_sdk.proc import serve
from homeagent_sdk.types import ChannelDef, ToolDef


def strip_cq(text):
    """A sync cleaner: runs in a worker thread of the child."""
    return re.sub(r"\\[CQ:[^\\]]*\\]", "", text).strip()


async def shout(text):
    return text.upper()


async def hang(text):
    await asyncio.Event().wait()


def explode(text):
    raise RuntimeError("cleaner exploded")


def not_text(text):
    return 42


class Cleaners:
    name = "cleaners"

    @hookimpl
    def register_tools(self, registry):
        for name, cleaner in (("qq_fetch", strip_cq), ("slow_tool", hang), ("bad_tool", explode),
                              ("odd_tool", not_text), ("plain_tool", None)):
            registry.add(ToolDef(name=name, description=f"{name} for tests", handler=self.fetch, cleaner=cleaner))

    @hookimpl
    def register_input_channels(self, registry):
        registry.add(ChannelDef(name="qq", description="a chat app", cleaner=strip_cq))
        registry.add(ChannelDef(name="loud", description="shouting", cleaner=shout))
        registry.add(ChannelDef(name="quiet", description="no cleaner"))

    def fetch(self) -> str:
        return "[CQ:at,qq=1] hello"


serve(Cleaners())
'''


def install_child(data_dir: Path) -> Path:
    folder = data_dir / "plugins" / "cleaners"
    folder.mkdir(parents=True)
    (folder / "plugin.json").write_text(json.dumps({"name": "cleaners", "version": "1.0.0", "entry": "plugin.bin"}))
    entry = folder / "plugin.bin"
    entry.write_text(f"#!{sys.executable}\n" + CHILD)
    entry.chmod(0o755)
    return folder


@pytest.fixture
async def child(tmp_path: Path) -> AsyncIterator[ProcPlugin]:
    """The cleaner plugin started without a kernel (private registries), cleaner timeout 0.3 s."""
    install_child(tmp_path)
    config = ConfigStore(":memory:")
    bus = EventBus()
    supervisor = Supervisor(backoff=(0.01, 0.02, 0.03))
    [(name, plugin)] = discover_proc_plugins(tmp_path, supervisor=supervisor, cleaner_timeout=0.3)
    services = Services(config=config, bus=bus, data_dir=tmp_path)
    await plugin.startup(ScopedSDK.for_plugin(name, services, privileged=True))
    yield plugin
    await supervisor.stop_all()
    await bus.aclose()
    config.close()


def tool_cleaner(plugin: ProcPlugin, name: str) -> Any:
    assert plugin.link is not None
    tool = plugin.link.tools.get(name)
    assert tool is not None
    return tool.cleaner


def input_cleaner(plugin: ProcPlugin, name: str) -> Any:
    assert plugin.link is not None
    channel = plugin.link.channels.input(name)
    assert channel is not None
    return channel.cleaner


async def test_declared_cleaners_run_in_the_plugin_process(child: ProcPlugin) -> None:
    qq = tool_cleaner(child, "qq_fetch")
    assert isinstance(qq, RemoteCleaner) and (qq.scope, qq.name) == ("tool", "qq_fetch")
    assert await qq.aclean("[CQ:at,qq=1] 你好 [CQ:face,id=1]") == "你好"
    assert await input_cleaner(child, "loud").aclean("quiet please") == "QUIET PLEASE"
    assert await input_cleaner(child, "qq").aclean("[CQ:image] 看图") == "看图"
    assert tool_cleaner(child, "plain_tool") is None and input_cleaner(child, "quiet") is None
    # The plain call works from a worker thread (it waits on the plugin's loop).
    assert await asyncio.to_thread(qq, "[CQ:at] from a thread") == "from a thread"
    assert qq.failures == 0


async def test_the_context_store_awaits_remote_cleaners_for_inputs_and_tool_outputs(child: ProcPlugin) -> None:
    event = ContextEvent(input="[CQ:at,qq=1] 明天去杭州", kind="user", channel="qq")
    assert await atext_for_vector(event, channel_cleaner=input_cleaner(child, "qq")) == "明天去杭州"
    reply = ContextEvent(
        response="好的", kind="agent",
        tool_outputs=[ToolOutput("qq_fetch", "[CQ:at,qq=2] 天气晴", cleaner=tool_cleaner(child, "qq_fetch")),
                      ToolOutput("secret", "不要记住", no_memory=True, cleaner=tool_cleaner(child, "qq_fetch"))],
    )
    assert await atext_for_vector(reply) == "好的 天气晴"


async def test_a_failing_or_silent_cleaner_falls_back_to_the_raw_text_and_is_logged_once(
    child: ProcPlugin, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="homeagent_core.plugins.proc")
    slow = tool_cleaner(child, "slow_tool")
    assert await slow.aclean("raw text") == "raw text"
    assert await slow.aclean("again") == "again"
    bad = tool_cleaner(child, "bad_tool")
    assert await bad.aclean("[CQ:at] keep me") == "[CQ:at] keep me"
    assert await bad.aclean("twice") == "twice"
    odd = tool_cleaner(child, "odd_tool")
    assert await odd.aclean("odd") == "odd"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings
    assert "slow_tool failed (no answer within 0.3 s)" in warnings[0]
    assert "bad_tool failed" in warnings[1] and "cleaner exploded" in warnings[1]
    assert "odd_tool failed" in warnings[2] and "returned int, not a string" in warnings[2]
    assert (slow.failures, bad.failures, odd.failures) == (2, 2, 1)
    # The child is unharmed: a good cleaner still answers.
    assert await tool_cleaner(child, "qq_fetch").aclean("[CQ:x] ok") == "ok"


async def test_a_sync_call_on_the_event_loop_and_a_stopped_plugin_use_the_raw_text(
    child: ProcPlugin, caplog: pytest.LogCaptureFixture
) -> None:
    qq = tool_cleaner(child, "qq_fetch")
    with caplog.at_level(logging.WARNING, logger="homeagent_core.plugins.proc"):
        assert qq("[CQ:at] on the loop") == "[CQ:at] on the loop"
    assert "cannot wait; await cleaner.aclean(text)" in caplog.text
    loud = input_cleaner(child, "loud")
    await child.stop()
    assert await loud.aclean("after stop") == "after stop"
    assert await asyncio.to_thread(loud, "thread after stop") == "thread after stop"
    assert loud.failures == 2


async def test_cleaner_invoke_names_what_is_wrong(child: ProcPlugin) -> None:
    with pytest.raises(ToolError, match="tool nope 未注册 Cleaner"):
        await child.call("cleaner.invoke", {"scope": "tool", "name": "nope", "text": "x"})
    with pytest.raises(ToolError, match="input quiet 未注册 Cleaner"):
        await child.call("cleaner.invoke", {"scope": "input", "name": "quiet", "text": "x"})
    with pytest.raises(ToolError, match=r"参数解析失败: cleaner\.invoke needs text"):
        await child.call("cleaner.invoke", {"name": "qq_fetch", "text": None})
    # Without a scope the tool's cleaner is used, then the input channel's.
    assert await child.call("cleaner.invoke", {"name": "loud", "text": "hey"}) == {"text": "HEY"}


async def test_the_input_channel_cleaner_shapes_what_memory_files_in_a_running_agent(tmp_path: Path) -> None:
    data = tmp_path / "data"
    install_child(data)
    model = FakeModel(default="收到")
    app = App(data, load_entrypoints=False, builtins=(), provider=model, memory=True,
              embedder=FakeEmbedder(dimension=32))
    await app.start()
    try:
        assert app.status()["failed"] == [] and app.kernel is not None
        reply = await app.kernel.io.inject_input_sync("[CQ:at,qq=10001] 明天提醒我去杭州", "qq")
        assert str(reply) == "收到"
        [event] = [e for e in app.memory.context.events if e.kind == "user"]
        assert event.input == "[CQ:at,qq=10001] 明天提醒我去杭州"  # the raw text stays in the event
        assert event.vector_text == "明天提醒我去杭州"
        assert model.requests[0]["messages"][-1]["content"].endswith("[CQ:at,qq=10001] 明天提醒我去杭州")
    finally:
        await app.stop()
