"""Backups of a data directory whose memory lives in PostgreSQL: one snapshot of the tenant's rows,
restored into another database with the same answers; a tenant already there is not overwritten."""

from __future__ import annotations

import tarfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from backup_data import answers, fill, make_agent

from homeagent_core.config import ConfigStore
from homeagent_core.ops.backup import create_backup
from homeagent_core.ops.errors import BackupError
from homeagent_core.ops.restore import restore_backup, verify_backup


def _use_postgres(data: Path, url: str, tenant: str) -> None:
    data.mkdir(parents=True, exist_ok=True)
    config = ConfigStore(data / "config.db")
    try:
        config.set("core.memory.store", url)
        config.set("core.memory.tenant", tenant)
    finally:
        config.close()


def _new_database(url: str) -> str:
    import psycopg

    name = "restored_" + uuid.uuid4().hex[:10]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return url.replace("/homeagent?", f"/{name}?")


async def _answers(data: Path) -> dict[str, Any]:
    async with make_agent(data) as agent:
        return await answers(agent)


async def test_a_postgresql_backed_directory_restores_into_another_database_with_the_same_answers(
    tmp_path: Path, pg_url: str, pg_tenant: str
) -> None:
    data = tmp_path / "home"
    _use_postgres(data, pg_url, pg_tenant)
    async with make_agent(data) as agent:
        await fill(agent)
        before = await answers(agent)
    assert before["recall"] and before["documents"] and before["log"] and before["knowledge"]

    archive, manifest = create_backup(data, tmp_path)
    info = manifest["postgresql"]
    assert info["tenant"] == pg_tenant
    rows = {entry["table"]: entry["rows"] for entry in info["tables"].values()}
    assert rows["ha_documents"] == 2 and rows["relations"] >= 2 and rows["ha_text_log"] >= 2
    with tarfile.open(archive) as tar:
        assert {m.name for m in tar if m.name.startswith("data/postgresql/")} == {
            "data/" + rel for rel in info["tables"]
        }
    assert verify_backup(archive)["postgresql"] == info

    other = _new_database(pg_url)
    restored = tmp_path / "restored"
    restore_backup(archive, restored, store=other)
    assert not (restored / "postgresql").exists()
    config = ConfigStore(restored / "config.db")
    try:
        assert config.get("core.memory.store") == other
    finally:
        config.close()
    assert await _answers(restored) == before


async def test_a_tenant_that_already_has_memory_is_replaced_only_with_force(
    tmp_path: Path, pg_url: str, pg_tenant: str
) -> None:
    data = tmp_path / "home"
    _use_postgres(data, pg_url, pg_tenant)
    async with make_agent(data) as agent:
        await fill(agent)
        before = await answers(agent)
    archive, _ = create_backup(data, tmp_path)
    with pytest.raises(BackupError, match=rf"already holds memory of tenant '{pg_tenant}'.*--force"):
        restore_backup(archive, tmp_path / "again")
    assert not (tmp_path / "again").exists()

    async with make_agent(data) as agent:  # written after the backup: gone once the backup replaces the tenant
        await agent.documents.commit("late", "written after the backup was taken")
    restore_backup(archive, tmp_path / "again", force=True)
    after = await _answers(tmp_path / "again")
    assert after == before


def test_store_is_refused_for_an_archive_of_sqlite_memory(tmp_path: Path) -> None:
    data = tmp_path / "home"
    data.mkdir()
    ConfigStore(data / "config.db").close()
    archive, _ = create_backup(data, tmp_path)
    with pytest.raises(BackupError, match="--store applies only"):
        restore_backup(archive, tmp_path / "out", store="postgresql://x@/y")
    assert not (tmp_path / "out").exists()
