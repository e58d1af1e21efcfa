"""The threads a document query hands parts of its work to, beside its own thread.

A fused query's dense leg runs on one while the query's thread scores the lexical head, and the
candidates' rescoring sums are split between the two. Both are mostly compiled loops and SQLite
reads that release the GIL, so on two cores they run at once. Made on first use; shared by every
store in the process (a task waits for a free thread, it never waits on another task).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["WORKERS", "query_pool"]

WORKERS = 4
"""Threads in the pool: two stores' queries at once each find one free."""

_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def query_pool() -> ThreadPoolExecutor:
    """The shared pool (made on first use)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="homeagent-query")
        return _pool
