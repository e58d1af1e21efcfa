"""The document tier's interface, run against every backend (SQLite file, PostgreSQL tenant).

Each test opens its store through ``open_documents`` (tests/core/memory/conftest.py) and uses
only what :class:`~homeagent_core.memory.stores.documents.BaseDocumentStore` declares.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from homeagent_core.memory.documents.store import Document
from homeagent_core.memory.stores.documents import BaseDocumentStore
from homeagent_core.memory.stores.factory import open_document_store
from homeagent_sdk.errors import UsageError
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.visibility import EVERYONE

NOTES = [
    "the red kite nests in the old oak by the river",
    "grandma's apple cake needs three eggs and a lemon",
    "the car's winter tyres are stored in the garage loft",
    "piano lesson moved to thursday at five",
]


async def _filled(open_documents: Any, path: Path, embedder: FakeEmbedder | None = None) -> BaseDocumentStore:
    store: BaseDocumentStore = open_documents(path, embedder)
    await store.add_many(
        [
            Document(content=n, source="notes", created_at=1000.0 + 10_000 * i, meta={"event_id": f"e{i}"})
            for i, n in enumerate(NOTES)
        ]
    )
    return store


async def test_each_backend_is_a_document_store(tmp_path, open_documents):
    store = open_documents(tmp_path / "documents.db")
    assert isinstance(store, BaseDocumentStore)
    assert len(store) == 0 and store.fingerprint == "" and store.stale_count == 0


async def test_added_documents_are_found_read_and_counted(tmp_path, open_documents):
    store = await _filled(open_documents, tmp_path / "documents.db", FakeEmbedder(32))
    assert len(store) == len(NOTES) and store.dense_rows() == len(NOTES)
    hits = await store.query("where do the winter tyres go", 1, touch=False, audience=EVERYONE)
    assert [h.document.content for h in hits] == [NOTES[2]]
    doc = hits[0].document
    assert doc.id in store and "doc_nothing" not in store
    got = await asyncio.to_thread(store.get, doc.id)
    assert got is not None and got.content == NOTES[2] and got.access_count == 0
    assert [d.content for d in await asyncio.to_thread(store.all)] == NOTES
    assert [d.content for d in await asyncio.to_thread(lambda: store.all(limit=2))] == NOTES[:2]
    stats = await asyncio.to_thread(store.stats)
    assert stats["documents"] == len(NOTES) and stats["dense_rows"] == len(NOTES)
    assert stats["fingerprint"] == store.fingerprint != ""


async def test_a_counted_read_keeps_a_document_out_of_the_cold_list(tmp_path, open_documents):
    store = await _filled(open_documents, tmp_path / "documents.db")
    hits = await store.query("apple cake eggs", 1, touch=True, audience=EVERYONE)
    assert hits[0].document.content == NOTES[1]
    assert await asyncio.to_thread(store.touch, [hits[0].document.id, "doc_gone"], now=2e9) == 1
    await asyncio.to_thread(store.flush)
    cold = await asyncio.to_thread(lambda: store.find_cold(older_than=60, max_reads=0, now=2e9))
    assert sorted(d.content for d in cold) == sorted(n for n in NOTES if n != NOTES[1])
    read = await asyncio.to_thread(store.get, hits[0].document.id)
    assert read is not None and read.access_count == 2


async def test_consume_and_delete_remove_documents_for_good(tmp_path, open_documents):
    store = await _filled(open_documents, tmp_path / "documents.db")
    taken = await store.consume("piano lesson thursday", 1, audience=EVERYONE)
    assert [h.document.content for h in taken] == [NOTES[3]]
    assert taken[0].document.id not in store and len(store) == len(NOTES) - 1
    first = (await asyncio.to_thread(store.all))[0]
    assert await asyncio.to_thread(store.delete, [first.id, first.id, "doc_gone"]) == 1
    assert await asyncio.to_thread(store.delete, [first.id]) == 0
    assert [h.document.content for h in await store.query("red kite oak", 3, touch=False,
        audience=EVERYONE)] != [NOTES[0]]
    assert await asyncio.to_thread(store.archived_event_ids, ["e0", "e1", "e3", "e9"]) == {"e1"}


async def test_bad_documents_and_duplicate_ids_are_refused_with_the_reason(tmp_path, open_documents):
    store = await _filled(open_documents, tmp_path / "documents.db")
    with pytest.raises(UsageError, match="non-empty content or title"):
        await store.add("  ")
    existing = (await asyncio.to_thread(store.all))[0]
    with pytest.raises(UsageError, match=f"document id '{existing.id}' already exists"):
        await store.add_many([Document(content="again", id=existing.id)])
    assert len(store) == len(NOTES)
    with pytest.raises(UsageError, match="neighbour_weight must be >= 0"):
        open_documents(tmp_path / "other.db", neighbour_weight=-1)


async def test_documents_stored_without_vectors_are_embedded_when_a_space_is_active(tmp_path, open_documents):
    store = await _filled(open_documents, tmp_path / "documents.db")
    await store.aclose()
    store = open_documents(tmp_path / "documents.db", FakeEmbedder(16))
    assert store.stale_count == len(NOTES) and store.dense_rows() == 0
    assert await store.reembed_stale(batch_size=3) == len(NOTES)
    assert store.stale_count == 0 and store.dense_rows() == len(NOTES)
    hits = await store.query("apple cake", 1, touch=False, audience=EVERYONE)
    assert hits[0].document.content == NOTES[1]


async def test_a_closed_store_refuses_reads_and_writes(tmp_path, open_documents):
    store = await _filled(open_documents, tmp_path / "documents.db")
    await store.aclose()
    with pytest.raises(UsageError, match="is closed"):
        await store.query("red kite", 1, audience=EVERYONE)
    with pytest.raises(UsageError, match="is closed"):
        await store.add("one more note")


async def test_a_query_waiting_for_the_store_lock_leaves_the_event_loop_running(tmp_path, open_documents):
    """A flush or an index rebuild holds the store lock; a query must wait for it off the loop."""
    store = await _filled(open_documents, tmp_path / "documents.db", FakeEmbedder(32))
    holding = threading.Event()
    release = threading.Event()
    released_by_loop: list[bool] = []

    def hold_lock() -> None:
        with store._lock:  # type: ignore[attr-defined]  # what flush() and a rebuild hold
            holding.set()
            released_by_loop.append(release.wait(5.0))

    holder = threading.Thread(target=hold_lock)
    holder.start()
    assert holding.wait(5.0)
    query = asyncio.create_task(store.query("red kite", 1, touch=False, audience=EVERYONE))
    for _ in range(50):  # the query embeds, then waits for the lock; the loop keeps turning
        await asyncio.sleep(0)
    release.set()
    hits = await asyncio.wait_for(query, 10.0)
    await asyncio.to_thread(holder.join, 5.0)
    assert released_by_loop == [True], "the query blocked the event loop while the store lock was held"
    assert [h.document.content for h in hits] == [NOTES[0]]


async def test_the_factory_opens_the_sqlite_backend_as_the_interface(tmp_path):
    store = open_document_store("sqlite", tmp_path, None)
    try:
        assert isinstance(store, BaseDocumentStore)
        assert (await store.add("kept note")).content == "kept note"
    finally:
        await store.aclose()


async def test_a_query_vector_of_another_space_is_refused(tmp_path, open_documents):
    store = await _filled(open_documents, tmp_path / "documents.db", FakeEmbedder(32))
    other = np.ones(16, dtype=np.float32)
    with pytest.raises(UsageError, match=r"query vector has shape \(16,\); this store's space is 32-d"):
        await asyncio.to_thread(lambda: store.search("red kite", 1, query_vector=other, audience=EVERYONE))
    right = (await FakeEmbedder(32).embed_texts(["red kite oak"]))[0]
    hits = await asyncio.to_thread(lambda: store.search("red kite", 1, query_vector=right, audience=EVERYONE))
    assert [h.document.content for h in hits] == [NOTES[0]]
