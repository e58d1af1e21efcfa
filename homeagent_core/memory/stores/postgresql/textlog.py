"""The conversation log on PostgreSQL: one history for every daemon of a tenant.

Same behaviour as the file log :class:`~homeagent_core.memory.textlog.TextLog` (the
:class:`~homeagent_core.memory.textlog.ConversationLog` interface): ``append`` returns once the
record is committed, ``tail`` reads the newest records backwards in bounded batches, listeners
get each record once it is durable and ``None`` after ``edit``/``purge`` rewrote the log.

Rows live in ``ha_text_log`` (tenant, write-order number ``seq``, record id, time, the record as
JSON text, so every record reads back exactly as written). An append takes the tenant's row in
``ha_log_heads`` (serialising the tenant's writers, so ``seq`` is the commit order) and sends
``NOTIFY`` in the same transaction. Every daemon tells its listeners about the records of the
tenant in ``seq`` order, its own and the others' alike: a message logged on one daemon shows in
the web UI history of the others as soon as the notification arrives. A rewrite (``edit``,
``purge``) counts in ``ha_log_heads.rewrites``; the other daemons then tell their listeners to
re-read.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.stores.log import ConversationLog
from homeagent_core.memory.stores.postgresql.database import CHANNEL, PgDatabase
from homeagent_core.memory.stores.postgresql.follow import ChangeFollower
from homeagent_core.memory.textlog import Listener, new_record
from homeagent_sdk.errors import UsageError
from homeagent_sdk.types import MediaAttachment

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgTextLog"]

log = logging.getLogger(__name__)

_BATCH = 500
_CATCH_UP_MAX = 2000  # more missed records than this: listeners re-read instead


class PgTextLog(ConversationLog):
    """The conversation log of one tenant in a PostgreSQL database.

    Args:
        db: an open :class:`PgDatabase`, or a ``postgresql://`` URL (then this log owns and
            closes the connection pool).
        tenant: whose conversation this is (an agent or household id).
        follow: tell listeners about other daemons' records as they are notified (``LISTEN``).

    Raises:
        MemoryStoreError: the database cannot be reached or its schema is newer.
        UsageError: the tenant id is empty.
    """

    def __init__(self, db: PgDatabase | str, *, tenant: str = "default", follow: bool = True) -> None:
        if not tenant.strip():
            raise UsageError("the PostgreSQL conversation log needs a non-empty tenant id")
        self._owns_db = isinstance(db, str)
        self.db = PgDatabase(db) if isinstance(db, str) else db
        self.tenant = tenant
        self._lock = threading.RLock()  # orders listener calls; guards _seen and _rewrites
        self._listeners: list[Listener] = []
        self._changes = ChangeFollower(self.db, "log", tenant, f"conversation log {self!r}")
        try:
            self._seen, self._rewrites = self.db.call(self._head())
        except BaseException:
            if self._owns_db:
                self.db.close()
            raise
        if follow:
            self._changes.follow(self._follow_once)

    def __repr__(self) -> str:
        return f"PgTextLog({self.db.safe_url}, tenant={self.tenant!r})"

    # -- writes -------------------------------------------------------------------------------

    async def _head(self) -> tuple[int, int]:
        async def body(conn: AsyncConnection[Any]) -> tuple[int, int]:
            cur = await conn.execute("SELECT seq, rewrites FROM ha_log_heads WHERE tenant=%s", (self.tenant,))
            row = await cur.fetchone()
            return (int(row[0]), int(row[1])) if row else (0, 0)

        return await self.db.transact(body, write=False)

    async def _insert(self, records: list[dict[str, Any]]) -> tuple[int, int]:
        """Insert ``records`` in one transaction (retried when the connection is lost, never applied
        twice: :meth:`PgDatabase.transact`); returns the last seq and the rewrite count."""

        async def body(conn: AsyncConnection[Any]) -> tuple[int, int]:
            cur = await conn.execute(
                "INSERT INTO ha_log_heads AS h (tenant, seq) VALUES (%s, %s) ON CONFLICT (tenant)"
                " DO UPDATE SET seq = h.seq + EXCLUDED.seq RETURNING seq, rewrites",
                (self.tenant, len(records)),
            )
            row = await cur.fetchone()
            assert row is not None
            last, rewrites = int(row[0]), int(row[1])
            first = last - len(records) + 1
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO ha_text_log (tenant, seq, id, ts, record) VALUES (%s, %s, %s, %s, %s)",
                    [(self.tenant, first + i, str(r["id"]), float(r["timestamp"]), json.dumps(r, ensure_ascii=False))
                     for i, r in enumerate(records)],
                )
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self._changes.announcement))
            return last, rewrites

        return await self.db.transact(body)

    def append(
        self,
        role: str,
        content: str,
        *,
        channel: str = "",
        source: str = "",
        timestamp: float | None = None,
        attachments: list[MediaAttachment] | None = None,
        reasoning: str = "",
        tools: list[dict[str, Any]] | None = None,
        person: str = "",
        thread: str = "",
        visibility: str = "",
    ) -> str:
        """Commit one record; returns its id.

        Raises:
            UsageError: ``role`` is empty.
            MemoryStoreError: the database write failed (the message was NOT recorded).
        """
        record = new_record(role, content, channel=channel, source=source, timestamp=timestamp,
                            attachments=attachments, reasoning=reasoning, tools=tools, person=person,
                            thread=thread, visibility=visibility)
        self._check_open()
        last, rewrites = self.db.call(self._insert([record]))
        self._after_write(last, rewrites, [record])
        return str(record["id"])

    def import_records(self, records: list[dict[str, Any]]) -> None:
        """Commit whole records (ids and times kept) in order, in one transaction."""
        if not records:
            return
        self._check_open()
        last, rewrites = self.db.call(self._insert(records))
        self._after_write(last, rewrites, records)

    def _after_write(self, last: int, rewrites: int, records: list[dict[str, Any]]) -> None:
        """Tell listeners about the committed ``records`` (and any others' records before them)."""
        with self._lock:
            if rewrites != self._rewrites:
                self._rewrites, self._seen = rewrites, last
                self._notify(None)
            elif last - len(records) == self._seen:
                self._seen = last
                for record in records:
                    self._notify(record)
            else:  # another daemon's records came first: tell them in order
                try:
                    self._catch_up_locked()
                except Exception:  # the record is committed; the next notification catches up
                    log.warning("conversation log %s: cannot read the records before this one yet", self,
                                exc_info=True)

    def _rewrite(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> int:
        """Apply ``change`` to every record of the tenant in one transaction (None = delete), retried
        when the connection is lost (:meth:`PgDatabase.transact`)."""
        self._check_open()

        async def run(conn: AsyncConnection[Any]) -> tuple[int, int, int]:
            changed = 0
            await conn.execute(
                "INSERT INTO ha_log_heads (tenant) VALUES (%s) ON CONFLICT DO NOTHING", (self.tenant,)
            )
            await conn.execute("SELECT 1 FROM ha_log_heads WHERE tenant=%s FOR UPDATE", (self.tenant,))
            updates: list[tuple[str, float, str, int]] = []
            deletes: list[tuple[str, int]] = []
            after = 0
            while True:
                cur = await conn.execute(
                    "SELECT seq, record FROM ha_text_log WHERE tenant=%s AND seq > %s ORDER BY seq LIMIT %s",
                    (self.tenant, after, _BATCH),
                )
                rows = await cur.fetchall()
                if not rows:
                    break
                after = rows[-1][0]
                for seq, text in rows:
                    rec = json.loads(text)
                    new = change(json.loads(text))
                    if new is None:
                        deletes.append((self.tenant, seq))
                    elif new != rec:
                        updates.append((json.dumps(new, ensure_ascii=False), float(new["timestamp"]),
                                        self.tenant, seq))
            changed = len(updates) + len(deletes)
            async with conn.cursor() as cur:
                if updates:
                    await cur.executemany(
                        "UPDATE ha_text_log SET record=%s, ts=%s WHERE tenant=%s AND seq=%s", updates
                    )
                if deletes:
                    await cur.executemany("DELETE FROM ha_text_log WHERE tenant=%s AND seq=%s", deletes)
            cur = await conn.execute(
                "UPDATE ha_log_heads SET rewrites = rewrites + %s WHERE tenant=%s RETURNING seq, rewrites",
                (1 if changed else 0, self.tenant),
            )
            head = await cur.fetchone()
            assert head is not None
            if changed:
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self._changes.announcement))
            return changed, int(head[0]), int(head[1])

        changed, seq, rewrites = self.db.call(self.db.transact(run))
        if changed:
            with self._lock:
                self._seen, self._rewrites = seq, rewrites
                self._notify(None)
        return changed

    # -- listeners and following --------------------------------------------------------------

    def _follow_once(self) -> None:
        """Catch up with other daemons' messages (in the follower's thread)."""
        with self._lock:
            self._catch_up_locked()

    def _catch_up_locked(self) -> None:
        """Tell listeners about every record committed since the last one they saw (``_lock`` held)."""
        seq, rewrites = self.db.call(self._head())
        if rewrites != self._rewrites or seq - self._seen > _CATCH_UP_MAX:
            self._seen, self._rewrites = seq, rewrites
            self._notify(None)
            return
        while self._seen < seq:
            rows = self.db.call(self._rows_after(self._seen, _BATCH))
            if not rows:
                break
            for row_seq, text in rows:
                self._seen = row_seq
                self._notify(json.loads(text))
        self._seen = max(self._seen, seq)

    async def _rows_after(self, after: int, limit: int) -> list[tuple[int, str]]:
        return await self._select(
            "SELECT seq, record FROM ha_text_log WHERE tenant=%s AND seq > %s ORDER BY seq LIMIT %s",
            (self.tenant, after, limit),
        )

    async def _select(self, sql: str, params: tuple[Any, ...]) -> list[tuple[int, str]]:
        """``(seq, record)`` rows of a read (retried when the connection is lost)."""

        async def body(conn: AsyncConnection[Any]) -> list[tuple[int, str]]:
            cur = await conn.execute(sql, params)
            return [(int(r[0]), str(r[1])) for r in await cur.fetchall()]

        return await self.db.transact(body, write=False)

    # -- reads --------------------------------------------------------------------------------

    def iter_records(self, *, since: float | None = None, until: float | None = None) -> Iterator[dict[str, Any]]:
        """Records in write order, optionally time-bounded (read in batches)."""

        where = ""
        bounds: list[float] = []
        if since is not None:
            where, bounds = where + " AND ts >= %s", [*bounds, float(since)]
        if until is not None:
            where, bounds = where + " AND ts <= %s", [*bounds, float(until)]

        async def batch(after: int) -> list[tuple[int, str]]:
            return await self._select(
                "SELECT seq, record FROM ha_text_log WHERE tenant=%s AND seq > %s" + where + " ORDER BY seq LIMIT %s",
                (self.tenant, after, *bounds, _BATCH),
            )

        after = 0
        while True:
            rows = self.db.call(batch(after))
            if not rows:
                return
            after = rows[-1][0]
            for _, text in rows:
                yield json.loads(text)

    def _newest_first(self, limit: int) -> Iterator[str]:
        """Record texts newest first, read in batches of about twice what the caller wants."""

        async def batch(before: int | None, size: int) -> list[tuple[int, str]]:
            return await self._select(
                "SELECT seq, record FROM ha_text_log WHERE tenant=%s AND seq < %s ORDER BY seq DESC LIMIT %s",
                (self.tenant, before if before is not None else 2**62, size),
            )

        before: int | None = None
        while True:
            rows = self.db.call(batch(before, min(_BATCH, max(limit * 2, 16))))
            if not rows:
                return
            before = rows[-1][0]
            for _, text in rows:
                yield text

    def __len__(self) -> int:
        async def count(conn: AsyncConnection[Any]) -> int:
            cur = await conn.execute("SELECT count(*) FROM ha_text_log WHERE tenant=%s", (self.tenant,))
            row = await cur.fetchone()
            return int(row[0]) if row else 0

        return self.db.call(self.db.transact(count, write=False))

    # -- closing ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._changes.closed:
            raise UsageError(f"the conversation log {self} is closed")

    def close(self) -> None:
        """Stop following; close the pool when this log owns it."""
        if self._changes.closed:
            return
        self._changes.close()
        if self._owns_db:
            self.db.close()
