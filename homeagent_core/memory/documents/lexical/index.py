"""Character n-gram BM25 index: the lexical path of document search.

Why not the word-level :class:`~homeagent_core.embeddings.tfidf.TfidfIndex`: conversation
memories are short, informal turns, and questions rarely repeat their exact word forms
("painted" vs "painting", "Mel" vs "Melanie"). Character 2–4-grams taken inside word
boundaries match those partial forms, and BM25's term-frequency saturation and length
normalisation suit short turns better than cosine tf-idf. On the LoCoMo development
conversations this lifts evidence recall@10 from about 51 (word tf-idf) to about 63 with no
model at all (``bench/bench_locomo.py``). Chinese runs are treated the same way (character
2–4-grams, the usual Chinese retrieval unit), so no segmenter is needed.

Layout: terms are hashed (crc32) into ``2**20`` buckets. Postings live in a CSR "base"
segment (``indptr``, ``slots``, ``tfs``; within a bucket, slots ascend;
:mod:`homeagent_core.memory.documents.lexical.postings`) plus a small append-only "delta" of recent
postings held in flat arrays. Slots are added in ascending order, so folding the delta into
the base (:meth:`LexicalIndex.merge`, one masked copy, dead postings dropped) keeps every
bucket sorted; adding a document never rebuilds the index. Term counts are kept as ``uint8``
(saturating at 255).
Document frequencies and lengths are kept incrementally, so BM25's idf always reflects the
live documents.

Query cost: with hashed character grams, a sentence touches a hundred buckets, and the
commonest ones (``" t"``, ``"e "``...) list nearly every document; scoring every posting makes
a query linear in the store (45–75 ms at 100k documents). So a query spends a budget of
``max_postings`` fully scored postings round robin over its words: the rarest bucket of each
word, then the second rarest of each, and so on. That ranks every document by the query words
it shares. The buckets over budget (common, low idf) are then added exactly to the best
``rescore`` documents and to any the caller names (the dense path's best), from those
documents' forward lists (:mod:`homeagent_core.memory.documents.lexical.forward`). A document outside
that set keeps a partial score no higher than those of the ``rescore`` best, so the top of the
ranking is exact BM25 whenever the true best documents are among the candidates (95% of top-10
hits at 100k documents with the default budget of ``2**18`` postings, where ``2**19`` gave 97%
for 40% more query time and no better recall of the planted answers; ``bench/bench_documents.py``).
Stores whose query postings fit the budget (a conversation's worth of turns) are scored
exactly. The delta is always scored in full through a bucket→weight table. Snapshots
(:mod:`homeagent_core.memory.documents.lexical.snapshot`) let start-up skip the sort; an index opened
from one reads its postings and forward lists from the file as queries need them (the document
store swaps in checked in-memory copies of small stores' forward lists, :meth:`LexicalIndex.hold_forward`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.lexical.bm25 import WORD_NORM, accumulate, length_factors, saturate, word_weights
from homeagent_core.lexical.buckets import BUCKETS, term_counts, typed_query_terms
from homeagent_core.memory.documents import native
from homeagent_core.memory.documents.lexical.coverage import covered_words
from homeagent_core.memory.documents.lexical.forward import ForwardLists, range_index
from homeagent_core.memory.documents.lexical.postings import fold_postings
from homeagent_core.memory.documents.lexical.scoring import budget_order, rescore_compiled, rescore_numpy
from homeagent_core.memory.documents.lexical.snapshot import (
    FileArray,
    SnapshotArrays,
    read_snapshot,
    take_ranges,
    write_snapshot,
)
from homeagent_core.memory.documents.top_k import top_indices

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["LexicalIndex"]

DELTA_MAX = 1 << 17
"""Postings the delta holds before it is folded into the base."""
QUERY_POSTINGS = 1 << 18
"""Postings a query scores for every document before it switches to candidate rescoring."""
RESCORE = 256
"""Candidates that receive the exact contribution of a query's common buckets."""
class LexicalIndex:
    """Incremental BM25 over hashed character n-grams; documents are integer ``slots``.

    Slots must be added in ascending order (the document store's autoincrement row ids).
    Not thread-safe: the owner serialises calls (the document store holds a lock).

    Args:
        k1 / b: BM25 parameters.
        max_postings: per-query budget of fully scored postings; ``None`` scores every posting.
        rescore: how many candidates receive the exact score of the buckets over budget.
    """

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        max_postings: int | None = QUERY_POSTINGS,
        rescore: int = RESCORE,
    ) -> None:
        self.k1 = k1
        self.b = b
        self.max_postings = max_postings
        self.rescore = rescore
        self.cover_words = True
        self.word_norm = WORD_NORM
        self._indptr = np.zeros(BUCKETS + 1, dtype=np.int64)
        self._slots: npt.NDArray[np.int32] | FileArray = np.zeros(0, dtype=np.int32)
        self._tfs: npt.NDArray[np.uint8] | FileArray = np.zeros(0, dtype=np.uint8)
        self._base_top = 0
        self._top = 0
        self._dead_in_base = 0
        self._d_slots = np.zeros(1024, dtype=np.int32)
        self._d_buckets = np.zeros(1024, dtype=np.int32)
        self._d_tfs = np.zeros(1024, dtype=np.uint8)
        self._d_n = 0
        self._df = np.zeros(BUCKETS, dtype=np.int32)
        self._qw = np.zeros(BUCKETS, dtype=np.float32)
        self._forward = ForwardLists()
        self._dl = np.zeros(64, dtype=np.float32)
        self._alive = np.zeros(64, dtype=bool)
        self._count = 0
        self._total_len = 0.0
        self._epoch = 0  # bumped by every add and remove: invalidates cached length factors
        self._factors_key: tuple[int, int] | None = None
        self._factors = (np.zeros(0, np.float32), np.zeros(0, np.float32))
        self.unchecked: SnapshotArrays | None = None
        """The snapshot this index was mapped from, while its checksums are still unchecked."""

    def __len__(self) -> int:
        return self._count

    def __contains__(self, slot: object) -> bool:
        return isinstance(slot, int) and 0 <= slot < len(self._alive) and bool(self._alive[slot])

    @property
    def capacity(self) -> int:
        """One past the highest slot the arrays can hold."""
        return len(self._alive)

    @property
    def base_watermark(self) -> int:
        """Highest slot whose postings are in the base segment (what a snapshot covers)."""
        return self._base_top

    def lengths(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Gram counts of ``slots`` (0 for slots not indexed)."""
        return self._dl[slots].astype(np.int64)

    @property
    def delta_postings(self) -> int:
        """Postings waiting in the delta."""
        return self._d_n

    def _grow(self, slot: int) -> None:
        if slot < len(self._alive):
            return
        size = max(64, len(self._alive))
        while size <= slot:
            size *= 2
        dl = np.zeros(size, dtype=np.float32)
        dl[: len(self._dl)] = self._dl
        alive = np.zeros(size, dtype=bool)
        alive[: len(self._alive)] = self._alive
        self._forward.grow(size)
        self._dl, self._alive = dl, alive

    # -- writes ----------------------------------------------------------------------------

    def add(self, slot: int, text: str) -> None:
        """Index ``text`` under ``slot`` (higher than every slot added before)."""
        buckets, counts, length = term_counts(text)
        self.add_terms(slot, buckets, counts, length)

    def add_terms(
        self,
        slot: int,
        buckets: npt.NDArray[np.uint32],
        counts: npt.NDArray[np.uint16],
        length: int,
    ) -> None:
        """Index pre-computed :func:`term_counts` output under ``slot``.

        Raises:
            ValueError: ``slot`` is not higher than every slot added before.
        """
        if slot <= self._top:
            raise ValueError(f"slot {slot} is not above the highest indexed slot {self._top}")
        self._grow(slot)
        self._top = slot
        self._epoch += 1
        self._alive[slot] = True
        self._dl[slot] = length
        self._count += 1
        self._total_len += length
        self._df[buckets] += 1
        tfs = saturate(counts)
        need = self._d_n + len(buckets)
        if need > len(self._d_slots):
            size = len(self._d_slots)
            while size < need:
                size *= 2
            for name in ("_d_slots", "_d_buckets", "_d_tfs"):
                old = getattr(self, name)
                new = np.zeros(size, dtype=old.dtype)
                new[: self._d_n] = old[: self._d_n]
                setattr(self, name, new)
        self._d_slots[self._d_n : need] = slot
        self._d_buckets[self._d_n : need] = buckets
        self._d_tfs[self._d_n : need] = tfs
        self._d_n = need
        self._forward.append(np.asarray([slot], dtype=np.int64), np.asarray([len(buckets)], dtype=np.int64),
                             buckets, tfs)
        if self._d_n > DELTA_MAX:
            self.merge()

    def add_many_terms(
        self,
        slots: npt.NDArray[np.int64],
        terms: Sequence[tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16], int]],
    ) -> None:
        """Index :func:`term_counts` output of many documents: one delta append, at most one merge.

        Adding documents one by one folds the delta into the base every :data:`DELTA_MAX`
        postings, a copy of the whole base each time; a batch pays for one.

        Raises:
            ValueError: as :meth:`add_bulk`.
        """
        if len(slots) < 64:  # a few documents: appending in place beats re-counting every bucket
            for slot, (buckets, counts, length) in zip(slots.tolist(), terms, strict=True):
                self.add_terms(slot, buckets, counts, length)
            return
        self.add_delta_bulk(
            slots,
            np.fromiter((len(t[0]) for t in terms), dtype=np.int64, count=len(terms)),
            np.concatenate([t[0] for t in terms]).astype(np.uint32, copy=False),
            np.concatenate([t[1] for t in terms]),
            np.fromiter((t[2] for t in terms), dtype=np.int64, count=len(terms)),
        )
        if self._d_n > DELTA_MAX:
            self.merge()

    def add_bulk(
        self,
        slots: npt.NDArray[np.int64],
        terms: npt.NDArray[np.int64],
        buckets: npt.NDArray[np.uint32],
        counts: npt.NDArray[np.uint16],
        lengths: npt.NDArray[np.int64],
    ) -> None:
        """Index many documents straight into the base (the :func:`decode_many` layout).

        ``slots`` ascend and are above every slot added before; ``terms[i]`` of the
        ``buckets``/``counts`` belong to ``slots[i]``.

        Raises:
            ValueError: the slots are not ascending above the indexed ones, or sizes disagree.
        """
        if not len(slots):
            return
        if int(terms.sum()) != len(buckets) or len(buckets) != len(counts) or len(terms) != len(slots):
            raise ValueError("add_bulk: terms, buckets and counts sizes disagree")
        if int(slots[0]) <= self._top or (len(slots) > 1 and np.any(np.diff(slots) <= 0)):
            raise ValueError(f"add_bulk: slots must ascend above the highest indexed slot {self._top}")
        self.merge()
        top = int(slots[-1])
        self._grow(top)
        self._epoch += 1
        self._alive[slots] = True
        self._dl[slots] = lengths
        self._count += len(slots)
        self._total_len += float(np.asarray(lengths, dtype=np.float64).sum())
        post_slots = np.repeat(slots.astype(np.int32), terms)
        tfs = saturate(counts)
        self._df += self._merge_sorted(buckets, post_slots, tfs).astype(np.int32)
        self._forward.append(slots, terms, buckets, tfs)
        self._top = self._base_top = top

    def add_delta_bulk(
        self,
        slots: npt.NDArray[np.int64],
        terms: npt.NDArray[np.int64],
        buckets: npt.NDArray[np.uint32],
        counts: npt.NDArray[np.uint16],
        lengths: npt.NDArray[np.int64],
    ) -> None:
        """Index many documents into the delta, leaving the base untouched (as :meth:`add_bulk`).

        Opening a store whose snapshot misses the last documents uses this: folding them into
        a large base would copy every posting before the first query; the delta is scored in
        full instead and folded by the next write's merge.

        Raises:
            ValueError: as :meth:`add_bulk`.
        """
        if not len(slots):
            return
        if int(terms.sum()) != len(buckets) or len(buckets) != len(counts) or len(terms) != len(slots):
            raise ValueError("add_delta_bulk: terms, buckets and counts sizes disagree")
        if int(slots[0]) <= self._top or (len(slots) > 1 and np.any(np.diff(slots) <= 0)):
            raise ValueError(f"add_delta_bulk: slots must ascend above the highest indexed slot {self._top}")
        top = int(slots[-1])
        self._grow(top)
        self._epoch += 1
        self._alive[slots] = True
        self._dl[slots] = lengths
        self._count += len(slots)
        self._total_len += float(np.asarray(lengths, dtype=np.float64).sum())
        self._df += np.bincount(buckets, minlength=BUCKETS).astype(np.int32)
        post_slots = np.repeat(slots.astype(np.int32), terms)
        start = self._d_n
        self._d_slots = np.concatenate([self._d_slots[:start], post_slots])
        self._d_buckets = np.concatenate([self._d_buckets[:start], buckets.astype(np.int32)])
        tfs = saturate(counts)
        self._d_tfs = np.concatenate([self._d_tfs[:start], tfs])
        self._d_n = len(self._d_slots)
        self._forward.append(slots, terms, buckets, tfs)
        self._top = top

    def remove(self, slot: int, buckets: npt.NDArray[np.uint32]) -> None:
        """Forget ``slot``; ``buckets`` are its :func:`term_counts` buckets (postings go lazily)."""
        if slot not in self:
            return
        self._epoch += 1
        self._alive[slot] = False
        self._count -= 1
        self._total_len -= float(self._dl[slot])
        self._df[buckets] -= 1
        if slot <= self._base_top:
            self._dead_in_base += 1

    def merge(self) -> None:
        """Fold the delta into the base segment and drop postings of removed slots."""
        n = self._d_n
        if n:
            slots, buckets, tfs = self._d_slots[:n], self._d_buckets[:n], self._d_tfs[:n]
            live = self._alive[slots]
            self._merge_sorted(buckets[live], slots[live].copy(), tfs[live].copy())
            self._base_top = self._top
            self._d_n = 0
            if len(self._d_slots) > 4 * DELTA_MAX:
                self._d_slots = np.zeros(1024, dtype=np.int32)
                self._d_buckets = np.zeros(1024, dtype=np.int32)
                self._d_tfs = np.zeros(1024, dtype=np.uint8)
        elif self._dead_in_base:
            self._merge_sorted(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.uint8))

    def _merge_sorted(
        self,
        buckets: npt.NDArray[np.integer],
        slots: npt.NDArray[np.int32],
        tfs: npt.NDArray[np.uint8],
    ) -> npt.NDArray[np.int64]:
        """Insert postings (slot-ordered, above the base) at the end of their bucket runs.

        Returns how many postings each bucket gained.
        """
        base_slots = np.asarray(self._slots)
        keep = self._alive[base_slots] if self._dead_in_base else None
        self._dead_in_base = 0
        base_slots, base_tfs, indptr, added = fold_postings(
            base_slots, np.asarray(self._tfs), self._indptr, keep, buckets, slots, tfs
        )
        # new arrays, never mutated in place: a snapshot writer may hold the old ones
        self._slots, self._tfs, self._indptr = base_slots, base_tfs, indptr
        return added

    # -- reads -----------------------------------------------------------------------------

    def scores(
        self,
        query: str,
        *,
        candidates: npt.NDArray[np.int64] | Callable[[], npt.NDArray[np.int64] | None] | None = None,
        expand: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]] | None = None,
        mask: npt.NDArray[np.bool_] | None = None,
    ) -> npt.NDArray[np.float32]:
        """BM25 score of every slot (length :attr:`capacity`); removed slots score 0, and so do
        slots outside ``mask`` (a reader's visible documents) when it is given, before the best
        documents are chosen for exact rescoring.

        Exact for the rarest buckets and, over the posting budget, for the best ``rescore``
        documents and the ``candidates``, and for what ``expand`` returns for that set (the
        document store adds their conversation neighbours, whose scores it blends in); other
        documents miss only common-bucket contributions. ``candidates`` may be a function,
        called once the fully scored part is done (the fused ranking computes them meanwhile).
        """
        out = np.zeros(len(self._alive), dtype=np.float32)
        if self._count == 0:
            return out
        buckets, words, cjk = typed_query_terms(query)
        df = self._df[buckets]
        present = df > 0
        buckets, words, cjk, df = buckets[present], words[present], cjk[present], df[present].astype(np.float64)
        if len(buckets) == 0:
            return out
        n = float(self._count)
        idf = word_weights(np.log1p((n - df + 0.5) / (df + 0.5)), words, cjk, self.word_norm)
        starts = self._indptr[buckets]
        lens = self._indptr[buckets + 1] - starts
        order = budget_order(lens, words, self.cover_words)
        if self.max_postings is None:
            full = len(order)
        else:
            full = max(1, int(np.searchsorted(np.cumsum(lens[order]), self.max_postings, "right")))
        head, tail = order[:full], order[full:]
        head, tail = head[lens[head] > 0], tail[lens[tail] > 0]
        if len(head):
            self._score_head(out, starts[head], lens[head], idf[head])
        if self._d_n:
            self._qw[buckets] = idf
            weights = self._qw[self._d_buckets[: self._d_n]]
            self._qw[buckets] = 0.0
            hit = np.flatnonzero(weights != 0)  # a bool mask: nonzero() of floats is several times slower
            accumulate(out, self._d_slots[hit], self._d_tfs[hit], weights[hit], self._doc_factors(), self.k1)
        if callable(candidates):
            candidates = candidates()
        if mask is not None:
            out[: min(len(out), len(mask))] *= mask[: len(out)]
            out[len(mask):] = 0.0
        if len(tail):
            self._rescore(out, buckets[tail], idf[tail], candidates, expand)
        out *= self._alive
        if mask is not None:
            out[: min(len(out), len(mask))] *= mask[: len(out)]
        return out

    def _score_head(
        self,
        out: npt.NDArray[np.float32],
        starts: npt.NDArray[np.int64],
        lens: npt.NDArray[np.int64],
        idf: npt.NDArray[np.float32],
    ) -> None:
        """Add the postings of the fully scored buckets (``lens[i]`` from ``starts[i]``, weighted ``idf[i]``)."""
        kernel = native.library()
        if kernel is None:
            slots, tfs = take_ranges(self._slots, starts, lens), take_ranges(self._tfs, starts, lens)
            accumulate(out, slots, tfs, np.repeat(idf, lens), self._doc_factors(), self.k1)
            return
        if isinstance(self._slots, FileArray) or isinstance(self._tfs, FileArray):
            slots, tfs = take_ranges(self._slots, starts, lens), take_ranges(self._tfs, starts, lens)
            starts = np.cumsum(lens) - lens  # the ranges' places in what was read
        else:
            slots, tfs = self._slots, self._tfs
        norm, unit = self._doc_factors()
        native.add_ranges(kernel, slots, tfs, starts, lens, idf, norm, unit, self.k1, out)

    def _doc_factors(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """Per slot: BM25's length norm ``k1·(1-b+b·dl/avgdl)`` and the tf=1 factor.

        Cached until a document is added or removed, so queries between writes share it.
        """
        key = (self._epoch, len(self._dl))
        if self._factors_key != key:
            self._factors = length_factors(self._dl, self._total_len, self._count, self.k1, self.b)
            self._factors_key = key
        return self._factors

    def _rescore(
        self,
        out: npt.NDArray[np.float32],
        buckets: npt.NDArray[np.int64],
        idf: npt.NDArray[np.float32],
        extra: npt.NDArray[np.int64] | None,
        expand: Callable[[npt.NDArray[np.int64]], npt.NDArray[np.int64]] | None,
    ) -> None:
        """Add the contribution of over-budget ``buckets`` to the best candidates only.

        Each candidate's forward list (its own terms) is looked up in a term → idf table
        (:meth:`ForwardLists.weigh`), so the cost follows the candidates' lengths, not the
        common buckets' posting lists.
        Slots in the delta are skipped: the delta is already scored in full.
        """
        top = top_indices(out, min(self.rescore, len(out)))
        top = top[out[top] > 0]
        if extra is not None and len(extra):
            top = np.concatenate([top, extra.astype(np.int64)])
        top = top[(top >= 0) & (top < len(out))]
        if expand is not None:
            more = expand(top)
            top = np.concatenate([top, more[(more >= 0) & (more < len(out))]])
        top.sort()
        cand = top[np.concatenate([[True], top[1:] != top[:-1]])] if len(top) else top
        cand = cand[cand <= self._base_top]
        kernel = native.library()
        if kernel is not None:
            rescore_compiled(kernel, self._forward, out, cand, buckets, idf, self._doc_factors(), self.k1)
        else:
            rescore_numpy(self._forward, out, cand, buckets, idf, self._doc_factors(), self.k1)

    def word_coverage(self, query: str, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Which words of ``query`` each of ``slots`` holds (:func:`.coverage.covered_words`)."""
        return covered_words(query, slots, self._df, self._alive, self._forward)

    def fingerprints(self, slots: npt.NDArray[np.int64]) -> list[bytes]:
        """Per slot, bytes equal for two documents exactly when their terms and counts are.

        Texts that differ only in case, full-width forms or which punctuation marks end their
        clauses ("...王芳。" / "...王芳！") index the same terms
        (:func:`~homeagent_core.lexical.terms.normalize`), so they share a fingerprint.
        A slot that is not indexed gets ``b""``.
        """
        out = [b""] * len(slots)
        order = np.argsort(slots, kind="stable")
        cand = slots[order].astype(np.int64)
        live = (cand > 0) & (cand < len(self._alive))
        live[live] = self._alive[cand[live]]
        at, cand = order[live], cand[live]
        for which, terms, tfs, starts, lens in self._forward.lists(cand):
            idx = range_index(starts, lens)  # one gather and one copy to bytes per part, then slices
            ids = np.asarray(terms).take(idx).astype(np.uint32).tobytes()
            counts = np.asarray(tfs).take(idx).tobytes()
            ends = np.cumsum(lens).tolist()
            for i, a, b in zip(at[which].tolist(), [0, *ends[:-1]], ends, strict=True):
                out[i] = ids[4 * a : 4 * b] + counts[a:b]
        return out

    @property
    def forward_file_bytes(self) -> int:
        """Bytes of forward lists this index reads from its snapshot file per query (0: all in memory)."""
        return self._forward.base_file_bytes

    def hold_forward(self, terms: npt.NDArray[np.integer], tfs: npt.NDArray[np.uint8]) -> bool:
        """Keep the snapshot's forward lists (checked copies of them) in memory from now on."""
        return self._forward.hold_base(terms, tfs)

    # -- snapshots -------------------------------------------------------------------------

    def snapshot_arrays(self, *, tag: str, merge: bool = True) -> SnapshotArrays:
        """The base segment as a consistent set of arrays for :func:`write_snapshot`.

        Folds the delta first unless ``merge`` is false (then the snapshot covers the slots up
        to :attr:`base_watermark`). The arrays are never modified afterwards (merges build new
        ones), so a writer thread can save them while the index keeps changing.
        """
        if merge:
            self.merge()
        top = self._base_top
        fwd_counts, fwd_terms, fwd_tfs, term_buckets = self._forward.snapshot_parts(top)
        return SnapshotArrays(
            tag=tag,
            watermark=top,
            counts=np.diff(self._indptr).astype(np.int32),
            slots=self._slots,
            tfs=self._tfs,
            lengths=self._dl[: top + 1] * self._alive[: top + 1],
            fwd_counts=fwd_counts,
            fwd_terms=fwd_terms,
            fwd_tfs=fwd_tfs,
            term_buckets=term_buckets,
            clean=self._dead_in_base == 0,
        )

    def save(self, path: Path, *, tag: str = "") -> int:
        """Write the merged index to ``path`` atomically; returns its watermark (top slot)."""
        arrays = self.snapshot_arrays(tag=tag)
        write_snapshot(path, arrays)
        return arrays.watermark

    @classmethod
    def load(
        cls,
        path: Path,
        alive_slots: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
        *,
        tag: str = "",
        max_slot: int | None = None,
        verify: bool = True,
        **kwargs: float | int | None,
    ) -> LexicalIndex:
        """Load a snapshot validated against the stored documents it claims to cover.

        ``verify=False`` maps the posting arrays instead of reading and checksumming them
        (:func:`~homeagent_core.memory.documents.lexical.snapshot.read_snapshot`); the caller then passes
        :attr:`unchecked` to :func:`~homeagent_core.memory.documents.lexical.snapshot.verify_arrays` later.

        ``alive_slots`` (ascending) and ``lengths`` (their stored gram counts) describe the
        documents now stored; documents above the snapshot's :attr:`base_watermark` are
        the caller's to add. ``max_slot`` is the highest slot the store ever issued.

        Raises:
            ValueError: the file is unreadable, from another store (``tag``), newer than the
                store (watermark above ``max_slot``), or disagrees with a stored document.
        """
        snap = read_snapshot(path, verify=verify)
        try:
            return cls._from_snapshot(path, snap, alive_slots, lengths, tag=tag, max_slot=max_slot, **kwargs)
        except BaseException:
            if snap.source is not None:
                snap.source.close()
            raise

    @classmethod
    def _from_snapshot(
        cls,
        path: Path,
        snap: SnapshotArrays,
        alive_slots: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
        *,
        tag: str,
        max_slot: int | None,
        **kwargs: float | int | None,
    ) -> LexicalIndex:
        """:meth:`load` once the file is read."""
        if snap.tag != tag:
            raise ValueError(f"{path}: snapshot belongs to another store ({snap.tag!r} != {tag!r})")
        if max_slot is not None and snap.watermark > max_slot:
            raise ValueError(
                f"{path}: snapshot covers slot {snap.watermark} but the store only issued {max_slot}"
            )
        if len(snap.counts) != BUCKETS:
            raise ValueError(f"{path}: snapshot has {len(snap.counts)} buckets, expected {BUCKETS}")
        covered = alive_slots <= snap.watermark
        slots_in, lens_in = alive_slots[covered], lengths[covered]
        if len(slots_in) and (
            int(slots_in[-1]) >= len(snap.lengths)
            or not np.array_equal(snap.lengths[slots_in], lens_in.astype(np.float32))
        ):
            raise ValueError(f"{path}: snapshot disagrees with the stored documents' terms")
        index = cls(**kwargs)  # type: ignore[arg-type]
        index._grow(max(snap.watermark, int(alive_slots[-1]) if len(alive_slots) else 0))
        index._dl[: len(snap.lengths)] = snap.lengths
        index._alive[slots_in] = True
        index._count = len(slots_in)
        index._total_len = float(index._dl[slots_in].sum(dtype=np.float64))
        index._top = index._base_top = snap.watermark
        index._indptr = np.zeros(BUCKETS + 1, dtype=np.int64)
        np.cumsum(snap.counts, out=index._indptr[1:])
        slots, tfs = snap.slots, snap.tfs
        # a clean snapshot's postings belong to exactly the slots it gives a length: when all of
        # them are still stored, no posting needs dropping and the pass over them is skipped
        if snap.clean and index._alive[np.flatnonzero(snap.lengths)].all():
            keep = None
        else:
            slots, tfs = np.asarray(slots), np.asarray(tfs)  # read whole: dead postings are dropped
            try:
                keep = index._alive[slots] if len(slots) else np.zeros(0, dtype=bool)
            except IndexError as exc:
                raise ValueError(f"{path}: snapshot postings name slots beyond {snap.watermark}") from exc
        if keep is not None and not keep.all():
            cs = np.concatenate([[0], np.cumsum(keep, dtype=np.int64)])
            index._indptr = cs[index._indptr]
            slots, tfs = np.asarray(slots)[keep], np.asarray(tfs)[keep]
        index._slots, index._tfs = slots, tfs
        index._forward.adopt(snap.fwd_counts, snap.fwd_terms[0], snap.fwd_tfs[0], snap.term_buckets)
        index.unchecked = snap if snap.unchecked else None
        index._df = np.diff(index._indptr).astype(np.int32)
        dead = np.ones(len(index._dl), dtype=bool)
        dead[slots_in] = False
        index._dl[dead] = 0.0
        return index

    @classmethod
    def build(
        cls,
        slots: npt.NDArray[np.int64],
        terms: npt.NDArray[np.int64],
        buckets: npt.NDArray[np.uint32],
        counts: npt.NDArray[np.uint16],
        lengths: npt.NDArray[np.int64],
        **kwargs: float | int | None,
    ) -> LexicalIndex:
        """Build the base segment in one pass (arguments as :meth:`add_bulk`)."""
        index = cls(**kwargs)  # type: ignore[arg-type]
        index.add_bulk(slots, terms, buckets, counts, lengths)
        return index
