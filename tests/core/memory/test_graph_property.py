"""Property test: the mirror always equals what the database holds (SQLite, PostgreSQL), also after a reopen.

``GraphCache.snapshot`` also checks every derived structure (compact adjacency in both
directions, rank orders, recalled rows kept for later recalls, keyword postings and the terms
stored per entity, vector indexes) against the rows, so each comparison below covers them;
after the reopen the keyword terms come from the ``entities.terms`` column instead of the
tokenizer, and the compact form from the mirror file the close wrote.

Writes carry a person and a visibility (private, household, a group), edits and purges run
as an audience, and the rows of before there were people are claimed for the owner; the
snapshots compare both marks of every row, and every audience's recall, neighbours and
networkx view hold only what it may see.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.social import SocialGraph
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import EVERYONE, Audience

MARKS = [("", "private"), ("mother", "private"), ("child", "private"), ("child", "household"),
         ("guest", "group:qq:group:1")]
AUDIENCES = [Audience("mother"), Audience("child"), Audience("guest", group="qq:group:1"), Audience(), EVERYONE]

VALID = ["小王", "杭州", "浙江省", "Alice", "Bob"]
# Valid names dominate so most operations do something; a few break the name rules.
NAMES = VALID * 4 + ["x", "a\x00b", "42"]
RELATIONS = ["住在", "喜欢", "认识"] * 3 + [""]
SESSIONS = ["", "s1"]
DIGESTS = ["a" * 64, "b" * 64, "short"]

names = st.sampled_from(NAMES)
triples = st.builds(
    Triple,
    subject=names,
    relation=st.sampled_from(RELATIONS),
    object=names,
    confidence=st.sampled_from([0.2, 0.9, 1.0, 1.0, 1.0, 1.5]),
    subject_type=st.sampled_from(["", "person"]),
    sentence_text=st.sampled_from(["", "小王住在杭州", "Alice likes coffee"]),
    media_digests=st.lists(st.sampled_from(DIGESTS), max_size=2),
)
text_criteria = st.sampled_from(
    [
        ("subject_contains", "小"),
        ("subject_contains", "al"),
        ("target_contains", "杭州"),
        ("relation_type", "住在"),
        ("relation_type", "喜欢"),
        ("session", "s1"),
        ("session", ""),
        ("max_confidence", 0.5),
        ("before", 0.0),
        ("subject_contains", ""),
    ]
)
criteria = st.lists(text_criteria, min_size=0, max_size=2).map(dict)
modes = st.sampled_from(["soft", "hard", "soft", "hard", "bogus"])
pick = st.integers(min_value=0, max_value=50)
marks = st.sampled_from(MARKS)
audiences = st.sampled_from(AUDIENCES)
ops = st.one_of(
    st.tuples(st.just("commit"), st.lists(triples, min_size=1, max_size=4), st.sampled_from(SESSIONS), marks),
    st.tuples(st.just("commit"), st.lists(triples, min_size=1, max_size=4), st.sampled_from(SESSIONS), marks),
    st.tuples(st.just("purge_as"), criteria, st.sampled_from(["soft", "hard"]), audiences),
    st.tuples(st.just("edit_as"), pick, triples, audiences),
    st.tuples(st.just("claim"), st.sampled_from(["owner", "小王"])),
    st.tuples(st.just("merge"), pick, pick),
    st.tuples(st.just("merge"), names, names),
    st.tuples(st.just("purge"), criteria, modes),
    st.tuples(st.just("purge_existing"), pick, modes),
    st.tuples(st.just("edit"), pick, triples),
    st.tuples(st.just("edit_unknown"), names, triples),
    st.tuples(st.just("delete"), pick),
    st.tuples(st.just("delete"), names),
    st.tuples(st.just("merge_blocks"), st.sampled_from(DIGESTS), st.sampled_from(DIGESTS)),
    st.tuples(st.just("reembed"), st.sampled_from([16, 32])),
    st.tuples(st.just("trait"), st.sampled_from(["小李", "Carol", "小王"]), st.sampled_from(["age", "city"])),
)


def existing_name(store: GraphStore, choice: int | str) -> str:
    if isinstance(choice, str):
        return choice
    known = sorted(store.cache.ids_by_name)
    return known[choice % len(known)] if known else "nobody"


def apply(store: GraphStore, op: tuple[Any, ...]) -> None:
    kind = op[0]
    try:
        if kind == "commit":
            store.commit(op[1], op[2], person=op[3][0], visibility=op[3][1])
        elif kind == "purge_as":
            store.purge(op[1], op[2], audience=op[3])
        elif kind == "edit_as":
            rels = sorted(store.cache.relations.values())
            if rels:
                old = rels[op[1] % len(rels)]
                src = store.cache.entities[old.source_id].name
                dst = store.cache.entities[old.target_id].name
                store.edit(src, old.type, dst, op[2], audience=op[3])
        elif kind == "claim":
            store.claim_for_owner(op[1], alias="小王")
        elif kind == "merge":
            store.merge(existing_name(store, op[1]), existing_name(store, op[2]))
        elif kind == "purge":
            store.purge(op[1], op[2])
        elif kind == "purge_existing":
            rels = sorted(store.cache.relations.values())
            if rels:
                rel = rels[op[1] % len(rels)]
                name = store.cache.entities[rel.source_id].name
                store.purge({"subject_contains": name, "relation_type": rel.type}, op[2])
        elif kind == "edit":
            rels = sorted(store.cache.relations.values())
            if rels:
                old = rels[op[1] % len(rels)]
                src = store.cache.entities[old.source_id].name
                dst = store.cache.entities[old.target_id].name
                store.edit(src, old.type, dst, op[2])
        elif kind == "edit_unknown":
            store.edit(op[1], "从未有过", op[1], op[2])
        elif kind == "delete":
            store.delete_entity(existing_name(store, op[1]))
        elif kind == "merge_blocks":
            store.merge_blocks(op[1], op[2])
        elif kind == "reembed":
            asyncio.run(store.reembed_stale(FakeEmbedder(op[1]), batch_size=3))
        elif kind == "trait":  # the social layer writes entities through its own SQL
            SocialGraph(store).set_trait(op[1], op[2], "x")
    except MemoryStoreError:
        pass  # refused operations must leave both sides untouched, checked below


def recall_from_each(store: GraphStore) -> None:
    """Recall from every entity, so rows are kept (per id and distance) that later writes must drop.

    Also as each audience: what it recalls, its neighbours and its networkx view touch only
    relations it may see.
    """
    cache = store.cache
    for eid in list(cache.entities):
        cache.recall([eid], depth=3)
    for audience in AUDIENCES[:-1]:
        graph = cache.to_networkx(audience)
        assert all(audience.sees(d["person"], d["visibility"]) for _u, _v, d in graph.edges(data=True))
        visible = {cache.entities[n].name for n in graph.nodes}
        for eid in list(cache.entities):
            found = cache.recall([eid], depth=3, audience=audience)
            assert {e.name for e in found.entities} <= visible
            for other in cache.neighbours(eid, audience):
                assert graph.has_edge(eid, other) or graph.has_edge(other, eid)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=5, max_size=30), st.integers(0, 6))
def test_mirror_equals_sqlite_after_any_operation_sequence_and_after_reopen(
    sequence: list[tuple[Any, ...]],
    merge_floor: int,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.db"
        store = GraphStore(path, save_mirror_from=0)  # the close writes the mirror file, the reopen reads it
        # a low floor merges the write delta into the CSR arrays every few changes, so the
        # sequences cover edges in the CSR, in the delta, and removed from the CSR since a merge
        store.cache.compact.merge_floor = merge_floor
        try:
            for op in sequence:
                apply(store, op)
                assert store.cache.snapshot() == store.sql_snapshot(), op
                recall_from_each(store)  # rows kept for later recalls: the next snapshot checks them
            before = store.cache.snapshot()
            stored = dict(store.read(lambda c: c.execute("SELECT name, terms FROM entities").fetchall()))
            assert all(terms for terms in stored.values()), "every entity row carries its keyword terms"
        finally:
            store.close()
        reopened = GraphStore(path, save_mirror_from=0)
        try:
            assert reopened.mirror_loaded_from == "file", reopened.cache.file_refused
            assert reopened.cache.snapshot() == before
        finally:
            reopened.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=5, max_size=30))
def test_the_mirror_equals_the_postgresql_rows_after_any_operations_and_on_another_daemon(
    pg_url: str, sequence: list[tuple[Any, ...]]
) -> None:
    from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL

    tenant = "prop-" + uuid.uuid4().hex[:12]
    store = GraphStore("", sql=PgGraphSQL(pg_url, tenant=tenant))
    try:
        for op in sequence:
            apply(store, op)
            assert store.cache.snapshot() == store.sql_snapshot(), op
        rows = store.sql_snapshot()
        other = GraphStore("", sql=PgGraphSQL(pg_url, tenant=tenant))  # a second daemon loads the same graph
        try:
            assert other.cache.snapshot() == rows
        finally:
            other.close()
    finally:
        store.close()
