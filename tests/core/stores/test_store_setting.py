"""``core.memory.store`` picks the memory backends; a broken PostgreSQL URL never falls back."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from homeagent_core.config import ConfigStore
from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore
from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL
from homeagent_core.memory.stores.postgresql.knowledge import PgKnowledge
from homeagent_core.memory.stores.postgresql.media import PgMediaIndex
from homeagent_core.memory.stores.postgresql.textlog import PgTextLog
from homeagent_core.memory.system import MemorySystem
from homeagent_sdk.errors import MemoryStoreError, UsageError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Triple


def _config(tmp_path: Path, store: str, tenant: str = "default") -> ConfigStore:
    config = ConfigStore(tmp_path / "config.db")
    config.set("core.memory.store", store)
    config.set("core.memory.tenant", tenant)
    return config


async def test_the_memory_system_keeps_documents_on_postgresql_when_told(tmp_path, pg_url, pg_tenant):
    config = _config(tmp_path, pg_url, pg_tenant)
    memory = await MemorySystem.open(tmp_path / "data", config, embedder=FakeEmbedder(16))
    try:
        assert isinstance(memory.documents, PgDocumentStore)
        await memory.documents.add("the spare key is under the blue pot")
        assert not (tmp_path / "data" / "memory" / "documents.db").exists()
        assert isinstance(memory.graph.sql, PgGraphSQL)
        await memory.graph.acommit([Triple("spare key", "is under", "blue pot")])
        assert not (tmp_path / "data" / "memory" / "graph.db").exists()
        assert isinstance(memory.textlog, PgTextLog)
        assert isinstance(memory.media.index, PgMediaIndex)
        await memory.media.put(b"%PDF-1.7 key receipt", "application/pdf")
        assert not (tmp_path / "data" / "memory" / "media" / "media.db").exists()
        assert isinstance(memory.knowledge.storage, PgKnowledge)
        await memory.knowledge.create("home/spare_key", "under the blue pot")
        assert not (tmp_path / "data" / "knowledge").exists()
    finally:
        await memory.aclose()
        config.close()
    again = PgDocumentStore(pg_url, tenant=pg_tenant)
    assert [d.content for d in again.all()] == ["the spare key is under the blue pot"]
    again.close()
    graph = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    assert [r.target for r in graph.recall(["spare key"]).relations] == ["blue pot"]
    graph.close()
    media = PgMediaIndex(pg_url, tenant=pg_tenant)
    assert media.count() == 1
    media.close()


async def test_an_unreachable_database_stops_the_start_instead_of_an_empty_sqlite(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = _config(tmp_path, f"postgresql://ha:topsecret@127.0.0.1:{port}/home")
    with pytest.raises(MemoryStoreError, match=r"postgresql://ha:\*\*\*@127\.0\.0\.1") as info:
        await MemorySystem.open(tmp_path / "data", config, embedder=FakeEmbedder(16))
    assert "topsecret" not in str(info.value)
    assert not (tmp_path / "data" / "memory" / "documents.db").exists()
    assert not (tmp_path / "data" / "memory" / "graph.db").exists()
    config.close()


async def test_an_unknown_store_setting_names_the_choices(tmp_path):
    config = _config(tmp_path, "mongodb://x")
    with pytest.raises(UsageError, match="use 'sqlite' or a postgresql://"):
        await MemorySystem.open(tmp_path / "data", config, embedder=FakeEmbedder(16))
    config.close()
