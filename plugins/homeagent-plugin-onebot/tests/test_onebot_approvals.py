"""The owner decides approvals from QQ: the request arrives as a private message to the owner's
linked account, the owner's ``同意 N`` / ``deny N`` decides it, anyone else's decides nothing.

Real kernel, the real ``cmd`` and ``approvals_chat`` built-ins, the onebot plugin against a
loopback OneBot v11 implementation over a real WebSocket.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from homeagent_plugin_onebot import make_plugin
from onebot_fake import FakeOneBot, text_of

from homeagent_sdk.testing import AgentHarness, FakeModel, ToolCallReply
from homeagent_sdk.types import InjectOptions, Principal

TOKEN = "approvals-token"
OWNER_QQ, DAD_QQ, STRANGER_QQ = 12345, 777, 888
BUILTINS = ("homeagent_core.builtin.cmd", "homeagent_core.builtin.approvals_chat")


def _answer(request: dict[str, Any]) -> Any:
    last = request["messages"][-1]
    text = str(last.get("content"))
    if last["role"] == "tool":
        return "它在等主人批准"
    if text.endswith("run it"):
        return ToolCallReply("cmd_run", {"command": "echo approved-from-qq"})
    if text.endswith("run another"):
        return ToolCallReply("cmd_run", {"command": "echo never"})
    return f"收到：{text}"


@pytest.fixture
async def household(tmp_path: Path) -> AsyncIterator[tuple[AgentHarness, FakeOneBot]]:
    fake = await FakeOneBot(access_token=TOKEN).start_server()
    agent = AgentHarness(tmp_path / "data", model=FakeModel(responder=_answer), memory=False, builtins=BUILTINS)
    agent.register(make_plugin())
    for key, value in {
        "plugin.onebot.ws_url": fake.ws_url,
        "plugin.onebot.access_token": TOKEN,
        "plugin.onebot.reconnect_min": 0.05,
        "plugin.onebot.allow_from": f"{OWNER_QQ},{DAD_QQ},{STRANGER_QQ}",
        "plugin.cmd.enabled": True,
        "plugin.cmd.allow_root": True,  # the tests may run as root
    }.items():
        agent.set(key, value)
    try:
        await agent.start()
        await fake.wait_connected()
        people = agent.app.people
        people.add("mum", "adult")
        people.add("dad", "adult")
        people.link(people.owner().name, "qq", str(OWNER_QQ))
        people.link("dad", "qq", str(DAD_QQ))
        yield agent, fake
    finally:
        await agent.aclose()
        await fake.close()


def _said_to_model(agent: AgentHarness, text: str) -> bool:
    return any(text in json.dumps(r["messages"], ensure_ascii=False) for r in agent.model.requests)


async def _next_to(fake: FakeOneBot, user_id: int) -> str:
    """The text of the next private message the bot sends to ``user_id`` (others are skipped)."""
    while True:
        sent = await fake.next_sent()
        if sent.get("action") == "send_private_msg" and sent.get("user_id") == user_id:
            return text_of(sent)


async def _wait_for(predicate: Any, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.02)


async def test_the_owner_approves_from_qq_and_nobody_else_can(household: tuple[AgentHarness, FakeOneBot]):
    agent, fake = household
    cmd = agent.app.host.pm.get_plugin("cmd")
    mum = InjectOptions(principal=Principal(person="mum"))
    reply = await agent.app.kernel.ask("run it", options=mum)
    assert "needs the owner's approval: request #1" in reply.tool_results[0].result

    request = await _next_to(fake, OWNER_QQ)
    assert request.startswith("[审批 #1] mum (adult, ")
    assert 'cmd_run：{"command": "echo approved-from-qq"}' in request
    assert "回复「同意 1」批准，「拒绝 1」拒绝" in request and 'Reply "approve 1" or "deny 1"' in request

    # Another person's "同意 1" (linked, adult) and a guest's decide nothing and never reach the model.
    await fake.private(DAD_QQ, "爸爸", "同意 1")
    assert "Only the owner decides approvals" in await _next_to(fake, DAD_QQ)
    await fake.private(STRANGER_QQ, "路人", "approve 1")
    assert "Only the owner decides approvals" in await _next_to(fake, STRANGER_QQ)
    assert agent.app.rights.approvals.get(1).status == "pending" and len(cmd.history) == 0
    assert not _said_to_model(agent, "同意 1") and not _said_to_model(agent, "approve 1")

    # The owner's reply from the linked account decides it; the call runs with mum's rights.
    await fake.private(OWNER_QQ, "主人", "同意 1")
    answer = await _next_to(fake, OWNER_QQ)
    assert "已批准 #1" in answer and "Approved #1: cmd_run runs for mum now." in answer
    await _wait_for(lambda: _said_to_model(agent, "[审批 #1] the owner approved cmd_run"))
    assert len(cmd.history) == 1 and _said_to_model(agent, "approved-from-qq")
    assert not _said_to_model(agent, "同意 1")
    # A second answer is told it was decided already.
    await fake.private(OWNER_QQ, "主人", "拒绝 1")
    assert "approval #1 (cmd_run for mum) was already approved" in await _next_to(fake, OWNER_QQ)

    # "deny N" in English; an unknown number is named.
    await agent.app.kernel.ask("run another", options=mum)
    assert "[审批 #2]" in await _next_to(fake, OWNER_QQ)
    await fake.private(OWNER_QQ, "主人", "deny #2")
    assert "Denied #2: cmd_run will not run for mum." in await _next_to(fake, OWNER_QQ)
    await _wait_for(lambda: _said_to_model(agent, "[审批 #2] cmd_run was denied by the owner"))
    await fake.private(OWNER_QQ, "主人", "approve 42")
    assert "there is no approval #42" in await _next_to(fake, OWNER_QQ)
    assert len(cmd.history) == 1
    # An ordinary message of the owner's still goes to the model.
    await fake.private(OWNER_QQ, "主人", "我同意 3 个人去")
    assert (await _next_to(fake, OWNER_QQ)).endswith("我同意 3 个人去")
    decided = [(r.person, r.outcome) for r in agent.app.people.audit_rows(50) if r.action == "cmd_run"]
    assert ("mum", "approved") in decided and ("mum", "denied-by-owner") in decided
