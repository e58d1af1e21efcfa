"""Fused ranking of the document store: dense + lexical scores, each normalised by its peak,
then a share of conversation neighbours' scores, with repeated texts collapsed into one place.

Documents of the same source written within the neighbour window of each other are turns of
one conversation, and the turn next to a strong match is often the answer ("What did you
paint?" / "A sunset."), so each document borrows ``neighbour_weight`` of its neighbours' fused
scores (:class:`~homeagent_core.memory.documents.time_order.TimeOrder`).

A memory often holds the same message several times (a fact restated, a reminder repeated);
each copy scores the same, so without care they fill the places of the best ``k`` with one
text. Documents whose indexed terms equal those of a better-ranked one are collapsed into its
place (:func:`collapse_repeats`) and the next distinct documents move up; the caller learns
which documents each place stands for.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.memory.documents.query_pool import query_pool
from homeagent_core.memory.documents.top_k import top_indices
from homeagent_sdk.errors import UsageError

if TYPE_CHECKING:
    import numpy.typing as npt

    from homeagent_core.memory.documents.index import SlotTable
    from homeagent_core.memory.documents.lexical.index import LexicalIndex
    from homeagent_core.memory.documents.time_order import TimeOrder
    from homeagent_core.memory.documents.vectors import DenseRows

__all__ = [
    "DENSE_CANDIDATES",
    "DENSE_PREFILTER",
    "FUSED_EXACT",
    "PARALLEL_MIN",
    "SMOOTH_POOL",
    "FusionWeights",
    "best_fused",
    "cover_words",
    "rank",
]

DENSE_CANDIDATES = 64
"""The dense path's best documents, which also get exact lexical scores."""
DENSE_PREFILTER = 512
"""Rows of a projected vector base scored with their full rows (the projection's best)."""
PARALLEL_MIN = 20_000
"""Vectors a store holds before a query's dense leg runs on its own thread (below that, handing
the leg over costs more than it saves)."""
SMOOTH_POOL = 512
"""The best fused documents (before the neighbour share) whose smoothed scores are computed alone
(:meth:`~homeagent_core.memory.documents.time_order.TimeOrder.top_smoothed`)."""
FUSED_EXACT = 64
"""The fused ranking's best documents whose dense share is made exact when the dense leg approximated it."""


@dataclass(slots=True)
class FusionWeights:
    """How the paths are fused (see :class:`~homeagent_core.memory.documents.store.DocumentStore`)."""

    dense: float = 0.5
    lexical: float = 0.5
    neighbour: float = 0.2
    coverage: float = 0.6
    """How much a document's new question words count when the best ``top_k`` are chosen
    (:func:`cover_words`); 0 keeps the plain score order."""


@dataclass(slots=True)
class _DenseLeg:
    """What the dense leg of one query found: its score parts, their peak and its best slots."""

    parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]
    peak: float
    best: npt.NDArray[np.int64] | None
    approximate: bool


def _dense_leg(dense: DenseRows, qvec: npt.NDArray[np.float32]) -> _DenseLeg:
    """Score ``qvec`` against the store's vectors (the dense half of :func:`rank`)."""
    parts = dense.scores(qvec, DENSE_PREFILTER)
    peak = max((float(scores.max()) for _, scores in parts if len(scores)), default=0.0)
    best = None
    if peak > 0:
        dense_slots = np.concatenate([p[0] for p in parts])
        scores_all = np.concatenate([p[1] for p in parts])
        rows = top_indices(scores_all, min(DENSE_CANDIDATES, len(scores_all)))
        best = dense_slots[rows[scores_all[rows] > 0]]
    return _DenseLeg(parts, peak, best, dense.approximate)


def rank(
    text: str,
    top_k: int,
    qvec: npt.NDArray[np.float32] | None,
    *,
    weights: FusionWeights,
    table: SlotTable,
    dense: DenseRows,
    lex: LexicalIndex,
    order: TimeOrder,
    collapsed: dict[int, list[int]] | None = None,
) -> list[tuple[int, float]]:
    """The ``top_k`` (slot, fused score) pairs for ``text`` (and its vector, when given), best first.

    Documents with the same terms as a better-ranked one (the same text up to case, full-width
    forms and which punctuation marks end its clauses) take no place of their own
    (:func:`collapse_repeats`); ``collapsed``, when given, receives for each returned slot the
    slots collapsed into it.

    In a store of :data:`PARALLEL_MIN` vectors or more, the dense leg runs on another thread
    while this one scores the lexical head (both mostly outside the GIL: SIMD scans, SQLite
    reads, numpy passes); the lexical leg waits for it only where it needs the dense best
    documents, and the sums are formed in the same order either way (the same scores).
    """
    cap = table.capacity
    total = np.zeros(cap, dtype=np.float32)
    expand = None
    if weights.neighbour > 0:
        order.ensure(table.alive, table.created, table.source)
        expand = order.neighbours
    leg: _DenseLeg | None = None
    pending: Future[_DenseLeg] | None = None
    if qvec is not None and len(dense) and weights.dense > 0:
        if qvec.shape != (dense.dim,):
            raise UsageError(f"query vector has shape {qvec.shape}; this store's space is {dense.dim}-d")
        qvec = qvec.astype(np.float32)
        if weights.lexical > 0 and len(dense) >= PARALLEL_MIN:
            pending = query_pool().submit(_dense_leg, dense, qvec)
        else:
            leg = _dense_leg(dense, qvec)

    def dense_best() -> npt.NDArray[np.int64] | None:
        nonlocal leg
        if pending is not None and leg is None:
            leg = pending.result()
        return leg.best if leg is not None else None

    lexical: npt.NDArray[np.float32] | None = None
    try:
        if weights.lexical > 0:
            lexical = lex.scores(text, candidates=dense_best, expand=expand)
    finally:
        dense_best()  # never leave the other thread working on the store after returning
    dense_added: npt.NDArray[np.float32] | None = None
    scale = 0.0
    if leg is not None and leg.peak > 0:
        scale = weights.dense / leg.peak
        for slots_part, scores in leg.parts:  # one add per part: a slot is in a part once
            total[slots_part] += scale * np.maximum(scores, 0.0)
        if leg.approximate:
            dense_added = total.copy()
    if lexical is not None:
        peak = float(lexical.max()) if len(lexical) else 0.0
        if peak > 0:
            total[: len(lexical)] += (weights.lexical / peak) * lexical[:cap]
    refine = _exact_head(dense_added, dense, qvec, scale) if dense_added is not None and qvec is not None else None
    k = min(top_k, table.count)
    if k <= 0:
        return []
    size = 4 * k + REPEAT_POOL
    while True:
        pool = best_fused(total.copy(), table.alive, min(size, table.count), order, weights.neighbour, refine=refine)
        prints = lex.fingerprints(np.asarray([slot for slot, _ in pool], dtype=np.int64))
        distinct, twins = collapse_repeats(pool, prints, len(pool))
        if len(distinct) >= k or len(pool) < min(size, table.count) or size >= table.count:
            break
        size *= 4  # repeats filled the pool: look deeper
    kept = distinct[:k]
    if weights.lexical > 0 and weights.coverage > 0 and len(distinct) > k:
        slots = np.asarray([slot for slot, _ in distinct], dtype=np.int64)
        kept = cover_words(distinct, lex.word_coverage(text, slots), k, weights.coverage)
    if collapsed is not None:
        collapsed.update({slot: twins[slot] for slot, _ in kept if slot in twins})
    return kept


def cover_words(
    pool: list[tuple[int, float]], holds: npt.NDArray[np.bool_], k: int, weight: float
) -> list[tuple[int, float]]:
    """``k`` of ``pool`` (best first) chosen so that together they hold the question's words.

    "王芳和李强谁的年龄更大？" needs a message about each; ranked by score alone, the ten best
    may all be about 王芳. Picked one at a time, each candidate's score (relative to the best)
    gains ``weight`` times the share of the question's words it adds to those already held —
    a word's share is ``1 / (candidates holding it)``, so a word few candidates hold counts
    most. ``holds`` is :meth:`LexicalIndex.word_coverage` of the pool. Scores are kept as ranked.
    """
    if not len(pool) or holds.shape[1] == 0:
        return pool[:k]
    held_by = holds.sum(axis=0)
    share = np.where(held_by > 0, 1.0 / np.maximum(held_by, 1), 0.0)
    share = share / share.sum() if share.sum() > 0 else share
    top = pool[0][1] if pool[0][1] > 0 else 1.0
    base = np.asarray([score for _, score in pool], dtype=np.float64) / top
    covered = np.zeros(holds.shape[1], dtype=bool)
    left = np.ones(len(pool), dtype=bool)
    chosen: list[int] = []
    while len(chosen) < k and left.any():
        gain = base + weight * (holds & ~covered) @ share
        gain[~left] = -np.inf
        best = int(np.argmax(gain))
        chosen.append(best)
        left[best] = False
        covered |= holds[best]
    return [pool[i] for i in chosen]


REPEAT_POOL = 16
"""Documents beyond ``top_k`` a query ranks so that repeats collapsed out of the best ``top_k``
leave their places to the next distinct documents."""


def collapse_repeats(
    pool: list[tuple[int, float]], prints: list[bytes], k: int
) -> tuple[list[tuple[int, float]], dict[int, list[int]]]:
    """The first ``k`` entries of ``pool`` (best first) whose fingerprint (``prints``, one per
    entry) is new, and for each of them the slots of the later entries that repeat it.

    An entry without a fingerprint (``b""``: not in the lexical index) is never a repeat.
    """
    first: dict[bytes, int] = {}
    kept: list[tuple[int, float]] = []
    twins: dict[int, list[int]] = {}
    for (slot, score), fp in zip(pool, prints, strict=True):
        if fp and fp in first:
            twins.setdefault(first[fp], []).append(slot)
        elif len(kept) < k:
            kept.append((slot, score))
            if fp:
                first[fp] = slot
    return kept, {slot: sorted(twins[slot]) for slot, _ in kept if slot in twins}


Refine = Callable[["npt.NDArray[np.float32]", "npt.NDArray[np.int64]"], None]
"""Corrects scores of the best fused slots in place, given the scores and the best slots (ascending)."""


def best_fused(
    total: npt.NDArray[np.float32],
    alive: npt.NDArray[np.bool_],
    k: int,
    order: TimeOrder,
    neighbour: float,
    *,
    refine: Refine | None = None,
) -> list[tuple[int, float]]:
    """The ``k`` best live slots of ``total`` after the neighbour share, best first; of equal
    scores the lower slot (the older document) comes first, also across the ``k``-th place.

    ``total`` is modified. The best :data:`SMOOTH_POOL` slots are selected once: ``refine``
    (if any) corrects scores among them, and when the best few can be proven from that pool
    (:meth:`~homeagent_core.memory.documents.time_order.TimeOrder.top_smoothed`) only they are smoothed.
    """
    total *= alive
    if k <= 0:
        return []
    size = max(SMOOTH_POOL, 4 * k)
    chosen = None
    if size < len(total):
        pool = np.sort(top_indices(total, size))
        chosen = pool, float(total[pool].min())
    else:
        pool = np.arange(len(total), dtype=np.int64)
    if refine is not None:
        refine(total, pool)
    found = None
    if neighbour > 0:
        found = order.top_smoothed(total, neighbour, k, size, chosen=chosen) if chosen else None
        if found is None:
            total = order.smooth(total, neighbour)
    if found is None:
        kth = float(total[top_indices(total, k)].min())
        cand = np.flatnonzero(total >= kth) if kth > 0 else np.flatnonzero(total > 0)  # every tie of the k-th
        found = cand, total[cand]
    cand, scores = found
    keep = scores > 0
    cand, scores = cand[keep], scores[keep]
    best = np.lexsort((cand, -scores))
    return [(int(cand[i]), float(scores[i])) for i in best[:k]]


def _exact_head(
    dense_added: npt.NDArray[np.float32], dense: DenseRows, qvec: npt.NDArray[np.float32], scale: float
) -> Refine:
    """A :data:`Refine` that makes the dense share of the ``FUSED_EXACT`` best fused documents exact.

    The dense leg's int8 scores are close (about 1e-3) but not equal to the float32 ones, which
    reorders documents whose fused scores are that close; the best documents are few, so
    their stored vectors are read and their dense share replaced before the neighbour pass.
    ``dense_added`` holds each slot's approximate dense share. Only documents the dense leg
    scored are touched (a document outside a projected scan's prefilter keeps no dense share,
    as with exact vectors).
    """

    def refine(total: npt.NDArray[np.float32], pool: npt.NDArray[np.int64]) -> None:
        k = min(FUSED_EXACT, len(pool))
        if k <= 0:
            return
        head = pool[top_indices(total[pool], k)]
        head = head[dense_added[head] > 0]
        done = np.sort(dense.exact_slots)  # the dense leg's own best are exact already
        if len(done) and len(head):
            head = head[done[np.minimum(np.searchsorted(done, head), len(done) - 1)] != head]
        found, exact = dense.exact(head, qvec)
        if len(found):
            fixed = head[found]
            total[fixed] += scale * np.maximum(exact, 0.0) - dense_added[fixed]

    return refine
