"""Two daemons on one database: commits on one become recallable on the other, atomically."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

import psycopg

from homeagent_core.memory.documents.store import Document
from homeagent_core.memory.stores.postgresql.database import PgDatabase
from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.visibility import EVERYONE


async def _until(check: Callable[[], bool], *, within: float = 20.0) -> None:
    """Wait (bounded) until ``check()`` holds; fail naming the bound otherwise."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"condition not reached within {within}s"
        await asyncio.sleep(0.02)


async def test_a_fact_committed_on_one_daemon_is_recalled_on_the_other(pg_url, pg_tenant):
    a = PgDocumentStore(PgDatabase(pg_url), FakeEmbedder(32), tenant=pg_tenant)
    b = PgDocumentStore(PgDatabase(pg_url), FakeEmbedder(32), tenant=pg_tenant)
    await a.add("Melanie's daughter is called Rosa", source="chat")
    await _until(lambda: len(b) == 1)
    hits = await b.query("daughter Rosa", 1, audience=EVERYONE)
    assert hits[0].document.content == "Melanie's daughter is called Rosa"
    assert b.stats()["dense_rows"] == 1
    b.delete([hits[0].document.id])
    await _until(lambda: len(a) == 0)
    assert await a.query("daughter Rosa", 1, audience=EVERYONE) == []
    for store in (a, b):
        store.close()
        store.db.close()


async def test_both_daemons_writing_converge_to_the_same_ranking(pg_url, pg_tenant):
    a = PgDocumentStore(pg_url, tenant=pg_tenant)
    b = PgDocumentStore(pg_url, tenant=pg_tenant)
    await asyncio.gather(
        a.add_many([Document(content=f"note {i} about apples", created_at=i) for i in range(20)]),
        b.add_many([Document(content=f"note {i} about pears", created_at=100 + i) for i in range(20)]),
    )
    await _until(lambda: len(a) == len(b) == 40)
    ranked_a = [(h.document.id, round(h.score, 5)) for h in await a.query("pears apples note", 10, touch=False,
        audience=EVERYONE)]
    ranked_b = [(h.document.id, round(h.score, 5)) for h in await b.query("pears apples note", 10, touch=False,
        audience=EVERYONE)]
    assert ranked_a == ranked_b
    a.close()
    b.close()


_WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from homeagent_core.memory.documents.store import Document
    from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore

    async def main(url, tenant):
        store = PgDocumentStore(url, tenant=tenant, follow=False)
        batch = 0
        while True:
            batch += 1
            await store.add_many([
                Document(content=f"batch {batch} line {i} " + "words " * 50, meta={"batch": batch})
                for i in range(400)
            ])

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


async def test_a_daemon_killed_mid_commit_leaves_all_or_nothing(pg_url, pg_tenant, tmp_path):
    b = PgDocumentStore(pg_url, tenant=pg_tenant)
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    writer = subprocess.Popen([sys.executable, str(script), pg_url, pg_tenant], env=env)
    try:
        await _until(lambda: len(b) >= 400, within=60)
        with psycopg.connect(pg_url, autocommit=True) as conn:

            def writing() -> bool:
                # the writer's connection is inside a transaction that touched the tenant's counter
                row = conn.execute(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid"
                    " WHERE s.pid <> pg_backend_pid() AND s.datname = current_database()"
                    " AND l.locktype = 'transactionid' AND s.xact_start IS NOT NULL"
                ).fetchone()
                return bool(row and row[0])

            await _until(writing, within=60)
            os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.wait(timeout=30)
    b.sync()
    fresh = PgDocumentStore(pg_url, tenant=pg_tenant, follow=False)
    with psycopg.connect(pg_url) as conn:
        per_batch = conn.execute(
            "SELECT meta->>'batch', count(*) FROM ha_documents WHERE tenant=%s GROUP BY 1", (pg_tenant,)
        ).fetchall()
    assert per_batch and all(count == 400 for _, count in per_batch)
    assert len(b) == len(fresh) == 400 * len(per_batch)
    last = max(int(n) for n, _ in per_batch)
    hits = await b.query(f"batch {last} line", 3, touch=False, audience=EVERYONE)
    assert hits and all(h.document.meta["batch"] == last for h in hits)
    fresh.close()
    b.close()


def _drop_connections(pg_url: str, application: str = "") -> int:
    """Terminate every other connection to the test database (what a server restart does to them)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchall()
    return len(rows)


async def test_dropped_connections_are_replaced_and_followers_catch_up(pg_url, pg_tenant):
    a = PgDocumentStore(PgDatabase(pg_url), tenant=pg_tenant)
    b = PgDocumentStore(PgDatabase(pg_url), tenant=pg_tenant)
    await a.add("before the outage")
    await _until(lambda: len(b) == 1)
    assert _drop_connections(pg_url) >= 4  # both pools and both listeners
    await a.add("after the outage")  # no error: the pool replaced its dead connection
    assert [h.document.content for h in await a.query("after the outage", 1, audience=EVERYONE)] == ["after the outage"]
    await _until(lambda: len(b) == 2)  # B's listener reconnected and caught up
    assert [h.document.content for h in await b.query("after the outage", 1, audience=EVERYONE)] == ["after the outage"]
    for store in (a, b):
        store.close()
        store.db.close()


async def test_a_write_while_the_server_is_down_is_reported_and_nothing_acknowledged_is_lost(pg_url, tmp_path):
    import shutil
    import tempfile
    from pathlib import Path

    from homeagent_core.memory.stores.postgresql.local import LocalPostgres, find_bindir
    from homeagent_sdk.errors import MemoryStoreError

    bindir = find_bindir()
    assert bindir is not None  # pg_url would have skipped otherwise
    server = LocalPostgres(Path(tempfile.mkdtemp(prefix="ha-pg-")), bindir)
    server.start()
    try:
        url = server.url.replace("postgres@", "postgres:hush-hush@")
        db = PgDatabase(url, retry_for=1.0)  # retries for a second, then reports
        store = PgDocumentStore(db, tenant="home")
        acknowledged = await store.add("the boiler was serviced in May")
        server.stop()
        try:
            await store.add("written while the server is down")
        except MemoryStoreError as exc:
            assert "postgres:***@" in str(exc) and "hush-hush" not in str(exc) and "not stored" in str(exc)
        else:
            raise AssertionError("a write to a stopped server did not fail")
        server.start()
        await store.add("written after the restart")
        reopened = PgDocumentStore(url, tenant="home", follow=False)
        assert sorted(d.content for d in reopened.all()) == [
            acknowledged.content, "written after the restart"
        ]
        reopened.close()
        store.close()
        db.close()
    finally:
        server.stop()
        shutil.rmtree(server.folder, ignore_errors=True)
