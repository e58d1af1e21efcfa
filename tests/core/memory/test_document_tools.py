from __future__ import annotations

import pytest

from homeagent_core.memory.context import ContextEvent, RelevanceContext
from homeagent_core.memory.documents.store import DocumentStore
from homeagent_core.memory.documents.tools import document_tools
from homeagent_sdk.errors import ToolError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.visibility import EVERYONE


def _tools(store, ctx):
    return {t.name: t for t in document_tools(store, ctx)}


async def test_doc_query_consumes_and_reinserts_at_the_original_time(tmp_path, open_documents):
    store = open_documents(tmp_path / "documents.db", FakeEmbedder(64))
    ctx = RelevanceContext(embedder=FakeEmbedder(64), documents=store, max_context_size=12, protected=10)
    for i in range(13):
        text = "我 的 猫 叫 咪咪" if i == 0 else f"闲聊 话题 {i}"
        await ctx.append(ContextEvent(input=text, source="webui", timestamp=1000.0 + i))
    pruned = await ctx.prune("工作")
    assert any("咪咪" in e.input for e in pruned)
    assert "咪咪" not in " ".join(e.input for e in ctx.events)

    tools = _tools(store, ctx)
    result = await tools["doc_query"].handler(query="猫 咪咪", top_k=1)
    assert result["found"] == 1 and "咪咪" in result["documents"][0]["content"]
    assert all("咪咪" not in d.content for d in store.all())
    back = next(e for e in ctx.events if "咪咪" in e.input)
    assert back.kind == "cold_storage" and back.timestamp == 1000.0
    assert ctx.events[0] is back  # at its original position in the timeline
    again = await tools["doc_query"].handler(query="猫 咪咪", top_k=1)
    assert all("咪咪" not in d["content"] for d in again["documents"])
    store.close()


async def test_doc_commit_stores_a_searchable_note(tmp_path, open_documents):
    store = open_documents(tmp_path / "documents.db")
    tools = _tools(store, None)
    out = await tools["doc_commit"].handler(content="Wi-Fi password is on the fridge", title="wifi")
    assert out["stored"] and store.get(out["id"]).title == "wifi"
    hits = await store.query("wifi password", 1, audience=EVERYONE)
    assert hits[0].document.id == out["id"]
    store.close()


async def test_bad_tool_arguments_raise_tool_errors(tmp_path, open_documents):
    store = open_documents(tmp_path / "documents.db")
    tools = _tools(store, None)
    with pytest.raises(ToolError, match="query"):
        await tools["doc_query"].handler(query="  ")
    with pytest.raises(ToolError, match="top_k"):
        await tools["doc_query"].handler(query="x", top_k=0)
    with pytest.raises(ToolError, match="content"):
        await tools["doc_commit"].handler(content="")
    with pytest.raises(ToolError, match="media_digests"):
        await tools["doc_commit"].handler(content="x", media_digests=[""])
    store.close()


def test_tool_schemas_are_openai_functions(tmp_path):
    store = DocumentStore(tmp_path / "documents.db")
    for tool in document_tools(store, None):
        schema = tool.openai_schema()
        assert schema["function"]["parameters"]["type"] == "object"
        assert schema["function"]["parameters"]["required"]
    store.close()


async def test_settle_moves_keeps_each_document_once_after_an_interrupted_move_or_archive(tmp_path, open_documents):
    from homeagent_core.memory.documents.tools import settle_moves

    store = open_documents(tmp_path / "documents.db")
    ctx = RelevanceContext(tmp_path / "context.json", documents=store)
    moved = await store.add("咪咪 喜欢 晒太阳", source="context_archived")
    await ctx.append(ContextEvent(input=moved.content, kind="cold_storage", meta={"doc_id": moved.id}))
    archived = await ctx.append(ContextEvent(input="上周 去了 西湖", source="webui"))
    await store.add(archived.input, source="context_archived", meta={"event_id": archived.id})
    kept = await ctx.append(ContextEvent(input="今天 天气 不错", source="webui"))
    await ctx.save_now()

    assert settle_moves(ctx, store) == (1, 1)
    assert moved.id not in store and [e.id for e in ctx.events if e.kind == "user"] == [kept.id]
    assert settle_moves(ctx, store) == (0, 0)
    await ctx.aclose()
    reopened = RelevanceContext(tmp_path / "context.json")
    assert archived.id not in {e.id for e in reopened.events}
    store.close()
