"""The memory system wired into real turns: durable log, context timeline, recall blocks, restarts."""

from __future__ import annotations

from pathlib import Path

from homeagent_core.library import Agent
from homeagent_sdk.testing import FakeModel, ToolCallReply
from homeagent_sdk.types import InjectOptions


def make_agent(data: Path, model: FakeModel) -> Agent:
    return Agent(data, provider=model, load_entrypoints=False, builtins=())


def system_text(request: dict) -> str:
    messages = request["messages"]
    return "\n".join(m["content"] for m in messages if m["role"] == "system" and isinstance(m["content"], str))


async def test_a_turn_is_logged_durably_and_kept_in_the_context(tmp_path: Path):
    model = FakeModel(["你好，小王", "你刚才说你叫小王"])
    async with make_agent(tmp_path, model) as agent:
        await agent.ask("我叫小王")
        await agent.ask("我刚才说了什么？")
        memory = agent.app.memory
        records = [(r["role"], r["content"]) for r in memory.textlog.iter_records()]
        assert records == [("user", "我叫小王"), ("assistant", "你好，小王"), ("user", "我刚才说了什么？"),
                           ("assistant", "你刚才说你叫小王")]
        kinds = [(e.kind, e.text) for e in memory.context.events]
        assert kinds[:2] == [("user", "我叫小王"), ("agent", "你好，小王")]
    second = model.requests[-1]["messages"]
    contents = [m["content"] for m in second]
    assert "我叫小王" in contents and "你好，小王" in contents
    assert contents[-1] == "我刚才说了什么？" and contents.count("我刚才说了什么？") == 1


async def test_committed_facts_come_back_as_the_memory_index_in_the_next_prompt(tmp_path: Path):
    model = FakeModel([
        ToolCallReply("memory_commit", {"triples": [{"subject": "小王", "relation": "住在", "object": "杭州"}]}),
        "记住了",
        "你住在杭州",
    ])
    async with make_agent(tmp_path, model) as agent:
        await agent.ask("记住：小王住在杭州")
        await agent.ask("小王住在哪里？")
    block = system_text(model.requests[-1])
    assert "【记忆索引】" in block and "小王" in block


async def test_inputs_without_memory_are_neither_logged_nor_remembered(tmp_path: Path):
    model = FakeModel(["ide reply"])
    async with make_agent(tmp_path, model) as agent:
        await agent.kernel.ask("complete this code", "http", options=InjectOptions(no_memory=True))
        memory = agent.app.memory
        assert list(memory.textlog.iter_records()) == []
        assert memory.context.events == []


async def test_memory_survives_a_restart(tmp_path: Path):
    first = FakeModel([
        ToolCallReply("memory_commit", {"triples": [{"subject": "小王", "relation": "喜欢", "object": "龙井茶"}]}),
        "好的",
    ])
    async with make_agent(tmp_path, first) as agent:
        await agent.ask("小王喜欢龙井茶")
    second = FakeModel(["龙井茶"])
    async with make_agent(tmp_path, second) as agent:
        recalled = await agent.memory.recall(["小王"])
        assert [r["target"] for r in recalled["relations"]] == ["龙井茶"]
        assert [e.text for e in agent.app.memory.context.events][:1] == ["小王喜欢龙井茶"]
        await agent.ask("小王喜欢喝什么？")
    history = [m["content"] for m in second.requests[-1]["messages"]]
    assert "小王喜欢龙井茶" in history


async def test_status_reports_the_active_embedding_tier_and_counts(tmp_path: Path):
    async with make_agent(tmp_path, FakeModel(["ok"])) as agent:
        await agent.ask("hello")
        status = agent.app.memory.status()
    assert status["active_tier"] in ("dense", "static", "tfidf")
    assert any(t["active"] for t in status["embedding_tiers"])
    assert status["context_events"] == 2


async def test_tool_outputs_are_remembered_through_their_cleaner_and_no_memory_flag(tmp_path: Path):
    from homeagent_sdk import hookimpl
    from homeagent_sdk.types import ToolDef

    class Tools:
        name = "secrets"

        @hookimpl
        def register_tools(self, registry):
            registry.add(ToolDef(name="lookup_pin", description="the door PIN", no_memory=True,
                                 handler=lambda: "PIN 4711"))
            registry.add(ToolDef(name="weather", description="today's weather", cleaner=lambda t: t.upper(),
                                 handler=lambda: "sunny in hangzhou"))

    model = FakeModel([
        ToolCallReply(calls=[("lookup_pin", {}), ("weather", {})]),
        "done",
    ])
    async with Agent(tmp_path, provider=model, plugins=[Tools()], load_entrypoints=False, builtins=()) as agent:
        await agent.ask("pin and weather?")
        agent_event = [e for e in agent.app.memory.context.events if e.kind == "agent"][-1]
    assert "SUNNY IN HANGZHOU" in agent_event.vector_text
    assert "4711" not in agent_event.vector_text
