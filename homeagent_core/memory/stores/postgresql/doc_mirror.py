"""The in-memory search mirror of a document store held in a database server.

The same structures and the same ranking as the SQLite
:class:`~homeagent_core.memory.documents.store.DocumentStore`: the per-slot
:class:`~homeagent_core.memory.documents.index.SlotTable`, the active space's vectors in
:class:`~homeagent_core.memory.documents.vectors.DenseRows` (in memory: no vector file), the character
n-gram BM25 index (:class:`~homeagent_core.memory.documents.lexical.index.LexicalIndex`) and the neighbour
order (:class:`~homeagent_core.memory.documents.time_order.TimeOrder`), ranked by
:func:`homeagent_core.memory.documents.ranking.rank`. Recall therefore equals the embedded store's
on the same documents. Slots must arrive in ascending order (the database hands them out under
a per-tenant lock, and followers apply changes in that order).

Not thread-safe: the owning store serialises calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.memory.documents import ranking as doc_ranking
from homeagent_core.memory.documents.index import SlotTable
from homeagent_core.memory.documents.lexical.index import LexicalIndex
from homeagent_core.memory.documents.time_order import TimeOrder
from homeagent_core.memory.documents.vectors import DenseRows

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_sdk.visibility import Audience

__all__ = ["DocMirror"]


class DocMirror:
    """Per-slot numbers, dense rows and the lexical index of one tenant's documents."""

    def __init__(self, dim: int, window: float) -> None:
        self.dim = dim
        self.table = SlotTable.empty()
        self.top = 0
        self.dense = DenseRows(dim, self.table.capacity)
        self.lex = LexicalIndex()
        self.time = TimeOrder(window)
        self._pending: dict[int, npt.NDArray[np.float32]] = {}
        """Vectors of slots added since the last read of the dense rows, appended in one batch."""

    @property
    def count(self) -> int:
        """Documents indexed."""
        return self.table.count

    @property
    def alive(self) -> npt.NDArray[np.bool_]:
        """Per slot: a document is indexed there."""
        return self.table.alive

    @property
    def n(self) -> int:
        """Documents with a vector in the active space."""
        return len(self.dense) + len(self._pending)

    def has_vector(self, slot: int) -> bool:
        """Whether ``slot`` has a vector in the active space."""
        return slot in self._pending or (slot < len(self.dense.row_of) and self.dense.row_of[slot] >= 0)

    def _settle(self) -> None:
        """Append the vectors added since the last read, in one batch (a load adds a store's worth)."""
        if not self._pending:
            return
        self.dense.grow(self.table.capacity)
        slots = np.fromiter(self._pending, dtype=np.int64, count=len(self._pending))
        self.dense.append(slots, np.stack(list(self._pending.values())).astype(np.float32, copy=False))
        self._pending.clear()

    def add(
        self,
        slot: int,
        created: float,
        source: str,
        terms: tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16], int],
        vector: npt.NDArray[np.float32] | None,
        person: str = "",
        visibility: str = "private",
    ) -> None:
        """Index one document (``slot`` above every slot added before)."""
        self.table.register(slot, created, source, person, visibility)
        self.top = slot
        self.lex.add_terms(slot, *terms)
        if vector is not None:
            self._pending[slot] = np.asarray(vector, dtype=np.float32)
        self.time.append(np.asarray([slot], dtype=np.int64), self.table.created, self.table.source)

    def set_vector(self, slot: int, vector: npt.NDArray[np.float32]) -> None:
        """Give ``slot`` this dense row (replacing its old one)."""
        self.drop_vector(slot)
        self._pending[slot] = np.asarray(vector, dtype=np.float32)

    def drop_vector(self, slot: int) -> None:
        self._settle()
        if slot < len(self.dense.row_of):
            self.dense.drop(slot)

    def remove(self, slot: int, buckets: npt.NDArray[np.uint32]) -> None:
        """Forget one document (its stored term buckets undo its postings)."""
        if slot >= len(self.alive) or not self.alive[slot]:
            return
        self.table.alive[slot] = False
        self.table.count -= 1
        self.lex.remove(slot, buckets)
        self.drop_vector(slot)
        self.time.invalidate()

    def set_mark(self, slot: int, person: str, visibility: str) -> None:
        """Record a document's new visibility (the owner's share/unshare)."""
        if slot < len(self.alive) and self.alive[slot]:
            self.table.set_mark(slot, person, visibility)

    def rank(
        self, text: str, top_k: int, qvec: npt.NDArray[np.float32] | None, *, weights: doc_ranking.FusionWeights,
        audience: Audience,
    ) -> list[tuple[int, float]]:
        """The ``top_k`` slots ``audience`` may see and their fused scores for ``text`` (and its vector, if any)."""
        self._settle()
        self.dense.grow(self.table.capacity)
        visible = None if audience.everything else self.table.visible(audience)
        return doc_ranking.rank(
            text, top_k, qvec, weights=weights, table=self.table, dense=self.dense, lex=self.lex, order=self.time,
            visible=visible,
        )
