"""The document store's lexical snapshot: written in the background, checked on open."""

from __future__ import annotations

import json
import logging
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from homeagent_core.memory.documents.lexical import index as lexical
from homeagent_core.memory.documents.lexical.snapshot import read_snapshot
from homeagent_core.memory.documents.store import Document, DocumentStore
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.visibility import EVERYONE

WORDS = ["paint", "lake", "camping", "adoption", "pottery", "guitar", "marathon", "yoga", "recipe", "museum", "sunset"]


def docs(start: int, count: int) -> list[Document]:
    return [
        Document(
            content=f"note {i}: " + " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)),
            source="t",
            created_at=1000.0 + i,
        )
        for i in range(start, start + count)
    ]


def crash(store: DocumentStore) -> None:
    """Leave the store as ``kill -9`` would: nothing flushed (a running snapshot may finish)."""
    store._join_snapshot()
    store._sql.db.close()


async def ids(store: DocumentStore, query: str, k: int = 8) -> list[str]:
    return [h.document.id for h in await store.query(query, k, touch=False, audience=EVERYONE)]


def rewrite_in_format_3(path: Path) -> None:
    """Rewrite a snapshot in the previous layout (version 3): buckets in the forward lists, 16-bit counts."""
    snap = read_snapshot(path)
    arrays = [
        snap.counts.astype("<i4"), snap.slots.astype("<i4"), snap.tfs.astype("<u2"),
        snap.fwd_counts.astype("<i4"), snap.term_buckets[snap.fwd_terms[0]].astype("<u4"),
        snap.fwd_tfs[0].astype("<u2"), snap.lengths.astype("<f4"),
    ]
    header = json.dumps({
        "version": 3, "tag": snap.tag, "watermark": snap.watermark, "clean": snap.clean,
        "sizes": [len(a) for a in arrays], "crc32": [zlib.crc32(a.tobytes()) for a in arrays],
    }).encode()
    path.write_bytes(b"HALEXSN\x03" + struct.pack("<I", len(header)) + header + b"".join(a.tobytes() for a in arrays))


@pytest.fixture
def frequent_merges(monkeypatch):
    monkeypatch.setattr(lexical, "DELTA_MAX", 500)


async def test_background_snapshot_lets_a_crashed_store_reindex_only_the_tail(
    tmp_path, frequent_merges, caplog
):
    store = DocumentStore(tmp_path / "d.db")
    store.snapshot_min_docs, store.snapshot_fraction = 50, 0.0
    for start in range(0, 300, 7):  # small batches: a batch is folded into the base at most once
        await store.add_many(docs(start, min(7, 300 - start)))
    store._join_snapshot()
    snapshot = tmp_path / "d.db.lex"
    assert snapshot.exists()
    covered = store._files.watermark
    assert 0 < covered < 300
    await store.add_many(docs(300, 20))  # the tail: after the last snapshot
    await store.add("pottery marathon unique-tail-word", source="t")
    store.delete([store.all()[5].id])
    before = await ids(store, "pottery marathon unique-tail-word")
    crash(store)

    with caplog.at_level(logging.INFO, logger="homeagent_core.memory.documents.store"):
        reopened = DocumentStore(tmp_path / "d.db")
    assert "rebuilding" not in caplog.text
    assert len(reopened) == 320
    assert await ids(reopened, "pottery marathon unique-tail-word") == before
    reopened.close()


async def test_clean_close_without_changes_does_not_rewrite_the_snapshot(tmp_path):
    store = DocumentStore(tmp_path / "d.db")
    await store.add_many(docs(0, 30))
    store.close()
    snapshot = tmp_path / "d.db.lex"
    stamp = snapshot.stat().st_mtime_ns
    again = DocumentStore(tmp_path / "d.db")
    again.close()
    assert snapshot.stat().st_mtime_ns == stamp


@pytest.mark.parametrize("case", ["other store", "older database", "damaged", "legacy npz", "previous format"])
async def test_a_snapshot_that_does_not_match_the_database_is_replaced_by_a_rebuild(
    tmp_path, caplog, case
):
    store = DocumentStore(tmp_path / "d.db")
    await store.add_many(docs(0, 40))
    store.close()
    expected_docs = 40
    if case == "other store":
        other = DocumentStore(tmp_path / "o.db")
        await other.add_many(docs(100, 40))
        other.close()
        shutil.copy(tmp_path / "o.db.lex", tmp_path / "d.db.lex")
    elif case == "older database":
        # a database restored from an older copy; the snapshot covers rows it never had
        shutil.copy(tmp_path / "d.db", tmp_path / "old.db")
        newer = DocumentStore(tmp_path / "d.db")
        await newer.add_many(docs(40, 10))
        newer.close()
        for suffix in ("-wal", "-shm"):
            (tmp_path / f"d.db{suffix}").unlink(missing_ok=True)
        shutil.copy(tmp_path / "old.db", tmp_path / "d.db")
    elif case == "previous format":
        rewrite_in_format_3(tmp_path / "d.db.lex")
    elif case == "damaged":
        data = bytearray((tmp_path / "d.db.lex").read_bytes())
        data[-10] ^= 0xFF
        (tmp_path / "d.db.lex").write_bytes(bytes(data))
    else:
        (tmp_path / "d.db.lex").unlink()
        (tmp_path / "d.db.lex.npz").write_bytes(b"an old snapshot format")
    with caplog.at_level(logging.INFO, logger="homeagent_core.memory.documents.store"):
        reopened = DocumentStore(tmp_path / "d.db")
    if case != "legacy npz":
        assert "rebuilding the lexical index" in caplog.text
    assert not (tmp_path / "d.db.lex.npz").exists()
    assert len(reopened) == expected_docs
    got = await ids(reopened, "note 7 museum", 40)
    reopened.close()
    if case == "previous format":
        assert read_snapshot(tmp_path / "d.db.lex").watermark == 40  # rewritten in the current format

    fresh = DocumentStore(tmp_path / "fresh.db")
    await fresh.add_many(docs(0, 40))
    by_content = {d.id: d.content for d in fresh.all()}
    want = [by_content[i] for i in await ids(fresh, "note 7 museum", 40)]
    fresh.close()
    again = DocumentStore(tmp_path / "d.db")
    contents = {d.id: d.content for d in again.all()}
    assert [contents[i] for i in got] == want
    again.close()


async def test_a_damaged_term_blob_is_reported_with_a_way_out(tmp_path):
    store = DocumentStore(tmp_path / "d.db")
    await store.add_many(docs(0, 5))
    store._sql.db.execute("UPDATE documents SET lex = x'0102030405' WHERE slot = 3")
    crash(store)
    (tmp_path / "d.db.lex").unlink(missing_ok=True)
    with pytest.raises(MemoryStoreError, match="damaged, restore it"):
        DocumentStore(tmp_path / "d.db")


async def test_dense_rows_follow_deletes_and_reloads(tmp_path):
    from homeagent_sdk.testing import FakeEmbedder

    store = DocumentStore(tmp_path / "d.db", FakeEmbedder(16))
    added = await store.add_many(docs(0, 30))
    store.delete([added[3].id, added[29].id, added[0].id])
    assert store.stats()["dense_rows"] == 27
    slots, matrix, scale = store._dense.live_rows()
    id_of = dict(store._sql.db.execute("SELECT slot, id FROM documents").fetchall())
    rows_by_id = {id_of[int(s)]: (matrix[r], scale[r]) for r, s in enumerate(slots)}
    store.close()
    reopened = DocumentStore(tmp_path / "d.db", FakeEmbedder(16))
    assert reopened.stats()["dense_rows"] == 27
    slots, matrix, scale = reopened._dense.live_rows()
    assert sorted(id_of[int(s)] for s in slots) == sorted(rows_by_id)
    for r, slot in enumerate(slots):
        assert np.array_equal(matrix[r], rows_by_id[id_of[int(slot)]][0])
        assert scale[r] == rows_by_id[id_of[int(slot)]][1]
    reopened.close()


async def test_close_brings_a_background_snapshot_up_to_the_newest_document(tmp_path, frequent_merges):
    from homeagent_core.memory.documents.lexical.snapshot import read_snapshot

    store = DocumentStore(tmp_path / "d.db")
    store.snapshot_min_docs, store.snapshot_fraction = 50, 0.0
    for start in range(0, 200, 7):  # small batches: a batch is folded into the base at most once
        await store.add_many(docs(start, min(7, 200 - start)))
    store._join_snapshot()
    assert read_snapshot(tmp_path / "d.db.lex").watermark < 200  # the delta was not in it
    store.close()
    assert read_snapshot(tmp_path / "d.db.lex").watermark == 200


async def test_a_snapshot_that_cannot_be_written_is_reported_and_close_still_closes(tmp_path, caplog):
    store = DocumentStore(tmp_path / "d.db")
    await store.add_many(docs(0, 10))
    (tmp_path / "d.db.lex.tmp").mkdir()  # the snapshot's temporary file cannot be created
    with pytest.raises(MemoryStoreError, match=r"cannot write the lexical snapshot.*free space"):
        store.flush()
    with caplog.at_level(logging.WARNING, logger="homeagent_core.memory.documents.store"):
        store.close()
    assert "cannot write the lexical snapshot" in caplog.text
    (tmp_path / "d.db.lex.tmp").rmdir()
    reopened = DocumentStore(tmp_path / "d.db")
    assert len(reopened) == 10 and await ids(reopened, "note 3")
    reopened.close()
