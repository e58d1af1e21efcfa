"""GraphCache internals against plain reference implementations: bulk networkx build, keyword
seeds and the level-by-level recall walk must give exactly what the simple versions give."""

from __future__ import annotations

import itertools
import tempfile
from collections import Counter
from pathlib import Path

import networkx as nx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from homeagent_core.memory.graph.cache import GraphCache, build_multidigraph
from homeagent_core.memory.graph.model import RecalledEntity, RecalledRelation
from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.keywords import name_terms
from homeagent_sdk.types import Triple

NAMES = ["小王", "王小明", "杭州", "杭州市西湖区", "西湖", "浙江省", "Alice", "Alice Smith", "alice", "green tea"]


def test_bulk_built_multidigraph_equals_one_built_edge_by_edge() -> None:
    edges = [(1, 2, 10), (1, 2, 11), (2, 1, 12), (3, 3, 13), (2, 4, 14), (5, 1, 15)]
    bulk = build_multidigraph([1, 2, 3, 6], edges)
    slow: nx.MultiDiGraph[int] = nx.MultiDiGraph()
    slow.add_nodes_from([1, 2, 3, 6])
    slow.add_edges_from(edges)
    assert sorted(bulk.edges(keys=True)) == sorted(slow.edges(keys=True))
    assert sorted(bulk.in_edges(keys=True)) == sorted(slow.in_edges(keys=True))
    assert set(bulk.nodes) == set(slow.nodes) == {1, 2, 3, 4, 5, 6}
    assert bulk._succ == slow._succ and bulk._pred == slow._pred and bulk._node == slow._node
    # the key dicts are shared between directions, so a later removal keeps both sides in step
    bulk.remove_edge(1, 2, key=10)
    assert not bulk.has_edge(1, 2, 10) and 10 not in bulk._pred[2][1]
    bulk.remove_node(3)
    assert 3 not in bulk and bulk.number_of_edges() == len(edges) - 2


def reference_seeds(cache: GraphCache, keywords: list[str]) -> dict[int, float]:
    """Score every entity against every keyword by brute force (the documented rule)."""
    scores: Counter[int] = Counter()
    for keyword in keywords:
        kterms = name_terms(keyword)
        if not kterms:
            continue
        for eid, row in cache.entities.items():
            nterms = name_terms(row.name)
            shared = len(kterms & nterms)
            if shared and (shared == len(kterms) or shared == len(nterms)):
                scores[eid] += shared / max(len(kterms), len(nterms))
    return dict(scores)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    names=st.lists(st.sampled_from(NAMES), min_size=2, max_size=10, unique=True),
    keywords=st.lists(st.sampled_from([*NAMES, "西湖区", "我们去西湖", "Smith", "小明", "tea"]), max_size=3),
)
def test_keyword_seeds_match_a_brute_force_scan_of_every_name(names: list[str], keywords: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = GraphStore(Path(tmp) / "g.db")
        try:
            store.commit([Triple(a, "相关", b) for a, b in itertools.pairwise(names)])
            expected = reference_seeds(store.cache, keywords)
            got = store.cache.keyword_seeds(keywords, limit=100)
            assert set(got) == set(expected)
            ranked = sorted(expected, key=lambda e: (-expected[e], -store.cache.entities[e].mention_count, e))
            assert got == ranked
        finally:
            store.close()


def reference_recall(
    cache: GraphCache, seeds: list[int], depth: int, max_entities: int, max_relations: int, exclude: set[str]
) -> tuple[list[RecalledEntity], list[tuple[str, str, str, int]]]:
    """Walk the networkx graph to the full depth, rank everything, then cut the lists."""
    graph = cache.to_networkx()
    dist = {s: 0 for s in seeds if s in cache.entities}
    frontier = list(dist)
    rel_dist: dict[int, int] = {}
    for d in range(depth):
        nxt = []
        for node in frontier:
            edges = list(graph.out_edges(node, keys=True)) + list(graph.in_edges(node, keys=True))
            for u, v, key in edges:
                rel_dist.setdefault(key, d)
                other = v if u == node else u
                if other not in dist:
                    dist[other] = d + 1
                    nxt.append(other)
        frontier = nxt
    ents = [cache.entities[e] for e in dist if cache.entities[e].name not in exclude]
    ents.sort(key=lambda e: (dist[e.id], -e.mention_count, -e.updated_at, e.id))
    rels = sorted(
        (cache.relations[r] for r in rel_dist),
        key=lambda r: (rel_dist[r.id], -r.confidence, -r.updated_at, r.id),
    )
    return (
        [RecalledEntity(e.name, e.type, e.mention_count, dist[e.id], e.updated_at) for e in ents[:max_entities]],
        [
            (cache.entities[r.source_id].name, r.type, cache.entities[r.target_id].name, rel_dist[r.id])
            for r in rels[:max_relations]
        ],
    )


edge_lists = st.lists(
    st.tuples(
        st.integers(0, 11), st.integers(0, 11), st.sampled_from(["认识", "住在"]), st.sampled_from([0.3, 0.8, 1.0])
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edges=edge_lists,
    seeds=st.lists(st.integers(0, 11), min_size=1, max_size=3),
    depth=st.integers(0, 3),
    max_entities=st.integers(1, 12),
    max_relations=st.integers(1, 20),
    exclude=st.sets(st.integers(0, 11), max_size=2),
    merge_floor=st.integers(0, 8),
    deleted=st.sets(st.integers(0, 11), max_size=2),
)
def test_level_by_level_recall_equals_a_full_walk_ranked_and_cut(
    edges: list[tuple[int, int, str, float]],
    seeds: list[int],
    depth: int,
    max_entities: int,
    max_relations: int,
    exclude: set[int],
    merge_floor: int,
    deleted: set[int],
) -> None:
    names = [f"实体{i:02d}" for i in range(12)]
    clock = iter(range(1, 10_000)).__next__
    with tempfile.TemporaryDirectory() as tmp:
        store = GraphStore(Path(tmp) / "g.db", clock=lambda: float(clock() // 3))
        store.cache.compact.merge_floor = merge_floor  # mixes CSR, delta and removed edges
        try:
            for a, b, rel, conf in edges:
                store.commit([Triple(names[a], rel, names[b], confidence=conf)])
            for i in deleted:  # removals leave dead CSR entries or shrink the delta
                if names[i] in store.cache.ids_by_name:
                    store.delete_entity(names[i])
            cache = store.cache
            seed_ids = [cache.ids_by_name[names[s]] for s in seeds if names[s] in cache.ids_by_name]
            skip = {names[i] for i in exclude}
            result = cache.recall(
                seed_ids, depth=depth, max_entities=max_entities, max_relations=max_relations, exclude=skip
            )
            want_entities, want_relations = reference_recall(cache, seed_ids, depth, max_entities, max_relations, skip)
            assert result.entities == want_entities
            assert [(r.source, r.type, r.target, r.distance) for r in result.relations] == want_relations
            assert all(isinstance(r, RecalledRelation) for r in result.relations)
        finally:
            store.close()


def test_the_mirror_keeps_no_networkx_graph_and_builds_one_on_demand(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "g.db")
    try:
        store.commit([Triple("小王", "认识", "小李"), Triple("小李", "住在", "杭州")])
        store.commit([Triple("小王", "认识", "小李")], session="s2")
        store.commit([Triple("杭州", "属于", "杭州")])
        assert not any(isinstance(v, nx.Graph) for v in vars(store.cache).values())
        graph = store.cache.to_networkx()
        rows = store.cache.relations.values()
        assert sorted(graph.edges(keys=True)) == sorted((r.source_id, r.target_id, r.id) for r in rows)
        assert set(graph.nodes) == set(store.cache.entities)
        store.purge({"relation_type": "住在"}, "soft")
        assert graph.number_of_edges() == 4  # a copy: later writes do not show in it
        assert store.cache.to_networkx().number_of_edges() == 3
    finally:
        store.close()


def test_a_term_of_one_name_is_held_as_its_id_and_a_shared_term_as_a_set(tmp_path: Path) -> None:
    store = GraphStore(tmp_path / "g.db")
    try:
        store.commit([Triple("王小明", "认识", "杭州"), Triple("杭州", "属于", "浙江省")])
        cache = store.cache
        ming, hz = cache.ids_by_name["王小明"], cache.ids_by_name["杭州"]
        assert cache._postings["王小明"] == ming and cache._by_whole["杭州"] == hz  # no one-member sets
        assert cache._terms_of[ming] == "\t".join(sorted(name_terms("王小明")))  # as entities.terms holds them
        store.commit([Triple("杭州市西湖区", "属于", "杭州")])
        district = cache.ids_by_name["杭州市西湖区"]
        assert cache._postings["杭州"] == {hz, district}
        assert store.cache.keyword_seeds(["杭州"]) == [hz, district]
        store.delete_entity("杭州市西湖区")
        assert cache._postings["杭州"] == hz and "杭州市西湖区" not in cache._by_whole
        assert store.cache.keyword_seeds(["杭州"]) == [hz]
        assert store.cache.snapshot() == store.sql_snapshot()
        store.close()
        store = GraphStore(tmp_path / "g.db")  # the bulk load builds the same shapes
        assert store.cache._postings["杭州"] == store.cache.ids_by_name["杭州"]
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        store.close()
