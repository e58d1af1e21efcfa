"""The document store's files beside SQLite: the mapped vector matrix and the mapped lexical snapshot.

Both are caches: whatever state a crash or damage leaves them in, a reopened store must hold
exactly SQLite's vectors and answer exactly as a store rebuilt from SQLite.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from homeagent_core.memory.documents.lexical.snapshot import read_snapshot
from homeagent_core.memory.documents.store import Document, DocumentStore
from homeagent_core.memory.documents.vector_snapshot import quantize, read_vectors
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.visibility import EVERYONE

WORDS = ["paint", "lake", "camping", "adoption", "pottery", "guitar", "marathon", "yoga", "recipe", "museum"]


def docs(start: int, count: int) -> list[Document]:
    return [
        Document(
            content=f"note {i}: " + " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7)),
            source="t",
            created_at=1000.0 + i,
        )
        for i in range(start, start + count)
    ]


def sqlite_vectors(store: DocumentStore) -> dict[int, tuple[bytes, float]]:
    """SQLite's vectors of the active space, quantized as the vector file holds them."""
    rows = store._sql.db.execute("SELECT slot, vector FROM documents WHERE vec_model = ?", (store.fingerprint,))
    slots, blobs = zip(*rows, strict=True) if store.fingerprint else ((), ())
    if not slots:
        return {}
    q, scale = quantize(np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(slots), -1))
    return {int(s): (q[i].tobytes(), float(scale[i])) for i, s in enumerate(slots)}


def dense_vectors(store: DocumentStore) -> dict[int, tuple[bytes, float]]:
    slots, q, scale = store._dense.live_rows()
    assert len(set(slots.tolist())) == len(slots), "a document has two dense rows"
    return {int(s): (q[i].tobytes(), float(scale[i])) for i, s in enumerate(slots)}


async def ranked(store: DocumentStore, query: str) -> list[str]:
    return [h.document.content for h in await store.query(query, 8, touch=False, audience=EVERYONE)]


async def test_a_running_store_serves_its_new_vectors_from_the_file_once_written(tmp_path):
    """Vectors added since opening live in memory as float32 rows until a vector file holds them."""
    embedder = FakeEmbedder(16)
    store = DocumentStore(tmp_path / "d.db", embedder)
    await store.add_many(docs(0, 60))
    store.close()
    store = DocumentStore(tmp_path / "d.db", embedder)
    added = await store.add_many(docs(60, 40))
    assert store._dense.n == 40  # in memory since the file was written
    store.flush()
    assert store._dense.n == 0 and len(store._dense.base_slot) == 100  # served from the new file
    assert dense_vectors(store) == sqlite_vectors(store)
    queries = ["note 70 guitar lake", "pottery museum", "note 12 yoga"]
    got = {q: [(h.document.id, h.score) for h in await store.query(q, 8, touch=False,
        audience=EVERYONE)] for q in queries}
    reopened = DocumentStore(tmp_path / "d.db", embedder)
    assert reopened._dense.n == 0
    for q in queries:  # the same scores a store opened from the files gives
        assert [(h.document.id, h.score) for h in await reopened.query(q, 8, touch=False, audience=EVERYONE)] == got[q]
    reopened.close()

    # rows of the adopted file are masked on delete, and new rows go to memory again
    store.delete([added[10].id])
    assert added[10].id not in {h.document.id for h in await store.query(added[10].content, 8, touch=False,
        audience=EVERYONE)}
    more = await store.add_many(docs(100, 3))
    assert store._dense.n == 3
    assert more[0].id in {h.document.id for h in await store.query(more[0].content, 8, touch=False, audience=EVERYONE)}
    assert dense_vectors(store) == sqlite_vectors(store)
    store.close()


async def test_a_vector_file_captured_before_later_changes_is_not_served(tmp_path):
    embedder = FakeEmbedder(16)
    store = DocumentStore(tmp_path / "d.db", embedder)
    await store.add_many(docs(0, 30))
    parts = store._vector_parts()
    assert parts is not None
    await store.add_many(docs(30, 2))  # after the capture: the file will miss these rows
    store._files.save_vectors(store._dense, parts)  # as the background writer saves a capture
    await store.query("note 31 guitar", 8, touch=False, audience=EVERYONE)
    assert store._dense.n == 32  # not adopted: the file is not the current rows
    assert dense_vectors(store) == sqlite_vectors(store)
    store.flush()  # a current file
    assert store._dense.n == 0 and dense_vectors(store) == sqlite_vectors(store)
    store.close()


async def test_reopening_maps_the_saved_vectors_and_reads_only_what_they_lack(tmp_path):
    store = DocumentStore(tmp_path / "d.db", FakeEmbedder(16))
    added = await store.add_many(docs(0, 40))
    store.delete([added[5].id])
    store.close()
    saved = read_vectors(tmp_path / "d.db.vec")
    assert len(saved.slots) == 39

    reopened = DocumentStore(tmp_path / "d.db", FakeEmbedder(16))
    assert len(reopened._dense.base_slot) == 39 and reopened._dense.n == 0  # every vector came from the file
    assert dense_vectors(reopened) == sqlite_vectors(reopened)
    # after the file was written: a delete and new documents, then no clean close
    reopened.delete([added[7].id])
    await reopened.add_many(docs(40, 5))
    want = await ranked(reopened, "pottery guitar note 42")
    reopened._join_snapshot()
    reopened._sql.db.close()

    again = DocumentStore(tmp_path / "d.db", FakeEmbedder(16))
    assert again._dense.n == 5  # only the five newer vectors were read from SQLite
    assert dense_vectors(again) == sqlite_vectors(again)
    assert await ranked(again, "pottery guitar note 42") == want
    again.close()


async def test_a_vector_file_of_another_space_or_store_is_not_used(tmp_path, caplog):
    store = DocumentStore(tmp_path / "d.db", FakeEmbedder(16))
    await store.add_many(docs(0, 20))
    want = await ranked(store, "museum yoga")
    store.close()
    other = DocumentStore(tmp_path / "o.db", FakeEmbedder(16))
    await other.add_many(docs(100, 20))
    other.close()

    shutil.copy(tmp_path / "o.db.vec", tmp_path / "d.db.vec")
    with caplog.at_level(logging.INFO, logger="homeagent_core.memory.documents.store"):
        reopened = DocumentStore(tmp_path / "d.db", FakeEmbedder(16))
    assert "belongs to another store" in caplog.text
    assert dense_vectors(reopened) == sqlite_vectors(reopened)
    assert await ranked(reopened, "museum yoga") == want
    reopened.close()

    # another embedding space: its stored vectors are stale, none of the file's rows is used
    switched = DocumentStore(tmp_path / "d.db", FakeEmbedder(24, name="other"))
    assert switched.stale_count == 20 and switched.stats()["dense_rows"] == 0
    switched.close()


async def test_damaged_postings_are_found_after_open_and_the_index_is_rebuilt(tmp_path, caplog):
    store = DocumentStore(tmp_path / "d.db")
    await store.add_many(docs(0, 60))
    want = await ranked(store, "note 7 museum lake")
    store.close()
    snap = read_snapshot(tmp_path / "d.db.lex")
    path = tmp_path / "d.db.lex"
    data = bytearray(path.read_bytes())
    tail = len(snap.lengths) * 4 + len(snap.tfs) * 2
    data[-tail - 9] ^= 0x01  # a byte inside the posting slots, which open maps unchecked
    path.write_bytes(bytes(data))

    with caplog.at_level(logging.INFO, logger="homeagent_core.memory.documents.store"):
        reopened = DocumentStore(tmp_path / "d.db")
        assert reopened._verify_thread is not None
        reopened._verify_thread.join(timeout=60)
    assert "rebuilding the lexical index" in caplog.text
    assert reopened._lex.unchecked is None
    assert await ranked(reopened, "note 7 museum lake") == want
    reopened.close()
    assert read_snapshot(tmp_path / "d.db.lex").clean  # close wrote a fresh, checked snapshot


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from homeagent_core.memory.documents.lexical import index as lexical
    from homeagent_core.memory.documents.store import DocumentStore
    from homeagent_sdk.testing import FakeEmbedder
    from homeagent_sdk.visibility import EVERYONE

    lexical.DELTA_MAX = 2000  # fold often: background snapshots of both files all the time
    WORDS = "paint lake camping adoption pottery guitar marathon yoga recipe museum".split()

    async def main(root, start):
        store = DocumentStore(root + "/documents.db", FakeEmbedder(16))
        store.snapshot_min_docs, store.snapshot_fraction = 1, 0.0
        i = start
        while True:
            words = " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 5))
            await store.add(f"entry {i} {words}", source="w")
            if i % 7 == 0:
                hits = await store.query(f"entry {i - 3}", 1, touch=False, audience=EVERYONE)
                store.delete([h.document.id for h in hits])
            print(f"doc {i}", flush=True)
            i += 1

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


async def test_kill_9_during_writes_leaves_files_that_agree_with_sqlite(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    start = 0
    for _ in range(2):  # the second writer starts from what the first kill left
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(script), str(tmp_path), str(start),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        )
        assert proc.stdout is not None
        seen = 0
        while seen < 120:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            assert line, (await proc.stderr.read()).decode() if proc.stderr else "writer exited"
            seen += 1
            start = int(line.split()[1]) + 1
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        assert proc.returncode == -signal.SIGKILL
    assert (tmp_path / "documents.db.vec").exists() and (tmp_path / "documents.db.lex").exists()

    store = DocumentStore(tmp_path / "documents.db", FakeEmbedder(16))
    if store._verify_thread is not None:
        store._verify_thread.join(timeout=60)
    assert dense_vectors(store) == sqlite_vectors(store)
    assert len(store) == store._sql.db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    mapped = await ranked(store, "entry 100 pottery guitar")
    store._join_snapshot()
    store._sql.db.close()
    for suffix in (".vec", ".lex"):
        (tmp_path / f"documents.db{suffix}").unlink()
    rebuilt = DocumentStore(tmp_path / "documents.db", FakeEmbedder(16))
    assert rebuilt._dense.base_slot.size == 0  # everything read from SQLite this time
    assert await ranked(rebuilt, "entry 100 pottery guitar") == mapped
    rebuilt.close()


async def test_a_large_base_is_searched_through_its_projection_then_exactly(tmp_path, monkeypatch):
    from homeagent_core.memory.documents import ranking as doc_ranking
    from homeagent_core.memory.documents import vector_snapshot

    monkeypatch.setattr(vector_snapshot, "PROJECT_MIN_ROWS", 100)
    monkeypatch.setattr(vector_snapshot, "PROJECT_DIM", 8)
    monkeypatch.setattr(doc_ranking, "DENSE_PREFILTER", 30)
    embedder = FakeEmbedder(32)
    store = DocumentStore(tmp_path / "d.db", embedder, lexical_weight=0.0, neighbour_weight=0.0)
    await store.add_many(docs(0, 300))
    exact = await ranked(store, "note 123: guitar yoga paint")
    store.close()
    saved = read_vectors(tmp_path / "d.db.vec")
    assert saved.projection is not None and saved.projected is not None and saved.low_scale is not None
    full = np.asarray(saved.q, dtype=np.float32) * saved.scale[:, None]
    assert np.allclose(saved.projected * saved.low_scale, full @ saved.projection, atol=float(saved.low_scale.max()))

    reopened = DocumentStore(tmp_path / "d.db", embedder, lexical_weight=0.0, neighbour_weight=0.0)
    assert reopened._dense.base_low is not None
    got = await ranked(reopened, "note 123: guitar yoga paint")
    assert got[0] == exact[0]
    # scores come from the full vectors: the best rows score as the exact search scores them
    assert len(set(got[:3]) & set(exact[:3])) >= 2
    reopened.close()


def columns(store: DocumentStore) -> tuple[list[int], list[float], list[str], list[int]]:
    """The per-document numbers a store holds in memory, by slot (sources by name)."""
    names = {code: name for name, code in store._table.source_codes.items()}
    slots = np.flatnonzero(store._table.alive).tolist()
    return (
        slots,
        store._table.created[slots].tolist(),
        [names[int(c)] for c in store._table.source[slots]],
        store._lex._dl[slots].astype(int).tolist(),
    )


async def test_the_meta_file_is_used_only_while_it_matches_sqlite(tmp_path, caplog):
    embedder = FakeEmbedder(16)
    store = DocumentStore(tmp_path / "d.db", embedder)
    first = await store.add_many(docs(0, 30))
    await store.add("another source", source="other")
    store.close()
    assert (tmp_path / "d.db.meta").exists()

    def reference() -> tuple[list[int], list[float], list[str], list[int]]:
        (tmp_path / "ref").mkdir(exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            if (tmp_path / f"d.db{suffix}").exists():
                shutil.copy(tmp_path / f"d.db{suffix}", tmp_path / "ref" / f"d.db{suffix}")
        ref = DocumentStore(tmp_path / "ref" / "d.db", embedder)  # no files beside it: every row read
        out = columns(ref)
        ref._closed = True
        ref._sql.db.close()
        shutil.rmtree(tmp_path / "ref")
        return out

    with caplog.at_level(logging.INFO, logger="homeagent_core.memory.documents.store"):
        reopened = DocumentStore(tmp_path / "d.db", embedder)
    assert "reading every row" not in caplog.text
    assert columns(reopened) == reference()
    # rows after the file are read from SQLite; a delete makes the file stale
    await reopened.add_many(docs(30, 4))
    reopened._sql.db.close()  # as after kill -9: nothing written beside the database
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="homeagent_core.memory.documents.store"):
        after_adds = DocumentStore(tmp_path / "d.db", embedder)
    assert "reading every row" not in caplog.text
    assert columns(after_adds) == reference()
    after_adds.delete([first[2].id])
    after_adds._join_snapshot()
    after_adds._sql.db.close()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="homeagent_core.memory.documents.store"):
        after_delete = DocumentStore(tmp_path / "d.db", embedder)
    assert "older than the last change" in caplog.text
    assert columns(after_delete) == reference()
    assert len(after_delete) == 34
    after_delete.close()


def write_float32_file(path, *, tag: str, fingerprint: str, dim: int, slots: list[int]) -> None:
    """A vector file in the previous format (version 1: float32 rows), rows deliberately wrong."""
    import json
    import struct

    header = json.dumps(
        {"version": 1, "tag": tag, "fingerprint": fingerprint, "dim": dim, "watermark": max(slots),
         "rows": len(slots), "projected": 0}
    ).encode()
    head = b"HAVECS\x00\x01" + struct.pack("<I", len(header)) + header
    head += b"\x00" * (-len(head) % 64)
    matrix = np.ones((len(slots), dim), dtype="<f4")
    path.write_bytes(head + np.asarray(slots, dtype="<i8").tobytes() + matrix.tobytes())


async def test_a_float32_vector_file_of_the_previous_format_is_refused_and_rewritten(tmp_path, caplog):
    embedder = FakeEmbedder(16)
    store = DocumentStore(tmp_path / "d.db", embedder)
    await store.add_many(docs(0, 30))
    want = await ranked(store, "pottery guitar note 12")
    slots = sorted(sqlite_vectors(store))
    tag = store._store_id
    store.close()
    write_float32_file(tmp_path / "d.db.vec", tag=tag, fingerprint=embedder.info.fingerprint, dim=16, slots=slots)

    with caplog.at_level(logging.INFO, logger="homeagent_core.memory.documents.store"):
        reopened = DocumentStore(tmp_path / "d.db", embedder)
    assert "version 1 is not 2" in caplog.text
    assert reopened._dense.n == 30  # every vector read from SQLite, none from the old file
    assert dense_vectors(reopened) == sqlite_vectors(reopened)
    assert await ranked(reopened, "pottery guitar note 12") == want
    reopened.close()
    saved = read_vectors(tmp_path / "d.db.vec")  # rewritten in the current format
    assert saved.q.dtype == np.int8 and sorted(saved.slots.tolist()) == slots


async def test_the_vector_file_holds_int8_rows_and_queries_rescore_the_best_exactly(tmp_path):
    embedder = FakeEmbedder(32)
    store = DocumentStore(tmp_path / "d.db", embedder, lexical_weight=0.0, neighbour_weight=0.0)
    await store.add_many(docs(0, 200))
    store.close()
    path = tmp_path / "d.db.vec"
    saved = read_vectors(path)
    assert saved.q.dtype == np.int8 and saved.q.shape == (200, 32)
    assert path.stat().st_size < 200 * 32 * 4 // 2  # a float32 matrix alone would be 25,600 bytes

    reopened = DocumentStore(tmp_path / "d.db", embedder, lexical_weight=0.0, neighbour_weight=0.0)
    assert reopened._dense.n == 0  # every row is the mapped int8 one
    text = "note 17: guitar yoga"
    qvec = (await embedder.embed_texts([text]))[0]
    rows = reopened._sql.db.execute("SELECT slot, vector FROM documents").fetchall()
    exact = {int(s): float(np.frombuffer(b, dtype=np.float32) @ qvec) for s, b in rows}
    order = sorted(exact, key=lambda s: -exact[s])[:8]
    hits = reopened.search(text, 8, query_vector=qvec, audience=EVERYONE)
    slot_of = reopened._sql.slots_of(h.document.id for h in hits)
    got = [slot_of[h.document.id] for h in hits]
    assert got == order
    # fused scores are dense scores over the peak: the ratios are the exact cosines' ratios
    for hit, slot in zip(hits, got, strict=True):
        assert abs(hit.score / hits[0].score - exact[slot] / exact[got[0]]) < 1e-5
    # ... which the int8 rows alone do not give
    row = {int(s): i for i, s in enumerate(saved.slots)}
    approx = {s: float(saved.q[row[s]].astype(np.float32) @ qvec * saved.scale[row[s]]) for s in got}
    assert max(abs(approx[s] - exact[s]) for s in got) > 1e-5
    reopened.close()


def test_the_top_rows_of_a_long_scan_are_the_largest_scores():
    from homeagent_core.memory.documents.top_k import top_indices

    rng = np.random.default_rng(3)
    for n, k in ((200_000, 512), (50_000, 64), (1_000, 64), (40, 64)):
        scores = rng.standard_normal(n).astype(np.float32)
        got = top_indices(scores, k)
        assert len(got) == min(n, k) and len(set(got.tolist())) == len(got)
        assert np.array_equal(np.sort(scores[got]), np.sort(scores)[-min(n, k):])
    # a sample that misses the best rows (all at the end): every score is partitioned instead
    scores = np.zeros(200_000, dtype=np.float32)
    scores[-600:] = np.arange(1, 601, dtype=np.float32)
    assert np.array_equal(np.sort(scores[top_indices(scores, 512)]), np.arange(89, 601, dtype=np.float32))
    # mostly zeros (a lexical score array): the sample's threshold is 0, so the positives are taken
    scores = np.zeros(300_000, dtype=np.float32)
    where = rng.choice(300_000, 700, replace=False)
    scores[where] = rng.random(700).astype(np.float32) + 0.5
    got = top_indices(scores, 256)
    assert np.array_equal(np.sort(scores[got]), np.sort(scores[where])[-256:])
    # fewer positives than k: all of them, the rest ties at 0
    scores[where[100:]] = 0.0
    got = top_indices(scores, 256)
    assert len(got) == 256 and set(where[:100].tolist()) <= set(got.tolist())


@pytest.mark.parametrize("pool", [None, 100])
async def test_the_best_fused_documents_get_exact_dense_scores_over_int8_rows(tmp_path, monkeypatch, pool):
    from homeagent_core.memory.documents import ranking as doc_ranking
    from homeagent_core.memory.documents import vectors as doc_vectors

    monkeypatch.setattr(doc_vectors, "RESCORE", 4)  # the dense leg alone makes only its four best scores exact
    if pool is not None:  # the best fused slots come from a pool smaller than the store (as in a large one)
        monkeypatch.setattr(doc_ranking, "SMOOTH_POOL", pool)
    embedder = FakeEmbedder(32)
    store = DocumentStore(tmp_path / "d.db", embedder, neighbour_weight=0.0)
    await store.add_many(docs(0, 300))
    queries = ["note 17: guitar yoga", "pottery lake", "museum marathon note 230", "paint camping recipe"]
    want = {q: [(h.document.id, h.score) for h in await store.query(q, 10, touch=False,
        audience=EVERYONE)] for q in queries}
    assert store._dense.n == 300  # the float32 rows held since the adds: exact
    store.close()

    reopened = DocumentStore(tmp_path / "d.db", embedder, neighbour_weight=0.0)
    assert reopened._dense.n == 0  # every row is the mapped int8 one
    for q in queries:
        got = [(h.document.id, h.score) for h in await reopened.query(q, 10, touch=False, audience=EVERYONE)]
        assert np.allclose([s for _, s in got], [s for _, s in want[q]], rtol=0, atol=1e-6)
        exact = dict(want[q])  # equal scores (documents of the same words) may come in either order
        assert all(i in exact and abs(exact[i] - s) < 1e-6 for i, s in got[:-1])
    reopened.close()


async def test_a_small_store_holds_its_forward_lists_in_memory_once_the_snapshot_is_checked(tmp_path):
    store = DocumentStore(tmp_path / "d.db")
    await store.add_many(docs(0, 80))
    want = await ranked(store, "note 7 museum lake")
    store.close()

    reopened = DocumentStore(tmp_path / "d.db")
    assert reopened._verify_thread is not None
    reopened._verify_thread.join(timeout=60)
    assert reopened._lex.unchecked is None and reopened._lex.forward_file_bytes == 0
    assert await ranked(reopened, "note 7 museum lake") == want
    reopened.close()

    class Tight(DocumentStore):
        resident_forward_bytes = 16  # smaller than these lists: they stay in the file

    tight = Tight(tmp_path / "d.db")
    assert tight._verify_thread is not None
    tight._verify_thread.join(timeout=60)
    assert tight._lex.unchecked is None and tight._lex.forward_file_bytes > 0
    assert await ranked(tight, "note 7 museum lake") == want
    tight.close()


async def test_many_rows_added_since_the_vector_file_are_prescanned_as_int8_and_scored_exactly(tmp_path, monkeypatch):
    """Past MEMORY_SCAN in-memory rows an int8 scan picks the best, whose scores stay the float32 ones."""
    from homeagent_core.memory.documents import vectors as doc_vectors

    embedder = FakeEmbedder(32)
    store = DocumentStore(tmp_path / "d.db", embedder, lexical_weight=0.0, neighbour_weight=0.0)
    await store.add_many(docs(0, 300))
    assert store._dense.n == 300 and len(store._dense.base_slot) == 0  # none in a file yet
    rows = store._sql.db.execute("SELECT slot, vector FROM documents").fetchall()
    queries = ["note 17: guitar yoga", "museum lake 40", "note 250 pottery"]
    qvecs = await embedder.embed_texts(queries)
    full = [
        [(h.document.id, h.score) for h in store.search(q, 8, query_vector=v, audience=EVERYONE)]
        for q, v in zip(queries, qvecs, strict=True)
    ]

    monkeypatch.setattr(doc_vectors, "MEMORY_SCAN", 64)
    monkeypatch.setattr("homeagent_core.memory.documents.ranking.DENSE_PREFILTER", 100)
    for q, v, want in zip(queries, qvecs, full, strict=True):
        parts = store._dense.scores(v, 100)
        assert len(parts) == 1 and len(parts[0][0]) == 100  # only the int8 scan's best 100 are scored
        exact = {int(s): float(np.frombuffer(b, dtype=np.float32) @ v) for s, b in rows}
        assert all(abs(exact[int(s)] - float(x)) < 1e-6 for s, x in zip(*parts[0], strict=True))
        assert [(h.document.id, h.score) for h in store.search(q, 8, query_vector=v, audience=EVERYONE)] == want
    # the int8 copy follows deletions (the last row is swapped into the deleted one's place)
    slot = int(store._dense.row_slot[5])
    store._dense.drop(slot)
    q8, scale = quantize(store._dense.rows[: store._dense.n])
    assert np.array_equal(q8, store._dense.rows_q[: store._dense.n])
    assert np.array_equal(scale, store._dense.rows_scale[: store._dense.n])
    store.close()
