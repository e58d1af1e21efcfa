"""Graph analytics that change what memory says: salient index names, merge proposals from
shared neighbourhoods, and the chain of relations between two entities."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.heartbeat import MergeJob
from homeagent_core.memory.indexer import MemoryIndexer
from homeagent_core.memory.social import SocialGraph
from homeagent_core.memory.tools import memory_tools
from homeagent_sdk.errors import ToolError
from homeagent_sdk.types import Triple


@pytest.fixture
def graph(tmp_path: Path, open_graph: Callable[..., GraphStore]) -> GraphStore:
    g = open_graph(tmp_path / "graph.db")
    yield g
    g.close()


def _age(path: Path, name: str, days: float) -> None:
    """Make every relation touching ``name`` ``days`` old, as if written then."""
    when = time.time() - days * 86400
    with sqlite3.connect(path) as db:
        (eid,) = db.execute("SELECT id FROM entities WHERE name = ?", (name,)).fetchone()
        db.execute("UPDATE relations SET updated_at = ? WHERE source_id = ? OR target_id = ?", (when, eid, eid))


async def test_the_index_names_salient_entities_not_the_most_mentioned(tmp_path: Path) -> None:
    path = tmp_path / "graph.db"
    graph = GraphStore(path)
    # 奶茶 was mentioned over and over a year ago; 小李 is at the centre of this month's life
    for _ in range(6):
        graph.commit([Triple("用户", "喝过", "奶茶"), Triple("奶茶", "来自", "楼下的店")])
    graph.commit(
        [
            Triple("用户", "认识", "小李", subject_type="person", object_type="person"),
            Triple("小李", "住在", "杭州"),
            Triple("小李", "喜欢", "羽毛球"),
            Triple("小李", "在", "华为"),
            Triple("小李", "养了", "橘猫"),
        ]
    )
    graph.close()
    _age(path, "奶茶", 365)
    graph = GraphStore(path)
    indexer = MemoryIndexer(graph)
    before = await indexer.build_context("用户最近怎么样")
    assert "高频：奶茶" in before  # mention counts, before any analytics ran
    assert graph.analytics.refresh() > 0
    after = await indexer.build_context("用户最近怎么样")
    assert "高频：小李" in after, after
    graph.close()


async def test_the_merge_heartbeat_proposes_names_that_share_their_neighbours(graph: GraphStore) -> None:
    graph.commit(
        [
            Triple("王小明", "认识", "小李"),
            Triple("王小明", "住在", "杭州"),
            Triple("王小明", "喜欢", "围棋"),
            Triple("小明", "认识", "小李"),
            Triple("小明", "住在", "杭州"),
            Triple("小明", "喜欢", "围棋"),
            Triple("明天", "下雨", "杭州"),  # shares a bigram with 小明, not its neighbourhood
        ]
    )
    sent: list[str] = []

    async def submit(text: str) -> None:
        sent.append(text)

    job = MergeJob(graph, submit)
    assert job._name_candidates() == []  # the names alone are not similar enough (Jaccard 0.5)
    assert await job() == 1
    assert "小明 ↔ 王小明" in sent[0] and "共同关联的实体重合 100%" in sent[0], sent[0]
    assert "明天" not in sent[0]
    assert await job() == 0  # proposed once


async def test_memory_path_answers_how_two_entities_are_connected(graph: GraphStore) -> None:
    graph.commit([Triple("用户", "同事", "老张", sentence_text="老张是我同事")])
    graph.commit([Triple("小李", "是…的表妹", "老张", sentence_text="小李是老张的表妹")])
    graph.commit([Triple("小李", "住在", "成都")])
    graph.commit([Triple("孤岛", "属于", "大海")])
    tools = {t.name: t.handler for t in memory_tools(graph, SocialGraph(graph), None)}
    out = await tools["memory_path"](source="用户", target="成都")
    assert out["hops"] == 3
    assert [(s["source"], s["relation"], s["target"]) for s in out["path"]] == [
        ("用户", "同事", "老张"),
        ("小李", "是…的表妹", "老张"),
        ("小李", "住在", "成都"),
    ]
    assert out["path"][0]["sentence"] == "老张是我同事"
    none = await tools["memory_path"](source="用户", target="大海")
    assert none["path"] == [] and "no chain" in none["note"]
    with pytest.raises(ToolError, match="unknown entity '小丽'"):
        await tools["memory_path"](source="用户", target="小丽")


async def test_person_network_says_how_the_user_knows_someone(graph: GraphStore) -> None:
    social = SocialGraph(graph)
    social.relate("用户", "同事", "老张")
    social.relate("老张", "表哥", "小李")
    tools = {t.name: t.handler for t in memory_tools(graph, social, None)}
    out = await tools["person_network"](name="小李")
    assert [(s["source"], s["target"]) for s in out["how_connected"]] == [("用户", "老张"), ("老张", "小李")]


def test_pagerank_gives_networkx_s_numbers() -> None:
    import networkx as nx
    import numpy as np
    from networkx.algorithms.link_analysis.pagerank_alg import _pagerank_python

    from homeagent_core.memory.graph.analytics import pagerank

    rng = np.random.default_rng(3)
    n = 300  # some nodes stay isolated (dangling), some edges weigh nothing
    a, b = rng.integers(0, n, 600), rng.integers(0, n, 600)
    keep = a != b
    pairs = np.unique(np.stack([np.minimum(a, b)[keep], np.maximum(a, b)[keep]], axis=1), axis=0)
    weight = rng.random(len(pairs))
    weight[:10] = 0.0
    reference: nx.Graph[int] = nx.Graph()
    reference.add_nodes_from(range(n))
    reference.add_weighted_edges_from(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), weight.tolist(), strict=True))
    expected = _pagerank_python(reference, weight="weight")
    got = pagerank(n, pairs[:, 0], pairs[:, 1], weight)
    assert got.sum() == pytest.approx(1.0)
    assert max(abs(expected[i] - got[i]) for i in range(n)) < 1e-6
    assert pagerank(0, pairs[:0, 0], pairs[:0, 1], weight[:0]).size == 0


def test_salience_is_computed_without_scipy(tmp_path: Path) -> None:
    """A default install has no scipy (networkx's PageRank needs it); salience must not."""
    import subprocess
    import sys

    code = f"""
import sys
sys.modules["scipy"] = None  # as in an install without it: importing it raises ImportError
from homeagent_core.memory.graph.store import GraphStore
from homeagent_sdk.types import Triple
graph = GraphStore({str(tmp_path / "graph.db")!r})
graph.commit([Triple("用户", "认识", "小李"), Triple("小李", "住在", "杭州"), Triple("用户", "喜欢", "橘猫")])
print(graph.analytics.refresh(), graph.analytics.salient_names(["杭州", "小李"], 1))
graph.close()
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["4", "['小李']"]
