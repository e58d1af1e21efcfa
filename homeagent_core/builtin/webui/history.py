"""Chat history for the web UI, read from the durable conversation log.

The conversation log (``<data>/memory/text``, or the tenant's log on a shared PostgreSQL store,
where the messages of the household's other daemons arrive too) is the one source of truth: a
message is in the history exactly when its record is durable, which happens before the agent
acknowledges it, so a ``kill -9`` cannot lose an acknowledged message from the history or show
one twice. At start
the newest ``limit`` (200) visible records are read backwards from the end of the log (bounded,
never the whole log); after that each record is added when the log reports it durable, so a
request costs no disk access. ``edit``/``purge`` of the log make the next request re-read the
tail. Visible: user inputs and replies on every channel except the consolidation pseudo channel
and the OpenAI-compatible ``http`` channel (which is not remembered anyway). Inputs sent
without memory are not in the log and so not in the history. Without memory (no log) the
history is empty.

Each conversation thread has its own history (:meth:`ChatHistory.page` with ``thread``); a
record names its ``thread`` and ``person`` (records written before there were threads are the
owner's, in the ``main`` thread). Every message names its speaker's ``person``.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from homeagent_sdk.threads import MAIN_THREAD

__all__ = ["HIDDEN_CHANNELS", "ChatHistory"]

HIDDEN_CHANNELS = frozenset({"_consolidation_", "http"})
ROLES = frozenset({"user", "assistant"})


def visible(record: dict[str, Any]) -> bool:
    """Whether a conversation-log record belongs in the chat history."""
    return record.get("role") in ROLES and record.get("channel", "") not in HIDDEN_CHANNELS


def thread_of_record(record: dict[str, Any]) -> str:
    """The thread of a log record (``main`` for records written before there were threads)."""
    thread = record.get("thread")
    return thread if isinstance(thread, str) and thread else MAIN_THREAD


def to_message(record: dict[str, Any]) -> dict[str, Any]:
    """The history message of one log record (the shape the web UI renders)."""
    message: dict[str, Any] = {
        "id": record.get("id", ""),
        "role": record["role"],
        "content": record.get("content", ""),
        "channel": record.get("channel", ""),
        "time": record.get("timestamp"),
        "thread": thread_of_record(record),
        "person": record.get("person", ""),
    }
    if record["role"] == "assistant":
        message["tools"] = list(record.get("tools") or [])
        message["reasoning"] = record.get("reasoning", "")
    if record.get("attachments"):
        message["attachments"] = record["attachments"]
    return message


class ChatHistory:
    """The last ``limit`` chat messages of the conversation log ``log`` (a ``TextLog`` or None)."""

    def __init__(self, log: Any, *, limit: int = 200) -> None:
        self.log = log
        self.limit = limit
        self._lock = threading.Lock()
        self._messages: deque[dict[str, Any]] = deque(maxlen=limit)
        self._threads: dict[str, deque[dict[str, Any]]] = {}  # per thread, read on first request
        self._stale = True
        self._remove = log.add_listener(self._on_record) if log is not None else None
        self._refresh()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The history, oldest first (a copy)."""
        self._refresh()
        with self._lock:
            return list(self._messages)

    def _refresh(self) -> None:
        """Re-read the log's tail if the log was rewritten (or never read)."""
        if self.log is None:
            return
        with self._lock:
            if not self._stale:
                return
            self._stale = False
            self._threads.clear()
            self._messages.clear()
            self._messages.extend(to_message(r) for r in self.log.tail(self.limit, accept=visible))

    def _on_record(self, record: dict[str, Any] | None) -> None:
        """Log listener (runs in the writing thread, after the record is durable)."""
        with self._lock:
            if record is None:
                self._stale = True
            elif not self._stale and visible(record):
                rid = record.get("id")
                for messages in (self._messages, self._threads.get(thread_of_record(record))):
                    # a tail read may have seen it
                    if messages is not None and not any(m["id"] == rid for m in list(messages)[-8:]):
                        messages.append(to_message(record))

    def thread_messages(self, thread: str) -> list[dict[str, Any]]:
        """The newest ``limit`` messages of one thread, oldest first (read from the log once)."""
        self._refresh()
        if self.log is None:
            return []
        with self._lock:
            cached = self._threads.get(thread)
            if cached is not None:
                return list(cached)
            # Follow the thread from now on, so a record made durable during the read is not lost.
            arrived = self._threads[thread] = deque(maxlen=self.limit)
            while len(self._threads) > 64:
                self._threads.pop(next(iter(self._threads)))
        records = self.log.tail(self.limit, accept=lambda r: visible(r) and thread_of_record(r) == thread)
        with self._lock:
            seen = {r.get("id") for r in records}
            merged = deque((to_message(r) for r in records), maxlen=self.limit)
            merged.extend(m for m in arrived if m["id"] not in seen)
            if self._threads.get(thread) is arrived:
                self._threads[thread] = merged
            return list(merged)

    def page(self, limit: int | None = None, before: int | None = None, *, thread: str | None = None) -> dict[str, Any]:
        """``{messages, total, offset, has_more}`` of ``thread`` (None: every thread); ``before`` is
        an index into the history."""
        messages = self.messages if thread is None else self.thread_messages(thread)
        end = len(messages) if before is None else max(0, min(before, len(messages)))
        start = 0 if limit is None else max(0, end - limit)
        return {"messages": messages[start:end], "total": len(messages), "offset": start, "has_more": start > 0}

    async def aclose(self) -> None:
        """Stop following the log."""
        if self._remove is not None:
            self._remove()
            self._remove = None
