"""The PostgreSQL connection: reachability errors, password hygiene, schema versions, tenants."""

from __future__ import annotations

import logging
import socket
from urllib.parse import quote

import psycopg
import pytest

from homeagent_core.memory.stores.postgresql.database import SCHEMA_VERSION, PgDatabase, redact_url
from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore
from homeagent_sdk.errors import MemoryStoreError, UsageError
from homeagent_sdk.visibility import EVERYONE


def _with_password(url: str, password: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://postgres:{quote(password)}@")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_redacted_url_hides_only_the_password():
    assert redact_url("postgresql://ann:hunter2@db.lan:5432/home") == "postgresql://ann:***@db.lan:5432/home"
    assert redact_url("postgresql://ann@db.lan/home") == "postgresql://ann@db.lan/home"


def test_unreachable_database_is_a_clear_error_without_the_password(caplog):
    url = f"postgresql://ann:hunter2-secret@127.0.0.1:{_free_port()}/home"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(MemoryStoreError) as info:
        PgDocumentStore(url, tenant="a")
    message = str(info.value)
    assert "postgresql://ann:***@127.0.0.1" in message and "cannot reach" in message
    assert "does not fall back to SQLite" in message
    assert "hunter2-secret" not in message + caplog.text


def test_a_url_that_is_not_postgresql_is_refused():
    with pytest.raises(UsageError, match="not a PostgreSQL URL"):
        PgDatabase("mysql://root:pw@host/db")


async def test_the_password_never_reaches_logs_or_stats(pg_url, pg_tenant, caplog):
    caplog.set_level(logging.DEBUG)
    url = _with_password(pg_url, "pa55-w0rd")  # the local server trusts the socket, so any password works
    store = PgDocumentStore(url, tenant=pg_tenant)
    await store.add("a note about the garden")
    assert (await store.query("garden", 1, audience=EVERYONE))[0].document.content == "a note about the garden"
    assert "pa55-w0rd" not in str(store.stats())
    store.close()
    assert "pa55-w0rd" not in caplog.text


def _fresh_database(pg_url: str, name: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return pg_url.replace("/homeagent?", f"/{name}?")


def test_schema_is_versioned_and_a_newer_one_is_refused(pg_url):
    url = _fresh_database(pg_url, "ha_newer")
    PgDatabase(url).close()
    with psycopg.connect(url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM homeagent_schema ORDER BY version")]
        assert versions == list(range(1, SCHEMA_VERSION + 1))
        conn.execute("INSERT INTO homeagent_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    with pytest.raises(MemoryStoreError, match=rf"schema version {SCHEMA_VERSION + 1}, newer than"):
        PgDatabase(url)


async def test_tenants_share_the_server_but_not_their_documents(pg_url, pg_tenant):
    db = PgDatabase(pg_url)
    mine = PgDocumentStore(db, tenant=pg_tenant + "-a")
    theirs = PgDocumentStore(db, tenant=pg_tenant + "-b")
    await mine.add("my bicycle is blue")
    await theirs.add("their bicycle is red")
    assert [h.document.content for h in await mine.query("bicycle", 5, audience=EVERYONE)] == ["my bicycle is blue"]
    assert [d.content for d in theirs.all()] == ["their bicycle is red"]
    with psycopg.connect(pg_url) as conn:
        tenants = {r[0] for r in conn.execute("SELECT DISTINCT tenant FROM ha_documents WHERE tenant LIKE %s",
                                              (pg_tenant + "%",))}
    assert tenants == {pg_tenant + "-a", pg_tenant + "-b"}
    mine.close()
    theirs.close()
    db.close()
