"""Copy the graph store between a SQLite data directory and PostgreSQL, verified.

``homeagent store migrate`` calls :func:`migrate_graph` after the documents. Every table of
``<data>/memory/graph.db`` (entities with their vectors and keyword terms, sentences, media
blocks, relations, block edges, person traits, applied batch ids, the tokenizer fingerprint) is
copied row by row with its ids, so relations keep their endpoints and nothing is re-embedded.
The copy is resumable: each batch is one transaction in the destination and rows already there
(same key) are skipped. At the end every table is compared by count and by a SHA-256 over its
rows in key order; a mismatch is an error.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homeagent_core.memory.stores.postgresql.migrate import migration_kinds
from homeagent_sdk.errors import MemoryStoreError, UsageError

__all__ = ["GraphMigrationReport", "migrate_graph"]

# table -> (columns, key columns); parents before children, so foreign keys hold in each batch
TABLES: dict[str, tuple[str, str]] = {
    "entities": ("id, name, type, mention_count, vector, vec_model, created_at, updated_at, terms", "id"),
    "sentences": ("id, text, session, created_at, person, visibility", "id"),
    "memory_blocks": ("id, digest, mime, vector, vec_model, created_at, person, visibility", "id"),
    "relations": (
        "id, source_id, target_id, type, confidence, session, sentence_id, status, reviewed_at, created_at,"
        " updated_at, review_attempts, review_attempted_at, person, visibility",
        "id",
    ),
    "memory_block_edges": ("id, sentence_id, block_id, type, created_at, person, visibility", "id"),
    "person_traits": ("entity_id, trait, value, updated_at", "entity_id, trait"),
    "applied_batches": ("batch_id, applied_at", "batch_id"),
    "graph_meta": ("key, value", "key"),
}


@dataclass(frozen=True, slots=True)
class GraphMigrationReport:
    """What a graph copy did: rows copied now per table, and both sides' counts and checksums."""

    copied: dict[str, int]
    source_counts: dict[str, int]
    target_counts: dict[str, int]
    source_checksum: str
    target_checksum: str
    seconds: float

    @property
    def verified(self) -> bool:
        return self.source_counts == self.target_counts and self.source_checksum == self.target_checksum

    def to_dict(self) -> dict[str, Any]:
        return {
            "copied": dict(self.copied), "source_counts": dict(self.source_counts),
            "target_counts": dict(self.target_counts), "source_checksum": self.source_checksum,
            "target_checksum": self.target_checksum, "verified": self.verified, "seconds": round(self.seconds, 3),
        }


def _canonical(row: tuple[Any, ...]) -> bytes:
    parts = []
    for value in row:
        if isinstance(value, bytes | bytearray | memoryview):
            parts.append("b:" + bytes(value).hex())
        elif isinstance(value, float):
            parts.append("f:" + repr(value))
        else:
            parts.append(f"{type(value).__name__}:{value!r}")
    return "\x1f".join(parts).encode()


class _Side:
    """One end of the copy: read rows in key order, write a batch skipping present keys."""

    def __init__(self, read: Callable[[str], list[tuple[Any, ...]]],
                 write: Callable[[str, str, list[tuple[Any, ...]]], None]) -> None:
        self.read = read
        self.write = write

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        columns, key = TABLES[table]
        # "C" collation: both databases order text keys by their bytes
        order = ", ".join(f'{k.strip()} COLLATE "C"' if k.strip() in ("trait", "batch_id", "key") else k.strip()
                          for k in key.split(","))
        return self.read(f"SELECT {columns} FROM {table} ORDER BY {order}")


def _checksum(side: _Side) -> tuple[dict[str, int], str]:
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    for table in TABLES:
        rows = side.rows(table)
        counts[table] = len(rows)
        digest.update(table.encode() + b"\0")
        for row in rows:
            digest.update(hashlib.sha256(_canonical(row)).digest())
    return counts, digest.hexdigest()


def _sqlite_side(path: Path, *, create: bool) -> tuple[_Side, Callable[[], None]]:
    if not path.exists() and not create:
        raise UsageError(f"no graph store at {path}; pass --data pointing at the data directory")
    from homeagent_core.memory.graph.sql import SQLiteGraphSQL

    SQLiteGraphSQL(path).close()  # creates or upgrades the schema
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")

    def read(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.execute(sql.replace(' COLLATE "C"', " COLLATE BINARY"))]

    def write(table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        marks = ", ".join("?" * len(rows[0]))
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING", rows)
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise MemoryStoreError(f"cannot write the graph store {path}: {exc}") from exc
        conn.execute("COMMIT")

    return _Side(read, write), conn.close


def _pg_side(url: str, tenant: str) -> tuple[_Side, Callable[[], None]]:
    from homeagent_core.memory.stores.postgresql.graph import PgGraphSQL

    sql = PgGraphSQL(url, tenant=tenant)

    def read(query: str) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = sql.read(lambda c: [tuple(r) for r in c.raw.execute(query).fetchall()])
        return rows

    return _Side(read, sql.import_rows), sql.close


def migrate_graph(
    source: str,
    target: str,
    *,
    data_dir: Path,
    tenant: str = "default",
    batch: int = 1000,
) -> GraphMigrationReport:
    """Copy the graph from ``source`` to ``target`` (``sqlite`` or a ``postgresql://`` URL), then verify.

    Raises:
        UsageError: both sides are the same kind, a side is neither, or the SQLite source is missing.
        MemoryStoreError: a side cannot be opened, or the verification failed.
    """
    kinds = migration_kinds(source, target)
    started = time.perf_counter()
    path = data_dir / "memory" / "graph.db"
    lite, close_lite = _sqlite_side(path, create=kinds[1] == "sqlite")
    try:
        pg, close_pg = _pg_side(source if kinds[0] == "postgresql" else target, tenant)
    except BaseException:
        close_lite()
        raise
    src, dst = (lite, pg) if kinds[0] == "sqlite" else (pg, lite)
    copied: dict[str, int] = {}
    try:
        for table, (columns, _key) in TABLES.items():
            present = len(dst.rows(table))
            rows = src.rows(table)
            for chunk in _chunks(rows, batch):
                dst.write(table, columns, chunk)
            copied[table] = max(0, len(dst.rows(table)) - present)
        source_counts, source_sum = _checksum(src)
        target_counts, target_sum = _checksum(dst)
    finally:
        close_lite()
        close_pg()
    report = GraphMigrationReport(copied, source_counts, target_counts, source_sum, target_sum,
                                  time.perf_counter() - started)
    if not report.verified:
        raise MemoryStoreError(
            f"the graph copy does not match its source: {source_counts} (sha256 {source_sum[:12]}) vs "
            f"{target_counts} (sha256 {target_sum[:12]}); the target already held another graph, or a daemon "
            "wrote meanwhile; stop the daemons and run the migration again"
        )
    return report


def _chunks(rows: list[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    for i in range(0, len(rows), size):
        yield rows[i : i + size]
