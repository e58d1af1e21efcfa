"""The document store's write transactions on PostgreSQL: rows, change-log entries and ``NOTIFY`` together.

Each function is the body of one transaction of
:meth:`~homeagent_core.memory.stores.postgresql.database.PgDatabase.transact` (which retries it on a lost
connection): it takes the tenant's row in ``ha_tenants`` first (serialising the tenant's
writers, so slots and change numbers commit in order), writes its rows and one ``ha_changes``
entry per row under the next change number, and notifies the other daemons.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.audience import LIBRARY_OWNER
from homeagent_core.memory.stores.postgresql.database import CHANNEL

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from psycopg import AsyncConnection

__all__ = ["NothingToDo", "adopt_unowned", "delete_rows", "insert_records", "set_visibility", "store_vectors"]


class NothingToDo(Exception):
    """Raised inside a transaction to roll it back when it found nothing to change."""


async def _next_change(conn: AsyncConnection[Any], tenant: str, slots: int = 0) -> tuple[int, int]:
    """Take the tenant's row: reserve ``slots`` slots and the next change number; (last slot, change)."""
    cur = await conn.execute(
        "UPDATE ha_tenants SET next_slot = next_slot + %s, change_seq = change_seq + 1"
        " WHERE tenant=%s RETURNING next_slot, change_seq",
        (slots, tenant),
    )
    top, seq = await cur.fetchone() or (0, 0)
    return int(top), int(seq)


async def insert_records(conn: AsyncConnection[Any], tenant: str, records: Sequence[tuple[Any, ...]]) -> int:
    """Insert rows ``(id, title, content, source, created_at, last_access, access_count,
    media_digests_json, meta, vector, vec_model, lex, lex_len, person, visibility)``; returns the first slot."""
    from psycopg.types.json import Jsonb

    n = len(records)
    top, seq = await _next_change(conn, tenant, n)
    first = top - n + 1
    params = [(tenant, first + i, *r[:8], Jsonb(r[8]), *r[9:]) for i, r in enumerate(records)]
    async with conn.cursor() as wc:
        await wc.executemany(
            "INSERT INTO ha_documents (tenant, slot, id, title, content, source, created_at,"
            " last_access, access_count, media_digests, meta, vector, vec_model, lex, lex_len, person, visibility)"
            " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            params,
        )
        await wc.executemany(
            "INSERT INTO ha_changes (tenant, seq, kind, slot) VALUES (%s,%s,'add',%s)",
            [(tenant, seq, first + i) for i in range(n)],
        )
    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, tenant))
    return first


async def delete_rows(conn: AsyncConnection[Any], tenant: str, ids: list[str]) -> int:
    """Delete the documents with these ids; returns how many. Raises :class:`NothingToDo` when none."""
    _, seq = await _next_change(conn, tenant)
    cur = await conn.execute(
        "DELETE FROM ha_documents WHERE tenant=%s AND id = ANY(%s) RETURNING slot, lex", (tenant, ids)
    )
    gone = await cur.fetchall()
    if not gone:
        raise NothingToDo
    async with conn.cursor() as wc:
        await wc.executemany(
            "INSERT INTO ha_changes (tenant, seq, kind, slot, lex) VALUES (%s,%s,'del',%s,%s)",
            [(tenant, seq, slot, lex) for slot, lex in gone],
        )
    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, tenant))
    return len(gone)


async def store_vectors(
    conn: AsyncConnection[Any], tenant: str, slots: list[int], vectors: npt.NDArray[np.float32], space: str
) -> None:
    """Set the vectors of these slots, computed in embedding space ``space``."""
    _, seq = await _next_change(conn, tenant)
    async with conn.cursor() as wc:
        await wc.executemany(
            "UPDATE ha_documents SET vector=%s, vec_model=%s WHERE tenant=%s AND slot=%s",
            [(v, space, tenant, s) for s, v in zip(slots, vectors, strict=True)],
        )
        await wc.executemany(
            "INSERT INTO ha_changes (tenant, seq, kind, slot) VALUES (%s,%s,'vec',%s)",
            [(tenant, seq, s) for s in slots],
        )
    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, tenant))


async def set_visibility(conn: AsyncConnection[Any], tenant: str, ids: list[str], visibility: str) -> int:
    """Give these documents ``visibility`` (a ``mark`` change per row); how many. :class:`NothingToDo` when none."""
    _, seq = await _next_change(conn, tenant)
    cur = await conn.execute(
        "UPDATE ha_documents SET visibility=%s WHERE tenant=%s AND id = ANY(%s) RETURNING slot",
        (visibility, tenant, ids),
    )
    slots = [r[0] for r in await cur.fetchall()]
    if not slots:
        raise NothingToDo
    async with conn.cursor() as wc:
        await wc.executemany(
            "INSERT INTO ha_changes (tenant, seq, kind, slot) VALUES (%s,%s,'mark',%s)",
            [(tenant, seq, s) for s in slots],
        )
    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, tenant))
    return len(slots)


async def adopt_unowned(conn: AsyncConnection[Any], tenant: str, owner: str) -> int:
    """Give the tenant's documents stored before documents recorded a person (``person`` '') to
    ``owner``; how many (schema step 6's data half, run when a store opens)."""
    cur = await conn.execute("UPDATE ha_documents SET person=%s WHERE tenant=%s AND person=''", (owner, tenant))
    moved = int(cur.rowcount or 0)
    if owner != LIBRARY_OWNER:  # stored by library use without a person registry: the owner's now
        await conn.execute(
            "UPDATE ha_documents SET person=%s WHERE tenant=%s AND person=%s", (owner, tenant, LIBRARY_OWNER)
        )
    return moved
