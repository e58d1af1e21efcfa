"""Which of a query's words each of some documents holds, read from the index's forward lists.

Ranking uses it to pick results that together cover the question's words
(:func:`~homeagent_core.memory.documents.ranking.cover_words`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.lexical.buckets import typed_query_terms

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_core.memory.documents.lexical.forward import ForwardLists

__all__ = ["covered_words"]


def covered_words(
    query: str,
    slots: npt.NDArray[np.int64],
    df: npt.NDArray[np.int32],
    alive: npt.NDArray[np.bool_],
    forward: ForwardLists,
) -> npt.NDArray[np.bool_]:
    """Which words of ``query`` each of ``slots`` holds: a ``len(slots) × words`` table.

    A document holds a word when it holds at least half of that word's grams (its grams
    run into the next word, so a word said in other company still counts). Words no
    document holds are left out of the table's columns; unindexed slots hold nothing.
    """
    buckets, words, _ = typed_query_terms(query)
    present = df[buckets] > 0 if len(buckets) else np.zeros(0, dtype=bool)
    buckets, words = buckets[present], words[present]
    if not len(buckets) or not len(slots):
        return np.zeros((len(slots), 0), dtype=bool)
    _, column = np.unique(words, return_inverse=True)
    n_words = int(column.max()) + 1
    grams = np.bincount(column, minlength=n_words)
    order = np.argsort(slots, kind="stable")
    cand = slots[order].astype(np.int64)
    live = (cand > 0) & (cand < len(alive))
    live[live] = alive[cand[live]]
    held = np.zeros((len(slots), n_words), dtype=np.int64)
    if live.any():
        tags = np.arange(1, len(buckets) + 1, dtype=np.float32)  # weight = 1 + the bucket's index
        which, _, weight = forward.weigh(cand[live], buckets, tags)
        rows = order[np.flatnonzero(live)][which]
        np.add.at(held, (rows, column[weight.astype(np.int64) - 1]), 1)
    covered: npt.NDArray[np.bool_] = 2 * held >= grams
    covered &= held > 0
    return covered
