"""BM25 arithmetic of a lexical query: the order buckets spend the budget in, the per-posting
sums, and the candidates' exact sums of the buckets over budget.

:class:`~homeagent_core.memory.documents.lexical.index.LexicalIndex` decides what is scored (which buckets in
full, which candidates exactly); this module does the scoring. Sums run in the compiled loops
(:mod:`homeagent_core.memory.documents.native`) when built, else in numpy, with the same scores bit for bit.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.lexical.bm25 import accumulate
from homeagent_core.memory.documents import native
from homeagent_core.memory.documents.query_pool import query_pool

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_core.memory.documents.lexical.forward import ForwardLists

__all__ = ["SPLIT_ENTRIES", "budget_order", "rescore_compiled", "rescore_numpy"]

SPLIT_ENTRIES = 1 << 16
"""Forward entries a rescoring reads before it splits them over two threads (a query on a large
store reads about 250k; handing half to another thread costs about as much as 10k entries)."""

Sums = tuple["npt.NDArray[np.float64]", "npt.NDArray[np.float64]", int]


def budget_order(lens: npt.NDArray[np.int64], words: npt.NDArray[np.int64], cover_words: bool) -> npt.NDArray[np.int64]:
    """The order in which buckets spend the posting budget: round robin over query words.

    Round one takes the rarest bucket of every word, round two the second rarest, and so on;
    within a round, rarer buckets first. Every query word thus weighs in the fully scored
    part, so it ranks documents by how many query *words* they share instead of by several
    grams of one rare word. Without ``cover_words``, simply rarest first.
    """
    if not cover_words:
        return np.argsort(lens, kind="stable")
    by_word = np.lexsort((lens, words))
    first = np.concatenate([[True], words[by_word][1:] != words[by_word][:-1]])
    starts = np.flatnonzero(first)
    rank = np.empty(len(lens), dtype=np.int64)
    rank[by_word] = np.arange(len(lens)) - np.repeat(starts, np.diff(np.append(starts, len(lens))))
    return np.lexsort((lens, rank))


def rescore_numpy(
    forward: ForwardLists,
    out: npt.NDArray[np.float32],
    cand: npt.NDArray[np.int64],
    buckets: npt.NDArray[np.int64],
    idf: npt.NDArray[np.float32],
    factors: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]],
    k1: float,
) -> None:
    """Add the contribution of ``buckets`` (weighted ``idf``) to the candidates ``cand``
    (ascending, unique), from their forward lists, in numpy."""
    owner, tfs, weights = forward.weigh(cand, buckets, idf)
    if len(owner):
        accumulate(out, cand[owner].astype(np.int32), tfs, weights, factors, k1, (owner, cand))


def rescore_compiled(
    kernel: native.NativeLibrary,
    forward: ForwardLists,
    out: npt.NDArray[np.float32],
    cand: npt.NDArray[np.int64],
    buckets: npt.NDArray[np.int64],
    idf: npt.NDArray[np.float32],
    factors: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]],
    k1: float,
) -> None:
    """:func:`rescore_numpy` in the compiled kernel, with the arithmetic of :func:`accumulate`
    for the same entries (so the same scores).

    Each candidate's sums are its own, so past :data:`SPLIT_ENTRIES` entries the candidates are
    cut in two halves of about equal entries and one half is summed on a :func:`query_pool`
    thread meanwhile (the kernel releases the GIL).
    """
    norm, unit = factors
    few = np.zeros(len(cand), dtype=np.float64)
    many = np.zeros(len(cand), dtype=np.float64)
    hits = 0
    with forward.weights_of(buckets, idf) as table:
        if table is None:
            return
        for which, terms, tfs, starts, lens in forward.lists(cand):
            ends = np.cumsum(lens)
            cut = int(np.searchsorted(ends, ends[-1] // 2, "right")) if ends[-1] >= SPLIT_ENTRIES else 0
            other: Future[Sums] | None = None
            if 0 < cut < len(which):
                other = query_pool().submit(
                    native.rescore_sums, kernel, terms, tfs, starts[cut:], lens[cut:], cand[which[cut:]],
                    table, norm, k1,
                )
            else:
                cut = len(which)
            try:
                f, m, n = native.rescore_sums(
                    kernel, terms, tfs, starts[:cut], lens[:cut], cand[which[:cut]], table, norm, k1
                )
            finally:
                done = other.result() if other is not None else None  # never leave it reading the table
            few[which[:cut]], many[which[:cut]] = f, m
            hits += n
            if done is not None:
                few[which[cut:]], many[which[cut:]] = done[0], done[1]
                hits += done[2]
    if not hits:
        return
    if hits < len(out) // 2:
        out[cand] += few.astype(np.float32)
    else:
        out[cand] += (many * unit.take(cand)).astype(np.float32)
