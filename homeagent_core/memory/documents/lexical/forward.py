"""Forward lists of the lexical index: each document's own terms, for exact rescoring of candidates.

A query scores its rarest buckets over every document and adds its common buckets only to the
best candidates (:mod:`homeagent_core.memory.documents.lexical.index`); that addition reads the candidates'
forward lists — their distinct terms and counts, in slot order — instead of searching the long
posting lists of the common buckets.

Terms are stored as **term ids**, not bucket ids: every bucket gets a dense id the first time a
document uses it (a store of 100k LoCoMo-derived turns uses about 10k of the ``2**20`` buckets).
Two reasons, both measured (docs/BENCHMARKS.md): a query looks every forward entry of its
candidates up in a weight table, and a table of the ids in use stays in the CPU cache where
one over all buckets (4 MB) did not; and ids fit two bytes whenever a store uses fewer than
65,536 buckets, so an entry is 3 bytes (``uint16`` id, ``uint8`` count) instead of 6. Counts
above 255 saturate at 255, as in the posting lists.

The lists live in two parts: a *base* from the snapshot (read from its file on demand,
:class:`~homeagent_core.memory.documents.lexical.snapshot.FileArray`, or held in memory) and an in-memory
part appended by every insert. Slots are appended in ascending order, so each part is one
run in slot order and a slot's entries are contiguous.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.lexical.buckets import BUCKETS
from homeagent_core.memory.documents.lexical.snapshot import FileArray, take_ranges, touching_runs

if TYPE_CHECKING:
    import numpy.typing as npt

    Ints = npt.NDArray[np.int64]
    ListsPart = tuple[Ints, np.ndarray, npt.NDArray[np.uint8], Ints, Ints]
    """What :meth:`ForwardLists.lists` yields per part: candidates (indexes), term ids, counts, starts, lengths."""

__all__ = ["COUNT_ALL", "RUN_SLICES", "ForwardLists", "range_index"]

RUN_SLICES = 64
"""Entries a run of touching lists must average before a query copies runs as slices rather
than gathering entry by entry (a slice costs about as much as gathering 64 entries)."""
COUNT_ALL = BUCKETS // 16
"""Unseen postings from which :meth:`ForwardLists.ids` counts them over every bucket (one pass
over ``2**20`` counters) instead of sorting them: below it, the sort of the batch is cheaper."""


def range_index(starts: npt.NDArray[np.int64], lens: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The positions ``starts[i] .. starts[i] + lens[i] - 1`` for every ``i``, concatenated."""
    total = int(lens.sum())
    ends = np.cumsum(lens)
    idx: npt.NDArray[np.int64] = np.repeat(starts - (ends - lens), lens)
    idx += np.arange(total, dtype=np.int64)
    return idx


class ForwardLists:
    """Each slot's (term id, count) entries plus the bucket ↔ term id maps. Not thread-safe."""

    def __init__(self) -> None:
        self.term_of = np.full(BUCKETS, -1, dtype=np.int32)
        """Term id of each bucket (-1: no document used it yet)."""
        self.bucket_of = np.zeros(1024, dtype=np.uint32)
        """Bucket of each term id (the first :attr:`n_terms` entries)."""
        self.n_terms = 0
        self.start = np.zeros(64, dtype=np.int64)
        """Offset of each slot's entries in the base and memory parts taken together."""
        self.length = np.zeros(64, dtype=np.int32)
        self.base_terms: npt.NDArray[np.integer] | FileArray = np.zeros(0, dtype=np.uint16)
        self.base_tfs: npt.NDArray[np.uint8] | FileArray = np.zeros(0, dtype=np.uint8)
        self.mem_terms: npt.NDArray[np.integer] = np.zeros(1024, dtype=np.uint16)
        self.mem_tfs = np.zeros(1024, dtype=np.uint8)
        self.mem_n = 0
        self._table = np.zeros(1024, dtype=np.float32)

    def grow(self, size: int) -> None:
        """Make room for slots below ``size``."""
        if size <= len(self.start):
            return
        start = np.zeros(size, dtype=np.int64)
        start[: len(self.start)] = self.start
        length = np.zeros(size, dtype=np.int32)
        length[: len(self.length)] = self.length
        self.start, self.length = start, length

    # -- term ids --------------------------------------------------------------------------

    def ids(self, buckets: npt.NDArray[np.integer]) -> npt.NDArray[np.int32]:
        """Term ids of ``buckets``, giving new ids (commonest bucket of this batch first) to unseen ones."""
        found = self.term_of[buckets]
        missing = found < 0
        if missing.any():
            unseen = buckets if missing.all() else buckets[missing]
            if len(unseen) >= COUNT_ALL:
                # counted, not sorted: a rebuild passes every posting of the store here at once
                freq = np.bincount(unseen, minlength=BUCKETS)
                fresh = np.flatnonzero(freq)
                counts = freq[fresh]
            else:
                # one document or a few: sorting its own terms costs what it has, not 2**20 counters
                fresh, counts = np.unique(unseen, return_counts=True)
            fresh = fresh[np.argsort(-counts, kind="stable")]
            need = self.n_terms + len(fresh)
            if need > len(self.bucket_of):
                size = len(self.bucket_of)
                while size < need:
                    size *= 2
                grown = np.zeros(size, dtype=np.uint32)
                grown[: self.n_terms] = self.bucket_of[: self.n_terms]
                self.bucket_of = grown
            self.bucket_of[self.n_terms : need] = fresh
            self.term_of[fresh] = np.arange(self.n_terms, need, dtype=np.int32)
            self.n_terms = need
            if need > 1 << 16 and self.mem_terms.dtype != np.uint32:
                self.mem_terms = self.mem_terms.astype(np.uint32)  # ids no longer fit two bytes
            found = self.term_of[buckets]
        ids: npt.NDArray[np.int32] = found
        return ids

    def set_terms(self, bucket_of: npt.NDArray[np.uint32]) -> None:
        """Adopt a snapshot's term ids (``bucket_of[i]`` is the bucket of id ``i``).

        Raises:
            ValueError: a bucket is out of range or appears twice.
        """
        if len(bucket_of) and (int(bucket_of.max()) >= BUCKETS or len(np.unique(bucket_of)) != len(bucket_of)):
            raise ValueError("snapshot term ids name buckets out of range or twice")
        self.term_of = np.full(BUCKETS, -1, dtype=np.int32)
        self.term_of[bucket_of.astype(np.int64)] = np.arange(len(bucket_of), dtype=np.int32)
        self.bucket_of = np.zeros(max(1024, len(bucket_of)), dtype=np.uint32)
        self.bucket_of[: len(bucket_of)] = bucket_of
        self.n_terms = len(bucket_of)
        if self.n_terms > 1 << 16:
            self.mem_terms = self.mem_terms.astype(np.uint32)

    # -- writes ----------------------------------------------------------------------------

    def append(
        self,
        slots: npt.NDArray[np.int64],
        terms: npt.NDArray[np.int64],
        buckets: npt.NDArray[np.integer],
        tfs: npt.NDArray[np.uint8],
    ) -> None:
        """Append the lists of new (ascending) slots: ``terms[i]`` entries for ``slots[i]``.

        Writes go past the used part only, so a snapshot writer holding a view of it is unaffected.
        """
        ids = self.ids(buckets)
        need = self.mem_n + len(ids)
        if need > len(self.mem_terms):
            size = len(self.mem_terms)
            while size < need:
                size *= 2
            grown_t = np.zeros(size, dtype=self.mem_terms.dtype)
            grown_t[: self.mem_n] = self.mem_terms[: self.mem_n]
            grown_f = np.zeros(size, dtype=np.uint8)
            grown_f[: self.mem_n] = self.mem_tfs[: self.mem_n]
            self.mem_terms, self.mem_tfs = grown_t, grown_f
        self.mem_terms[self.mem_n : need] = ids
        self.mem_tfs[self.mem_n : need] = tfs
        ends = np.cumsum(terms)
        self.start[slots] = len(self.base_terms) + self.mem_n + ends - terms
        self.length[slots] = terms
        self.mem_n = need

    def adopt(
        self,
        counts: npt.NDArray[np.int32],
        terms: npt.NDArray[np.integer] | FileArray,
        tfs: npt.NDArray[np.uint8] | FileArray,
        bucket_of: npt.NDArray[np.uint32],
    ) -> None:
        """Take a snapshot's lists as the base part (``counts[s]`` entries of slot ``s``, in slot order)."""
        self.set_terms(bucket_of)
        n = len(counts)
        self.grow(n)
        self.length[:n] = counts
        self.start[1:n] = np.cumsum(counts[:-1], dtype=np.int64)
        self.base_terms, self.base_tfs = terms, tfs

    def hold_base(self, terms: npt.NDArray[np.integer], tfs: npt.NDArray[np.uint8]) -> bool:
        """Swap the base part read from a snapshot file for the same lists in memory.

        Returns whether it was swapped: only a base still read from a file, of the same length.
        """
        if not isinstance(self.base_terms, FileArray) or not isinstance(self.base_tfs, FileArray):
            return False
        if len(terms) != len(self.base_terms) or len(tfs) != len(self.base_tfs):
            return False
        self.base_terms, self.base_tfs = terms, tfs
        return True

    @property
    def base_file_bytes(self) -> int:
        """Bytes of the base part still read from a snapshot file (0 when it is in memory)."""
        if not isinstance(self.base_terms, FileArray):
            return 0
        return len(self.base_terms) * (self.base_terms.dtype.itemsize + 1)

    # -- reads -----------------------------------------------------------------------------

    @contextmanager
    def weights_of(
        self, buckets: npt.NDArray[np.int64], weights: npt.NDArray[np.float32]
    ) -> Iterator[npt.NDArray[np.float32] | None]:
        """A table of one weight per term id: ``weights[i]`` for the term of ``buckets[i]``, 0 for
        every other term (``None`` when no document uses any of the buckets). Cleared on exit."""
        ids = self.term_of[buckets]
        known = ids >= 0
        if not known.any():
            yield None
            return
        if len(self._table) < self.n_terms:
            self._table = np.zeros(max(self.n_terms, 2 * len(self._table)), dtype=np.float32)
        table = self._table
        table[ids[known]] = weights[known]
        try:
            yield table
        finally:
            table[ids[known]] = 0.0

    def lists(self, cand: npt.NDArray[np.int64]) -> Iterator[ListsPart]:
        """The forward lists of ``cand`` (ascending slots), per part holding some of them: which
        candidates (indexes into ``cand``), term ids and counts in memory, and each one's start
        and length there (lists read from a snapshot file come back as one copy, in order)."""
        nb = len(self.base_terms)
        starts = self.start[cand]
        for part in (starts < nb, starts >= nb):
            if not part.any():
                continue
            which = np.flatnonzero(part)
            first, lens = starts[which], self.length[cand[which]].astype(np.int64)
            if first[0] < nb:
                terms, tfs = self.base_terms, self.base_tfs
            else:
                terms, tfs, first = self.mem_terms, self.mem_tfs, first - nb
            if isinstance(terms, FileArray) or isinstance(tfs, FileArray):
                terms, tfs = take_ranges(terms, first, lens), take_ranges(tfs, first, lens)
                first = np.cumsum(lens) - lens
            yield which, terms, tfs, first, lens

    def weigh(
        self, cand: npt.NDArray[np.int64], buckets: npt.NDArray[np.int64], weights: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
        """The entries of ``cand`` (ascending slots) whose bucket is one of ``buckets``.

        Returns, per matching entry: the index into ``cand``, its count, and the weight given
        to its bucket in ``weights``.
        """
        with self.weights_of(buckets, weights) as table:
            if table is None or not len(cand):
                return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, np.float32)
            nb = len(self.base_terms)
            starts = self.start[cand]
            out = []
            for part in (starts < nb, starts >= nb):
                if part.any():
                    out.append(self._weigh_part(np.flatnonzero(part), starts[part], self.length[cand[part]], nb, table))
        if len(out) == 1:
            return out[0]
        return (
            np.concatenate([o[0] for o in out]),
            np.concatenate([o[1] for o in out]),
            np.concatenate([o[2] for o in out]),
        )

    def _weigh_part(
        self,
        which: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        lens: npt.NDArray[np.int32],
        nb: int,
        table: npt.NDArray[np.float32],
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
        """:meth:`weigh` for candidates whose lists all lie in one part (``which`` indexes ``cand``)."""
        lens64 = lens.astype(np.int64)
        base = starts[0] < nb
        terms, tfs = (self.base_terms, self.base_tfs) if base else (self.mem_terms, self.mem_tfs)
        # np.take, not fancy indexing: twice as fast for these 1-d gathers (no index conversion)
        if isinstance(terms, FileArray) or isinstance(tfs, FileArray):  # a snapshot's lists: read their ranges
            weights = table.take(take_ranges(terms, starts, lens64))
            hit = np.flatnonzero(weights != 0)
            got_tfs = take_ranges(tfs, starts, lens64).take(hit)
        else:
            local = starts if base else starts - nb
            lo, hi = touching_runs(local, lens64)
            if len(lo) * RUN_SLICES <= int(lens64.sum()):
                # candidates come in runs of consecutive slots (a match and its conversation
                # neighbours), whose lists touch: a slice per run beats an index per entry
                bounds = list(zip(lo.tolist(), hi.tolist(), strict=True))
                weights = table.take(np.concatenate([terms[a:b] for a, b in bounds]))
                hit = np.flatnonzero(weights != 0)  # a bool mask: nonzero() of floats is several times slower
                got_tfs = np.concatenate([tfs[a:b] for a, b in bounds]).take(hit)
            else:
                idx = range_index(local, lens64)
                weights = table.take(terms.take(idx))
                hit = np.flatnonzero(weights != 0)
                got_tfs = tfs.take(idx.take(hit))
        owner = which.take(np.searchsorted(np.cumsum(lens64), hit, side="right"))
        return owner, got_tfs, weights.take(hit)

    def snapshot_parts(
        self, top: int
    ) -> tuple[npt.NDArray[np.int32], list[npt.NDArray[np.integer] | FileArray],
               list[npt.NDArray[np.uint8] | FileArray], npt.NDArray[np.uint32]]:
        """Counts per slot up to ``top``, the entries (in parts) and the term ids' buckets, for a snapshot.

        The arrays returned are never modified afterwards (appends write past them).
        """
        counts = self.length[: top + 1].copy()
        nb = len(self.base_terms)
        used = int(counts.sum(dtype=np.int64)) - nb  # slots ascend: theirs is a prefix of the lists
        return (
            counts,
            [self.base_terms, self.mem_terms[:used]],
            [self.base_tfs, self.mem_tfs[:used]],
            self.bucket_of[: self.n_terms].copy(),
        )
