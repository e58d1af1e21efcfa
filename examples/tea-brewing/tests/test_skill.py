"""tea-brewing, tested with the HomeAgent test kit only: installed into a real in-process agent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from homeagent_sdk.testing import AgentHarness, HookRecorder, ToolCallReply

PROJECT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tea_agent(agent: AgentHarness, tmp_path: Path) -> AgentHarness:
    project = tmp_path / "tea-brewing"
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("build", "dist", "__pycache__", ".pytest_cache"))
    assert agent.install(project) == "tea-brewing"
    return agent


async def test_the_skill_is_listed_in_the_prompt_the_model_sees(tea_agent: AgentHarness):
    tea_agent.model.add("Which tea do you have?")

    await tea_agent.ask("how do I brew tea?")

    system = "\n".join(m["content"] for m in tea_agent.model.requests[0]["messages"] if m["role"] == "system")
    assert "tea-brewing" in system
    assert "Brewing times and water temperatures" in system


async def test_the_model_loads_the_instructions_and_a_reference_file(
    tea_agent: AgentHarness, hook_recorder: HookRecorder
):
    tea_agent.model.add(
        ToolCallReply("skill_info", {"name": "tea-brewing"}),
        ToolCallReply("skill_file", {"name": "tea-brewing", "path": "references/steeps.md"}),
        "80 °C for 1 minute.",
    )

    reply = await tea_agent.ask("怎么泡龙井？")

    assert str(reply) == "80 °C for 1 minute."
    info, steeps = (c.result for c in hook_recorder.getcalls("after_toolcall"))
    assert info.success and "| green (绿茶, e.g. 龙井) | 80 °C |" in info.result
    assert steeps.success and "Oolong: 30 s, 40 s" in steeps.result
    await hook_recorder.wait_for("on_event", where=lambda c: c.event.name == "skill_detected")


async def test_a_file_outside_the_skill_folder_is_refused(tea_agent: AgentHarness):
    result = await tea_agent.call_tool("skill_file", name="tea-brewing", path="../../config.db")

    assert not result.success
