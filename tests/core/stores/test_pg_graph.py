"""The graph store on PostgreSQL: two daemons follow each other, tenants stay apart, schema checks."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from homeagent_core.memory.graph.store import SCHEMA_VERSION, GraphStore
from homeagent_core.memory.social import SocialGraph
from homeagent_core.memory.stores.postgresql import graph as pg_graph
from homeagent_core.memory.stores.postgresql.database import PgDatabase
from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL, graph_schema_name
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Triple


def _until(check: Callable[[], bool], *, within: float = 20.0) -> None:
    """Wait (bounded) until ``check()`` holds; fail naming the bound otherwise."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"condition not reached within {within}s"
        time.sleep(0.02)


def _targets(store: GraphStore, keyword: str) -> list[str]:
    return sorted(r.target for r in store.recall([keyword]).relations)


def test_a_fact_committed_on_one_daemon_is_recalled_on_the_other(pg_url: str, pg_tenant: str) -> None:
    a = GraphStore("", sql=PgGraphSQL(PgDatabase(pg_url), tenant=pg_tenant))
    b = GraphStore("", sql=PgGraphSQL(PgDatabase(pg_url), tenant=pg_tenant))
    try:
        a.commit([Triple("Melanie", "likes", "pottery", sentence_text="Melanie likes pottery.")], "s1")
        _until(lambda: _targets(b, "Melanie") == ["pottery"])
        recalled = b.recall(["Melanie"]).relations[0]
        assert recalled.sentence == "Melanie likes pottery."
        # B's own write lands on A too, and B's mirror keeps A's fact
        b.commit([Triple("Melanie", "paints", "sunsets")], "s2")
        _until(lambda: _targets(a, "Melanie") == ["pottery", "sunsets"])
        assert _targets(b, "Melanie") == ["pottery", "sunsets"]
        # removals follow as well
        assert b.purge({"relation_type": "likes"}, "hard") == 1
        _until(lambda: _targets(a, "Melanie") == ["sunsets"])
        assert a.cache.snapshot() == b.cache.snapshot() == a.sql_snapshot()
    finally:
        a.close()
        b.close()


def test_a_postgresql_graph_keeps_no_mirror_file(pg_url: str, pg_tenant: str, tmp_path: Path) -> None:
    a = GraphStore(tmp_path / "ignored.db", sql=PgGraphSQL(PgDatabase(pg_url), tenant=pg_tenant), save_mirror_from=0)
    try:
        a.commit([Triple("Melanie", "likes", "pottery")], "s1")
        assert a.save_mirror() is False
    finally:
        a.close()
    b = GraphStore("", sql=PgGraphSQL(PgDatabase(pg_url), tenant=pg_tenant), save_mirror_from=0)
    try:
        assert b.mirror_loaded_from == "database"
        assert b.cache.snapshot() == b.sql_snapshot()
        assert _targets(b, "Melanie") == ["pottery"]
    finally:
        b.close()
    assert list(tmp_path.iterdir()) == []


def test_tenants_on_one_server_see_only_their_own_graph(pg_url: str, pg_tenant: str) -> None:
    db = PgDatabase(pg_url)
    one = GraphStore("", sql=PgGraphSQL(db, tenant=pg_tenant + "-one"))
    two = GraphStore("", sql=PgGraphSQL(db, tenant=pg_tenant + "-two"))
    try:
        one.commit([Triple("小王", "住在", "杭州")])
        two.commit([Triple("小王", "住在", "上海")])
        assert _targets(one, "小王") == ["杭州"]
        assert _targets(two, "小王") == ["上海"]
        assert one.introspect()["entities"] == two.introspect()["entities"] == 2
        with psycopg.connect(pg_url) as raw:
            schema = graph_schema_name(pg_tenant + "-one")
            (tenant,) = raw.execute(f"SELECT DISTINCT tenant FROM {schema}.relations").fetchone()
        assert tenant == pg_tenant + "-one"
    finally:
        one.close()
        two.close()
        db.close()


def test_the_graph_survives_a_reopen_and_a_newer_schema_is_refused(pg_url: str, pg_tenant: str) -> None:
    store = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    SocialGraph(store).set_trait("小王", "年龄", "26")
    store.commit([Triple("小王", "住在", "杭州")])
    store.close()
    store = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    assert _targets(store, "小王") == ["杭州"]
    assert SocialGraph(store).traits("小王") == {"年龄": "26"}
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute(f"INSERT INTO {graph_schema_name(pg_tenant)}.schema_version (version) VALUES (%s)",
                    (SCHEMA_VERSION + 1,))
    with pytest.raises(MemoryStoreError, match=r"schema version \d+, written by a newer HomeAgent"):
        PgGraphSQL(pg_url, tenant=pg_tenant)


def test_sqlite_only_sql_is_refused_by_name_and_a_failed_update_rolls_back_alone(pg_url: str, pg_tenant: str) -> None:
    store = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    try:
        with pytest.raises(MemoryStoreError, match=r"SQLite-only SQL.*PRAGMA"):
            store.read(lambda c: c.execute("PRAGMA journal_mode").fetchone())
        with pytest.raises(AttributeError, match=r"executemany\(\) only, not sqlite3's 'create_function'"):
            store.read(lambda c: c.create_function("f", 1, len))
        with pytest.raises(MemoryStoreError, match=r"SQLite-only SQL.*INSERT OR IGNORE"):
            store.write(lambda c, _ch: c.execute("INSERT OR IGNORE INTO graph_meta (key, value) VALUES ('a', 'b')"))
        store.commit([Triple("小王", "住在", "杭州"), Triple("小王", "去过", "杭州")])

        def clash(conn: sqlite3.Connection, ch: object) -> str:
            try:  # the review heartbeat renames a relation this way and drops it when the name is taken
                conn.execute("UPDATE relations SET type = '住在' WHERE type = '去过'")
            except sqlite3.IntegrityError:
                conn.execute("DELETE FROM relations WHERE type = '去过'")
                return "dropped"
            return "renamed"

        assert store.write(clash) == "dropped"
        assert store.read(lambda c: c.execute("SELECT type FROM relations").fetchall()) == [("住在",)]
    finally:
        store.close()



_WRITER = textwrap.dedent(
    """
    import sys
    from homeagent_core.memory.graph.store import GraphStore
    from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL
    from homeagent_sdk.types import Triple

    store = GraphStore("", sql=PgGraphSQL(sys.argv[1], tenant=sys.argv[2]))
    batch = 0
    while True:
        batch += 1
        store.commit([Triple(f"person {i}", "visited", f"place {i % 37}", sentence_text=f"batch {batch} line {i}")
                      for i in range(300)], f"batch{batch}")
    """
)


def test_a_daemon_killed_mid_commit_leaves_all_or_nothing(pg_url: str, pg_tenant: str, tmp_path) -> None:
    b = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    writer = subprocess.Popen([sys.executable, str(script), pg_url, pg_tenant], env=env)
    try:
        _until(lambda: len(b.cache.snapshot()["relations"]) >= 300, within=60)
        with psycopg.connect(pg_url, autocommit=True) as conn:

            def writing() -> bool:
                row = conn.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid"
                    " WHERE s.pid <> pg_backend_pid() AND s.datname = current_database()"
                    " AND l.locktype = 'transactionid' AND s.xact_start IS NOT NULL"
                ).fetchone()
                return bool(row and row[0])

            _until(writing, within=60)
            os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.wait(timeout=30)
    b.catch_up()
    fresh = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    with psycopg.connect(pg_url) as conn:
        per_batch = conn.execute(
            f"SELECT session, count(*) FROM {graph_schema_name(pg_tenant)}.relations GROUP BY 1"
        ).fetchall()
    assert per_batch and all(count == 300 for _, count in per_batch)
    assert b.cache.snapshot() == fresh.cache.snapshot() == fresh.sql_snapshot()
    assert len(fresh.cache.snapshot()["relations"]) == 300 * len(per_batch)
    fresh.close()
    b.close()


def test_a_daemon_behind_the_pruned_change_log_loads_its_mirror_again(
    pg_url: str, pg_tenant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_graph, "KEEP_CHANGES", 20)
    monkeypatch.setattr(pg_graph, "PRUNE_STEP", 10)
    a = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    with monkeypatch.context() as m:  # b hears nothing: it falls behind
        m.setattr(PgGraphSQL, "follow", lambda self, on_change: None)
        b = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    try:
        a.commit([Triple("Alice", "knows", "Bob")])
        b.catch_up()
        assert _targets(b, "Alice") == ["Bob"]
        for i in range(30):
            a.commit([Triple(f"person {i}", "visited", f"place {i}", sentence_text=f"line {i}")])
        a.purge({"relation_type": "knows"}, "hard")
        schema = graph_schema_name(pg_tenant)
        with psycopg.connect(pg_url) as raw:
            (kept,) = raw.execute(f"SELECT count(*) FROM {schema}.graph_changes").fetchone()
        assert kept < 40  # about 130 changes were logged
        b.catch_up()
        assert b.cache.snapshot() == a.sql_snapshot()
        assert _targets(b, "Alice") == []
    finally:
        a.close()
        b.close()


def test_dropped_connections_are_replaced_and_the_other_daemon_catches_up(pg_url: str, pg_tenant: str) -> None:
    a = GraphStore("", sql=PgGraphSQL(PgDatabase(pg_url), tenant=pg_tenant))
    b = GraphStore("", sql=PgGraphSQL(PgDatabase(pg_url), tenant=pg_tenant))
    try:
        a.commit([Triple("Alice", "knows", "Bob")])
        _until(lambda: _targets(b, "Alice") == ["Bob"])
        with psycopg.connect(pg_url, autocommit=True) as conn:  # what a server restart does to them
            dropped = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
        assert dropped and dropped[0] >= 4
        a.commit([Triple("Alice", "knows", "Carol")])  # on a new connection, acknowledged
        assert a.read(lambda c: c.execute("SELECT count(*) FROM relations").fetchone()) == (2,)
        _until(lambda: _targets(b, "Alice") == ["Bob", "Carol"])
    finally:
        a.close()
        b.close()


def test_two_daemons_writing_at_once_converge_to_the_same_graph(pg_url: str, pg_tenant: str) -> None:
    import threading

    a = GraphStore("", sql=PgGraphSQL(PgDatabase(pg_url), tenant=pg_tenant))
    b = GraphStore("", sql=PgGraphSQL(PgDatabase(pg_url), tenant=pg_tenant))

    def write(store: GraphStore, who: str) -> None:
        for i in range(40):  # both mention the same people, so upserts of one entity race
            store.commit([Triple(f"person {i % 7}", f"met by {who}", f"person {(i + 1) % 7}")], f"{who}{i}")

    try:
        writers = [threading.Thread(target=write, args=(s, w)) for s, w in ((a, "a"), (b, "b"))]
        for t in writers:
            t.start()
        for t in writers:
            t.join(timeout=120)
        rows = a.sql_snapshot()
        assert len(rows["relations"]) == 80 and len(rows["entities"]) == 7
        assert sum(e.mention_count for e in rows["entities"].values()) == 160
        a.catch_up()
        b.catch_up()
        assert a.cache.snapshot() == b.cache.snapshot() == rows
    finally:
        a.close()
        b.close()
