"""On-disk snapshot of the lexical index's base segment.

Layout: an 8-byte magic, a little-endian ``u32`` header length, a JSON header (format version,
the owning store's tag, the watermark = highest slot covered, the width of a term id, array
sizes and a crc32 per array), then the raw little-endian arrays: postings per bucket
(``int32``), posting slots (``int32``), posting term counts (``uint8``, saturating at 255),
the forward lists (distinct terms per slot, ``int32``, then every slot's term ids, ``uint16``
when the store uses at most 65,536 buckets, else ``uint32``, and term counts, ``uint8``, in
slot order; :mod:`homeagent_core.memory.lexical_forward`), the bucket of each term id
(``uint32``) and document lengths by slot (``float32``). A file of an older version (its
magic's last byte) is refused, and the store rebuilds its index from the database. Writes go
to ``<name>.tmp`` in chunks, are fsynced and renamed over the old snapshot, and the folder is
fsynced: a crash at any point leaves either the previous snapshot or the new one, plus at most
a partial ``.tmp`` that readers ignore and :func:`remove_partial` deletes. Reads check the magic, sizes and checksums,
so a damaged file is refused rather than half-loaded.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["SnapshotArrays", "read_snapshot", "remove_partial", "tmp_path", "verify_arrays", "write_snapshot"]

MAGIC = b"HALEXSN\x04"
VERSION = 4
_CHUNK = 1 << 20
_MAPPED = frozenset({"slots", "tfs", "fwd_terms", "fwd_tfs"})  # the large arrays, memory-mapped when not verified


def _fields(term_width: int) -> tuple[tuple[str, str], ...]:
    """The arrays of a snapshot in file order, with their dtypes (term ids of ``term_width`` bytes)."""
    return (
        ("counts", "<i4"),
        ("slots", "<i4"),
        ("tfs", "|u1"),
        ("fwd_counts", "<i4"),
        ("fwd_terms", f"<u{term_width}"),
        ("fwd_tfs", "|u1"),
        ("term_buckets", "<u4"),
        ("lengths", "<f4"),
    )


@dataclass(slots=True, frozen=True)
class SnapshotArrays:
    """What a snapshot holds. ``counts[b]`` postings of bucket ``b`` come next in ``slots``."""

    tag: str
    watermark: int
    counts: npt.NDArray[np.int32]
    slots: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.uint8]
    lengths: npt.NDArray[np.float32]
    fwd_counts: npt.NDArray[np.int32]
    """Distinct terms of each slot up to the watermark; its terms come next in ``fwd_terms``."""
    fwd_terms: Sequence[npt.NDArray[np.integer]]
    """Forward lists (each slot's term ids, slot by slot), possibly in several parts."""
    fwd_tfs: Sequence[npt.NDArray[np.uint8]]
    term_buckets: npt.NDArray[np.uint32]
    """The bucket of each term id."""
    clean: bool = False
    """True when ``slots`` name exactly the slots with a non-zero length (no dead postings)."""
    unchecked: tuple[tuple[str, int, int, int], ...] = ()
    """Arrays mapped without checking their crc32 yet: (field name, expected crc32, file offset, bytes)."""
    source: IO[bytes] | None = None
    """The file the unchecked arrays were mapped from, opened with the mapping (so a snapshot
    renamed over the path since is not the one checked); :func:`verify_arrays` closes it."""


def tmp_path(path: Path) -> Path:
    """Where a snapshot of ``path`` is written before it is renamed into place."""
    return path.with_name(path.name + ".tmp")


def remove_partial(path: Path) -> bool:
    """Delete a partial snapshot left by a crash mid-write; returns whether one was removed.

    A partial file that cannot be removed is left alone: readers never look at it.
    """
    try:
        tmp_path(path).unlink()
    except OSError:
        return False
    return True


def write_snapshot(path: Path, arrays: SnapshotArrays) -> None:
    """Write ``arrays`` to ``path`` atomically (tmp file, fsync, rename, fsync the folder)."""
    width = 2 if len(arrays.term_buckets) <= 1 << 16 else 4
    fields: list[list[np.ndarray]] = []
    for name, dtype in _fields(width):
        value = getattr(arrays, name)
        parts = list(value) if isinstance(value, (list, tuple)) else [value]
        fields.append([np.ascontiguousarray(p, dtype=dtype) for p in parts])
    crcs = []
    for parts in fields:
        crc = 0
        for part in parts:
            crc = zlib.crc32(part.data, crc)
        crcs.append(crc)
    header = json.dumps(
        {
            "version": VERSION,
            "tag": arrays.tag,
            "watermark": int(arrays.watermark),
            "clean": bool(arrays.clean),
            "term_width": width,
            "sizes": [sum(len(p) for p in parts) for parts in fields],
            "crc32": crcs,
        }
    ).encode()
    tmp = tmp_path(path)
    with open(tmp, "wb") as fh:
        fh.write(MAGIC + struct.pack("<I", len(header)) + header)
        for parts in fields:
            for part in parts:
                view = part.data.cast("B")
                for start in range(0, len(view), _CHUNK):
                    fh.write(view[start : start + _CHUNK])
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_snapshot(path: Path, *, verify: bool = True) -> SnapshotArrays:
    """Read a snapshot, checking its structure; with ``verify`` also every array's checksum.

    With ``verify=False`` the posting arrays are memory-mapped (read-only) instead of read, so
    opening costs no pass over them; :func:`verify_snapshot` checks their checksums later. A
    snapshot file is complete whenever it exists under its name (written to a temporary file
    and renamed), so the checksums guard against damage on disk, not against a crash.

    Raises:
        ValueError: the file is missing, truncated, of another format or version, or damaged.
    """
    source: IO[bytes] | None = None
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC) + 4)
            if len(head) < len(MAGIC) + 4 or head[: len(MAGIC)] != MAGIC:
                raise ValueError(f"{path}: not a lexical snapshot of version {VERSION}")
            (size,) = struct.unpack("<I", head[len(MAGIC) :])
            try:
                meta = json.loads(fh.read(size))
                sizes, crcs = meta["sizes"], meta["crc32"]
                tag, watermark = str(meta["tag"]), int(meta["watermark"])
                clean = meta.get("clean") is True
                width = meta.get("term_width")
            except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path}: unreadable snapshot header: {exc}") from exc
            if meta.get("version") != VERSION or width not in (2, 4) or len(sizes) != len(_fields(width)):
                raise ValueError(f"{path}: snapshot version {meta.get('version')} is not {VERSION}")
            fields = _fields(width)
            offset = len(MAGIC) + 4 + size
            expected = offset + sum(int(n) * int(dtype[-1]) for (_, dtype), n in zip(fields, sizes, strict=True))
            if os.fstat(fh.fileno()).st_size != expected:
                raise ValueError(f"{path}: snapshot is truncated or has trailing bytes")
            out: list[np.ndarray] = []
            unchecked: list[tuple[str, int, int, int]] = []
            for (name, dtype), count, crc in zip(fields, sizes, crcs, strict=True):
                count = int(count)
                if not verify and name in _MAPPED and count:
                    # mapped through this descriptor, which the later check reads: the same file
                    # even if a newer snapshot is renamed over the path meanwhile
                    mapped = np.memmap(fh, dtype=dtype, mode="r", offset=offset, shape=(count,))
                    arr: np.ndarray = mapped.view(np.ndarray)  # plain views: memmap slicing is slow
                    unchecked.append((name, int(crc), offset, count * int(dtype[-1])))
                else:
                    fh.seek(offset)
                    arr = np.fromfile(fh, dtype=dtype, count=count)
                    if len(arr) != count:
                        raise ValueError(f"{path}: snapshot is truncated in {name}")
                    if zlib.crc32(arr.data) != crc:
                        raise ValueError(f"{path}: snapshot checksum of {name} does not match")
                offset += count * int(dtype[-1])
                out.append(arr.astype(dtype[1:], copy=False))
            if unchecked:
                source = os.fdopen(os.dup(fh.fileno()), "rb", buffering=0)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the snapshot: {exc}") from exc
    counts, slots, tfs, fwd_counts, fwd_terms, fwd_tfs, term_buckets, lengths = out
    if int(counts.sum(dtype=np.int64)) != len(slots) or len(tfs) != len(slots) or np.any(counts < 0):
        raise ValueError(f"{path}: snapshot posting counts do not add up")
    if (
        int(fwd_counts.sum(dtype=np.int64)) != len(fwd_terms) or len(fwd_tfs) != len(fwd_terms)
        or np.any(fwd_counts < 0) or len(fwd_counts) > watermark + 1
    ):
        raise ValueError(f"{path}: snapshot forward lists do not add up")
    if verify and len(slots) and (int(slots.min()) < 0 or int(slots.max()) > watermark):
        raise ValueError(f"{path}: snapshot postings name slots outside 0..{watermark}")
    if verify and len(fwd_terms) and int(fwd_terms.max()) >= len(term_buckets):
        raise ValueError(f"{path}: snapshot forward lists name term ids beyond its {len(term_buckets)} terms")
    if len(lengths) > watermark + 1:
        raise ValueError(f"{path}: snapshot lists lengths beyond its watermark {watermark}")
    return SnapshotArrays(
        tag, watermark, counts, slots, tfs, lengths, fwd_counts, [fwd_terms], [fwd_tfs], term_buckets, clean,
        tuple(unchecked), source,
    )


def _source_crc(source: IO[bytes], name: str, offset: int, size: int, watermark: int) -> int:
    """crc32 of ``size`` bytes at ``offset`` of ``source``, read in chunks; posting slots are range-checked too."""
    buf = bytearray(_CHUNK)  # one reused buffer: no allocation per chunk
    view = memoryview(buf)
    found, done = 0, 0
    while done < size:
        got = os.preadv(source.fileno(), [view[: min(_CHUNK, size - done)]], offset + done)
        if not got:
            raise ValueError(f"snapshot is truncated in {name}")
        if name == "slots":
            part = np.frombuffer(buf, dtype="<i4", count=got // 4)
            if len(part) and (int(part.min()) < 0 or int(part.max()) > watermark):
                raise ValueError(f"snapshot postings name slots outside 0..{watermark}")
        found = zlib.crc32(view[:got], found)
        done += got
    return found


def verify_arrays(arrays: SnapshotArrays) -> None:
    """Check the crc32 of the arrays :func:`read_snapshot` mapped unchecked (a full read).

    The mapped file is read with plain reads through the descriptor opened with the mapping,
    not through the mapping: a pass over the mapping would make every page of the snapshot
    resident in this process (and fault it in while the first queries run), while queries
    touch only a small part of it. The descriptor is closed afterwards.

    Raises:
        ValueError: an array's checksum does not match, or posting slots lie outside the watermark.
    """
    source = arrays.source
    try:
        for name, crc, offset, size in arrays.unchecked:
            if source is not None:
                try:
                    found = _source_crc(source, name, offset, size, arrays.watermark)
                except OSError as exc:
                    raise ValueError(f"cannot read the snapshot: {exc}") from exc
            else:
                value = getattr(arrays, name)
                found = zlib.crc32((value[0] if isinstance(value, list) else value).data)
            if found != crc:
                raise ValueError(f"snapshot checksum of {name} does not match")
    finally:
        if source is not None:
            source.close()
    if source is None:
        slots = arrays.slots
        if len(slots) and (int(slots.min()) < 0 or int(slots.max()) > arrays.watermark):
            raise ValueError(f"snapshot postings name slots outside 0..{arrays.watermark}")
