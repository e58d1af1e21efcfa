"""MemoryIndexer: the 【记忆索引】 line, vector seeds and mark_recalled."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from homeagent_core.memory.graph.cache import RecalledEntity, RecallResult
from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.indexer import MemoryIndexer, format_index
from homeagent_core.memory.keywords import extract_keywords
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Triple


@pytest.fixture
def graph(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> GraphStore:
    g = open_graph(tmp_path / "graph.db")
    g.commit(
        [
            Triple("小王", "住在", "杭州", subject_type="person"),
            Triple("小王", "喜欢", "咖啡"),
            Triple("小王", "养了", "猫咪"),
            Triple("杭州", "属于", "浙江省", object_type="Place"),
            Triple("杭州", "有", "西湖"),
            Triple("杭州", "有", "灵隐寺"),
        ]
    )
    yield g
    g.close()


def test_keywords_are_at_most_five_without_stop_words() -> None:
    words = extract_keywords("你还记得小王住在杭州的哪里吗？他喜欢咖啡、猫咪和西湖，还有灵隐寺")
    assert len(words) == 5
    assert "小王" in words and "杭州" in words
    assert not {"你", "还记得", "的", "吗", "哪里"} & set(words)
    assert extract_keywords("的了吗") == []


def test_format_matches_the_original_line() -> None:
    result = RecallResult(
        entities=[
            RecalledEntity("小王", "person", 3, 0, 0.0),
            RecalledEntity("杭州", "Concept", 5, 1, 0.0),
            RecalledEntity("咖啡", "Concept", 1, 1, 0.0),
        ]
    )
    assert format_index(result) == (
        "【记忆索引】 关联 3 个记忆实体，高频：杭州、小王、咖啡 索引: 小王(person), 杭州, 咖啡"
        " | 需更多细节请用 memory_recall 查询"
    )
    assert format_index(RecallResult()) == ""


async def test_build_context_lists_at_most_five_names_with_an_ellipsis(graph: GraphStore) -> None:
    line = await MemoryIndexer(graph).build_context("小王最近怎么样")
    assert line.startswith("【记忆索引】 关联 7 个记忆实体，高频：")
    index = line.split(" 索引: ")[1].split(" | ")[0]
    assert index.startswith("小王(person), ")
    assert index.endswith("…") and index.count(", ") == 4
    assert line.endswith(" | 需更多细节请用 memory_recall 查询")


async def test_unknown_topics_inject_nothing(graph: GraphStore) -> None:
    assert await MemoryIndexer(graph).build_context("今天天气不错") == ""
    assert await MemoryIndexer(graph).build_context("   ") == ""


async def test_mark_recalled_keeps_fetched_entities_out_of_the_next_injection_only(
    graph: GraphStore,
) -> None:
    indexer = MemoryIndexer(graph)
    indexer.mark_recalled(["小王", "杭州"])
    line = await indexer.build_context("小王最近怎么样")
    assert "小王" not in line.split(" 索引: ")[1] and "杭州" not in line
    assert "关联 5 个记忆实体" in line
    assert "小王(person)" in await indexer.build_context("小王最近怎么样")


async def test_vector_seeds_find_entities_keywords_miss(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> None:
    graph = open_graph(tmp_path / "g.db", embedder=FakeEmbedder(64))
    await graph.acommit([Triple("寺庙灵隐", "位于", "山林深处")])
    query = "灵隐寺庙"
    assert graph.recall(extract_keywords(query)).entities == []  # no keyword overlap
    line = await MemoryIndexer(graph).build_context(query)
    assert "寺庙灵隐" in line and "山林深处" in line
    assert await MemoryIndexer(open_graph(tmp_path / "plain.db")).build_context(query) == ""
    graph.close()


async def test_full_width_and_mixed_case_queries_seed_the_entity_as_documents_would_find_it(
    tmp_path: Path, open_graph: Callable[..., GraphStore]
) -> None:
    graph = open_graph(tmp_path / "g.db")
    await graph.acommit([Triple("GPT4", "是", "语言模型"), Triple("小王", "用", "GPT4")])
    assert extract_keywords("ＧＰＴ４是什么？") == ["gpt4"]
    line = await MemoryIndexer(graph).build_context("ＧＰＴ４是什么？")
    assert "GPT4" in line and "语言模型" in line
    graph.close()


async def test_a_traditional_query_seeds_a_simplified_entity(
    tmp_path: Path, open_graph: Callable[..., GraphStore]
) -> None:
    pytest.importorskip("opencc")
    graph = open_graph(tmp_path / "g.db")
    await graph.acommit([Triple("小王", "住在", "台湾", subject_type="person")])
    line = await MemoryIndexer(graph).build_context("小王還住在臺灣嗎")
    assert "台湾" in line
    graph.close()


def test_the_document_stores_stop_words_are_never_seeds() -> None:
    from homeagent_core.lexical.terms import STOP_WORDS as DOCUMENT_STOP_WORDS

    assert not set(extract_keywords("是不是 有没有 那么 这么 还是 就是 已经 都是")) & DOCUMENT_STOP_WORDS
