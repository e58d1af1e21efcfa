"""The document store's dense vectors: a mapped int8 base plus float32 rows added since, and their scan.

The base is the vector file beside the database (:mod:`homeagent_core.memory.documents.vector_snapshot`):
int8 rows with one scale each, memory-mapped and never modified; a deleted or re-embedded
document's base row is masked. Rows added since live in a growing in-memory float32 matrix (a
deleted one is swapped out). ``row_of`` maps a slot to its row (base rows first), ``-1`` when
the slot has no vector in the active space.

A query scans the base's compact projected int8 rows when the file has them and scores the best
``prefilter`` of those with their full int8 rows, otherwise (small stores) every int8 row; then
the best ``RESCORE`` base rows are rescored exactly with their float32 vectors read from SQLite,
so the dense path's leading scores are the exact ones. The int8 scans run in simsimd's SIMD
kernels (numpy has no fast int8 product).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.memory.documents import native
from homeagent_core.memory.documents.top_k import top_indices
from homeagent_core.memory.documents.vector_snapshot import (
    QuantRows,
    VectorFile,
    quantize,
    read_vectors,
    remove_partial,
    write_vectors,
)

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["MEMORY_SCAN", "RESCORE", "DenseRows", "VectorParts"]

RESCORE = 64
"""Base rows of a query rescored exactly with their float32 vectors from SQLite (the int8 best)."""
MEMORY_SCAN = 16_384
"""In-memory rows scored exactly in full; more are first scanned as int8 (see :meth:`DenseRows.scores`)."""

log = logging.getLogger("homeagent_core.memory.documents.store")  # the store's log: one logger for its messages

VectorParts = tuple[int, int, list[tuple[Any, Any]]]
"""What a vector file would hold: the change counter it reflects, the watermark, (slots, rows) parts."""

ReadVectors = Callable[[Sequence[int]], list[tuple[int, bytes | None]]]
"""Stored float32 vector blobs of slots, from SQLite (ascending by slot)."""


def _dot_i8(matrix: npt.NDArray[np.int8], q8: npt.NDArray[np.int8]) -> npt.NDArray[np.float32]:
    """``matrix @ q8`` for int8 rows, exact (integer sums, as float32), one SIMD pass over ``matrix``.

    In the compiled loops when built (faster, and without the GIL), else in simsimd.
    """
    kernel = native.library()
    if kernel is not None:
        return native.i8_dots(kernel, matrix, q8)
    import simsimd

    out = simsimd.cdist(matrix, q8.reshape(1, -1), metric="dot", out_dtype="float32")
    return np.asarray(out, dtype=np.float32).reshape(-1)


class _Rows:
    """Rows ``index`` of a (mapped) matrix, sliced lazily so a writer copies them in chunks."""

    def __init__(self, matrix: Any, index: npt.NDArray[np.int64]) -> None:
        self.matrix, self.index = matrix, index

    def __getitem__(self, part: slice) -> Any:
        return self.matrix[self.index[part]]


class DenseRows:
    """Every live vector of the active space, by slot. Not thread-safe (the store's lock)."""

    def __init__(self, dim: int, capacity: int) -> None:
        self.dim = dim
        width = max(dim, 1)
        self.row_of = np.full(capacity, -1, dtype=np.int64)
        self.base_q = np.zeros((0, width), dtype=np.int8)
        self.base_scale = np.zeros(0, dtype=np.float32)
        self.base_slot = np.zeros(0, dtype=np.int64)
        self.base_live = np.zeros(0, dtype=bool)
        self.base_dead = 0
        self.base_proj: npt.NDArray[np.float32] | None = None
        self.base_low_scale: npt.NDArray[np.float32] | None = None
        self.base_low: npt.NDArray[np.int8] | None = None
        self.read_exact: ReadVectors | None = None
        """Where base rows' float32 vectors are read for rescoring (``None``: int8 scores stay)."""
        self.approximate = False
        """Whether the last :meth:`scores` gave int8 approximations (beyond the ``RESCORE`` best)."""
        self.exact_slots = np.zeros(0, dtype=np.int64)
        """Slots whose score from the last :meth:`scores` is already the exact float32 one."""
        self.rows = np.zeros((64, width), dtype=np.float32)
        self.rows_q = np.zeros((64, width), dtype=np.int8)
        """:attr:`rows` quantized (as a file write would), for the int8 scan of a large in-memory part."""
        self.rows_scale = np.zeros(64, dtype=np.float32)
        self.row_slot = np.zeros(64, dtype=np.int64)
        self.n = 0
        self.changes = 0
        """Bumped by every change; compared with :attr:`saved_changes` to skip rewriting the file."""
        self.saved_changes = -1

    def __len__(self) -> int:
        return len(self.base_slot) - self.base_dead + self.n

    def grow(self, capacity: int) -> None:
        """Make ``row_of`` cover slots below ``capacity``."""
        if capacity > len(self.row_of):
            self.row_of = np.concatenate([self.row_of, np.full(capacity - len(self.row_of), -1, dtype=np.int64)])

    # -- loading ---------------------------------------------------------------------------

    def load(
        self,
        path: Path,
        want: npt.NDArray[np.bool_],
        *,
        tag: str,
        fingerprint: str,
        max_slot: int,
        read_missing: ReadVectors,
    ) -> int:
        """Map the saved vector matrix and read the vectors it lacks; returns how many are unusable.

        ``want[slot]`` marks the documents stored with a vector of the active space. A row of
        the file is used only if its document is still so stored (vectors of one space never
        change, so such a row equals the database's); the file must name this store, the
        active space and no slot the database never issued. Anything else (a missing, foreign
        or outdated file, a version 1 float32 file among them) costs reading those vectors
        through ``read_missing``, which also serves the exact rescoring of queries.
        """
        self.read_exact = read_missing
        try:
            if remove_partial(path):
                log.info("%s: removed a partial vector file", path)
        except OSError as exc:
            log.warning("%s: cannot remove a partial vector file: %s", path, exc)
        have = np.zeros(len(want), dtype=bool)
        if path.exists():
            try:
                vf = read_vectors(path)
                problem = ""
                if vf.tag != tag:
                    problem = "it belongs to another store"
                elif vf.fingerprint != fingerprint or vf.dim != self.dim:
                    problem = f"it holds the space {vf.fingerprint!r}, not {fingerprint!r}"
                elif vf.watermark > max_slot:
                    problem = "it is newer than the database"
                if problem:
                    raise ValueError(f"{path}: {problem}")
            except ValueError as exc:
                log.info("not using the vector file: %s", exc)
            else:
                inside = vf.slots < len(want)
                live = np.zeros(len(vf.slots), dtype=bool)
                live[inside] = want[vf.slots[inside]]
                self.base_q, self.base_scale, self.base_slot, self.base_live = vf.q, vf.scale, vf.slots, live
                self.base_proj, self.base_low_scale, self.base_low = vf.projection, vf.low_scale, vf.projected
                self.base_dead = int(len(live) - live.sum())
                self.row_of[vf.slots[live]] = np.flatnonzero(live)
                have[vf.slots[live]] = True
                self.saved_changes = 0
        need = np.flatnonzero(want & ~have)
        size = 4 * self.dim
        bad = 0
        for start in range(0, len(need), 4096):
            part = need[start : start + 4096].tolist()
            found = [(slot, blob) for slot, blob in read_missing(part) if blob is not None and len(blob) == size]
            bad += len(part) - len(found)
            if found:
                matrix = np.frombuffer(b"".join(b for _, b in found), dtype=np.float32).reshape(-1, self.dim)
                self.append(np.asarray([f[0] for f in found], dtype=np.int64), matrix)
        if len(need):
            self.saved_changes = -1
        return bad

    def adopt(self, vf: VectorFile) -> bool:
        """Serve every row from ``vf``, a vector file written from these rows, and free the in-memory ones.

        A running store otherwise keeps each vector added since it opened as a float32 row in
        memory (scanned in full per query) until it reopens. Taken only when nothing changed
        since the file was captured (:attr:`saved_changes` is :attr:`changes`) and the file
        lists exactly the live rows in :meth:`live_rows` order; returns whether it was taken.
        The in-memory rows were quantized as the file holds them; from now on they are scanned
        as int8 rows and the best of them rescored from the stored vectors, as after a reopen.
        """
        live = np.flatnonzero(self.base_live)
        if not self.n or self.saved_changes != self.changes or vf.dim != self.dim:
            return False
        if len(vf.slots) != len(live) + self.n or not (
            np.array_equal(vf.slots[: len(live)], self.base_slot[live])
            and np.array_equal(vf.slots[len(live) :], self.row_slot[: self.n])
        ):
            return False
        self.base_q, self.base_scale, self.base_slot = vf.q, vf.scale, vf.slots
        self.base_proj, self.base_low_scale, self.base_low = vf.projection, vf.low_scale, vf.projected
        self.base_live = np.ones(len(vf.slots), dtype=bool)
        self.base_dead = 0
        self.row_of[vf.slots] = np.arange(len(vf.slots), dtype=np.int64)
        width = self.rows.shape[1]
        self.rows = np.zeros((64, width), dtype=np.float32)
        self.rows_q = np.zeros((64, width), dtype=np.int8)
        self.rows_scale = np.zeros(64, dtype=np.float32)
        self.row_slot = np.zeros(64, dtype=np.int64)
        self.n = 0
        return True

    # -- changes ---------------------------------------------------------------------------

    def append(self, slots: npt.NDArray[np.int64], vectors: npt.NDArray[np.float32]) -> None:
        """Add rows for ``slots`` to the in-memory part (after the mapped base rows)."""
        need = self.n + len(slots)
        if need > len(self.rows):
            size = max(64, need + need // 4)
            rows = np.zeros((size, self.rows.shape[1]), dtype=np.float32)
            rows[: self.n] = self.rows[: self.n]
            rows_q = np.zeros((size, self.rows.shape[1]), dtype=np.int8)
            rows_q[: self.n] = self.rows_q[: self.n]
            rows_scale = np.zeros(size, dtype=np.float32)
            rows_scale[: self.n] = self.rows_scale[: self.n]
            row_slot = np.zeros(size, dtype=np.int64)
            row_slot[: self.n] = self.row_slot[: self.n]
            self.rows, self.rows_q, self.rows_scale, self.row_slot = rows, rows_q, rows_scale, row_slot
        self.rows[self.n : need] = vectors
        self.rows_q[self.n : need], self.rows_scale[self.n : need] = quantize(self.rows[self.n : need])
        self.row_slot[self.n : need] = slots
        self.row_of[slots] = len(self.base_slot) + np.arange(self.n, need, dtype=np.int64)
        self.n = need
        self.changes += 1

    def drop(self, slot: int) -> None:
        """Forget ``slot``'s row: a mapped row is masked, an in-memory one swapped out."""
        row = int(self.row_of[slot])
        if row < 0:
            return
        self.row_of[slot] = -1
        self.changes += 1
        nb = len(self.base_slot)
        if row < nb:
            self.base_live[row] = False
            self.base_dead += 1
            return
        row -= nb
        last = self.n - 1
        if row != last:
            moved = int(self.row_slot[last])
            self.rows[row] = self.rows[last]
            self.rows_q[row], self.rows_scale[row] = self.rows_q[last], self.rows_scale[last]
            self.row_slot[row] = moved
            self.row_of[moved] = nb + row
        self.n = last

    def live_rows(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int8], npt.NDArray[np.float32]]:
        """Every live row as the file holds it: slots, int8 rows and scales (mapped rows first).

        In-memory float32 rows are quantized as a file write would quantize them.
        """
        live = np.flatnonzero(self.base_live)
        return (
            np.concatenate([self.base_slot[live], self.row_slot[: self.n]]),
            np.concatenate([np.asarray(self.base_q[live]), self.rows_q[: self.n]]),
            np.concatenate([self.base_scale[live], self.rows_scale[: self.n]]),
        )

    # -- queries ---------------------------------------------------------------------------

    def scores(
        self, q: npt.NDArray[np.float32], prefilter: int, *, visible: npt.NDArray[np.bool_] | None = None
    ) -> list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
        """Cosine scores as (slots, scores) parts; each live slot in at most one part.

        ``visible`` (per slot) keeps only a reader's visible documents: the prefilters choose
        their best rows among them, so hidden documents never take a candidate's place.

        A projected base larger than ``prefilter`` rows contributes only the best ``prefilter``
        rows of the projected scan, scored with their full int8 rows; the best ``RESCORE``
        base rows then get exact scores from their float32 vectors. In-memory rows are exact;
        past :data:`MEMORY_SCAN` of them (the documents added since the vector file, up to 5%
        of a large store), an int8 scan picks their best ``prefilter`` and only those are
        scored (and only those get a dense share, as with the projected base): a float32 pass
        over 50k rows read 77 MB per query.
        :attr:`approximate` tells whether other scores are int8 approximations (the fused
        ranking then asks :meth:`exact` for its own best documents).
        """
        parts: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = []
        self.approximate = False
        self.exact_slots = np.zeros(0, dtype=np.int64)
        nb = len(self.base_slot)
        seen = visible
        if visible is not None and len(visible) < len(self.row_of):  # rows of slots the table has not grown to
            seen = np.zeros(len(self.row_of), dtype=bool)
            seen[: len(visible)] = visible
        if nb and self.base_low is not None and self.base_proj is not None and nb > prefilter:
            cand = self._prescan(q, prefilter, None if seen is None else seen[self.base_slot])
            cand = np.sort(cand[self.base_live[cand]])
            approx = (self.base_q[cand].astype(np.float32) @ q) * self.base_scale[cand]
            parts.append(self._rescore(self.base_slot[cand], approx, q))
        elif nb:
            approx = self._scan(q)
            if self.base_dead or seen is not None:
                keep = self.base_live if seen is None else self.base_live & seen[self.base_slot]
                live = np.flatnonzero(keep)
                parts.append(self._rescore(self.base_slot[live], approx[live], q))
            else:
                parts.append(self._rescore(self.base_slot, approx, q))
        if self.n > max(MEMORY_SCAN, prefilter):
            q8, _ = quantize(q.reshape(1, -1))
            approx_rows = _dot_i8(self.rows_q[: self.n], q8[0]) * self.rows_scale[: self.n]
            if seen is not None:
                approx_rows = np.where(seen[self.row_slot[: self.n]], approx_rows, -np.inf).astype(np.float32)
            best = np.sort(top_indices(approx_rows, prefilter))
            if seen is not None:
                best = best[seen[self.row_slot[best]]]
            parts.append((self.row_slot[best], self.rows[best] @ q))
        elif self.n:
            rows = slice(0, self.n)
            if seen is not None:
                keep_rows = np.flatnonzero(seen[self.row_slot[: self.n]])
                parts.append((self.row_slot[keep_rows], self.rows[keep_rows] @ q))
            else:
                parts.append((self.row_slot[rows], self.rows[rows] @ q))
        if self.n and self.approximate:
            self.exact_slots = np.concatenate([self.exact_slots, parts[-1][0]])
        return parts

    def _scan(self, q: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """Approximate scores of every base row (int8 rows, int8 query, one SIMD pass)."""
        q8, qs = quantize(q.reshape(1, -1))
        scores: npt.NDArray[np.float32] = _dot_i8(self.base_q, q8[0]) * (self.base_scale * qs[0])
        return scores

    def _prescan(
        self, q: npt.NDArray[np.float32], prefilter: int, keep: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.int64]:
        """Base rows (indices) of the ``prefilter`` best scores over the projected int8 rows
        (among the rows ``keep`` marks, when given)."""
        assert self.base_low is not None and self.base_proj is not None and self.base_low_scale is not None
        weighted = (q @ self.base_proj) * self.base_low_scale  # x_low ≈ low_scale · low8
        q8, _ = quantize(weighted.reshape(1, -1))
        scores = _dot_i8(self.base_low, q8[0])
        if keep is None:
            return top_indices(scores, prefilter)
        rows = np.flatnonzero(keep)
        return rows[top_indices(scores[rows], min(prefilter, len(rows)))]

    def _rescore(
        self, slots: npt.NDArray[np.int64], approx: npt.NDArray[np.float32], q: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Replace the ``RESCORE`` best int8 scores with exact ones from the stored float32 vectors."""
        self.approximate = True
        top = top_indices(approx, RESCORE)
        found, exact = self.exact(slots[top], q)
        approx[top[found]] = exact
        self.exact_slots = slots[top[found]]
        return slots, approx

    def exact(
        self, slots: npt.NDArray[np.int64], q: npt.NDArray[np.float32]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """Exact scores of ``slots`` from their stored float32 vectors: (positions in ``slots``, scores).

        Only slots with a row of the active space count (their stored vector is that row's);
        none without a reader.
        """
        none = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        if self.read_exact is None or not len(slots):
            return none
        slots = np.asarray(slots, dtype=np.int64)
        inside = slots < len(self.row_of)
        keep = np.flatnonzero(inside)[self.row_of[slots[inside]] >= 0]
        if not len(keep):
            return none
        size = 4 * self.dim
        wanted = np.sort(slots[keep])
        found = {int(s): b for s, b in self.read_exact(wanted.tolist()) if b is not None and len(b) == size}
        hit = [int(i) for i in keep if int(slots[i]) in found]
        if not hit:
            return none
        matrix = np.frombuffer(b"".join(found[int(slots[i])] for i in hit), dtype=np.float32).reshape(-1, self.dim)
        return np.asarray(hit, dtype=np.int64), (matrix @ q).astype(np.float32)

    # -- the file --------------------------------------------------------------------------

    def parts(self, watermark: int) -> VectorParts | None:
        """What the vector file would hold now (``None`` when it is current).

        The mapped base is never modified and the in-memory rows are copied, so a writer
        thread can save them while the store keeps changing.
        """
        if self.saved_changes == self.changes:
            return None
        live = np.flatnonzero(self.base_live)
        parts: list[tuple[Any, Any]] = []
        if len(live):
            whole = len(live) == len(self.base_slot)
            rows = QuantRows(self.base_q, self.base_scale) if whole else QuantRows(
                _Rows(self.base_q, live), self.base_scale[live]
            )
            parts.append((self.base_slot[live], rows))
        if self.n:
            parts.append((self.row_slot[: self.n].copy(), self.rows[: self.n].copy()))
        return self.changes, watermark, parts

    @staticmethod
    def save(path: Path, parts: VectorParts, *, tag: str, fingerprint: str, dim: int) -> int:
        """Write ``parts`` to the vector file ``path``; returns the change counter it reflects."""
        changes, watermark, chunks = parts
        write_vectors(path, tag=tag, fingerprint=fingerprint, dim=dim, watermark=watermark, parts=chunks)
        return changes
