"""L2 document store: durable documents with fused dense + lexical search.

Documents (archived context events, ``doc_commit`` notes, graph snapshots) live in a database
(:mod:`homeagent_core.memory.documents.sql`; SQLite, durable when a write returns). Search never
reads the database: a float32 matrix of the rows whose vector belongs to the active embedding
space (:mod:`homeagent_core.memory.documents.vectors`) and a character n-gram BM25 index
(:mod:`homeagent_core.memory.documents.lexical.index`), fused and smoothed over conversation neighbours
(:mod:`homeagent_core.memory.documents.ranking`). Opening maps cache files beside the database and
reads from it only what they lack (:mod:`homeagent_core.memory.documents.index`), so a store of 100k
documents answers its first query a fraction of a second after it is opened, after a clean
close or a crash alike.

Vectors are stored with their space's fingerprint; only rows of the active fingerprint and
dimension enter the matrix. :meth:`DocumentStore.reembed_stale` re-embeds the others.
Every write updates the in-memory structures incrementally; nothing is rebuilt per insert.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.lexical.buckets import decode_terms, encode_terms, term_counts
from homeagent_core.lexical.terms import TERMS_VERSION
from homeagent_core.memory.audience import LIBRARY_OWNER
from homeagent_core.memory.documents import ranking as doc_ranking
from homeagent_core.memory.documents.index import IndexFiles, SlotTable
from homeagent_core.memory.documents.lexical.snapshot import verify_arrays
from homeagent_core.memory.documents.meta_file import DocMeta
from homeagent_core.memory.documents.model import DocHit, Document, format_related, new_doc_id
from homeagent_core.memory.documents.sql import DocumentRecords, SqliteRecords
from homeagent_core.memory.documents.time_order import TimeOrder
from homeagent_core.memory.documents.vector_snapshot import read_vectors
from homeagent_core.memory.documents.vectors import DenseRows, VectorParts
from homeagent_core.memory.stores.documents import BaseDocumentStore
from homeagent_sdk.errors import MemoryStoreError, UsageError
from homeagent_sdk.visibility import EVERYONE, Audience

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = ["DocHit", "Document", "DocumentStore", "format_related", "new_doc_id"]

log = logging.getLogger(__name__)


def _derive_terms(text: str) -> tuple[bytes, int]:
    buckets, counts, length = term_counts(text)
    return encode_terms(buckets, counts), length


class DocumentStore(BaseDocumentStore):
    """Document store with in-memory fused search over a durable database (the embedded backend
    of :class:`~homeagent_core.memory.stores.documents.BaseDocumentStore`).

    Args:
        path: the SQLite file (``<data>/memory/documents.db``); its folder is created.
        embedder: the active embedding space; ``None`` = lexical search only.
        dense_weight / lexical_weight: fusion weights of the two paths.
        neighbour_weight: share of an adjacent document's score a document receives.
        neighbour_window: seconds within which same-source documents count as adjacent.
        records: the database to use instead of SQLite at ``path`` (any
            :class:`~homeagent_core.memory.documents.sql.DocumentRecords`); ``path`` still names
            where the cache files go.

    Opening loads metadata, the vector matrix and the lexical index synchronously; call it
    from a worker thread in async code. The ``async`` methods run their blocking parts on the
    documents worker pool; the plain ones are thread-safe and may wait for the store lock.

    The lexical index is snapshotted to ``<path>.lex``, the dense vectors to ``<path>.vec`` (int8;
    a query rescores its best rows with the float32 vectors in the database) and
    the per-document numbers to ``<path>.meta``: in a background thread whenever
    ``snapshot_min_docs`` and ``snapshot_fraction`` of the documents have been added since the
    last snapshot, and on :meth:`flush` / :meth:`close`. Opening maps the newest valid files and
    reads from the database only what they lack (documents stored after them, vectors
    re-embedded since), so start-up after a crash costs about the same as after a clean close.
    The database stays the only durable record: the files are caches checked against it on
    open; the snapshot's posting checksums are checked by a background thread, which rebuilds
    the index if they do not match.
    """

    snapshot_min_docs: int = 2000
    """Documents added since the last snapshot before a background one is written ..."""
    snapshot_fraction: float = 0.05
    """... and the share of the store they must also reach."""
    resident_forward_bytes: int = 192 << 20
    """Forward lists (each document's own terms, read to rescore a query's candidates) up to this
    size are kept in memory once the background check of the snapshot has read them: a query
    then gathers its candidates' lists in one pass instead of a read per list (about 1 ms of a
    query at 100k documents, whose lists take 77 MB). Larger ones (770 MB at 1M documents) stay
    in the file, read per query."""

    def __init__(
        self,
        path: str | Path,
        embedder: EmbeddingProvider | None = None,
        *,
        dense_weight: float = 0.5,
        lexical_weight: float = 0.5,
        neighbour_weight: float = 0.2,
        neighbour_window: float = 3600.0,
        records: DocumentRecords | None = None,
        owner: str = LIBRARY_OWNER,
    ) -> None:
        super().__init__(
            embedder, dense_weight=dense_weight, lexical_weight=lexical_weight,
            neighbour_weight=neighbour_weight, neighbour_window=neighbour_window, owner=owner,
        )
        self.path = Path(path)
        self._lock = threading.RLock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if records is None:
            sqlite = SqliteRecords(self.path, owner=self.owner)
            self.migrated = sqlite.migrated
        self._sql: DocumentRecords = records if records is not None else sqlite
        self._closed = False
        self._dirty_access: dict[int, tuple[float, int]] = {}
        self._lex_changes = 0
        self._verify_thread: threading.Thread | None = None
        self._load()

    # -- loading ---------------------------------------------------------------------------

    def _load(self) -> None:
        self._store_id = self._sql.store_id()
        self._files = IndexFiles(self.path, tag=self._store_id, fingerprint=self._fingerprint, dim=self._dim)
        self._upgrade_terms()
        columns = self._files.read_columns(self._sql)
        slots, _, _, wanted, lengths, _ = columns
        self._table = SlotTable(columns)
        self._dense = DenseRows(self._dim, self._table.capacity)
        self._adopt_tried = -1
        self._stale = 0
        if self._fingerprint:
            want = np.zeros(self._table.capacity, dtype=bool)
            want[slots[wanted]] = True
            bad = self._dense.load(
                self._files.vec_path, want, tag=self._store_id, fingerprint=self._fingerprint,
                max_slot=self._sql.max_slot(), read_missing=self._sql.vectors,
            )
            self._stale = int(len(slots) - wanted.sum()) + bad
        self._time = TimeOrder(self.neighbour_window)
        self._lex = self._files.load_lexical(self._sql, slots, lengths)
        if self._lex.unchecked is not None:
            self._verify_thread = threading.Thread(
                target=self._verify_lexical, name=f"lexical-verify:{self.path.name}", daemon=True
            )
            self._verify_thread.start()
        with self._lock:
            self._maybe_snapshot()
        if self._stale:
            log.info(
                "document store %s: %d documents have no vector in the active space %s; "
                "reembed_stale() recomputes them",
                self.path,
                self._stale,
                self._fingerprint,
            )

    def _verify_lexical(self) -> None:
        """Check the mapped snapshot's checksums; on damage rebuild the index from the database.

        Runs in a background thread after open, so start-up needs no pass over the postings.
        Queries are answered from the mapped index meanwhile; a damaged snapshot (disk
        corruption: a crash never leaves one, see :mod:`homeagent_core.memory.documents.lexical.snapshot`)
        is removed and the index rebuilt from every document's stored terms under the lock.
        """
        index = self._lex
        arrays = index.unchecked
        if arrays is None:
            return
        with contextlib.suppress(OSError, AttributeError):  # idle priority: the first queries come first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        resident = index.forward_file_bytes <= self.resident_forward_bytes
        try:
            kept = verify_arrays(arrays, keep=frozenset({"fwd_terms", "fwd_tfs"}) if resident else frozenset())
        except ValueError as exc:
            with self._lock:
                if self._closed or self._lex is not index:
                    return
                log.warning("document store %s: rebuilding the lexical index: %s", self.path, exc)
                self._files.join()
                self._files.lex_path.unlink(missing_ok=True)
                alive = np.flatnonzero(self._table.alive).astype(np.int64)
                self._lex = self._files.load_lexical(self._sql, alive, np.zeros(len(alive), dtype=np.int64))
                self._lex_changes += 1
                self._files.lex_saved = -1
            return
        index.unchecked = None
        if "fwd_terms" in kept and "fwd_tfs" in kept:
            with self._lock:
                if not self._closed and self._lex is index:
                    index.hold_forward(kept["fwd_terms"], kept["fwd_tfs"])

    def _upgrade_terms(self) -> None:
        """Re-derive every document's stored lexical terms when the term scheme changed.

        One transaction (a crash leaves the old terms and version, and the next start redoes
        it); the lexical snapshot, built from the old terms, is removed.
        """
        done = self._sql.rederive_terms(TERMS_VERSION, _derive_terms)
        if done:
            self._files.lex_path.unlink(missing_ok=True)
            log.info("document store %s: re-derived the lexical terms of %d documents (term scheme %s)",
                     self.path, done, TERMS_VERSION)

    # -- properties ------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._table.count

    def __contains__(self, doc_id: object) -> bool:
        if not isinstance(doc_id, str):
            return False
        with self._lock:
            self._check_open()
            return bool(self._sql.slots_of([doc_id]))

    def dense_rows(self) -> int:
        """Documents with a vector in the active space."""
        return len(self._dense)

    def stats(self) -> dict[str, Any]:
        """Counts for introspection (documents, dense rows, stale rows, space)."""
        return {
            "documents": self._table.count,
            "dense_rows": len(self._dense),
            "stale_vectors": self._stale,
            "fingerprint": self._fingerprint,
            "path": str(self.path),
        }

    # -- writes ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"document store {self.path} is closed")

    def _taken_ids(self, ids: list[str]) -> list[str]:
        with self._lock:
            self._check_open()
            return list(self._sql.slots_of(ids))

    def _insert(self, docs: list[Document], vectors: npt.NDArray[np.float32] | None) -> None:
        terms = [term_counts(d.text) for d in docs]
        blobs = [(encode_terms(buckets, counts), length) for buckets, counts, length in terms]
        with self._lock:
            self._check_open()
            self._flush_access()
            for doc in docs:
                doc.last_access = doc.last_access or doc.created_at
            vecs = [v.tobytes() for v in vectors] if vectors is not None else [None] * len(docs)
            slots = self._sql.insert(docs, vecs, self._fingerprint, blobs)
            for slot, doc in zip(slots, docs, strict=True):
                self._table.register(slot, doc.created_at, doc.source, doc.person, doc.visibility)
            self._lex.add_many_terms(np.asarray(slots, dtype=np.int64), terms)
            self._dense.grow(self._table.capacity)
            if vectors is not None:
                self._dense.append(np.asarray(slots, dtype=np.int64), vectors)
            self._time.append(np.asarray(slots, dtype=np.int64), self._table.created, self._table.source)
            self._lex_changes += 1
            self._maybe_snapshot()

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id; returns how many existed. Durable on return."""
        with self._lock:
            self._check_open()
            slots = list(self._sql.slots_of(doc_ids).values())
            if not slots:
                return 0
            blobs = self._sql.delete(slots)
            for slot, blob in blobs:
                self._lex.remove(slot, decode_terms(blob)[0])
            self._lex_changes += 1
            self._table.count -= len(slots)
            for slot in slots:
                self._table.alive[slot] = False
                self._dirty_access.pop(slot, None)
                self._dense.drop(slot)
            self._time.invalidate()
            return len(slots)

    def touch(self, doc_ids: Iterable[str], *, now: float | None = None) -> int:
        """Count one read of each document (last access, access count); durable on return."""
        when = time.time() if now is None else now
        with self._lock:
            self._check_open()
            self._flush_access()
            ids = list(doc_ids)
            found = self._sql.slots_of(ids)
            slots = [found[i] for i in ids if i in found]
            if slots:
                self._sql.touch(slots, when)
            return len(slots)

    # -- reads -----------------------------------------------------------------------------

    def get(self, doc_id: str) -> Document | None:
        """The document with this id, or ``None``."""
        with self._lock:
            return self._sql.get(doc_id)

    def all(self, *, limit: int | None = None) -> list[Document]:
        """Documents in time order (oldest first)."""
        with self._lock:
            return self._sql.all(limit)

    def _set_visibility(self, doc_ids: list[str], visibility: str) -> int:
        with self._lock:
            self._check_open()
            found = self._sql.slots_of(doc_ids)
            if not found:
                return 0
            slots = sorted(found.values())
            self._sql.set_visibility(slots, visibility)
            for slot, doc in self._sql.documents(slots).items():
                self._table.set_mark(slot, doc.person, visibility)
            return len(slots)

    def _search(
        self, text: str, top_k: int, qvec: npt.NDArray[np.float32] | None, touch: bool, audience: Audience
    ) -> list[DocHit]:
        with self._lock:
            self._check_open()
            self._adopt_vectors()
            collapsed: dict[int, list[int]] = {}
            ranked = self._rank(text, top_k, qvec, collapsed, audience)
            if not ranked:
                return []
            docs = self._sql.documents([s for s, _ in ranked])
            twins = [d for dups in collapsed.values() for d in dups]
            twin_ids = self._sql.ids(twins) if twins else {}
            now = time.time()
            hits: list[DocHit] = []
            for slot, score in ranked:
                doc = docs[slot]
                if slot in self._dirty_access:
                    doc.last_access, doc.access_count = self._dirty_access[slot]
                if touch:
                    doc.last_access, doc.access_count = now, doc.access_count + 1
                    self._dirty_access[slot] = (doc.last_access, doc.access_count)
                hits.append(DocHit(doc, score, tuple(twin_ids[d] for d in collapsed.get(slot, ()) if d in twin_ids)))
            return hits

    def _rank(
        self,
        text: str,
        top_k: int,
        qvec: npt.NDArray[np.float32] | None,
        collapsed: dict[int, list[int]] | None = None,
        audience: Audience = EVERYONE,
    ) -> list[tuple[int, float]]:
        weights = doc_ranking.FusionWeights(
            self.dense_weight, self.lexical_weight, self.neighbour_weight, self.coverage_weight
        )
        return doc_ranking.rank(
            text, top_k, qvec, weights=weights, table=self._table, dense=self._dense, lex=self._lex,
            order=self._time, collapsed=collapsed,
            visible=None if audience.everything else self._table.visible(audience),
        )

    def archived_event_ids(self, event_ids: Iterable[str]) -> set[str]:
        """Which of these context event ids were already archived here (``meta.event_id``).

        Scans the table once (start-up reconciliation only, never on the hot path).
        """
        wanted = set(event_ids)
        if not wanted:
            return set()
        with self._lock:
            found = set(self._sql.event_ids())
        return wanted & found

    def _cold(self, cutoff: float, max_reads: int, limit: int) -> list[Document]:
        with self._lock:
            self._check_open()
            self._flush_access()
            return self._sql.cold(cutoff, max_reads, limit)

    def _stale_rows(self, limit: int) -> list[tuple[int, str]]:
        with self._lock:
            self._check_open()
            return self._sql.stale(self._fingerprint, limit)

    def _write_vectors(self, slots: list[int], vectors: npt.NDArray[np.float32]) -> None:
        with self._lock:
            self._sql.set_vectors(slots, [v.tobytes() for v in vectors], self._fingerprint)
            fresh = [i for i, s in enumerate(slots) if self._table.alive[s]]
            for i in fresh:
                self._dense.drop(slots[i])
            if fresh:
                self._dense.append(np.asarray([slots[i] for i in fresh], np.int64), vectors[fresh])
            self._stale = max(0, self._stale - len(slots))

    # -- lifecycle -------------------------------------------------------------------------

    def _flush_access(self) -> None:
        if not self._dirty_access:
            return
        self._sql.write_access(self._dirty_access)
        self._dirty_access.clear()

    def _adopt_vectors(self) -> None:
        """Once the vector file holds every vector, serve them from it and free the in-memory copies.

        Called with ``_lock`` held (queries, flush); tried once per state of the vectors.
        """
        dense = self._dense
        if not dense.n or dense.saved_changes != dense.changes or self._adopt_tried == dense.changes:
            return
        self._adopt_tried = dense.changes
        try:
            vf = read_vectors(self._files.vec_path)
        except (OSError, ValueError) as exc:
            log.info("document store %s: vectors stay in memory: %s", self.path, exc)
            return
        if vf.tag == self._store_id and vf.fingerprint == self._fingerprint:
            dense.adopt(vf)

    def _vector_parts(self) -> VectorParts | None:
        return self._dense.parts(self._sql.max_slot()) if self._fingerprint else None

    def _meta_snapshot(self) -> DocMeta | None:
        return self._files.meta_snapshot(
            self._table, self._dense, self._lex, edits=self._sql.edits(), watermark=self._sql.max_slot()
        )

    def _maybe_snapshot(self) -> None:
        """Start a background snapshot once enough documents have entered the base segment.

        Called with ``_lock`` held, after inserts. Only the base (what the last merge folded
        in) is saved, so this costs no merge; after ``kill -9`` start-up re-indexes only the
        documents above the newest snapshot's watermark.
        """
        grown = self._lex.base_watermark - self._files.watermark
        if grown < max(self.snapshot_min_docs, self.snapshot_fraction * self._table.count):
            return
        if self._files.busy():
            return
        complete = self._lex.delta_postings == 0
        arrays = self._lex.snapshot_arrays(tag=self._store_id, merge=False)
        self._files.start(
            arrays, self._lex_changes if complete else -1, self._dense, self._vector_parts(), self._meta_snapshot()
        )

    def _join_snapshot(self) -> None:
        self._files.join()

    def flush(self) -> None:
        """Persist read counters and bring the cache files up to date (fast next start)."""
        with self._lock:
            if self._closed:
                return
            self._flush_access()
            self._files.join()
            meta = self._meta_snapshot()
            if meta is not None:
                self._files.save_meta(meta)
            vectors = self._vector_parts()
            if vectors is not None:
                try:
                    self._files.save_vectors(self._dense, vectors)
                except (OSError, ValueError) as exc:
                    raise MemoryStoreError(
                        f"document store {self.path}: cannot write the vector file: {exc}; "
                        "check the folder's free space and permissions (documents are not affected)"
                    ) from exc
            self._adopt_vectors()
            if self._files.lex_saved == self._lex_changes and self._files.lex_path.exists():
                return
            self._files.write_lexical(self._lex.snapshot_arrays(tag=self._store_id), self._lex_changes)

    def close(self) -> None:
        """Flush and close; further calls raise :class:`UsageError`."""
        with self._lock:
            if self._closed:
                return
            try:
                self.flush()
            except MemoryStoreError as exc:
                log.warning("%s", exc)
            self._closed = True
            self._sql.close()
