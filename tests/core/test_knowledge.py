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
    assert [h.entry.name for h in hits[:2]] == ["a/alpha", "z/alpha"]
    assert hits[0].score == hits[1].score == pytest.approx(0.5)
    # character grams match partial forms: "unrelated" shares a few grams of "identical text", weakly
    assert all(h.score < 0.25 for h in hits[2:])
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


# -- the lexical path: BM25 on the scheme every memory tier shares ------------------------------

_NOISE = {
    "people/zhang": "小张住在上海，喜欢跑步。",
    "people/chen": "小陈是老师，周末去爬山。",
    "home/wifi": "家里的路由器在客厅，密码贴在冰箱上。",
    "notes/garden": "The tomatoes in the garden need water every morning.",
}


async def _lexical_kb(tmp_path, open_kb, entries):
    kb = open_kb(tmp_path / "k")  # no embedder: the lexical path alone
    for name, content in {**_NOISE, **entries}.items():
        await kb.create(name, content)
    return kb


async def test_a_question_with_two_names_brings_both_entries(tmp_path, open_kb):
    kb = await _lexical_kb(tmp_path, open_kb, {
        "people/wang": "小王在华为做会计，每天骑车上班。",
        "people/li": "小李在腾讯写代码，住在南山。",
    })
    hits = await kb.search("小王和小李分别在哪里工作？", 2, audience=EVERYONE)
    assert sorted(h.entry.name for h in hits) == ["people/li", "people/wang"]
    hits = await kb.search("Where do Wang and Li work?", 2, audience=EVERYONE)  # names only in the entry names
    assert sorted(h.entry.name for h in hits) == ["people/li", "people/wang"]


@pytest.mark.parametrize(("entries", "query", "best"), [
    ({"people/wang_name": "小王，小王，小王！",
      "people/wang_age": "小王的年龄是二十八岁，他喜欢打篮球，住在北京朝阳区。"},
     "小王的年龄是多少？", "people/wang_age"),
    ({"people/melanie_hi": "Melanie! Melanie, Melanie.",
      "people/melanie_birthday": "Melanie's birthday is on the third of May; she likes pottery and camping "
                                 "by the lake."},
     "When is Melanie's birthday?", "people/melanie_birthday"),
])
async def test_a_short_entry_repeating_a_name_does_not_outrank_the_asked_attribute(
    tmp_path, open_kb, entries, query, best
):
    kb = await _lexical_kb(tmp_path, open_kb, entries)
    hits = await kb.search(query, 3, audience=EVERYONE)
    assert hits[0].entry.name == best
    assert {h.entry.name for h in hits[:2]} == set(entries)


async def test_english_matches_other_forms_of_a_word_and_chinese_its_words(tmp_path, open_kb):
    kb = await _lexical_kb(tmp_path, open_kb, {
        "hobbies/melanie": "Melanie paints sunrises over the lake.",
        "hobbies/wang": "小王周末喜欢打篮球。",
    })
    assert (await kb.search("painting", 1, audience=EVERYONE))[0].entry.name == "hobbies/melanie"
    assert (await kb.search("谁喜欢篮球？", 1, audience=EVERYONE))[0].entry.name == "hobbies/wang"


async def test_another_persons_private_entry_is_neither_returned_nor_counted(tmp_path, open_kb):
    from homeagent_sdk.visibility import HOUSEHOLD, Audience

    kid = Audience(person="kid")
    kb = open_kb(tmp_path / "k")
    await kb.create("family/wang", "小王的工资是一万二。", person="mum", visibility=HOUSEHOLD)
    await kb.create("family/li", "小李的工资是九千，小王的生日在五月。", person="mum", visibility=HOUSEHOLD)
    before = {h.entry.name: h.score for h in await kb.search("小王的工资是多少", 5, audience=kid)}
    await kb.create("mum/wang_salary", "小王的工资：一万二，小王的工资单在抽屉里。", person="mum")
    hits = await kb.search("小王的工资是多少", 5, audience=kid)
    assert "mum/wang_salary" not in {h.entry.name for h in hits}
    assert {h.entry.name: h.score for h in hits} == before  # statistics count only the entries kid may see
    mum = await kb.search("小王的工资是多少", 5, audience=Audience(person="mum"))
    assert "mum/wang_salary" in {h.entry.name for h in mum}


async def test_replacing_and_deleting_entries_keeps_the_lexical_path_consistent(tmp_path, open_kb):
    kb = await _lexical_kb(tmp_path, open_kb, {"pets/cat": "猫叫咪咪"})
    await kb.create("pets/cat", "狗叫旺财")
    assert await kb.search("咪咪", 5, audience=EVERYONE) == []
    assert (await kb.search("旺财", 1, audience=EVERYONE))[0].entry.name == "pets/cat"
    await kb.adelete("pets/cat")
    assert await kb.search("旺财", 5, audience=EVERYONE) == []
    assert sorted(kb._lexical.ids()) == sorted(kb._entries)
