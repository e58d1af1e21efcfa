"""Knowledge base: curated entries in ``<data>/knowledge/<category…>/<leaf>/content.md``.

Names use ``/`` for hierarchy, are lower-cased and have spaces turned into ``_``; a name that
could escape the root or is ambiguous on disk (empty, ``..``, a segment starting with ``.``,
``a//b``, ``a/./b``, backslashes, control characters) is rejected with
:class:`InvalidKnowledgeName`. The filesystem is the truth; ``<root>/.index.json`` caches, per
entry, a 200-character preview, the top-20 terms and the entry's vector with its space
fingerprint, so restarts do not re-embed. Search fuses the dense path (weight 0.5) and the
TF-IDF lexical path (0.5), each normalised by its own maximum over *all* entries (truncating
candidates before fusion loses good matches); ties are broken by name.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import json
import logging
import os
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.aio import run_sync
from homeagent_core.embeddings.tfidf import TfidfIndex, tokenize
from homeagent_sdk.embeddings import text_language
from homeagent_sdk.errors import HomeAgentError, UsageError

if TYPE_CHECKING:
    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = [
    "InvalidKnowledgeName",
    "KnowledgeBase",
    "KnowledgeEntry",
    "KnowledgeHit",
    "KnowledgeNotFound",
    "normalize_name",
]

log = logging.getLogger(__name__)

CONTENT_FILE = "content.md"
INDEX_FILE = ".index.json"
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
    """One entry: ``name`` (``category/…/leaf``), its content and modification time."""

    name: str
    content: str
    updated_at: float

    @property
    def category(self) -> str:
        return self.name.rpartition("/")[0]

    @property
    def leaf(self) -> str:
        return self.name.rpartition("/")[2]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "category": self.category, "content": self.content, "updated_at": self.updated_at}


@dataclass(slots=True, frozen=True)
class KnowledgeHit:
    """A search result with its fused score."""

    entry: KnowledgeEntry
    score: float


class KnowledgeBase:
    """The knowledge tree under ``root`` (``<data>/knowledge``).

    Args:
        root: the knowledge folder; created if missing, never deleted.
        embedder: the active embedding space (``None``: lexical search only).
        dense_weight / lexical_weight: fusion weights (default 0.5 / 0.5).
    """

    def __init__(
        self,
        root: str | Path,
        embedder: EmbeddingProvider | None = None,
        *,
        dense_weight: float = 0.5,
        lexical_weight: float = 0.5,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self._entries: dict[str, KnowledgeEntry] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._lexical = TfidfIndex()
        self._load()

    # -- disk ------------------------------------------------------------------------------

    def _dir(self, name: str) -> Path:
        path = self.root.joinpath(*name.split("/"))
        if self.root.resolve() not in path.resolve().parents:
            raise InvalidKnowledgeName(f"knowledge name {name!r} resolves outside {self.root}")
        return path

    def _load(self) -> None:
        cached: dict[str, Any] = {}
        index_path = self.root / INDEX_FILE
        if index_path.exists():
            try:
                cached = json.loads(index_path.read_text(encoding="utf-8")).get("entries", {})
            except (ValueError, AttributeError) as exc:
                log.warning("knowledge index %s is unreadable (%s); rebuilding it", index_path, exc)
        for content_path in sorted(self.root.rglob(CONTENT_FILE)):
            rel = content_path.parent.relative_to(self.root).as_posix()
            try:
                name = normalize_name(rel)
            except InvalidKnowledgeName:
                log.warning("knowledge: skipping %s (its folder name is not a valid entry name)", content_path)
                continue
            content = content_path.read_text(encoding="utf-8", errors="replace")
            entry = KnowledgeEntry(name, content, content_path.stat().st_mtime)
            self._index_entry(entry)
            meta = cached.get(name, {})
            if (
                self.embedder is not None
                and meta.get("fingerprint") == self.embedder.info.fingerprint
                and meta.get("updated_at") == entry.updated_at
                and meta.get("vector")
            ):
                vec = np.frombuffer(base64.b64decode(meta["vector"]), dtype="<f4").astype(np.float32)
                if vec.shape == (self.embedder.info.dimension,):
                    self._vectors[name] = vec

    def _index_entry(self, entry: KnowledgeEntry) -> None:
        self._entries[entry.name] = entry
        self._lexical.remove(entry.name)
        text = f"{entry.name.replace('/', ' ').replace('_', ' ')}\n{entry.content}"
        self._lexical.add(entry.name, text)
        top = Counter(tokenize(text)).most_common(20)
        self._meta[entry.name] = {
            "preview": entry.content[:200],
            "features": [t for t, _ in top],
            "updated_at": entry.updated_at,
        }

    def _save_index(self) -> None:
        entries: dict[str, Any] = {}
        for name, meta in sorted(self._meta.items()):
            item = dict(meta)
            vec = self._vectors.get(name)
            if vec is not None and self.embedder is not None:
                item["fingerprint"] = self.embedder.info.fingerprint
                item["vector"] = base64.b64encode(vec.astype("<f4").tobytes()).decode("ascii")
            entries[name] = item
        payload = json.dumps({"version": 1, "entries": entries}, ensure_ascii=False, indent=1)
        tmp = self.root / (INDEX_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(self.root / INDEX_FILE)

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
        await asyncio.to_thread(self._save_index)

    # -- API -------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> KnowledgeEntry:
        """The entry named ``name`` (full name or unique leaf).

        Raises:
            InvalidKnowledgeName, KnowledgeNotFound.
        """
        return self._entries[self.resolve(name)]

    def resolve(self, name: str) -> str:
        """Full name for ``name``: itself if it exists, else the only entry with that leaf.

        Raises:
            InvalidKnowledgeName: the name is not path-safe.
            KnowledgeNotFound: no entry, or several entries share that leaf (names listed).
        """
        canon = normalize_name(name)
        if canon in self._entries:
            return canon
        matches = sorted(n for n in self._entries if n.rpartition("/")[2] == canon)
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise KnowledgeNotFound(
                f"knowledge name {name!r} is ambiguous: {', '.join(matches)}; use the full name"
            )
        raise KnowledgeNotFound(f"no knowledge entry named {name!r}; see knowledge_list")

    async def create(self, name: str, content: str) -> KnowledgeEntry:
        """Create or replace the entry ``name`` (its old vector is dropped first).

        Raises:
            InvalidKnowledgeName: unsafe name, or it would nest under / over an existing entry.
            UsageError: empty content.
        """
        canon = normalize_name(name)
        if not content.strip():
            raise UsageError(f"knowledge entry {canon!r} needs non-empty content")
        for other in self._entries:
            if other != canon and (canon.startswith(other + "/") or other.startswith(canon + "/")):
                raise InvalidKnowledgeName(
                    f"knowledge name {canon!r} would nest with the existing entry {other!r}; "
                    "an entry cannot also be a category"
                )
        folder = self._dir(canon)
        self._vectors.pop(canon, None)
        await asyncio.to_thread(self._write_content, folder, content)
        entry = KnowledgeEntry(canon, content, (folder / CONTENT_FILE).stat().st_mtime)
        self._index_entry(entry)
        if self.embedder is not None:
            vec = (await self.embedder.embed_texts([f"{canon.replace('/', ' ')}\n{content}"]))[0]
            self._vectors[canon] = np.ascontiguousarray(vec, dtype=np.float32)
        await asyncio.to_thread(self._save_index)
        return entry

    @staticmethod
    def _write_content(folder: Path, content: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / (CONTENT_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(folder / CONTENT_FILE)

    def delete(self, name: str) -> str:
        """Delete an entry by full name or unique leaf; empty categories are removed.

        Returns the full name deleted. The knowledge root itself is never deleted.

        Raises:
            InvalidKnowledgeName, KnowledgeNotFound.
        """
        full = self.resolve(name)
        folder = self._dir(full)
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
        self._entries.pop(full, None)
        self._vectors.pop(full, None)
        self._meta.pop(full, None)
        self._lexical.remove(full)
        self._save_index()
        return full

    def list(self, category: str = "") -> list[KnowledgeEntry]:
        """Entries under ``category`` ("" = all), sorted by name.

        Raises:
            InvalidKnowledgeName: the category is not path-safe.
        """
        prefix = normalize_name(category) + "/" if category.strip() else ""
        return [e for n, e in sorted(self._entries.items()) if n.startswith(prefix)]

    def categories(self) -> builtins.list[str]:
        """Every category path that holds at least one entry."""
        cats: set[str] = set()
        for name in self._entries:
            parts = name.split("/")[:-1]
            cats.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        return sorted(cats)

    async def search(self, query: str, top_k: int = 5, *, category: str = "") -> builtins.list[KnowledgeHit]:
        """Fused dense + lexical search; ties broken by name."""
        if top_k <= 0 or not query.strip() or not self._entries:
            return []
        prefix = normalize_name(category) + "/" if category.strip() else ""
        names = sorted(n for n in self._entries if n.startswith(prefix))
        if not names:
            return []
        scores = dict.fromkeys(names, 0.0)
        lexical = dict(self._lexical.search(query, k=len(self._entries)))
        lex_vals = [lexical.get(n, 0.0) for n in names]
        peak = max(lex_vals)
        if peak > 0:
            for n, v in zip(names, lex_vals, strict=True):
                scores[n] += self.lexical_weight * v / peak
        if self.embedder is not None and self.dense_weight > 0 and self.embedder.info.serves(text_language(query)):
            await self._ensure_vectors()
            qvec = (await self.embedder.embed_texts([query]))[0]
            dense = np.array([max(0.0, float(self._vectors[n] @ qvec)) for n in names])
            if dense.max() > 0:
                for n, v in zip(names, dense / dense.max(), strict=True):
                    scores[n] += self.dense_weight * float(v)
        ranked = sorted((n for n in names if scores[n] > 0), key=lambda n: (-scores[n], n))
        return [KnowledgeHit(self._entries[n], round(scores[n], 6)) for n in ranked[:top_k]]

    # -- sync twins for the CLI ------------------------------------------------------------

    def create_sync(self, name: str, content: str) -> KnowledgeEntry:
        """:meth:`create` for synchronous callers (refuses to run inside an event loop)."""
        return run_sync(self.create(name, content), "KnowledgeBase.create")

    def search_sync(self, query: str, top_k: int = 5, *, category: str = "") -> builtins.list[KnowledgeHit]:
        """:meth:`search` for synchronous callers (refuses to run inside an event loop)."""
        return run_sync(self.search(query, top_k, category=category), "KnowledgeBase.search")
