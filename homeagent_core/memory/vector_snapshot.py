"""On-disk matrix of the document store's dense vectors, memory-mapped on open.

Why: reading every vector out of SQLite on start-up costs most of a cold start at 100k
documents (150 MB of 384-d float32 blobs parsed row by row). The matrix saved beside the
database is mapped instead; only pages a query touches are read, by the kernel.

Layout: an 8-byte magic, a little-endian ``u32`` header length, a JSON header (format
version, the owning store's tag, the embedding fingerprint and dimension, the watermark =
highest slot the database had issued when the file was written, the row count), zero padding
to a 64-byte boundary, then ``rows`` slots (``int64``) and the ``rows × dim`` ``float32``
matrix; for large files (``PROJECT_MIN_ROWS`` rows or more, ``dim`` above ``PROJECT_DIM``) then a
``dim × k`` projection (the sample's top right singular vectors) and the ``rows × k`` projected
rows, the compact copy a query scans first (:meth:`DocumentStore.search`).

Why a projection rather than an ANN index: a scan of 100k × 384 float32 rows is bound by memory
bandwidth (about 14 ms here); the 64-d projected rows are a sixth of the bytes (1.5 ms), and the
best 512 of them are then scored with their full vectors. It costs no work per insert (an HNSW
index, usearch, took 60–270 s to build for 100k rows on this machine) and keeps the file a
plain matrix. Writes go to ``<name>.tmp``, are fsynced and renamed over the old file, and the
folder is fsynced, as the lexical snapshot does: a crash leaves the previous file or the new one. The
file is a cache: SQLite stays the only durable record, and the store re-reads from SQLite any
vector the file lacks (see :meth:`~homeagent_core.memory.documents.DocumentStore`).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from homeagent_core.memory.lexical_snapshot import remove_partial, tmp_path

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["VectorFile", "read_vectors", "remove_partial", "write_vectors"]

MAGIC = b"HAVECS\x00\x01"
VERSION = 1
_ALIGN = 64
PROJECT_MIN_ROWS = 20_000
"""Files with at least this many rows also hold projected rows."""
PROJECT_DIM = 64
"""Dimension of the projected rows."""
_SAMPLE = 4096


@dataclass(slots=True, frozen=True)
class VectorFile:
    """A mapped vector file: ``matrix[i]`` is the vector of document ``slots[i]``."""

    tag: str
    fingerprint: str
    dim: int
    watermark: int
    slots: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    projection: npt.NDArray[np.float32] | None = None
    """``dim × k``: ``matrix @ projection`` gives ``projected`` (``None`` in small files)."""
    projected: npt.NDArray[np.float32] | None = None


def _fit_projection(chunks: list[tuple[npt.NDArray[np.int64], Any]], rows: int, dim: int) -> npt.NDArray[np.float32]:
    """Top ``PROJECT_DIM`` right singular vectors of an evenly spread sample of the rows.

    Uncentred, because the search scores inner products: the projection keeps the directions
    that carry most of the rows' energy, so a query's best rows stay among the best projected.
    """
    step = max(1, rows // _SAMPLE)
    picked: list[np.ndarray] = []
    for slots, matrix in chunks:
        for i in range(0, len(slots), step):
            picked.append(np.asarray(matrix[i : i + 1], dtype=np.float32))
    sample = np.concatenate(picked)[:_SAMPLE]
    _, _, vt = np.linalg.svd(sample.astype(np.float64), full_matrices=False)
    return np.ascontiguousarray(vt[:PROJECT_DIM].T, dtype=np.float32)


def write_vectors(
    path: Path,
    *,
    tag: str,
    fingerprint: str,
    dim: int,
    watermark: int,
    parts: Iterable[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]],
) -> int:
    """Write ``(slots, rows)`` parts to ``path`` atomically; returns the row count.

    Parts are streamed (a mapped matrix is copied chunk by chunk, never whole into memory).
    """
    chunks = [(np.ascontiguousarray(s, dtype="<i8"), m) for s, m in parts]
    rows = sum(len(s) for s, _ in chunks)
    projection = (
        _fit_projection(chunks, rows, dim) if rows >= PROJECT_MIN_ROWS and dim > PROJECT_DIM else None
    )
    header = json.dumps(
        {"version": VERSION, "tag": tag, "fingerprint": fingerprint, "dim": int(dim),
         "watermark": int(watermark), "rows": int(rows),
         "projected": 0 if projection is None else PROJECT_DIM}
    ).encode()
    head = MAGIC + struct.pack("<I", len(header)) + header
    head += b"\x00" * (-len(head) % _ALIGN)
    tmp = tmp_path(path)
    with open(tmp, "wb") as fh:
        fh.write(head)
        for slots, _ in chunks:
            fh.write(slots.data)
        step = max(1, (1 << 22) // max(1, 4 * dim))
        for slots, matrix in chunks:
            for start in range(0, len(slots), step):
                block = np.ascontiguousarray(matrix[start : start + step], dtype="<f4")
                if block.shape[1:] != (dim,):
                    raise ValueError(f"vector block has shape {block.shape}, expected (n, {dim})")
                fh.write(block.data)
        if projection is not None:
            fh.write(projection.astype("<f4").data)
            for slots, matrix in chunks:
                for start in range(0, len(slots), step):
                    block = np.asarray(matrix[start : start + step], dtype=np.float32) @ projection
                    fh.write(np.ascontiguousarray(block, dtype="<f4").data)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return rows


def read_vectors(path: Path) -> VectorFile:
    """Map a vector file read-only after checking its header and size.

    Raises:
        ValueError: the file is missing, of another format or version, or truncated.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC) + 4)
            if len(head) < len(MAGIC) + 4 or head[: len(MAGIC)] != MAGIC:
                raise ValueError(f"{path}: not a vector file of version {VERSION}")
            (size,) = struct.unpack("<I", head[len(MAGIC) :])
            try:
                meta = json.loads(fh.read(size))
                tag, fingerprint = str(meta["tag"]), str(meta["fingerprint"])
                dim, watermark, rows = int(meta["dim"]), int(meta["watermark"]), int(meta["rows"])
                k = int(meta.get("projected", 0))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path}: unreadable vector file header: {exc}") from exc
            if meta.get("version") != VERSION or dim <= 0 or rows < 0 or k < 0:
                raise ValueError(f"{path}: vector file version {meta.get('version')} is not {VERSION}")
        offset = len(MAGIC) + 4 + size
        offset += -offset % _ALIGN
        expected = offset + rows * 8 + rows * dim * 4 + (dim * k + rows * k) * 4
        actual = path.stat().st_size
        if actual != expected:
            raise ValueError(f"{path}: vector file has {actual} bytes, its header says {expected}")
        if rows == 0:
            return VectorFile(tag, fingerprint, dim, watermark, np.zeros(0, np.int64), np.zeros((0, dim), np.float32))
        slots = np.array(np.memmap(path, dtype="<i8", mode="r", offset=offset, shape=(rows,)), dtype=np.int64)
        mapped = np.memmap(path, dtype="<f4", mode="r", offset=offset + rows * 8, shape=(rows, dim))
        matrix = mapped.view(np.ndarray)  # a plain view of the mapping: memmap slicing is slow
        projection = projected = None
        if k:
            at = offset + rows * 8 + rows * dim * 4
            projection = np.array(np.memmap(path, dtype="<f4", mode="r", offset=at, shape=(dim, k)), np.float32)
            low = np.memmap(path, dtype="<f4", mode="r", offset=at + dim * k * 4, shape=(rows, k))
            projected = low.view(np.ndarray)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the vector file: {exc}") from exc
    if len(slots) and (int(slots.min()) <= 0 or int(slots.max()) > watermark):
        raise ValueError(f"{path}: vector file names slots outside 1..{watermark}")
    return VectorFile(tag, fingerprint, dim, watermark, slots, matrix, projection, projected)
