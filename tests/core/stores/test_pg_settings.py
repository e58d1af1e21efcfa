"""Shared settings on PostgreSQL: memory settings are the household's, the rest stays per daemon."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from homeagent_core.cli import app
from homeagent_core.config import ConfigStore
from homeagent_core.memory.stores.postgresql.migrate_settings import migrate_settings
from homeagent_core.memory.stores.postgresql.settings import PgSharedSettings
from homeagent_core.memory.system import MemorySystem
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.testing import FakeEmbedder


def _until(check: Callable[[], bool], *, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"condition not reached within {within}s"
        time.sleep(0.02)


def _daemon(folder: Path, url: str, tenant: str) -> ConfigStore:
    folder.mkdir(parents=True, exist_ok=True)
    config = ConfigStore(folder / "config.db")
    config.set("core.memory.store", url)
    config.set("core.memory.tenant", tenant)
    return config


def test_a_shared_setting_changed_on_one_daemon_applies_on_the_other(tmp_path, pg_url, pg_tenant):
    a, b = _daemon(tmp_path / "a", pg_url, pg_tenant), _daemon(tmp_path / "b", pg_url, pg_tenant)
    a.attach_shared(PgSharedSettings(pg_url, tenant=pg_tenant))
    b.attach_shared(PgSharedSettings(pg_url, tenant=pg_tenant))
    heard: list[str] = []
    b.on_change(heard.append)
    a.set("core.memory.media.max_blob_bytes", 1000)
    a.set("core.agent.max_tool_turns", 3)  # this daemon's own
    _until(lambda: b.get("core.memory.media.max_blob_bytes") == 1000)
    assert heard == ["core.memory.media.max_blob_bytes"]
    assert b.source("core.memory.media.max_blob_bytes") == "shared"
    assert b.get("core.agent.max_tool_turns") == 10
    a.unset("core.memory.media.max_blob_bytes")
    _until(lambda: b.get("core.memory.media.max_blob_bytes") == 50 * 1024 * 1024)
    b.close()
    a.close()
    # config.db keeps the last value each daemon saw, for a start without the shared store.
    again = ConfigStore(tmp_path / "b" / "config.db")
    assert again.get("core.agent.max_tool_turns") == 10 and "core.memory.media.max_blob_bytes" not in again.stored()
    again.close()


def test_the_first_daemon_brings_its_settings_and_the_database_wins_after(tmp_path, pg_url, pg_tenant):
    a = _daemon(tmp_path / "a", pg_url, pg_tenant)
    a.set("core.memory.media.enabled", False)
    a.attach_shared(PgSharedSettings(pg_url, tenant=pg_tenant))
    b = _daemon(tmp_path / "b", pg_url, pg_tenant)
    b.set("core.memory.media.enabled", True)
    b.set("core.embeddings.model", "only-b-had-this")
    b.attach_shared(PgSharedSettings(pg_url, tenant=pg_tenant))
    assert b.get("core.memory.media.enabled") is False
    shared = PgSharedSettings(pg_url, tenant=pg_tenant)
    assert shared.load() == {"core.memory.media.enabled": "false", "core.embeddings.model": "only-b-had-this"}
    shared.close()
    other = _daemon(tmp_path / "c", pg_url, pg_tenant + "-other")
    other.attach_shared(PgSharedSettings(pg_url, tenant=pg_tenant + "-other"))
    assert other.get("core.memory.media.enabled") is True  # another tenant's settings are its own
    for config in (a, b, other):
        config.close()


async def test_the_memory_system_reads_the_households_settings_at_start(tmp_path, pg_url, pg_tenant):
    shared = PgSharedSettings(pg_url, tenant=pg_tenant)
    shared.put("core.memory.media.enabled", "false")
    shared.close()
    config = _daemon(tmp_path / "d", pg_url, pg_tenant)
    memory = await MemorySystem.open(tmp_path / "d", config, embedder=FakeEmbedder(16))
    try:
        assert config.shared is not None
        assert memory.media.enabled is False
    finally:
        await memory.aclose()
        config.close()


def test_the_config_command_writes_shared_settings_to_the_database(tmp_path, pg_url, pg_tenant):
    for name in ("a", "b"):
        _daemon(tmp_path / name, pg_url, pg_tenant).close()
    runner = CliRunner()
    done = runner.invoke(app, ["config", "set", "core.memory.media.max_blob_bytes", "4096", "--data",
                               str(tmp_path / "a")])
    assert done.exit_code == 0, done.output
    shown = runner.invoke(app, ["config", "list", "core.memory.media", "--json", "--data", str(tmp_path / "b")])
    assert shown.exit_code == 0, shown.output
    rows = {r["key"]: r for r in json.loads(shown.stdout)}
    assert rows["core.memory.media.max_blob_bytes"]["value"] == 4096
    assert rows["core.memory.media.max_blob_bytes"]["source"] == "shared"


def test_an_unreachable_database_fails_shared_changes_but_not_local_ones(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _daemon(tmp_path / "a", f"postgresql://ha:topsecret@127.0.0.1:{port}/home", "family").close()
    runner = CliRunner()
    data = ["--data", str(tmp_path / "a")]
    failed = runner.invoke(app, ["config", "set", "core.memory.media.enabled", "false", *data])
    assert failed.exit_code != 0
    assert "postgresql://ha:***@127.0.0.1" in failed.output and "topsecret" not in failed.output
    fixed = runner.invoke(app, ["config", "set", "core.memory.store", "sqlite", *data])
    assert fixed.exit_code == 0, fixed.output
    config = ConfigStore(tmp_path / "a" / "config.db")
    assert config.get("core.memory.store") == "sqlite" and "core.memory.media.enabled" not in config.stored()
    config.close()
    with pytest.raises(MemoryStoreError, match=r"postgresql://ha:\*\*\*@"):
        PgSharedSettings(f"postgresql://ha:topsecret@127.0.0.1:{port}/home", tenant="family")


def test_shared_settings_go_to_postgresql_and_back(tmp_path, pg_url, pg_tenant):
    (tmp_path / "data").mkdir()
    config = ConfigStore(tmp_path / "data" / "config.db")
    config.set("core.memory.media.max_blob_bytes", 2048)
    config.set("core.embeddings.provider", "none")
    config.set("core.agent.max_tool_turns", 4)  # stays local
    config.close()
    report = migrate_settings("sqlite", pg_url, data_dir=tmp_path / "data", tenant=pg_tenant)
    assert report.verified and (report.copied, report.target_count) == (2, 2)
    shared = PgSharedSettings(pg_url, tenant=pg_tenant)
    assert shared.load() == {"core.memory.media.max_blob_bytes": "2048", "core.embeddings.provider": "none"}
    shared.close()
    again = migrate_settings("sqlite", pg_url, data_dir=tmp_path / "data", tenant=pg_tenant)
    assert (again.copied, again.skipped) == (0, 2) and again.verified
    (tmp_path / "back").mkdir()
    back = migrate_settings(pg_url, "sqlite", data_dir=tmp_path / "back", tenant=pg_tenant)
    assert back.verified and back.copied == 2
    restored = ConfigStore(tmp_path / "back" / "config.db")
    assert restored.get("core.memory.media.max_blob_bytes") == 2048
    assert restored.get("core.agent.max_tool_turns") == 10
    restored.close()
    clash = ConfigStore(tmp_path / "back" / "config.db")
    clash.set("core.embeddings.provider", "http")
    clash.close()
    with pytest.raises(MemoryStoreError, match="shared settings differ"):
        migrate_settings(pg_url, "sqlite", data_dir=tmp_path / "back", tenant=pg_tenant)
