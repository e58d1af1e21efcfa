"""Append-only conversation log: the durable record of every input and reply.

One JSON object per line in ``<dir>/text-YYYYMMDD-NNN.jsonl``. :meth:`TextLog.append` writes
the line, flushes and ``fsync``\\ s before returning, so the kernel can acknowledge a message
only after it is on disk: a ``kill -9`` at any moment loses nothing that was acknowledged. A
file rotates when the day changes or it passes ``max_bytes``. A line cut short by a crash (never
acknowledged) is dropped when the log is reopened. ``edit`` and ``purge`` rewrite files
atomically (tmp + fsync + rename); they serve the memory-maintenance tools.

Readers that show the conversation (the web UI's chat history) read it from here, so there is
one durable source of truth: :meth:`TextLog.tail` reads the newest records backwards (bounded,
never the whole log), and a listener added with :meth:`TextLog.add_listener` receives each
record once it is on disk (``None`` after ``edit``/``purge`` rewrote the files).

:class:`ConversationLog` is the interface the rest of memory uses; :class:`TextLog` (files, the
default) and the PostgreSQL log shared by several daemons
(:class:`~homeagent_core.memory.stores.postgresql.textlog.PgTextLog`) implement it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from homeagent_core.workers import run_blocking
from homeagent_sdk._atomic import atomic_write
from homeagent_sdk._schema import open_folder_format
from homeagent_sdk.errors import MemoryStoreError, UsageError
from homeagent_sdk.threads import MAIN_THREAD
from homeagent_sdk.types import MediaAttachment, TextEvent
from homeagent_sdk.visibility import PRIVATE

__all__ = [
    "LOG_FORMAT",
    "MAIN_THREAD",
    "ConversationLog",
    "TextLog",
    "edit_change",
    "log_folder_shape",
    "new_record",
    "purge_change",
    "record_thread",
    "record_visibility",
]

log = logging.getLogger(__name__)

_NAME = re.compile(r"^text-(\d{8})-(\d{3})\.jsonl$")
_TAIL_BLOCK = 64 * 1024

#: Called with each record after it is durable, or with None after the files were rewritten.
Listener = Callable[[dict[str, Any] | None], None]


class ConversationLog(ABC):
    """The conversation log as memory, the web UI history and the tools use it.

    The SQLite-free file log (:class:`TextLog`) and the PostgreSQL log implement the storage
    (``append``, ``import_records``, ``iter_records``, ``close``, and the two hooks
    :meth:`_rewrite` and :meth:`_newest_first`); what both do alike lives here once: listeners,
    ``aappend`` off the event loop, ``edit``/``purge`` as record changes, the bounded ``tail``
    and the events view. A backend sets ``_lock`` (guards the listener list) and
    ``_listeners`` in its constructor.
    """

    _lock: threading.Lock | threading.RLock
    _listeners: list[Listener]

    @abstractmethod
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
        """Record one message durably (listeners are told once it is); returns its id."""

    @abstractmethod
    def import_records(self, records: list[dict[str, Any]]) -> None:
        """Write whole records (ids and times kept) in order, durably; for moving a log between backends."""

    @abstractmethod
    def iter_records(self, *, since: float | None = None, until: float | None = None) -> Iterator[dict[str, Any]]:
        """Records in write order, optionally time-bounded."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def _rewrite(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> int:
        """Apply ``change`` to every record (None = delete); tell listeners None; returns how many changed."""

    @abstractmethod
    def _newest_first(self, limit: int) -> Iterator[str | bytes]:
        """The stored records' JSON texts, newest first (``limit``: how many the caller wants at
        least, a batching hint); :meth:`tail` stops reading when it has enough."""

    async def aappend(self, role: str, content: str, **kwargs: Any) -> str:
        """:meth:`append` in a ``memory`` pool thread (the write must not block the event loop;
        listeners run in the writing thread, in write order)."""
        return await run_blocking("memory", lambda: self.append(role, content, **kwargs))

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with every record once it is durable (in write order) and with None
        after :meth:`edit`/:meth:`purge` rewrote the log; returns the remover."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return remove

    def _notify(self, record: dict[str, Any] | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(record)
            except Exception:  # a reader must never fail a write that is already durable
                log.exception("conversation log listener %r failed", listener)

    def edit(self, old: str, new: str) -> int:
        """Replace the text ``old`` by ``new`` in every record; returns records changed.

        Raises:
            UsageError: ``old`` is empty.
        """
        return self._rewrite(edit_change(old, new))

    def purge(self, *, contains: str | None = None, ids: list[str] | None = None) -> int:
        """Delete records whose texts contain ``contains`` or whose id is in ``ids``.

        Raises:
            UsageError: neither criterion was given.
        """
        return self._rewrite(purge_change(contains, ids))

    def tail(
        self,
        limit: int,
        *,
        accept: Callable[[dict[str, Any]], bool] | None = None,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> list[dict[str, Any]]:
        """The newest ``limit`` records ``accept`` takes, oldest first.

        Reads backwards from the newest record and stops after ``limit`` records or ``max_bytes``
        of record text, so its cost does not grow with the log. A record being written (not
        durable yet) or damaged is skipped.
        """
        out: list[dict[str, Any]] = []
        if limit <= 0:
            return out
        scanned = 0
        for raw in self._newest_first(limit):
            scanned += len(raw) + 1
            try:
                rec = json.loads(raw)
            except ValueError:
                rec = None
            if isinstance(rec, dict) and (accept is None or accept(rec)):
                out.append(rec)
                if len(out) >= limit:
                    break
            if scanned >= max_bytes:
                break
        out.reverse()
        return out

    def iter_events(self, *, since: float | None = None, until: float | None = None) -> Iterator[TextEvent]:
        """Records as :class:`~homeagent_sdk.types.TextEvent` in write order."""
        for rec in self.iter_records(since=since, until=until):
            yield TextEvent.from_dict(rec)


def new_record(
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
) -> dict[str, Any]:
    """A new log record with a fresh id (the same shape on every backend).

    ``person`` is who said it (the person of the turn, for a reply too), ``thread`` the
    conversation it belongs to and ``visibility`` who may see it (:mod:`homeagent_sdk.visibility`);
    a record without them (older logs) is the owner's, private, in the main thread
    (:func:`record_thread`, :func:`record_visibility`).

    Raises:
        UsageError: ``role`` is empty.
    """
    if not role:
        raise UsageError("a conversation log record needs a role (user, assistant, ...)")
    ts = time.time() if timestamp is None else float(timestamp)
    record: dict[str, Any] = {
        "id": uuid.uuid4().hex[:16],
        "role": role,
        "content": content,
        "timestamp": ts,
    }
    if channel:
        record["channel"] = channel
    if source:
        record["source"] = source
    if attachments:
        record["attachments"] = [a.to_dict() for a in attachments]
    if reasoning:
        record["reasoning"] = reasoning
    if tools:
        record["tools"] = tools
    if person:
        record["person"] = person
    if thread:
        record["thread"] = thread
    if visibility:
        record["visibility"] = visibility
    return record


def record_visibility(record: dict[str, Any]) -> str:
    """Who may see a log record; records written before there were people are private (the owner's)."""
    visibility = record.get("visibility")
    return visibility if isinstance(visibility, str) and visibility else PRIVATE


def record_thread(record: dict[str, Any]) -> str:
    """The thread of a log record; records written before there were threads are in the main one."""
    thread = record.get("thread")
    return thread if isinstance(thread, str) and thread else MAIN_THREAD


def edit_change(old: str, new: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The record rewrite of ``edit(old, new)``: ``old`` replaced in content, reasoning and tool results.

    Raises:
        UsageError: ``old`` is empty.
    """
    if not old:
        raise UsageError("edit needs the non-empty text to replace")

    def change(rec: dict[str, Any]) -> dict[str, Any]:
        for key in ("content", "reasoning"):
            text = rec.get(key)
            if isinstance(text, str) and old in text:
                rec[key] = text.replace(old, new)
        for tool in rec.get("tools") or ():
            if isinstance(tool, dict) and isinstance(tool.get("result"), str) and old in tool["result"]:
                tool["result"] = tool["result"].replace(old, new)
        return rec

    return change


def purge_change(contains: str | None, ids: list[str] | None) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """The record rewrite of ``purge``: ``None`` (delete) for a matching record.

    Raises:
        UsageError: neither criterion was given.
    """
    if not contains and not ids:
        raise UsageError("purge needs 'contains' text or a list of record ids")
    wanted = set(ids or ())

    def change(rec: dict[str, Any]) -> dict[str, Any] | None:
        if rec.get("id") in wanted or (contains and any(contains in text for text in _texts(rec))):
            return None
        return rec

    return change


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


LOG_FORMAT = 2
"""The conversation log's format: 1 the first release; 2 records carry ``person`` and ``thread``
(older records read as the household's main thread, without a person)."""


def log_folder_shape(directory: Path) -> int:
    """A log folder from before formats were recorded: 0 without log files, else 2 when the first
    record of its newest file carries a ``thread``, else 1."""
    files = sorted((p for p in directory.iterdir() if _NAME.match(p.name)), key=lambda p: p.name)
    if not files:
        return 0
    for path in reversed(files):
        try:
            with path.open("rb") as fh:
                first = fh.readline()
        except OSError:
            continue
        try:
            record = json.loads(first)
        except ValueError:
            continue
        if isinstance(record, dict):
            return 2 if "thread" in record else 1
    return 1


class TextLog(ConversationLog):
    """The conversation log in ``directory``.

    Args:
        directory: ``<data>/memory/text``; created if missing.
        max_bytes: rotate a file once it grows past this size.
        rotate_daily: start a new file when the (local) day changes.
    """

    def __init__(
        self, directory: str | Path, *, max_bytes: int = 16 * 1024 * 1024, rotate_daily: bool = True
    ) -> None:
        if max_bytes <= 0:
            raise UsageError(f"TextLog max_bytes must be > 0, got {max_bytes}")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.rotate_daily = rotate_daily
        self._lock = threading.Lock()
        self._fh: Any = None
        self._current: Path | None = None
        self._listeners: list[Listener] = []
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MemoryStoreError(f"cannot create the conversation log folder {self.directory}: {exc}") from exc
        open_folder_format(self.directory, "conversation log", LOG_FORMAT, log_folder_shape)
        for path in self.files():
            self._repair_tail(path)

    # -- files -----------------------------------------------------------------------------

    def files(self) -> list[Path]:
        """Log files, oldest first."""
        found = [p for p in self.directory.iterdir() if _NAME.match(p.name)]
        return sorted(found, key=lambda p: _NAME.match(p.name).groups())  # type: ignore[union-attr]

    @staticmethod
    def _repair_tail(path: Path) -> None:
        """Cut a trailing partial line (a write interrupted by a crash, never acknowledged)."""
        size = path.stat().st_size
        if size == 0:
            return
        with open(path, "rb+") as fh:
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return
            chunk = 4096
            pos = size
            while pos > 0:
                start = max(0, pos - chunk)
                fh.seek(start)
                data = fh.read(pos - start)
                idx = data.rfind(b"\n")
                if idx >= 0:
                    keep = start + idx + 1
                    break
                pos = start
            else:
                keep = 0
            log.warning("conversation log %s: dropping %d bytes of an unfinished line", path, size - keep)
            fh.truncate(keep)
            fh.flush()
            os.fsync(fh.fileno())

    def _target(self, now: float) -> Path:
        day = time.strftime("%Y%m%d", time.localtime(now))
        files = self.files()
        if files:
            last = files[-1]
            m = _NAME.match(last.name)
            assert m is not None
            same_day = m.group(1) == day or not self.rotate_daily
            if same_day and last.stat().st_size < self.max_bytes:
                return last
            seq = int(m.group(2)) + 1 if m.group(1) == day else 0
        else:
            seq = 0
        return self.directory / f"text-{day}-{seq:03d}.jsonl"

    # -- writes ----------------------------------------------------------------------------

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
        """Write one record durably (flush + fsync); returns its id.

        ``reasoning`` and ``tools`` (``{name, success, result?}`` summaries) are kept with a
        reply so that what shows the conversation later can show them too.

        Raises:
            UsageError: ``role`` is empty.
            MemoryStoreError: the disk write failed (the message was NOT recorded).
        """
        record = new_record(role, content, channel=channel, source=source, timestamp=timestamp,
                            attachments=attachments, reasoning=reasoning, tools=tools, person=person,
                            thread=thread, visibility=visibility)
        ts = float(record["timestamp"])
        line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            try:
                target = self._target(ts)
                if self._current != target:
                    if self._fh is not None:
                        self._fh.close()
                    new = not target.exists()
                    self._fh = open(target, "ab")  # noqa: SIM115 - kept open between appends
                    self._current = target
                    if new:
                        _fsync_dir(self.directory)
                self._fh.write(line)
                self._fh.flush()
                os.fsync(self._fh.fileno())
            except OSError as exc:
                raise MemoryStoreError(f"conversation log write to {self.directory} failed: {exc}") from exc
            self._notify(record)
        return str(record["id"])

    def _rewrite(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> int:
        """Apply ``change`` to every record (None = delete); returns how many changed."""
        changed = 0
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh, self._current = None, None
            for path in self.files():
                out: list[bytes] = []
                touched = 0
                with open(path, "rb") as fh:
                    for raw in fh:
                        try:
                            rec = json.loads(raw)
                        except ValueError:
                            out.append(raw)
                            continue
                        new = change(dict(rec))
                        if new is None:
                            touched += 1
                        elif new != rec:
                            touched += 1
                            out.append((json.dumps(new, ensure_ascii=False) + "\n").encode("utf-8"))
                        else:
                            out.append(raw)
                if not touched:
                    continue
                atomic_write(path, b"".join(out), tmp=path.with_name(path.name + ".tmp"))
                changed += touched
            if changed:
                self._notify(None)
        return changed

    def import_records(self, records: list[dict[str, Any]]) -> None:
        """Append whole records (their ids and times kept) in order, one fsync for the batch.

        Listeners are told with ``None`` (re-read), as after a rewrite.

        Raises:
            MemoryStoreError: the disk write failed (a line cut short is dropped at the next open).
        """
        if not records:
            return
        with self._lock:
            try:
                for record in records:
                    target = self._target(float(record["timestamp"]))
                    if self._current != target:
                        if self._fh is not None:
                            self._fh.flush()
                            os.fsync(self._fh.fileno())
                            self._fh.close()
                        self._fh = open(target, "ab")  # noqa: SIM115 - kept open between appends
                        self._current = target
                        _fsync_dir(self.directory)
                    self._fh.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
                    self._fh.flush()  # so that _target sees the size and rotates
                os.fsync(self._fh.fileno())
            except OSError as exc:
                raise MemoryStoreError(f"conversation log write to {self.directory} failed: {exc}") from exc
            self._notify(None)

    # -- reads -----------------------------------------------------------------------------

    def iter_records(self, *, since: float | None = None, until: float | None = None) -> Iterator[dict[str, Any]]:
        """Raw records (with ``id`` and ``source``) in write order, optionally time-bounded."""
        for path in self.files():
            with open(path, "rb") as fh:
                for number, raw in enumerate(fh, 1):
                    try:
                        rec = json.loads(raw)
                        ts = float(rec["timestamp"])
                    except (ValueError, KeyError, TypeError):
                        log.warning("conversation log %s:%d is not a valid record; skipped", path, number)
                        continue
                    if since is not None and ts < since:
                        continue
                    if until is not None and ts > until:
                        continue
                    yield rec

    def _newest_first(self, limit: int) -> Iterator[bytes]:
        for path in reversed(self.files()):
            yield from _lines_backwards(path)

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh, self._current = None, None


def _texts(rec: dict[str, Any]) -> Iterable[str]:
    """Every text a record holds: content, reasoning, tool results (what purge looks through)."""
    for key in ("content", "reasoning"):
        text = rec.get(key)
        if isinstance(text, str):
            yield text
    for tool in rec.get("tools") or ():
        if isinstance(tool, dict) and isinstance(tool.get("result"), str):
            yield tool["result"]


def _lines_backwards(path: Path, block: int = _TAIL_BLOCK) -> Iterator[bytes]:
    """The complete lines of ``path``, newest first (a trailing partial line is skipped)."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed in finally below
    except OSError:
        return
    try:
        pos = fh.seek(0, os.SEEK_END)
        buf = b""
        first = True
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            buf = fh.read(pos - start) + buf
            pos = start
            if first:  # drop what follows the last newline: nothing, or a line still being written
                cut = buf.rfind(b"\n")
                if cut < 0:
                    continue
                buf, first = buf[:cut], False
            lines = buf.split(b"\n")
            buf = lines.pop(0)  # may continue in the block before
            for line in reversed(lines):
                if line:
                    yield line
        if not first and buf:
            yield buf
    finally:
        fh.close()
