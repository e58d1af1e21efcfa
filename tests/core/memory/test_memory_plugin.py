"""Memory is a plugin: its tools come through ``register_tools``, its heartbeats start in ``startup``,
and disabling it runs the agent without memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from homeagent_core.library import Agent
from homeagent_core.memory.documents.tools import DOCUMENT_TOOLS
from homeagent_core.memory.heartbeat import LEDGER_NAME, read_heartbeat_ledger
from homeagent_core.memory.tools import GRAPH_TOOLS
from homeagent_sdk.testing import FakeModel, ToolCallReply

MEMORY_TOOLS = {options.get("name") or name for name, options in (*GRAPH_TOOLS, *DOCUMENT_TOOLS)}
KNOWLEDGE_TOOLS = {"knowledge_search", "knowledge_create", "knowledge_list", "knowledge_delete"}


def make_agent(data: Path, model: FakeModel) -> Agent:
    return Agent(data, provider=model, load_entrypoints=False, builtins=())


def sent_tools(model: FakeModel) -> set[str]:
    return {t["function"]["name"] for t in model.requests[0].get("tools") or []}


async def test_memory_tools_are_contributed_by_the_memory_and_knowledge_plugins(tmp_path: Path) -> None:
    model = FakeModel(["好"])
    async with make_agent(tmp_path, model) as agent:
        await agent.ask("你好")
        host = agent.app.host
        memory, knowledge = host.info("memory"), host.info("knowledge")
        assert memory is not None and knowledge is not None
        assert memory.status == "started" and memory.kind == "core"
        assert set(memory.contributions["tools"]) == MEMORY_TOOLS
        assert set(knowledge.contributions["tools"]) == KNOWLEDGE_TOOLS
        tools = agent.kernel.tools
        assert {t.name for t in tools.by_plugin()["memory"]} == MEMORY_TOOLS
        assert tools.get("memory_recall").parallel_safe and not tools.get("memory_commit").parallel_safe
        plugin = host.pm.get_plugin("memory")
        assert [h.name for h in plugin.heartbeats] == ["distill", "rules", "archive", "merge", "review", "analytics"]
        assert all(h.running for h in plugin.heartbeats)
        analytics = plugin.heartbeats[-1]
        await analytics.wait_runs(1)  # it runs at start; its outcome is what `homeagent doctor` reads
        ledger = read_heartbeat_ledger(tmp_path / "memory" / LEDGER_NAME)
        assert ledger["analytics"]["ok"] is True, ledger
    assert sent_tools(model) >= MEMORY_TOOLS | KNOWLEDGE_TOOLS
    assert plugin.heartbeats == []  # stopped by the plugin's shutdown


async def test_disabling_the_memory_plugin_runs_the_agent_without_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOMEAGENT_DISABLE_PLUGINS", "memory")
    model = FakeModel(["你好，小王", ToolCallReply("memory_recall", {"query_intent": "小王"}), "不知道"])
    async with make_agent(tmp_path, model) as agent:
        assert str(await agent.ask("我叫小王")) == "你好，小王"
        assert agent.app.memory is None
        info = agent.app.host.info("memory")
        assert info is not None and info.status == "blocked"
        names = set(agent.kernel.tools.names())
        assert not names & (MEMORY_TOOLS | KNOWLEDGE_TOOLS)
        assert str(await agent.ask("我叫什么？")) == "不知道"
    assert not sent_tools(model) & (MEMORY_TOOLS | KNOWLEDGE_TOOLS)
    refused = model.requests[2]["messages"][-1]["content"]
    assert "memory_recall" in refused  # the model is told the tool does not exist
    assert not (tmp_path / "memory" / "graph.db").exists()
