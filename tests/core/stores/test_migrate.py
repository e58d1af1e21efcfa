"""``homeagent store migrate``: SQLite to PostgreSQL and back, resumable, verified."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from homeagent_core.cli import app
from homeagent_core.memory.documents.store import Document, DocumentStore
from homeagent_core.memory.graph.store import GraphStore
from homeagent_core.memory.social import SocialGraph
from homeagent_core.memory.stores.postgresql import migrate as migrate_module
from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore
from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL
from homeagent_core.memory.stores.postgresql.migrate import migrate_documents
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.types import Triple
from homeagent_sdk.visibility import EVERYONE

TEXTS = [f"turn {i}: Caroline talks about painting number {i} and 小王's garden" for i in range(25)]


async def _sqlite_store(data):
    store = DocumentStore(data / "memory" / "documents.db", FakeEmbedder(16))
    await store.add_many([Document(content=t, source="chat", created_at=1000.0 + i, meta={"n": i, "k": "ü"})
                          for i, t in enumerate(TEXTS)])
    await store.query("painting 7", 2, audience=EVERYONE)  # read counts travel too
    return store


async def test_documents_go_to_postgresql_and_back_with_vectors_and_the_same_ranking(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    store = await _sqlite_store(data)
    before = [(h.document.id, round(h.score, 5)) for h in await store.query("garden painting 12", 5, touch=False,
        audience=EVERYONE)]
    store.close()
    report = migrate_documents("sqlite", pg_url, data_dir=data, tenant=pg_tenant, batch=7)
    assert report.verified and report.copied == len(TEXTS) and report.skipped == 0
    pg = PgDocumentStore(pg_url, FakeEmbedder(16), tenant=pg_tenant)
    assert pg.stale_count == 0 and pg.stats()["dense_rows"] == len(TEXTS)
    assert [(h.document.id, round(h.score, 5)) for h in await pg.query("garden painting 12", 5, touch=False,
        audience=EVERYONE)] == before
    pg.close()
    back = tmp_path / "back"
    report = migrate_documents(pg_url, "sqlite", data_dir=back, tenant=pg_tenant)
    assert report.verified and report.copied == len(TEXTS)
    again = DocumentStore(back / "memory" / "documents.db", FakeEmbedder(16))
    assert again.stale_count == 0
    hits = await again.query("garden painting 12", 5, touch=False, audience=EVERYONE)
    assert [(h.document.id, round(h.score, 5)) for h in hits] == before
    assert again.get(before[0][0]).meta["k"] == "ü"
    again.close()


async def test_an_interrupted_copy_resumes_and_verifies(tmp_path, pg_url, pg_tenant, monkeypatch):
    data = tmp_path / "data"
    (await _sqlite_store(data)).close()
    calls = {"n": 0}

    def crash_after_two_batches(done: int) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        migrate_documents("sqlite", pg_url, data_dir=data, tenant=pg_tenant, batch=10, progress=crash_after_two_batches)
    partial = PgDocumentStore(pg_url, tenant=pg_tenant, follow=False)
    assert len(partial) == 20
    partial.close()
    report = migrate_documents("sqlite", pg_url, data_dir=data, tenant=pg_tenant, batch=10)
    assert (report.copied, report.skipped, report.target_count) == (5, 20, 25) and report.verified


async def test_a_target_that_differs_from_the_source_fails_verification(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    (await _sqlite_store(data)).close()
    extra = PgDocumentStore(pg_url, tenant=pg_tenant, follow=False)
    await extra.add("a document only the target has")
    extra.close()
    with pytest.raises(Exception, match="does not match its source: 25 documents"):
        migrate_documents("sqlite", pg_url, data_dir=data, tenant=pg_tenant)
    assert migrate_module.document_checksum(iter([]))[0] == 0


async def test_the_cli_migrates_and_reports_the_checksums(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    (await _sqlite_store(data)).close()
    result = CliRunner().invoke(
        app, ["store", "migrate", "--to", pg_url, "--tenant", pg_tenant, "--data", str(data), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["verified"] and report["copied"] == 25 and report["source_checksum"] == report["target_checksum"]
    assert report["graph"] is None  # no graph.db in this data directory


async def test_the_graph_goes_to_postgresql_and_back_with_ids_traits_and_media(tmp_path, pg_url, pg_tenant):
    data = tmp_path / "data"
    (await _sqlite_store(data)).close()
    graph = GraphStore(data / "memory" / "graph.db")
    graph.commit([Triple("Caroline", "paints", "sunsets", sentence_text="Caroline paints sunsets.",
                         media_digests=["1" * 64])], "s1", batch_id="turn-1")
    SocialGraph(graph).set_trait("Caroline", "age", "30")
    graph.close()
    args = ["store", "migrate", "--to", pg_url, "--tenant", pg_tenant, "--data", str(data), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["graph"]
    assert report["verified"] and report["copied"]["relations"] == 1 and report["copied"]["person_traits"] == 1
    again = json.loads(CliRunner().invoke(app, args).output)["graph"]  # a rerun copies nothing more
    assert again["verified"] and sum(again["copied"].values()) == 0
    on_pg = GraphStore("", sql=PgGraphSQL(pg_url, tenant=pg_tenant))
    [relation] = on_pg.recall(["Caroline"]).relations
    assert (relation.target, relation.sentence, relation.media_digests) == ("sunsets", "Caroline paints sunsets.",
                                                                            ["1" * 64])
    assert SocialGraph(on_pg).traits("Caroline") == {"age": "30"}
    assert on_pg.commit([Triple("Caroline", "paints", "sunsets")], "s1", batch_id="turn-1").duplicate
    on_pg.commit([Triple("Caroline", "visits", "museum")])  # new ids continue after the copied ones
    on_pg.close()
    back = tmp_path / "back"
    result = CliRunner().invoke(
        app, ["store", "migrate", "--from", pg_url, "--to", "sqlite", "--tenant", pg_tenant, "--data", str(back)]
    )
    assert result.exit_code == 0, result.output
    assert "copied the graph: 3 entities, 2 relations" in result.output
    local = GraphStore(back / "memory" / "graph.db")
    assert sorted(r.target for r in local.recall(["Caroline"]).relations) == ["museum", "sunsets"]
    local.close()
    result = CliRunner().invoke(app, ["store", "migrate", "--to", "sqlite", "--data", str(data)])
    assert result.exit_code == 1 and "one of each" in result.output
