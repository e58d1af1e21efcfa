"""Proactive replies (a timer firing, a plugin's interrupt) go to the channel the person last
talked on; a reply the model sent itself with ``output_send__*`` is not sent twice."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from homeagent_sdk import ChannelDef, InjectOptions, Priority, hookimpl
from homeagent_sdk.testing import AgentHarness, FakeModel, ToolCallReply


class TwoScreens:
    """Output channels ``phone`` and ``desk`` that record what reaches them."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, dict[str, Any]]] = []

    @hookimpl
    def register_input_channels(self, registry: Any) -> None:
        for name in ("phone", "desk", "alarm"):
            registry.add(ChannelDef(name=name))

    @hookimpl
    def register_output_channels(self, registry: Any) -> None:
        for name in ("phone", "desk"):
            registry.add(ChannelDef(name=name, sync=True, send=self._sender(name)))

    def _sender(self, name: str) -> Any:
        def send(payload: str, meta: dict[str, Any], type: str) -> str:
            self.received.append((name, payload, meta))
            return "ok"

        return send


async def until(condition: Any, limit_s: float = 10.0) -> None:
    """Wait (bounded) until ``condition()`` holds; the delivery happens after the turn's reply."""
    async with asyncio.timeout(limit_s):
        while not condition():
            await asyncio.sleep(0.01)


async def ring(agent: AgentHarness, text: str) -> None:
    """What the timer does: an L3 interrupt on a channel nobody reads.

    The plugin ``alarm`` is not one of the core's doors, so the owner links it to themself
    (``homeagent people link OWNER door alarm``); unlinked, its inputs would be a guest's.
    """
    people = agent.app.people
    if people.person_for_identity("door", "alarm") is None:
        people.link(people.owner().name, "door", "alarm")
    io = agent.kernel.io_for("alarm")
    await io.inject_interrupt(text, "alarm", InjectOptions(no_memory=True, priority=Priority.L3))


async def test_a_proactive_reply_goes_to_the_channel_last_used(tmp_path: Path) -> None:
    screens = TwoScreens()
    model = FakeModel()
    model.add("在手机上", "该喝水了", "在电脑上", "该睡觉了")
    agent = AgentHarness(tmp_path / "data", model=model, memory=False)
    agent.register(screens)
    async with agent:
        outputs: list[str] = []
        agent.kernel.bus.subscribe(lambda e: outputs.append(e.data["channel"]), "agent_output")
        await agent.ask("提醒我喝水", channel="phone")
        await ring(agent, "timer: 喝水")
        await until(lambda: len(screens.received) == 2)
        await agent.ask("提醒我睡觉", channel="desk")
        await ring(agent, "timer: 睡觉")
        await until(lambda: len(screens.received) == 4)
    proactive = [(name, text) for name, text, meta in screens.received if meta.get("proactive")]
    assert proactive == [("phone", "该喝水了"), ("desk", "该睡觉了")]
    assert all(meta["input_channel"] == "alarm" for _, _, meta in screens.received if meta.get("proactive"))


async def test_an_explicit_send_is_not_repeated(tmp_path: Path) -> None:
    screens = TwoScreens()
    model = FakeModel()
    model.add("好的", ToolCallReply("output_send__desk", {"payload": "到点了", "type": "text"}), "已提醒")
    agent = AgentHarness(tmp_path / "data", model=model, memory=False)
    agent.register(screens)
    async with agent:
        outputs: list[str] = []
        agent.kernel.bus.subscribe(lambda e: outputs.append(e.data["channel"]), "agent_output")
        await agent.ask("提醒我", channel="phone")
        await ring(agent, "timer: 到点")
        await until(lambda: "alarm" in outputs)
    assert [(name, text) for name, text, _ in screens.received if name == "desk"] == [("desk", "到点了")]
    assert not any(meta.get("proactive") for _, _, meta in screens.received)
