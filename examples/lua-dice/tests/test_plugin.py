"""lua-dice, tested with the HomeAgent test kit only: installed into a real in-process agent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from homeagent_sdk.testing import AgentHarness, ToolCallReply

PROJECT = Path(__file__).resolve().parents[1]


@pytest.fixture
def dice_agent(agent: AgentHarness, tmp_path: Path) -> AgentHarness:
    project = tmp_path / "lua-dice"  # build/ and dist/ go into the copy, not the source tree
    shutil.copytree(PROJECT, project, ignore=shutil.ignore_patterns("build", "dist", "__pycache__", ".pytest_cache"))
    assert agent.install(project) == "lua-dice"
    return agent


async def test_the_roll_tool_returns_each_roll_and_the_total(dice_agent: AgentHarness):
    result = await dice_agent.call_tool("lua_dice_roll", sides=6, count=3)

    assert result.success, result.result
    data = json.loads(result.result)
    assert len(data["rolls"]) == 3 and all(1 <= r <= 6 for r in data["rolls"])
    assert data["total"] == sum(data["rolls"])


async def test_a_bad_argument_fails_the_call_with_the_reason(dice_agent: AgentHarness):
    result = await dice_agent.call_tool("lua_dice_roll", sides=1)

    assert not result.success
    assert "sides must be between 2 and 100, got 1" in result.result


async def test_the_model_rolls_and_the_reply_gets_a_die_emoji(dice_agent: AgentHarness):
    dice_agent.model.add(ToolCallReply("lua_dice_roll", {"sides": 20}), ":dice: rolled")

    reply = await dice_agent.ask("roll a d20")

    assert str(reply) == "🎲 rolled"
    tool_message = dice_agent.model.requests[1]["messages"][-1]
    assert json.loads(tool_message["content"])["total"] in range(1, 21)
    assert dice_agent.plugin("lua-dice")["kind"] == "lua"
