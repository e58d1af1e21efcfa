"""The in-memory search mirror of a document store held in a database server.

The same ranking as the SQLite :class:`~homeagent_core.memory.documents.DocumentStore`: an
exact dense scan of the active space's vectors and the character n-gram BM25 index
(:class:`~homeagent_core.memory.lexical.LexicalIndex`), each normalised by its own maximum and
weighted, then each document borrows a share of its same-source neighbours' scores
(:class:`~homeagent_core.memory.time_order.TimeOrder`). Recall therefore equals the embedded
store's on the same documents. Slots must arrive in ascending order (the database hands them out
under a per-tenant lock, and followers apply changes in that order).

Not thread-safe: the owning store serialises calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.memory.doc_index import SlotTable
from homeagent_core.memory.doc_ranking import best_fused
from homeagent_core.memory.lexical import LexicalIndex
from homeagent_core.memory.time_order import TimeOrder
from homeagent_core.memory.top_k import top_indices

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["DocMirror"]

_DENSE_CANDIDATES = 64  # the dense path's best also get exact lexical scores


class DocMirror:
    """Per-slot numbers (the embedded store's :class:`~homeagent_core.memory.doc_index.SlotTable`),
    dense rows and the lexical index of one tenant's documents."""

    def __init__(self, dim: int, window: float) -> None:
        self.dim = dim
        self.table = SlotTable.empty()
        self.top = 0
        self.row_of = np.full(self.table.capacity, -1, dtype=np.int64)
        self.rows = np.zeros((64, max(dim, 1)), dtype=np.float32)
        self.row_slot = np.zeros(64, dtype=np.int64)
        self.n = 0
        self.lex = LexicalIndex()
        self.time = TimeOrder(window)

    @property
    def count(self) -> int:
        """Documents indexed."""
        return self.table.count

    @property
    def alive(self) -> npt.NDArray[np.bool_]:
        """Per slot: a document is indexed there."""
        return self.table.alive

    @property
    def created(self) -> npt.NDArray[np.float64]:
        return self.table.created

    @property
    def source(self) -> npt.NDArray[np.int32]:
        return self.table.source

    def add(
        self,
        slot: int,
        created: float,
        source: str,
        terms: tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16], int],
        vector: npt.NDArray[np.float32] | None,
    ) -> None:
        """Index one document (``slot`` above every slot added before)."""
        self.table.register(slot, created, source)
        if len(self.row_of) < self.table.capacity:
            grow = self.table.capacity - len(self.row_of)
            self.row_of = np.concatenate([self.row_of, np.full(grow, -1, dtype=np.int64)])
        self.top = slot
        self.lex.add_terms(slot, *terms)
        if vector is not None:
            self.set_vector(slot, vector)
        self.time.append(np.asarray([slot], dtype=np.int64), self.created, self.source)

    def set_vector(self, slot: int, vector: npt.NDArray[np.float32]) -> None:
        """Give ``slot`` this dense row (replacing its old one)."""
        self.drop_vector(slot)
        if self.n == len(self.rows):
            self.rows = np.concatenate([self.rows, np.zeros_like(self.rows)])
            self.row_slot = np.concatenate([self.row_slot, np.zeros_like(self.row_slot)])
        self.rows[self.n] = vector
        self.row_slot[self.n] = slot
        self.row_of[slot] = self.n
        self.n += 1

    def drop_vector(self, slot: int) -> None:
        row = int(self.row_of[slot])
        if row < 0:
            return
        self.row_of[slot] = -1
        last = self.n - 1
        if row != last:
            moved = int(self.row_slot[last])
            self.rows[row] = self.rows[last]
            self.row_slot[row] = moved
            self.row_of[moved] = row
        self.n = last

    def remove(self, slot: int, buckets: npt.NDArray[np.uint32]) -> None:
        """Forget one document (its stored term buckets undo its postings)."""
        if slot >= len(self.alive) or not self.alive[slot]:
            return
        self.table.alive[slot] = False
        self.table.count -= 1
        self.lex.remove(slot, buckets)
        self.drop_vector(slot)
        self.time.invalidate()

    def rank(
        self,
        text: str,
        top_k: int,
        qvec: npt.NDArray[np.float32] | None,
        *,
        dense_weight: float,
        lexical_weight: float,
        neighbour_weight: float,
    ) -> list[tuple[int, float]]:
        """The ``top_k`` slots and fused scores for ``text`` (and its vector, if any)."""
        cap = len(self.alive)
        total = np.zeros(cap, dtype=np.float32)
        expand = None
        if neighbour_weight > 0:
            self.time.ensure(self.alive, self.created, self.source)
            expand = self.time.neighbours
        best_dense: npt.NDArray[np.int64] | None = None
        if qvec is not None and self.n and dense_weight > 0:
            dense = self.rows[: self.n] @ qvec.astype(np.float32)
            peak = float(dense.max())
            if peak > 0:
                total[self.row_slot[: self.n]] += (dense_weight / peak) * np.maximum(dense, 0.0)
                k = min(_DENSE_CANDIDATES, len(dense))
                rows = top_indices(dense, k)
                best_dense = self.row_slot[: self.n][rows[dense[rows] > 0]]
        if lexical_weight > 0:
            lex = self.lex.scores(text, candidates=best_dense, expand=expand)
            peak = float(lex.max()) if len(lex) else 0.0
            if peak > 0:
                total[: len(lex)] += (lexical_weight / peak) * lex[:cap]
        return best_fused(total, self.alive, min(top_k, self.count), self.time, neighbour_weight)
