"""A data directory filled through a real agent, and what it answers about its memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from homeagent_core.agent.people import PeopleRegistry
from homeagent_core.library import Agent
from homeagent_sdk.pairing import PairingStore, pairing_files
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
    for key, value in {
        "adapter": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "qwen2.5:7b",
        "api_key": "sk-family-0123",
    }.items():
        agent.config.set(f"core.llm.sources.home.{key}", value)
    pairing = PairingStore(Path(agent.data_dir) / "plugin_data" / "telegram" / "pairing.db")
    try:
        code = pairing.check("telegram", "77", "Grandma").code
        pairing.approve(code, person="奶奶")
        pairing.check("telegram", "78", "Stranger")
    finally:
        pairing.close()
    registry = PeopleRegistry.open(agent.data_dir)
    try:
        registry.add("奶奶", "guest")
        registry.link("奶奶", "telegram", "77")
    finally:
        registry.close()
    plugin = Path(agent.data_dir) / "plugins" / "weather"
    plugin.mkdir(parents=True)
    (plugin / "plugin.json").write_text('{"name": "weather", "version": "1.0.0", "entry": "main.lua"}')
    (plugin / "main.lua").write_text("return {name = 'weather'}")


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
        "settings": {
            k: agent.config.get(k) for k in ("core.llm.sources.home.adapter", "core.llm.sources.home.api_key")
        },
        "pairing": _pairings(Path(agent.data_dir)),
        "registry": _registry(Path(agent.data_dir)),
        "plugins": sorted(
            p.relative_to(Path(agent.data_dir)).as_posix()
            for p in (Path(agent.data_dir) / "plugins").rglob("*")
            if p.is_file()
        ),
    }


def _pairings(data: Path) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for plugin, path in pairing_files(data / "plugin_data").items():
        store = PairingStore(path)
        try:
            rows += [(plugin, r.account, r.code, r.status, r.person) for r in store.list()]
        finally:
            store.close()
    return sorted(rows)


def _registry(data: Path) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    registry = PeopleRegistry.open(data)
    try:
        return sorted((p.name, p.role, p.identities) for p in registry.list())
    finally:
        registry.close()
