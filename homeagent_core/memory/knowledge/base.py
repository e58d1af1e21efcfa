"""Knowledge base: curated entries in ``<data>/knowledge/<category…>/<leaf>/content.md``.

Names use ``/`` for hierarchy, are lower-cased and have spaces turned into ``_``; a name that
could escape the root or is ambiguous on disk (empty, ``..``, a segment starting with ``.``,
``a//b``, ``a/./b``, backslashes, control characters) is rejected with
:class:`InvalidKnowledgeName`. The filesystem is the truth; ``<root>/.index.json`` caches, per
entry, a 200-character preview and the entry's vector with its space fingerprint, so restarts
do not re-embed. Search fuses the dense path (weight 0.5) and the lexical path (0.5), each
normalised by its own maximum over *all* the entries the reader may see (truncating candidates
before fusion loses good matches); ties are broken by name. The lexical path is BM25 on the
scheme every memory tier shares (:mod:`homeagent_core.lexical`: character grams of Latin words,
CJK grams grouped by jieba word, stop words, saturated tf, length norm, a Chinese word's grams
sharing its weight), held in memory (:class:`~homeagent_core.lexical.collection.LexicalCollection`)
and updated entry by entry; its statistics count only the entries the reader may see.

Entries and the cached index are kept by a :class:`KnowledgeStorage`: :class:`DiskKnowledge`
(the folder tree above, the default) or the tenant's rows on a shared PostgreSQL memory store
(:class:`~homeagent_core.memory.stores.postgresql.knowledge.PgKnowledge`), where an entry written on one daemon
is listed and searched on the others.

Every entry records its ``person`` and ``visibility`` (:mod:`homeagent_sdk.visibility`), kept by
the storage beside the entries (``<root>/.marks.json``, durable, not a cache; columns on
PostgreSQL). An entry without a mark (written before there were people) is the owner's and
private. Search, list and lookup take the reader's :class:`~homeagent_sdk.visibility.Audience`
and consider only entries it may see: the filter applies before ranking.
"""

from __future__ import annotations

import base64
import builtins
import heapq
import json
import logging
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from homeagent_core.aio import run_sync
from homeagent_core.lexical.collection import LexicalCollection
from homeagent_core.workers import run_blocking
from homeagent_sdk._atomic import atomic_write
from homeagent_sdk.embeddings import text_language
from homeagent_sdk.errors import HomeAgentError, UsageError
from homeagent_sdk.visibility import HOUSEHOLD, PRIVATE, Audience, valid_visibility

if TYPE_CHECKING:
    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = [
    "INDEX_VERSION",
    "DiskKnowledge",
    "InvalidKnowledgeName",
    "KnowledgeBase",
    "KnowledgeEntry",
    "KnowledgeHit",
    "KnowledgeNotFound",
    "KnowledgeStorage",
    "normalize_name",
]

log = logging.getLogger(__name__)

CONTENT_FILE = "content.md"
INDEX_FILE = ".index.json"
INDEX_VERSION = 1
"""The format of ``.index.json`` (a cache of the entries' vectors; rebuilt when unreadable)."""
MARKS_FILE = ".marks.json"
LIBRARY_OWNER = "owner"  # = homeagent_core.memory.audience.LIBRARY_OWNER (knowledge imports nothing of memory)
_BAD_CHARS = re.compile(r"[\\\x00-\x1f\x7f:*?\"<>|]")


class InvalidKnowledgeName(HomeAgentError, ValueError):
    """A knowledge name is empty or not path-safe."""


class KnowledgeNotFound(HomeAgentError, LookupError):
    """No entry (or more than one entry) matches the given name."""


def normalize_name(name: str) -> str:
    """Lower-case, spaces → ``_``, validated hierarchy; returns the canonical name.

    Raises:
        InvalidKnowledgeName: the name is empty or has an unsafe segment; the message says which.
    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidKnowledgeName("knowledge name is empty; use e.g. 'recipes/dumplings'")
    canon = re.sub(r"\s+", "_", name.strip().lower())
    if _BAD_CHARS.search(canon):
        raise InvalidKnowledgeName(
            f"knowledge name {name!r} contains a backslash, control or reserved character; "
            "use letters, digits, '_', '-' and '/' between categories"
        )
    for seg in canon.split("/"):
        if seg == "":
            raise InvalidKnowledgeName(
                f"knowledge name {name!r} has an empty segment (leading/trailing '/' or '//')"
            )
        if seg in (".", ".."):
            raise InvalidKnowledgeName(f"knowledge name {name!r} may not contain '.' or '..' segments")
        if seg.startswith("."):
            raise InvalidKnowledgeName(
                f"knowledge name {name!r}: segment {seg!r} starts with '.', which is reserved"
            )
    return canon


@dataclass(slots=True, frozen=True)
class KnowledgeEntry:
    """One entry: ``name`` (``category/…/leaf``), its content and modification time, whom it came
    from and who may see it."""

    name: str
    content: str
    updated_at: float
    person: str = ""
    visibility: str = PRIVATE

    @property
    def category(self) -> str:
        return self.name.rpartition("/")[0]

    @property
    def leaf(self) -> str:
        return self.name.rpartition("/")[2]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "category": self.category, "content": self.content, "updated_at": self.updated_at,
                "person": self.person, "visibility": self.visibility}


@dataclass(slots=True, frozen=True)
class KnowledgeHit:
    """A search result with its fused score."""

    entry: KnowledgeEntry
    score: float


class KnowledgeStorage(Protocol):
    """Where the knowledge entries and their cached index live."""

    def load(self) -> list[tuple[str, str, float]]:
        """Every entry as ``(name, content, updated_at)``, by name."""
        ...

    def load_index(self) -> dict[str, Any]:
        """Cached per-entry index data (``fingerprint``, base64 ``vector``, ``updated_at``) by name."""
        ...

    def save_index(self, entries: dict[str, Any]) -> None:
        """Keep the per-entry index data (a cache: losing it only costs re-embedding)."""
        ...

    def write(self, name: str, content: str) -> float:
        """Create or replace an entry durably; returns its ``updated_at``."""
        ...

    def remove(self, name: str) -> None:
        """Delete an entry (and the categories it leaves empty)."""
        ...

    def load_marks(self) -> dict[str, tuple[str, str]]:
        """``(person, visibility)`` of every entry that has them, by name."""
        ...

    def write_marks(self, name: str, person: str, visibility: str) -> None:
        """Record an entry's person and visibility durably."""
        ...

    def follow(self, on_change: Callable[[], None]) -> None:
        """Call ``on_change()`` after another daemon changed the entries (never, for a local folder)."""
        ...

    def close(self) -> None: ...


class DiskKnowledge(KnowledgeStorage):
    """The entries as ``<root>/<category…>/<leaf>/content.md`` files, the index in ``<root>/.index.json``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _dir(self, name: str) -> Path:
        path = self.root.joinpath(*name.split("/"))
        if self.root.resolve() not in path.resolve().parents:
            raise InvalidKnowledgeName(f"knowledge name {name!r} resolves outside {self.root}")
        return path

    def load(self) -> list[tuple[str, str, float]]:
        out = []
        for content_path in sorted(self.root.rglob(CONTENT_FILE)):
            rel = content_path.parent.relative_to(self.root).as_posix()
            try:
                name = normalize_name(rel)
            except InvalidKnowledgeName:
                log.warning("knowledge: skipping %s (its folder name is not a valid entry name)", content_path)
                continue
            content = content_path.read_text(encoding="utf-8", errors="replace")
            out.append((name, content, content_path.stat().st_mtime))
        return out

    def load_index(self) -> dict[str, Any]:
        index_path = self.root / INDEX_FILE
        if not index_path.exists():
            return {}
        try:
            entries = json.loads(index_path.read_text(encoding="utf-8")).get("entries", {})
        except (ValueError, AttributeError) as exc:
            log.warning("knowledge index %s is unreadable (%s); rebuilding it", index_path, exc)
            return {}
        return entries if isinstance(entries, dict) else {}

    def save_index(self, entries: dict[str, Any]) -> None:
        payload = json.dumps({"version": INDEX_VERSION, "entries": entries}, ensure_ascii=False, indent=1)
        atomic_write(self.root / INDEX_FILE, payload)

    def write(self, name: str, content: str) -> float:
        folder = self._dir(name)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / CONTENT_FILE, content)
        return (folder / CONTENT_FILE).stat().st_mtime

    def remove(self, name: str) -> None:
        folder = self._dir(name)
        if folder.resolve() == self.root.resolve():
            raise InvalidKnowledgeName("refusing to delete the knowledge root")
        (folder / CONTENT_FILE).unlink(missing_ok=True)
        if not any(folder.iterdir()):
            folder.rmdir()
        else:
            leftovers = [p for p in folder.iterdir() if p.name != CONTENT_FILE]
            if all(p.is_file() for p in leftovers):
                shutil.rmtree(folder)
        parent = folder.parent
        while parent.resolve() != self.root.resolve() and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
        marks = self.load_marks()
        if marks.pop(name, None) is not None:
            self._save_marks(marks)

    def load_marks(self) -> dict[str, tuple[str, str]]:
        path = self.root / MARKS_FILE
        if not path.exists():
            return {}
        try:
            entries = json.loads(path.read_text(encoding="utf-8")).get("entries", {})
            return {str(n): (str(m[0]), str(m[1])) for n, m in entries.items()}
        except (ValueError, AttributeError, TypeError, IndexError, KeyError) as exc:
            # every entry then counts as the owner's and private: nothing is shown to more people
            log.warning("knowledge marks %s are unreadable (%s); every entry is treated as the owner's, private; "
                        "restore the file from a backup to bring back who may see what", path, exc)
            return {}

    def write_marks(self, name: str, person: str, visibility: str) -> None:
        marks = self.load_marks()
        marks[name] = (person, visibility)
        self._save_marks(marks)

    def _save_marks(self, marks: dict[str, tuple[str, str]]) -> None:
        payload = {"version": 1, "entries": {n: list(m) for n, m in sorted(marks.items())}}
        atomic_write(self.root / MARKS_FILE, json.dumps(payload, ensure_ascii=False, indent=1))

    def follow(self, on_change: Callable[[], None]) -> None:
        return None

    def close(self) -> None:
        return None


#: entries, their index metadata, their vectors and the lexical index, as installed together
_State = tuple[dict[str, "KnowledgeEntry"], dict[str, dict[str, Any]], dict[str, np.ndarray], LexicalCollection]


def _lexical_text(name: str, content: str) -> str:
    """What the lexical path indexes of an entry: its name's words, then its content."""
    return f"{name.replace('/', ' ').replace('_', ' ')}\n{content}"


def _record(state: _State, entry: KnowledgeEntry) -> None:
    """Hold ``entry`` and its index metadata (the lexical path is the caller's)."""
    entries, meta, _vectors, _lexical = state
    entries[entry.name] = entry
    meta[entry.name] = {"preview": entry.content[:200], "updated_at": entry.updated_at}


class KnowledgeBase:
    """The knowledge tree under ``root`` (``<data>/knowledge``).

    Args:
        root: the knowledge folder; created if missing, never deleted.
        embedder: the active embedding space (``None``: lexical search only).
        dense_weight / lexical_weight: fusion weights (default 0.5 / 0.5).
        storage: where entries live; ``None`` = the files under ``root``. The base closes it.
        owner: the household owner's name: entries without a mark are theirs (and private).
    """

    def __init__(
        self,
        root: str | Path,
        embedder: EmbeddingProvider | None = None,
        *,
        dense_weight: float = 0.5,
        lexical_weight: float = 0.5,
        storage: KnowledgeStorage | None = None,
        owner: str = LIBRARY_OWNER,
    ) -> None:
        self.root = Path(root)
        self.owner = owner or LIBRARY_OWNER
        self.storage: KnowledgeStorage = DiskKnowledge(self.root) if storage is None else storage
        self.embedder = embedder
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self._entries: dict[str, KnowledgeEntry] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._lexical = LexicalCollection()
        self._changed = threading.Event()  # set by another daemon's change; applied at the next call
        self._generation = 0  # bumped by every change made here, so a reload read meanwhile is not installed
        self._load()
        self.storage.follow(self._changed.set)

    # -- storage ---------------------------------------------------------------------------

    def _sync(self) -> None:
        """Reload the entries when another daemon changed them (on the caller's thread)."""
        if self._changed.is_set():
            self._changed.clear()
            self._install(self._read(self._known()))

    async def refresh(self) -> None:
        """Apply another daemon's changes, reading them in a ``memory`` pool thread.

        The async methods call it first, so the event loop never waits on the storage; the new
        entries replace the old ones in one step on the loop. When this base changed an entry
        while the read ran, the read may predate that change: it is dropped and the next call
        reads again.
        """
        if self._changed.is_set():
            self._changed.clear()
            generation = self._generation
            state = await run_blocking("memory", self._read, self._known())
            if self._generation != generation:
                self._changed.set()
                return
            self._install(state)

    def _known(self) -> dict[str, tuple[float, np.ndarray]]:
        return {n: (e.updated_at, self._vectors[n]) for n, e in self._entries.items() if n in self._vectors}

    def _install(self, state: _State) -> None:
        self._entries, self._meta, self._vectors, self._lexical = state
        self._generation += 1

    def _load(self) -> None:
        self._install(self._read(None))

    def _read(self, known: dict[str, tuple[float, np.ndarray]] | None) -> _State:
        """Read every entry; a vector comes from the cached index, or from ``known`` (name →
        (updated_at, vector) of the entries held before a reload) when the entry is unchanged."""
        state: _State = ({}, {}, {}, LexicalCollection())
        vectors = state[2]
        cached = self.storage.load_index()
        marks = self.storage.load_marks()
        for name, content, updated_at in self.storage.load():
            person, visibility = marks.get(name, (self.owner, PRIVATE))
            if not person or person == LIBRARY_OWNER:  # written without a person registry: the owner's
                person = self.owner
            entry = KnowledgeEntry(name, content, updated_at, person, visibility)
            _record(state, entry)
            state[3].add(name, _lexical_text(name, content))
            meta = cached.get(name, {})
            if (
                self.embedder is not None
                and meta.get("fingerprint") == self.embedder.info.fingerprint
                and meta.get("updated_at") == entry.updated_at
                and meta.get("vector")
            ):
                vec = np.frombuffer(base64.b64decode(meta["vector"]), dtype="<f4").astype(np.float32)
                if vec.shape == (self.embedder.info.dimension,):
                    vectors[name] = vec
            elif known is not None and name in known and known[name][0] == updated_at:
                vectors[name] = known[name][1]
        state[3].fold()
        return state

    def _index_entry(self, entry: KnowledgeEntry) -> None:
        _record((self._entries, self._meta, self._vectors, self._lexical), entry)
        self._generation += 1

    def _forget(self, name: str) -> None:
        self._entries.pop(name, None)
        self._vectors.pop(name, None)
        self._meta.pop(name, None)
        self._lexical.remove(name)
        self._generation += 1

    def _save_index(self) -> None:
        entries: dict[str, Any] = {}
        for name, meta in sorted(self._meta.items()):
            item = dict(meta)
            vec = self._vectors.get(name)
            if vec is not None and self.embedder is not None:
                item["fingerprint"] = self.embedder.info.fingerprint
                item["vector"] = base64.b64encode(vec.astype("<f4").tobytes()).decode("ascii")
            entries[name] = item
        self.storage.save_index(entries)

    async def _ensure_vectors(self) -> None:
        if self.embedder is None:
            return
        missing = [n for n in self._entries if n not in self._vectors]
        if not missing:
            return
        texts = [f"{n.replace('/', ' ')}\n{self._entries[n].content}" for n in missing]
        vecs = await self.embedder.embed_texts(texts)
        for name, vec in zip(missing, vecs, strict=True):
            self._vectors[name] = np.ascontiguousarray(vec, dtype=np.float32)
        await run_blocking("memory", self._save_index)

    # -- API -------------------------------------------------------------------------------

    def __len__(self) -> int:
        self._sync()
        return len(self._entries)

    def get(self, name: str, *, audience: Audience | None = None) -> KnowledgeEntry:
        """The entry named ``name`` (full name or unique leaf) among those ``audience`` may see
        (``None``: every entry, for the owner's tools).

        Raises:
            InvalidKnowledgeName, KnowledgeNotFound.
        """
        return self._entries[self.resolve(name, audience=audience)]

    def _sees(self, audience: Audience | None, name: str) -> bool:
        entry = self._entries[name]
        return audience is None or audience.sees(entry.person, entry.visibility)

    def resolve(self, name: str, *, audience: Audience | None = None) -> str:
        """Full name for ``name``: itself if it exists, else the only entry with that leaf
        (among the entries ``audience`` may see; ``None``: all).

        Raises:
            InvalidKnowledgeName: the name is not path-safe.
            KnowledgeNotFound: no entry, or several entries share that leaf (names listed).
        """
        self._sync()
        canon = normalize_name(name)
        if canon in self._entries and self._sees(audience, canon):
            return canon
        matches = sorted(
            n for n in self._entries if n.rpartition("/")[2] == canon and n != canon and self._sees(audience, n)
        )
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise KnowledgeNotFound(
                f"knowledge name {name!r} is ambiguous: {', '.join(matches)}; use the full name"
            )
        raise KnowledgeNotFound(f"no knowledge entry named {name!r}; see knowledge_list")

    async def create(
        self, name: str, content: str, *, person: str = "", visibility: str = PRIVATE, audience: Audience | None = None
    ) -> KnowledgeEntry:
        """Create or replace the entry ``name`` (its old vector is dropped first), as ``person``
        ("" = the owner) with ``visibility``. Replacing a ``household`` entry keeps it household.

        ``audience``: the writer's view; an entry of that name they may not see is not replaced.

        Raises:
            InvalidKnowledgeName: unsafe name, or it would nest under / over an existing entry.
            UsageError: empty content, an unknown visibility, or an entry of that name the
                writer may not see.
        """
        await self.refresh()
        canon = normalize_name(name)
        if not content.strip():
            raise UsageError(f"knowledge entry {canon!r} needs non-empty content")
        if not valid_visibility(visibility):
            raise UsageError(f"knowledge visibility {visibility!r} is not 'private', 'household' or 'group:<thread>'")
        old = self._entries.get(canon)
        if old is not None and not self._sees(audience, canon):
            raise UsageError(f"a knowledge entry named {canon!r} belongs to someone else; choose another name")
        if old is not None and old.visibility == HOUSEHOLD:
            visibility = HOUSEHOLD
        for other in self._entries:
            if other != canon and (canon.startswith(other + "/") or other.startswith(canon + "/")):
                raise InvalidKnowledgeName(
                    f"knowledge name {canon!r} would nest with the existing entry {other!r}; "
                    "an entry cannot also be a category"
                )
        self._vectors.pop(canon, None)
        updated_at = await run_blocking("memory", self.storage.write, canon, content)
        person = person or self.owner
        await run_blocking("memory", self.storage.write_marks, canon, person, visibility)
        entry = KnowledgeEntry(canon, content, updated_at, person, visibility)
        await run_blocking("memory", self._lexical.add, canon, _lexical_text(canon, content))
        self._index_entry(entry)
        if self.embedder is not None:
            vec = (await self.embedder.embed_texts([f"{canon.replace('/', ' ')}\n{content}"]))[0]
            self._vectors[canon] = np.ascontiguousarray(vec, dtype=np.float32)
        await run_blocking("memory", self._save_index)
        return entry

    def delete(self, name: str) -> str:
        """Delete an entry by full name or unique leaf; empty categories are removed.

        Returns the full name deleted. The knowledge root itself is never deleted.

        Raises:
            InvalidKnowledgeName, KnowledgeNotFound.
        """
        full = self.resolve(name)
        self.storage.remove(full)
        self._forget(full)
        self._save_index()
        return full

    async def adelete(self, name: str, *, audience: Audience | None = None) -> str:
        """:meth:`delete` with the storage calls in a ``memory`` pool thread (of an entry
        ``audience`` may see; ``None``: any).

        Raises:
            InvalidKnowledgeName, KnowledgeNotFound.
        """
        await self.refresh()
        full = self.resolve(name, audience=audience)
        await run_blocking("memory", self.storage.remove, full)
        self._forget(full)
        await run_blocking("memory", self._save_index)
        return full

    def set_visibility(self, name: str, visibility: str) -> KnowledgeEntry:
        """Give an entry (full name or unique leaf) ``visibility``; the owner's share/unshare.

        Raises:
            InvalidKnowledgeName, KnowledgeNotFound, UsageError (an unknown visibility).
        """
        if not valid_visibility(visibility):
            raise UsageError(f"knowledge visibility {visibility!r} is not 'private', 'household' or 'group:<thread>'")
        old = self.get(name)
        self.storage.write_marks(old.name, old.person, visibility)
        entry = KnowledgeEntry(old.name, old.content, old.updated_at, old.person, visibility)
        self._entries[old.name] = entry
        self._generation += 1
        return entry

    def list(self, category: str = "", *, audience: Audience | None = None) -> list[KnowledgeEntry]:
        """Entries under ``category`` ("" = all) that ``audience`` may see (``None``: all), sorted by name.

        Raises:
            InvalidKnowledgeName: the category is not path-safe.
        """
        self._sync()
        prefix = normalize_name(category) + "/" if category.strip() else ""
        return [e for n, e in sorted(self._entries.items()) if n.startswith(prefix) and self._sees(audience, n)]

    def categories(self, *, audience: Audience | None = None) -> builtins.list[str]:
        """Every category path that holds at least one entry ``audience`` may see (``None``: any)."""
        self._sync()
        cats: set[str] = set()
        for name in self._entries:
            if not self._sees(audience, name):
                continue
            parts = name.split("/")[:-1]
            cats.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        return sorted(cats)

    async def search(
        self, query: str, top_k: int = 5, *, audience: Audience, category: str = ""
    ) -> builtins.list[KnowledgeHit]:
        """Fused dense + lexical search over the entries ``audience`` may see; ties broken by name."""
        await self.refresh()
        if top_k <= 0 or not query.strip() or not self._entries:
            return []
        prefix = normalize_name(category) + "/" if category.strip() else ""
        snapshot = builtins.list(self._entries.values())  # the worker thread filters a copy
        names, lexical = await run_blocking("memory", self._lexical_scores, snapshot, prefix, audience, query)
        if not names:
            return []
        scores: dict[str, float] = {}
        peak = max(lexical.values(), default=0.0)
        if peak > 0:
            scores = {n: self.lexical_weight * v / peak for n, v in lexical.items()}
        if self.embedder is not None and self.dense_weight > 0 and self.embedder.info.serves(text_language(query)):
            await self._ensure_vectors()
            qvec = (await self.embedder.embed_texts([query]))[0]
            # a pass over every visible entry: in the worker thread, like the lexical one
            dense = await run_blocking("memory", _dense_scores, names, self._vectors, qvec)
            if dense.max() > 0:
                for n, v in zip(names, dense / dense.max(), strict=True):
                    if v > 0:
                        scores[n] = scores.get(n, 0.0) + self.dense_weight * float(v)
        best = heapq.nsmallest(top_k, ((-score, n) for n, score in scores.items() if score > 0))
        entries = self._entries  # an entry deleted while the search awaited is left out
        return [KnowledgeHit(entries[n], round(-score, 6)) for score, n in best if n in entries]

    def _lexical_scores(
        self, entries: builtins.list[KnowledgeEntry], prefix: str, audience: Audience, query: str
    ) -> tuple[builtins.list[str], dict[str, float]]:
        """The names of ``entries`` under ``prefix`` that ``audience`` may see, and their lexical
        scores (those sharing a term with ``query``); in a worker thread: a pass over every entry."""
        names = [e.name for e in entries if e.name.startswith(prefix) and audience.sees(e.person, e.visibility)]
        return names, (self._lexical.scores(query, names) if names else {})

    # -- sync twins for the CLI ------------------------------------------------------------

    def create_sync(self, name: str, content: str) -> KnowledgeEntry:
        """:meth:`create` for synchronous callers (refuses to run inside an event loop)."""
        return run_sync(self.create(name, content), "KnowledgeBase.create")

    def search_sync(
        self, query: str, top_k: int = 5, *, audience: Audience, category: str = ""
    ) -> builtins.list[KnowledgeHit]:
        """:meth:`search` for synchronous callers (refuses to run inside an event loop)."""
        return run_sync(self.search(query, top_k, audience=audience, category=category), "KnowledgeBase.search")

    def close(self) -> None:
        """Close the storage (a database connection on a shared store)."""
        self.storage.close()


def _dense_scores(names: builtins.list[str], vectors: dict[str, np.ndarray], qvec: np.ndarray) -> np.ndarray:
    """Cosine scores of ``names``' vectors against ``qvec`` (negative ones 0; an entry deleted
    meanwhile has no vector and scores 0); blocking: one matrix product."""
    found = [(i, v) for i, n in enumerate(names) if (v := vectors.get(n)) is not None]
    dense = np.zeros(len(names), dtype=np.float64)
    if found:
        dense[[i for i, _ in found]] = np.maximum(np.stack([v for _, v in found]) @ qvec, 0.0)
    return dense
