"""Channels: name validation, generated send/help tools, delivery and its failures."""

from __future__ import annotations

from typing import Any

import pytest

from homeagent_core.agent.channels import ChannelRegistry, ChannelSendError
from homeagent_core.agent.tools import TOOL_NAME_RE, ToolRegistry
from homeagent_sdk import hookimpl
from homeagent_sdk._fake_model import FakeModel, ToolCallReply
from homeagent_sdk.errors import PluginValidationError
from homeagent_sdk.types import Caps, ChannelDef, ToolCall

MakeKernel = Any


@pytest.mark.parametrize("name", ["", "has space", "点", "a/b", "x" * 47])
def test_channel_names_that_would_break_tool_names_are_rejected(name: str) -> None:
    with pytest.raises(PluginValidationError, match="channel names become tool names"):
        ChannelRegistry().add_output(ChannelDef(name=name, send=print), "p")


def test_the_longest_valid_name_still_gives_valid_tool_names() -> None:
    registry = ChannelRegistry()
    registry.add_output(ChannelDef(name="x" * 46, send=print), "p")
    assert all(TOOL_NAME_RE.match(t.name) for t in registry.tools_for("x" * 46))


def test_duplicate_channels_and_channels_without_send_are_rejected() -> None:
    registry = ChannelRegistry()
    registry.add_output(ChannelDef(name="qq", send=print), "qq_plugin")
    with pytest.raises(PluginValidationError, match="already registered by plugin 'qq_plugin'"):
        registry.add_output(ChannelDef(name="qq", send=print), "other")
    with pytest.raises(PluginValidationError, match="no send callable"):
        registry.add_output(ChannelDef(name="mail"), "other")


async def test_send_tool_passes_payload_meta_and_type_and_checks_caps() -> None:
    got: list[Any] = []

    def send(payload: str, meta: dict[str, Any], kind: str) -> str:
        got.append((payload, meta, kind))
        return "msg-id-7"

    channels = ChannelRegistry()
    channels.add_output(ChannelDef(name="qq", caps=int(Caps.TEXT | Caps.IMAGE), sync=False, send=send), "qq")
    tools = ToolRegistry()
    for tool in channels.tools_for("qq"):
        tools.add(tool, plugin="qq")
    send_schema = tools.get("output_send__qq").parameters  # type: ignore[union-attr]
    assert send_schema["required"] == ["payload", "type"]
    assert send_schema["properties"]["type"]["enum"] == ["text", "image"]
    ok = await tools.execute(
        ToolCall("1", "output_send__qq", {"payload": "/tmp/a.png", "type": "image", "meta": '{"group": 5}'})
    )
    assert ok.success and ok.result == "已发送到通道 qq：msg-id-7"
    assert got == [("/tmp/a.png", {"group": 5}, "image")]
    audio = await tools.execute(ToolCall("2", "output_send__qq", {"payload": "x", "type": "audio"}))
    assert not audio.success and "audio" in audio.result  # rejected by the schema enum
    bad_meta = await tools.execute(ToolCall("3", "output_send__qq", {"payload": "x", "type": "text", "meta": "{oops"}))
    assert not bad_meta.success and "meta must be a JSON object string" in bad_meta.result
    help_result = await tools.execute(ToolCall("4", "output_send__qq_help", {}))
    assert "type 取值：text | image" in help_result.result and "否（必须显式调用发送工具）" in help_result.result


async def test_delivery_failure_is_reported_to_the_model(make_kernel: MakeKernel) -> None:
    class Chat:
        name = "chatapp"

        @hookimpl
        def register_output_channels(self, registry: Any) -> None:
            async def send(payload: str) -> bool:
                raise ConnectionError("napcat is offline")

            registry.add(ChannelDef(name="chat", sync=False, send=send))

    model = FakeModel([ToolCallReply("output_send__chat", {"payload": "hi", "type": "text"}), "发送失败了，稍后再试"])
    kernel = await make_kernel(Chat(), model=model)
    reply = await kernel.ask("send hi")
    assert reply == "发送失败了，稍后再试"
    result = reply.tool_results[0]
    assert not result.success
    assert (
        result.result
        == "发送失败（delivery failed）：send to output channel 'chat' failed: ConnectionError: napcat is offline"
    )


async def test_a_send_returning_false_counts_as_failure() -> None:
    channels = ChannelRegistry()
    channels.add_output(ChannelDef(name="sms", send=lambda payload: False), "sms")
    with pytest.raises(ChannelSendError, match="reported failure"):
        await channels.send("sms", "x")


async def test_sync_channels_receive_the_final_text_and_async_ones_do_not(make_kernel: MakeKernel) -> None:
    delivered: list[tuple[str, str]] = []

    class Outputs:
        name = "outputs"

        @hookimpl
        def register_output_channels(self, registry: Any) -> None:
            registry.add(ChannelDef(name="cli", sync=True, send=lambda payload: delivered.append(("cli", payload))))
            registry.add(ChannelDef(name="qq", sync=False, send=lambda payload: delivered.append(("qq", payload))))

    model = FakeModel(["cli 的回答", "qq 的回答"])
    kernel = await make_kernel(Outputs(), model=model)
    await kernel.io_for("cli").inject_input_sync("from cli", "cli", timeout=5)
    await kernel.io_for("qq").inject_input_sync("from qq", "qq", timeout=5)
    assert delivered == [("cli", "cli 的回答")]


async def test_async_channel_inputs_are_told_to_send_explicitly(make_kernel: MakeKernel) -> None:
    class Outputs:
        name = "outputs"

        @hookimpl
        def register_output_channels(self, registry: Any) -> None:
            registry.add(ChannelDef(name="qq", description="QQ", sync=False, send=lambda payload: None))

    model = FakeModel(default="ok")
    kernel = await make_kernel(Outputs(), model=model)
    await kernel.io_for("qq").inject_text("你好", "qq")
    await model.wait_started(1)
    system = model.requests[0]["messages"][0]["content"]
    assert "当前输入来自异步通道 qq：回复不会自动送达，必须调用 output_send__qq 发送。" in system
    assert "- qq（异步；text）QQ" in system


async def test_channel_listing_tools_and_plugin_detach(make_kernel: MakeKernel) -> None:
    class Both:
        name = "both"

        @hookimpl
        def register_input_channels(self, registry: Any) -> None:
            registry.add(ChannelDef(name="webhook", no_memory=True))

        @hookimpl
        def register_output_channels(self, registry: Any) -> None:
            registry.add(ChannelDef(name="speaker", caps=int(Caps.AUDIO), send=lambda p: None))

    model = FakeModel([ToolCallReply(calls=[("output_list_channels", {}), ("input_channels", {})]), "listed"])
    kernel = await make_kernel(Both(), model=model)
    reply = await kernel.ask("which channels")
    outputs, inputs = (r.result for r in reply.tool_results)
    assert '"name": "speaker"' in outputs and '"types": ["audio"]' in outputs
    assert '"name": "webhook"' in inputs and '"no_memory": true' in inputs
    assert kernel.detach_plugin("both") == ["output_send__speaker", "output_send__speaker_help"]
    assert kernel.channels.outputs == {} and kernel.channels.inputs == {}
