"""Writes that outlive a lost connection: bounded retries, and the fate of a commit whose answer was lost.

A PostgreSQL server restart, a failover or an administrator ending a backend drops the
connection a write runs on. What to do then depends on where the write was:

* before ``COMMIT`` was sent, the transaction is rolled back for sure: it runs again, from the
  start, on a new connection;
* during ``COMMIT`` the outcome is unknown: the transaction may have committed just before the
  connection went. Every write reads its transaction id first (``txid_current()``), and after
  reconnecting, ``txid_status()`` says whether that transaction committed (the write is done,
  and is not run a second time) or not (it runs again). A server stopped before it logged the
  id answers that the id "is in the future" once restarted: it never saw a commit of it, so
  the write runs again too.

Retries back off from 50 ms to 1 s and stop after :data:`RETRY_FOR_S` seconds; the write then
fails with a :class:`~homeagent_sdk.errors.MemoryStoreError` saying the change was not stored
(or that whether it was is unknown, when the server never came back to say). A write is only
reported done after its commit was confirmed. A read is simply run again; when the server stays
away, it fails with an error saying the memory could not be read.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["RETRY_FOR_S", "TXID_STATUS", "Backoff", "is_lost"]

RETRY_FOR_S = 15.0
"""How long a write keeps retrying after its connection was lost (a server restart takes seconds)."""

TXID_STATUS = "SELECT txid_status(%s)"
"""``'committed'``, ``'aborted'``, ``'in progress'`` (or NULL when unknown) for a transaction id."""


def is_lost(exc: BaseException, broken: bool) -> bool:
    """True when ``exc`` means the connection or server went away (worth a retry), not a bad statement.

    ``broken``: the connection the error came from is broken or closed (or none could be opened).
    """
    import psycopg

    if not isinstance(exc, psycopg.Error):
        return False
    if broken:
        return True
    state = exc.sqlstate or ""
    # 08: connection exceptions; 57P01-57P03: the server is shutting down, crashed or starting up
    return isinstance(exc, psycopg.OperationalError) and (not state or state.startswith(("08", "57P")))


class Backoff:
    """Waits between retries (50 ms doubling to 1 s) until ``within`` seconds have passed."""

    def __init__(self, within: float = RETRY_FOR_S) -> None:
        self.deadline = time.monotonic() + within
        self.delay = 0.05
        self.tries = 0

    def _next(self) -> float | None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        pause = min(self.delay, left)
        self.delay = min(self.delay * 2, 1.0)
        self.tries += 1
        return pause

    def wait(self) -> bool:
        """Sleep before the next try; False when the time is up (give up)."""
        pause = self._next()
        if pause is None:
            return False
        time.sleep(pause)
        return True

    async def await_next(self) -> bool:
        """:meth:`wait` on an event loop."""
        pause = self._next()
        if pause is None:
            return False
        await asyncio.sleep(pause)
        return True
