"""Background memory loops: a reusable :class:`Heartbeat` and the archive, merge and review jobs.

A :class:`Heartbeat` runs one async (or sync, in a worker thread) function every
``interval_s`` seconds until stopped; the interval can change at run time, :meth:`trigger`
runs it now, a failing run is logged and counted and the loop carries on, and
:meth:`Heartbeat.stop` wakes the loop at once and waits for a run in progress.

Jobs (each a callable for a heartbeat, each making no LLM call when it has nothing to do):

* :class:`ArchiveJob` — documents cold for 72 h with at most 2 reads → triples via the LLM,
  committed to the graph with the document text as their sentence, then removed from the
  document store (an answer that does not parse keeps the document and counts as a read);
* :class:`MergeJob` — entity names with character-bigram Jaccard > 0.75 → a question to the
  model through the kernel's self-input queue (pseudo channel ``_consolidation_``), which
  answers by calling ``memory_merge``;
* :class:`ReviewJob` — relations not reviewed since their last change are checked against
  their source sentence by the LLM; wrong ones are dropped or re-typed. An answer that does not
  parse (or leaves a relation out) reviews nothing: those relations are asked about again, at
  most ``max_attempts`` (3) times per change.

These jobs are maintenance: they read every person's items (the unfiltered view,
:data:`homeagent_sdk.visibility.EVERYONE`) and keep each source item's person and visibility on
what they derive — triples from a cold document carry the document's, a reviewed relation keeps
its own, and a merge never folds one person's relation into another's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from homeagent_core.aio import call_maybe_async
from homeagent_core.memory.graph.store import Changes
from homeagent_core.memory.keywords import bigram_jaccard, bigrams
from homeagent_sdk.types import Doc, Triple
from homeagent_sdk.visibility import PRIVATE

if TYPE_CHECKING:
    from homeagent_core.memory.graph.store import GraphStore

__all__ = [
    "LEDGER_NAME",
    "ArchiveJob",
    "ColdDocuments",
    "Heartbeat",
    "HeartbeatLedger",
    "MergeJob",
    "ReviewJob",
    "read_heartbeat_ledger",
]

log = logging.getLogger(__name__)

AskLLM = Callable[[str], Awaitable[str]]
SubmitSelfInput = Callable[[str], Awaitable[None]]


LEDGER_NAME = "heartbeats.json"
"""File name of the heartbeat ledger in ``<data>/memory/``."""


def read_heartbeat_ledger(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The ledger's entries by heartbeat name (``{}`` when the file is missing or unreadable).

    Each entry: ``ok`` (the last run succeeded), ``error`` (``"Type: message"`` of the failure,
    else ``""``), ``since`` (when the heartbeat entered that state, epoch seconds).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)}


class HeartbeatLedger:
    """Whether each heartbeat's last run succeeded, in a small JSON file, so that
    ``homeagent doctor`` can say which one fails and why, daemon running or not.

    The file is rewritten (atomically: tmp, fsync, rename) only when a heartbeat's state
    changes — its first run, a failure with a new error, a success after a failure — never on
    every run.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._state = read_heartbeat_ledger(self.path)
        self._lock = threading.Lock()

    def changes(self, name: str, error: str | None) -> bool:
        """Whether recording this outcome would change the file."""
        with self._lock:
            return self._differs(name, error)

    def _differs(self, name: str, error: str | None) -> bool:
        entry = self._state.get(name)
        return entry is None or entry.get("ok") != (error is None) or entry.get("error") != (error or "")

    def record(self, name: str, error: str | None, at: float) -> None:
        """Record one run's outcome (``error`` None: it succeeded); blocking, call off the loop.

        Raises:
            OSError: the file could not be written.
        """
        with self._lock:
            if not self._differs(name, error):
                return
            self._state[name] = {"ok": error is None, "error": error or "", "since": at}
            body = json.dumps(self._state, ensure_ascii=False, indent=1, sort_keys=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(body)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)


class Heartbeat:
    """Runs ``fn`` every ``interval_s`` seconds in its own task until :meth:`stop`.

    With a ``ledger``, each run's outcome is recorded there (see :class:`HeartbeatLedger`).
    """

    def __init__(
        self,
        name: str,
        interval_s: float,
        fn: Callable[[], Any],
        *,
        run_at_start: bool = False,
        ledger: HeartbeatLedger | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"heartbeat {name!r}: interval_s must be > 0, got {interval_s}")
        self.name = name
        self.interval_s = float(interval_s)
        self.fn = fn
        self.run_at_start = run_at_start
        self.ledger = ledger
        self.runs = 0
        self.failures = 0
        self.last_error: str | None = None
        self.last_result: Any = None
        self.last_run_at: float | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._run_lock: asyncio.Lock | None = None
        self._stopping = False
        self._trigger = False
        self._completed: asyncio.Condition | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop on the running event loop (idempotent)."""
        if self.running:
            return
        self._stopping = False
        self._wake = asyncio.Event()
        self._run_lock = asyncio.Lock()
        self._completed = asyncio.Condition()
        self._task = asyncio.create_task(self._loop(), name=f"heartbeat:{self.name}")

    def set_interval(self, interval_s: float) -> None:
        """Change the interval; the current wait restarts with the new value."""
        if interval_s <= 0:
            raise ValueError(f"heartbeat {self.name!r}: interval_s must be > 0")
        self.interval_s = float(interval_s)
        if self._wake is not None:
            self._wake.set()

    def trigger(self) -> None:
        """Run as soon as possible instead of waiting for the interval."""
        self._trigger = True
        if self._wake is not None:
            self._wake.set()

    async def _loop(self) -> None:
        assert self._wake is not None
        if self.run_at_start:
            await self.run_once()
        deadline = time.monotonic() + self.interval_s
        while not self._stopping:
            timeout = max(0.0, deadline - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
            self._wake.clear()
            if self._stopping:
                break
            if self._trigger or time.monotonic() >= deadline:
                self._trigger = False
                await self.run_once()
                deadline = time.monotonic() + self.interval_s
            else:  # the interval changed while waiting
                deadline = min(deadline, time.monotonic() + self.interval_s)

    async def run_once(self) -> Any:
        """Run ``fn`` now (serialised with the loop's own runs); errors are logged, not raised."""
        lock = self._run_lock or asyncio.Lock()
        async with lock:
            self.last_run_at = time.time()
            error: str | None = None
            try:
                result = await call_maybe_async(self.fn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a loop must survive a failing job
                self.failures += 1
                self.last_error = error = f"{type(exc).__name__}: {exc}"
                log.warning("heartbeat %s failed: %s", self.name, self.last_error)
                result = None
            else:
                self.last_result = result
            if self.ledger is not None and self.ledger.changes(self.name, error):
                try:
                    await asyncio.to_thread(self.ledger.record, self.name, error, self.last_run_at)
                except OSError as exc:
                    log.warning("heartbeat %s: cannot write %s: %s", self.name, self.ledger.path, exc)
            self.runs += 1  # counted once recorded: wait_runs() then sees the ledger written
        if self._completed is not None:
            async with self._completed:
                self._completed.notify_all()
        return result

    async def wait_runs(self, count: int, timeout: float = 10.0) -> None:
        """Wait until at least ``count`` runs completed (for tests and orderly shutdowns)."""
        assert self._completed is not None, "start() the heartbeat first"
        async with asyncio.timeout(timeout), self._completed:
            await self._completed.wait_for(lambda: self.runs >= count)

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop the loop; a run in progress gets ``grace_s`` seconds to finish, then is cancelled."""
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), grace_s)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    aclose = stop


# ------------------------------------------------------------------------ jobs


class ColdDocuments(Protocol):
    """What :class:`ArchiveJob` needs from the document store."""

    async def cold_documents(self, older_than_s: float, max_reads: int, limit: int) -> list[Doc]:
        """Documents not read for ``older_than_s`` seconds and read at most ``max_reads`` times."""
        ...

    async def remove_document(self, doc_id: str) -> None:
        """Remove a document once its facts live in the graph."""
        ...

    async def defer_document(self, doc_id: str) -> None:
        """Count a failed archiving attempt as a read: the document stays, and is cold again
        only after the cold period (at most ``max_reads + 1`` attempts in all)."""
        ...


_JSON_ARRAY = re.compile(r"\[.*\]", re.S)


def _json_array(text: str) -> list[Any] | None:
    match = _JSON_ARRAY.search(text)
    if match is None:
        return None
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None


ARCHIVE_PROMPT = (
    "把下面这段记忆文档提炼成知识三元组。只输出 JSON 数组，每项形如 "
    '{{"subject": "...", "relation": "...", "object": "..."}}；没有值得长期记住的事实就输出 []。\n'
    "Extract long-term facts as a JSON array of triples; output [] if there are none.\n\n"
    "文档标题: {title}\n文档内容:\n{content}"
)
#: Added to :data:`ARCHIVE_PROMPT` when the document is a known person's: "我" is that person.
SPEAKER_NOTE = "\n文档里的“我”是 {name}，三元组里用 {name} 作这个人的名字。\n\"I\" in the document is {name}.\n"
#: Subjects a model may still write for the speaker; replaced by the speaker's name.
_SELF_WORDS = frozenset({"我", "用户", "i", "me", "user"})


def _speaker_of(doc: Any) -> str:
    """The registry name "我" stands for in ``doc`` ("" when it is no one person's: a guest's
    thread, a group's, or a document from before there were people)."""
    person = str(getattr(doc, "person", "") or "")
    return "" if ":" in person else person


class ArchiveJob:
    """Cold documents → triples (via the LLM) → graph; the document is then removed.

    When the model's answer does not parse, the document is kept and its attempt counted as a
    read (:meth:`ColdDocuments.defer_document`): it is tried again after the next cold period,
    other cold documents get their turn meanwhile, and after ``max_reads + 1`` failed attempts
    it simply stays a document.
    """

    def __init__(
        self,
        graph: GraphStore,
        documents: ColdDocuments,
        ask_llm: AskLLM,
        *,
        cold_after_s: float = 72 * 3600,
        max_reads: int = 2,
        batch: int = 10,
    ) -> None:
        self.graph, self.documents, self.ask_llm = graph, documents, ask_llm
        self.cold_after_s, self.max_reads, self.batch = cold_after_s, max_reads, batch

    async def __call__(self) -> dict[str, int]:
        docs = await self.documents.cold_documents(self.cold_after_s, self.max_reads, self.batch)
        report = {"documents": 0, "triples": 0, "unparsed": 0}
        for doc in docs:
            speaker = _speaker_of(doc)
            prompt = ARCHIVE_PROMPT.format(title=doc.title, content=doc.content[:4000])
            if speaker:
                prompt += SPEAKER_NOTE.format(name=speaker)
            answer = await self.ask_llm(prompt)
            items = _json_array(answer)
            if items is None:
                report["unparsed"] += 1
                log.warning("archive: the model's answer for document %s was not JSON; kept, tried again later", doc.id)
                await self.documents.defer_document(doc.id)
                continue
            triples = [
                Triple(
                    speaker if speaker and str(i["subject"]).strip().lower() in _SELF_WORDS else str(i["subject"]),
                    str(i["relation"]),
                    str(i["object"]),
                    confidence=0.7,
                    sentence_text=doc.content[:500],
                )
                for i in items
                if isinstance(i, dict) and {"subject", "relation", "object"} <= i.keys()
            ]
            if triples:
                # the relations keep the document's person and visibility (an older document
                # without them is the owner's: person "" is claimed for the owner)
                result = await self.graph.acommit(
                    triples,
                    f"archive:{doc.id}",
                    person=str(getattr(doc, "person", "") or ""),
                    visibility=str(getattr(doc, "visibility", "") or PRIVATE),
                )
                report["triples"] += result.added + result.refreshed
            await self.documents.remove_document(doc.id)
            report["documents"] += 1
        return report


class MergeJob:
    """Proposes near-duplicate entities to the model through the self-input queue."""

    def __init__(
        self,
        graph: GraphStore,
        submit_self_input: SubmitSelfInput,
        *,
        threshold: float = 0.75,
        max_pairs: int = 10,
        max_posting: int = 200,
    ) -> None:
        self.graph, self.submit = graph, submit_self_input
        self.threshold, self.max_pairs, self.max_posting = threshold, max_pairs, max_posting
        self._proposed: set[tuple[str, str]] = set()

    def candidates(self) -> list[tuple[str, str, float]]:
        """Near-duplicate pairs, best first: names whose bigram Jaccard is above the threshold,
        then pairs whose names share a bigram and whose neighbourhoods overlap
        (:meth:`GraphAnalytics.duplicate_candidates`: "王小明" / "小明" who know the same people)."""
        by_name, by_neighbours = self._both_candidates()
        return (by_name + by_neighbours)[: self.max_pairs]

    def _both_candidates(self) -> tuple[list[tuple[str, str, float]], list[tuple[str, str, float]]]:
        by_name = self._name_candidates()
        taken = {(a, b) for a, b, _ in by_name} | self._proposed
        by_neighbours = [
            p for p in self.graph.analytics.duplicate_candidates(max_pairs=self.max_pairs) if (p[0], p[1]) not in taken
        ]
        return by_name, by_neighbours[: max(0, self.max_pairs - len(by_name))]

    def _name_candidates(self) -> list[tuple[str, str, float]]:
        """Pairs of entity names with bigram Jaccard above the threshold, best first."""
        with self.graph.cache.lock:
            names = [e.name for e in self.graph.cache.entities.values()]
        grams = {n: bigrams(n) for n in names}
        postings: dict[str, list[str]] = {}
        for name, gs in grams.items():
            for g in gs:
                postings.setdefault(g, []).append(name)
        seen: set[tuple[str, str]] = set()
        pairs: list[tuple[str, str, float]] = []
        for plist in postings.values():
            if len(plist) > self.max_posting:
                continue  # a bigram shared by that many names says nothing
            for i, a in enumerate(plist):
                for b in plist[i + 1 :]:
                    key = (a, b) if a < b else (b, a)
                    if key in seen or key in self._proposed:
                        continue
                    seen.add(key)
                    score = bigram_jaccard(a, b)
                    if score > self.threshold:
                        pairs.append((key[0], key[1], score))
        pairs.sort(key=lambda p: (-p[2], p[0], p[1]))
        return pairs[: self.max_pairs]

    async def __call__(self) -> int:
        by_name, by_neighbours = await asyncio.to_thread(self._both_candidates)
        pairs = by_name + by_neighbours
        if not pairs:
            return 0
        lines = [f"{i}. {a} ↔ {b}（名称相似度 {s:.2f}）" for i, (a, b, s) in enumerate(by_name, 1)]
        lines += [
            f"{i}. {a} ↔ {b}（名称相近，且共同关联的实体重合 {s:.0%}）"
            for i, (a, b, s) in enumerate(by_neighbours, len(by_name) + 1)
        ]
        await self.submit(
            "[记忆整理] 以下实体可能指同一事物。请逐对判断：是同一事物就调用 "
            "memory_merge(keep, drop) 合并，不是就忽略。\n" + "\n".join(lines)
        )
        self._proposed.update((a, b) for a, b, _ in pairs)
        return len(pairs)


REVIEW_PROMPT = (
    "逐条核对下面的记忆关系是否被它的原句支持。只输出 JSON 数组，每项形如 "
    '{{"id": 编号, "verdict": "keep" | "drop" | "fix", "relation": "修正后的关系(仅 fix)"}}。\n'
    "Check each relation against its source sentence; answer only with the JSON array.\n\n"
    "{items}"
)


class ReviewJob:
    """Re-checks relations against their source sentences with the LLM.

    Only a relation the answer gives a usable verdict (``keep``, ``drop``, ``fix`` with a valid
    relation) counts as reviewed. When the answer does not parse, or leaves a relation out, that
    relation stays unreviewed and is asked about again at the next run; after ``max_attempts``
    such answers since its last change it is skipped (logged once) until it changes again, so a
    batch the model never answers cannot hold the queue forever.
    """

    def __init__(self, graph: GraphStore, ask_llm: AskLLM, *, batch: int = 20, max_attempts: int = 3) -> None:
        if max_attempts < 1:
            raise ValueError(f"ReviewJob max_attempts must be >= 1, got {max_attempts}")
        self.graph, self.ask_llm, self.batch, self.max_attempts = graph, ask_llm, batch, max_attempts

    def pending(self) -> list[tuple[int, str, str, str, str]]:
        """(id, subject, relation, object, sentence) of relations due for review."""
        return self.graph.read(
            lambda conn: conn.execute(
                "SELECT r.id, s.name, r.type, t.name, se.text FROM relations r"
                " JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id"
                " JOIN sentences se ON se.id = r.sentence_id"
                " WHERE r.status = 'active' AND (r.reviewed_at IS NULL OR r.reviewed_at < r.updated_at)"
                " AND NOT (r.review_attempted_at IS NOT NULL AND r.review_attempted_at >= r.updated_at"
                " AND r.review_attempts >= ?)"
                " ORDER BY r.updated_at LIMIT ?",
                (self.max_attempts, self.batch),
            ).fetchall()
        )

    async def __call__(self) -> dict[str, int]:
        rows = await asyncio.to_thread(self.pending)
        report = {"reviewed": 0, "dropped": 0, "fixed": 0, "unanswered": 0, "given_up": 0}
        if not rows:
            return report
        items = "\n".join(f"{i}. {s} -{r}-> {o} | 原句: {sent[:300]}" for i, (_, s, r, o, sent) in enumerate(rows, 1))
        answer = await self.ask_llm(REVIEW_PROMPT.format(items=items))
        parsed = _json_array(answer)
        if parsed is None:
            log.warning("review: the model's answer was not a JSON array; %d relations stay unreviewed", len(rows))
        verdicts: dict[int, dict[str, Any]] = {}
        for item in parsed or []:
            if isinstance(item, dict) and isinstance(item.get("id"), int):
                verdicts[item["id"]] = item
        ids = [row[0] for row in rows]
        given_up: list[int] = []

        def apply(conn: sqlite3.Connection, ch: Changes) -> None:
            now = self.graph._clock()
            for number, rid in enumerate(ids, 1):
                verdict = verdicts.get(number, {})
                kind = verdict.get("verdict")
                relation = str(verdict.get("relation", "")).strip()
                ch.relations.add(rid)
                if kind == "drop":
                    conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
                    report["dropped"] += 1
                elif kind == "fix" and relation and len(relation) <= 50:
                    try:
                        conn.execute(
                            "UPDATE relations SET type = ?, updated_at = ?, reviewed_at = ? WHERE id = ?",
                            (relation, now, now, rid),
                        )
                        report["fixed"] += 1
                    except sqlite3.IntegrityError:  # the fixed relation already exists
                        conn.execute("DELETE FROM relations WHERE id = ?", (rid,))
                        report["dropped"] += 1
                elif kind == "keep":
                    conn.execute("UPDATE relations SET reviewed_at = ? WHERE id = ?", (now, rid))
                else:  # no usable verdict: not reviewed; count the attempt since the last change
                    report["unanswered"] += 1
                    (attempts,) = conn.execute(
                        "UPDATE relations SET review_attempts = CASE WHEN review_attempted_at IS NULL"
                        " OR review_attempted_at < updated_at THEN 1 ELSE review_attempts + 1 END,"
                        " review_attempted_at = ? WHERE id = ? RETURNING review_attempts",
                        (now, rid),
                    ).fetchone()
                    if attempts >= self.max_attempts:
                        given_up.append(rid)
                    continue
                report["reviewed"] += 1
            report["given_up"] = len(given_up)

        await asyncio.to_thread(self.graph.write, apply)
        if given_up:
            log.warning(
                "review: relations %s got no usable verdict in %d answers; they stay as they are, unreviewed, "
                "and are reviewed again when they change",
                given_up,
                self.max_attempts,
            )
        return report
