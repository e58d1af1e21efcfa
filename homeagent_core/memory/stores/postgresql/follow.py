"""Follow one kind of change another daemon of the same tenant announced, in one worker thread.

A writer announces ``<kind>:<writer>:<tenant>`` on the stores' ``NOTIFY`` channel in the
transaction of its change (:attr:`ChangeFollower.announcement`). A follower runs its
``catch_up()`` in a single worker thread after each announcement of its kind, for its tenant,
by another writer; announcements arriving while a catch-up is still pending fold into that one.
An empty payload (the listener reconnected, so changes may have been missed) also triggers one.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from homeagent_core.memory.stores.postgresql.database import PgDatabase

__all__ = ["ChangeFollower"]

log = logging.getLogger(__name__)


class ChangeFollower:
    """Announcements of one kind of change for one tenant: this daemon's, and catching up with the others'.

    :param db: the database whose listener delivers the notifications.
    :param kind: what changed (``log``, ``media``, ``settings``, ...): the payload's first field.
    :param tenant: whose changes.
    :param label: names the worker thread and the log lines (the store, with its redacted URL).
    """

    def __init__(self, db: PgDatabase, kind: str, tenant: str, label: str) -> None:
        self.db = db
        self.kind = kind
        self.tenant = tenant
        self.label = label
        self.writer = uuid.uuid4().hex[:12]
        self.closed = False
        self._pending = threading.Event()
        self._executor: ThreadPoolExecutor | None = None
        self._catch_up: Callable[[], None] | None = None

    @property
    def announcement(self) -> str:
        """The ``NOTIFY`` payload a write of this daemon sends."""
        return f"{self.kind}:{self.writer}:{self.tenant}"

    @property
    def following(self) -> bool:
        return self._executor is not None

    def follow(self, catch_up: Callable[[], None]) -> None:
        """Run ``catch_up()`` in the worker thread after each change another daemon announced."""
        self._catch_up = catch_up
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"pg-{self.kind}:{self.tenant}")
        self.db.listen(self._on_notify)

    def _on_notify(self, payload: str) -> None:
        """A notification arrived (on the pool's thread): queue one catch-up unless one is pending."""
        if payload:
            kind, _, rest = payload.partition(":")
            writer, _, tenant = rest.partition(":")
            if kind != self.kind or tenant != self.tenant or writer == self.writer:
                return
        if self.closed or self._executor is None or self._pending.is_set():
            return
        self._pending.set()
        try:
            self._executor.submit(self._run)
        except RuntimeError:  # shutting down
            self._pending.clear()

    def _run(self) -> None:
        self._pending.clear()
        if self.closed or self._catch_up is None:
            return
        try:
            self._catch_up()
        except Exception:
            if not self.closed:
                log.warning("%s: cannot follow another daemon's %s change yet", self.label, self.kind, exc_info=True)

    def close(self) -> None:
        """Stop following and wait for a catch-up that is running."""
        if self.closed:
            return
        self.closed = True
        if self._executor is not None:
            self.db.unlisten(self._on_notify)
            self._executor.shutdown(wait=True)
