"""A graph commit on PostgreSQL: a fixed number of statements, and the same rows and results as on SQLite."""

from __future__ import annotations

import collections
import tempfile
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import pq

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL
from homeagent_sdk.types import Triple


def _statements(store: GraphStore, sql: PgGraphSQL, triples: list[Triple], session: str, folder: Path) -> int:
    """How many statements one commit sends to the server (read from libpq's protocol trace)."""
    conn = sql._connect()
    path = folder / f"trace-{session}.txt"
    with path.open("w") as trace:
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            store.commit(triples, session)
        finally:
            conn.pgconn.untrace()
    messages = [line.split() for line in path.read_text().splitlines()]
    sent = collections.Counter(m[2] for m in messages if len(m) > 2 and m[0] == "F")  # F: from the client
    assert sent["Sync"] or sent["Query"], "the protocol trace recorded the commit"
    return sent["Execute"] + sent["Query"]


def test_a_commit_sends_the_same_few_statements_whatever_its_number_of_triples(
    pg_url: str, pg_tenant: str, tmp_path: Path
) -> None:
    sql = PgGraphSQL(pg_url, tenant=pg_tenant)
    store = GraphStore("", sql=sql)
    try:
        store.commit([Triple("Alice", "likes", "tea")])
        counts = {}
        for n in (1, 8, 40):
            batch = [Triple(f"Person {n} {i}", "likes", f"thing {i}", sentence_text=f"p{i} likes t{i}.")
                     for i in range(n)]
            counts[n] = _statements(store, sql, batch, f"s{n}", tmp_path)
        assert counts[1] == counts[8] == counts[40] <= 12, counts
        assert len(store.cache.relations) == 1 + 1 + 8 + 40
    finally:
        store.close()


NAMES = ["小王", "杭州", "Alice", "Bob", "x", "Carol"]
DIGESTS = ["a" * 64, "b" * 64, "short"]
triples = st.builds(
    Triple,
    subject=st.sampled_from(NAMES),
    relation=st.sampled_from(["住在", "喜欢", "likes", ""]),
    object=st.sampled_from(NAMES),
    confidence=st.sampled_from([0.2, 0.9, 1.0, 1.5]),
    subject_type=st.sampled_from(["", "person", "Concept", " place "]),
    object_type=st.sampled_from(["", "city"]),
    sentence_text=st.sampled_from(["", "小王住在杭州", "Alice likes tea", "Alice likes tea"]),
    media_digests=st.lists(st.sampled_from(DIGESTS), max_size=2),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.lists(triples, min_size=1, max_size=6), st.sampled_from(["", "s1"])),
        st.tuples(st.just("purge"), st.sampled_from(["住在", "likes"])),
    ),
    min_size=1,
    max_size=8,
)


def _by_name(store: GraphStore) -> dict[str, Any]:
    """Every row with ids replaced by names (the two databases number rows differently)."""
    rows = store.sql_snapshot()
    names = {eid: e.name for eid, e in rows["entities"].items()}

    def everything(c: Any) -> dict[str, Any]:
        sentences = dict(c.execute("SELECT id, text FROM sentences").fetchall())
        blocks = dict(c.execute("SELECT id, digest FROM memory_blocks").fetchall())
        return {
            "entities": sorted(c.execute("SELECT name, type, mention_count, terms FROM entities").fetchall()),
            "relations": sorted(
                (names[s], names[t], rtype, conf, session, sentences.get(snt), status)
                for s, t, rtype, conf, session, snt, status in c.execute(
                    "SELECT source_id, target_id, type, confidence, session, sentence_id, status FROM relations"
                ).fetchall()
            ),
            "sentences": sorted(c.execute("SELECT text, session FROM sentences").fetchall()),
            "blocks": sorted(c.execute("SELECT digest, mime FROM memory_blocks").fetchall()),
            "edges": sorted(
                (sentences[s], blocks[b], etype)
                for s, b, etype in c.execute("SELECT sentence_id, block_id, type FROM memory_block_edges").fetchall()
            ),
        }

    return store.read(everything)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
def test_commits_leave_the_same_rows_and_results_on_postgresql_as_on_sqlite(
    pg_url: str, sequence: list[tuple[Any, ...]]
) -> None:
    clock = iter(range(1, 10_000))
    with tempfile.TemporaryDirectory() as tmp:
        lite = GraphStore(Path(tmp) / "graph.db", clock=lambda: float(next(clock)))
        pg = GraphStore("", sql=PgGraphSQL(pg_url, tenant="same-" + uuid.uuid4().hex[:12]),
                        clock=lambda: float(next(clock)))
        try:
            for step in sequence:
                if step[0] == "commit":
                    mimes = {"a" * 64: "image/png"}
                    one = lite.commit(step[1], step[2], mimes=mimes)
                    two = pg.commit(step[1], step[2], mimes=mimes)
                    assert one.to_dict() == two.to_dict(), step
                    assert len(one.relation_ids) == len(two.relation_ids)
                    assert len(one.entity_ids) == len(two.entity_ids)
                    assert len(one.sentence_ids) == len(two.sentence_ids)
                else:
                    assert lite.purge({"relation_type": step[1]}, "soft") == pg.purge(
                        {"relation_type": step[1]}, "soft"
                    )
            assert _by_name(lite) == _by_name(pg)
            assert pg.cache.snapshot() == pg.sql_snapshot()
        finally:
            lite.close()
            pg.close()
