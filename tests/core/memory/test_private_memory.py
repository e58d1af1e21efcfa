"""Private memory: every stored item records its person and visibility, and a reader sees only
what its audience may (documents on SQLite and PostgreSQL, knowledge, the log, the tools)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.memory.audience import audience_of, marks_of, says_household
from homeagent_core.memory.documents.store import Document, DocumentStore
from homeagent_core.memory.documents.tools import DocumentTools
from homeagent_core.memory.knowledge.base import KnowledgeBase
from homeagent_core.memory.knowledge.tools import KnowledgeTools
from homeagent_core.memory.textlog import TextLog, record_visibility
from homeagent_sdk.current import CURRENT_PRINCIPAL
from homeagent_sdk.errors import UsageError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Principal
from homeagent_sdk.visibility import EVERYONE, HOUSEHOLD, PRIVATE, Audience, group_visibility

MUM = Audience(person="mum")
KID = Audience(person="kid")
GROUP = "qq:group:42"


def _docs(person: str, visibility: str, n: int, topic: str = "hospital check-up appointment") -> list[Document]:
    return [
        Document(content=f"{topic} note {i} by {person} for {visibility}", source=f"{person}-{visibility}",
                 created_at=1000.0 + i, person=person, visibility=visibility)
        for i in range(n)
    ]


async def _household(open_documents: Any, path: Path, embedder: Any = None) -> Any:
    store = open_documents(path, embedder)
    await store.add_many(
        _docs("mum", PRIVATE, 40) + _docs("kid", PRIVATE, 12) + _docs("dad", HOUSEHOLD, 4)
        + _docs("dad", group_visibility(GROUP), 3)
    )
    return store


def _seen(hits: list[Any]) -> list[tuple[str, str]]:
    return [(h.document.person, h.document.visibility) for h in hits]


@pytest.mark.parametrize("dense", [False, True], ids=["lexical", "fused"])
async def test_a_private_document_is_invisible_to_everyone_else_and_the_filtered_top_k_is_full(
    tmp_path, open_documents, dense
):
    store = await _household(open_documents, tmp_path / "documents.db", FakeEmbedder(16) if dense else None)
    kid = await store.query("hospital check-up appointment", 10, audience=KID, touch=False)
    assert len(kid) == 10  # ten visible ones exist (12 of the kid's, 4 household): ten come back
    assert all(p == "kid" or v == HOUSEHOLD for p, v in _seen(kid))
    mum = await store.query("hospital check-up appointment", 10, audience=MUM, touch=False)
    assert len(mum) == 10 and all(p == "mum" or v == HOUSEHOLD for p, v in _seen(mum))
    everyone = await store.query("hospital check-up appointment", 60, audience=EVERYONE, touch=False)
    assert len(everyone) == 59
    # the blocking search and consume filter alike
    assert all(p != "mum" for p, _ in _seen(store.search("hospital", 20, audience=KID)))
    taken = await store.consume("hospital check-up appointment", 20, audience=KID)
    assert len(taken) == 16 and all(p != "mum" or v == HOUSEHOLD for p, v in _seen(taken))
    assert await store.query("hospital check-up appointment", 5, audience=KID, touch=False) == []
    store.close()


async def test_household_items_reach_everyone_and_group_items_only_that_group(tmp_path, open_documents):
    store = await _household(open_documents, tmp_path / "documents.db")
    guest = Audience(person="guest:qq:7")
    in_group = Audience(person="guest:qq:7", group=GROUP)
    other_group = Audience(person="kid", group="qq:group:99")
    assert {v for _, v in _seen(await store.query("hospital", 50, audience=guest, touch=False))} == {HOUSEHOLD}
    got = _seen(await store.query("hospital", 50, audience=in_group, touch=False))
    assert sorted({v for _, v in got}) == sorted({HOUSEHOLD, group_visibility(GROUP)}) and len(got) == 7
    got = _seen(await store.query("hospital", 50, audience=other_group, touch=False))
    assert group_visibility(GROUP) not in {v for _, v in got} and ("kid", PRIVATE) in got
    store.close()


async def test_the_owner_shares_and_unshares_a_document_and_a_reopened_store_keeps_it(tmp_path, open_documents):
    path = tmp_path / "documents.db"
    store = open_documents(path)
    secret = await store.add("dentist on friday at nine", person="mum")
    assert secret.person == "mum" and secret.visibility == PRIVATE
    assert await store.query("dentist friday", 3, audience=KID, touch=False) == []
    assert store.set_visibility([secret.id, "doc_missing"], HOUSEHOLD) == 1
    assert [h.document.id for h in await store.query("dentist friday", 3, audience=KID, touch=False)] == [secret.id]
    with pytest.raises(UsageError, match="visibility 'everyone'"):
        store.set_visibility([secret.id], "everyone")
    store.close()
    again = open_documents(path)
    assert [h.document.visibility for h in await again.query("dentist friday", 3, audience=KID, touch=False)] == [
        HOUSEHOLD
    ]
    assert again.set_visibility([secret.id], PRIVATE) == 1
    assert await again.query("dentist friday", 3, audience=KID, touch=False) == []
    again.close()
    third = open_documents(path)
    assert await third.query("dentist friday", 3, audience=KID, touch=False) == []
    assert third.get(secret.id).person == "mum"  # type: ignore[union-attr]
    third.close()


async def test_a_document_without_a_person_is_the_owners_and_a_bad_visibility_is_refused(tmp_path, open_documents):
    store = open_documents(tmp_path / "documents.db", owner="mum")
    doc = await store.add("the spare key is under the flowerpot")
    assert (doc.person, doc.visibility) == ("mum", PRIVATE)
    with pytest.raises(UsageError, match="'household'"):
        await store.add("x", visibility="public")
    store.close()


_OLD_SCHEMA = """
CREATE TABLE documents (
    slot INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, title TEXT NOT NULL DEFAULT '',
    content TEXT NOT NULL, source TEXT NOT NULL DEFAULT '', created_at REAL NOT NULL, last_access REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0, media_digests TEXT NOT NULL DEFAULT '[]', meta TEXT NOT NULL DEFAULT '{}',
    vector BLOB, vec_model TEXT NOT NULL DEFAULT '', lex BLOB NOT NULL, lex_len INTEGER NOT NULL
);
CREATE INDEX documents_open ON documents (slot, created_at, source, vec_model, lex_len);
CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


async def test_an_old_documents_db_becomes_the_owners_private_documents_once(tmp_path, caplog):
    from homeagent_core.lexical.buckets import encode_terms, term_counts

    path = tmp_path / "documents.db"
    db = sqlite3.connect(path)
    db.executescript(_OLD_SCHEMA)
    for i, text in enumerate(["mum's blood test results are fine", "wifi password is tulip42"]):
        buckets, counts, length = term_counts(text)
        db.execute(
            "INSERT INTO documents (id, content, created_at, last_access, lex, lex_len) VALUES (?,?,?,?,?,?)",
            (f"doc_old{i}", text, 100.0 + i, 100.0 + i, encode_terms(buckets, counts), length),
        )
    db.commit()
    db.close()
    store = DocumentStore(path, owner="mum")
    assert store.migrated == 2
    assert {(d.person, d.visibility) for d in store.all()} == {("mum", PRIVATE)}
    assert await store.query("wifi password", 3, audience=KID, touch=False) == []
    assert (await store.query("wifi password", 3, audience=MUM, touch=False))[0].document.id == "doc_old1"
    store.close()
    again = DocumentStore(path, owner="mum")
    assert again.migrated == 0  # said once: the first open after the upgrade
    assert again.stats()["documents"] == 2
    again.close()


async def test_memory_says_once_how_many_documents_became_the_owners(tmp_path, caplog):
    from homeagent_core.config import ConfigStore
    from homeagent_core.lexical.buckets import encode_terms, term_counts
    from homeagent_core.memory.system import MemorySystem

    (tmp_path / "memory").mkdir()
    db = sqlite3.connect(tmp_path / "memory" / "documents.db")
    db.executescript(_OLD_SCHEMA)
    buckets, counts, length = term_counts("an old note")
    db.execute("INSERT INTO documents (id, content, created_at, last_access, lex, lex_len) VALUES (?,?,?,?,?,?)",
               ("doc_old", "an old note", 1.0, 1.0, encode_terms(buckets, counts), length))
    db.commit()
    db.close()
    for expected in (1, 0):
        caplog.clear()
        config = ConfigStore(tmp_path / "config.db")
        memory = await MemorySystem.open(tmp_path, config, embedder=FakeEmbedder(8), owner="mum")
        said = [r.getMessage() for r in caplog.records if "belong to the owner" in r.getMessage()]
        assert len(said) == expected
        if expected:
            assert "1 document(s)" in said[0] and "homeagent memory share" in said[0]
        assert memory.documents.get("doc_old").person == "mum"  # type: ignore[union-attr]
        await memory.aclose()
        config.close()


def test_log_records_carry_their_visibility_and_old_records_are_private(tmp_path):
    log = TextLog(tmp_path / "log")
    log.append("user", "告诉全家：周六聚餐", person="mum", thread="main", visibility=HOUSEHOLD)
    log.append("user", "an old record")
    records = list(log.iter_records())
    assert [record_visibility(r) for r in records] == [HOUSEHOLD, PRIVATE]
    assert "visibility" not in records[1]
    log.close()


async def test_knowledge_entries_are_filtered_and_keep_their_marks_after_a_restart(tmp_path):
    kb = KnowledgeBase(tmp_path / "knowledge", owner="mum")
    await kb.create("health/checkup", "hospital check-up next wednesday", person="mum")
    await kb.create("home/wifi", "the wifi password is tulip42", person="mum", visibility=HOUSEHOLD)
    await kb.create("school/homework", "maths homework due monday", person="kid")
    found = {h.entry.name for h in await kb.search("hospital wifi homework", 5, audience=KID)}
    assert found == {"home/wifi", "school/homework"}
    assert [e.name for e in kb.list(audience=KID)] == ["home/wifi", "school/homework"]
    assert "health" not in kb.categories(audience=KID)
    with pytest.raises(UsageError, match="belongs to someone else"):
        await kb.create("health/checkup", "overwritten", person="kid", audience=KID)
    kb.close()
    again = KnowledgeBase(tmp_path / "knowledge", owner="mum")
    assert {e.name: (e.person, e.visibility) for e in again.list()} == {
        "health/checkup": ("mum", PRIVATE), "home/wifi": ("mum", HOUSEHOLD), "school/homework": ("kid", PRIVATE)
    }
    again.set_visibility("checkup", HOUSEHOLD)
    assert "health/checkup" in [h.entry.name for h in await again.search("hospital", 3, audience=KID)]
    again.close()


async def test_knowledge_written_before_people_is_the_owners_and_private(tmp_path):
    entry = tmp_path / "knowledge" / "health" / "checkup"
    entry.mkdir(parents=True)
    (entry / "content.md").write_text("hospital check-up next wednesday", encoding="utf-8")
    kb = KnowledgeBase(tmp_path / "knowledge", owner="mum")
    assert (kb.get("checkup").person, kb.get("checkup").visibility) == ("mum", PRIVATE)
    assert await kb.search("hospital", 3, audience=KID) == []
    assert len(await kb.search("hospital", 3, audience=MUM)) == 1
    kb.close()


def _as(principal: Principal | None) -> Any:
    return CURRENT_PRINCIPAL.set(principal)


async def test_the_tools_read_and_write_as_the_turns_principal(tmp_path):
    store = DocumentStore(tmp_path / "documents.db", owner="mum")
    tools = DocumentTools((store, None))
    kb = KnowledgeBase(tmp_path / "knowledge", owner="mum")
    ktools = KnowledgeTools(kb)
    mum = Principal(person="mum", role="owner", door="webui")
    kid = Principal(person="kid", role="child", door="webui")
    token = _as(mum)
    try:
        await tools.doc_commit("下周三我要去医院复查")
        await ktools.knowledge_create("health/复查", "下周三去医院复查")
    finally:
        CURRENT_PRINCIPAL.reset(token)
    token = _as(kid)
    try:
        found = await tools.doc_query("医院复查", 5)
        assert found["found"] == 0
        assert (await ktools.knowledge_search("医院复查"))["results"] == []
        assert (await ktools.knowledge_list())["entries"] == []
        await tools.doc_commit("我的足球课在周四")
    finally:
        CURRENT_PRINCIPAL.reset(token)
    token = _as(mum)
    try:
        assert (await ktools.knowledge_search("医院复查"))["results"][0]["name"] == "health/复查"
        assert (await tools.doc_query("足球课", 5))["found"] == 0
        assert (await tools.doc_query("医院复查", 5))["found"] == 1  # consumed: hers
    finally:
        CURRENT_PRINCIPAL.reset(token)
    # outside a turn: the owner
    assert [d.person for d in store.all()] == ["kid"]
    store.close()
    kb.close()


def test_audience_and_marks_agree_without_a_registry():
    person, visibility = marks_of(None, owner="owner")
    assert audience_of(None, owner="owner").sees(person, visibility)
    guest = Principal(door="qq", account="7")
    assert not audience_of(guest, owner="owner").sees(person, visibility)
    member = Principal(door="qq", account="7", thread=GROUP)
    assert audience_of(member, owner="owner").sees(*marks_of(Principal(door="qq", account="8", thread=GROUP),
                                                             owner="owner"))


@pytest.mark.parametrize(
    ("text", "household"),
    [
        ("告诉全家：周六晚上聚餐", True),
        ("让大家都知道，wifi 密码换了", True),
        ("这件事告诉大家吧", True),
        ("跟全家说一下我升职了", True),
        ("remember this for everyone: the plumber comes at 9", True),
        ("Tell everyone the bins go out on Tuesday", True),
        ("please let the whole family know dinner is at 7", True),
        ("let everyone know the car is fixed", True),
        ("下周三我要去医院复查，别跟孩子说", False),
        ("不要告诉全家", False),
        ("先别告诉大家", False),
        ("don't tell everyone", False),
        ("Please do not tell the family about this", False),
        ("I told everyone at work yesterday", False),
        ("大家好", False),
    ],
)
def test_saying_it_is_for_the_household(text, household):
    assert says_household(text) is household


def test_the_marks_file_is_kept_beside_the_entries(tmp_path):
    kb = KnowledgeBase(tmp_path / "knowledge", owner="mum")
    kb.create_sync("home/bins", "bins go out on tuesday")
    marks = json.loads((tmp_path / "knowledge" / ".marks.json").read_text(encoding="utf-8"))
    assert marks["entries"] == {"home/bins": ["mum", PRIVATE]}
    kb.delete("home/bins")
    assert json.loads((tmp_path / "knowledge" / ".marks.json").read_text(encoding="utf-8"))["entries"] == {}
    kb.close()


async def test_a_turns_input_and_reply_carry_its_persons_marks_into_log_window_and_archive(tmp_path):
    from homeagent_core.config import ConfigStore
    from homeagent_core.memory.system import MemorySystem
    from homeagent_sdk.types import StageContext

    config = ConfigStore(tmp_path / "config.db")
    memory = await MemorySystem.open(tmp_path, config, embedder=FakeEmbedder(8), owner="mum")
    try:
        said = [
            (Principal(person="mum", role="owner", door="webui"), "下周三我要去医院复查，别跟孩子说"),
            (Principal(person="mum", role="owner", door="webui"), "告诉全家：周六晚上七点家庭聚餐"),
            (Principal(person="kid", role="child", door="qq", account="9", thread=GROUP), "群里说：明天去公园"),
            (None, "library use speaks as the owner"),
        ]
        for principal, text in said:
            ctx = StageContext(raw_message=text, channel="webui", source="webui", principal=principal)
            await memory.record_input(ctx, None)
            ctx.final_text = "好的"
            await memory.record_output(ctx)
        records = [r for r in memory.textlog.iter_records() if r["role"] == "user"]
        assert [record_visibility(r) for r in records] == [PRIVATE, HOUSEHOLD, group_visibility(GROUP), PRIVATE]
        replies = [r for r in memory.textlog.iter_records() if r["role"] == "assistant"]
        assert [record_visibility(r) for r in replies] == [PRIVATE, PRIVATE, group_visibility(GROUP), PRIVATE]
        main = memory.threads.get("main")
        marks = [(e.input, e.meta.get("person"), e.meta.get("visibility")) for e in main.events if e.kind == "user"]
        assert marks == [
            ("下周三我要去医院复查，别跟孩子说", "mum", PRIVATE),
            ("告诉全家：周六晚上七点家庭聚餐", "mum", HOUSEHOLD),
            ("library use speaks as the owner", "mum", PRIVATE),
        ]
        group = [e.meta for e in memory.threads.get(GROUP).events if e.kind == "user"]
        assert group == [{"person": "kid", "visibility": group_visibility(GROUP)}]
        main.max_context_size = 1
        main.protected = 0
        await main.prune("")
        archived = {d.content: (d.person, d.visibility) for d in memory.documents.all()}
        assert archived["告诉全家：周六晚上七点家庭聚餐"] == ("mum", HOUSEHOLD)
        assert archived["下周三我要去医院复查，别跟孩子说"] == ("mum", PRIVATE)
        kid = Audience(person="kid")
        texts = [h.document.content for h in await memory.documents.query("周六 下周三", 5, audience=kid, touch=False)]
        assert texts == ["告诉全家：周六晚上七点家庭聚餐"]
    finally:
        await memory.aclose()
        config.close()


async def test_postgresql_documents_without_a_person_become_the_owners(pg_url, pg_tenant):
    from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore

    first = PgDocumentStore(pg_url, tenant=pg_tenant, owner="mum")
    await first.add_many([Document(content="the boiler was serviced in may"),
                          Document(content="library note", person="owner")])
    first.close()
    # rows as schema step 6 leaves the rows written before it: no person yet
    second = PgDocumentStore(pg_url, tenant=pg_tenant, owner="mum")
    second.db.call(second.db.transact(lambda conn: conn.execute(
        "UPDATE ha_documents SET person='' WHERE tenant=%s AND content LIKE 'the boiler%%'", (pg_tenant,))))
    second.close()
    third = PgDocumentStore(pg_url, tenant=pg_tenant, owner="mum")
    assert third.migrated == 1
    assert {d.content: (d.person, d.visibility) for d in third.all()} == {
        "the boiler was serviced in may": ("mum", PRIVATE), "library note": ("mum", PRIVATE)
    }
    assert await third.query("boiler serviced", 3, audience=KID, touch=False) == []
    assert len(await third.query("boiler serviced", 3, audience=MUM, touch=False)) >= 1
    third.close()


async def test_documents_stored_without_a_registry_become_the_registered_owners(tmp_path):
    path = tmp_path / "documents.db"
    library = DocumentStore(path)  # no registry: the owner is LIBRARY_OWNER
    await library.add("a note from library use")
    library.close()
    household = DocumentStore(path, owner="mum")
    assert [d.person for d in household.all()] == ["mum"]
    assert len(await household.query("library use note", 3, audience=MUM, touch=False)) == 1
    household.close()


async def test_a_doc_query_move_a_crash_cut_in_a_persons_window_is_finished_on_first_use(tmp_path):
    from homeagent_core.config import ConfigStore
    from homeagent_core.memory.context import ContextEvent
    from homeagent_core.memory.system import MemorySystem
    from homeagent_sdk.types import StageContext

    config = ConfigStore(tmp_path / "config.db")
    memory = await MemorySystem.open(tmp_path, config, embedder=FakeEmbedder(8), owner="mum")
    doc = await memory.documents.add("the kid's football is on thursday", person="kid")
    window = memory.threads.get("person:kid")
    await window.append(ContextEvent(input=doc.content, kind="cold_storage", source="cold_storage",
                                     meta={"doc_id": doc.id, "person": "kid", "visibility": PRIVATE}))
    await window.save_now()  # the context was written; the crash came before the store's delete
    await memory.aclose()
    memory = await MemorySystem.open(tmp_path, config, embedder=FakeEmbedder(8), owner="mum")
    try:
        assert memory.documents.get(doc.id) is not None
        kid = Principal(person="kid", role="child", door="webui")
        await memory.record_input(StageContext(raw_message="hi", channel="webui", source="webui", principal=kid), None)
        assert memory.documents.get(doc.id) is None  # kept once: in the kid's window
        assert next(e.meta.get("doc_id") for e in memory.threads.get("person:kid").events) == doc.id
    finally:
        await memory.aclose()
        config.close()


async def test_a_fact_said_for_the_whole_household_reaches_everyones_graph_recall(tmp_path):
    from homeagent_core.config import ConfigStore
    from homeagent_core.memory.system import MemorySystem
    from homeagent_sdk.types import StageContext

    config = ConfigStore(tmp_path / "config.db")
    memory = await MemorySystem.open(tmp_path, config, embedder=FakeEmbedder(8), owner="dad")
    memory.owner_name = "dad"
    try:
        mum = Principal(person="mum", role="adult", door="webui")
        for text in ("我住在杭州", "告诉全家，我喜欢游泳"):
            await memory.record_input(StageContext(raw_message=text, channel="webui", source="webui", principal=mum),
                                      None)
        kid = Audience(person="kid")
        seen = {(r.source, r.type, r.target) for r in memory.graph.recall(["mum"], audience=kid).relations}
        assert seen == {("mum", "喜欢", "游泳")}, seen  # the household fact; not her private 住在 杭州
        mine = {(r.source, r.type, r.target) for r in memory.graph.recall(["mum"], audience=Audience("mum")).relations}
        assert mine == {("mum", "喜欢", "游泳"), ("mum", "住在", "杭州")}, mine
    finally:
        await memory.aclose()
        config.close()
