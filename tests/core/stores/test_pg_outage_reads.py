"""Document reads, read counters and the graph's reads on PostgreSQL while the server goes away.

Every call runs again on a new connection when the server restarts or ends its connection
mid-call; a read counted (``touch``, ``query(touch=True)``) is counted once even when its
answer was lost; a server away for longer than the retry window gives an error naming the
server (without its password), and the store serves again once it is back. The server and the
relay of ``test_pg_outage``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
import test_pg_outage as outage
from test_pg_outage import PATIENCE, AnswerSwallower

from homeagent_core.memory.documents.store import Document
from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.stores.postgresql.database import PgDatabase
from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore
from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL
from homeagent_core.memory.stores.postgresql.local import LocalPostgres
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import EVERYONE

server = outage.server  # the module's own server (restarted here) and the relay in front of it
relay = outage.relay

DAY = 86400.0

CALLS: dict[str, Callable[[PgDocumentStore], Any]] = {
    "get": lambda s: s.get("boiler").content,  # type: ignore[union-attr]
    "all": lambda s: [d.id for d in s.all()],
    "find_cold": lambda s: sorted(d.id for d in s.find_cold(older_than=DAY)),
    "query": lambda s: [h.document.id for h in asyncio.run(s.query("boiler serviced", 1, touch=False,
        audience=EVERYONE))],
    "query_touch": lambda s: [h.document.id for h in asyncio.run(s.query("boiler serviced", 1, touch=True,
        audience=EVERYONE))],
    "search": lambda s: [h.document.id for h in s.search("boiler serviced", 1, audience=EVERYONE)],
    "touch": lambda s: s.touch(["boiler"]),
    "archived_event_ids": lambda s: s.archived_event_ids(["e1", "e9"]),
    "flush": lambda s: s.flush(),
}
"""The document store's calls that read (or count a read), each giving a comparable result."""

COUNTING = {"query_touch", "touch"}
"""The calls that count one read of the boiler document."""


def _store(db: PgDatabase, tenant: str) -> PgDocumentStore:
    store = PgDocumentStore(db, tenant=tenant, follow=False)
    old = time.time() - 10 * DAY
    asyncio.run(store.add_many([
        Document(id="boiler", content="the boiler was serviced in May", created_at=old, meta={"event_id": "e1"}),
        Document(id="tyres", content="the car needs new tyres", created_at=old + 1),
    ]))
    return store


def _reads_of_boiler(url: str, tenant: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT access_count FROM ha_documents WHERE tenant=%s AND id='boiler'",
                           (tenant,)).fetchone()
    assert row is not None
    return int(row[0])


class _Call:
    """One store call run in a thread (so the test can act on the server meanwhile)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,))
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as exc:  # recorded: the test names it
            self.error = exc

    def outcome(self) -> tuple[str, Any]:
        self.thread.join(timeout=PATIENCE * 2)
        assert not self.thread.is_alive()
        return ("failed", repr(self.error)) if self.error is not None else ("done", self.result)


class _RetryWatch(logging.Handler):
    """Notices the store's warning that it lost its connection and is retrying."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "retrying" in record.getMessage():
            self.seen.set()


@contextmanager
def _watching_retries() -> Iterator[_RetryWatch]:
    watch = _RetryWatch()
    logger = logging.getLogger("homeagent_core.memory.stores.postgresql.database")
    logger.addHandler(watch)
    try:
        yield watch
    finally:
        logger.removeHandler(watch)


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_document_call_survives_a_server_restart_between_calls_and_during_one(
    server: LocalPostgres, call: str
) -> None:
    db = PgDatabase(server.url, timeout=1.0, retry_for=PATIENCE)
    tenant = f"restart-{call}"
    store = _store(db, tenant)
    try:
        expected = CALLS[call](store)
        server.stop()  # between calls: every pooled connection is gone
        server.start()
        assert CALLS[call](store) == expected
        with _watching_retries() as watch:
            server.stop()  # during a call: it starts while the server is away
            try:
                running = _Call(lambda: CALLS[call](store))
                deadline = time.monotonic() + PATIENCE
                while not watch.seen.is_set() and running.thread.is_alive() and time.monotonic() < deadline:
                    watch.seen.wait(0.01)
            finally:
                server.start()
            assert running.outcome() == ("done", expected)
        assert watch.seen.is_set()
        if call in COUNTING:
            assert _reads_of_boiler(server.url, tenant) == 3  # each acknowledged read counted once
    finally:
        store.close()
        db.close()


def _blocked_backend(watcher: psycopg.Connection[Any], running: _Call) -> int:
    """The pid of the backend waiting for the test's table lock (the store's call)."""
    deadline = time.monotonic() + PATIENCE
    while running.thread.is_alive() and time.monotonic() < deadline:
        row = watcher.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            " AND pid <> pg_backend_pid()"
        ).fetchone()
        if row is not None:
            return int(row[0])
        threading.Event().wait(0.01)
    raise AssertionError(f"the call never waited for the lock: {running.outcome()}")


@contextmanager
def _tables_locked(url: str, tables: str) -> Iterator[psycopg.Connection[Any]]:
    """Hold ``tables`` locked (calls using them wait) until the block ends; yields a watching connection."""
    with psycopg.connect(url) as locker, psycopg.connect(url, autocommit=True) as watcher:
        locker.execute(f"LOCK TABLE {tables} IN ACCESS EXCLUSIVE MODE")
        try:
            yield watcher
        finally:
            locker.rollback()


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_document_call_whose_connection_is_terminated_mid_call_runs_again(server: LocalPostgres, call: str) -> None:
    db = PgDatabase(server.url, timeout=1.0, retry_for=PATIENCE)
    tenant = f"terminated-{call}"
    store = _store(db, tenant)
    try:
        expected = CALLS[call](store)
        with _tables_locked(server.url, "ha_documents, ha_changes") as watcher:
            running = _Call(lambda: CALLS[call](store))
            pid = _blocked_backend(watcher, running)
            assert watcher.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        assert running.outcome() == ("done", expected)
        if call in COUNTING:
            assert _reads_of_boiler(server.url, tenant) == 2  # the ended run was rolled back, not counted
    finally:
        store.close()
        db.close()


@pytest.mark.parametrize("lost", ["statement", "commit"])
@pytest.mark.parametrize("call", sorted(COUNTING))
def test_a_read_counted_whose_answer_was_lost_is_counted_once(relay: AnswerSwallower, call: str, lost: str) -> None:
    db = PgDatabase(relay.url(), retry_for=PATIENCE)
    tenant = f"swallowed-{call}-{lost}"
    store = _store(db, tenant)
    try:
        if lost == "commit":
            relay.armed = 1  # the commit happened; its answer never comes
        else:
            relay.cut_on = b"ACCESS_COUNT + 1"  # the counting statement ran; its answer never comes
        expected = {"touch": 1, "query_touch": ["boiler"]}[call]
        assert CALLS[call](store) == expected
        assert relay.swallowed == 1
        assert _reads_of_boiler(relay.url(), tenant) == 1
    finally:
        store.close()
        db.close()


def test_a_read_while_the_server_stays_away_names_the_server_and_the_store_serves_again_after(
    server: LocalPostgres,
) -> None:
    url = server.url.replace("postgres@", "postgres:hush-hush@")
    db = PgDatabase(url, timeout=1.0, retry_for=1.0)  # retries for a second, then reports
    store = _store(db, "away-docs")
    try:
        server.stop()
        try:
            for call in ("get", "query", "find_cold"):
                with pytest.raises(MemoryStoreError) as caught:
                    CALLS[call](store)
                message = str(caught.value)
                assert "postgres:***@" in message and "hush-hush" not in message, message
                assert "did not answer for 1 s" in message and "could not be read" in message, message
        finally:
            server.start()
        assert CALLS["get"](store) == "the boiler was serviced in May"
        assert CALLS["query"](store) == ["boiler"]
    finally:
        store.close()
        db.close()


def _graph(url: str, tenant: str, retry_for: float = PATIENCE) -> GraphStore:
    return GraphStore("", sql=PgGraphSQL(PgDatabase(url, timeout=1.0, retry_for=retry_for), tenant=tenant))


def _close(store: GraphStore) -> None:
    sql = store.sql
    store.close()
    assert isinstance(sql, PgGraphSQL)
    sql.db.close()


def test_a_graph_read_while_the_server_stays_away_names_the_server(server: LocalPostgres) -> None:
    store = _graph(server.url.replace("postgres@", "postgres:hush-hush@"), "away-graph", retry_for=1.0)
    try:
        store.commit([Triple("Alice", "likes", "tea")], "s1")
        server.stop()
        try:
            with pytest.raises(MemoryStoreError) as caught:
                store.introspect()
        finally:
            server.start()
        message = str(caught.value)
        assert "postgres:***@" in message and "hush-hush" not in message, message
        assert "did not answer for 1 s" in message and "could not be read" in message, message
        assert store.introspect()["relations_active"] == 1
    finally:
        _close(store)


def test_a_graph_import_whose_connection_is_terminated_mid_call_runs_again(server: LocalPostgres) -> None:
    store = _graph(server.url, "terminated-import")
    assert isinstance(store.sql, PgGraphSQL)
    sql = store.sql
    try:
        rows = [(i, f"sentence {i}", 1.0) for i in range(1, 4)]
        with _tables_locked(server.url, f"{sql.schema}.sentences") as watcher:
            running = _Call(lambda: sql.import_rows("sentences", "id, text, created_at", rows))
            pid = _blocked_backend(watcher, running)
            assert watcher.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        assert running.outcome() == ("done", None)
        stored = sql.read(lambda c: c.execute("SELECT id, text, created_at FROM sentences ORDER BY id").fetchall())
        assert stored == rows
    finally:
        _close(store)
