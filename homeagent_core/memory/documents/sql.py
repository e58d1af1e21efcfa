"""Durable record of the document store: the SQL schema and every statement it runs.

:class:`DocumentRecords` is the seam between the store's in-memory indexes and its database:
the store (:mod:`homeagent_core.memory.documents.store`) calls only these methods, so another SQL
engine plugs in by implementing them. :class:`SqliteRecords` is the SQLite implementation
(WAL, ``synchronous=FULL``: a write is durable when the call returns).

Every document has an integer *slot* (its autoincrement row id), which the indexes use instead
of its id; slots are never reused, so ``max_slot`` is a watermark the index files are checked
against. ``lex`` holds the document's lexical terms
(:func:`~homeagent_core.memory.documents.lexical.index.encode_terms`) so the lexical index can
be rebuilt without re-tokenising. ``store_meta`` keeps the store's id,
the term scheme version and an ``edits`` counter, bumped in the same transaction as every
change to stored rows other than inserts (deletes, re-embedding, term re-derivation): the
per-document numbers file beside the database is current only while the counter matches.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from homeagent_core.memory.audience import LIBRARY_OWNER
from homeagent_core.memory.documents.model import DOCUMENT_COLUMNS, Document, document_from_row
from homeagent_sdk._schema import StoreSchema, open_schema, sql_step, tables
from homeagent_sdk.errors import DataFormatError, MemoryStoreError

__all__ = ["DOCUMENTS_SCHEMA", "DocumentRecords", "OpenRow", "SqliteRecords"]

OpenRow = tuple[int, float, str, bool, int, str, str]
"""What opening needs of a document: slot, creation time, source, vector in the active space, gram
count, person and visibility."""

def _shape(conn: sqlite3.Connection) -> int:
    """The version of a file from before versions were recorded, by its indexes."""
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    return 2 if "documents_open" in indexes else 1 if "documents" in tables(conn) else 0


DOCUMENTS_SCHEMA = StoreSchema(
    "documents.db",
    [
        # 1: the first release
        sql_step(
            """CREATE TABLE IF NOT EXISTS documents (
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
            )""",
            "CREATE INDEX IF NOT EXISTS documents_cold ON documents (last_access, access_count)",
            "CREATE TABLE IF NOT EXISTS store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ),
        # 2: opening reads what it needs of every document from one covering index
        sql_step(
            "CREATE INDEX IF NOT EXISTS documents_open ON documents (slot, created_at, source, vec_model, lex_len)"
        ),
        # 3: whom a document came from and who may see it (earlier ones: claimed for the owner at
        # open, see claim_for_owner); the covering index carries both
        sql_step(
            "ALTER TABLE documents ADD COLUMN person TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE documents ADD COLUMN visibility TEXT NOT NULL DEFAULT 'private'",
            "DROP INDEX IF EXISTS documents_open",
            "CREATE INDEX IF NOT EXISTS documents_open_marks"
            " ON documents (slot, created_at, source, vec_model, lex_len, person, visibility)",
        ),
    ],
    legacy=_shape,
)
"""The schema of ``documents.db``: one step per version (never edit a shipped one)."""
PEOPLE_MIGRATED = "people_migrated"
"""``store_meta`` key: how many documents :func:`claim_for_owner` gave to the owner (absent: none)."""


def claim_for_owner(db: sqlite3.Connection, owner: str) -> int:
    """Documents stored before documents recorded their person become ``owner``'s, ``private``.

    Their count is kept under :data:`PEOPLE_MIGRATED` (for the first start's notice) and
    returned. Documents of :data:`~homeagent_core.memory.audience.LIBRARY_OWNER` (stored without
    a person registry) become ``owner``'s too. Idempotent; one transaction.
    """
    moved = 0
    db.execute("BEGIN IMMEDIATE")
    try:
        moved = int(db.execute("UPDATE documents SET person = ? WHERE person = ''", (owner,)).rowcount)
        if moved:
            db.execute("INSERT OR REPLACE INTO store_meta VALUES (?, ?)", (PEOPLE_MIGRATED, str(moved)))
        adopted = 0
        if owner != LIBRARY_OWNER:  # stored by library use without a person registry: the owner's now
            adopted = int(
                db.execute("UPDATE documents SET person = ? WHERE person = ?", (owner, LIBRARY_OWNER)).rowcount
            )
        if moved or adopted:  # the cached per-document file must not keep the old marks
            db.execute(
                "INSERT INTO store_meta VALUES ('edits', '1') ON CONFLICT(key) DO UPDATE"
                " SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
            )
        db.execute("COMMIT")
    except sqlite3.Error:
        db.execute("ROLLBACK")
        raise
    return moved

_COLUMNS = DOCUMENT_COLUMNS
_PART = 500  # ids or slots per IN (...) list
CACHE_KIB = 16384
"""SQLite page cache of the document database (KiB): room for the interior pages of a million documents."""


class DocumentRecords(Protocol):
    """What the document store needs of its database. Calls come serialised (the store's lock)."""

    def store_id(self) -> str:
        """This store's random id (created on first open); index files carry it."""
        ...

    def meta(self, key: str) -> str | None: ...

    def edits(self) -> int:
        """The counter of changes to stored rows other than inserts."""
        ...

    def max_slot(self) -> int:
        """The highest slot ever issued (0 for a new store)."""
        ...

    def rederive_terms(self, version: str, derive: Callable[[str], tuple[bytes, int]]) -> int:
        """Unless the stored term scheme is ``version``, recompute every document's terms
        (``derive(text)`` gives the blob and gram count) in one transaction; returns how many."""
        ...

    def open_rows(self, fingerprint: str, after: int) -> list[OpenRow]:
        """:data:`OpenRow` of every document above slot ``after``, by slot."""
        ...

    def terms_after(self, after: int) -> list[tuple[int, bytes, int]]:
        """Slot, term blob and gram count of every document above slot ``after``, by slot."""
        ...

    def vectors(self, slots: Sequence[int]) -> list[tuple[int, bytes | None]]:
        """Stored vector blobs of ``slots`` (ascending)."""
        ...

    def slots_of(self, doc_ids: Iterable[str]) -> dict[str, int]: ...

    def set_visibility(self, slots: Sequence[int], visibility: str) -> None:
        """Change the visibility of ``slots`` in one transaction."""
        ...

    def documents(self, slots: Sequence[int]) -> dict[int, Document]: ...

    def ids(self, slots: Sequence[int]) -> dict[int, str]:
        """The document id of each of ``slots`` that is stored."""
        ...

    def insert(
        self, docs: Sequence[Document], vectors: Sequence[bytes | None], fingerprint: str,
        terms: Sequence[tuple[bytes, int]],
    ) -> list[int]:
        """Insert in one transaction; returns the new slots in order."""
        ...

    def delete(self, slots: Sequence[int]) -> list[tuple[int, bytes]]:
        """Delete in one transaction; returns the deleted documents' slots and term blobs."""
        ...

    def set_vectors(self, slots: Sequence[int], vectors: Sequence[bytes], fingerprint: str) -> None: ...

    def stale(self, fingerprint: str, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` documents whose vector is not of ``fingerprint``: slot and text."""
        ...

    def write_access(self, reads: dict[int, tuple[float, int]]) -> None:
        """Store last access and access count per slot."""
        ...

    def touch(self, slots: Sequence[int], when: float) -> None: ...

    def get(self, doc_id: str) -> Document | None: ...

    def all(self, limit: int | None) -> list[Document]: ...

    def cold(self, cutoff: float, max_reads: int, limit: int) -> list[Document]: ...

    def event_ids(self) -> Iterator[str]:
        """Every ``meta.event_id`` stored."""
        ...

    def close(self) -> None: ...


class SqliteRecords:
    """:class:`DocumentRecords` in one SQLite file (``<data>/memory/documents.db``).

    Raises:
        MemoryStoreError: the file cannot be opened as a database.
        DataFormatError: the file is from a newer HomeAgent, or migrating it failed.
    """

    def __init__(self, path: Path, *, owner: str) -> None:
        self.path = path
        try:
            self.db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            # a query reads its best documents' stored vectors by slot; at 1M documents the
            # table's interior B-tree pages alone take about 13 MB, and with SQLite's default
            # 2 MB cache every such read walked them from the file again (64 rows: 2.5 ms
            # against 0.37 ms with them cached). The cache fills only as pages are read.
            self.db.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
            open_schema(self.db, path, DOCUMENTS_SCHEMA)
            self.migrated = claim_for_owner(self.db, owner)
        except DataFormatError:
            self.db.close()
            raise
        except sqlite3.DatabaseError as exc:
            raise MemoryStoreError(
                f"cannot open the document store {path}: {exc}; move the file away to start with an empty store"
            ) from exc

    def store_id(self) -> str:
        store_id = self.meta("store_id")
        if store_id is None:
            store_id = uuid.uuid4().hex
            self.db.execute("INSERT INTO store_meta VALUES ('store_id', ?)", (store_id,))
        return store_id

    def meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM store_meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def edits(self) -> int:
        return int(self.meta("edits") or 0)

    @staticmethod
    def _bump_edits(cur: sqlite3.Cursor) -> None:
        """Count a change to stored rows (inside the caller's transaction): the meta file is stale."""
        cur.execute(
            "INSERT INTO store_meta VALUES ('edits', '1') ON CONFLICT(key) DO UPDATE"
            " SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
        )

    def _transaction(self, what: str, work: Callable[[sqlite3.Cursor], None]) -> None:
        cur = self.db.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE")
            work(cur)
            cur.execute("COMMIT")
        except sqlite3.Error as exc:
            cur.execute("ROLLBACK")
            raise MemoryStoreError(f"document store {self.path}: {what} failed: {exc}") from exc

    def max_slot(self) -> int:
        row = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name='documents'").fetchone()
        return int(row[0]) if row else 0

    def rederive_terms(self, version: str, derive: Callable[[str], tuple[bytes, int]]) -> int:
        if self.meta("lex_version") == version:
            return 0
        rows = self.db.execute("SELECT slot, title, content FROM documents").fetchall()
        updates = []
        for slot, title, content in rows:
            blob, length = derive(f"{title}\n{content}" if title else content)
            updates.append((blob, length, slot))

        def work(cur: sqlite3.Cursor) -> None:
            cur.executemany("UPDATE documents SET lex=?, lex_len=? WHERE slot=?", updates)
            cur.execute("INSERT OR REPLACE INTO store_meta VALUES ('lex_version', ?)", (version,))
            self._bump_edits(cur)

        self._transaction("re-indexing stored terms", work)
        return len(rows)

    def open_rows(self, fingerprint: str, after: int) -> list[OpenRow]:
        # the covering index documents_open answers this without touching vector or term blobs
        return self.db.execute(
            "SELECT slot, created_at, source, vec_model = ?, lex_len, person, visibility FROM documents"
            " WHERE slot > ? ORDER BY slot",
            (fingerprint, after),
        ).fetchall()

    def terms_after(self, after: int) -> list[tuple[int, bytes, int]]:
        return self.db.execute(
            "SELECT slot, lex, lex_len FROM documents WHERE slot > ? ORDER BY slot", (after,)
        ).fetchall()

    def vectors(self, slots: Sequence[int]) -> list[tuple[int, bytes | None]]:
        out: list[tuple[int, bytes | None]] = []
        for start in range(0, len(slots), _PART):
            part = list(slots[start : start + _PART])
            marks = ",".join("?" * len(part))
            out += self.db.execute(f"SELECT slot, vector FROM documents WHERE slot IN ({marks}) ORDER BY slot", part)
        return out

    def slots_of(self, doc_ids: Iterable[str]) -> dict[str, int]:
        wanted = list(dict.fromkeys(doc_ids))
        found: dict[str, int] = {}
        for start in range(0, len(wanted), _PART):
            part = wanted[start : start + _PART]
            marks = ",".join("?" * len(part))
            found.update(self.db.execute(f"SELECT id, slot FROM documents WHERE id IN ({marks})", part).fetchall())
        return found

    def set_visibility(self, slots: Sequence[int], visibility: str) -> None:
        def work(cur: sqlite3.Cursor) -> None:
            cur.executemany("UPDATE documents SET visibility=? WHERE slot=?", [(visibility, s) for s in slots])
            self._bump_edits(cur)

        self._transaction("changing visibility", work)

    def documents(self, slots: Sequence[int]) -> dict[int, Document]:
        marks = ",".join("?" * len(slots))
        return {
            r[0]: document_from_row(r[1:])
            for r in self.db.execute(f"SELECT slot, {_COLUMNS} FROM documents WHERE slot IN ({marks})", list(slots))
        }

    def ids(self, slots: Sequence[int]) -> dict[int, str]:
        marks = ",".join("?" * len(slots))
        return dict(self.db.execute(f"SELECT slot, id FROM documents WHERE slot IN ({marks})", list(slots)))

    def insert(
        self, docs: Sequence[Document], vectors: Sequence[bytes | None], fingerprint: str,
        terms: Sequence[tuple[bytes, int]],
    ) -> list[int]:
        slots: list[int] = []

        def work(cur: sqlite3.Cursor) -> None:
            for doc, vec, (blob, length) in zip(docs, vectors, terms, strict=True):
                cur.execute(
                    "INSERT INTO documents (id, title, content, source, created_at, last_access,"
                    " access_count, media_digests, meta, vector, vec_model, lex, lex_len, person, visibility)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                        fingerprint if vec is not None else "",
                        blob,
                        length,
                        doc.person,
                        doc.visibility,
                    ),
                )
                slots.append(int(cur.lastrowid or 0))

        self._transaction("insert", work)
        return slots

    def delete(self, slots: Sequence[int]) -> list[tuple[int, bytes]]:
        marks = ",".join("?" * len(slots))
        blobs: list[tuple[int, bytes]] = self.db.execute(
            f"SELECT slot, lex FROM documents WHERE slot IN ({marks})", list(slots)
        ).fetchall()

        def work(cur: sqlite3.Cursor) -> None:
            cur.execute(f"DELETE FROM documents WHERE slot IN ({marks})", list(slots))
            self._bump_edits(cur)

        self._transaction("delete", work)
        return blobs

    def set_vectors(self, slots: Sequence[int], vectors: Sequence[bytes], fingerprint: str) -> None:
        def work(cur: sqlite3.Cursor) -> None:
            cur.executemany(
                "UPDATE documents SET vector=?, vec_model=? WHERE slot=?",
                [(v, fingerprint, s) for s, v in zip(slots, vectors, strict=True)],
            )
            self._bump_edits(cur)

        self._transaction("storing vectors", work)

    def stale(self, fingerprint: str, limit: int) -> list[tuple[int, str]]:
        rows = self.db.execute(
            "SELECT slot, title, content FROM documents WHERE vec_model != ? LIMIT ?", (fingerprint, limit)
        ).fetchall()
        return [(s, f"{t}\n{c}" if t else c) for s, t, c in rows]

    def write_access(self, reads: dict[int, tuple[float, int]]) -> None:
        self.db.executemany(
            "UPDATE documents SET last_access=?, access_count=? WHERE slot=?",
            [(t, c, s) for s, (t, c) in reads.items()],
        )

    def touch(self, slots: Sequence[int], when: float) -> None:
        self.db.executemany(
            "UPDATE documents SET last_access = ?, access_count = access_count + 1 WHERE slot = ?",
            [(when, slot) for slot in slots],
        )

    def get(self, doc_id: str) -> Document | None:
        row = self.db.execute(f"SELECT {_COLUMNS} FROM documents WHERE id=?", (doc_id,)).fetchone()
        return document_from_row(row) if row else None

    def all(self, limit: int | None) -> list[Document]:
        sql = f"SELECT {_COLUMNS} FROM documents ORDER BY created_at, slot"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [document_from_row(r) for r in self.db.execute(sql)]

    def cold(self, cutoff: float, max_reads: int, limit: int) -> list[Document]:
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM documents WHERE last_access <= ? AND access_count <= ?"
            " ORDER BY last_access LIMIT ?",
            (cutoff, max_reads, limit),
        ).fetchall()
        return [document_from_row(r) for r in rows]

    def event_ids(self) -> Iterator[str]:
        rows = self.db.execute(
            "SELECT json_extract(meta, '$.event_id') FROM documents WHERE json_extract(meta, '$.event_id') IS NOT NULL"
        )
        return (r[0] for r in rows.fetchall())

    def close(self) -> None:
        self.db.close()
