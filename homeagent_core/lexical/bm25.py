"""BM25 arithmetic of the lexical scheme, shared by every index over its terms.

The document store's on-disk index (:mod:`homeagent_core.memory.documents.lexical.index`), the
knowledge base's in-memory one (:class:`~homeagent_core.lexical.collection.LexicalCollection`)
and the scoring of a few texts without an index all weigh and sum the same way:

* :func:`word_weights` — a query's bucket weights: idf, shared among the grams of each Chinese word;
* :func:`saturate` — term counts as indexes keep them (``uint8``, saturating at :data:`TF_MAX`);
* :func:`length_factors` — BM25's per-document length norm and the tf=1 factor;
* :func:`accumulate` — the per-posting sums ``weight · tf·(k1+1)/(tf+norm)``;
* :func:`score_texts` / :func:`score_terms` — the scores a lexical index holding just those texts
  would give (the working context ranks its few events with them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.lexical.buckets import term_counts, typed_query_terms

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "TF_MAX",
    "WORD_NORM",
    "accumulate",
    "length_factors",
    "saturate",
    "score_terms",
    "score_texts",
    "word_weights",
]

TF_MAX = 255
"""Largest term count an index keeps; higher counts saturate (BM25's tf factor is flat there)."""

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


def accumulate(
    out: npt.NDArray[np.float32],
    slots: npt.NDArray[np.int32],
    tfs: npt.NDArray[np.uint8],
    weights: npt.NDArray[np.float32],
    factors: tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]],
    k1: float,
    group: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None = None,
) -> None:
    """Add ``weight · tf·(k1+1)/(tf+norm)`` of each posting to its slot's score.

    ``factors`` = (norm, unit) per slot (:func:`length_factors`). ``group`` = (ids,
    cand) says the postings belong to a few slots only (``slots[i] == cand[ids[i]]``, ``cand``
    unique): sums are then formed per candidate instead of over every slot, with the same
    arithmetic in the same order (so the same scores).
    """
    if not len(slots):
        return
    norm, unit = factors
    ids, size = (slots, len(out)) if group is None else (group[0], len(group[1]))
    if len(slots) < len(out) // 2:
        tf = tfs.astype(np.float32)
        contrib = weights * tf * (k1 + 1.0) / (tf + norm.take(slots))
        summed = np.bincount(ids, weights=contrib, minlength=size).astype(np.float32)
    else:
        # many postings: most have tf = 1, whose factor depends on the document only, so
        # sum the idf weights per document once and scale; the few tf > 1 are weighted by
        # their factor over the tf = 1 one first (one pass over every slot, not two)
        scaled = weights.astype(np.float64)  # bincount works in float64 anyway
        many = np.flatnonzero(tfs > 1)
        if len(many):
            tf, near = tfs.take(many).astype(np.float32), norm.take(slots.take(many))
            scaled[many] *= tf * (1.0 + near) / (tf + near)  # = tf·(k1+1)/(tf+norm) ÷ unit
        total = np.bincount(ids, weights=scaled, minlength=size).astype(np.float64, copy=False)
        total *= unit[: len(out)] if group is None else unit.take(group[1])
        summed = total.astype(np.float32)
    if group is None:
        out += summed
    else:
        out[group[1]] += summed


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

