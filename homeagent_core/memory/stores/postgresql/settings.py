"""The settings a tenant's daemons share, on PostgreSQL (``ha_settings``).

Implements :class:`~homeagent_core.config.SharedSettings`: the values are the text forms
``config.db`` stores, one row per key and tenant. A change sends ``NOTIFY``; the other daemons
then re-read the tenant's rows and report each key whose value differs from what they saw.
Which keys are shared is decided by :func:`homeagent_core.config.is_shared_key`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.stores.postgresql.database import CHANNEL, PgDatabase
from homeagent_core.memory.stores.postgresql.follow import ChangeFollower
from homeagent_core.memory.stores.settings import SharedSettings
from homeagent_sdk.errors import UsageError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgSharedSettings"]

log = logging.getLogger(__name__)


class PgSharedSettings(SharedSettings):
    """One tenant's shared settings in a PostgreSQL database.

    Args:
        db: an open :class:`PgDatabase`, or a ``postgresql://`` URL (then this object owns and
            closes the connection pool).
        tenant: whose settings these are.

    Raises:
        MemoryStoreError: the database cannot be reached or its schema is newer.
        UsageError: the tenant id is empty.
    """

    def __init__(self, db: PgDatabase | str, *, tenant: str = "default") -> None:
        if not tenant.strip():
            raise UsageError("the PostgreSQL settings need a non-empty tenant id")
        self._owns_db = isinstance(db, str)
        self.db = PgDatabase(db) if isinstance(db, str) else db
        self.tenant = tenant
        self._seen: dict[str, str] = {}
        self._callback: Callable[[str, str | None], None] | None = None
        self._lock = threading.Lock()
        self._changes = ChangeFollower(self.db, "settings", tenant, f"settings {self!r}")

    def __repr__(self) -> str:
        return f"PgSharedSettings({self.db.safe_url}, tenant={self.tenant!r})"

    def load(self) -> dict[str, str]:
        """Every stored shared setting of the tenant."""

        async def body(conn: AsyncConnection[Any]) -> dict[str, str]:
            cur = await conn.execute("SELECT key, value FROM ha_settings WHERE tenant=%s", (self.tenant,))
            return {str(k): str(v) for k, v in await cur.fetchall()}

        values: dict[str, str] = self.db.call(self.db.transact(body, write=False))
        with self._lock:
            self._seen = dict(values)
        return values

    def put(self, key: str, value: str | None) -> None:
        """Store (or with ``None`` forget) one setting and tell the other daemons, in one transaction
        (retried when the connection is lost)."""

        async def body(conn: AsyncConnection[Any]) -> None:
            if value is None:
                await conn.execute("DELETE FROM ha_settings WHERE tenant=%s AND key=%s", (self.tenant, key))
            else:
                await conn.execute(
                    "INSERT INTO ha_settings (tenant, key, value) VALUES (%s, %s, %s) ON CONFLICT (tenant, key)"
                    " DO UPDATE SET value = EXCLUDED.value, updated_at = now()",
                    (self.tenant, key, value),
                )
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self._changes.announcement))

        self.db.call(self.db.transact(body))
        with self._lock:
            if value is None:
                self._seen.pop(key, None)
            else:
                self._seen[key] = value

    def follow(self, callback: Callable[[str, str | None], None]) -> None:
        """Call ``callback(key, value)`` (in a worker thread) for each setting another daemon changed."""
        self._callback = callback
        self._changes.follow(self._catch_up)

    def _catch_up(self) -> None:
        if self._callback is None:
            return
        with self._lock:
            before = dict(self._seen)
        try:
            now = self.load()
        except Exception:
            if not self._changes.closed:
                log.warning("settings %s: cannot read another daemon's change yet", self, exc_info=True)
            return
        for key in sorted(set(before) | set(now)):
            if before.get(key) != now.get(key):
                try:
                    self._callback(key, now.get(key))
                except Exception:
                    log.exception("settings %s: applying %s failed", self, key)

    def close(self) -> None:
        """Stop following; close the pool when this object owns it."""
        if self._changes.closed:
            return
        self._changes.close()
        if self._owns_db:
            self.db.close()
