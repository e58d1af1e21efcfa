"""Vectors of graph rows: entity-name vectors and media-block vectors, kept in one space.

Every stored vector carries the fingerprint of its embedding space (``vec_model``). When the
active space changes, :func:`reembed_stale` recomputes the rows of other spaces in batches,
writing each batch back before the next, so an interrupted run resumes where it stopped. The
store's write path refreshes the mirror's vector indexes like any other column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from homeagent_core.workers import run_blocking
from homeagent_sdk.errors import ModalityUnsupported

if TYPE_CHECKING:
    from homeagent_core.memory.graph.cache import GraphCache
    from homeagent_core.memory.graph.model import Changes
    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = ["VectorRows", "embed_entities", "reembed_stale"]

T = TypeVar("T")


class VectorRows(Protocol):
    """What re-embedding uses of the graph store (``GraphStore``): its SQL and its mirror."""

    @property
    def cache(self) -> GraphCache: ...

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` for a read."""
        ...

    def write(self, fn: Callable[[sqlite3.Connection, Changes], T]) -> T:
        """Run ``fn(conn, changes)`` in one transaction, then refresh the touched rows."""
        ...

_TABLES = {"entities": "id, name", "memory_blocks": "id, digest, mime"}


def _stale(store: VectorRows, table: str, fingerprint: str, after: int, limit: int) -> list[tuple[Any, ...]]:
    cols = _TABLES[table]
    return store.read(
        lambda conn: conn.execute(
            f"SELECT {cols} FROM {table} WHERE (vector IS NULL OR vec_model != ?) AND id > ? ORDER BY id LIMIT ?",
            (fingerprint, after, limit),
        ).fetchall()
    )


def _write_vectors(store: VectorRows, table: str, rows: list[tuple[int, bytes]], fingerprint: str) -> None:
    if table not in _TABLES:
        raise ValueError(f"no vectors in table {table!r}")

    def run(conn: sqlite3.Connection, ch: Changes) -> None:
        conn.executemany(
            f"UPDATE {table} SET vector = ?, vec_model = ? WHERE id = ?",
            [(blob, fingerprint, rid) for rid, blob in rows],
        )
        (ch.entities if table == "entities" else ch.blocks).update(r for r, _ in rows)

    store.write(run)


async def embed_entities(store: VectorRows, ids: Iterable[int], provider: EmbeddingProvider) -> int:
    """Embed the names of entities ``ids`` whose vector is missing or of another space."""
    fp = provider.info.fingerprint
    todo: list[tuple[int, str]] = []
    with store.cache.lock:
        for eid in ids:
            row = store.cache.entities.get(eid)
            if row is not None and (row.vec_model != fp or not row.vector):
                todo.append((eid, row.name))
    if not todo:
        return 0
    matrix = await provider.embed_texts([name for _, name in todo])
    vectors = [(eid, matrix[i].tobytes()) for i, (eid, _) in enumerate(todo)]
    await run_blocking("memory", _write_vectors, store, "entities", vectors, fp)
    return len(todo)


async def reembed_stale(
    store: VectorRows,
    provider: EmbeddingProvider,
    *,
    batch_size: int = 64,
    load_media: Callable[[str], tuple[bytes, str] | None] | None = None,
) -> dict[str, int]:
    """Recompute vectors whose ``vec_model`` is empty or another space's, in batches.

    Media blocks are embedded from ``load_media(digest) -> (bytes, mime)`` when the provider
    embeds images; otherwise they are counted as skipped, never given another model's vector.
    Returns ``{"entities": n, "blocks": n, "blocks_skipped": n}``.
    """
    from homeagent_sdk.embeddings import EmbedInput

    fp = provider.info.fingerprint
    counts = {"entities": 0, "blocks": 0, "blocks_skipped": 0}
    after = 0
    while rows := await run_blocking("memory", _stale, store, "entities", fp, after, batch_size):
        matrix = await provider.embed_texts([name for _, name in rows])
        vectors = [(rid, matrix[i].tobytes()) for i, (rid, _) in enumerate(rows)]
        await run_blocking("memory", _write_vectors, store, "entities", vectors, fp)
        counts["entities"] += len(rows)
        after = rows[-1][0]
    after = 0
    while rows := await run_blocking("memory", _stale, store, "memory_blocks", fp, after, batch_size):
        after = rows[-1][0]
        inputs, ids = [], []
        for rid, digest, _mime in rows:
            loaded = await run_blocking("memory", load_media, digest) if load_media is not None else None
            if loaded is None:
                counts["blocks_skipped"] += 1
                continue
            inputs.append(EmbedInput(data=loaded[0], mime=loaded[1]))
            ids.append(rid)
        if not inputs:
            continue
        try:
            matrix = await provider.embed(inputs)
        except ModalityUnsupported:
            counts["blocks_skipped"] += len(inputs)
            continue
        vectors = [(rid, matrix[i].tobytes()) for i, rid in enumerate(ids)]
        await run_blocking("memory", _write_vectors, store, "memory_blocks", vectors, fp)
        counts["blocks"] += len(ids)
    return counts
