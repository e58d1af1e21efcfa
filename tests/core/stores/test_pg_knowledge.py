"""The knowledge base on PostgreSQL: an entry written on one daemon is found on the others."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import pytest

from homeagent_core.memory.knowledge.base import KnowledgeBase
from homeagent_core.memory.stores.postgresql.knowledge import PgKnowledge
from homeagent_core.memory.stores.postgresql.migrate_knowledge import migrate_knowledge
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.visibility import EVERYONE


def _until(check: Callable[[], bool], *, within: float = 20.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"condition not reached within {within}s"
        time.sleep(0.02)


async def test_an_entry_written_on_one_daemon_is_listed_and_searched_on_the_other(tmp_path, pg_url, pg_tenant):
    a = KnowledgeBase(tmp_path / "a", FakeEmbedder(32), storage=PgKnowledge(pg_url, tenant=pg_tenant))
    b = KnowledgeBase(tmp_path / "b", FakeEmbedder(32), storage=PgKnowledge(pg_url, tenant=pg_tenant))
    await a.create("home/wifi", "the wifi password is on the fridge")
    _until(lambda: len(b) == 1)
    hits = await b.search("wifi password", 1, audience=EVERYONE)
    assert [(h.entry.name, h.entry.content) for h in hits] == [("home/wifi", "the wifi password is on the fridge")]
    await a.create("home/wifi", "the wifi password changed: ask Ann")
    _until(lambda: b.get("wifi").content == "the wifi password changed: ask Ann")
    hits = await b.search("ask Ann", 1, audience=EVERYONE)
    assert hits[0].score == pytest.approx(1.0)  # re-embedded, not the old vector
    a.delete("home/wifi")
    _until(lambda: len(b) == 0)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # nothing written locally
    a.close()
    b.close()


def test_an_unreachable_database_names_the_url_without_the_password():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MemoryStoreError, match=r"postgresql://ha:\*\*\*@127\.0\.0\.1") as info:
        PgKnowledge(f"postgresql://ha:topsecret@127.0.0.1:{port}/home", tenant="family")
    assert "topsecret" not in str(info.value)


async def test_knowledge_goes_to_postgresql_and_back(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    local = KnowledgeBase(data / "knowledge")
    entries = {"recipes/dumplings": "pork and cabbage", "家电/空调/说明书": "遥控器在抽屉里", "home/wifi": "homenet"}
    for name, content in entries.items():
        await local.create(name, content)
    report = migrate_knowledge("sqlite", pg_url, data_dir=data, tenant=pg_tenant)
    assert report.verified and (report.copied, report.target_count) == (3, 3)
    again = migrate_knowledge("sqlite", pg_url, data_dir=data, tenant=pg_tenant)
    assert (again.copied, again.skipped) == (0, 3) and again.verified
    shared = KnowledgeBase(tmp_path / "x", storage=PgKnowledge(pg_url, tenant=pg_tenant))
    assert {e.name: e.content for e in shared.list()} == entries
    shared.close()
    back = tmp_path / "back"
    report = migrate_knowledge(pg_url, "sqlite", data_dir=back, tenant=pg_tenant)
    assert report.verified and report.copied == 3
    assert (back / "knowledge" / "家电" / "空调" / "说明书" / "content.md").read_text() == "遥控器在抽屉里"
    (back / "knowledge" / "home" / "wifi" / "content.md").write_text("changed only here")
    with pytest.raises(MemoryStoreError, match="does not match its source: 3 entries"):
        migrate_knowledge(pg_url, "sqlite", data_dir=back, tenant=pg_tenant)
