"""proc-echo, tested with the HomeAgent test kit only.

The first tests run the plugin object over an in-memory protocol connection (the real wire
format, no subprocess); the last one builds and packs the project and lets a real agent start
``plugin.pyz`` as a child process.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from plugin import Plugin

from homeagent_sdk import StageContext
from homeagent_sdk.testing import AgentHarness, ToolCallReply

PROJECT = Path(__file__).resolve().parents[1]


async def test_the_plugin_registers_its_tool_stage_and_channel_over_the_protocol(proc_harness):
    plugin = await proc_harness(Plugin(), name="proc-echo")

    assert list(plugin.tools) == ["proc_echo_greet"]
    assert plugin.tools["proc_echo_greet"]["parameters"]["required"] == ["who"]
    assert plugin.stages == {"before_output": "global"}
    assert list(plugin.outputs) == ["proc_echo_outbox"]
    assert plugin.auto_restart is True


async def test_the_greet_tool_answers_over_the_protocol(proc_harness):
    plugin = await proc_harness(Plugin(), name="proc-echo")

    assert await plugin.call_tool("proc_echo_greet", who="小王") == "Hello, 小王!"


async def test_before_output_turns_wave_into_an_emoji(proc_harness):
    plugin = await proc_harness(Plugin(), name="proc-echo")
    ctx = StageContext(final_text=":wave: hi")

    answer = await plugin.run_stage("before_output", ctx)

    assert answer["changed"] == {"final_text": "👋 hi"}
    assert ctx.final_text == "👋 hi"


async def test_the_outbox_channel_appends_to_a_file_in_the_plugin_data_dir(proc_harness):
    plugin = await proc_harness(Plugin(), name="proc-echo")

    assert (await plugin.send("proc_echo_outbox", "one"))["status"] == "sent"
    await plugin.send("proc_echo_outbox", "two")

    assert (plugin.data_dir / "outbox.txt").read_text(encoding="utf-8") == "one\ntwo\n"


async def test_the_packed_plugin_runs_out_of_process_in_a_real_turn(agent: AgentHarness, tmp_path: Path):
    project = tmp_path / "proc-echo"  # build/ and dist/ go into the copy, not the source tree
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("build", "dist", "__pycache__", ".pytest_cache"))
    assert agent.install(project) == "proc-echo"
    agent.model.add(ToolCallReply("proc_echo_greet", {"who": "Ada"}), ":wave: done")

    reply = await agent.ask("greet Ada")

    assert str(reply) == "👋 done"
    tool_message = agent.model.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "Hello, Ada!" in tool_message["content"]
    assert agent.plugin("proc-echo")["status"] == "started"
