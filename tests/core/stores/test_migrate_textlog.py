"""``homeagent store migrate`` copies the conversation log (and media) to PostgreSQL and back, resumable, verified."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from homeagent_core.cli import app
from homeagent_core.memory.documents.store import DocumentStore
from homeagent_core.memory.knowledge.base import KnowledgeBase
from homeagent_core.memory.media import MediaStore
from homeagent_core.memory.stores.postgresql.migrate_textlog import migrate_textlog
from homeagent_core.memory.stores.postgresql.textlog import PgTextLog
from homeagent_core.memory.textlog import TextLog
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.types import MediaAttachment


def _file_log(data):
    log = TextLog(data / "memory" / "text", max_bytes=2000)
    for i in range(30):
        log.append("user" if i % 2 == 0 else "assistant", f"turn {i}: 小王 waters the garden", channel="webui",
                   timestamp=1000.0 + i,
                   attachments=[MediaAttachment(digest="ab" * 32, mime="image/png")] if i == 3 else None,
                   tools=[{"name": "weather", "success": True, "result": "sunny"}] if i == 5 else None)
    records = list(log.iter_records())
    log.close()
    return records


def test_the_log_goes_to_postgresql_and_back_record_for_record(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    records = _file_log(data)
    report = migrate_textlog("sqlite", pg_url, data_dir=data, tenant=pg_tenant, batch=7)
    assert report.verified and (report.copied, report.skipped, report.target_count) == (30, 0, 30)
    pg = PgTextLog(pg_url, tenant=pg_tenant, follow=False)
    assert list(pg.iter_records()) == records
    pg.close()
    back = tmp_path / "back"
    report = migrate_textlog(pg_url, "sqlite", data_dir=back, tenant=pg_tenant)
    assert report.verified and report.copied == 30
    again = TextLog(back / "memory" / "text")
    assert list(again.iter_records()) == records
    assert again.tail(1)[0]["content"] == "turn 29: 小王 waters the garden"
    again.close()


def test_an_interrupted_log_copy_resumes_and_verifies(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    _file_log(data)
    calls = {"n": 0}

    def crash_after_two_batches(done: int) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate_textlog("sqlite", pg_url, data_dir=data, tenant=pg_tenant, batch=10, progress=crash_after_two_batches)
    partial = PgTextLog(pg_url, tenant=pg_tenant, follow=False)
    assert len(partial) == 20
    partial.close()
    report = migrate_textlog("sqlite", pg_url, data_dir=data, tenant=pg_tenant, batch=10)
    assert (report.copied, report.skipped, report.target_count) == (10, 20, 30) and report.verified


def test_a_log_target_with_other_records_fails_verification(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    _file_log(data)
    extra = PgTextLog(pg_url, tenant=pg_tenant, follow=False)
    extra.append("user", "a message only the target has")
    extra.close()
    with pytest.raises(MemoryStoreError, match="does not match its source: 30 records"):
        migrate_textlog("sqlite", pg_url, data_dir=data, tenant=pg_tenant)


async def test_the_cli_copies_the_log_media_and_knowledge_with_the_documents(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    _file_log(data)
    DocumentStore(data / "memory" / "documents.db").close()
    media = MediaStore(data / "memory" / "media")
    await media.put(b"%PDF-1.7 the lease", "application/pdf", name="lease.pdf")
    media.close()
    await KnowledgeBase(data / "knowledge").create("home/lease", "ends in March")
    result = CliRunner().invoke(
        app, ["store", "migrate", "--to", pg_url, "--tenant", pg_tenant, "--data", str(data), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["log"]["verified"] and report["log"]["copied"] == 30
    assert report["log"]["source_checksum"] == report["log"]["target_checksum"]
    assert report["media"]["verified"] and report["media"]["copied"] == 1
    assert report["knowledge"]["verified"] and report["knowledge"]["copied"] == 1
    assert report["settings"]["verified"]
    result = CliRunner().invoke(app, ["store", "migrate", "--to", pg_url, "--tenant", pg_tenant, "--data", str(data)])
    assert result.exit_code == 0, result.output
    assert "copied 0 conversation log records (30 already there); verified: 30 records" in result.output
    assert "copied 0 media blocks with their bytes (1 already there); verified: 1 blocks" in result.output
