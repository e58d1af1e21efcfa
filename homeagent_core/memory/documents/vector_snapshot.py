"""On-disk int8 matrix of the document store's dense vectors, memory-mapped on open.

Why: reading every vector out of SQLite on start-up costs most of a cold start at 100k
documents (150 MB of 384-d float32 blobs parsed row by row), and mapping a float32 copy made a
1M-document store's vectors 1.5 GB of the serving process. The file beside the database holds
every vector quantized to int8 with one scale per vector (``x ≈ scale · q``, ``scale =
max|x| / 127``): a quarter of the bytes, mapped, so only pages a query touches are read. The
exact float32 vectors stay in SQLite; a query rescores its best rows with them
(:class:`~homeagent_core.memory.documents.vectors.DenseRows`).

Layout (format version 2): an 8-byte magic, a little-endian ``u32`` header length, a JSON
header (format version, the owning store's tag, the embedding fingerprint and dimension, the
watermark = highest slot the database had issued when the file was written, the row count, the
projected dimension ``k``), then sections each padded to a 64-byte boundary: ``rows`` slots
(``int64``), ``rows`` scales (``float32``), the ``rows × dim`` ``int8`` matrix; for large files
(``PROJECT_MIN_ROWS`` rows or more, ``dim`` above ``PROJECT_DIM``) then a ``dim × k`` projection
(``float32``, the sample's top right singular vectors), ``k`` per-dimension scales of the
projected rows (``float32``) and the ``rows × k`` projected rows (``int8``): the compact copy a
query scans first. A version 1 file (float32 rows) is refused by its header, so the store
reads the vectors from SQLite and writes a new file.

Why a projection rather than an ANN index: a scan is bound by memory bandwidth; 64 int8 bytes
per row are a sixth of the full int8 row, and the best rows of that scan are then scored with
their full rows. It costs no work per insert (an HNSW index, usearch, took 60–270 s to build
for 100k rows on this machine) and keeps the file a plain matrix. Writes go to ``<name>.tmp``,
are fsynced and renamed over the old file, and the folder is fsynced, as the lexical snapshot
does: a crash leaves the previous file or the new one. The file is a cache: SQLite stays the
only durable record, and the store re-reads from SQLite any vector the file lacks (see
:meth:`~homeagent_core.memory.documents.store.DocumentStore`).
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

from homeagent_core.memory.documents.lexical.snapshot import remove_partial, tmp_path
from homeagent_sdk._atomic import atomic_file

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["QuantRows", "VectorFile", "quantize", "read_vectors", "remove_partial", "write_vectors"]

MAGIC = b"HAVECS\x00\x01"
VERSION = 2
_ALIGN = 64
PROJECT_MIN_ROWS = 20_000
"""Files with at least this many rows also hold projected rows."""
PROJECT_DIM = 64
"""Dimension of the projected rows."""
_SAMPLE = 4096
_LOW_HEADROOM = 1.5
"""Projected rows' scale: this much above the sample's largest value (larger values are clipped)."""


@dataclass(slots=True, frozen=True)
class VectorFile:
    """A mapped vector file: ``scale[i] · q[i]`` approximates the vector of document ``slots[i]``."""

    tag: str
    fingerprint: str
    dim: int
    watermark: int
    slots: npt.NDArray[np.int64]
    scale: npt.NDArray[np.float32]
    q: npt.NDArray[np.int8]
    projection: npt.NDArray[np.float32] | None = None
    """``dim × k``: ``(scale · q) @ projection ≈ low_scale · projected`` (``None`` in small files)."""
    low_scale: npt.NDArray[np.float32] | None = None
    projected: npt.NDArray[np.int8] | None = None


@dataclass(slots=True, frozen=True)
class QuantRows:
    """Rows already quantized (a mapped file's), copied into a new file as they are."""

    q: Any
    """Sliceable into ``int8`` blocks of ``dim`` columns."""
    scale: Any
    """Sliceable into the matching ``float32`` scales."""


def quantize(rows: Any) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Symmetric int8 quantization with one scale per row: ``rows ≈ scale[:, None] · q``.

    Deterministic, so a row quantized twice (once when its file was written, once in a check)
    gives the same bytes. An all-zero row gets scale 0 and zeros.
    """
    x = np.asarray(rows, dtype=np.float32)
    scale = (np.abs(x).max(axis=1) / np.float32(127)).astype(np.float32) if x.shape[1] else np.zeros(len(x), np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))
    q = np.clip(np.rint(x / safe[:, None]), -127, 127).astype(np.int8)
    return q, scale


def _blocks(chunks: list[tuple[npt.NDArray[np.int64], Any]], step: int) -> Iterable[tuple[Any, Any]]:
    """Every row as ``(int8 block, scales)``, in file order, ``step`` rows at a time."""
    for slots, rows in chunks:
        for start in range(0, len(slots), step):
            if isinstance(rows, QuantRows):
                yield np.asarray(rows.q[start : start + step], dtype=np.int8), np.asarray(
                    rows.scale[start : start + step], dtype=np.float32
                )
            else:
                yield quantize(rows[start : start + step])


def _fit_projection(
    chunks: list[tuple[npt.NDArray[np.int64], Any]], rows: int
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """Top ``PROJECT_DIM`` right singular vectors of an evenly spread sample, and the projected scales.

    Uncentred, because the search scores inner products: the projection keeps the directions
    that carry most of the rows' energy, so a query's best rows stay among the best projected.
    Each projected dimension gets its own int8 scale (the leading directions carry far larger
    values than the last ones), set from the sample with headroom.
    """
    step = max(1, rows // _SAMPLE)
    picked: list[np.ndarray] = []
    for _, part in chunks:
        if isinstance(part, QuantRows):
            q, scale = np.asarray(part.q[::step], np.int8), np.asarray(part.scale[::step], np.float32)
        else:
            q, scale = quantize(part[::step])
        picked.append(q.astype(np.float32) * scale[:, None])
    sample = np.concatenate(picked)[:_SAMPLE]
    _, _, vt = np.linalg.svd(sample.astype(np.float64), full_matrices=False)
    projection = np.ascontiguousarray(vt[:PROJECT_DIM].T, dtype=np.float32)
    peak = np.abs(sample @ projection).max(axis=0) * _LOW_HEADROOM
    low_scale = (np.where(peak > 0, peak, 1.0) / 127).astype(np.float32)
    return projection, low_scale


def _pad(n: int) -> int:
    return n + (-n % _ALIGN)


def _offsets(head: int, rows: int, dim: int, k: int) -> dict[str, int]:
    """Byte offsets of each section (and ``end``, the file size)."""
    at = {"slots": _pad(head)}
    at["scale"] = at["slots"] + _pad(rows * 8)
    at["q"] = at["scale"] + _pad(rows * 4)
    at["projection"] = at["q"] + _pad(rows * dim)
    at["low_scale"] = at["projection"] + (_pad(dim * k * 4) if k else 0)
    at["low"] = at["low_scale"] + (_pad(k * 4) if k else 0)
    at["end"] = at["low"] + (rows * k if k else 0)
    return at


def write_vectors(
    path: Path,
    *,
    tag: str,
    fingerprint: str,
    dim: int,
    watermark: int,
    parts: Iterable[tuple[npt.NDArray[np.int64], Any]],
) -> int:
    """Write ``(slots, rows)`` parts to ``path`` atomically; returns the row count.

    ``rows`` are float32 vectors (quantized here) or :class:`QuantRows` (copied). Parts are
    streamed (a mapped matrix is copied chunk by chunk, never whole into memory).
    """
    chunks = [(np.ascontiguousarray(s, dtype="<i8"), m) for s, m in parts]
    rows = sum(len(s) for s, _ in chunks)
    k = PROJECT_DIM if rows >= PROJECT_MIN_ROWS and dim > PROJECT_DIM else 0
    projection, low_scale = _fit_projection(chunks, rows) if k else (None, None)
    header = json.dumps(
        {"version": VERSION, "tag": tag, "fingerprint": fingerprint, "dim": int(dim),
         "watermark": int(watermark), "rows": int(rows), "projected": k, "quantized": "int8-row"}
    ).encode()
    head = MAGIC + struct.pack("<I", len(header)) + header
    at = _offsets(len(head), rows, dim, k)
    with atomic_file(path, tmp=tmp_path(path)) as fh:
        fd = fh.fileno()
        os.ftruncate(fd, at["end"])
        os.pwrite(fd, head, 0)
        done = 0
        for slots, _ in chunks:
            os.pwrite(fd, slots.data, at["slots"] + 8 * done)
            done += len(slots)
        step = max(1, (1 << 22) // max(1, 4 * dim))
        done = 0
        for q, scale in _blocks(chunks, step):
            if q.shape[1:] != (dim,):
                raise ValueError(f"vector block has shape {q.shape}, expected (n, {dim})")
            os.pwrite(fd, np.ascontiguousarray(scale, dtype="<f4").data, at["scale"] + 4 * done)
            os.pwrite(fd, np.ascontiguousarray(q).data, at["q"] + dim * done)
            if projection is not None and low_scale is not None:
                low = (q.astype(np.float32) * scale[:, None]) @ projection / low_scale
                low8 = np.clip(np.rint(low), -127, 127).astype(np.int8)
                os.pwrite(fd, np.ascontiguousarray(low8).data, at["low"] + k * done)
            done += len(q)
        if projection is not None and low_scale is not None:
            os.pwrite(fd, projection.astype("<f4").data, at["projection"])
            os.pwrite(fd, low_scale.astype("<f4").data, at["low_scale"])
    return rows


def read_vectors(path: Path) -> VectorFile:
    """Map a vector file read-only after checking its header and size.

    Raises:
        ValueError: the file is missing, of another format or version (a version 1 float32
            file among them), or truncated.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC) + 4)
            if len(head) < len(MAGIC) + 4 or head[: len(MAGIC)] != MAGIC:
                raise ValueError(f"{path}: not a vector file of version {VERSION}")
            (size,) = struct.unpack("<I", head[len(MAGIC) :])
            try:
                meta = json.loads(fh.read(size))
                version = meta.get("version")
                tag, fingerprint = str(meta["tag"]), str(meta["fingerprint"])
                dim, watermark, rows = int(meta["dim"]), int(meta["watermark"]), int(meta["rows"])
                k = int(meta.get("projected", 0))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path}: unreadable vector file header: {exc}") from exc
            if version != VERSION or meta.get("quantized") != "int8-row" or dim <= 0 or rows < 0 or k < 0:
                raise ValueError(f"{path}: vector file version {version} is not {VERSION} (int8 rows)")
        at = _offsets(len(MAGIC) + 4 + size, rows, dim, k)
        actual = path.stat().st_size
        if actual != at["end"]:
            raise ValueError(f"{path}: vector file has {actual} bytes, its header says {at['end']}")
        if rows == 0:
            return VectorFile(
                tag, fingerprint, dim, watermark, np.zeros(0, np.int64), np.zeros(0, np.float32),
                np.zeros((0, dim), np.int8),
            )
        slots = np.array(np.memmap(path, dtype="<i8", mode="r", offset=at["slots"], shape=(rows,)), dtype=np.int64)
        scale = np.array(np.memmap(path, dtype="<f4", mode="r", offset=at["scale"], shape=(rows,)), dtype=np.float32)
        # plain views of the mappings: memmap slicing is slow
        q = np.memmap(path, dtype=np.int8, mode="r", offset=at["q"], shape=(rows, dim)).view(np.ndarray)
        projection = low_scale = projected = None
        if k:
            projection = np.array(
                np.memmap(path, dtype="<f4", mode="r", offset=at["projection"], shape=(dim, k)), np.float32
            )
            low_scale = np.array(np.memmap(path, dtype="<f4", mode="r", offset=at["low_scale"], shape=(k,)), np.float32)
            projected = np.memmap(path, dtype=np.int8, mode="r", offset=at["low"], shape=(rows, k)).view(np.ndarray)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the vector file: {exc}") from exc
    if len(slots) and (int(slots.min()) <= 0 or int(slots.max()) > watermark):
        raise ValueError(f"{path}: vector file names slots outside 1..{watermark}")
    return VectorFile(tag, fingerprint, dim, watermark, slots, scale, q, projection, low_scale, projected)
