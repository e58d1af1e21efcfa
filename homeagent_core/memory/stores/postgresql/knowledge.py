"""The knowledge base on PostgreSQL: one set of curated entries for every daemon of a tenant.

Implements :class:`~homeagent_core.memory.knowledge.base.KnowledgeStorage` over ``ha_knowledge``: one row per
entry (name, content, time of the last write) with the entry's cached vector and the fingerprint
of its space, so a daemon that starts does not re-embed what another daemon already embedded.
Writes send ``NOTIFY``; the other daemons reload their entries at their next knowledge call.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.stores.knowledge import KnowledgeStorage
from homeagent_core.memory.stores.postgresql.database import CHANNEL, PgDatabase
from homeagent_sdk.errors import UsageError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgKnowledge"]

log = logging.getLogger(__name__)


class PgKnowledge(KnowledgeStorage):
    """One tenant's knowledge entries in a PostgreSQL database.

    Args:
        db: an open :class:`PgDatabase`, or a ``postgresql://`` URL (then this object owns and
            closes the connection pool).
        tenant: whose knowledge this is.

    Raises:
        MemoryStoreError: the database cannot be reached or its schema is newer.
        UsageError: the tenant id is empty.
    """

    def __init__(self, db: PgDatabase | str, *, tenant: str = "default") -> None:
        if not tenant.strip():
            raise UsageError("the PostgreSQL knowledge base needs a non-empty tenant id")
        self._owns_db = isinstance(db, str)
        self.db = PgDatabase(db) if isinstance(db, str) else db
        self.tenant = tenant
        self._writer = uuid.uuid4().hex[:12]
        self._on_change: Callable[[], None] | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"PgKnowledge({self.db.safe_url}, tenant={self.tenant!r})"

    def _fetch(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """The rows of a read (retried when the connection is lost)."""

        async def body(conn: AsyncConnection[Any]) -> list[tuple[Any, ...]]:
            cur = await conn.execute(sql, params)
            return [tuple(r) for r in await cur.fetchall()]

        rows: list[tuple[Any, ...]] = self.db.call(self.db.transact(body, write=False))
        return rows

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        """Run ``sql`` and a ``NOTIFY`` in one transaction (retried when the connection is lost)."""

        async def body(conn: AsyncConnection[Any]) -> None:
            await conn.execute(sql, params)
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, f"knowledge:{self._writer}:{self.tenant}"))

        self.db.call(self.db.transact(body))

    def load(self) -> list[tuple[str, str, float]]:
        rows = self._fetch(
            'SELECT name, content, updated_at FROM ha_knowledge WHERE tenant=%s ORDER BY name COLLATE "C"',
            (self.tenant,),
        )
        return [(str(n), str(c), float(u)) for n, c, u in rows]

    def load_index(self) -> dict[str, Any]:
        rows = self._fetch(
            "SELECT name, updated_at, fingerprint, vector FROM ha_knowledge WHERE tenant=%s AND vector <> ''",
            (self.tenant,),
        )
        return {str(n): {"updated_at": float(u), "fingerprint": str(f), "vector": str(v)} for n, u, f, v in rows}

    def save_index(self, entries: dict[str, Any]) -> None:
        """Store the vectors of entries still at the same version (a cache: no notification)."""
        rows = [(str(item["fingerprint"]), str(item["vector"]), self.tenant, name, float(item["updated_at"]))
                for name, item in entries.items() if item.get("vector") and item.get("fingerprint")]
        if not rows:
            return

        async def body(conn: AsyncConnection[Any]) -> None:
            async with conn.cursor() as cur:
                await cur.executemany(
                    "UPDATE ha_knowledge SET fingerprint=%s, vector=%s WHERE tenant=%s AND name=%s"
                    " AND updated_at=%s AND (fingerprint <> %s OR vector <> %s)",
                    [(*row, row[0], row[1]) for row in rows],
                )

        self.db.call(self.db.transact(body))

    def write(self, name: str, content: str) -> float:
        updated_at = time.time()
        self._write(
            "INSERT INTO ha_knowledge (tenant, name, content, updated_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (tenant, name) DO UPDATE SET content=EXCLUDED.content, updated_at=EXCLUDED.updated_at,"
            " fingerprint='', vector=''",
            (self.tenant, name, content, updated_at),
        )
        return updated_at

    def load_marks(self) -> dict[str, tuple[str, str]]:
        rows = self._fetch(
            "SELECT name, person, visibility FROM ha_knowledge WHERE tenant=%s AND person <> ''", (self.tenant,)
        )
        return {str(n): (str(p), str(v)) for n, p, v in rows}

    def write_marks(self, name: str, person: str, visibility: str) -> None:
        self._write(
            "UPDATE ha_knowledge SET person=%s, visibility=%s WHERE tenant=%s AND name=%s",
            (person, visibility, self.tenant, name),
        )

    def remove(self, name: str) -> None:
        self._write("DELETE FROM ha_knowledge WHERE tenant=%s AND name=%s", (self.tenant, name))

    def follow(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change()`` (on the pool's thread; it must only take note) after another daemon's write."""
        self._on_change = on_change
        self.db.listen(self._on_notify)

    def _on_notify(self, payload: str) -> None:
        if payload:
            kind, _, rest = payload.partition(":")
            writer, _, tenant = rest.partition(":")
            if kind != "knowledge" or tenant != self.tenant or writer == self._writer:
                return
        if not self._closed and self._on_change is not None:
            self._on_change()

    def close(self) -> None:
        """Stop following; close the pool when this object owns it."""
        if self._closed:
            return
        self._closed = True
        if self._on_change is not None:
            self.db.unlisten(self._on_notify)
        if self._owns_db:
            self.db.close()
