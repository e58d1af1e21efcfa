"""Documents in time order, and which consecutive ones are turns of one conversation.

The document store lets each document borrow a share of its neighbours' search scores:
documents of the same source written within a window of each other are adjacent turns, and
the turn next to a strong match is often the answer. This module keeps that order (a slot
array sorted by creation time), the links between consecutive documents, and each slot's
position, so that smoothing a score vector is three vectorised passes and the neighbours of a
few slots are two gathers. New documents usually come last in time; they are appended
without re-sorting. Anything else (a delete, an archived event with an old timestamp) marks
the order stale and the next use sorts again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.memory.documents.top_k import top_indices

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["TimeOrder"]


class TimeOrder:
    """Time order of live slots with same-source links within ``window`` seconds.

    Not thread-safe: the document store calls it under its lock. ``created``/``source``/
    ``alive`` are the store's per-slot arrays, passed in on each call.
    """

    def __init__(self, window: float) -> None:
        self.window = window
        self._order: npt.NDArray[np.int64] | None = None
        self._link = np.zeros(0, dtype=np.float32)
        self._pos = np.zeros(0, dtype=np.int64)

    def invalidate(self) -> None:
        """Forget the order; the next :meth:`ensure` sorts again."""
        self._order = None

    def append(
        self,
        slots: npt.NDArray[np.int64],
        created: npt.NDArray[np.float64],
        source: npt.NDArray[np.int32],
    ) -> None:
        """Add new slots: appended if they come after every ordered slot, else invalidate."""
        if self._order is None:
            return
        new = slots[np.lexsort((slots, created[slots]))]
        if len(self._order) and (
            (created[new[0]], new[0]) < (created[self._order[-1]], self._order[-1])
        ):
            self._order = None
            return
        start = len(self._order)
        order = np.concatenate([self._order, new])
        lo = max(start - 1, 0)
        self._link = np.concatenate([self._link[:lo], self._links(order[lo:], created, source)])
        self._order = order
        if int(order[start:].max(initial=-1)) >= len(self._pos):
            pos = np.full(max(2 * len(self._pos), int(order.max()) + 1), -1, dtype=np.int64)
            pos[: len(self._pos)] = self._pos
            self._pos = pos
        self._pos[new] = np.arange(start, len(order), dtype=np.int64)

    def _links(
        self,
        order: npt.NDArray[np.int64],
        created: npt.NDArray[np.float64],
        source: npt.NDArray[np.int32],
    ) -> npt.NDArray[np.float32]:
        same = source[order[1:]] == source[order[:-1]]
        close = np.diff(created[order]) <= self.window
        links: npt.NDArray[np.float32] = (same & close).astype(np.float32)
        return links

    def ensure(
        self,
        alive: npt.NDArray[np.bool_],
        created: npt.NDArray[np.float64],
        source: npt.NDArray[np.int32],
    ) -> None:
        """Sort the live slots by (creation time, slot) unless the order is current."""
        if self._order is not None:
            return
        slots = np.flatnonzero(alive)
        order = slots[np.lexsort((slots, created[slots]))]
        self._link = self._links(order, created, source)
        self._pos = np.full(len(alive), -1, dtype=np.int64)
        self._pos[order] = np.arange(len(order), dtype=np.int64)
        self._order = order

    def smooth(self, total: npt.NDArray[np.float32], weight: float) -> npt.NDArray[np.float32]:
        """``total`` plus ``weight`` times the scores of each slot's linked neighbours."""
        order = self._order
        if order is None or len(order) < 2:
            return total
        seq = total[order]
        share = np.zeros_like(seq)
        share[:-1] += self._link * seq[1:]
        share[1:] += self._link * seq[:-1]
        out = total.copy()
        out[order] = seq + weight * share
        return out

    def smoothed_at(
        self, total: npt.NDArray[np.float32], slots: npt.NDArray[np.int64], weight: float
    ) -> npt.NDArray[np.float32]:
        """What :meth:`smooth` would give ``slots`` (the same arithmetic), for those slots only."""
        own = total[slots]
        order = self._order
        if order is None or len(order) < 2 or not len(slots):
            return own.copy()
        inside = slots < len(self._pos)
        pos = np.full(len(slots), -1, dtype=np.int64)
        pos[inside] = self._pos[slots[inside]]
        last = len(order) - 1
        share = np.zeros(len(slots), dtype=total.dtype)
        after = np.flatnonzero((pos >= 0) & (pos < last))
        share[after] += self._link[pos[after]] * total[order[pos[after] + 1]]
        before = np.flatnonzero(pos > 0)
        share[before] += self._link[pos[before] - 1] * total[order[pos[before] - 1]]
        out: npt.NDArray[np.float32] = own + weight * share
        return out

    def top_smoothed(
        self,
        total: npt.NDArray[np.float32],
        weight: float,
        k: int,
        pool: int,
        *,
        chosen: tuple[npt.NDArray[np.int64], float] | None = None,
        mask: npt.NDArray[np.bool_] | None = None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
        """The ``k`` best slots of :meth:`smooth` (``total``, ``weight``) and their scores, or ``None``.

        Smoothing a million scores means gathering and scattering all of them, yet only the
        best few are wanted. A slot outside the ``pool`` best of ``total`` and not linked to one
        of them scores at most ``t·(1 + 2·weight)`` after smoothing (``t`` the ``pool``-th best
        score: its own score and both neighbours' are at most ``t``; scores are not negative).
        So the smoothed scores of the pool and its neighbours are computed alone, and when the
        ``k``-th best of them is above that bound it is the answer; otherwise ``None`` tells
        the caller to smooth everything. Every slot tied with the ``k``-th best is then among
        them, so ties go to the lower slot, best first.

        ``chosen`` = (pool slots, ``t``) when the caller selected the pool already; scores of
        pool slots may have changed since (outside the pool none may), ``t`` is the pool's
        lowest score as selected. ``mask`` (per slot) keeps only those slots among the answers
        (a reader's visible documents; the others score 0 in ``total``).
        """
        if k <= 0 or pool >= len(total) or weight < 0:
            return None
        if chosen is None:
            cand = top_indices(total, pool)
            floor = float(total[cand].min())
        else:
            cand, floor = chosen
        bound = floor * (1.0 + 2.0 * weight)
        ext = np.sort(np.concatenate([cand, self.neighbours(cand)]))
        ext = ext[np.concatenate([[True], ext[1:] != ext[:-1]])] if len(ext) else ext  # np.unique hashes: slower here
        if mask is not None and len(ext):
            ext = ext[mask[ext]]
        if len(ext) < k:
            return None
        scores = self.smoothed_at(total, ext, weight)
        best = np.lexsort((ext, -scores))[:k]
        if float(scores[best[-1]]) <= bound:
            return None
        return ext[best], scores[best]

    def neighbours(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The linked neighbours of ``slots`` (not including ``slots`` themselves)."""
        order = self._order
        if order is None or len(order) < 2 or not len(slots):
            return np.zeros(0, dtype=np.int64)
        slots = slots[slots < len(self._pos)]
        pos = self._pos[slots]
        pos = pos[pos >= 0]
        before = pos[pos > 0]
        before = before[self._link[before - 1] > 0] - 1
        after = pos[pos < len(order) - 1]
        after = after[self._link[after] > 0] + 1
        found: npt.NDArray[np.int64] = order[np.concatenate([before, after])]
        return found
