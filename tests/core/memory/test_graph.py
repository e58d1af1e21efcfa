"""GraphStore: name rules, upserts, merge, purge, edit, delete, media blocks, schema, vectors."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from homeagent_core.memory.graph.store import SCHEMA_VERSION, GraphStore, check_name
from homeagent_sdk.embeddings import EmbedInput
from homeagent_sdk.errors import DataFormatError, MemoryStoreError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Triple

D1, D2 = "1" * 64, "2" * 64


@pytest.fixture
def store(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> GraphStore:
    g = open_graph(tmp_path / "memory" / "graph.db")
    yield g
    g.close()


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "empty"),
        ("猫", "shorter than 2"),
        ("x" * 51, "longer than 50"),
        ("12345", "no letter"),
        ("!!??", "no letter"),
        ("小\x00王", "control characters"),
        ("Al\u200bice", "control characters"),
    ],
)
def test_invalid_entity_names_are_rejected_with_a_reason(name: str, fragment: str) -> None:
    reason = check_name(name)
    assert reason is not None and fragment in reason


@pytest.mark.parametrize("name", ["小王", "Al", "x" * 50, "C-3", "__", "杭州市西湖区"])
def test_valid_entity_names_pass(name: str) -> None:
    assert check_name(name) is None


def test_commit_skips_bad_triples_with_reasons_and_keeps_good_ones(store: GraphStore) -> None:
    result = store.commit(
        [Triple("小王", "住在", "杭州"), Triple("小王", "喜欢", "猫"), Triple("a\x07b", "是", "坏名字")]
    )
    assert result.added == 1
    assert len(result.skipped) == 2
    assert "shorter than 2" in result.skipped[0]
    assert "control characters" in result.skipped[1]
    assert sorted(store.cache.ids_by_name) == ["小王", "杭州"]


def test_repeated_triple_in_same_session_refreshes_instead_of_duplicating(
    tmp_path: Path, open_graph: Callable[..., GraphStore],
) -> None:
    clock = iter([100.0, 200.0, 300.0]).__next__
    store = open_graph(tmp_path / "g.db", clock=clock)
    store.commit([Triple("小王", "住在", "杭州", confidence=0.5)], "s1")
    again = store.commit([Triple("小王", "住在", "杭州", confidence=0.9)], "s1")
    other = store.commit([Triple("小王", "住在", "杭州")], "s2")
    assert (again.added, again.refreshed) == (0, 1)
    assert other.added == 1
    rels = sorted(store.sql_snapshot()["relations"].values())
    assert [(r.session, r.confidence, r.created_at, r.updated_at) for r in rels] == [
        ("s1", 0.9, 100.0, 200.0),
        ("s2", 1.0, 300.0, 300.0),
    ]
    assert store.cache.entity("小王").mention_count == 3
    store.close()


def test_merge_moves_relations_adds_mentions_and_drops_self_loops(store: GraphStore) -> None:
    store.commit(
        [
            Triple("小王", "住在", "杭州"),
            Triple("王小明", "住在", "杭州", confidence=0.4),
            Triple("王小明", "喜欢", "咖啡"),
            Triple("小王", "又名", "王小明"),
        ]
    )
    counts = store.merge("小王", "王小明")
    assert counts == {"moved": 1, "deduplicated": 1, "removed_self_loops": 1}
    assert store.cache.entity("王小明") is None
    assert store.cache.entity("小王").mention_count == 5
    recalled = {(r.source, r.type, r.target) for r in store.recall(["小王"]).relations}
    assert recalled == {("小王", "住在", "杭州"), ("小王", "喜欢", "咖啡")}
    assert store.cache.snapshot() == store.sql_snapshot()


def test_merge_with_an_unknown_entity_names_it(store: GraphStore) -> None:
    store.commit([Triple("小王", "住在", "杭州")])
    with pytest.raises(MemoryStoreError, match=r"unknown entity '小李'.*memory_recall"):
        store.merge("小王", "小李")
    with pytest.raises(MemoryStoreError, match="into itself"):
        store.merge("小王", "小王")


def test_soft_purge_hides_relations_and_hard_purge_deletes_them(store: GraphStore) -> None:
    store.commit([Triple("小王", "住在", "杭州"), Triple("小王", "喜欢", "咖啡"), Triple("Alice", "likes", "tea")])
    assert store.purge({"subject_contains": "小", "relation_type": "住在"}) == 1
    assert store.introspect()["relations_deleted"] == 1
    assert {r.type for r in store.recall(["小王"]).relations} == {"喜欢"}
    assert store.purge({"subject_contains": "ALI"}, "hard") == 1
    assert store.introspect()["relations_deleted"] == 1
    assert store.purge({"relation_type": "从没有"}) == 0


def test_purge_rejects_missing_or_unknown_criteria(store: GraphStore) -> None:
    with pytest.raises(MemoryStoreError, match="at least one criterion"):
        store.purge({})
    with pytest.raises(MemoryStoreError, match="unknown purge criteria \\['colour'\\]"):
        store.purge({"colour": "red"})
    with pytest.raises(MemoryStoreError, match="must be a number"):
        store.purge({"max_confidence": "high"})
    with pytest.raises(MemoryStoreError, match="'soft' or 'hard'"):
        store.purge({"relation_type": "x"}, "gentle")


def test_edit_replaces_a_relation_atomically(store: GraphStore) -> None:
    store.commit([Triple("小王", "住在", "杭州")])
    store.edit("小王", "住在", "杭州", Triple("小王", "住在", "上海"))
    assert {r.target for r in store.recall(["小王"]).relations} == {"上海"}
    with pytest.raises(MemoryStoreError, match="no relation '小王' -住在-> '杭州'"):
        store.edit("小王", "住在", "杭州", Triple("小王", "住在", "北京"))
    with pytest.raises(MemoryStoreError, match="new triple is invalid"):
        store.edit("小王", "住在", "上海", Triple("小王", "住在", "京"))
    # the failed edit rolled back: the old relation is still there
    assert {r.target for r in store.recall(["小王"]).relations} == {"上海"}


def test_delete_entity_removes_its_relations(store: GraphStore) -> None:
    store.commit([Triple("小王", "住在", "杭州"), Triple("小李", "住在", "杭州")])
    assert store.delete_entity("杭州") == 2
    assert store.cache.stats()["relations"] == 0
    with pytest.raises(MemoryStoreError, match="unknown entity '杭州'"):
        store.delete_entity("杭州")


def test_media_blocks_hang_off_sentences_and_merge(store: GraphStore) -> None:
    store.commit([Triple("小王", "拍了", "西湖", media_digests=[D1])])
    store.commit([Triple("小王", "拍了", "雷峰塔", sentence_text="小王拍了雷峰塔", media_digests=[D2])])
    rels = {r.target: r for r in store.recall(["小王"]).relations}
    assert rels["西湖"].sentence == "小王拍了西湖。"  # synthesised, never a marker string
    assert rels["西湖"].media_digests == [D1]
    assert store.merge_blocks(D1, D2) == 1
    rels = {r.target: r for r in store.recall(["小王"]).relations}
    assert rels["雷峰塔"].media_digests == [D1]
    with pytest.raises(MemoryStoreError, match="unknown media block"):
        store.merge_blocks(D1, D2)
    assert store.cache.snapshot() == store.sql_snapshot()


def test_a_database_from_a_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    GraphStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(DataFormatError, match=r"newer HomeAgent.*upgrade HomeAgent or restore a backup"):
        GraphStore(path)


def test_a_file_that_is_not_a_database_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(MemoryStoreError, match="not a HomeAgent graph database"):
        GraphStore(path)


def test_data_survives_reopen_with_wal_and_foreign_keys(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    store = GraphStore(path)
    store.commit([Triple("小王", "住在", "杭州")])
    store.close()
    store = GraphStore(path)
    assert store.read(lambda c: c.execute("PRAGMA journal_mode").fetchone()[0]) == "wal"
    assert store.read(lambda c: c.execute("PRAGMA foreign_keys").fetchone()[0]) == 1
    assert [r.target for r in store.recall(["小王"]).relations] == ["杭州"]
    store.close()


def test_recall_walks_two_hops_and_ranks_by_distance_then_mentions(store: GraphStore) -> None:
    store.commit(
        [
            Triple("小王", "住在", "杭州"),
            Triple("小王", "认识", "小李"),
            Triple("小李", "认识", "小李"),  # self loop allowed
            Triple("杭州", "属于", "浙江省"),
            Triple("浙江省", "属于", "中国"),
            Triple("咖啡馆", "位于", "杭州"),
        ]
    )
    result = store.recall(["小王"], depth=2)
    names = [e.name for e in result.entities]
    assert names[0] == "小王"
    assert set(names) == {"小王", "杭州", "小李", "浙江省", "咖啡馆"}
    assert "中国" not in names
    assert {e.name: e.distance for e in result.entities}["浙江省"] == 2
    assert [e.name for e in result.entities if e.distance == 1] == ["杭州", "小李"]
    assert store.recall(["小王"], depth=1).entities[-1].distance == 1


def test_keyword_seeds_match_names_inside_keywords_and_keywords_inside_names(
    store: GraphStore,
) -> None:
    store.commit([Triple("杭州市西湖区", "有", "断桥"), Triple("Alice Smith", "likes", "green tea")])
    assert store.recall(["西湖"]).seeds == ["杭州市西湖区"]
    assert store.recall(["我们去断桥散步"]).seeds == ["断桥"]
    assert store.recall(["alice"]).seeds == ["Alice Smith"]
    assert store.recall(["上海"]).entities == []


async def test_entity_vectors_follow_the_embedder_and_reembed_resumes(
    tmp_path: Path, open_graph: Callable[..., GraphStore]
) -> None:
    small, big = FakeEmbedder(16), FakeEmbedder(32)
    store = open_graph(tmp_path / "g.db", embedder=small)
    await store.acommit([Triple("小王", "住在", "杭州"), Triple("Alice", "likes", "green tea")])
    vec, fp = await store.embed_query("杭州")
    hits = store.cache.vector_seeds(vec, fp, 1)
    assert store.cache.entities[hits[0][0]].name == "杭州"
    # another space: nothing matches until re-embedded, and never across dimensions
    vec32, fp32 = (await big.embed_texts(["杭州"]))[0], big.info.fingerprint
    assert store.cache.vector_seeds(vec32, fp32, 3) == []
    counts = await store.reembed_stale(big, batch_size=2)
    assert counts["entities"] == 4
    assert [len(c) for c in big.calls[1:]] == [2, 2]  # batches, each written back
    assert store.cache.entities[store.cache.vector_seeds(vec32, fp32, 1)[0][0]].name == "杭州"
    assert (await store.reembed_stale(big))["entities"] == 0
    row = store.sql_snapshot()["entities"][1]
    assert row.vec_model == fp32 and len(np.frombuffer(row.vector, np.float32)) == 32
    store.close()


async def test_media_blocks_are_embedded_only_by_an_image_capable_space(
    tmp_path: Path, open_graph: Callable[..., GraphStore]
) -> None:
    store = open_graph(tmp_path / "g.db")
    store.commit([Triple("小王", "拍了", "西湖", media_digests=[D1])])
    media = {D1: (b"\x89PNG fake bytes", "image/png")}
    text_only = await store.reembed_stale(FakeEmbedder(16), load_media=media.get)
    assert text_only["blocks"] == 0 and text_only["blocks_skipped"] == 1
    clip = FakeEmbedder(16, image=True, name="clip")
    assert (await store.reembed_stale(clip, load_media=media.get))["blocks"] == 1
    query = (await clip.embed([EmbedInput.of_image(b"\x89PNG fake bytes")]))[0]
    assert store.cache.search_blocks(query, clip.info.fingerprint, 1)[0][0] == D1
    store.close()


def test_a_commit_with_a_batch_id_applies_once_and_old_ids_are_pruned(
    tmp_path: Path, open_graph: Callable[..., GraphStore]
) -> None:
    now = [1000.0]
    store = open_graph(tmp_path / "g.db", clock=lambda: now[0])
    first = store.commit([Triple("小王", "住在", "杭州")], "s", batch_id="distill:1")
    again = store.commit([Triple("小王", "住在", "杭州")], "s", batch_id="distill:1")
    assert (first.added, first.duplicate) == (1, False)
    assert (again.added, again.refreshed, again.duplicate) == (0, 0, True)
    assert again.to_dict()["duplicate"] is True
    assert store.cache.entity("小王").mention_count == 1
    now[0] = 1050.0
    assert store.prune_batches(100.0) == 0  # recorded 50 s ago: kept
    now[0] = 1200.0
    assert store.prune_batches(100.0) == 1
    assert not store.commit([Triple("小王", "住在", "杭州")], "s", batch_id="distill:1").duplicate
    store.close()


def test_a_version_1_database_is_migrated_and_its_keyword_terms_filled(tmp_path: Path) -> None:
    from homeagent_core.memory.graph.schema import MIGRATIONS

    path = tmp_path / "graph.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (1)")
        conn.execute("INSERT INTO entities (id, name, created_at, updated_at) VALUES (1, '杭州市西湖区', 0, 0)")
        conn.execute("INSERT INTO entities (id, name, created_at, updated_at) VALUES (2, '断桥', 0, 0)")
        conn.execute(
            "INSERT INTO relations (source_id, target_id, type, created_at, updated_at) VALUES (1, 2, '有', 0, 0)"
        )
    conn.close()
    store = GraphStore(path)
    assert store.recall(["西湖"]).seeds == ["杭州市西湖区"]
    assert [r.target for r in store.recall(["西湖"]).relations] == ["断桥"]
    terms = dict(store.read(lambda c: c.execute("SELECT name, terms FROM entities").fetchall()))
    assert set(terms["断桥"].split("\t")) == {"断桥"}
    assert store.cache.snapshot() == store.sql_snapshot()
    store.close()


def test_keyword_terms_from_another_tokenizer_are_recomputed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    store = GraphStore(path)
    store.commit([Triple("杭州市西湖区", "有", "断桥")])
    store.close()
    with sqlite3.connect(path) as conn:  # as if an older tokenizer had split the names differently
        conn.execute("UPDATE entities SET terms = 'stale'")
        conn.execute("UPDATE graph_meta SET value = 'older' WHERE key = 'terms_fingerprint'")
    conn.close()
    store = GraphStore(path)
    assert store.recall(["西湖"]).seeds == ["杭州市西湖区"]
    assert store.recall(["stale"]).seeds == []
    assert store.cache.snapshot() == store.sql_snapshot()  # snapshot checks terms == name_terms(name)
    store.close()
