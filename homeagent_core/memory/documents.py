"""L2 document store: durable documents with fused dense + lexical search.

Documents (archived context events, ``doc_commit`` notes, graph snapshots) live in SQLite
(WAL, ``synchronous=FULL``: a write is durable when the call returns). Search never reads
SQLite: a float32 matrix of the rows whose vector belongs to the active embedding space (the
part saved in ``<db>.vec`` memory-mapped, :mod:`homeagent_core.memory.vector_snapshot`, newer
rows in memory) and a character n-gram BM25 index (:mod:`homeagent_core.memory.lexical`,
its snapshot ``<db>.lex`` memory-mapped too). Opening reads the per-document numbers from
``<db>.meta`` (:mod:`homeagent_core.memory.doc_meta_file`) and only the rows after it from
SQLite, so a store of 100k documents answers its first query a fraction of a second after it is
opened, after a clean close or a crash alike. A query
fuses the two paths, each normalised by its own maximum (default weights 0.5 / 0.5), then lets
each document borrow a fraction of its neighbours' scores: documents of the same source
written within ``neighbour_window`` seconds of each other are turns of one conversation, and
the turn next to a strong match is often the answer ("What did you paint?" / "A sunset.").

Vectors are stored with their space's fingerprint; only rows of the active fingerprint and
dimension enter the matrix. :meth:`DocumentStore.reembed_stale` re-embeds the others.
Every write updates the in-memory structures incrementally; nothing is rebuilt per insert.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.memory.doc_meta_file import DocMeta, read_meta, write_meta
from homeagent_core.memory.lexical import LexicalIndex, decode_many, decode_terms, encode_terms, term_counts
from homeagent_core.memory.lexical_snapshot import SnapshotArrays, remove_partial, verify_arrays, write_snapshot
from homeagent_core.memory.lexical_terms import TERMS_VERSION
from homeagent_core.memory.time_order import TimeOrder
from homeagent_core.memory.vector_snapshot import read_vectors, write_vectors
from homeagent_sdk.embeddings import text_language
from homeagent_sdk.errors import MemoryStoreError, UsageError
from homeagent_sdk.types import Doc

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = ["DocHit", "Document", "DocumentStore", "format_related"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    slot INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL DEFAULT '',
    content TEXT NOT NULL,
    source TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    last_access REAL NOT NULL,
    access_count INTEGER NOT NULL DEFAULT 0,
    media_digests TEXT NOT NULL DEFAULT '[]',
    meta TEXT NOT NULL DEFAULT '{}',
    vector BLOB,
    vec_model TEXT NOT NULL DEFAULT '',
    lex BLOB NOT NULL,
    lex_len INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_cold ON documents (last_access, access_count);
CREATE INDEX IF NOT EXISTS documents_open ON documents (slot, created_at, source, vec_model, lex_len);
CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_COLUMNS = "id, title, content, source, created_at, last_access, access_count, media_digests, meta"


def new_doc_id() -> str:
    """A fresh document id (``doc_`` + 16 hex digits)."""
    return "doc_" + uuid.uuid4().hex[:16]


@dataclass(slots=True)
class Document:
    """One stored document. ``created_at`` is the original time of what it records."""

    content: str
    title: str = ""
    source: str = ""
    created_at: float = field(default_factory=time.time)
    id: str = field(default_factory=new_doc_id)
    last_access: float = 0.0
    access_count: int = 0
    media_digests: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        """What is indexed and embedded: the title and the content."""
        return f"{self.title}\n{self.content}" if self.title else self.content

    def to_doc(self, score: float | None = None) -> Doc:
        """The SDK wire shape of this document."""
        return Doc(
            id=self.id,
            title=self.title,
            content=self.content,
            score=score,
            media_digests=list(self.media_digests),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "content": self.content,
            "source": self.source,
            "created_at": self.created_at,
            "last_access": self.last_access,
            "access_count": self.access_count,
            "media_digests": list(self.media_digests),
            "meta": dict(self.meta),
        }


@dataclass(slots=True, frozen=True)
class DocHit:
    """A search result: the document and its fused score (0..1 + neighbour share)."""

    document: Document
    score: float


class _Rows:
    """Rows ``index`` of a (mapped) matrix, sliced lazily so a writer copies them in chunks."""

    def __init__(self, matrix: Any, index: npt.NDArray[np.int64]) -> None:
        self.matrix, self.index = matrix, index

    def __getitem__(self, part: slice) -> Any:
        return self.matrix[self.index[part]]


def _row_to_document(row: Sequence[Any]) -> Document:
    return Document(
        id=row[0],
        title=row[1],
        content=row[2],
        source=row[3],
        created_at=row[4],
        last_access=row[5],
        access_count=row[6],
        media_digests=json.loads(row[7]),
        meta=json.loads(row[8]),
    )


class DocumentStore:
    """SQLite-backed document store with in-memory fused search.

    Args:
        path: the SQLite file (``<data>/memory/documents.db``); its folder is created.
        embedder: the active embedding space; ``None`` = lexical search only.
        dense_weight / lexical_weight: fusion weights of the two paths.
        neighbour_weight: share of an adjacent document's score a document receives.
        neighbour_window: seconds within which same-source documents count as adjacent.

    Opening loads metadata, the vector matrix and the lexical index synchronously; call it
    from a worker thread in async code. Methods that embed are ``async``; the rest are plain
    and thread-safe.

    The lexical index is snapshotted to ``<path>.lex`` and the dense vectors to ``<path>.vec``:
    in a background thread whenever ``snapshot_min_docs`` and ``snapshot_fraction`` of the
    documents have been added since the last snapshot, and on :meth:`flush` / :meth:`close`.
    Opening maps the newest valid files and reads from SQLite only what they lack (documents
    stored after them, vectors re-embedded since), so start-up after a crash costs about the
    same as after a clean close. SQLite stays the only durable record: both files are caches
    checked against it on open (store, space, watermark, per-document gram counts); the
    snapshot's posting checksums are checked by a background thread, which rebuilds the index
    if they do not match.
    """

    snapshot_min_docs: int = 2000
    """Documents added since the last snapshot before a background one is written ..."""
    snapshot_fraction: float = 0.05
    """... and the share of the store they must also reach."""
    _DENSE_CANDIDATES = 64  # the dense path's best also get exact lexical scores
    _DENSE_PREFILTER = 512  # rows of a projected base scored exactly (the projection's best)

    def __init__(
        self,
        path: str | Path,
        embedder: EmbeddingProvider | None = None,
        *,
        dense_weight: float = 0.5,
        lexical_weight: float = 0.5,
        neighbour_weight: float = 0.2,
        neighbour_window: float = 3600.0,
    ) -> None:
        for name, value in (
            ("dense_weight", dense_weight),
            ("lexical_weight", lexical_weight),
            ("neighbour_weight", neighbour_weight),
            ("neighbour_window", neighbour_window),
        ):
            if value < 0:
                raise UsageError(f"DocumentStore {name} must be >= 0, got {value}")
        self.path = Path(path)
        self.embedder = embedder
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self.neighbour_weight = neighbour_weight
        self.neighbour_window = neighbour_window
        self._lock = threading.RLock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise MemoryStoreError(
                f"cannot open the document store {self.path}: {exc}; move the file away to "
                "start with an empty store"
            ) from exc
        self._fingerprint = embedder.info.fingerprint if embedder else ""
        self._dim = embedder.info.dimension if embedder else 0
        self._closed = False
        self._dirty_access: dict[int, tuple[float, int]] = {}
        self._snap_lock = threading.Lock()
        self._snap_thread: threading.Thread | None = None
        self._snap_watermark = 0
        self._lex_changes = 0
        self._snap_changes = -1
        self._verify_thread: threading.Thread | None = None
        self._meta_key: tuple[int, int, int] | None = None
        self._load()

    # -- loading ---------------------------------------------------------------------------

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM store_meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def _load(self) -> None:
        store_id = self._meta("store_id")
        if store_id is None:
            store_id = uuid.uuid4().hex
            self._db.execute("INSERT INTO store_meta VALUES ('store_id', ?)", (store_id,))
        self._store_id = store_id
        self._upgrade_terms()
        slots, created, sources, wanted, lengths = self._read_columns()
        cap = 64
        while cap <= (int(slots[-1]) if len(slots) else 0):
            cap *= 2
        self._count = len(slots)
        self._created = np.zeros(cap, dtype=np.float64)
        self._created[slots] = created
        self._source_codes: dict[str, int] = {}
        codes = [self._source_codes.setdefault(name, len(self._source_codes)) for name in sources[1]]
        self._source = np.full(cap, -1, dtype=np.int32)
        self._source[slots] = np.asarray(codes, dtype=np.int32)[sources[0]] if len(slots) else 0
        self._alive = np.zeros(cap, dtype=bool)
        self._alive[slots] = True
        self._row_of = np.full(cap, -1, dtype=np.int64)
        self._base = np.zeros((0, max(self._dim, 1)), dtype=np.float32)
        self._base_slot = np.zeros(0, dtype=np.int64)
        self._base_live = np.zeros(0, dtype=bool)
        self._base_dead = 0
        self._base_proj: npt.NDArray[np.float32] | None = None
        self._base_low: npt.NDArray[np.float32] | None = None
        self._rows = np.zeros((64, max(self._dim, 1)), dtype=np.float32)
        self._row_slot = np.zeros(64, dtype=np.int64)
        self._n = 0
        self._stale = 0
        self._vec_changes = 0
        self._vec_snap_changes = -1
        if self._fingerprint:
            self._load_vectors(slots, wanted)
        self._time = TimeOrder(self.neighbour_window)
        self._lex = self._load_lexical(slots, lengths)
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
        """Check the mapped snapshot's checksums; on damage rebuild the index from SQLite.

        Runs in a background thread after open, so start-up needs no pass over the postings.
        Queries are answered from the mapped index meanwhile; a damaged snapshot (disk
        corruption: a crash never leaves one, see :mod:`homeagent_core.memory.lexical_snapshot`)
        is removed and the index rebuilt from every document's stored terms under the lock.
        """
        index = self._lex
        arrays = index.unchecked
        if arrays is None:
            return
        with contextlib.suppress(OSError, AttributeError):  # idle priority: the first queries come first
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            verify_arrays(arrays)
        except ValueError as exc:
            with self._lock:
                if self._closed or self._lex is not index:
                    return
                log.warning("document store %s: rebuilding the lexical index: %s", self.path, exc)
                self._join_snapshot()
                self._snapshot_path().unlink(missing_ok=True)
                alive = np.flatnonzero(self._alive).astype(np.int64)
                self._lex = self._load_lexical(alive, np.zeros(len(alive), dtype=np.int64))
                self._lex_changes += 1
                self._snap_changes = -1
            return
        index.unchecked = None

    def _upgrade_terms(self) -> None:
        """Re-derive every document's stored lexical terms when the term scheme changed.

        One transaction (a crash leaves the old terms and version, and the next start redoes
        it); the lexical snapshot, built from the old terms, is removed.
        """
        if self._meta("lex_version") == TERMS_VERSION:
            return
        rows = self._db.execute("SELECT slot, title, content FROM documents").fetchall()
        updates = []
        for slot, title, content in rows:
            buckets, counts, length = term_counts(f"{title}\n{content}" if title else content)
            updates.append((encode_terms(buckets, counts), length, slot))
        cur = self._db.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
            cur.executemany("UPDATE documents SET lex=?, lex_len=? WHERE slot=?", updates)
            cur.execute("INSERT OR REPLACE INTO store_meta VALUES ('lex_version', ?)", (TERMS_VERSION,))
            self._bump_edits(cur)
            cur.execute("COMMIT")
        except sqlite3.Error as exc:
            cur.execute("ROLLBACK")
            raise MemoryStoreError(f"document store {self.path}: cannot re-index stored terms: {exc}") from exc
        if rows:
            self._snapshot_path().unlink(missing_ok=True)
            log.info("document store %s: re-derived the lexical terms of %d documents (term scheme %s)",
                     self.path, len(rows), TERMS_VERSION)

    def _meta_path(self) -> Path:
        return self.path.with_name(self.path.name + ".meta")

    def _edits(self) -> int:
        return int(self._meta("edits") or 0)

    @staticmethod
    def _bump_edits(cur: sqlite3.Cursor) -> None:
        """Count a change to stored rows (inside the caller's transaction): the meta file is stale."""
        cur.execute(
            "INSERT INTO store_meta VALUES ('edits', '1') ON CONFLICT(key) DO UPDATE"
            " SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
        )

    def _read_columns(
        self,
    ) -> tuple[
        npt.NDArray[np.int64], npt.NDArray[np.float64], tuple[npt.NDArray[np.int64], list[str]],
        npt.NDArray[np.bool_], npt.NDArray[np.int64],
    ]:
        """Slots, creation times, sources (codes, names), active-space flags and gram counts.

        From the meta file (:mod:`homeagent_core.memory.doc_meta_file`) plus the rows after its
        watermark when it is current, else from every row (the covering index answers this
        without touching the vector and term blobs).
        """
        after, base = 0, None
        path = self._meta_path()
        if path.exists():
            try:
                meta = read_meta(path)
                if meta.tag != self._store_id or meta.edits != self._edits():
                    raise ValueError("it is older than the last change to stored documents")
                if meta.watermark > self._max_issued_slot() or meta.spaces != ["", self._fingerprint]:
                    raise ValueError("it does not match the database or the embedding space")
            except ValueError as exc:
                log.info("document store %s: reading every row: %s", self.path, exc)
            else:
                after, base = meta.watermark, meta
        rows = self._db.execute(
            "SELECT slot, created_at, source, vec_model = ?, lex_len FROM documents WHERE slot > ? ORDER BY slot",
            (self._fingerprint, after),
        ).fetchall()
        n = len(rows)
        names: dict[str, int] = {}
        if base is not None:
            for name in base.sources:
                names.setdefault(name, len(names))
        codes = np.fromiter((names.setdefault(r[2], len(names)) for r in rows), dtype=np.int64, count=n)
        slots = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
        created = np.fromiter((r[1] for r in rows), dtype=np.float64, count=n)
        wanted = np.fromiter((bool(r[3]) for r in rows), dtype=bool, count=n)
        lengths = np.fromiter((r[4] for r in rows), dtype=np.int64, count=n)
        if base is not None:
            remap = np.asarray([names[name] for name in base.sources], dtype=np.int64)
            slots = np.concatenate([base.slots, slots])
            created = np.concatenate([base.created, created])
            codes = np.concatenate([remap[base.source] if len(base.source) else base.source.astype(np.int64), codes])
            wanted = np.concatenate([base.space == 1, wanted])
            lengths = np.concatenate([base.lengths, lengths])
        return slots, created, (codes, list(names)), wanted, lengths

    def _meta_snapshot(self) -> DocMeta | None:
        """The meta file's content now (called with ``_lock`` held), or ``None`` when it is current."""
        key = (self._count, self._edits(), self._max_issued_slot())
        if key == self._meta_key:
            return None
        slots = np.flatnonzero(self._alive).astype(np.int64)
        names = list(self._source_codes)
        return DocMeta(
            tag=self._store_id,
            edits=key[1],
            watermark=key[2],
            sources=names,
            spaces=["", self._fingerprint],
            slots=slots,
            created=self._created[slots].copy(),
            source=self._source[slots].copy(),
            space=(self._row_of[slots] >= 0).astype(np.int32),
            lengths=self._lex._dl[slots].astype(np.int64),
        )

    def _save_meta(self, meta: DocMeta) -> None:
        try:
            write_meta(self._meta_path(), meta)
        except (OSError, ValueError) as exc:
            log.warning("document store %s: meta file not written: %s", self.path, exc)
            remove_partial(self._meta_path())
            return
        with self._snap_lock:
            self._meta_key = (len(meta.slots), meta.edits, meta.watermark)

    def _vector_path(self) -> Path:
        return self.path.with_name(self.path.name + ".vec")

    def _load_vectors(self, slots: npt.NDArray[np.int64], wanted: npt.NDArray[np.bool_]) -> None:
        """Map the saved vector matrix and read from SQLite only the vectors it lacks.

        A row of the file is used only if its document is still stored with a vector of the
        active space (vectors of one space never change, so such a row equals SQLite's); the
        file must name this store, the active space and no slot the database never issued.
        Anything else (a missing, foreign or outdated file) costs reading those vectors from
        SQLite, as a store without the file does.
        """
        vec_path = self._vector_path()
        try:
            if remove_partial(vec_path):
                log.info("document store %s: removed a partial vector file", self.path)
        except OSError as exc:
            log.warning("document store %s: cannot remove a partial vector file: %s", self.path, exc)
        want = np.zeros(len(self._alive), dtype=bool)
        want[slots[wanted]] = True
        have = np.zeros(len(self._alive), dtype=bool)
        if vec_path.exists():
            try:
                vf = read_vectors(vec_path)
                problem = ""
                if vf.tag != self._store_id:
                    problem = "it belongs to another store"
                elif vf.fingerprint != self._fingerprint or vf.dim != self._dim:
                    problem = f"it holds the space {vf.fingerprint!r}, not {self._fingerprint!r}"
                elif vf.watermark > self._max_issued_slot():
                    problem = "it is newer than the database"
                if problem:
                    raise ValueError(f"{vec_path}: {problem}")
            except ValueError as exc:
                log.info("document store %s: not using the vector file: %s", self.path, exc)
            else:
                inside = vf.slots < len(want)
                live = np.zeros(len(vf.slots), dtype=bool)
                live[inside] = want[vf.slots[inside]]
                self._base, self._base_slot, self._base_live = vf.matrix, vf.slots, live
                self._base_proj, self._base_low = vf.projection, vf.projected
                self._base_dead = int(len(live) - live.sum())
                self._row_of[vf.slots[live]] = np.flatnonzero(live)
                have[vf.slots[live]] = True
                self._vec_snap_changes = 0
        need = np.flatnonzero(want & ~have)
        size = 4 * self._dim
        bad = 0
        for start in range(0, len(need), 500):
            part = need[start : start + 500].tolist()
            marks = ",".join("?" * len(part))
            found = [
                (slot, blob)
                for slot, blob in self._db.execute(
                    f"SELECT slot, vector FROM documents WHERE slot IN ({marks}) ORDER BY slot", part
                )
                if blob is not None and len(blob) == size
            ]
            bad += len(part) - len(found)
            if found:
                matrix = np.frombuffer(b"".join(b for _, b in found), dtype=np.float32).reshape(-1, self._dim)
                self._append_rows(np.asarray([f[0] for f in found], dtype=np.int64), matrix)
        if len(need):
            self._vec_snap_changes = -1
        self._stale = int(len(slots) - wanted.sum()) + bad

    def _snapshot_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lex")

    def _max_issued_slot(self) -> int:
        row = self._db.execute("SELECT seq FROM sqlite_sequence WHERE name='documents'").fetchone()
        return int(row[0]) if row else 0

    def _load_lexical(self, slots: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> LexicalIndex:
        """The lexical index: the snapshot plus the documents stored after it, or a rebuild.

        The snapshot is trusted only if it names this store, does not cover slots the
        database never issued (a database restored from an older copy), and records the
        same gram count for every stored document it covers; otherwise every document's
        stored terms are re-indexed in one vectorised pass.
        """
        snap = self._snapshot_path()
        try:
            self.path.with_name(self.path.name + ".lex.npz").unlink(missing_ok=True)  # old format
            if remove_partial(snap):
                log.info("document store %s: removed a partial lexical snapshot", self.path)
        except OSError as exc:
            log.warning("document store %s: cannot remove an old snapshot file: %s", self.path, exc)
        index: LexicalIndex | None = None
        if snap.exists():
            try:
                index = LexicalIndex.load(
                    snap, slots, lengths, tag=self._store_id, max_slot=self._max_issued_slot(), verify=False
                )
            except ValueError as exc:
                log.warning("document store %s: rebuilding the lexical index: %s", self.path, exc)
        after = index.base_watermark if index is not None else 0
        tail = self._db.execute(
            "SELECT slot, lex, lex_len FROM documents WHERE slot > ? ORDER BY slot", (after,)
        ).fetchall()
        self._snap_changes = 0 if index is not None and not tail else -1
        if index is None:
            index = LexicalIndex()
        self._snap_watermark = index.base_watermark
        if tail:
            try:
                terms, buckets, counts = decode_many([r[1] for r in tail])
            except ValueError as exc:
                raise MemoryStoreError(
                    f"document store {self.path}: {exc}; the database is damaged, restore it "
                    "from a backup or move it away to start with an empty store"
                ) from exc
            add = index.add_delta_bulk if index.base_watermark else index.add_bulk
            add(
                np.fromiter((r[0] for r in tail), dtype=np.int64, count=len(tail)),
                terms,
                buckets,
                counts,
                np.fromiter((r[2] for r in tail), dtype=np.int64, count=len(tail)),
            )
        return index

    def _slots_of(self, doc_ids: Iterable[str]) -> dict[str, int]:
        """Slots of the stored documents among ``doc_ids`` (looked up in SQLite by id).

        Ids are not held in memory: at 100k documents loading them was a large share of
        start-up, and only writes (duplicate checks, deletes) need them.
        """
        wanted = list(dict.fromkeys(doc_ids))
        found: dict[str, int] = {}
        for start in range(0, len(wanted), 500):
            part = wanted[start : start + 500]
            marks = ",".join("?" * len(part))
            found.update(self._db.execute(f"SELECT id, slot FROM documents WHERE id IN ({marks})", part).fetchall())
        return found

    def _register(self, slot: int, created: float, source: str) -> None:
        if slot >= len(self._alive):
            size = len(self._alive)
            while size <= slot:
                size *= 2
            grow = size - len(self._alive)
            self._created = np.concatenate([self._created, np.zeros(grow)])
            self._source = np.concatenate([self._source, np.full(grow, -1, dtype=np.int32)])
            self._alive = np.concatenate([self._alive, np.zeros(grow, bool)])
            self._row_of = np.concatenate([self._row_of, np.full(grow, -1, dtype=np.int64)])
        self._count += 1
        self._created[slot] = created
        self._source[slot] = self._source_codes.setdefault(source, len(self._source_codes))
        self._alive[slot] = True

    def _append_rows(self, slots: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Add dense rows for ``slots`` to the in-memory part (after the mapped base rows)."""
        need = self._n + len(slots)
        if need > len(self._rows):
            size = max(64, need + need // 4)
            rows = np.zeros((size, self._rows.shape[1]), dtype=np.float32)
            rows[: self._n] = self._rows[: self._n]
            row_slot = np.zeros(size, dtype=np.int64)
            row_slot[: self._n] = self._row_slot[: self._n]
            self._rows, self._row_slot = rows, row_slot
        self._rows[self._n : need] = vectors
        self._row_slot[self._n : need] = slots
        self._row_of[slots] = len(self._base_slot) + np.arange(self._n, need, dtype=np.int64)
        self._n = need
        self._vec_changes += 1

    def _drop_row(self, slot: int) -> None:
        """Forget ``slot``'s dense row: a mapped row is masked, an in-memory one swapped out."""
        row = int(self._row_of[slot])
        if row < 0:
            return
        self._row_of[slot] = -1
        self._vec_changes += 1
        nb = len(self._base_slot)
        if row < nb:
            self._base_live[row] = False
            self._base_dead += 1
            return
        row -= nb
        last = self._n - 1
        if row != last:
            moved = int(self._row_slot[last])
            self._rows[row] = self._rows[last]
            self._row_slot[row] = moved
            self._row_of[moved] = nb + row
        self._n = last

    def _dense_rows(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Every live dense row: slots and a copy of their vectors (mapped rows first)."""
        live = np.flatnonzero(self._base_live)
        return (
            np.concatenate([self._base_slot[live], self._row_slot[: self._n]]),
            np.concatenate([np.asarray(self._base[live]), self._rows[: self._n]]),
        )

    @property
    def _dense_count(self) -> int:
        return len(self._base_slot) - self._base_dead + self._n

    # -- properties ------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def __contains__(self, doc_id: object) -> bool:
        if not isinstance(doc_id, str):
            return False
        with self._lock:
            self._check_open()
            return bool(self._slots_of([doc_id]))

    @property
    def fingerprint(self) -> str:
        """The active embedding space ("" when lexical only)."""
        return self._fingerprint

    @property
    def stale_count(self) -> int:
        """Documents whose vector is missing or from another embedding space."""
        return self._stale

    def stats(self) -> dict[str, Any]:
        """Counts for introspection (documents, dense rows, stale rows, space)."""
        return {
            "documents": self._count,
            "dense_rows": self._dense_count,
            "stale_vectors": self._stale,
            "fingerprint": self._fingerprint,
            "path": str(self.path),
        }

    # -- writes ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"document store {self.path} is closed")

    async def add(
        self,
        content: str,
        *,
        title: str = "",
        source: str = "",
        created_at: float | None = None,
        media_digests: Iterable[str] = (),
        meta: dict[str, Any] | None = None,
    ) -> Document:
        """Store one document; it is durable when this returns.

        Raises:
            UsageError: ``content`` and ``title`` are both empty.
        """
        doc = Document(
            content=content,
            title=title,
            source=source,
            media_digests=list(media_digests),
            meta=dict(meta or {}),
        )
        if created_at is not None:
            doc.created_at = float(created_at)
        (stored,) = await self.add_many([doc])
        return stored

    async def add_many(self, docs: Sequence[Document], *, batch_size: int = 64) -> list[Document]:
        """Store documents in one transaction (embedding them first); durable on return.

        Raises:
            UsageError: a document is empty or its id already exists.
        """
        self._check_open()
        seen: set[str] = set()
        for doc in docs:
            if not doc.content.strip() and not doc.title.strip():
                raise UsageError("a document needs non-empty content or title")
            if doc.id in seen:
                raise UsageError(f"document id {doc.id!r} already exists")
            seen.add(doc.id)
        with self._lock:
            taken = self._slots_of(seen)
        if taken:
            raise UsageError(f"document id {next(iter(taken))!r} already exists")
        vectors = None
        if self.embedder is not None and docs:
            parts = [
                await self.embedder.embed_texts([d.text for d in docs[i : i + batch_size]])
                for i in range(0, len(docs), batch_size)
            ]
            vectors = np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
        await asyncio.to_thread(self._insert, list(docs), vectors)
        return list(docs)

    def _insert(self, docs: list[Document], vectors: npt.NDArray[np.float32] | None) -> None:
        terms = [term_counts(d.text) for d in docs]
        with self._lock:
            self._check_open()
            self._flush_access()
            slots: list[int] = []
            cur = self._db.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                for i, (doc, (buckets, counts, length)) in enumerate(zip(docs, terms, strict=True)):
                    doc.last_access = doc.last_access or doc.created_at
                    vec = vectors[i].tobytes() if vectors is not None else None
                    cur.execute(
                        "INSERT INTO documents (id, title, content, source, created_at, last_access,"
                        " access_count, media_digests, meta, vector, vec_model, lex, lex_len)"
                        " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (
                            doc.id,
                            doc.title,
                            doc.content,
                            doc.source,
                            doc.created_at,
                            doc.last_access,
                            doc.access_count,
                            json.dumps(doc.media_digests),
                            json.dumps(doc.meta, ensure_ascii=False),
                            vec,
                            self._fingerprint if vec is not None else "",
                            encode_terms(buckets, counts),
                            length,
                        ),
                    )
                    slots.append(int(cur.lastrowid or 0))
                cur.execute("COMMIT")
            except sqlite3.Error as exc:
                cur.execute("ROLLBACK")
                raise MemoryStoreError(f"document store {self.path}: insert failed: {exc}") from exc
            for slot, doc, (buckets, counts, length) in zip(slots, docs, terms, strict=True):
                self._register(slot, doc.created_at, doc.source)
                self._lex.add_terms(slot, buckets, counts, length)
            if vectors is not None:
                self._append_rows(np.asarray(slots, dtype=np.int64), vectors)
            self._time.append(np.asarray(slots, dtype=np.int64), self._created, self._source)
            self._lex_changes += 1
            self._maybe_snapshot()

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id; returns how many existed. Durable on return."""
        with self._lock:
            self._check_open()
            slots = list(self._slots_of(doc_ids).values())
            if not slots:
                return 0
            marks = ",".join("?" * len(slots))
            blobs = self._db.execute(
                f"SELECT slot, lex FROM documents WHERE slot IN ({marks})", slots
            ).fetchall()
            cur = self._db.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                cur.execute(f"DELETE FROM documents WHERE slot IN ({marks})", slots)
                self._bump_edits(cur)
                cur.execute("COMMIT")
            except sqlite3.Error as exc:
                cur.execute("ROLLBACK")
                raise MemoryStoreError(f"document store {self.path}: delete failed: {exc}") from exc
            for slot, blob in blobs:
                self._lex.remove(slot, decode_terms(blob)[0])
            self._lex_changes += 1
            self._count -= len(slots)
            for slot in slots:
                self._alive[slot] = False
                self._dirty_access.pop(slot, None)
                self._drop_row(slot)
            self._time.invalidate()
            return len(slots)

    def touch(self, doc_ids: Iterable[str], *, now: float | None = None) -> int:
        """Count one read of each document (last access, access count); durable on return."""
        when = time.time() if now is None else now
        with self._lock:
            self._check_open()
            self._flush_access()
            ids = list(doc_ids)
            found = self._slots_of(ids)
            slots = [found[i] for i in ids if i in found]
            if slots:
                self._db.executemany(
                    "UPDATE documents SET last_access = ?, access_count = access_count + 1 WHERE slot = ?",
                    [(when, slot) for slot in slots],
                )
            return len(slots)

    # -- reads -----------------------------------------------------------------------------

    def get(self, doc_id: str) -> Document | None:
        """The document with this id, or ``None``."""
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM documents WHERE id=?", (doc_id,)).fetchone()
        return _row_to_document(row) if row else None

    def all(self, *, limit: int | None = None) -> list[Document]:
        """Documents in time order (oldest first)."""
        sql = f"SELECT {_COLUMNS} FROM documents ORDER BY created_at, slot"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        with self._lock:
            return [_row_to_document(r) for r in self._db.execute(sql)]

    async def query(self, text: str, top_k: int = 3, *, touch: bool = True) -> list[DocHit]:
        """The ``top_k`` documents most related to ``text`` (fused dense + lexical search).

        ``touch`` counts the read (access count, last access) for cold-document detection.
        Documents are not removed; see :meth:`consume`.
        """
        self._check_open()
        if top_k <= 0 or not text.strip() or not self._count:
            return []
        qvec = None
        if self.embedder is not None and self._dense_count and self.dense_weight > 0 and self.dense_serves(text):
            qvec = (await self.embedder.embed_texts([text]))[0]
        return self.search(text, top_k, query_vector=qvec, touch=touch)

    def dense_serves(self, text: str) -> bool:
        """True when the embedding model understands ``text``'s language, so the dense path
        may be fused; otherwise the query is answered by the lexical path alone."""
        return self.embedder is not None and self.embedder.info.serves(text_language(text))

    def search(
        self,
        text: str,
        top_k: int = 3,
        *,
        query_vector: npt.NDArray[np.float32] | None = None,
        touch: bool = False,
    ) -> list[DocHit]:
        """Rank with an already computed query vector (or lexical only); memory-only work."""
        with self._lock:
            ranked = self._rank(text, top_k, query_vector)
            if not ranked:
                return []
            slots = [s for s, _ in ranked]
            marks = ",".join("?" * len(slots))
            rows = {
                r[0]: r[1:]
                for r in self._db.execute(
                    f"SELECT slot, {_COLUMNS} FROM documents WHERE slot IN ({marks})", slots
                )
            }
            now = time.time()
            hits: list[DocHit] = []
            for slot, score in ranked:
                doc = _row_to_document(rows[slot])
                if slot in self._dirty_access:
                    doc.last_access, doc.access_count = self._dirty_access[slot]
                if touch:
                    doc.last_access, doc.access_count = now, doc.access_count + 1
                    self._dirty_access[slot] = (doc.last_access, doc.access_count)
                hits.append(DocHit(doc, score))
            return hits

    def _rank(
        self, text: str, top_k: int, qvec: npt.NDArray[np.float32] | None
    ) -> list[tuple[int, float]]:
        cap = len(self._alive)
        total = np.zeros(cap, dtype=np.float32)
        expand = None
        if self.neighbour_weight > 0:
            self._time.ensure(self._alive, self._created, self._source)
            expand = self._time.neighbours
        best_dense: npt.NDArray[np.int64] | None = None
        if qvec is not None and self._dense_count and self.dense_weight > 0:
            if qvec.shape != (self._dim,):
                raise UsageError(
                    f"query vector has shape {qvec.shape}; this store's space is {self._dim}-d"
                )
            q = qvec.astype(np.float32)
            parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = []
            nb = len(self._base_slot)
            if nb and self._base_low is not None and self._base_proj is not None and nb > self._DENSE_PREFILTER:
                # scan the compact projected rows, then score their best exactly
                low = self._base_low @ (q @ self._base_proj)
                cand = np.argpartition(-low, self._DENSE_PREFILTER - 1)[: self._DENSE_PREFILTER]
                cand = np.sort(cand[self._base_live[cand]])
                parts.append((self._base_slot[cand], self._base[cand] @ q))
            elif nb:
                base = self._base @ q
                if self._base_dead:
                    base *= self._base_live
                parts.append((self._base_slot, base))
            if self._n:
                parts.append((self._row_slot[: self._n], self._rows[: self._n] @ q))
            peak = max((float(scores.max()) for _, scores in parts if len(scores)), default=0.0)
            if peak > 0:
                scale = self.dense_weight / peak
                for slots_part, scores in parts:  # one add per part: a slot is in a part once
                    total[slots_part] += scale * np.maximum(scores, 0.0)
                dense_slots = np.concatenate([p[0] for p in parts])
                dense = np.concatenate([p[1] for p in parts])
                k = min(self._DENSE_CANDIDATES, len(dense))
                rows = np.argpartition(-dense, k - 1)[:k] if k < len(dense) else np.arange(len(dense))
                best_dense = dense_slots[rows[dense[rows] > 0]]
        if self.lexical_weight > 0:
            lex = self._lex.scores(text, candidates=best_dense, expand=expand)
            peak = float(lex.max()) if len(lex) else 0.0
            if peak > 0:
                total[: len(lex)] += (self.lexical_weight / peak) * lex[:cap]
        if self.neighbour_weight > 0:
            total = self._time.smooth(total, self.neighbour_weight)
        total *= self._alive
        k = min(top_k, self._count)
        if k <= 0:
            return []
        cand = np.argpartition(-total, k - 1)[:k] if k < cap else np.arange(cap)
        cand = cand[total[cand] > 0]
        order = np.lexsort((cand, -total[cand]))
        return [(int(cand[i]), float(total[cand[i]])) for i in order[:k]]

    def archived_event_ids(self, event_ids: Iterable[str]) -> set[str]:
        """Which of these context event ids were already archived here (``meta.event_id``).

        Scans the table once (start-up reconciliation only, never on the hot path).
        """
        wanted = set(event_ids)
        if not wanted:
            return set()
        with self._lock:
            rows = self._db.execute(
                "SELECT json_extract(meta, '$.event_id') FROM documents"
                " WHERE json_extract(meta, '$.event_id') IS NOT NULL"
            ).fetchall()
        return {r[0] for r in rows if r[0] in wanted}

    async def consume(self, text: str, top_k: int = 3) -> list[DocHit]:
        """Search, then delete every hit from the store (consume-on-read) and return them.

        Nothing else holds the hits afterwards: a caller that moves them elsewhere must make
        that copy durable first and then :meth:`delete` them (see ``doc_query``).
        """
        hits = await self.query(text, top_k, touch=True)
        if hits:
            await asyncio.to_thread(self.delete, [h.document.id for h in hits])
        return hits

    def find_cold(
        self, *, older_than: float = 72 * 3600.0, max_reads: int = 2, now: float | None = None,
        limit: int = 100,
    ) -> list[Document]:
        """Documents not read for ``older_than`` seconds and read at most ``max_reads`` times."""
        cutoff = (time.time() if now is None else now) - older_than
        with self._lock:
            self._flush_access()
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM documents WHERE last_access <= ? AND access_count <= ?"
                " ORDER BY last_access LIMIT ?",
                (cutoff, max_reads, limit),
            ).fetchall()
        return [_row_to_document(r) for r in rows]

    async def reembed_stale(self, *, batch_size: int = 64) -> int:
        """Embed documents whose vector is missing or from another space; returns how many."""
        if self.embedder is None:
            return 0
        done = 0
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT slot, title, content FROM documents WHERE vec_model != ? LIMIT ?",
                    (self._fingerprint, batch_size),
                ).fetchall()
            if not rows:
                break
            texts = [f"{t}\n{c}" if t else c for _, t, c in rows]
            vectors = np.ascontiguousarray(await self.embedder.embed_texts(texts), np.float32)
            await asyncio.to_thread(self._write_vectors, [r[0] for r in rows], vectors)
            done += len(rows)
        return done

    def _write_vectors(self, slots: list[int], vectors: npt.NDArray[np.float32]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "UPDATE documents SET vector=?, vec_model=? WHERE slot=?",
                [(v.tobytes(), self._fingerprint, s) for s, v in zip(slots, vectors, strict=True)],
            )
            self._bump_edits(self._db.cursor())
            self._db.execute("COMMIT")
            fresh = [i for i, s in enumerate(slots) if self._alive[s]]
            for i in fresh:
                self._drop_row(slots[i])
            if fresh:
                self._append_rows(np.asarray([slots[i] for i in fresh], np.int64), vectors[fresh])
            self._stale = max(0, self._stale - len(slots))

    # -- lifecycle -------------------------------------------------------------------------

    def _flush_access(self) -> None:
        if not self._dirty_access:
            return
        self._db.executemany(
            "UPDATE documents SET last_access=?, access_count=? WHERE slot=?",
            [(t, c, s) for s, (t, c) in self._dirty_access.items()],
        )
        self._dirty_access.clear()

    def _maybe_snapshot(self) -> None:
        """Start a background snapshot once enough documents have entered the base segment.

        Called with ``_lock`` held, after inserts. Only the base (what the last merge folded
        in) is saved, so this costs no merge; after ``kill -9`` start-up re-indexes only the
        documents above the newest snapshot's watermark.
        """
        grown = self._lex.base_watermark - self._snap_watermark
        if grown < max(self.snapshot_min_docs, self.snapshot_fraction * self._count):
            return
        with self._snap_lock:
            if self._snap_thread is not None and self._snap_thread.is_alive():
                return
            complete = self._lex.delta_postings == 0
            arrays = self._lex.snapshot_arrays(tag=self._store_id, merge=False)
            vectors = self._vector_parts()
            meta = self._meta_snapshot()
            thread = threading.Thread(
                target=self._write_snapshot,
                args=(arrays, self._lex_changes if complete else -1, vectors, meta),
                name=f"lexical-snapshot:{self.path.name}",
                daemon=True,
            )
            self._snap_thread = thread
            thread.start()

    def _vector_parts(self) -> tuple[int, int, list[tuple[Any, Any]]] | None:
        """What the vector file would hold now (``None`` when it is current or unused).

        Called with ``_lock`` held: the mapped base is never modified and the in-memory rows
        are copied, so a writer thread can save them while the store keeps changing.
        """
        if not self._fingerprint or self._vec_snap_changes == self._vec_changes:
            return None
        live = np.flatnonzero(self._base_live)
        parts: list[tuple[Any, Any]] = []
        if len(live):
            whole = len(live) == len(self._base_slot)
            parts.append((self._base_slot[live], self._base if whole else _Rows(self._base, live)))
        if self._n:
            parts.append((self._row_slot[: self._n].copy(), self._rows[: self._n].copy()))
        return self._vec_changes, self._max_issued_slot(), parts

    def _save_vectors(self, vectors: tuple[int, int, list[tuple[Any, Any]]]) -> None:
        changes, watermark, parts = vectors
        write_vectors(
            self._vector_path(), tag=self._store_id, fingerprint=self._fingerprint, dim=self._dim,
            watermark=watermark, parts=parts,
        )
        with self._snap_lock:
            self._vec_snap_changes = changes

    def _write_snapshot(
        self,
        arrays: SnapshotArrays,
        changes: int,
        vectors: tuple[int, int, list[tuple[Any, Any]]] | None = None,
        meta: DocMeta | None = None,
    ) -> None:
        try:
            write_snapshot(self._snapshot_path(), arrays)
        except OSError as exc:
            log.warning("document store %s: lexical snapshot not written: %s", self.path, exc)
            remove_partial(self._snapshot_path())
            return
        with self._snap_lock:
            self._snap_watermark = max(self._snap_watermark, arrays.watermark)
            self._snap_changes = changes
        if vectors is not None:
            try:
                self._save_vectors(vectors)
            except (OSError, ValueError) as exc:
                log.warning("document store %s: vector file not written: %s", self.path, exc)
                remove_partial(self._vector_path())
        if meta is not None:
            self._save_meta(meta)

    def _join_snapshot(self) -> None:
        with self._snap_lock:
            thread = self._snap_thread
        if thread is not None:
            thread.join()

    def flush(self) -> None:
        """Persist read counters and bring the lexical snapshot up to date (fast next start)."""
        with self._lock:
            if self._closed:
                return
            self._flush_access()
            self._join_snapshot()
            meta = self._meta_snapshot()
            if meta is not None:
                self._save_meta(meta)
            vectors = self._vector_parts()
            if vectors is not None:
                try:
                    self._save_vectors(vectors)
                except (OSError, ValueError) as exc:
                    remove_partial(self._vector_path())
                    raise MemoryStoreError(
                        f"document store {self.path}: cannot write the vector file: {exc}; "
                        "check the folder's free space and permissions (documents are not affected)"
                    ) from exc
            if self._snap_changes == self._lex_changes and self._snapshot_path().exists():
                return
            arrays = self._lex.snapshot_arrays(tag=self._store_id)
            try:
                write_snapshot(self._snapshot_path(), arrays)
            except OSError as exc:
                remove_partial(self._snapshot_path())
                raise MemoryStoreError(
                    f"document store {self.path}: cannot write the lexical snapshot: {exc}; "
                    "check the folder's free space and permissions (documents are not affected)"
                ) from exc
            self._snap_watermark, self._snap_changes = arrays.watermark, self._lex_changes

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
            self._db.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)


def format_related(hits: Sequence[DocHit], *, max_chars: int = 300) -> str:
    """The read-only prompt block of automatically recalled documents ("" when none)."""
    if not hits:
        return ""
    lines = ["[Related Memory Docs]"]
    for hit in hits:
        doc = hit.document
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(doc.created_at))
        body = doc.content if len(doc.content) <= max_chars else doc.content[:max_chars] + "…"
        title = f"{doc.title}: " if doc.title else ""
        lines.append(f"- ({when}) {title}{body}")
    lines.append("(use doc_query to bring a document back into the conversation)")
    return "\n".join(lines)
