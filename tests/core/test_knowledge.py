from __future__ import annotations

import json

import pytest

from homeagent_core.memory.knowledge.base import (
    InvalidKnowledgeName,
    KnowledgeBase,
    KnowledgeNotFound,
    normalize_name,
)
from homeagent_core.memory.knowledge.tools import knowledge_tools
from homeagent_sdk.errors import SyncInAsyncError, ToolError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.visibility import EVERYONE


@pytest.fixture(params=["files", "postgresql"])
def open_kb(request):
    """``open_kb(root, embedder=None)``: a knowledge base on the test's backend (PostgreSQL: the
    session server's entries of a tenant named after ``root``, so reopening ``root`` reopens them)."""
    opened = []

    def open_files(root, embedder=None):
        kb = KnowledgeBase(root, embedder)
        opened.append(kb)
        return kb

    def open_pg(root, embedder=None):
        from homeagent_core.memory.stores.postgresql.knowledge import PgKnowledge

        url, tenant = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_tenant")
        kb = KnowledgeBase(root, embedder, storage=PgKnowledge(url, tenant=f"{tenant}:{root.name}"))
        opened.append(kb)
        return kb

    yield open_files if request.param == "files" else open_pg
    for kb in opened:
        kb.close()


@pytest.mark.parametrize("bad", ["", "  ", "..", "a/../b", ".hidden", "a/.b", "a//b", "a/./b", "/abs", "a/", "a\\b"])
def test_unsafe_names_are_rejected(bad):
    with pytest.raises(InvalidKnowledgeName):
        normalize_name(bad)


def test_names_are_lower_cased_with_underscores():
    assert normalize_name(" Recipes/Pork Dumplings ") == "recipes/pork_dumplings"
    assert normalize_name("菜谱/饺子") == "菜谱/饺子"


async def test_entries_are_files_under_their_category(tmp_path):
    kb = KnowledgeBase(tmp_path / "knowledge")
    await kb.create("Recipes/Dumplings", "pork and cabbage filling")
    assert (tmp_path / "knowledge/recipes/dumplings/content.md").read_text() == "pork and cabbage filling"
    index = json.loads((tmp_path / "knowledge/.index.json").read_text())["entries"]
    assert index["recipes/dumplings"]["preview"].startswith("pork")
    assert kb.categories() == ["recipes"]


async def test_delete_by_unique_leaf_cleans_empty_categories(tmp_path):
    root = tmp_path / "knowledge"
    kb = KnowledgeBase(root)
    await kb.create("home/devices/router", "admin at 192.168.1.1")
    await kb.create("home/wifi", "ssid homenet")
    assert kb.delete("router") == "home/devices/router"
    assert not (root / "home/devices").exists() and (root / "home/wifi").exists()
    kb.delete("home/wifi")
    assert root.exists() and not (root / "home").exists()


async def test_ambiguous_or_missing_leaf_is_not_found(tmp_path, open_kb):
    kb = open_kb(tmp_path / "k")
    await kb.create("a/notes", "first")
    await kb.create("b/notes", "second")
    with pytest.raises(KnowledgeNotFound, match="ambiguous"):
        kb.delete("notes")
    with pytest.raises(KnowledgeNotFound, match="no knowledge entry"):
        kb.delete("missing")
    with pytest.raises(InvalidKnowledgeName):
        kb.delete("..")
    assert len(kb) == 2


async def test_an_entry_cannot_also_be_a_category(tmp_path, open_kb):
    kb = open_kb(tmp_path / "k")
    await kb.create("a/b", "leaf")
    with pytest.raises(InvalidKnowledgeName, match="nest"):
        await kb.create("a/b/c", "deeper")


async def test_update_replaces_the_old_vector(tmp_path, open_kb):
    kb = open_kb(tmp_path / "k", FakeEmbedder(64))
    await kb.create("pets/cat", "the cat is called mimi")
    old = kb._vectors["pets/cat"].copy()
    await kb.create("pets/cat", "the dog is called wangcai")
    assert not (kb._vectors["pets/cat"] == old).all()
    hits = await kb.search("wangcai dog", 1, audience=EVERYONE)
    assert hits[0].entry.content == "the dog is called wangcai"


async def test_equal_scores_are_ordered_by_name(tmp_path, open_kb):
    kb = open_kb(tmp_path / "k")
    await kb.create("z/alpha", "identical text")
    await kb.create("a/alpha", "identical text")
    await kb.create("m/other", "completely unrelated words")
    hits = await kb.search("identical text", 3, audience=EVERYONE)
    assert [h.entry.name for h in hits] == ["a/alpha", "z/alpha"]
    assert hits[0].score == hits[1].score == pytest.approx(0.5)
    assert [h.entry.name for h in await kb.search("identical", 5, category="z", audience=EVERYONE)] == ["z/alpha"]


async def test_search_adds_the_normalised_dense_and_lexical_scores(tmp_path, open_kb):
    kb = open_kb(tmp_path / "k", FakeEmbedder(64))
    await kb.create("pets/cat", "the cat mimi sleeps all day")
    await kb.create("pets/dog", "the dog wangcai runs all day")
    hits = await kb.search("cat mimi sleeps", 2, audience=EVERYONE)
    assert hits[0].entry.name == "pets/cat"
    assert hits[0].score == pytest.approx(1.0)  # best on both paths: 0.5 + 0.5
    assert 0 < hits[1].score < 1.0


async def test_names_and_vectors_survive_a_restart(tmp_path, open_kb):
    kb = open_kb(tmp_path / "k", FakeEmbedder(64))
    await kb.create("Travel/Japan Trip", "Kyoto in April")
    embedder = FakeEmbedder(64)
    again = open_kb(tmp_path / "k", embedder)
    assert [e.name for e in again.list()] == ["travel/japan_trip"]
    assert (await again.search("kyoto", 1, audience=EVERYONE))[0].entry.name == "travel/japan_trip"
    assert all(len(call) == 1 for call in embedder.calls)  # only the query was embedded


async def test_sync_twins_refuse_a_running_loop(tmp_path):
    kb = KnowledgeBase(tmp_path / "k")
    with pytest.raises(SyncInAsyncError, match="await"):
        kb.search_sync("x", audience=EVERYONE)


def test_sync_twins_work_without_a_loop(tmp_path):
    kb = KnowledgeBase(tmp_path / "k")
    kb.create_sync("notes/todo", "buy milk")
    assert kb.search_sync("milk", audience=EVERYONE)[0].entry.name == "notes/todo"


async def test_knowledge_tools_round_trip_and_report_bad_input(tmp_path):
    tools = {t.name: t for t in knowledge_tools(KnowledgeBase(tmp_path / "k"))}
    assert (await tools["knowledge_create"].handler(name="Home/Wifi", content="ssid homenet")) == {
        "created": "home/wifi"
    }
    listed = await tools["knowledge_list"].handler()
    assert listed["categories"] == ["home"] and listed["entries"][0]["name"] == "home/wifi"
    found = await tools["knowledge_search"].handler(query="homenet")
    assert found["results"][0]["name"] == "home/wifi"
    with pytest.raises(ToolError, match="knowledge_create"):
        await tools["knowledge_create"].handler(name="../etc", content="x")
    with pytest.raises(ToolError, match="no knowledge entry"):
        await tools["knowledge_delete"].handler(name="nothing")
    assert (await tools["knowledge_delete"].handler(name="wifi")) == {"deleted": "home/wifi"}
