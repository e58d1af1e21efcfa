"""Top-``k`` selection over long score arrays (one slot per document).

``np.argpartition`` over a million scores costs a few milliseconds, and a fused query selects
from such arrays several times (the lexical candidates, the fused head, the answer). A threshold
taken from an evenly spread sample keeps about ``4k`` candidates, so only those are
partitioned: one comparison pass instead of a selection over every score.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["top_indices"]

SAMPLE_STEP = 8
"""The sample holds about ``SAMPLE_STEP · k`` scores (every ``n // (SAMPLE_STEP · k)``-th one) ..."""
SAMPLE_MIN = 4096
"""... and at least this many, so that a small ``k`` does not leave thousands of candidates."""


def top_indices(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.int64]:
    """Indices of ``k`` largest scores (any order; ties at the boundary broken arbitrarily).

    The threshold is the sample's ``4k · sample / n``-th best score (at least its 8th: fewer
    leaves the estimate too loose), so about ``4k`` scores pass. Scores above it are taken
    when there are ``k`` of them, otherwise scores equal to it join (a store where most
    documents score 0, say); when even those are fewer than ``k``, a four times lower rank of
    the sample is tried, and past a quarter of the sample every score is partitioned.
    """
    n = len(scores)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k >= n:
        return np.arange(n, dtype=np.int64)
    step = n // max(SAMPLE_STEP * k, SAMPLE_MIN)
    if step >= 4:
        sample = scores[::step]
        rank = max(8, (4 * k * len(sample)) // n)
        while rank < len(sample) // 4:
            threshold = np.partition(sample, len(sample) - rank)[len(sample) - rank]
            cand = np.flatnonzero(scores > threshold)
            if len(cand) < k:
                cand = np.flatnonzero(scores >= threshold)
            if len(cand) >= k:
                return cand[np.argpartition(-scores[cand], k - 1)[:k]].astype(np.int64)
            rank *= 4  # the sample overrated the k-th score: a lower threshold
    return np.argpartition(-scores, k - 1)[:k].astype(np.int64)
