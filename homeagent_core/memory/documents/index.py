"""Index maintenance of the document store: per-document numbers and the cache files beside the database.

Three files beside ``<db>`` let a store of 100k documents answer its first query a fraction
of a second after it is opened, after a clean close or a crash alike:

* ``<db>.lex`` — the lexical index's base segment (:mod:`homeagent_core.memory.documents.lexical.snapshot`);
* ``<db>.vec`` — the dense vectors as int8 rows (:mod:`homeagent_core.memory.documents.vector_snapshot`);
* ``<db>.meta`` — slot, time, source, vector-space flag and gram count of every document up to
  a watermark (:mod:`homeagent_core.memory.documents.meta_file`).

Each is written to a temporary file and renamed, so a crash leaves the previous file or the new
one. All three are caches checked against the database on open (store id, embedding space,
watermark, the ``edits`` counter, per-document gram counts); what they lack is read from the
database. :class:`IndexFiles` decides when they are written: in a background thread whenever
enough documents entered the lexical base, and on flush.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.lexical.buckets import decode_many
from homeagent_core.memory.documents.lexical.index import LexicalIndex
from homeagent_core.memory.documents.lexical.snapshot import SnapshotArrays, remove_partial, write_snapshot
from homeagent_core.memory.documents.meta_file import DocMeta, read_meta, write_meta
from homeagent_core.memory.documents.sql import DocumentRecords
from homeagent_core.memory.documents.vectors import DenseRows, VectorParts
from homeagent_sdk.errors import MemoryStoreError

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_sdk.visibility import Audience

__all__ = ["IndexFiles", "OpenColumns", "SlotTable"]

log = logging.getLogger("homeagent_core.memory.documents.store")  # the store's log: one logger for its messages

OpenColumns = tuple[
    "npt.NDArray[np.int64]", "npt.NDArray[np.float64]", "tuple[npt.NDArray[np.int64], list[str]]",
    "npt.NDArray[np.bool_]", "npt.NDArray[np.int64]", "tuple[npt.NDArray[np.int64], list[tuple[str, str]]]",
]
"""Slots, creation times, sources (codes, names), active-space flags, gram counts and marks
(codes, ``(person, visibility)`` pairs)."""


class SlotTable:
    """Per-slot numbers of the stored documents: alive, creation time, source code, mark code.

    A *mark* is a document's ``(person, visibility)`` pair (:mod:`homeagent_sdk.visibility`);
    a store holds few distinct ones, so each slot keeps a small code and :meth:`visible` turns
    an audience into a per-slot mask with one table lookup (the ranking applies it before
    selecting its best documents). Arrays are indexed by slot and grow by doubling. Not
    thread-safe (the store's lock).
    """

    def __init__(self, columns: OpenColumns) -> None:
        slots, created, (codes, names), _, _, (mark_codes, marks) = columns
        cap = 64
        while cap <= (int(slots[-1]) if len(slots) else 0):
            cap *= 2
        self.count = len(slots)
        self.created = np.zeros(cap, dtype=np.float64)
        self.created[slots] = created
        self.source_codes: dict[str, int] = {}
        local = [self.source_codes.setdefault(name, len(self.source_codes)) for name in names]
        self.source = np.full(cap, -1, dtype=np.int32)
        self.source[slots] = np.asarray(local, dtype=np.int32)[codes] if len(slots) else 0
        self.alive = np.zeros(cap, dtype=bool)
        self.alive[slots] = True
        self.mark_codes: dict[tuple[str, str], int] = {}
        local_marks = [self.mark_codes.setdefault(tuple(m), len(self.mark_codes)) for m in marks]  # type: ignore[arg-type]
        self.mark = np.full(cap, -1, dtype=np.int32)
        self.mark[slots] = np.asarray(local_marks, dtype=np.int32)[mark_codes] if len(slots) else 0
        self._marks_changed = 0
        self._masks: dict[Audience, tuple[tuple[Audience, int, int, int], npt.NDArray[np.bool_]]] = {}

    @classmethod
    def empty(cls) -> SlotTable:
        """A table of no documents (slots are then registered in ascending order)."""
        none = np.zeros(0, dtype=np.int64)
        return cls((none, np.zeros(0), (none, []), np.zeros(0, dtype=bool), none, (none, [])))

    def set_mark(self, slot: int, person: str, visibility: str) -> None:
        """Record ``slot``'s person and visibility (a new document, or the owner's share/unshare)."""
        self.mark[slot] = self.mark_codes.setdefault((person, visibility), len(self.mark_codes))
        self._marks_changed += 1

    def visible(self, audience: Audience) -> npt.NDArray[np.bool_]:
        """Per slot: a live document ``audience`` may see (one lookup per slot).

        The last few audiences' masks are kept until a mark, the document count or the
        capacity changes (every insert and share changes a mark, every delete the count).
        The caller must not modify the returned array.
        """
        if audience.everything:
            return self.alive
        key = (audience, self._marks_changed, self.count, len(self.alive))
        cached = self._masks.get(audience)
        if cached is not None and cached[0] == key:
            return cached[1]
        lut = np.zeros(len(self.mark_codes) + 1, dtype=bool)  # the last entry: slots without a mark
        for (person, visibility), code in self.mark_codes.items():
            lut[code] = audience.sees(person, visibility)
        mask: npt.NDArray[np.bool_] = lut[self.mark] & self.alive
        if len(self._masks) >= 16:
            self._masks.clear()
        self._masks[audience] = (key, mask)
        return mask

    @property
    def capacity(self) -> int:
        return len(self.alive)

    def register(self, slot: int, created: float, source: str, person: str, visibility: str) -> None:
        """Mark ``slot`` stored (growing the arrays when it lies beyond them)."""
        if slot >= len(self.alive):
            size = len(self.alive)
            while size <= slot:
                size *= 2
            grow = size - len(self.alive)
            self.created = np.concatenate([self.created, np.zeros(grow)])
            self.source = np.concatenate([self.source, np.full(grow, -1, dtype=np.int32)])
            self.alive = np.concatenate([self.alive, np.zeros(grow, bool)])
            self.mark = np.concatenate([self.mark, np.full(grow, -1, dtype=np.int32)])
        self.count += 1
        self.created[slot] = created
        self.source[slot] = self.source_codes.setdefault(source, len(self.source_codes))
        self.alive[slot] = True
        self.set_mark(slot, person, visibility)


class IndexFiles:
    """The cache files of one store: paths, validation on open, and their (background) writes."""

    def __init__(self, db_path: Path, *, tag: str, fingerprint: str, dim: int) -> None:
        self.db_path = db_path
        self.tag, self.fingerprint, self.dim = tag, fingerprint, dim
        self.lex_path = db_path.with_name(db_path.name + ".lex")
        self.vec_path = db_path.with_name(db_path.name + ".vec")
        self.meta_path = db_path.with_name(db_path.name + ".meta")
        self.lock = threading.Lock()
        """Guards the fields below and the background writer thread."""
        self.thread: threading.Thread | None = None
        self.watermark = 0
        """Highest slot the lexical snapshot covers."""
        self.lex_saved = -1
        """The lexical change counter the snapshot reflects (-1: unknown or partial)."""
        self.meta_key: tuple[int, int, int] | None = None

    # -- opening ---------------------------------------------------------------------------

    def read_columns(self, records: DocumentRecords) -> OpenColumns:
        """What opening needs of every document: from the meta file plus the rows after its
        watermark when it is current, else from every row."""
        after, base = 0, None
        if self.meta_path.exists():
            try:
                meta = read_meta(self.meta_path)
                if meta.tag != self.tag or meta.edits != records.edits():
                    raise ValueError("it is older than the last change to stored documents")
                if meta.watermark > records.max_slot() or meta.spaces != ["", self.fingerprint]:
                    raise ValueError("it does not match the database or the embedding space")
            except ValueError as exc:
                log.info("document store %s: reading every row: %s", self.db_path, exc)
            else:
                after, base = meta.watermark, meta
        rows = records.open_rows(self.fingerprint, after)
        n = len(rows)
        names: dict[str, int] = {}
        marks: dict[tuple[str, str], int] = {}
        if base is not None:
            for name in base.sources:
                names.setdefault(name, len(names))
            for mark in base.marks:
                marks.setdefault(mark, len(marks))
        codes = np.fromiter((names.setdefault(r[2], len(names)) for r in rows), dtype=np.int64, count=n)
        mark_codes = np.fromiter((marks.setdefault((r[5], r[6]), len(marks)) for r in rows), dtype=np.int64, count=n)
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
            mark_remap = np.asarray([marks[m] for m in base.marks], dtype=np.int64)
            mark_codes = np.concatenate(
                [mark_remap[base.mark] if len(base.mark) else base.mark.astype(np.int64), mark_codes]
            )
        return slots, created, (codes, list(names)), wanted, lengths, (mark_codes, list(marks))

    def load_lexical(
        self, records: DocumentRecords, slots: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
    ) -> LexicalIndex:
        """The lexical index: the snapshot plus the documents stored after it, or a rebuild.

        The snapshot is trusted only if it names this store, does not cover slots the
        database never issued (a database restored from an older copy), and records the
        same gram count for every stored document it covers; otherwise every document's
        stored terms are re-indexed in one vectorised pass. Its posting checksums are left
        unchecked (:attr:`LexicalIndex.unchecked`) for a background check.
        """
        snap = self.lex_path
        try:
            self.db_path.with_name(self.db_path.name + ".lex.npz").unlink(missing_ok=True)  # old format
            if remove_partial(snap):
                log.info("document store %s: removed a partial lexical snapshot", self.db_path)
        except OSError as exc:
            log.warning("document store %s: cannot remove an old snapshot file: %s", self.db_path, exc)
        index: LexicalIndex | None = None
        if snap.exists():
            try:
                index = LexicalIndex.load(
                    snap, slots, lengths, tag=self.tag, max_slot=records.max_slot(), verify=False
                )
            except ValueError as exc:
                log.warning("document store %s: rebuilding the lexical index: %s", self.db_path, exc)
        after = index.base_watermark if index is not None else 0
        tail = records.terms_after(after)
        self.lex_saved = 0 if index is not None and not tail else -1
        if index is None:
            index = LexicalIndex()
        self.watermark = index.base_watermark
        if tail:
            try:
                terms, buckets, counts = decode_many([r[1] for r in tail])
            except ValueError as exc:
                raise MemoryStoreError(
                    f"document store {self.db_path}: {exc}; the database is damaged, restore it "
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

    # -- writing ---------------------------------------------------------------------------

    def meta_snapshot(
        self, table: SlotTable, dense: DenseRows, lex: LexicalIndex, *, edits: int, watermark: int
    ) -> DocMeta | None:
        """The meta file's content now (called under the store's lock), or ``None`` when it is current."""
        key = (table.count, edits, watermark)
        if key == self.meta_key:
            return None
        slots = np.flatnonzero(table.alive).astype(np.int64)
        return DocMeta(
            tag=self.tag,
            edits=edits,
            watermark=watermark,
            sources=list(table.source_codes),
            spaces=["", self.fingerprint],
            slots=slots,
            created=table.created[slots].copy(),
            source=table.source[slots].copy(),
            space=(dense.row_of[slots] >= 0).astype(np.int32),
            lengths=lex.lengths(slots),
            marks=list(table.mark_codes),
            mark=table.mark[slots].copy(),
        )

    def save_meta(self, meta: DocMeta) -> None:
        try:
            write_meta(self.meta_path, meta)
        except (OSError, ValueError) as exc:
            log.warning("document store %s: meta file not written: %s", self.db_path, exc)
            remove_partial(self.meta_path)
            return
        with self.lock:
            self.meta_key = (len(meta.slots), meta.edits, meta.watermark)

    def save_vectors(self, dense: DenseRows, parts: VectorParts) -> None:
        """Write the vector file now. Raises ``OSError``/``ValueError`` (a partial file is removed)."""
        try:
            changes = dense.save(self.vec_path, parts, tag=self.tag, fingerprint=self.fingerprint, dim=self.dim)
        except (OSError, ValueError):
            remove_partial(self.vec_path)
            raise
        with self.lock:
            dense.saved_changes = changes

    def busy(self) -> bool:
        """Whether a background write is running."""
        with self.lock:
            return self.thread is not None and self.thread.is_alive()

    def start(
        self,
        arrays: SnapshotArrays,
        changes: int,
        dense: DenseRows,
        vectors: VectorParts | None,
        meta: DocMeta | None,
    ) -> None:
        """Write the lexical snapshot, then the vector and meta files, in a background thread."""
        with self.lock:
            if self.thread is not None and self.thread.is_alive():
                return
            thread = threading.Thread(
                target=self._write,
                args=(arrays, changes, dense, vectors, meta),
                name=f"lexical-snapshot:{self.db_path.name}",
                daemon=True,
            )
            self.thread = thread
            thread.start()

    def _write(
        self,
        arrays: SnapshotArrays,
        changes: int,
        dense: DenseRows,
        vectors: VectorParts | None,
        meta: DocMeta | None,
    ) -> None:
        try:
            write_snapshot(self.lex_path, arrays)
        except OSError as exc:
            log.warning("document store %s: lexical snapshot not written: %s", self.db_path, exc)
            remove_partial(self.lex_path)
            return
        with self.lock:
            self.watermark = max(self.watermark, arrays.watermark)
            self.lex_saved = changes
        if vectors is not None:
            try:
                self.save_vectors(dense, vectors)
            except (OSError, ValueError) as exc:
                log.warning("document store %s: vector file not written: %s", self.db_path, exc)
        if meta is not None:
            self.save_meta(meta)

    def write_lexical(self, arrays: SnapshotArrays, changes: int) -> None:
        """Write the lexical snapshot now (flush).

        Raises:
            MemoryStoreError: the file cannot be written.
        """
        try:
            write_snapshot(self.lex_path, arrays)
        except OSError as exc:
            remove_partial(self.lex_path)
            raise MemoryStoreError(
                f"document store {self.db_path}: cannot write the lexical snapshot: {exc}; "
                "check the folder's free space and permissions (documents are not affected)"
            ) from exc
        self.watermark, self.lex_saved = arrays.watermark, changes

    def join(self) -> None:
        """Wait for the background write, if any."""
        with self.lock:
            thread = self.thread
        if thread is not None:
            thread.join()
