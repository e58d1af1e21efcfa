"""Copy the document store between a SQLite data directory and PostgreSQL, verified.

``homeagent store migrate`` calls :func:`migrate_documents`. Rows are copied whole (text, times,
read counts, meta, the vector with its space's fingerprint, the stored lexical terms), so
nothing is re-embedded. The copy is resumable: each batch is one transaction in the
destination, and a rerun skips the documents whose id the destination already holds. At the
end both sides are compared by count and by a SHA-256 over every document's content, in id
order; a mismatch is an error.

The SQLite side is read and written through the ``documents`` table of
``<data>/memory/documents.db`` (the store's durable record); after writing into it, the
store's cache files (``.lex``, ``.vec``, ``.meta``) are removed so the next open rebuilds them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from homeagent_sdk.errors import MemoryStoreError, UsageError

__all__ = ["MigrationReport", "document_checksum", "migrate_documents", "migration_kinds"]

_SQLITE_COLUMNS = (
    "id, title, content, source, created_at, last_access, access_count, media_digests, meta, vector, vec_model,"
    " lex, lex_len, person, visibility"
)


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What a copy did: documents copied now, skipped (already there), totals and checksums."""

    copied: int
    skipped: int
    source_count: int
    target_count: int
    source_checksum: str
    target_checksum: str
    seconds: float

    @property
    def verified(self) -> bool:
        return self.source_count == self.target_count and self.source_checksum == self.target_checksum

    def to_dict(self) -> dict[str, Any]:
        return {
            "copied": self.copied, "skipped": self.skipped, "source_count": self.source_count,
            "target_count": self.target_count, "source_checksum": self.source_checksum,
            "target_checksum": self.target_checksum, "verified": self.verified, "seconds": round(self.seconds, 3),
        }


def _vector_bytes(vector: Any) -> bytes:
    if vector is None:
        return b""
    if isinstance(vector, bytes | bytearray | memoryview):
        return bytes(vector)
    return np.asarray(vector, dtype=np.float32).tobytes()


def _canonical(record: tuple[Any, ...]) -> bytes:
    """One document's content in a backend-independent form (what the checksum covers)."""
    meta = record[8] if isinstance(record[8], dict) else json.loads(record[8])
    text = json.dumps(
        [record[0], record[1], record[2], record[3], repr(float(record[4])), json.loads(record[7]),
         meta, record[10] if record[9] is not None else "", *record[13:15]],
        ensure_ascii=False, sort_keys=True,
    )
    return text.encode() + b"\0" + _vector_bytes(record[9])


def document_checksum(records: Iterator[tuple[Any, ...]]) -> tuple[int, str]:
    """``(count, sha256)`` of documents given in id order."""
    digest = hashlib.sha256()
    count = 0
    for record in records:
        digest.update(hashlib.sha256(_canonical(record)).digest())
        count += 1
    return count, digest.hexdigest()


# -- SQLite side ----------------------------------------------------------------------------------


def _open_sqlite(path: Path, *, create: bool) -> sqlite3.Connection:
    if not path.exists():
        if not create:
            raise UsageError(f"no document store at {path}; pass --data pointing at the data directory")
        from homeagent_core.memory.documents.store import DocumentStore

        DocumentStore(path).close()  # creates the schema
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    return conn


def _sqlite_batches(conn: sqlite3.Connection, batch: int) -> Iterator[list[tuple[Any, ...]]]:
    after = 0
    while True:
        rows = conn.execute(
            f"SELECT slot, {_SQLITE_COLUMNS} FROM documents WHERE slot > ? ORDER BY slot LIMIT ?", (after, batch)
        ).fetchall()
        if not rows:
            return
        after = rows[-1][0]
        yield [tuple(r[1:]) for r in rows]


def _sqlite_sorted(conn: sqlite3.Connection) -> Iterator[tuple[Any, ...]]:
    yield from conn.execute(f"SELECT {_SQLITE_COLUMNS} FROM documents ORDER BY id")


def _sqlite_write(conn: sqlite3.Connection, path: Path, records: list[tuple[Any, ...]]) -> None:
    rows = [(*r[:8], json.dumps(r[8], ensure_ascii=False) if isinstance(r[8], dict) else r[8],
             _vector_bytes(r[9]) if r[9] is not None else None, r[10], bytes(r[11]), r[12], *r[13:15]) for r in records]
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(f"INSERT INTO documents ({_SQLITE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.execute(
            "INSERT INTO store_meta VALUES ('edits', '1') ON CONFLICT(key) DO UPDATE"
            " SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
        )
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        conn.execute("ROLLBACK")
        raise MemoryStoreError(f"cannot write the document store {path}: {exc}") from exc


# -- PostgreSQL side ------------------------------------------------------------------------------

_PG_COLUMNS = _SQLITE_COLUMNS


def _pg_rows(store: Any, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    async def run() -> list[tuple[Any, ...]]:
        async with store.db.connection() as conn:
            cur = conn.cursor(binary=True)
            await cur.execute(sql, params)
            return [tuple(r) for r in await cur.fetchall()]

    rows: list[tuple[Any, ...]] = store.db.call(run())
    return rows


def _pg_batches(store: Any, batch: int) -> Iterator[list[tuple[Any, ...]]]:
    after = 0
    while True:
        rows = _pg_rows(
            store,
            f"SELECT slot, {_PG_COLUMNS} FROM ha_documents WHERE tenant=%s AND slot > %s ORDER BY slot LIMIT %s",
            (store.tenant, after, batch),
        )
        if not rows:
            return
        after = rows[-1][0]
        yield [(*r[1:8], r[8], r[9], r[10], r[11], bytes(r[12]), r[13], r[14], r[15]) for r in rows]


def _pg_sorted(store: Any, batch: int = 5000) -> Iterator[tuple[Any, ...]]:
    after = ""
    while True:
        rows = _pg_rows(
            store,
            f"SELECT {_PG_COLUMNS} FROM ha_documents WHERE tenant=%s AND id COLLATE \"C\" > %s"
            ' ORDER BY id COLLATE "C" LIMIT %s',
            (store.tenant, after, batch),
        )
        if not rows:
            return
        after = rows[-1][0]
        yield from rows


def _pg_ids(store: Any) -> set[str]:
    return {r[0] for r in _pg_rows(store, "SELECT id FROM ha_documents WHERE tenant=%s", (store.tenant,))}


def migration_kinds(source: str, target: str) -> list[str]:
    """``["sqlite", "postgresql"]`` or the reverse: the kinds of a migration's two sides.

    Raises:
        UsageError: both sides are the same kind, or a side is neither ``sqlite`` nor a
            ``postgresql://`` URL.
    """
    kinds = [("sqlite" if side.strip() in ("", "sqlite") else "postgresql" if side.startswith(
        ("postgresql://", "postgres://")) else "") for side in (source, target)]
    if "" in kinds or kinds[0] == kinds[1]:
        raise UsageError("store migrate copies between 'sqlite' and a postgresql:// URL (one of each)")
    return kinds


# -- the copy -------------------------------------------------------------------------------------


def migrate_documents(
    source: str,
    target: str,
    *,
    data_dir: Path,
    tenant: str = "default",
    batch: int = 1000,
    progress: Callable[[int], None] | None = None,
) -> MigrationReport:
    """Copy the documents from ``source`` to ``target`` (``sqlite`` or a ``postgresql://`` URL), then verify.

    Raises:
        UsageError: both sides are the same kind, or a side is neither.
        MemoryStoreError: a side cannot be opened, or the verification failed.
    """
    from homeagent_core.memory.stores.postgresql.documents import PgDocumentStore

    kinds = migration_kinds(source, target)
    path = data_dir / "memory" / "documents.db"
    started = time.perf_counter()
    pg = PgDocumentStore(source if kinds[0] == "postgresql" else target, tenant=tenant, follow=False)
    lite = _open_sqlite(path, create=kinds[1] == "sqlite")
    copied = skipped = 0
    try:
        if kinds[0] == "sqlite":
            present = _pg_ids(pg)
            for rows in _sqlite_batches(lite, batch):
                fresh = [r for r in rows if r[0] not in present]
                skipped += len(rows) - len(fresh)
                pg.import_records([(*r[:9], _as_vector(r[9]), *r[10:]) for r in fresh])
                copied += len(fresh)
                if progress:
                    progress(copied + skipped)
            src, dst = _sqlite_sorted(lite), _pg_sorted(pg)
        else:
            present = {r[0] for r in lite.execute("SELECT id FROM documents")}
            for rows in _pg_batches(pg, batch):
                fresh = [r for r in rows if r[0] not in present]
                skipped += len(rows) - len(fresh)
                if fresh:
                    _sqlite_write(lite, path, fresh)
                copied += len(fresh)
                if progress:
                    progress(copied + skipped)
            for suffix in (".lex", ".vec", ".meta"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
            src, dst = _pg_sorted(pg), _sqlite_sorted(lite)
        source_count, source_sum = document_checksum(src)
        target_count, target_sum = document_checksum(dst)
    finally:
        lite.close()
        pg.close()
    report = MigrationReport(copied, skipped, source_count, target_count, source_sum, target_sum,
                             time.perf_counter() - started)
    if not report.verified:
        raise MemoryStoreError(
            f"the copy does not match its source: {source_count} documents (sha256 {source_sum[:12]}) vs "
            f"{target_count} (sha256 {target_sum[:12]}); the target already held other documents, or a "
            "daemon wrote meanwhile; stop the daemons and run the migration again"
        )
    return report


def _as_vector(blob: Any) -> Any:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32)
