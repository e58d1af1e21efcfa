"""Rule distiller: personal facts from raw conversation records → graph triples.

Records (what the user said) are buffered in memory and flushed to
``<raw_dir>/raw_<ns>.tsv`` files with an atomic tmp-and-rename write. Every tick (10 minutes by
default, driven by a :class:`~homeagent_core.memory.heartbeat.Heartbeat`) the oldest batch (50)
is matched against simple patterns — 我叫X / 我住在X / 我喜欢X / 我X岁 / 我的工作是X and the
English "my name is X", "I live in X", "I like X", "I am N years old", "my job is X" — and the
triples are committed to the graph. Only statements count: a question (我住在哪里？, "Do I live in
Paris?"), a hypothetical or wish (如果…, "if…", "suppose…") or a negation (我不…, "I don't…") adds
nothing. Distilled records are then deleted from the raw files, so a
restart never distills them twice; records older than the retention (7 days) are dropped; start-up
loads at most the 5000 newest records.

Each record's triples are committed with the record's id as the commit's ``batch_id``, which the
graph records in the same transaction. If the process dies between a graph commit and the
raw-file rewrite, the records are distilled again after restart, but the graph recognises their
ids and writes nothing: no mention is counted twice. Recorded ids older than the retention are
pruned (a record that old expires instead of being distilled).

"我" is the speaker: each record keeps who said it (``speaker``, the entity "我" names — their
registry name), whose item it is (``person``) and its ``visibility``, and its triples are
committed with them, so "我叫李梅" said by the mother is a relation of her entity, private to
her. A record without a speaker (library use, or written before there were people) uses the
distiller's ``subject`` ("用户").
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.types import Triple

if TYPE_CHECKING:
    from homeagent_core.memory.graph.store import GraphStore

__all__ = ["DistillReport", "RawRecord", "RuleDistiller", "extract_triples"]

DEFAULT_SUBJECT = "用户"

_STOP = r"(?=$|[，,。.!！?？;；、\s]|和|并且|而且|还|住在|喜欢|今年|我)"
_X = r"(?P<x>[^，,。.!！?？;；、\s]{1,20}?)"
_EN_X = r"(?P<x>[A-Za-z0-9\u4e00-\u9fff][\w' -]{0,40}?)"
_EN_STOP = r"(?=$|[,.!?;]| and | but | because )"

_PATTERNS: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"我(?:的名字)?叫" + _X + _STOP), "叫", "{x}"),
    (re.compile(r"我的名字是" + _X + _STOP), "叫", "{x}"),
    (re.compile(r"(?:我|(?<=[，,]))(?:现在)?住在" + _X + _STOP), "住在", "{x}"),
    (re.compile(r"(?:我|(?<=[，,]))(?:很|最|非常)?喜欢" + _X + _STOP), "喜欢", "{x}"),
    (re.compile(r"我(?:今年)?(?P<x>\d{1,3}|[零一二三四五六七八九十百]{1,4})岁"), "年龄", "{x}岁"),
    (re.compile(r"我的(?:工作|职业)是" + _X + _STOP), "工作是", "{x}"),
    (re.compile(r"(?i)\bmy name is " + _EN_X + _EN_STOP), "叫", "{x}"),
    (re.compile(r"(?i)\bi live in " + _EN_X + _EN_STOP), "住在", "{x}"),
    (re.compile(r"(?i)\bi (?:really )?(?:like|love|enjoy) " + _EN_X + _EN_STOP), "喜欢", "{x}"),
    (re.compile(r"(?i)\bi(?:'m| am) (?P<x>\d{1,3}) years? old"), "年龄", "{x}岁"),
    (re.compile(r"(?i)\bmy (?:job|occupation) is (?:an? )?" + _EN_X + _EN_STOP), "工作是", "{x}"),
    (re.compile(r"(?i)\bi work as (?:an? )?" + _EN_X + _EN_STOP), "工作是", "{x}"),
]


# A sentence ends at a Chinese stop, ? ! ; or a newline, or at an English full stop followed by space.
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;\n])|(?<=\.)(?=\s)")
# A clause inside a sentence ends at a comma (a hypothetical or a negation governs its own clause).
_CLAUSE_END = re.compile(r"[，,、：:]")
_ZH_QUESTION = re.compile(r"(?:吗|么|嘛)\s*[。.!！~～]*\s*$|是不是|是否|有没有|对不对|对吧|是吧")
_EN_QUESTION = re.compile(
    r"(?i)^\s*(?:do|does|did|am|is|are|was|were|can|could|would|will|should|shall|have|has|where|what|who|how|why)\b"
)
_QUESTION_VALUE = re.compile(r"(?i)哪|什么|啥|谁|多少|怎么|怎样|如何|为什么|为何|^(?:where|what|who|whom|which|how)\b")
_HYPOTHETICAL = re.compile(
    r"(?i)如果|假如|假设|假若|倘若|要是|若是|如若|万一|要不是|假装|想象|希望|但愿|梦想|梦见|"
    r"\b(?:if|suppose|supposing|imagine|pretend|assuming|unless|wish|hope|dream)\b"
)
_NEGATION = re.compile(
    r"(?i)不(?!过|错|少|久|仅|但|管|论|如|同|然|止)|没|(?<!特|区|分|告|级|类|性)别|未(?!来)|(?<!是|除)非(?!常)|并非|"
    r"\b(?:not|never|no longer|nobody|no one|dont|doesnt|didnt)\b|n't\b"
)
_NEGATED_VALUE = re.compile(r"(?i)^(?:不是|并不|并非|没有|没|不)|不是|^(?:not|never|no)\b")


def _spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    """``text`` cut at ``pattern``'s matches into ``(start, end)`` spans covering all of it."""
    spans, start = [], 0
    for cut in pattern.finditer(text):
        end = cut.end()
        if end > start:
            spans.append((start, end))
            start = end
    spans.append((start, len(text)))
    return spans


def _is_statement(text: str, start: int, end: int, value: str) -> bool:
    """Whether the match ``text[start:end]`` states a fact rather than asking, supposing or denying it.

    A question is a sentence ending in ``?``/``？``, ending in 吗/么, holding an A-not-A or tag
    question (是不是, 有没有, 对吧), opening with an English auxiliary or wh-word, or a match whose
    value is a question word (我住在哪里). A hypothetical or a wish (如果, 假如, 要是, 希望, if,
    suppose, imagine, wish) or a negation (不, 没, 别, not, never, n't, no longer) before the match
    in the same clause makes it no fact; so does a value that is itself negated (my name is not Bob).
    """
    if _QUESTION_VALUE.search(value) or _NEGATED_VALUE.search(value):
        return False
    s_start, s_end = next((a, b) for a, b in _spans(_SENTENCE_END, text) if a <= start < b)
    sentence = text[s_start:s_end].rstrip()
    if sentence.endswith(("?", "？")) or _ZH_QUESTION.search(sentence):
        return False
    clause = _CLAUSE_END.split(text[s_start:start])[-1]
    return not (_EN_QUESTION.search(clause) or _HYPOTHETICAL.search(clause) or _NEGATION.search(clause))


def extract_triples(text: str, subject: str = DEFAULT_SUBJECT) -> list[Triple]:
    """Triples the patterns find in ``text``; each carries the text as its sentence.

    Only statements count: questions, hypotheticals and negations (see :func:`_is_statement`)
    are skipped, so "我住在哪里？" or "I don't live in Paris" adds nothing.
    """
    out: list[Triple] = []
    seen: set[tuple[str, str]] = set()
    for pattern, relation, template in _PATTERNS:
        for match in pattern.finditer(text):
            x = match.group("x").strip()
            if not _is_statement(text, match.start(), match.end(), x):
                continue
            value = template.format(x=x)
            if (relation, value) in seen:
                continue
            seen.add((relation, value))
            out.append(
                Triple(
                    subject, relation, value, confidence=0.8, subject_type="person", sentence_text=text.strip()[:500]
                )
            )
    return out


class RawRecord(NamedTuple):
    id: str
    ts: float
    session: str
    text: str
    speaker: str = ""
    """The entity "我" names ("" for the distiller's default subject)."""
    person: str = ""
    """Whose item the distilled relations are ("" = the owner's, see ``GraphStore.claim_for_owner``)."""
    visibility: str = "private"


@dataclass(slots=True)
class DistillReport:
    records: int = 0
    triples: int = 0
    expired: int = 0
    replayed: int = 0
    """Records whose triples the graph had already applied (a restart after a crash)."""
    skipped: list[str] = field(default_factory=list)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}.get(text[i + 1], text[i + 1]))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _atomic_write(path: Path, lines: list[str]) -> None:
    atomic_write(path, "".join(lines), tmp=path.with_name(path.name + ".tmp"))


class RuleDistiller:
    """Buffers raw records on disk and distills them into graph triples in batches."""

    def __init__(
        self,
        raw_dir: str | os.PathLike[str],
        graph: GraphStore,
        *,
        batch_size: int = 50,
        retention_s: float = 7 * 86400,
        max_load: int = 5000,
        subject: str = DEFAULT_SUBJECT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.raw_dir = Path(raw_dir)
        self.raw_dir.mkdir(parents=True, exist_ok=True)
        self.graph = graph
        self.batch_size = batch_size
        self.retention_s = retention_s
        self.max_load = max_load
        self.subject = subject
        self._clock = clock
        self._lock = threading.RLock()
        self._pending: list[RawRecord] = []
        self._queue: list[RawRecord] = []
        self._file_of: dict[str, Path] = {}
        self._seq = 0
        self._load()

    def _load(self) -> None:
        for tmp in self.raw_dir.glob("raw_*.tsv.tmp"):
            tmp.unlink()  # a flush that died before its rename; its records were not acknowledged
        records: list[tuple[RawRecord, Path]] = []
        for path in sorted(self.raw_dir.glob("raw_*.tsv")):
            for line in path.read_text(encoding="utf-8").splitlines():
                parts = line.split("\t")
                if len(parts) not in (4, 7):  # 4: written before there were people
                    continue
                try:
                    ts = float(parts[1])
                except ValueError:
                    continue
                marks = [_unescape(p) for p in parts[4:]] or ["", "", "private"]
                records.append(
                    (RawRecord(parts[0], ts, _unescape(parts[2]), _unescape(parts[3]), *marks), path)
                )
        records.sort(key=lambda rp: rp[0].ts)
        for record, path in records[-self.max_load :]:
            self._queue.append(record)
            self._file_of[record.id] = path

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue)

    def add(
        self,
        text: str,
        session: str = "",
        ts: float | None = None,
        *,
        speaker: str = "",
        person: str = "",
        visibility: str = "private",
    ) -> RawRecord | None:
        """Buffer one raw record (blank text is ignored); persisted by the next :meth:`flush`.

        ``speaker`` is the entity "我" names ("" for :attr:`subject`); ``person`` and
        ``visibility`` are recorded on what the record's triples write.
        """
        if not text.strip():
            return None
        with self._lock:
            self._seq += 1
            now = self._clock() if ts is None else ts
            record = RawRecord(f"{time.time_ns()}-{self._seq}", now, session, text, speaker, person, visibility)
            self._pending.append(record)
            self._queue.append(record)
            return record

    def flush(self) -> int:
        """Write unpersisted records to a new raw file (atomic); returns how many."""
        with self._lock:
            if not self._pending:
                return 0
            path = self.raw_dir / f"raw_{time.time_ns()}.tsv"
            lines = [
                f"{r.id}\t{r.ts!r}\t{_escape(r.session)}\t{_escape(r.text)}"
                f"\t{_escape(r.speaker)}\t{_escape(r.person)}\t{_escape(r.visibility)}\n"
                for r in self._pending
            ]
            _atomic_write(path, lines)
            for r in self._pending:
                self._file_of[r.id] = path
            count = len(self._pending)
            self._pending = []
            return count

    def _remove(self, ids: set[str]) -> None:
        by_file: dict[Path, set[str]] = {}
        for rid in ids:
            path = self._file_of.pop(rid, None)
            if path is not None:
                by_file.setdefault(path, set()).add(rid)
        for path, gone in by_file.items():
            if not path.exists():
                continue
            keep = [
                line + "\n"
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.split("\t", 1)[0] not in gone
            ]
            if keep:
                _atomic_write(path, keep)
            else:
                path.unlink()

    def distill_once(self) -> DistillReport:
        """Flush, drop expired records, distill the oldest batch and delete it from disk."""
        report = DistillReport()
        with self._lock:
            self.flush()
            cutoff = self._clock() - self.retention_s
            expired = {r.id for r in self._queue if r.ts < cutoff}
            if expired:
                self._queue = [r for r in self._queue if r.id not in expired]
                self._remove(expired)
                report.expired = len(expired)
            batch = self._queue[: self.batch_size]
            if not batch:
                return report
            self.graph.prune_batches(self.retention_s)
            for record in batch:
                triples = extract_triples(record.text, record.speaker or self.subject)
                if triples:
                    result = self.graph.commit(
                        triples,
                        record.session,
                        batch_id=f"distill:{record.id}",
                        person=record.person,
                        visibility=record.visibility,
                    )
                    report.replayed += result.duplicate
                    report.triples += result.added + result.refreshed
                    report.skipped.extend(result.skipped)
            done = {r.id for r in batch}
            self._queue = self._queue[len(batch) :]
            self._remove(done)
            report.records = len(batch)
            return report

    async def adistill_once(self) -> DistillReport:
        """:meth:`distill_once` in a worker thread (the heartbeat calls this)."""
        return await asyncio.to_thread(self.distill_once)

    async def aflush(self) -> int:
        return await asyncio.to_thread(self.flush)
