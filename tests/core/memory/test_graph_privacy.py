"""Private memory in the graph: who said a relation, who may see it, and "我" is the speaker.

Real SQLite files and the session's PostgreSQL server (the ``open_graph`` fixture runs each
store test on both). The household: the owner ``owner``, the mother ``mother``, the child
``child``, and a guest known by their chat thread.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from homeagent_core.memory.distill import RuleDistiller
from homeagent_core.memory.graph import schema
from homeagent_core.memory.graph.model import Changes
from homeagent_core.memory.graph.privacy import graph_marks, graph_reader, speaker_name
from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.social import SocialGraph
from homeagent_core.memory.tools import GraphBinding, GraphTools
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Principal, Triple
from homeagent_sdk.visibility import EVERYONE, HOUSEHOLD, Audience, group_visibility

MOTHER, CHILD = Audience("mother"), Audience("child")
GROUP = "qq:group:777"
SECRET = "下周三我要去医院复查，别跟孩子说"


def household(store: GraphStore) -> None:
    """The mother's private remark, a household fact, a group fact, and the child's own."""
    store.commit([Triple("李梅", "复查于", "协和医院", sentence_text=SECRET)], "web", person="mother")
    store.commit([Triple("李梅", "是妈妈", "小明")], "web", person="mother", visibility=HOUSEHOLD)
    store.commit([Triple("小明", "报名", "足球队")], GROUP, person="qq:private:1", visibility=group_visibility(GROUP))
    store.commit([Triple("小明", "喜欢", "恐龙")], "web", person="child")


def relations(found: Any) -> set[tuple[str, str, str]]:
    return {(r.source, r.type, r.target) for r in found.relations}


def test_the_mothers_private_relation_is_invisible_to_the_childs_recall(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    household(store)
    mine = relations(store.recall(["李梅", "小明"], audience=MOTHER))
    assert ("李梅", "复查于", "协和医院") in mine and ("李梅", "是妈妈", "小明") in mine

    theirs = store.recall(["李梅", "医院", "协和医院", "小明"], audience=CHILD, depth=4)
    assert relations(theirs) == {("李梅", "是妈妈", "小明"), ("小明", "喜欢", "恐龙")}
    # the hospital is reachable only through her private relation: not found, not even as a seed
    assert "协和医院" not in {e.name for e in theirs.entities}
    assert store.recall(["协和医院"], audience=CHILD).entities == []
    assert SECRET not in repr(theirs)


def test_household_relations_are_seen_by_all_group_ones_only_in_the_group_and_a_guest_sees_its_own(
    open_graph, tmp_path: Path
):
    store = open_graph(tmp_path / "graph.db")
    household(store)
    guest = Audience("qq:private:1")
    in_group = Audience("qq:private:1", group=GROUP)
    for audience in (MOTHER, CHILD, guest, in_group, Audience()):
        assert ("李梅", "是妈妈", "小明") in relations(store.recall(["小明"], audience=audience))
    assert ("小明", "报名", "足球队") in relations(store.recall(["足球队"], audience=in_group))
    for audience in (MOTHER, CHILD, guest, Audience()):  # outside the group chat nobody sees it
        assert ("小明", "报名", "足球队") not in relations(store.recall(["小明"], audience=audience, depth=3))
    assert relations(store.recall(["小明", "李梅"], audience=guest, depth=3)) == {("李梅", "是妈妈", "小明")}
    assert len(relations(store.recall(["小明"], depth=3))) == 4  # maintenance sees everything


def test_neighbours_edges_paths_networkx_and_counts_follow_the_audience(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    household(store)
    cache = store.cache
    li = cache.ids_by_name["李梅"]
    names = {cache.entities[n].name for n in cache.neighbours(li, CHILD)}
    assert names == {"小明"}
    assert {cache.entities[n].name for n in cache.neighbours(li, MOTHER)} == {"小明", "协和医院"}
    assert {cache.entities[n].name for n in cache.neighbours(li)} == {"小明", "协和医院"}
    graph = cache.to_networkx(CHILD)
    assert {(d["person"], d["visibility"]) for _u, _v, d in graph.edges(data=True)} == {
        ("mother", HOUSEHOLD),
        ("child", "private"),
    }
    assert cache.ids_by_name["协和医院"] not in graph.nodes
    full = cache.to_networkx()
    assert {d["visibility"] for _u, _v, d in full.edges(data=True)} == {"private", HOUSEHOLD, f"group:{GROUP}"}
    assert store.analytics.path("小明", "协和医院", audience=CHILD) is None
    assert store.analytics.path("小明", "协和医院", audience=MOTHER) is not None
    counts = store.introspect(CHILD)
    assert counts["relations_active"] == 2 and counts["entities"] == 3 and counts["sentences"] == 0
    assert "复查于" not in counts["relation_types"]
    assert store.introspect()["relations_active"] == 4
    social = SocialGraph(store)
    assert social.get_person("协和医院", CHILD) is None
    assert [r["person"] for r in social.get_person("李梅", CHILD)["relations"]] == ["小明"]


def test_one_persons_statement_never_refreshes_anothers_relation(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    store.commit([Triple("小明", "喜欢", "恐龙")], "s", person="child")
    again = store.commit([Triple("小明", "喜欢", "恐龙")], "s", person="mother")
    assert again.added == 1  # her own row, not the child's refreshed
    store.commit([Triple("小明", "喜欢", "恐龙")], "s", person="mother", visibility=HOUSEHOLD)
    marks = sorted((r.person, r.visibility) for r in store.cache.relations.values())
    assert marks == [("child", "private"), ("mother", HOUSEHOLD), ("mother", "private")]
    assert store.cache.snapshot() == store.sql_snapshot()
    with pytest.raises(MemoryStoreError, match="visibility"):
        store.commit([Triple("小明", "喜欢", "恐龙")], "s", person="x", visibility="everyone")


def test_merging_entities_keeps_each_persons_relations_apart(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    store.commit([Triple("小明", "喜欢", "恐龙")], person="child")
    store.commit([Triple("明明", "喜欢", "恐龙")], person="mother")
    store.merge("小明", "明明")
    rows = sorted((store.cache.entities[r.source_id].name, r.person) for r in store.cache.relations.values())
    assert rows == [("小明", "child"), ("小明", "mother")]
    assert relations(store.recall(["小明"], audience=CHILD)) == {("小明", "喜欢", "恐龙")}
    assert store.cache.snapshot() == store.sql_snapshot()


def test_a_turn_edits_and_purges_only_what_it_may_see(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    household(store)
    with pytest.raises(MemoryStoreError, match="no relation"):
        store.edit("李梅", "复查于", "协和医院", Triple("李梅", "去", "公园"), audience=CHILD)
    assert store.purge({"subject_contains": "李梅", "relation_type": "复查于"}, audience=CHILD) == 0
    store.edit("李梅", "是妈妈", "小明", Triple("李梅", "是母亲", "小明"), audience=CHILD)
    edited = [r for r in store.cache.relations.values() if r.type == "是母亲"]
    assert [(r.person, r.visibility) for r in edited] == [("mother", HOUSEHOLD)]  # the marks stay
    assert store.purge({"relation_type": "复查于"}, audience=MOTHER) == 1
    assert store.cache.snapshot() == store.sql_snapshot()


def _set_vectors(store: GraphStore, table: str, vectors: dict[int, np.ndarray], space: str) -> None:
    def run(conn: Any, ch: Changes) -> None:
        for item, vec in vectors.items():
            conn.execute(f"UPDATE {table} SET vector = ?, vec_model = ? WHERE id = ?",
                         (vec.astype(np.float32).tobytes(), space, item))
            (ch.entities if table == "entities" else ch.blocks).add(item)

    store.write(run)


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_filtered_vector_top_k_is_k_visible_entities(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    hidden = [f"秘密地点{i}" for i in range(8)]
    shown = [f"公园{i}" for i in range(8)]
    store.commit([Triple("李梅", "去过", n) for n in hidden], person="mother")
    store.commit([Triple("全家", "去过", n) for n in shown], person="mother", visibility=HOUSEHOLD)
    ids = store.cache.ids_by_name
    # her private places lie nearest to the query; the household's further away
    vectors = {ids[n]: _unit(1.0, 0.01 * i, 0.0) for i, n in enumerate(hidden)}
    vectors |= {ids[n]: _unit(0.6, 0.8, 0.01 * i) for i, n in enumerate(shown)}
    _set_vectors(store, "entities", vectors, "space")
    query = _unit(1.0, 0.0, 0.0)
    child = [store.cache.entities[e].name for e, _ in store.cache.vector_seeds(query, "space", 5, CHILD)]
    assert len(child) == 5 and set(child) <= set(shown)
    mother = [store.cache.entities[e].name for e, _ in store.cache.vector_seeds(query, "space", 5, MOTHER)]
    assert set(mother) <= set(hidden) and len(mother) == 5
    found = store.recall([], query_vector=query, fingerprint="space", audience=CHILD, max_relations=5)
    assert len(found.relations) == 5 and all(r.target in shown for r in found.relations)


def test_the_media_block_search_is_filtered_before_its_top_k(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    hers = [f"{i:x}" * 64 for i in range(1, 5)]
    theirs = [f"{i:x}" * 64 for i in range(10, 14)]
    for i, digest in enumerate(hers):
        store.commit([Triple("李梅", "拍了", f"照片{i}号", sentence_text=f"她的照片{i}", media_digests=[digest])],
                     person="mother")
    for i, digest in enumerate(theirs):
        store.commit([Triple("全家", "拍了", f"合影{i}号", sentence_text=f"合影{i}", media_digests=[digest])],
                     person="mother", visibility=HOUSEHOLD)
    by_digest = {b.digest: b.id for b in store.cache.blocks.values()}
    vectors = {by_digest[d]: _unit(1.0, 0.01 * i) for i, d in enumerate(hers)}
    vectors |= {by_digest[d]: _unit(0.5, 0.5 + 0.01 * i) for i, d in enumerate(theirs)}
    _set_vectors(store, "memory_blocks", vectors, "space")
    query = _unit(1.0, 0.0)
    child = [d for d, _ in store.cache.search_blocks(query, "space", 3, CHILD)]
    assert len(child) == 3 and set(child) <= set(theirs)
    assert {d for d, _ in store.cache.search_blocks(query, "space", 3, MOTHER)} <= set(hers)
    assert store.cache.snapshot() == store.sql_snapshot()


async def test_the_graph_tools_read_and_write_as_the_principal_of_the_turn(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    household(store)
    speaking: list[Principal | None] = [Principal(person="child", role="child", door="webui")]
    binding = GraphBinding(store, SocialGraph(store), principal=lambda: speaking[0], owner=lambda: "owner")
    tools = GraphTools(binding)
    out = await tools.memory_recall("李梅, 协和医院")
    assert SECRET not in repr(out) and "协和医院" not in repr(out)
    assert {(r["source"], r["type"], r["target"]) for r in out["relations"]} == {
        ("李梅", "是妈妈", "小明"),
        ("小明", "喜欢", "恐龙"),
    }
    assert (await tools.memory_introspect())["relations_active"] == 2
    await tools.memory_commit([{"subject": "小明", "relation": "有", "object": "乐高"}])
    new = [r for r in store.cache.relations.values() if r.type == "有"]
    assert [(r.person, r.visibility) for r in new] == [("child", "private")]
    speaking[0] = Principal(person="mother", role="adult", door="webui")
    assert "乐高" not in repr(await tools.memory_recall("小明"))
    assert "协和医院" in repr(await tools.memory_recall("李梅"))
    speaking[0] = Principal(door="qq", account="9", thread=GROUP)  # a guest in the group chat
    assert "足球队" in repr(await tools.memory_recall("小明"))
    person, visibility = binding.marks()
    assert (person, visibility) == (GROUP, f"group:{GROUP}")


def test_library_use_reads_everything_and_i_is_the_old_user():
    assert graph_reader(None, "") == EVERYONE
    assert graph_marks(None, "") == ("", "private")
    assert speaker_name(None, "") == "用户"
    assert speaker_name(None, "owner") == "owner"
    assert speaker_name(Principal(person="mother", role="adult"), "owner") == "mother"
    assert graph_reader(Principal(person="mother", role="adult"), "owner") == MOTHER
    assert graph_reader(Principal(role="system"), "owner") == EVERYONE
    in_group = Principal(door="qq", account="9", thread=GROUP)
    assert speaker_name(in_group, "owner") == "guest:qq:9"  # not the group's thread: every guest speaks there
    assert graph_marks(in_group, "owner") == (GROUP, f"group:{GROUP}")


def test_i_said_by_the_mother_is_the_mother(open_graph, tmp_path: Path):
    store = open_graph(tmp_path / "graph.db")
    distiller = RuleDistiller(tmp_path / "raw", store)
    distiller.add("我叫李梅，我住在北京", "web", speaker="mother", person="mother")
    distiller.add("我喜欢恐龙", "web", speaker="child", person="child")
    distiller.flush()
    reloaded = RuleDistiller(tmp_path / "raw", store)  # the speaker survives a restart on disk
    assert [(r.speaker, r.person, r.visibility) for r in reloaded._queue] == [
        ("mother", "mother", "private"),
        ("child", "child", "private"),
    ]
    reloaded.distill_once()
    rows = {(store.cache.entities[r.source_id].name, r.type, store.cache.entities[r.target_id].name, r.person)
            for r in store.cache.relations.values()}
    assert rows == {("mother", "叫", "李梅", "mother"), ("mother", "住在", "北京", "mother"),
                    ("child", "喜欢", "恐龙", "child")}
    assert "用户" not in store.cache.ids_by_name
    assert store.cache.entity("mother").type == "person"
    assert relations(store.recall(["北京", "mother"], audience=CHILD)) == set()


def test_raw_records_written_before_there_were_people_are_the_default_subjects(tmp_path: Path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "raw_1.tsv").write_text("r1\t1e12\tcli\t我叫小王\n", encoding="utf-8")
    store = GraphStore(tmp_path / "graph.db")
    try:
        RuleDistiller(raw, store).distill_once()
        assert {(r.person, r.visibility) for r in store.cache.relations.values()} == {("", "private")}
        assert "用户" in store.cache.ids_by_name
    finally:
        store.close()


def _old_graph(path: Path) -> None:
    """A graph.db as HomeAgent wrote it before there were people (schema version 3)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for version, statements in enumerate(schema.MIGRATIONS[:3], 1):
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?)", (version,))
    now = 1.0
    conn.executemany("INSERT INTO entities (id, name, type, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                     [(1, "用户", "person", now, now), (2, "杭州", "Concept", now, now),
                      (3, "小王", "Concept", now, now), (4, "咖啡", "Concept", now, now)])
    conn.execute("INSERT INTO sentences (id, text, session, created_at) VALUES (1, '我住在杭州', 'cli', 1.0)")
    conn.executemany(
        "INSERT INTO relations (source_id, target_id, type, session, sentence_id, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [(1, 2, "住在", "cli", 1, now, now), (3, 4, "喜欢", "", None, now, now)],
    )
    conn.execute("INSERT INTO memory_blocks (id, digest, created_at) VALUES (1, ?, 1.0)", ("c" * 64,))
    conn.execute("INSERT INTO memory_block_edges (sentence_id, block_id, created_at) VALUES (1, 1, 1.0)")
    conn.close()


def test_an_old_graph_opens_with_every_row_the_owners_and_the_user_becomes_the_owner(tmp_path: Path):
    path = tmp_path / "graph.db"
    _old_graph(path)
    store = GraphStore(path)
    try:
        assert {(r.person, r.visibility) for r in store.cache.relations.values()} == {("", "private")}
        assert store.claim_for_owner("owner") == 2
        assert store.claim_for_owner("owner") == 0  # nothing left the second time
        store.commit([Triple("小王", "住在", "苏州")])  # a write naming no person is the owner's now
        assert {r.person for r in store.cache.relations.values() if r.type == "住在"} == {"owner"}
        store.purge({"target_contains": "苏州"}, "hard")
        rows = {(store.cache.entities[r.source_id].name, r.type, r.person, r.visibility)
                for r in store.cache.relations.values()}
        assert rows == {("owner", "住在", "owner", "private"), ("小王", "喜欢", "owner", "private")}
        assert "用户" not in store.cache.ids_by_name and store.cache.entity("owner").type == "person"
        assert [(b.person, b.visibility) for b in store.cache.blocks.values()] == [("owner", "private")]
        marks = store.read(lambda c: c.execute("SELECT person, visibility FROM sentences").fetchall())
        assert marks == [("owner", "private")]
        assert relations(store.recall(["杭州"], audience=Audience("owner"))) == {("owner", "住在", "杭州")}
        assert store.recall(["杭州"], audience=CHILD).entities == []
        assert store.cache.snapshot() == store.sql_snapshot()
        with pytest.raises(sqlite3.IntegrityError):  # the old uniqueness is gone, the new one holds
            store.read(lambda c: c.execute(
                "INSERT INTO relations (source_id, target_id, type, session, created_at, updated_at, person)"
                " VALUES (3, 4, '喜欢', '', 1, 1, 'owner')"))
        store.read(lambda c: c.execute(
            "INSERT INTO relations (source_id, target_id, type, session, created_at, updated_at, person)"
            " VALUES (3, 4, '喜欢', '', 1, 1, 'mother')"))
    finally:
        store.close()
    again = GraphStore(path)  # opening again changes nothing
    try:
        assert again.claim_for_owner("owner") == 0
        assert len(again.cache.relations) == 3
    finally:
        again.close()


def test_the_owner_already_in_the_graph_absorbs_the_user(tmp_path: Path):
    store = GraphStore(tmp_path / "graph.db")
    try:
        store.commit([Triple("用户", "住在", "杭州")])
        store.commit([Triple("owner", "喜欢", "咖啡")], person="owner")
        assert store.claim_for_owner("owner") == 1
        rows = {(store.cache.entities[r.source_id].name, r.type) for r in store.cache.relations.values()}
        assert rows == {("owner", "住在"), ("owner", "喜欢")}
        assert "用户" not in store.cache.ids_by_name
    finally:
        store.close()


class _OneColdDoc:
    """A document store holding one cold document (what the archive heartbeat needs of it)."""

    def __init__(self, doc: Any) -> None:
        self.docs = [doc]
        self.removed: list[str] = []

    async def cold_documents(self, older_than_s: float, max_reads: int, limit: int) -> list[Any]:
        return list(self.docs)

    async def remove_document(self, doc_id: str) -> None:
        self.removed.append(doc_id)
        self.docs = []

    async def defer_document(self, doc_id: str) -> None:
        raise AssertionError("the answer parses")


async def test_heartbeats_keep_each_sources_person_and_visibility(tmp_path: Path):
    from types import SimpleNamespace

    from homeagent_core.memory.heartbeat import ArchiveJob, ReviewJob

    store = GraphStore(tmp_path / "graph.db")
    try:
        doc = SimpleNamespace(id="d1", title="复查", content=SECRET, person="mother", visibility="private")
        prompts: list[str] = []

        async def triples(prompt: str) -> str:  # the model still says "我" for the speaker now and then
            prompts.append(prompt)
            return ('[{"subject": "李梅", "relation": "复查于", "object": "协和医院"},'
                    ' {"subject": "我", "relation": "的妹妹是", "object": "李兰"}]')

        docs = _OneColdDoc(doc)
        await ArchiveJob(store, docs, triples)()  # type: ignore[arg-type]
        assert docs.removed == ["d1"] and "“我”是 mother" in prompts[0]
        rows = {(store.cache.entities[r.source_id].name, r.type, r.person, r.visibility)
                for r in store.cache.relations.values()}
        assert rows == {("李梅", "复查于", "mother", "private"), ("mother", "的妹妹是", "mother", "private")}
        store.purge({"relation_type": "的妹妹是"}, "hard")
        assert store.recall(["协和医院"], audience=CHILD).entities == []

        async def fix(_prompt: str) -> str:
            return '[{"id": 1, "verdict": "fix", "relation": "将复查于"}]'

        await ReviewJob(store, fix)()
        [row] = store.cache.relations.values()
        assert (row.type, row.person, row.visibility) == ("将复查于", "mother", "private")
    finally:
        store.close()


def test_a_postgresql_graph_from_before_people_is_brought_up_to_date(pg_url: str, pg_tenant: str):
    import psycopg

    from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL, graph_schema_name

    store = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    store.commit([Triple("用户", "住在", "杭州")], "cli")
    store.close()
    schema_name = graph_schema_name(pg_tenant)
    with psycopg.connect(pg_url, autocommit=True) as conn:  # the tables as the version before people made them
        conn.execute(f"SET search_path TO {schema_name}")
        conn.execute("ALTER TABLE relations DROP CONSTRAINT relations_marked_key")
        for table in ("relations", "sentences", "memory_blocks", "memory_block_edges"):
            conn.execute(f"ALTER TABLE {table} DROP COLUMN person, DROP COLUMN visibility")
        conn.execute("ALTER TABLE relations ADD UNIQUE (source_id, target_id, type, session)")
    store = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    try:
        assert {(r.person, r.visibility) for r in store.cache.relations.values()} == {("", "private")}
        assert store.claim_for_owner("owner") == 1
        added = store.commit([Triple("owner", "住在", "杭州")], "cli", person="mother")  # no longer a duplicate
        assert added.added == 1
        assert relations(store.recall(["杭州"], audience=Audience("owner"))) == {("owner", "住在", "杭州")}
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()
