"""On-disk snapshot of the lexical index's base segment.

Layout: an 8-byte magic, a little-endian ``u32`` header length, a JSON header (format version,
the owning store's tag, the watermark = highest slot covered, the width of a term id, array
sizes and a crc32 per array), then the raw little-endian arrays: postings per bucket
(``int32``), posting slots (``int32``), posting term counts (``uint8``, saturating at 255),
the forward lists (distinct terms per slot, ``int32``, then every slot's term ids, ``uint16``
when the store uses at most 65,536 buckets, else ``uint32``, and term counts, ``uint8``, in
slot order; :mod:`homeagent_core.memory.documents.lexical.forward`), the bucket of each term id
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
import weakref
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

from homeagent_sdk._atomic import atomic_file

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "FileArray",
    "SnapshotArrays",
    "read_snapshot",
    "remove_partial",
    "take_ranges",
    "tmp_path",
    "touching_runs",
    "verify_arrays",
    "write_snapshot",
]

MAGIC = b"HALEXSN\x04"
VERSION = 4
_CHUNK = 1 << 20
_ON_DEMAND = frozenset({"slots", "tfs", "fwd_terms", "fwd_tfs"})  # the large arrays, read on demand when not verified


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


class FileArray:
    """A read-only 1-d array in a snapshot file, read with ``pread`` when a query needs part of it.

    Why not a memory mapping (the previous design): pages a query touches in a mapping count as
    the serving process's resident memory, and with the kernel mapping 64–128 kB around every
    touched page, the forward lists of a few hundred random candidates per query made the
    whole file resident within a few hundred queries (3.1 GB at 1M documents). Read this way,
    the file stays in the page cache, shared and reclaimable, and the process holds only what
    a query copied out. The reads cost about what copying the same slices out of a mapping did.

    The descriptor is the array's own (closed when the array is collected), so a newer snapshot
    renamed over the path does not change what it reads.
    """

    __slots__ = ("__weakref__", "_count", "_fd", "_offset", "dtype")

    def __init__(self, fd: int, offset: int, count: int, dtype: str) -> None:
        self._fd, self._offset, self._count = fd, offset, count
        self.dtype = np.dtype(dtype)
        weakref.finalize(self, os.close, fd)

    def __len__(self) -> int:
        return self._count

    def take(self, starts: npt.NDArray[np.int64], lens: npt.NDArray[np.int64]) -> np.ndarray:
        """``self[starts[i] : starts[i] + lens[i]]`` for every ``i``, concatenated; one read per run of touching ranges.

        Raises:
            OSError: the file cannot be read or is shorter than the array.
        """
        total = int(lens.sum())
        out = np.empty(total, dtype=self.dtype)
        if not total:
            return out
        size = self.dtype.itemsize
        run_lo, run_hi = touching_runs(starts, lens)
        run_starts, run_ends = run_lo.tolist(), run_hi.tolist()
        view = memoryview(out.data).cast("B")
        pos = 0
        for lo, hi in zip(run_starts, run_ends, strict=True):
            want = (hi - lo) * size
            if want <= 0:
                continue
            if lo < 0 or hi > self._count:
                raise IndexError(f"range {lo}..{hi} outside an array of {self._count}")
            if os.preadv(self._fd, [view[pos : pos + want]], self._offset + lo * size) != want:
                raise OSError("the snapshot file is shorter than its header says")
            pos += want
        return out

    def read(self) -> np.ndarray:
        """The whole array, in memory."""
        return self.take(np.zeros(1, dtype=np.int64), np.asarray([self._count], dtype=np.int64))

    def __array__(self, dtype: npt.DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        whole = self.read()
        return whole if dtype is None else whole.astype(dtype)


def touching_runs(
    starts: npt.NDArray[np.int64], lens: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Ascending ranges ``starts[i] .. starts[i] + lens[i]`` merged where one ends at the next's
    start: the (start, end) of each run. At least one range."""
    ends = starts + lens
    cut = np.flatnonzero(starts[1:] != ends[:-1]) + 1
    return starts[np.concatenate([[0], cut])], ends[np.concatenate([cut - 1, [len(starts) - 1]])]


def take_ranges(
    array: np.ndarray | FileArray, starts: npt.NDArray[np.int64], lens: npt.NDArray[np.int64]
) -> np.ndarray:
    """``array[starts[i] : starts[i] + lens[i]]`` for every ``i``, concatenated (an array in memory or in a file)."""
    if isinstance(array, FileArray):
        return array.take(starts, lens)
    if len(starts) < 64:  # a few long runs (posting lists): slices
        return np.concatenate([array[lo : lo + n] for lo, n in zip(starts.tolist(), lens.tolist(), strict=True)])
    total = int(lens.sum())
    ends = np.cumsum(lens)
    idx = np.repeat(starts - (ends - lens), lens)
    idx += np.arange(total, dtype=np.int64)
    taken: np.ndarray = array.take(idx)
    return taken


@dataclass(slots=True, frozen=True)
class SnapshotArrays:
    """What a snapshot holds. ``counts[b]`` postings of bucket ``b`` come next in ``slots``."""

    tag: str
    watermark: int
    counts: npt.NDArray[np.int32]
    slots: npt.NDArray[np.int32] | FileArray
    tfs: npt.NDArray[np.uint8] | FileArray
    lengths: npt.NDArray[np.float32]
    fwd_counts: npt.NDArray[np.int32]
    """Distinct terms of each slot up to the watermark; its terms come next in ``fwd_terms``."""
    fwd_terms: Sequence[npt.NDArray[np.integer] | FileArray]
    """Forward lists (each slot's term ids, slot by slot), possibly in several parts."""
    fwd_tfs: Sequence[npt.NDArray[np.uint8] | FileArray]
    term_buckets: npt.NDArray[np.uint32]
    """The bucket of each term id."""
    clean: bool = False
    """True when ``slots`` name exactly the slots with a non-zero length (no dead postings)."""
    unchecked: tuple[tuple[str, int, int, int], ...] = ()
    """Arrays left in the file without checking their crc32 yet: (field name, expected crc32, file offset, bytes)."""
    source: IO[bytes] | None = None
    """The file the unchecked arrays are read from, opened with them (so a snapshot renamed
    over the path since is not the one checked); :func:`verify_arrays` closes it."""


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
    with atomic_file(path, tmp=tmp_path(path)) as fh:
        fh.write(MAGIC + struct.pack("<I", len(header)) + header)
        for parts in fields:
            for part in parts:
                view = part.data.cast("B")
                for start in range(0, len(view), _CHUNK):
                    fh.write(view[start : start + _CHUNK])


def read_snapshot(path: Path, *, verify: bool = True) -> SnapshotArrays:
    """Read a snapshot, checking its structure; with ``verify`` also every array's checksum.

    With ``verify=False`` the posting and forward arrays stay in the file (:class:`FileArray`,
    read on demand), so opening costs no pass over them; :func:`verify_arrays` checks their
    checksums later. A
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
            out: list[np.ndarray | FileArray] = []
            unchecked: list[tuple[str, int, int, int]] = []
            for (name, dtype), count, crc in zip(fields, sizes, crcs, strict=True):
                count = int(count)
                if not verify and name in _ON_DEMAND and count:
                    # read through a descriptor of this file, as is the later check: the same
                    # file even if a newer snapshot is renamed over the path meanwhile
                    out.append(FileArray(os.dup(fh.fileno()), offset, count, dtype))
                    unchecked.append((name, int(crc), offset, count * int(dtype[-1])))
                else:
                    fh.seek(offset)
                    arr = np.fromfile(fh, dtype=dtype, count=count)
                    if len(arr) != count:
                        raise ValueError(f"{path}: snapshot is truncated in {name}")
                    if zlib.crc32(arr.data) != crc:
                        raise ValueError(f"{path}: snapshot checksum of {name} does not match")
                    out.append(arr.astype(dtype[1:], copy=False))
                offset += count * int(dtype[-1])
            if unchecked:
                source = os.fdopen(os.dup(fh.fileno()), "rb", buffering=0)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the snapshot: {exc}") from exc
    slots, tfs, fwd_terms, fwd_tfs = out[1], out[2], out[4], out[5]
    counts, fwd_counts, term_buckets, lengths = (np.asarray(out[i]) for i in (0, 3, 6, 7))
    if int(counts.sum(dtype=np.int64)) != len(slots) or len(tfs) != len(slots) or np.any(counts < 0):
        raise ValueError(f"{path}: snapshot posting counts do not add up")
    if (
        int(fwd_counts.sum(dtype=np.int64)) != len(fwd_terms) or len(fwd_tfs) != len(fwd_terms)
        or np.any(fwd_counts < 0) or len(fwd_counts) > watermark + 1
    ):
        raise ValueError(f"{path}: snapshot forward lists do not add up")
    if isinstance(slots, np.ndarray) and len(slots) and (int(slots.min()) < 0 or int(slots.max()) > watermark):
        raise ValueError(f"{path}: snapshot postings name slots outside 0..{watermark}")
    if isinstance(fwd_terms, np.ndarray) and len(fwd_terms) and int(fwd_terms.max()) >= len(term_buckets):
        raise ValueError(f"{path}: snapshot forward lists name term ids beyond its {len(term_buckets)} terms")
    if len(lengths) > watermark + 1:
        raise ValueError(f"{path}: snapshot lists lengths beyond its watermark {watermark}")
    return SnapshotArrays(
        tag, watermark, counts, slots, tfs, lengths, fwd_counts, [fwd_terms], [fwd_tfs], term_buckets, clean,
        tuple(unchecked), source,
    )


def _source_crc(
    source: IO[bytes], name: str, offset: int, size: int, watermark: int, into: bytearray | None = None
) -> int:
    """crc32 of ``size`` bytes at ``offset`` of ``source``, read in chunks; posting slots are range-checked too.

    With ``into`` (``size`` bytes) the bytes are read there, so the caller keeps them.
    """
    buf = bytearray(_CHUNK)  # one reused buffer: no allocation per chunk
    found, done = 0, 0
    while done < size:
        want = min(_CHUNK, size - done)
        view = memoryview(into)[done : done + want] if into is not None else memoryview(buf)[:want]
        got = os.preadv(source.fileno(), [view], offset + done)
        if not got:
            raise ValueError(f"snapshot is truncated in {name}")
        if name == "slots":
            part = np.frombuffer(view, dtype="<i4", count=got // 4)
            if len(part) and (int(part.min()) < 0 or int(part.max()) > watermark):
                raise ValueError(f"snapshot postings name slots outside 0..{watermark}")
        found = zlib.crc32(view[:got], found)
        done += got
    return found


def verify_arrays(arrays: SnapshotArrays, keep: frozenset[str] = frozenset()) -> dict[str, np.ndarray]:
    """Check the crc32 of the arrays :func:`read_snapshot` left in the file unchecked (a full read).

    The file is read with plain reads through the descriptor opened with the arrays, into one
    reused buffer: the process holds none of it afterwards, while queries read only the small
    parts they need. The arrays named in ``keep`` are read into arrays of their own instead
    and returned, checked, by name (the document store keeps a small store's forward lists in
    memory that way, at no second read). The descriptor is closed afterwards.

    Raises:
        ValueError: an array's checksum does not match, posting slots lie outside the
            watermark, or a kept forward list names a term id the snapshot does not have.
    """
    source = arrays.source
    kept: dict[str, np.ndarray] = {}
    try:
        for name, crc, offset, size in arrays.unchecked:
            if source is not None:
                into = bytearray(size) if name in keep else None
                try:
                    found = _source_crc(source, name, offset, size, arrays.watermark, into)
                except OSError as exc:
                    raise ValueError(f"cannot read the snapshot: {exc}") from exc
                if into is not None:
                    value = getattr(arrays, name)
                    kept[name] = np.frombuffer(into, dtype=(value[0] if isinstance(value, list) else value).dtype)
            else:
                value = getattr(arrays, name)
                found = zlib.crc32(np.asarray(value[0] if isinstance(value, list) else value).data)
            if found != crc:
                raise ValueError(f"snapshot checksum of {name} does not match")
    finally:
        if source is not None:
            source.close()
    if source is None:
        slots = np.asarray(arrays.slots)
        if len(slots) and (int(slots.min()) < 0 or int(slots.max()) > arrays.watermark):
            raise ValueError(f"snapshot postings name slots outside 0..{arrays.watermark}")
    terms = kept.get("fwd_terms")
    if terms is not None and len(terms) and int(terms.max()) >= len(arrays.term_buckets):
        raise ValueError(f"snapshot forward lists name term ids beyond its {len(arrays.term_buckets)} terms")
    return kept
