"""A data directory filled through a real agent, and what it answers about its memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from homeagent_core.library import Agent
from homeagent_sdk.testing import FakeModel
from homeagent_sdk.types import Triple


def make_agent(data: Path) -> Agent:
    return Agent(data, provider=FakeModel(default="好的"), load_entrypoints=False)


async def fill(agent: Agent) -> None:
    await agent.ask("我叫小王，我住在杭州")
    await agent.memory.commit([Triple("小王", "住在", "杭州"), Triple("小王", "喜欢", "龙井茶")])
    await agent.documents.commit("tea", "龙井茶 is a green tea grown around West Lake in Hangzhou")
    await agent.documents.commit("router", "the router sits in the hallway cupboard behind the coats")
    await agent.knowledge.create("home/wifi", "the wifi password is hello123")
    await agent.app.services.social.link_account("小王", "telegram", "42")
    await agent.app.services.media.put(b"\x89PNG photo bytes", "image/png", name="cat.png")


async def answers(agent: Agent) -> dict[str, Any]:
    """What the agent says about its memory: documents, graph recall, log, knowledge, people."""
    recall = await agent.memory.recall(["小王"])
    return {
        "documents": [(d.title, d.content) for d in await agent.documents.query("green tea Hangzhou", 3)],
        "hallway": [d.content for d in await agent.documents.query("hallway cupboard", 1)],
        "recall": sorted((r["source_name"], r["relation_type"], r["target_name"]) for r in recall["relations"]),
        "log": [(r["role"], r["content"]) for r in agent.app.memory.textlog.iter_records()],
        "knowledge": [(d.id, d.content) for d in await agent.knowledge.search("wifi password")],
        "people": await agent.app.services.social.persons(),
        "account": await agent.app.services.social.person_for_account("telegram", "42"),
    }
