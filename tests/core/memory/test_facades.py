"""The memory facades plugins and the web UI use, over a real memory system on disk."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from homeagent_core.config import ConfigStore
from homeagent_core.memory.facades import DocFacade, KnowledgeFacade, LLMFacade, MemoryFacade, SocialFacade
from homeagent_core.memory.knowledge.base import InvalidKnowledgeName, KnowledgeNotFound
from homeagent_core.memory.system import MemorySystem
from homeagent_core.providers.manager import ProviderManager, SourceConfig
from homeagent_sdk.errors import MemoryStoreError, ProviderError, UsageError
from homeagent_sdk.testing import FakeEmbedder, FakeModel
from homeagent_sdk.types import Doc, Entity, Relation, TextEvent, Triple


@pytest.fixture(params=["sqlite", "postgresql"])
async def system(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[MemorySystem]:
    config = ConfigStore(":memory:")
    if request.param == "postgresql":  # documents and graph on the session's server, a tenant of their own
        config.set("core.memory.store", request.getfixturevalue("pg_url"))
        config.set("core.memory.tenant", request.getfixturevalue("pg_tenant"))
    opened = await MemorySystem.open(tmp_path, config, embedder=FakeEmbedder(dimension=32))
    yield opened
    await opened.aclose()
    config.close()


@pytest.fixture
async def memory(system: MemorySystem) -> MemoryFacade:
    facade = MemoryFacade(system)
    await facade.commit([
        Triple("小王", "住在", "杭州"),
        Triple("小王", "喜欢", "龙井茶"),
        Triple("杭州", "属于", "浙江"),
    ])
    return facade


# --------------------------------------------------------------------------- memory graph


async def test_recall_returns_entities_and_relations_with_the_sdk_relation_keys(memory: MemoryFacade) -> None:
    recalled = await memory.recall(["小王"], depth=1)
    assert {e["name"] for e in recalled["entities"]} >= {"小王", "杭州", "龙井茶"}
    pairs = {(r["source_name"], r["relation_type"], r["target_name"]) for r in recalled["relations"]}
    assert pairs == {("小王", "住在", "杭州"), ("小王", "喜欢", "龙井茶")}
    assert all(r["source"] == r["source_name"] and r["type"] == r["relation_type"] for r in recalled["relations"])
    deeper = await memory.recall(["小王"], depth=2)
    assert ("杭州", "浙江") in {(r["source"], r["target"]) for r in deeper["relations"]}


async def test_recall_of_something_unknown_gives_empty_lists_and_accepts_a_single_string(
        memory: MemoryFacade) -> None:
    empty = await memory.recall(["没人知道的东西"])
    assert empty["entities"] == [] and empty["relations"] == []
    single = await memory.recall("小王")  # type: ignore[arg-type]
    assert "小王" in single["seeds"]


async def test_commit_takes_triples_or_dicts_and_reports_what_it_skipped(memory: MemoryFacade) -> None:
    result = await memory.commit([
        {"subject": "小李", "relation": "同事", "object": "小王"},  # type: ignore[list-item]
        Triple("x", "是", "一个太短的名字"),
    ])
    assert result["added"] == 1
    assert len(result["skipped"]) == 1 and "x" in result["skipped"][0]
    again = await memory.commit([Triple("小李", "同事", "小王")])
    assert again["added"] == 0 and again["refreshed"] == 1
    with pytest.raises(TypeError, match="Triple"):
        await memory.commit([{"subject": "小李"}])  # type: ignore[list-item]


async def test_entities_are_filtered_by_name_and_ordered_by_mentions(memory: MemoryFacade) -> None:
    await memory.commit([Triple("杭州", "有", "西湖")])
    everything = await memory.entities()
    assert everything[0] == Entity("杭州", everything[0].type, 3)
    assert {e.name for e in everything} == {"小王", "杭州", "龙井茶", "浙江", "西湖"}
    assert [e.name for e in await memory.entities("西")] == ["西湖"]
    assert len(await memory.entities(limit=2)) == 2


async def test_relations_are_those_touching_the_entity(memory: MemoryFacade) -> None:
    relations = await memory.relations("杭州")
    assert sorted((r.source_name, r.relation_type, r.target_name) for r in relations) == [
        ("小王", "住在", "杭州"), ("杭州", "属于", "浙江")]
    assert all(isinstance(r, Relation) for r in relations)
    assert await memory.relations("无名氏") == []


async def test_introspect_counts_what_is_stored(memory: MemoryFacade) -> None:
    facts = await memory.introspect()
    assert facts["entities"] == 4 and facts["relations_active"] == 3
    assert facts["top_entities"][0]["name"] in ("小王", "杭州")


async def test_merge_folds_the_source_entity_into_the_target(memory: MemoryFacade) -> None:
    await memory.commit([Triple("王小明", "喜欢", "西湖"), Triple("王小明", "住在", "杭州")])
    counts = await memory.merge("王小明", "小王")
    assert counts["merged"] == counts["moved"] + counts["deduplicated"] == 2
    assert [e.name for e in await memory.entities("王小明")] == []
    targets = {r.target_name for r in await memory.relations("小王")}
    assert targets == {"杭州", "龙井茶", "西湖"}
    with pytest.raises(MemoryStoreError, match="王小明"):
        await memory.merge("王小明", "小王")


async def test_purge_removes_matching_relations_softly_or_hard(memory: MemoryFacade, system: MemorySystem) -> None:
    assert await memory.purge({"relation_type": "喜欢"}) == 1
    assert ("小王", "龙井茶") not in {(r["source"], r["target"]) for r in (await memory.recall(["小王"]))["relations"]}
    assert (await memory.introspect())["relations_deleted"] == 1
    assert await memory.purge({"target_contains": "浙江"}, mode="hard") == 1
    assert (await memory.introspect())["relations_deleted"] == 1
    assert await memory.purge({"subject_contains": "nobody"}) == 0
    with pytest.raises(UsageError, match="'soft' or 'hard'"):
        await memory.purge({"relation_type": "住在"}, mode="shred")


async def test_append_text_writes_the_conversation_log_durably(memory: MemoryFacade, system: MemorySystem) -> None:
    first = await memory.append_text(TextEvent("user", "今天去西湖", 1_700_000_000.0, channel="diary"), source="diary")
    second = await memory.append_text({"role": "assistant", "content": "玩得开心"})  # type: ignore[arg-type]
    assert first != second
    records = list(system.textlog.iter_records())
    assert [(r["role"], r["content"]) for r in records] == [("user", "今天去西湖"), ("assistant", "玩得开心")]
    assert records[0]["id"] == first and records[0]["channel"] == "diary" and records[0]["source"] == "diary"
    assert records[0]["timestamp"] == 1_700_000_000.0
    assert abs(records[1]["timestamp"] - time.time()) < 60
    files = getattr(system.textlog, "files", None)  # the file log (the PostgreSQL one keeps rows)
    if files is not None:
        lines = [json.loads(line) for f in files() for line in f.read_text("utf-8").splitlines()]
        assert [line["id"] for line in lines] == [first, second]
    with pytest.raises(UsageError, match="role"):
        await memory.append_text({"role": "", "content": "x"})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="role and content"):
        await memory.append_text({"content": "no role"})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="TextEvent"):
        await memory.append_text("just text")  # type: ignore[arg-type]


async def test_graph_snapshot_and_context_timeline_show_what_is_there(
        memory: MemoryFacade, system: MemorySystem) -> None:
    from homeagent_core.memory.context import ContextEvent

    snapshot = await memory.graph_snapshot(limit=2)
    assert len(snapshot["nodes"]) == 2 and snapshot["total_entities"] == 4
    ids = {n["id"] for n in snapshot["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in snapshot["edges"])
    assert await memory.context_timeline() == []
    await system.context.append(ContextEvent(input="你好", kind="user", source="test", channel="cli"))
    timeline = await memory.context_timeline()
    assert [(e["kind"], e["text"], e["channel"]) for e in timeline] == [("user", "你好", "cli")]


# --------------------------------------------------------------------------- documents


async def test_documents_are_committed_queried_removed_and_counted(system: MemorySystem) -> None:
    doc = DocFacade(system)
    tea = await doc.commit("笔记", "小王喜欢喝龙井茶")
    lake = await doc.insert({"title": "游记", "content": "西湖边散步"})
    third = await doc.insert(Doc(id="", title="天气", content="杭州明天下雨"))
    hits = await doc.query("龙井茶", top_k=2)
    assert hits[0].id == tea and hits[0].title == "笔记" and hits[0].score is not None
    assert (await doc.stats())["documents"] == 3
    assert [d["id"] for d in await doc.recent(2)] == [third, lake]
    assert (await doc.search("西湖"))[0]["id"] == lake
    assert await doc.remove(tea) is True
    assert await doc.remove(tea) is False
    assert tea not in [d.id for d in await doc.query("龙井茶")]
    assert system.documents.get(tea) is None and system.documents.get(lake).source == "plugin"  # type: ignore[union-attr]
    with pytest.raises(UsageError):
        await doc.commit("", "")
    with pytest.raises(UsageError, match="title, content"):
        await doc.insert("not a document")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- knowledge


async def test_knowledge_entries_come_back_as_docs_named_after_the_entry(system: MemorySystem) -> None:
    kb = KnowledgeFacade(system)
    assert await kb.create("饮品/龙井", "杭州的绿茶，清明前采摘") == "饮品/龙井"
    await kb.create("饮品/咖啡", "意式浓缩")
    hits = await kb.search("绿茶")
    assert isinstance(hits[0], Doc)
    assert (hits[0].id, hits[0].title) == ("饮品/龙井", "饮品/龙井") and "绿茶" in hits[0].content
    assert hits[0].score is not None and hits[0].score > 0
    assert (await kb.get("龙井")).content.startswith("杭州的绿茶")
    assert await kb.list() == ["饮品/咖啡", "饮品/龙井"]
    assert await kb.list("饮品") == ["饮品/咖啡", "饮品/龙井"]
    overview = await kb.overview()
    assert overview["categories"] == ["饮品"] and overview["stats"] == {"entries": 2}
    assert await kb.delete("咖啡") == "饮品/咖啡"
    assert await kb.list() == ["饮品/龙井"]
    with pytest.raises(KnowledgeNotFound):
        await kb.get("咖啡")
    with pytest.raises(InvalidKnowledgeName):
        await kb.create("../escape", "x")
    with pytest.raises(UsageError):
        await kb.create("饮品/空", "   ")


# --------------------------------------------------------------------------- people


async def test_social_reads_people_traits_relations_and_networks(system: MemorySystem) -> None:
    system.social.set_trait("小王", "生日", "3月5日")
    system.social.relate("小王", "朋友", "小李")
    system.social.relate("小李", "同事", "老张")
    social = SocialFacade(system)
    person = await social.person("小王")
    assert person["name"] == "小王" and person["traits"] == {"生日": "3月5日"}
    assert person["relations"] == [{"person": "小李", "relation": "朋友", "direction": "out"}]
    assert await social.relations("小李") == [
        {"person": "老张", "relation": "同事", "direction": "out"},
        {"person": "小王", "relation": "朋友", "direction": "in"},
    ]
    assert await social.persons() == ["小李", "小王", "老张"]
    assert await social.trait("小王", "生日") == "3月5日"
    assert await social.trait("小王", "血型") is None
    network = await social.network("小王", depth=2)
    assert network["people"] == [{"name": "小李", "distance": 1}, {"name": "老张", "distance": 2}]
    assert await social.person("无名氏") == {} and await social.relations("无名氏") == []
    with pytest.raises(MemoryStoreError, match="unknown person"):
        await social.network("无名氏")


# --------------------------------------------------------------------------- the model


async def test_llm_chat_and_quick_chat_reach_the_provider() -> None:
    model = FakeModel(["完整回答", "OK"])
    llm = LLMFacade(model)
    reply = await llm.chat([{"role": "user", "content": "你好"}], temperature=0.1)
    assert reply["content"] == "完整回答" and reply["finish_reason"] == "stop"
    assert model.requests[0]["temperature"] == 0.1
    assert await llm.quick_chat("ping") == "OK"
    assert model.requests[1]["max_tokens"] == 128
    assert model.requests[1]["messages"] == [{"role": "user", "content": "ping"}]
    for bad in ([], "hello", [{"role": "user"}, "x"]):
        with pytest.raises(UsageError, match="non-empty list of messages"):
            await llm.chat(bad)  # type: ignore[arg-type]


async def test_a_single_provider_is_its_own_only_source() -> None:
    llm = LLMFacade(FakeModel(default="ok", name="fake"))
    assert await llm.list_sources() == [{"name": "fake", "default": True, "available": True}]
    assert await llm.current_source() == "fake"
    await llm.set_source("fake")
    with pytest.raises(ProviderError, match="only source is 'fake'"):
        await llm.set_source("other")


async def test_sources_of_a_provider_manager_are_listed_and_switched() -> None:
    manager = ProviderManager([
        SourceConfig(name="alpha", base_url="http://127.0.0.1:9", model="m", adapter="openai"),
        SourceConfig(name="beta", base_url="http://127.0.0.1:9", model="m", adapter="openai"),
    ], default="alpha")
    try:
        llm = LLMFacade(manager)
        assert [s["name"] for s in await llm.list_sources()] == ["alpha", "beta"]
        assert all("api_key" not in s for s in await llm.list_sources())
        assert await llm.current_source() == "alpha"
        await llm.set_source("beta")
        assert await llm.current_source() == "beta" and manager.default == "beta"
        with pytest.raises(ProviderError, match="unknown source 'gamma'"):
            await llm.set_source("gamma")
    finally:
        await manager.aclose()


# --------------------------------------------------------------------------- through a running App


async def test_an_in_process_plugin_reaches_every_facade_through_its_scoped_sdk(tmp_path: Path) -> None:
    from homeagent_core.app import App
    from homeagent_sdk import hookimpl

    class Reader:
        name = "reader"

        @hookimpl
        async def startup(self, sdk):  # type: ignore[no-untyped-def]
            self.sdk = sdk

    plugin = Reader()
    model = FakeModel(responder=lambda request: f"答：{request['messages'][-1]['content']}")
    async with App(tmp_path / "data", load_entrypoints=False, builtins=(), plugins=[plugin], provider=model,
                   memory=True, embedder=FakeEmbedder(dimension=32)) as app:
        sdk = plugin.sdk
        assert (await sdk.memory.commit([Triple("小王", "住在", "杭州")]))["added"] == 1
        assert [r["target_name"] for r in (await sdk.memory.recall(["小王"]))["relations"]] == ["杭州"]
        doc_id = await sdk.doc.commit("笔记", "小王喜欢喝龙井茶")
        assert [d.id for d in await sdk.doc.query("龙井茶")] == [doc_id]
        assert await sdk.knowledge.create("饮品/龙井", "杭州的绿茶") == "饮品/龙井"
        assert (await sdk.knowledge.search("绿茶"))[0].title == "饮品/龙井"
        app.memory.social.set_trait("小李", "生日", "3月5日")
        assert (await sdk.social.person("小李"))["traits"] == {"生日": "3月5日"}
        await sdk.memory.append_text(TextEvent("user", "插件写的", 0.0, channel="reader"), source=sdk.name)
        assert [(r["content"], r["source"]) for r in app.memory.textlog.iter_records()] == [("插件写的", "reader")]
        assert (await sdk.llm.chat([{"role": "user", "content": "你好"}]))["content"] == "答：你好"
        assert await sdk.llm.quick_chat("ping") == "答：ping"
