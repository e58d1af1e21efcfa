"""The document tier's interface: what every document store backend implements.

:class:`BaseDocumentStore` is the one type the rest of memory sees (``open_document_store``
returns it). The logic both backends share lives here once: argument checks, embedding of
documents and queries, the choice of the dense path, consume-on-read, cold-document cut-offs,
re-embedding batches, and running every blocking call off the event loop.

A backend (the embedded SQLite :class:`~homeagent_core.memory.documents.store.DocumentStore`, the
PostgreSQL :class:`~homeagent_core.memory.stores.postgresql.documents.PgDocumentStore`) implements the plain
(synchronous, thread-safe, possibly blocking) methods marked abstract below. The ``async``
methods hand them to the ``documents`` worker pool (:mod:`homeagent_core.workers`, 4 threads
shared by every store of the process, counted in ``homeagent doctor``): ranking a query,
reading its documents, waiting for the store lock that a flush or an index rebuild holds,
database round trips. The event loop only awaits them.
"""

from __future__ import annotations

import functools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np

from homeagent_core.memory.documents.model import DocHit, Document
from homeagent_core.workers import run_blocking
from homeagent_sdk.embeddings import text_language
from homeagent_sdk.errors import UsageError

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = ["COVERAGE_WEIGHT", "BaseDocumentStore", "off_loop"]

P = ParamSpec("P")
T = TypeVar("T")

async def off_loop(fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """Run ``fn(*args, **kwargs)`` in the ``documents`` worker pool and await its result.

    The pool (:mod:`homeagent_core.workers`) is separate from
    :func:`~homeagent_core.memory.documents.query_pool.query_pool`, which a query running there hands its
    dense leg to: a query never waits for a thread its own pool holds.
    """
    return await run_blocking("documents", functools.partial(fn, *args, **kwargs))


COVERAGE_WEIGHT = 0.6
"""Default weight of question words a document adds to the chosen ones (measured, docs/BENCHMARKS.md)."""


class BaseDocumentStore(ABC):
    """A durable document store with fused dense + lexical search (one tenant, one space).

    Args:
        embedder: the active embedding space; ``None`` = lexical search only.
        dense_weight / lexical_weight: fusion weights of the two paths.
        neighbour_weight: share of an adjacent document's score a document receives.
        neighbour_window: seconds within which same-source documents count as adjacent.

    Raises:
        UsageError: a weight or the window is negative.

    The ``async`` methods never block the event loop. The plain ones may block (a lock, a
    database); call them from a worker thread in async code.
    """

    def __init__(
        self,
        embedder: EmbeddingProvider | None,
        *,
        dense_weight: float,
        lexical_weight: float,
        neighbour_weight: float,
        neighbour_window: float,
    ) -> None:
        for name, value in (
            ("dense_weight", dense_weight),
            ("lexical_weight", lexical_weight),
            ("neighbour_weight", neighbour_weight),
            ("neighbour_window", neighbour_window),
        ):
            if value < 0:
                raise UsageError(f"DocumentStore {name} must be >= 0, got {value}")
        self.embedder = embedder
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self.neighbour_weight = neighbour_weight
        self.neighbour_window = neighbour_window
        #: How much a document's new question words count when the best are chosen
        #: (:func:`homeagent_core.memory.documents.ranking.cover_words`); 0 = plain score order.
        self.coverage_weight = COVERAGE_WEIGHT
        self._fingerprint = embedder.info.fingerprint if embedder else ""
        self._dim = embedder.info.dimension if embedder else 0
        self._stale = 0

    # -- what a backend implements ------------------------------------------------------------

    @abstractmethod
    def __len__(self) -> int:
        """Documents stored (answered from memory, never blocks)."""

    @abstractmethod
    def __contains__(self, doc_id: object) -> bool:
        """Whether a document with this id is stored (may block)."""

    @abstractmethod
    def dense_rows(self) -> int:
        """Documents with a vector in the active space (answered from memory)."""

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """Counts for introspection: ``documents``, ``dense_rows``, ``stale_vectors``,
        ``fingerprint``, ``path``."""

    @abstractmethod
    def _search(self, text: str, top_k: int, qvec: npt.NDArray[np.float32] | None, touch: bool) -> list[DocHit]:
        """Rank (``qvec`` checked against the space) and read the hits, counting them when ``touch``."""

    @abstractmethod
    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete documents by id; returns how many existed. Durable on return."""

    @abstractmethod
    def touch(self, doc_ids: Iterable[str], *, now: float | None = None) -> int:
        """Count one read of each document (last access, access count); durable on return."""

    @abstractmethod
    def get(self, doc_id: str) -> Document | None:
        """The document with this id, or ``None``."""

    @abstractmethod
    def all(self, *, limit: int | None = None) -> list[Document]:
        """Documents in time order (oldest first)."""

    @abstractmethod
    def archived_event_ids(self, event_ids: Iterable[str]) -> set[str]:
        """Which of these context event ids were already archived here (``meta.event_id``)."""

    @abstractmethod
    def flush(self) -> None:
        """Make pending bookkeeping durable (read counters, caches, change logs)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the store; further calls raise :class:`UsageError`."""

    @abstractmethod
    def _check_open(self) -> None:
        """Raise :class:`UsageError` when the store is closed."""

    @abstractmethod
    def _taken_ids(self, ids: list[str]) -> list[str]:
        """Which of ``ids`` are already stored."""

    @abstractmethod
    def _insert(self, docs: list[Document], vectors: npt.NDArray[np.float32] | None) -> None:
        """Store checked documents (and their vectors in the active space) in one transaction."""

    @abstractmethod
    def _cold(self, cutoff: float, max_reads: int, limit: int) -> list[Document]:
        """Documents last read at or before ``cutoff`` and read at most ``max_reads`` times."""

    @abstractmethod
    def _stale_rows(self, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` ``(slot, text)`` of documents without a vector in the active space."""

    @abstractmethod
    def _write_vectors(self, slots: list[int], vectors: npt.NDArray[np.float32]) -> None:
        """Store the active space's vectors of these slots."""

    # -- shared behaviour ---------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        """The active embedding space ("" when lexical only)."""
        return self._fingerprint

    @property
    def stale_count(self) -> int:
        """Documents whose vector is missing or from another embedding space."""
        return self._stale

    def dense_serves(self, text: str) -> bool:
        """True when the embedding model understands ``text``'s language, so the dense path
        may be fused; otherwise the query is answered by the lexical path alone."""
        return self.embedder is not None and self.embedder.info.serves(text_language(text))

    async def add(
        self,
        content: str,
        *,
        title: str = "",
        source: str = "",
        created_at: float | None = None,
        media_digests: Iterable[str] = (),
        meta: dict[str, Any] | None = None,
    ) -> Document:
        """Store one document; it is durable when this returns.

        Raises:
            UsageError: ``content`` and ``title`` are both empty.
        """
        doc = Document(
            content=content, title=title, source=source, media_digests=list(media_digests), meta=dict(meta or {})
        )
        if created_at is not None:
            doc.created_at = float(created_at)
        (stored,) = await self.add_many([doc])
        return stored

    async def add_many(self, docs: Sequence[Document], *, batch_size: int = 64) -> list[Document]:
        """Store documents in one transaction (embedding them first); durable on return.

        Raises:
            UsageError: a document is empty or its id already exists.
        """
        self._check_open()
        seen: set[str] = set()
        for doc in docs:
            if not doc.content.strip() and not doc.title.strip():
                raise UsageError("a document needs non-empty content or title")
            if doc.id in seen:
                raise UsageError(f"document id {doc.id!r} already exists")
            seen.add(doc.id)
        if not docs:
            return []
        taken = await off_loop(self._taken_ids, sorted(seen))
        if taken:
            raise UsageError(f"document id {taken[0]!r} already exists")
        vectors = None
        if self.embedder is not None:
            parts = [
                await self.embedder.embed_texts([d.text for d in docs[i : i + batch_size]])
                for i in range(0, len(docs), batch_size)
            ]
            vectors = np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
        await off_loop(self._insert, list(docs), vectors)
        return list(docs)

    def search(
        self,
        text: str,
        top_k: int = 3,
        *,
        query_vector: npt.NDArray[np.float32] | None = None,
        touch: bool = False,
    ) -> list[DocHit]:
        """Rank with an already computed query vector (or lexical only) and read the hits.

        ``touch`` counts the read (last access, access count). Blocking (it waits for the store
        lock and reads the database): :meth:`query` is the async entry point.

        Raises:
            UsageError: the store is closed, or ``query_vector`` is not a vector of its space.
        """
        self._check_open()
        if query_vector is not None and self._dim and query_vector.shape != (self._dim,):
            raise UsageError(f"query vector has shape {query_vector.shape}; this store's space is {self._dim}-d")
        return self._search(text, top_k, query_vector, touch)

    async def query(self, text: str, top_k: int = 3, *, touch: bool = True) -> list[DocHit]:
        """The ``top_k`` documents most related to ``text`` (fused dense + lexical search).

        ``touch`` counts the read (access count, last access) for cold-document detection.
        Documents are not removed; see :meth:`consume`. Only the embedding is awaited on the
        event loop; ranking and reading the hits run on the documents worker pool.
        """
        self._check_open()
        if top_k <= 0 or not text.strip() or not len(self):
            return []
        qvec = None
        if self.embedder is not None and self.dense_weight > 0 and self.dense_rows() and self.dense_serves(text):
            qvec = (await self.embedder.embed_texts([text]))[0]
        return await off_loop(self.search, text, top_k, query_vector=qvec, touch=touch)

    async def consume(self, text: str, top_k: int = 3) -> list[DocHit]:
        """Search, then delete every hit from the store (consume-on-read) and return them.

        Nothing else holds the hits afterwards: a caller that moves them elsewhere must make
        that copy durable first and then :meth:`delete` them (see ``doc_query``).
        """
        hits = await self.query(text, top_k, touch=True)
        if hits:
            await off_loop(self.delete, [h.document.id for h in hits])
        return hits

    def find_cold(
        self, *, older_than: float = 72 * 3600.0, max_reads: int = 2, now: float | None = None, limit: int = 100
    ) -> list[Document]:
        """Documents not read for ``older_than`` seconds and read at most ``max_reads`` times."""
        cutoff = (time.time() if now is None else now) - older_than
        self._check_open()
        return self._cold(cutoff, max_reads, limit)

    async def reembed_stale(self, *, batch_size: int = 64) -> int:
        """Embed documents whose vector is missing or from another space; returns how many."""
        if self.embedder is None:
            return 0
        done = 0
        while True:
            rows = await off_loop(self._stale_rows, batch_size)
            if not rows:
                return done
            vectors = np.ascontiguousarray(await self.embedder.embed_texts([t for _, t in rows]), np.float32)
            await off_loop(self._write_vectors, [r[0] for r in rows], vectors)
            done += len(rows)

    async def aclose(self) -> None:
        """:meth:`close` off the event loop."""
        await off_loop(self.close)
