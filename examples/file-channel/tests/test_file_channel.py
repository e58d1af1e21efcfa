"""homeagent-plugin-file-channel, tested with the HomeAgent test kit only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from homeagent_file_channel import DEFAULT_FILENAME, FileChannelPlugin

from homeagent_sdk.testing import AgentHarness, HookRecorder, ToolCallReply


def send_to_file(message: str, meta: str = "") -> ToolCallReply:
    """What a model's call of the generated channel tool looks like."""
    return ToolCallReply("output_send__file", {"payload": message, "type": "text", "meta": meta})


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_a_message_the_model_sends_is_appended_to_the_file(
    agent: AgentHarness, register_plugin, hook_recorder: HookRecorder
):
    plugin = FileChannelPlugin()
    register_plugin(plugin)
    agent.model.add(send_to_file("买牛奶和鸡蛋", '{"topic": "shopping"}'), "I wrote it down.")

    reply = await agent.ask("记一下：买牛奶和鸡蛋")

    assert str(reply) == "I wrote it down."
    path = plugin.path()
    assert path.name == DEFAULT_FILENAME and path.is_relative_to(agent.data_dir)
    (record,) = records(path)
    assert record["message"] == "买牛奶和鸡蛋" and record["meta"] == {"topic": "shopping"}
    assert record["time"].endswith("+00:00")
    (call,) = hook_recorder.getcalls("after_toolcall")
    assert call.call.name == "output_send__file" and call.result.success
    tool_message = agent.model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and f"appended to {DEFAULT_FILENAME}" in tool_message["content"]


async def test_messages_are_appended_not_overwritten(agent: AgentHarness, register_plugin):
    plugin = FileChannelPlugin()
    register_plugin(plugin)
    agent.model.add(send_to_file("first"), "one", send_to_file("second\nwith two lines"), "two")

    await agent.ask("note one")
    await agent.ask("note two")

    assert [r["message"] for r in records(plugin.path())] == ["first", "second\nwith two lines"]


async def test_the_filename_setting_chooses_the_file(agent: AgentHarness, register_plugin):
    plugin = FileChannelPlugin()
    register_plugin(plugin)
    agent.set("plugin.file_channel.filename", "notes/diary.jsonl")

    result = await agent.call_tool("output_send__file", payload="今天去了西湖", type="text")

    assert result.success, result.result
    assert plugin.path().relative_to(plugin.sdk.data_dir).as_posix() == "notes/diary.jsonl"
    assert [r["message"] for r in records(plugin.path())] == ["今天去了西湖"]
    assert agent.plugin("file_channel")["contributions"]["settings"] == ["plugin.file_channel.filename"]


async def test_a_failing_write_is_reported_to_the_model(
    agent: AgentHarness, register_plugin, hook_recorder: HookRecorder
):
    plugin = FileChannelPlugin()
    register_plugin(plugin)
    await agent.start()
    plugin.path().mkdir(parents=True)  # a directory where the file should be: the write fails
    agent.model.add(send_to_file("lost?"), "Sorry, I could not write that down.")

    reply = await agent.ask("记一下：lost?")

    assert str(reply) == "Sorry, I could not write that down."
    (call,) = hook_recorder.getcalls("after_toolcall")
    assert not call.result.success
    tool_message = agent.model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "delivery failed" in tool_message["content"] and "IsADirectoryError" in tool_message["content"]


async def test_a_filename_outside_the_data_directory_is_refused_with_the_fix(agent: AgentHarness, register_plugin):
    plugin = FileChannelPlugin()
    register_plugin(plugin)
    agent.set("plugin.file_channel.filename", "../../escaped.jsonl")

    result = await agent.call_tool("output_send__file", payload="x", type="text")

    assert not result.success
    assert "plugin.file_channel.filename" in result.result and "relative path" in result.result
    assert not (plugin.sdk.data_dir.parent.parent / "escaped.jsonl").exists()


async def test_concurrent_sends_each_land_as_one_whole_line(agent: AgentHarness, register_plugin):
    plugin = FileChannelPlugin()
    register_plugin(plugin)
    messages = [f"message {i} " + "x" * 2000 for i in range(24)]

    results = await asyncio.gather(
        *(agent.call_tool("output_send__file", payload=m, type="text") for m in messages)
    )

    assert all(r.success for r in results)
    assert sorted(r["message"] for r in records(plugin.path())) == sorted(messages)


async def test_the_channel_explains_itself_and_only_carries_text(agent: AgentHarness, register_plugin):
    register_plugin(FileChannelPlugin())

    await agent.start()

    assert {"output_send__file", "output_send__file_help"} <= set(agent.tool_names())
    help_result = await agent.call_tool("output_send__file_help")
    image = await agent.call_tool("output_send__file", payload="/tmp/cat.png", type="image")

    assert help_result.success and "topic" in help_result.result
    assert not image.success
