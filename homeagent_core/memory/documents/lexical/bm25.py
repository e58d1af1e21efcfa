"""BM25 arithmetic shared by the lexical index and by scoring a few texts without one.

* :func:`word_weights` — a query's bucket weights: idf, shared among the grams of each Chinese word;
* :func:`length_factors` — BM25's per-document length norm and the tf=1 factor;
* :func:`score_texts` / :func:`score_terms` — the scores a lexical index holding just those texts
  would give (the working context ranks its few events with them);
* :func:`covered_words` — which of a query's words each of some documents holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.memory.documents.lexical.buckets import term_counts, typed_query_terms
from homeagent_core.memory.documents.lexical.forward import TF_MAX
from homeagent_core.memory.documents.lexical.scoring import accumulate

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_core.memory.documents.lexical.forward import ForwardLists

__all__ = ["WORD_NORM", "covered_words", "length_factors", "saturate", "score_terms", "score_texts", "word_weights"]

WORD_NORM = 0.5
"""How the grams of one Chinese query word share its weight (:func:`word_weights`)."""


def word_weights(
    idf: npt.NDArray[np.float64], words: npt.NDArray[np.int64], cjk: npt.NDArray[np.bool_], power: float
) -> npt.NDArray[np.float32]:
    """The query buckets' weights: idf, shared among the grams of each Chinese word.

    A Chinese word yields one gram per position and length (2-4), so a three-character name
    brings five or more grams and a two-character attribute ("年龄") three: summed plainly, the
    name outweighs every other word of the question, and a message that repeats the name
    outranks the one holding the asked attribute. Dividing each gram's idf by
    ``(grams of its word in the index) ** power`` keeps a word's weight growing with its length
    less than linearly (``power`` 0.5: its square root). Latin words keep plain idf: their
    grams are how partial forms match, and sharing hurt English recall (LoCoMo).
    """
    weights = idf.astype(np.float32)
    if power <= 0 or not len(words) or not cjk.any():
        return weights
    grams = np.bincount(words)[words].astype(np.float32)
    scale = np.where(cjk, grams**power, np.float32(1.0)).astype(np.float32)
    shared: npt.NDArray[np.float32] = (weights / scale).astype(np.float32)
    return shared


def saturate(counts: npt.NDArray[np.integer]) -> npt.NDArray[np.uint8]:
    """Term counts as the index keeps them: ``uint8``, saturating at :data:`TF_MAX`."""
    saturated: npt.NDArray[np.uint8] = np.minimum(counts, TF_MAX).astype(np.uint8)
    return saturated


def length_factors(
    dl: npt.NDArray[np.float32], total_len: float, count: int, k1: float, b: float
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Per slot of ``dl`` (gram counts): BM25's length norm ``k1·(1-b+b·dl/avgdl)`` and the tf=1 factor."""
    avgdl = total_len / count if total_len > 0 and count else 1.0
    norm = (k1 * (1.0 - b + (b / avgdl) * dl)).astype(np.float32)
    return norm, ((k1 + 1.0) / (1.0 + norm)).astype(np.float32)


def score_texts(query: str, texts: Sequence[str], *, k1: float = 1.2, b: float = 0.75) -> npt.NDArray[np.float32]:
    """BM25 of each of a few ``texts`` for ``query``: the scores a :class:`LexicalIndex` holding
    just them (slots 1..n, every posting scored) gives, without building one.

    An index is laid out for a store: its tables span every one of the ``2**20`` buckets (tens of
    MB to create and clear). Here the postings of the texts are matched against the query's
    buckets directly, so the cost follows the texts' lengths; the sums are the index's own
    (same postings in the same order through :func:`accumulate`).
    """
    return score_terms(query, [term_counts(text) for text in texts], k1=k1, b=b)


def score_terms(
    query: str,
    docs: Sequence[tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16], int]],
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> npt.NDArray[np.float32]:
    """:func:`score_texts` of texts already counted by :func:`term_counts` (a caller scoring
    the same texts again keeps their counts)."""
    n = len(docs)
    out = np.zeros(max(64, 1 << n.bit_length()), dtype=np.float32)  # sized as the index's slot arrays
    qb, qwords, qcjk = typed_query_terms(query)
    if not n or not len(qb):
        return out[1 : n + 1]
    buckets = np.concatenate([d[0] for d in docs]).astype(np.int64)
    slots = np.repeat(np.arange(1, n + 1, dtype=np.int32), [len(d[0]) for d in docs])
    tfs = saturate(np.concatenate([d[1] for d in docs]))
    at = np.minimum(np.searchsorted(qb, buckets), len(qb) - 1)
    hit = np.flatnonzero(qb[at] == buckets)
    if not len(hit):
        return out[1 : n + 1]
    df = np.bincount(at[hit], minlength=len(qb)).astype(np.float64)  # a text lists a bucket once
    present = df > 0  # as the index: a word's grams are those some text holds
    weights = np.zeros(len(qb), dtype=np.float32)
    weights[present] = word_weights(np.log1p((float(n) - df[present] + 0.5) / (df[present] + 0.5)),
                                    qwords[present], qcjk[present], WORD_NORM)
    idf = weights
    dl = np.zeros(len(out), dtype=np.float32)
    dl[1 : n + 1] = [d[2] for d in docs]
    factors = length_factors(dl, float(sum(d[2] for d in docs)), n, k1, b)
    accumulate(out, slots[hit], tfs[hit], idf[at[hit]], factors, k1)
    return out[1 : n + 1]


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
