"""The conversation log on PostgreSQL: one history for every daemon of a household."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from homeagent_core.builtin.webui.history import ChatHistory
from homeagent_core.config import ConfigStore
from homeagent_core.memory.stores.postgresql.database import PgDatabase
from homeagent_core.memory.stores.postgresql.textlog import PgTextLog
from homeagent_core.memory.system import MemorySystem
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import StageContext


def _until(check: Callable[[], bool], *, within: float = 20.0) -> None:
    """Wait (bounded) until ``check()`` holds; fail naming the bound otherwise."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"condition not reached within {within}s"
        time.sleep(0.02)


def test_a_message_logged_on_one_daemon_shows_in_the_others_history(pg_url, pg_tenant):
    a = PgTextLog(pg_url, tenant=pg_tenant)
    b = PgTextLog(pg_url, tenant=pg_tenant)
    history = ChatHistory(b)
    heard: list[str] = []
    b.add_listener(lambda r: heard.append(r["content"] if r else "<reread>"))
    a.append("user", "where are the spare keys?", channel="webui")
    a.append("assistant", "under the blue pot", channel="webui")
    _until(lambda: len(heard) == 2)
    assert heard == ["where are the spare keys?", "under the blue pot"]
    assert [(m["role"], m["content"]) for m in history.messages] == [
        ("user", "where are the spare keys?"), ("assistant", "under the blue pot")]
    assert [r["content"] for r in b.tail(5)] == ["where are the spare keys?", "under the blue pot"]
    a.purge(contains="blue pot")
    _until(lambda: heard[-1] == "<reread>")
    assert [m["content"] for m in history.messages] == ["where are the spare keys?"]
    a.close()
    b.close()


def test_each_daemon_hears_every_record_once_in_commit_order(pg_url, pg_tenant):
    a = PgTextLog(pg_url, tenant=pg_tenant)
    b = PgTextLog(pg_url, tenant=pg_tenant)
    heard: dict[str, list[str]] = {"a": [], "b": []}
    a.add_listener(lambda r: heard["a"].append(r["content"] if r else "<reread>"))
    b.add_listener(lambda r: heard["b"].append(r["content"] if r else "<reread>"))

    def write(log: PgTextLog, name: str) -> None:
        for i in range(25):
            log.append("user", f"{name}{i}")

    threads = [threading.Thread(target=write, args=(log, name)) for log, name in ((a, "a"), (b, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _until(lambda: len(heard["a"]) == 50 and len(heard["b"]) == 50)
    committed = [r["content"] for r in a.iter_records()]
    assert heard["a"] == heard["b"] == committed
    assert sorted(committed) == sorted([f"a{i}" for i in range(25)] + [f"b{i}" for i in range(25)])
    a.close()
    b.close()


def test_tenants_sharing_a_server_see_only_their_own_log(pg_url, pg_tenant):
    db = PgDatabase(pg_url)
    mine = PgTextLog(db, tenant=pg_tenant)
    theirs = PgTextLog(db, tenant=pg_tenant + "-other")
    mine.append("user", "mine")
    theirs.append("user", "theirs")
    assert [r["content"] for r in mine.iter_records()] == ["mine"]
    assert [r["content"] for r in theirs.tail(10)] == ["theirs"]
    assert mine.purge(contains="theirs") == 0
    mine.close()
    theirs.close()
    db.close()


def test_an_unreachable_database_is_an_error_naming_the_url_without_password():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MemoryStoreError, match=rf"postgresql://ha:\*\*\*@127\.0\.0\.1:{port}/home") as info:
        PgTextLog(f"postgresql://ha:topsecret@127.0.0.1:{port}/home", tenant="family")
    assert "topsecret" not in str(info.value)


async def test_two_memory_systems_share_the_conversation_and_restore_it_at_start(tmp_path: Path, pg_url, pg_tenant):
    def config(name: str) -> ConfigStore:
        store = ConfigStore(tmp_path / f"{name}.db")
        store.set("core.memory.store", pg_url)
        store.set("core.memory.tenant", pg_tenant)
        return store

    config_a, config_b = config("a"), config("b")
    a = await MemorySystem.open(tmp_path / "a", config_a, embedder=FakeEmbedder(16))
    b = await MemorySystem.open(tmp_path / "b", config_b, embedder=FakeEmbedder(16))
    try:
        assert isinstance(a.textlog, PgTextLog)
        ctx = StageContext(raw_message="I moved to Suzhou", channel="webui", source="user")
        await a.record_input(ctx, None)
        ctx.final_text = "Noted: you live in Suzhou."
        await a.record_output(ctx)
        assert not (tmp_path / "a" / "memory" / "text").exists()
        await asyncio.to_thread(_until, lambda: len(b.textlog.tail(5)) == 2)
        assert [r["content"] for r in b.textlog.tail(5)] == ["I moved to Suzhou", "Noted: you live in Suzhou."]
    finally:
        await a.aclose()
        await b.aclose()
    # A third daemon starting on a fresh data directory restores the last turns from the shared log.
    config_c = config("c")
    c = await MemorySystem.open(tmp_path / "c", config_c, embedder=FakeEmbedder(16))
    try:
        assert [(e.kind, e.input or e.response) for e in c.context.events] == [
            ("user", "I moved to Suzhou"), ("agent", "Noted: you live in Suzhou.")]
    finally:
        await c.aclose()
    for store in (config_a, config_b, config_c):
        store.close()


def _drop_connections(pg_url: str) -> int:
    """Terminate every other connection to the test database (what a server restart does to them)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchall()
    return len(rows)


def test_after_dropped_connections_appends_succeed_and_the_other_daemon_catches_up(pg_url, pg_tenant):
    a = PgTextLog(pg_url, tenant=pg_tenant)
    b = PgTextLog(pg_url, tenant=pg_tenant)
    heard: list[str] = []
    b.add_listener(lambda r: heard.append(r["content"] if r else "<reread>"))
    a.append("user", "before the outage")
    _until(lambda: heard == ["before the outage"])
    assert _drop_connections(pg_url) >= 4  # both pools and both listeners
    a.append("user", "after the outage")  # no error: the pool replaced its dead connection
    _until(lambda: heard[-1:] == ["after the outage"])
    assert heard == ["before the outage", "after the outage"]
    a.close()
    b.close()


_WRITER = textwrap.dedent(
    """
    import sys
    from homeagent_core.memory.stores.postgresql.textlog import PgTextLog

    log = PgTextLog(sys.argv[1], tenant=sys.argv[2], follow=False)
    batch = 0
    while True:
        batch += 1
        log.import_records([
            {"id": f"b{batch}-{i}", "role": "user", "content": f"batch {batch} line {i} " + "words " * 50,
             "timestamp": batch + i / 1000, "batch": batch}
            for i in range(400)
        ])
    """
)


def test_a_daemon_killed_mid_write_leaves_all_or_nothing(pg_url, pg_tenant, tmp_path):
    b = PgTextLog(pg_url, tenant=pg_tenant)
    heard: list[dict] = []

    def hear(record: dict | None) -> None:
        if record is None:  # far behind: re-read, as the web UI history does
            heard[:] = list(b.iter_records())
        else:
            heard.append(record)

    b.add_listener(hear)
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    writer = subprocess.Popen([sys.executable, str(script), pg_url, pg_tenant], env=env)
    try:
        _until(lambda: len(heard) >= 400, within=60)
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
    with psycopg.connect(pg_url) as conn:
        per_batch = conn.execute(
            "SELECT record::json->>'batch', count(*) FROM ha_text_log WHERE tenant=%s GROUP BY 1", (pg_tenant,)
        ).fetchall()
    assert per_batch and all(count == 400 for _, count in per_batch)
    total = 400 * len(per_batch)
    _until(lambda: len(heard) == total)
    assert [r["id"] for r in heard] == [r["id"] for r in b.iter_records()]
    b.close()


def test_memory_export_and_knowledge_commands_read_the_shared_store(tmp_path, pg_url, pg_tenant):
    from typer.testing import CliRunner

    from homeagent_core.cli import app

    data = tmp_path / "data"
    data.mkdir()
    config = ConfigStore(data / "config.db")
    config.set("core.memory.store", pg_url)
    config.set("core.memory.tenant", pg_tenant)
    config.close()
    other = PgTextLog(pg_url, tenant=pg_tenant)
    other.append("user", "logged by the laptop", channel="webui")
    other.close()
    runner = CliRunner()
    exported = runner.invoke(app, ["memory", "export", "--data", str(data)])
    assert exported.exit_code == 0, exported.output
    assert [json.loads(line)["content"] for line in exported.stdout.splitlines()] == ["logged by the laptop"]
    added = runner.invoke(app, ["knowledge", "add", "home/wifi", "--text", "homenet", "--data", str(data)])
    assert added.exit_code == 0, added.output
    assert not (data / "knowledge" / "home").exists()
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT content FROM ha_knowledge WHERE tenant=%s", (pg_tenant,)).fetchall() == [
            ("homenet",)]
