"""homeagent-plugin-hello, tested with the HomeAgent test kit only."""

from __future__ import annotations

import typer
from homeagent_plugin_hello import HelloPlugin
from typer.testing import CliRunner

from homeagent_sdk.testing import AgentHarness, HookRecorder, ToolCallReply


async def test_the_model_can_call_the_hello_tool_in_a_turn(
    agent: AgentHarness, register_plugin, hook_recorder: HookRecorder
):
    register_plugin(HelloPlugin())
    agent.model.add(ToolCallReply("hello", {"name": "Ada"}), "I greeted Ada.")

    reply = await agent.ask("say hello to Ada")

    assert str(reply) == "I greeted Ada."
    (call,) = hook_recorder.getcalls("after_toolcall")
    assert call.call.name == "hello" and call.result.success
    assert call.result.result == "Hello, Ada!"
    tool_message = agent.model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "Hello, Ada!" in tool_message["content"]


async def test_the_greeting_setting_changes_what_the_tool_says(agent: AgentHarness, register_plugin):
    register_plugin(HelloPlugin())
    agent.set("plugin.hello.greeting", "你好")

    result = await agent.call_tool("hello", name="小王")

    assert result.success and result.result == "你好, 小王!"
    assert agent.plugin("hello")["contributions"]["settings"] == ["plugin.hello.greeting"]


async def test_ping_is_answered_without_asking_the_model(agent: AgentHarness, register_plugin):
    register_plugin(HelloPlugin())

    reply = await agent.ask("ping")

    assert str(reply) == "pong"
    assert agent.model.calls == 0


async def test_other_inputs_still_reach_the_model(agent: AgentHarness, register_plugin):
    register_plugin(HelloPlugin())
    agent.model.add("hi there")

    assert str(await agent.ask("hello?")) == "hi there"
    assert agent.model.calls == 1


def test_the_hello_command_is_added_to_the_command_line():
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """Stand-in for the homeagent command line."""

    HelloPlugin().register_commands(app)
    result = CliRunner().invoke(app, ["hello", "Ada"])

    assert result.exit_code == 0, result.output
    assert result.output == "Hello, Ada!\n"
