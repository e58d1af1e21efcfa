"""Media blocks on PostgreSQL: one set of images for every daemon of a tenant.

Implements :class:`~homeagent_core.memory.media.MediaIndex` over ``ha_media``: each row holds a
block's metadata, its vector in one embedding space (float32 bytes, as in ``media.db``) and the
block's bytes, so a daemon can serve an image another daemon stored. The
:class:`~homeagent_core.memory.media.MediaStore` keeps its ``blobs/`` folder as this daemon's
verified copy (written when it stores a block, or fetched from the database on first use) and
re-hashes the bytes on every read, wherever they came from. Writes send ``NOTIFY``; the other
daemons then reload the vectors of their active space, so an image stored on one daemon is
found by media search on the others.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.stores.media import FullRow, MediaIndex, Row
from homeagent_core.memory.stores.postgresql.database import CHANNEL, PgDatabase
from homeagent_core.memory.stores.postgresql.follow import ChangeFollower
from homeagent_sdk.errors import UsageError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgMediaIndex"]

log = logging.getLogger(__name__)

_COLUMNS = "digest, mime, size, name, created_at, vec_model, dim"
_FULL = "digest, mime, size, name, created_at, vec, dim, vec_model"


def _row(row: Any) -> Row:
    return (str(row[0]), str(row[1]), int(row[2]), str(row[3]), float(row[4]), str(row[5]), int(row[6]))


class PgMediaIndex(MediaIndex):
    """The media rows (and bytes) of one tenant in a PostgreSQL database.

    Args:
        db: an open :class:`PgDatabase`, or a ``postgresql://`` URL (then this index owns and
            closes the connection pool).
        tenant: whose media these are (an agent or household id).

    Raises:
        MemoryStoreError: the database cannot be reached or its schema is newer.
        UsageError: the tenant id is empty.
    """

    def __init__(self, db: PgDatabase | str, *, tenant: str = "default") -> None:
        if not tenant.strip():
            raise UsageError("the PostgreSQL media store needs a non-empty tenant id")
        self._owns_db = isinstance(db, str)
        self.db = PgDatabase(db) if isinstance(db, str) else db
        self.tenant = tenant
        self._changes = ChangeFollower(self.db, "media", tenant, f"media store {self!r}")

    def __repr__(self) -> str:
        return f"PgMediaIndex({self.db.safe_url}, tenant={self.tenant!r})"

    def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of a read (retried when the connection is lost)."""

        async def body(conn: AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql, params)
            return [tuple(r) for r in await cur.fetchall()]

        rows: list[tuple[Any, ...]] = self.db.call(self.db.transact(body, write=False))
        return rows

    def _write(self, statements: list[tuple[str, tuple[Any, ...]]]) -> list[int]:
        """Run ``statements`` in one transaction with a ``NOTIFY`` (retried when the connection is lost,
        never applied twice: :meth:`PgDatabase.transact`); returns each one's row count."""

        async def body(conn: AsyncConnection[Any]) -> list[int]:
            counts = []
            for sql, params in statements:
                cur = await conn.execute(sql, params)
                counts.append(cur.rowcount)
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self._changes.announcement))
            return counts

        counts: list[int] = self.db.call(self.db.transact(body))
        return counts

    # -- MediaIndex ---------------------------------------------------------------------------

    def lookup(self, prefix: str, limit: int) -> list[str]:
        if len(prefix) == 64:
            rows = self._fetch("SELECT digest FROM ha_media WHERE tenant=%s AND digest=%s", (self.tenant, prefix))
        else:
            rows = self._fetch(
                "SELECT digest FROM ha_media WHERE tenant=%s AND digest LIKE %s ORDER BY digest LIMIT %s",
                (self.tenant, prefix + "%", limit),
            )
        return [str(r[0]) for r in rows]

    def row(self, digest: str) -> Row | None:
        rows = self._fetch(f"SELECT {_COLUMNS} FROM ha_media WHERE tenant=%s AND digest=%s", (self.tenant, digest))
        return _row(rows[0]) if rows else None

    def insert(self, row: FullRow, data: bytes) -> None:
        self._write([(
            f"INSERT INTO ha_media (tenant, {_FULL}, data) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant, digest) DO NOTHING",
            (self.tenant, *row, data),
        )])

    def set_vectors(self, rows: list[tuple[str, bytes, int, str]]) -> list[str]:
        counts = self._write([
            ("UPDATE ha_media SET vec=%s, dim=%s, vec_model=%s WHERE tenant=%s AND digest=%s",
             (vec, dim, fp, self.tenant, digest))
            for digest, vec, dim, fp in rows
        ])
        return [row[0] for row, count in zip(rows, counts, strict=True) if count]

    def delete(self, digest: str) -> None:
        self._write([("DELETE FROM ha_media WHERE tenant=%s AND digest=%s", (self.tenant, digest))])

    def page(self, limit: int, offset: int) -> list[Row]:
        rows = self._fetch(
            f"SELECT {_COLUMNS} FROM ha_media WHERE tenant=%s ORDER BY created_at, digest LIMIT %s OFFSET %s",
            (self.tenant, limit, offset),
        )
        return [_row(r) for r in rows]

    def full_rows(self, after: str, limit: int) -> list[FullRow]:
        rows = self._fetch(
            f'SELECT {_FULL} FROM ha_media WHERE tenant=%s AND digest COLLATE "C" > %s'
            ' ORDER BY digest COLLATE "C" LIMIT %s',
            (self.tenant, after, limit),
        )
        return [(str(r[0]), str(r[1]), int(r[2]), str(r[3]), float(r[4]), None if r[5] is None else bytes(r[5]),
                 int(r[6]), str(r[7])) for r in rows]

    def count(self) -> int:
        return int(self._fetch("SELECT count(*) FROM ha_media WHERE tenant=%s", (self.tenant,))[0][0])

    def vectors(self, vec_model: str, dim: int) -> list[tuple[str, bytes]]:
        rows = self._fetch(
            "SELECT digest, vec FROM ha_media WHERE tenant=%s AND vec_model=%s AND dim=%s AND vec IS NOT NULL",
            (self.tenant, vec_model, dim),
        )
        return [(str(d), bytes(v)) for d, v in rows]

    def stale(self, vec_model: str) -> list[tuple[str, str, str]]:
        rows = self._fetch(
            "SELECT digest, mime, vec_model FROM ha_media WHERE tenant=%s AND vec_model != %s"
            ' ORDER BY digest COLLATE "C"',
            (self.tenant, vec_model),
        )
        return [(str(d), str(m), str(v)) for d, m, v in rows]

    def blob(self, digest: str) -> bytes | None:
        rows = self._fetch("SELECT data FROM ha_media WHERE tenant=%s AND digest=%s", (self.tenant, digest))
        return bytes(rows[0][0]) if rows else None

    # -- following other daemons --------------------------------------------------------------

    def follow(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change()`` (in a worker thread) after another daemon changed this tenant's media."""
        self._changes.follow(on_change)

    def close(self) -> None:
        """Stop following; close the pool when this index owns it."""
        if self._changes.closed:
            return
        self._changes.close()
        if self._owns_db:
            self.db.close()
