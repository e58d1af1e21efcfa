"""RelevanceContext: the L0 working window of the conversation.

A chronological list of :class:`ContextEvent` (user inputs, agent replies, documents brought
back from cold storage). Each event carries the text it is compared by ("vector text"), chosen
by the three-branch rule — an agent event by its response, a ``cold_storage`` event by input +
response, anything else by its input — after the channel's ``no_memory``/cleaner and the tool
outputs (each unless its tool is ``no_memory``, through the tool's cleaner) are applied and
whitespace is normalised. ``no_memory`` only affects this computation layer: the raw text
stays in the event. A cleaner may be sync or async; one with an ``aclean`` coroutine method
(the cleaners of out-of-process plugins, which need a round trip) is awaited through it.

:meth:`RelevanceContext.prune` runs when there are more than ``max_context_size`` events: the
newest ``protected`` (10) always stay, the rest are scored against the current input (cosine of
the embedding space, or character n-gram BM25 when there is no embedder), the best
``max_context_size - protected`` are kept, and the others are archived to the document store
with their original timestamps (except events from ``agentcli`` and ``terminal``).

The window is saved to ``context.json`` at most every ``debounce`` seconds (atomic write) and
on :meth:`flush` / :meth:`aclose`; :meth:`save_now` writes it at once (fsync'd) for callers that
must not lose an event, such as a document moved back from the document store. Writes are
serialised and an older snapshot never replaces a newer one. A damaged file loads every event
that is still valid.

:class:`ThreadContexts` keeps one such window per conversation thread (``homeagent_sdk.threads``):
``main`` is ``context.json``, every other thread ``threads/<thread>.json``, opened on first use.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import inspect
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.lexical.bm25 import score_terms
from homeagent_core.lexical.buckets import term_counts
from homeagent_core.memory.documents.store import Document
from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.embeddings import text_language
from homeagent_sdk.errors import UsageError
from homeagent_sdk.threads import MAIN_THREAD
from homeagent_sdk.visibility import PRIVATE

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_core.memory.stores.documents import BaseDocumentStore
    from homeagent_sdk.embeddings import EmbeddingProvider

    TermCounts = tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16], int]
    """What :func:`~homeagent_core.lexical.buckets.term_counts` returns for one text."""

__all__ = [
    "ARCHIVE_EXCLUDED_SOURCES",
    "MAIN_THREAD",
    "ContextEvent",
    "RelevanceContext",
    "ThreadContexts",
    "ToolOutput",
    "apply_cleaner",
    "atext_for_vector",
    "clean_text",
    "text_for_vector",
]

log = logging.getLogger(__name__)

Cleaner = Callable[[str], str]
KINDS = ("user", "agent", "cold_storage", "system")
ARCHIVE_EXCLUDED_SOURCES = frozenset({"agentcli", "terminal"})
ARCHIVE_SOURCE = "context_archived"
_SPACE = re.compile(r"\s+")


def clean_text(text: str) -> str:
    """Collapse runs of whitespace to one space and strip the ends."""
    return _SPACE.sub(" ", text).strip()


@dataclass(slots=True)
class ToolOutput:
    """One tool result attached to an event. ``cleaner`` is in-process only (not saved)."""

    name: str
    output: str
    no_memory: bool = False
    cleaner: Cleaner | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "output": self.output, "no_memory": self.no_memory}


@dataclass(slots=True)
class ContextEvent:
    """One entry of the working window.

    ``kind`` is ``user`` (an input from any source), ``agent`` (a reply), ``cold_storage`` (a
    document brought back by ``doc_query``) or ``system``. ``vector_text``, ``vector`` and
    ``fingerprint`` are filled by :meth:`RelevanceContext.append`.
    """

    input: str = ""
    response: str = ""
    kind: str = "user"
    source: str = ""
    channel: str = ""
    timestamp: float = field(default_factory=time.time)
    id: str = field(default_factory=lambda: "evt_" + uuid.uuid4().hex[:12])
    tool_outputs: list[ToolOutput] = field(default_factory=list)
    no_memory: bool = False
    vector_text: str = ""
    vector: np.ndarray | None = field(default=None, repr=False, compare=False)
    fingerprint: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(f"context event kind must be one of {KINDS}, got {self.kind!r}")

    @property
    def text(self) -> str:
        """The raw text of the event (input and/or response)."""
        return "\n".join(t for t in (self.input, self.response) if t)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "timestamp": self.timestamp,
            "source": self.source,
            "channel": self.channel,
            "input": self.input,
            "response": self.response,
            "no_memory": self.no_memory,
            "vector_text": self.vector_text,
        }
        if self.tool_outputs:
            out["tool_outputs"] = [t.to_dict() for t in self.tool_outputs]
        if self.meta:
            out["meta"] = self.meta
        if self.vector is not None and self.fingerprint:
            out["fingerprint"] = self.fingerprint
            out["vector"] = base64.b64encode(self.vector.astype("<f4").tobytes()).decode("ascii")
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContextEvent:
        """Rebuild an event from :meth:`to_dict` output.

        Raises:
            ValueError: a field has the wrong type or the kind is unknown.
        """
        if not isinstance(data, dict):
            raise ValueError(f"an event must be an object, got {type(data).__name__}")
        try:
            tools = [
                ToolOutput(str(t["name"]), str(t["output"]), bool(t.get("no_memory", False)))
                for t in data.get("tool_outputs", [])
            ]
            vector = None
            if data.get("vector") and data.get("fingerprint"):
                vector = np.frombuffer(base64.b64decode(data["vector"]), dtype="<f4").astype(np.float32)
            event = cls(
                input=str(data.get("input", "")),
                response=str(data.get("response", "")),
                kind=str(data.get("kind", "user")),
                source=str(data.get("source", "")),
                channel=str(data.get("channel", "")),
                timestamp=float(data["timestamp"]),
                id=str(data["id"]),
                tool_outputs=tools,
                no_memory=bool(data.get("no_memory", False)),
                vector_text=str(data.get("vector_text", "")),
                vector=vector,
                fingerprint=str(data.get("fingerprint", "")) if vector is not None else "",
                meta=dict(data.get("meta", {})),
            )
        except (KeyError, TypeError, ValueError, UsageError) as exc:
            raise ValueError(f"invalid context event: {exc}") from exc
        return event


def _vector_base(event: ContextEvent) -> str:
    """Three branches: agent → response; cold_storage → input + response; else → input."""
    if event.kind == "agent":
        return event.response
    if event.kind == "cold_storage":
        return f"{event.input}\n{event.response}" if event.response else event.input
    return event.input


def text_for_vector(
    event: ContextEvent, *, channel_cleaner: Cleaner | None = None, channel_no_memory: bool = False
) -> str:
    """The text an event is compared by ("" = the event gets no vector), with sync cleaners.

    The base text by the three-branch rule, then the channel cleaner, the tool outputs
    (skipping ``no_memory`` tools, each through its cleaner), and whitespace normalisation.
    """
    if event.no_memory or channel_no_memory:
        return ""
    base = _vector_base(event)
    parts = [channel_cleaner(base) if channel_cleaner is not None else base]
    for tool in event.tool_outputs:
        if not tool.no_memory:
            parts.append(tool.cleaner(tool.output) if tool.cleaner is not None else tool.output)
    return clean_text("\n".join(p for p in parts if p))


async def apply_cleaner(cleaner: Any, text: str) -> str:
    """Run one cleaner: ``await cleaner.aclean(text)`` when it has one, else call it (and await
    the result when it is awaitable)."""
    aclean = getattr(cleaner, "aclean", None)
    value = aclean(text) if callable(aclean) else cleaner(text)
    if inspect.isawaitable(value):
        value = await value
    return value if isinstance(value, str) else str(value)


async def atext_for_vector(
    event: ContextEvent, *, channel_cleaner: Any = None, channel_no_memory: bool = False
) -> str:
    """:func:`text_for_vector` for cleaners that may be async (what the context store uses)."""
    if event.no_memory or channel_no_memory:
        return ""
    base = _vector_base(event)
    parts = [await apply_cleaner(channel_cleaner, base) if channel_cleaner is not None else base]
    for tool in event.tool_outputs:
        if not tool.no_memory:
            parts.append(await apply_cleaner(tool.cleaner, tool.output) if tool.cleaner is not None else tool.output)
    return clean_text("\n".join(p for p in parts if p))


def _lexical_similarities(query: str, texts: Sequence[str], counted: dict[str, TermCounts] | None = None) -> np.ndarray:
    """BM25 of each text for ``query`` by the document store's character n-gram index; -1 when empty.

    The same scores as the document store's lexical path
    (:class:`~homeagent_core.memory.documents.lexical.index.LexicalIndex`) over the window's
    few events, scored exactly by :func:`~homeagent_core.lexical.bm25.score_terms`
    at a cost that follows the events' lengths (no index is built per prune). ``counted`` keeps
    the texts' term counts between calls (a window is scored again on every turn with one new
    event); it is left holding exactly these texts.
    """
    if counted is None:
        counted = {}
    terms = [counted.get(text) or term_counts(text) for text in texts]
    counted.clear()
    counted.update(zip(texts, terms, strict=True))
    scores = score_terms(query, terms)
    empty = np.array([not text for text in texts], dtype=bool)
    return np.where(empty, np.float32(-1.0), scores).astype(np.float32)


class RelevanceContext:
    """The working window; see the module docstring.

    Args:
        path: ``<data>/memory/context.json``; ``None`` keeps it in memory only.
        embedder: the active embedding space (``None``: lexical scoring).
        documents: where pruned events are archived (``None``: they are dropped).
        max_context_size: prune when there are more events than this (default 30).
        protected: newest events never pruned (default 10).
        debounce: seconds between a change and the save it triggers.
        archive_excluded_sources: sources whose pruned events are not archived.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        embedder: EmbeddingProvider | None = None,
        documents: BaseDocumentStore | None = None,
        max_context_size: int = 30,
        protected: int = 10,
        debounce: float = 5.0,
        archive_excluded_sources: Iterable[str] = ARCHIVE_EXCLUDED_SOURCES,
    ) -> None:
        if max_context_size < 1 or protected < 0:
            raise UsageError(
                f"max_context_size must be >= 1 and protected >= 0 "
                f"(got {max_context_size}, {protected})"
            )
        self.path = Path(path) if path is not None else None
        self.embedder = embedder
        self.documents = documents
        self.max_context_size = max_context_size
        self.protected = protected
        self.debounce = debounce
        self.archive_excluded_sources = frozenset(archive_excluded_sources)
        self._events: list[ContextEvent] = []
        self._counted: dict[str, TermCounts] = {}  # term counts of the texts the last prune scored
        self._save_handle: asyncio.TimerHandle | None = None
        self._save_tasks: set[asyncio.Future[None]] = set()
        self._lock = asyncio.Lock()
        self._write_lock = threading.Lock()
        self._snapshots = 0  # numbers each serialised payload
        self._written = 0  # the newest payload on disk
        self.dropped_on_load = 0
        if self.path is not None and self.path.exists():
            self._load(self.path)

    # -- accessors -------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._events)

    @property
    def events(self) -> list[ContextEvent]:
        """A copy of the events, oldest first."""
        return list(self._events)

    def timeline(self, max_chars: int | None = None) -> list[ContextEvent]:
        """The newest events whose raw text fits in ``max_chars`` (all if None), oldest first."""
        if max_chars is None:
            return list(self._events)
        out: list[ContextEvent] = []
        used = 0
        for event in reversed(self._events):
            size = len(event.text) + sum(len(t.output) for t in event.tool_outputs)
            if used + size > max_chars:
                break
            out.append(event)
            used += size
        out.reverse()
        return out

    # -- writes ----------------------------------------------------------------------------

    async def append(
        self,
        event: ContextEvent,
        *,
        channel_cleaner: Cleaner | None = None,
        channel_no_memory: bool = False,
    ) -> ContextEvent:
        """Add ``event`` at its timestamp's place, computing its vector text and vector."""
        event.vector_text = await atext_for_vector(
            event, channel_cleaner=channel_cleaner, channel_no_memory=channel_no_memory
        )
        event.vector, event.fingerprint = None, ""
        if event.vector_text and self.embedder is not None:
            event.vector = (await self.embedder.embed_texts([event.vector_text]))[0]
            event.fingerprint = self.embedder.info.fingerprint
        async with self._lock:
            keys = [e.timestamp for e in self._events]
            self._events.insert(bisect.bisect_right(keys, event.timestamp), event)
        self._schedule_save()
        return event

    def remove(self, event_id: str) -> bool:
        """Drop one event by id; returns whether it was there."""
        for i, event in enumerate(self._events):
            if event.id == event_id:
                del self._events[i]
                self._schedule_save()
                return True
        return False

    async def _scores(self, current_input: str, candidates: list[ContextEvent]) -> np.ndarray:
        query = clean_text(current_input)
        if self.embedder is None or not self.embedder.info.serves(text_language(query)):
            return _lexical_similarities(query, [e.vector_text for e in candidates], self._counted)
        fp = self.embedder.info.fingerprint
        missing = [e for e in candidates if e.vector_text and (e.vector is None or e.fingerprint != fp)]
        if missing:
            vecs = await self.embedder.embed_texts([e.vector_text for e in missing])
            for event, vec in zip(missing, vecs, strict=True):
                event.vector, event.fingerprint = vec, fp
        if not query:
            return np.zeros(len(candidates), dtype=np.float32)
        qvec = (await self.embedder.embed_texts([query]))[0]
        return np.array(
            [float(e.vector @ qvec) if e.vector_text and e.vector is not None else -1.0 for e in candidates],
            dtype=np.float32,
        )

    async def prune(self, current_input: str) -> list[ContextEvent]:
        """Shrink the window to ``max_context_size`` events; returns the pruned events.

        Pruned events are archived to the document store (one document each, source
        ``context_archived``, original timestamp) unless their source is excluded. If archiving
        fails, nothing is removed and the error propagates.
        """
        async with self._lock:
            if len(self._events) <= self.max_context_size:
                return []
            protected = min(self.protected, self.max_context_size)
            cut = len(self._events) - protected
            candidates = self._events[:cut]
            keep_n = max(0, self.max_context_size - protected)
            scores = await self._scores(current_input, candidates)
            # Best score first; among equal scores the newer event wins.
            ranked = sorted(range(len(candidates)), key=lambda i: (-scores[i], -i))
            keep_idx = set(ranked[:keep_n])
            pruned = [e for i, e in enumerate(candidates) if i not in keep_idx]
            await self._archive(pruned)
            gone = {e.id for e in pruned}
            self._events = [e for e in self._events if e.id not in gone]
        self._schedule_save()
        return pruned

    async def _archive(self, events: list[ContextEvent]) -> None:
        if self.documents is None:
            return
        docs = [
            Document(
                content=event.text,
                source=ARCHIVE_SOURCE,
                created_at=event.timestamp,
                meta={
                    "event_id": event.id,
                    "kind": event.kind,
                    "source": event.source,
                    "channel": event.channel,
                },
                # whom the event came from and who may see it (recorded by the turn; an event
                # from before people is the owner's, private: the store fills in its owner)
                person=str(event.meta.get("person") or ""),
                visibility=str(event.meta.get("visibility") or PRIVATE),
            )
            for event in events
            if event.source not in self.archive_excluded_sources and event.text.strip()
        ]
        if docs:
            await self.documents.add_many(docs)

    # -- persistence -----------------------------------------------------------------------

    def _schedule_save(self) -> None:
        if self.path is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._save_handle is None:
            self._save_handle = loop.call_later(self.debounce, self._start_save, loop)

    def _start_save(self, loop: asyncio.AbstractEventLoop) -> None:
        self._save_handle = None
        payload = self._serialise()
        task = loop.run_in_executor(None, self._write, payload)
        self._save_tasks.add(task)
        task.add_done_callback(self._save_done)

    def _save_done(self, task: asyncio.Future[None]) -> None:
        self._save_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("saving the context window to %s failed: %s", self.path, task.exception())

    def _serialise(self) -> tuple[int, bytes]:
        """The window as file bytes, numbered so that an older snapshot never overwrites a newer one."""
        lines = ",\n".join(json.dumps(e.to_dict(), ensure_ascii=False) for e in self._events)
        self._snapshots += 1
        return self._snapshots, ('{"version": 1, "events": [\n' + lines + "\n]}\n").encode("utf-8")

    def _write(self, snapshot: tuple[int, bytes]) -> None:
        assert self.path is not None
        number, payload = snapshot
        with self._write_lock:
            if number <= self._written:
                return  # a newer snapshot is already on disk
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, payload)
            self._written = number

    async def save_now(self) -> None:
        """Write the window durably now (fsync'd when this returns); a pending debounced save is folded in."""
        if self._save_handle is not None:
            self._save_handle.cancel()
            self._save_handle = None
        if self.path is not None:
            await asyncio.to_thread(self._write, self._serialise())

    def flush(self) -> None:
        """Write the window now (synchronously)."""
        if self._save_handle is not None:
            self._save_handle.cancel()
            self._save_handle = None
        if self.path is not None:
            self._write(self._serialise())

    @property
    def save_pending(self) -> bool:
        """True while a debounced save is scheduled or running."""
        return self._save_handle is not None or bool(self._save_tasks)

    async def aclose(self) -> None:
        """Wait for running saves, then write the final state (call on shutdown)."""
        if self._save_handle is not None:
            self._save_handle.cancel()
            self._save_handle = None
        if self._save_tasks:
            await asyncio.gather(*self._save_tasks, return_exceptions=True)
        if self.path is not None:
            await asyncio.to_thread(self._write, self._serialise())

    def _load(self, path: Path) -> None:
        raw = path.read_text(encoding="utf-8", errors="replace")
        items: list[Any]
        try:
            data = json.loads(raw)
            items = data["events"] if isinstance(data, dict) else data
            if not isinstance(items, list):
                raise ValueError("'events' is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            items = _salvage(raw)
            log.warning(
                "context file %s is damaged (%s); recovered %d events from it", path, exc, len(items)
            )
        events: list[ContextEvent] = []
        for number, item in enumerate(items):
            try:
                events.append(ContextEvent.from_dict(item))
            except ValueError as exc:
                self.dropped_on_load += 1
                log.warning("context file %s: dropped event #%d: %s", path, number, exc)
        events.sort(key=lambda e: e.timestamp)
        self._events = events


_THREAD_ID = re.compile(r"^[^\x00-\x1f/\\]{1,200}$")
_UNSAFE_FILE = re.compile(r"[^A-Za-z0-9_.@-]")


def thread_file(thread: str) -> str:
    """The file name of ``thread``'s window: unsafe characters percent-encoded (``qq:private:1`` ->
    ``qq%3Aprivate%3A1.json``), so two threads never share a file."""
    return _UNSAFE_FILE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), thread) + ".json"


class ThreadContexts:
    """One working window per conversation thread, so a turn's prompt is built from its own thread only.

    The main thread is ``main`` (the single window of library use and of the owner's default
    conversation, saved as ``context.json``); every other thread's window is
    ``<folder>/<thread>.json``, opened on first use. At most ``keep`` windows stay open besides
    the main one: the least recently used is saved and closed when another one opens.
    ``<folder>/index.json`` records each thread's person, title and times, which the web UI lists.

    Args:
        main: the main thread's window.
        folder: ``<data>/memory/threads``; ``None`` keeps other threads in memory only.
        keep: windows kept open besides the main one.
    """

    def __init__(self, main: RelevanceContext, folder: str | Path | None, *, keep: int = 32) -> None:
        self.main = main
        self.folder = Path(folder) if folder is not None else None
        self.keep = max(1, keep)
        self._open: dict[str, RelevanceContext] = {}  # insertion order = least recently used first
        self._index: dict[str, dict[str, Any]] = {}
        self._index_lock = threading.Lock()
        if self.folder is not None and (self.folder / "index.json").exists():
            try:
                data = json.loads((self.folder / "index.json").read_text(encoding="utf-8"))
                self._index = {str(k): dict(v) for k, v in data.get("threads", {}).items() if isinstance(v, dict)}
            except (ValueError, AttributeError, TypeError) as exc:
                log.warning("thread index %s is damaged (%s); threads are listed again as they are used",
                            self.folder / "index.json", exc)

    @staticmethod
    def check(thread: str) -> str:
        """``thread`` if it is a usable thread id.

        Raises:
            UsageError: empty, longer than 200 characters, or with a control character or slash.
        """
        if not isinstance(thread, str) or not _THREAD_ID.fullmatch(thread):
            raise UsageError(
                f"thread id must be 1-200 characters without control characters, '/' or a backslash, got {thread!r}"
            )
        return thread

    def get(self, thread: str) -> RelevanceContext:
        """The window of ``thread`` (opened, or loaded from its file, on first use)."""
        if not thread or thread == MAIN_THREAD:
            return self.main
        context = self._open.pop(thread, None)
        if context is None:
            self.check(thread)
            m = self.main
            context = RelevanceContext(
                self.folder / thread_file(thread) if self.folder is not None else None,
                embedder=m.embedder, documents=m.documents, max_context_size=m.max_context_size,
                protected=m.protected, debounce=m.debounce, archive_excluded_sources=m.archive_excluded_sources,
            )
            while len(self._open) >= self.keep:
                oldest = next(iter(self._open))
                self._open.pop(oldest).flush()
        self._open[thread] = context
        return context

    def opened(self) -> list[str]:
        """The threads whose windows are open now, besides the main one."""
        return list(self._open)

    # -- the index ----------------------------------------------------------------------------

    def info(self, thread: str) -> dict[str, Any] | None:
        """``{id, person, title, created, updated}`` of a known thread, or None."""
        entry = self._index.get(thread)
        return {"id": thread, **entry} if entry is not None else None

    def threads(self, person: str) -> list[dict[str, Any]]:
        """The threads of ``person``, the most recently used first."""
        found = [{"id": t, **e} for t, e in list(self._index.items()) if e.get("person") == person]
        found.sort(key=lambda e: -float(e.get("updated", 0)))
        return found

    def note(self, thread: str, person: str, title: str = "", *, when: float | None = None) -> dict[str, Any]:
        """Record that ``person`` used ``thread`` (known threads keep their person and title)."""
        now = time.time() if when is None else when
        thread = thread or MAIN_THREAD
        with self._index_lock:
            entry = self._index.get(thread)
            changed = entry is None or (title and not entry.get("title"))
            if entry is None:
                entry = self._index[thread] = {"person": person, "title": "", "created": now, "updated": now}
            if title and not entry.get("title"):
                entry["title"] = title[:80]
            entry["updated"] = max(float(entry.get("updated", 0)), now)
        if changed:
            self._save_index()
        return {"id": thread, **entry}

    def _save_index(self) -> None:
        if self.folder is None:
            return
        with self._index_lock:
            payload = json.dumps({"version": 1, "threads": self._index}, ensure_ascii=False).encode("utf-8")
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(self.folder / "index.json", payload)

    async def aclose(self) -> None:
        """Save every open window and the index (call on shutdown)."""
        for context in [self.main, *self._open.values()]:
            await context.aclose()
        await asyncio.to_thread(self._save_index)


def _salvage(raw: str) -> list[Any]:
    """Decode the complete event objects at the start of a damaged ``events`` array."""
    start = raw.find("[")
    if start < 0:
        return []
    decoder = json.JSONDecoder()
    pos = start + 1
    out: list[Any] = []
    while True:
        while pos < len(raw) and raw[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(raw) or raw[pos] == "]":
            return out
        try:
            obj, pos = decoder.raw_decode(raw, pos)
        except ValueError:
            return out
        out.append(obj)
