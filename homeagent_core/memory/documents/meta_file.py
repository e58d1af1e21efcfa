"""Per-document numbers the document store needs on open, saved beside the database.

Why: with the vectors and the lexical snapshot memory-mapped, reading one row per document out
of SQLite (slot, time, source, vector space, gram count) was the largest part of opening a
store of 100k documents. This file holds those columns as arrays for every document up to a
watermark (the highest slot the database had issued when it was written); opening reads the
rows above it from SQLite.

It is a cache with a strict validity rule: the store keeps an ``edits`` counter in SQLite,
bumped in the same transaction as every change to a row below the newest slot (a delete, a
re-embedded vector, re-derived terms). The file is used only if it names this store, carries
the current ``edits`` value and a watermark the database has issued; otherwise the store reads
every row from SQLite, as it did before. Written like the other snapshots: a temporary file,
fsync, rename, fsync of the folder.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.memory.documents.lexical.snapshot import tmp_path
from homeagent_sdk._atomic import atomic_file

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["DocMeta", "read_meta", "write_meta"]

MAGIC = b"HADOCM\x00\x01"
VERSION = 2  # 2: each document's mark (person, visibility)
_FIELDS: tuple[tuple[str, str], ...] = (
    ("slots", "<i8"),
    ("created", "<f8"),
    ("source", "<i4"),
    ("space", "<i4"),
    ("lengths", "<i8"),
    ("mark", "<i4"),
)


@dataclass(slots=True, frozen=True)
class DocMeta:
    """Columns of the documents up to ``watermark``; ``source`` / ``space`` / ``mark`` index the name lists
    (``marks``: ``(person, visibility)`` pairs)."""

    tag: str
    edits: int
    watermark: int
    sources: list[str]
    spaces: list[str]
    slots: npt.NDArray[np.int64]
    created: npt.NDArray[np.float64]
    source: npt.NDArray[np.int32]
    space: npt.NDArray[np.int32]
    lengths: npt.NDArray[np.int64]
    marks: list[tuple[str, str]]
    mark: npt.NDArray[np.int32]


def write_meta(path: Path, meta: DocMeta) -> None:
    """Write ``meta`` to ``path`` atomically."""
    blobs = [np.ascontiguousarray(getattr(meta, name), dtype=dtype) for name, dtype in _FIELDS]
    if len({len(b) for b in blobs}) > 1:
        raise ValueError("document meta columns differ in length")
    header = json.dumps(
        {"version": VERSION, "tag": meta.tag, "edits": int(meta.edits), "watermark": int(meta.watermark),
         "rows": len(blobs[0]), "sources": meta.sources, "spaces": meta.spaces,
         "marks": [list(m) for m in meta.marks]},
        ensure_ascii=False,
    ).encode()
    with atomic_file(path, tmp=tmp_path(path)) as fh:
        fh.write(MAGIC + struct.pack("<I", len(header)) + header)
        for blob in blobs:
            fh.write(blob.data)


def read_meta(path: Path) -> DocMeta:
    """Read and check a meta file.

    Raises:
        ValueError: the file is missing, of another format, truncated, or inconsistent.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from exc
    head = len(MAGIC) + 4
    if len(data) < head or data[: len(MAGIC)] != MAGIC:
        raise ValueError(f"{path}: not a document meta file of version {VERSION}")
    (size,) = struct.unpack("<I", data[len(MAGIC) : head])
    try:
        info = json.loads(data[head : head + size])
        tag, edits, watermark, rows = str(info["tag"]), int(info["edits"]), int(info["watermark"]), int(info["rows"])
        sources, spaces = [str(s) for s in info["sources"]], [str(s) for s in info["spaces"]]
        marks = [(str(m[0]), str(m[1])) for m in info["marks"]]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: unreadable header: {exc}") from exc
    if info.get("version") != VERSION or rows < 0:
        raise ValueError(f"{path}: version {info.get('version')} is not {VERSION}")
    offset = head + size
    if len(data) != offset + rows * sum(int(dtype[-1]) for _, dtype in _FIELDS):
        raise ValueError(f"{path}: size does not match its header")
    cols: list[np.ndarray] = []
    for _, dtype in _FIELDS:
        cols.append(np.frombuffer(data, dtype=dtype, count=rows, offset=offset).astype(dtype[1:]))
        offset += rows * int(dtype[-1])
    slots, created, source, space, lengths, mark = cols
    if rows and (
        int(slots.min()) <= 0 or int(slots.max()) > watermark or np.any(np.diff(slots) <= 0)
        or int(source.min()) < 0 or int(source.max()) >= len(sources)
        or int(space.min()) < 0 or int(space.max()) >= len(spaces)
        or int(mark.min()) < 0 or int(mark.max()) >= len(marks)
    ):
        raise ValueError(f"{path}: columns are out of range")
    return DocMeta(tag, edits, watermark, sources, spaces, slots, created, source, space, lengths, marks, mark)
