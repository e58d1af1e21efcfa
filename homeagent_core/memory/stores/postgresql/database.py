"""One PostgreSQL database shared by the stores of a daemon: pool, schema, change notifications.

:class:`PgDatabase` owns a psycopg 3 :class:`~psycopg_pool.AsyncConnectionPool` on a private
event loop in a background thread. The stores' public methods keep the shape of the SQLite
stores (some plain, some ``async``): plain ones wait for :meth:`PgDatabase.call`, async ones
await :meth:`PgDatabase.acall`; both run the coroutine on that loop, so the caller's loop and
the pool never share state.

Each lent connection is checked first (one empty round trip), so connections the server
dropped (a restart, a failover, an idle timeout) are replaced instead of failing a write.
Opening checks the server right away: an unreachable database raises
:class:`~homeagent_sdk.errors.MemoryStoreError` naming the URL without its password (there is
no fallback to an empty SQLite store). The schema is versioned in ``homeagent_schema``; a
database written by a newer HomeAgent is refused. Writers send ``NOTIFY homeagent_changes``
with the tenant in the same transaction as their change rows, so another daemon on the same
database hears of a commit exactly when it becomes visible (:meth:`PgDatabase.listen`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from homeagent_core.memory.stores.postgresql.retry import RETRY_FOR_S, TXID_STATUS, Backoff, is_lost
from homeagent_sdk.errors import MemoryStoreError, UsageError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["CHANNEL", "SCHEMA_VERSION", "PgDatabase", "redact_url"]

log = logging.getLogger(__name__)
T = TypeVar("T")

CHANNEL = "homeagent_changes"
"""The NOTIFY channel; the payload is the tenant whose rows changed."""

_MIGRATIONS: list[str] = [
    # 1: documents, per-tenant counters and the change log followed by other daemons
    """
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE ha_tenants (
        tenant TEXT PRIMARY KEY,
        next_slot BIGINT NOT NULL DEFAULT 0,
        change_seq BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE ha_documents (
        tenant TEXT NOT NULL,
        slot BIGINT NOT NULL,
        id TEXT NOT NULL,
        title TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT '',
        created_at DOUBLE PRECISION NOT NULL,
        last_access DOUBLE PRECISION NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        media_digests TEXT NOT NULL DEFAULT '[]',
        meta JSONB NOT NULL DEFAULT '{}',
        vector vector,
        vec_model TEXT NOT NULL DEFAULT '',
        lex BYTEA NOT NULL,
        lex_len INTEGER NOT NULL,
        PRIMARY KEY (tenant, slot),
        UNIQUE (tenant, id)
    );
    CREATE INDEX ha_documents_cold ON ha_documents (tenant, last_access, access_count);
    CREATE TABLE ha_changes (
        tenant TEXT NOT NULL,
        seq BIGINT NOT NULL,
        kind TEXT NOT NULL,
        slot BIGINT NOT NULL,
        lex BYTEA,
        PRIMARY KEY (tenant, seq, slot)
    );
    """,
    # 2: the conversation log; ha_log_heads serialises a tenant's appends (seq = write order)
    """
    CREATE TABLE ha_log_heads (
        tenant TEXT PRIMARY KEY,
        seq BIGINT NOT NULL DEFAULT 0,
        rewrites BIGINT NOT NULL DEFAULT 0
    );
    CREATE TABLE ha_text_log (
        tenant TEXT NOT NULL,
        seq BIGINT NOT NULL,
        id TEXT NOT NULL,
        ts DOUBLE PRECISION NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (tenant, seq),
        UNIQUE (tenant, id)
    );
    CREATE INDEX ha_text_log_ts ON ha_text_log (tenant, ts);
    """,
    # 3: media blocks: metadata, the vector of one embedding space, and the bytes every daemon serves
    """
    CREATE TABLE ha_media (
        tenant TEXT NOT NULL,
        digest TEXT NOT NULL,
        mime TEXT NOT NULL,
        size BIGINT NOT NULL,
        name TEXT NOT NULL DEFAULT '',
        created_at DOUBLE PRECISION NOT NULL,
        vec BYTEA,
        dim INTEGER NOT NULL DEFAULT 0,
        vec_model TEXT NOT NULL DEFAULT '',
        data BYTEA NOT NULL,
        PRIMARY KEY (tenant, digest)
    );
    CREATE INDEX ha_media_created ON ha_media (tenant, created_at, digest);
    """,
    # 4: the settings every daemon of a tenant shares (memory and embedding settings)
    """
    CREATE TABLE ha_settings (
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant, key)
    );
    """,
    # 5: the knowledge base: entries, and each entry's cached vector (a cache, rebuilt when missing)
    """
    CREATE TABLE ha_knowledge (
        tenant TEXT NOT NULL,
        name TEXT NOT NULL,
        content TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        fingerprint TEXT NOT NULL DEFAULT '',
        vector TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (tenant, name)
    );
    """,
    # 6: documents record their person and visibility (earlier rows: the owner's, private;
    # PgDocumentStore gives rows with person '' to its owner when it opens)
    """
    ALTER TABLE ha_documents ADD COLUMN person TEXT NOT NULL DEFAULT '';
    ALTER TABLE ha_documents ADD COLUMN visibility TEXT NOT NULL DEFAULT 'private';
    """,
    # 7: knowledge entries record their person and visibility (earlier entries: the owner's, private)
    """
    ALTER TABLE ha_knowledge ADD COLUMN person TEXT NOT NULL DEFAULT '';
    ALTER TABLE ha_knowledge ADD COLUMN visibility TEXT NOT NULL DEFAULT 'private';
    """,
]
SCHEMA_VERSION = len(_MIGRATIONS)
"""The schema version this code writes; a database at a higher version is refused."""


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (safe to log or show)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable database URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


def _scrub(text: str, url: str) -> str:
    """Remove the URL's password from ``text`` (a driver message may quote the conninfo)."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    text = text.replace(url, redact_url(url))
    return text.replace(password, "***") if password else text


class PgDatabase:
    """A pooled connection to one PostgreSQL database, schema checked and migrated.

    Args:
        url: a ``postgresql://`` URL (libpq syntax; ``?host=/path`` for a Unix socket).
        max_size: connections in the pool.
        timeout: seconds to wait for the server at open and for a pooled connection.
        retry_for: seconds a write (:meth:`transact`) keeps retrying after the server dropped
            its connection.

    Raises:
        UsageError: ``url`` is not a PostgreSQL URL.
        MemoryStoreError: the server cannot be reached, or its schema is newer than this code.
    """

    def __init__(self, url: str, *, max_size: int = 4, timeout: float = 5.0, retry_for: float = RETRY_FOR_S) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            raise UsageError(
                f"not a PostgreSQL URL: {redact_url(url)!r}; use postgresql://user:password@host/dbname"
            )
        self.url = url
        self.safe_url = redact_url(url)
        self.timeout = timeout
        self.retry_for = retry_for
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="postgres-pool", daemon=True)
        self._thread.start()
        self._listeners: list[Callable[[str], None]] = []
        self._listen_task: asyncio.Task[None] | None = None
        self._closed = False
        try:
            self._pool: AsyncConnectionPool = self.call(self._open(max_size))
        except BaseException:
            self._stop_loop()
            raise

    # -- running on the pool's loop ---------------------------------------------------------

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the pool's loop and wait for its result (from any thread).

        Raises:
            MemoryStoreError: a database error (the message names the URL without its password).
        """
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except Exception as exc:
            raise self._translate(exc) from exc

    async def acall(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` run on the pool's loop (from another event loop); errors as :meth:`call`."""
        future: concurrent.futures.Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return await asyncio.wrap_future(future)
        except Exception as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: Exception) -> Exception:
        """A driver or pool error as a :class:`MemoryStoreError`; anything else unchanged."""
        module = type(exc).__module__
        if not (module.startswith("psycopg") or module.startswith("psycopg_pool")):
            return exc
        return MemoryStoreError(
            f"the PostgreSQL database {self.safe_url} failed: {_scrub(str(exc).strip(), self.url)}; "
            "the change was not stored (retry when the server is back)"
        )

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """Lend a pooled connection (use on the pool's loop).

        When the pool has none within ``timeout`` (the server was down and the pool is still
        backing off before reconnecting, or every connection is busy), one direct connection is
        tried, so a server that is back serves the next write at once.
        """
        import psycopg
        from psycopg_pool import PoolTimeout

        from homeagent_core.memory.stores.postgresql.vector import register_vector

        if self._closed:
            raise UsageError(f"the database {self.safe_url} is closed")
        try:
            conn = await self._pool.getconn(timeout=self.timeout)
        except PoolTimeout:
            direct = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=max(1, int(self.timeout))
            )
            register_vector(direct, self.vector_oid)
            try:
                yield direct
            finally:
                await direct.close()
            return
        try:
            yield conn
        finally:
            await self._pool.putconn(conn)

    async def transact(
        self, body: Callable[[AsyncConnection[Any]], Awaitable[T]], *, write: bool = True, outcome: str = ""
    ) -> T:
        """Run ``body(conn)`` in one transaction (use on the pool's loop), retried when the connection is lost.

        A write whose ``COMMIT`` lost its answer is looked up by its transaction id and not run
        twice (:mod:`~homeagent_core.memory.stores.postgresql.retry`); ``body`` may run more than once, only
        one run commits. ``write=False``: a read, run outside a transaction and simply retried.
        ``outcome``: what the error says when the server stays away (default: "the change was not
        stored" for a write, "the memory could not be read" for a read; a read checking a write
        says the former).

        Raises:
            MemoryStoreError: the server stayed away for ``retry_for`` seconds (the change was not
                stored, or it is unknown whether it was; for a read: nothing could be read).
        """
        import psycopg

        backoff = Backoff(self.retry_for)
        while True:
            lent: AsyncConnection[Any] | None = None
            xid: int | None = None
            committing = False
            try:
                async with self.connection() as conn:
                    lent = conn
                    if not write:
                        return await body(conn)
                    async with conn.transaction():
                        row = await (await conn.execute("SELECT txid_current()")).fetchone()
                        xid = int(row[0]) if row else None
                        result = await body(conn)
                        committing = True
                    return result
            except psycopg.Error as exc:
                if not is_lost(exc, lent is None or lent.broken or lent.closed):
                    raise
                if committing and xid is not None:
                    done = await self._committed(xid, backoff)
                    if done:
                        log.warning("PostgreSQL store %s: connection lost while committing; the commit went through",
                                    self.safe_url)
                        return result
                    if done is None:
                        raise MemoryStoreError(
                            f"the PostgreSQL server {self.safe_url} went away while committing and did not come"
                            f" back within {self.retry_for:g} s, so whether the change was stored is unknown; it"
                            " was not acknowledged (retry when the server is back)"
                        ) from exc
                failure = exc
                log.warning("PostgreSQL store %s: connection lost (%s); retrying", self.safe_url,
                            _scrub(str(exc).strip(), self.url).split("\n")[0] or type(exc).__name__)
            if not await backoff.await_next():
                detail = _scrub(str(failure).strip(), self.url).splitlines()[0] if str(failure).strip() else ""
                said = outcome or ("the change was not stored" if write else "the memory could not be read")
                raise MemoryStoreError(
                    f"the PostgreSQL database {self.safe_url} did not answer for {self.retry_for:g} s ({detail});"
                    f" {said} (retry when the server is back)"
                ) from failure

    async def _committed(self, xid: int, backoff: Backoff) -> bool | None:
        """Whether transaction ``xid`` committed, asked on another connection; None when the server stays away."""
        import psycopg

        while True:
            try:
                async with self.connection() as conn:
                    row = await (await conn.execute(TXID_STATUS, (xid,))).fetchone()
                status = row[0] if row else None
                if status != "in progress":
                    return status == "committed"
            except psycopg.errors.InvalidParameterValue:
                # "transaction ID ... is in the future": a server restarted since never recorded
                # that id (a commit record would have), so the transaction did not commit
                return False
            except psycopg.Error as exc:
                if not is_lost(exc, True):
                    raise
            if not await backoff.await_next():
                return None

    # -- opening ------------------------------------------------------------------------------

    async def _open(self, max_size: int) -> AsyncConnectionPool:
        try:
            import psycopg
            from psycopg.types import TypeInfo
            from psycopg_pool import AsyncConnectionPool, PoolTimeout

            from homeagent_core.memory.stores.postgresql.vector import register_vector
        except ImportError as exc:
            raise UsageError(
                'the PostgreSQL store needs psycopg 3: pip install "homeagent[postgres]"'
            ) from exc
        try:
            first = await psycopg.AsyncConnection.connect(self.url, connect_timeout=max(1, int(self.timeout)))
        except psycopg.Error as exc:
            raise MemoryStoreError(
                f"cannot reach the PostgreSQL database {self.safe_url}: {_scrub(str(exc).strip(), self.url)}; "
                "check that the server runs and the URL, user and password are right "
                "(the memory store does not fall back to SQLite)"
            ) from None
        try:
            await self._migrate(first)
            info = await TypeInfo.fetch(first, "vector")
        finally:
            await first.close()
        if info is None:
            raise MemoryStoreError(f"the PostgreSQL database {self.safe_url} lacks the pgvector extension")
        self.vector_oid = info.oid

        async def configure(conn: AsyncConnection[Any]) -> None:
            register_vector(conn, info.oid)

        pool = AsyncConnectionPool(
            self.url, min_size=1, max_size=max_size, open=False, timeout=self.timeout,
            kwargs={"autocommit": True}, name="homeagent", configure=configure,
            check=AsyncConnectionPool.check_connection,
        )
        try:
            await pool.open(wait=True, timeout=self.timeout)
        except PoolTimeout:
            await pool.close()
            raise MemoryStoreError(f"the PostgreSQL database {self.safe_url} stopped answering while opening") from None
        return pool

    async def _migrate(self, conn: AsyncConnection[Any]) -> None:
        """Bring the schema to :data:`SCHEMA_VERSION` (one transaction per step), refusing a newer one."""
        await conn.set_autocommit(True)
        await conn.execute("SELECT pg_advisory_lock(hashtext('homeagent_schema'))")
        try:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS homeagent_schema (version INTEGER NOT NULL, applied_at TIMESTAMPTZ"
                " NOT NULL DEFAULT now())"
            )
            row = await (await conn.execute("SELECT max(version) FROM homeagent_schema")).fetchone()
            current = int(row[0]) if row and row[0] is not None else 0
            if current > SCHEMA_VERSION:
                raise MemoryStoreError(
                    f"the PostgreSQL database {self.safe_url} has schema version {current}, newer than this "
                    f"HomeAgent's {SCHEMA_VERSION}; upgrade HomeAgent (a downgrade would lose data)"
                )
            for version in range(current + 1, SCHEMA_VERSION + 1):
                async with conn.transaction():
                    await conn.execute(_MIGRATIONS[version - 1])
                    await conn.execute("INSERT INTO homeagent_schema (version) VALUES (%s)", (version,))
                log.info("PostgreSQL store %s: schema at version %d", self.safe_url, version)
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtext('homeagent_schema'))")

    # -- change notifications -----------------------------------------------------------------

    def listen(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(tenant)`` (on the pool's thread) after another writer commits changes.

        One ``LISTEN`` connection serves every callback; it reconnects after a lost connection
        and then calls each callback with ``""`` (catch up on everything).
        """
        self._listeners.append(callback)
        if self._listen_task is None:
            ready: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._loop.call_soon_threadsafe(self._start_listening, ready)
            ready.result(timeout=self.timeout + 5)

    def unlisten(self, callback: Callable[[str], None]) -> None:
        """Stop calling ``callback`` (the listening connection stays for the others)."""
        if callback in self._listeners:
            self._listeners.remove(callback)

    def _start_listening(self, ready: concurrent.futures.Future[None]) -> None:
        self._listen_task = self._loop.create_task(self._follow(ready))

    async def _follow(self, ready: concurrent.futures.Future[None]) -> None:
        import psycopg

        outage = False  # warn once per outage, not on every retry
        while not self._closed:
            try:
                conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
            except psycopg.Error as exc:
                (log.debug if outage else log.warning)(
                    "PostgreSQL store %s: change listener cannot connect (retrying every second): %s",
                    self.safe_url, _scrub(str(exc).strip(), self.url),
                )
                outage = True
                await asyncio.sleep(1.0)
                continue
            try:
                await conn.execute(f"LISTEN {CHANNEL}")
                if outage:
                    log.warning("PostgreSQL store %s: change listener connected again", self.safe_url)
                outage = False
                if not ready.done():
                    ready.set_result(None)
                else:
                    self._notify("")  # reconnected: notifications may have been missed
                async for note in conn.notifies():
                    self._notify(note.payload)
            except psycopg.Error as exc:
                if not self._closed:
                    outage = True
                    log.warning("PostgreSQL store %s: change listener lost its connection: %s", self.safe_url,
                                _scrub(str(exc).strip(), self.url))
            finally:
                await conn.close()

    def _notify(self, tenant: str) -> None:
        for callback in list(self._listeners):
            try:
                callback(tenant)
            except Exception:  # a follower's failure must not end the listener for the others
                log.exception("PostgreSQL store %s: change follower failed", self.safe_url)

    # -- closing ------------------------------------------------------------------------------

    async def _close(self) -> None:
        if self._listen_task is not None:
            self._listen_task.cancel()
            await asyncio.gather(self._listen_task, return_exceptions=True)
        await self._pool.close()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def close(self) -> None:
        """Close the listener and the pool; further use raises :class:`UsageError`."""
        if self._closed:
            return
        self._closed = True
        try:
            self.call(self._close())
        finally:
            self._stop_loop()

