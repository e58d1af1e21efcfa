"""The compiled loops of document queries (``_native.c``), loaded with ctypes when built.

The lexical leg of a query spends most of its time in two loops: adding the postings of its
fully scored buckets to every slot, and looking its over-budget buckets up in the candidates'
forward lists. In numpy each takes about ten passes over a few hundred thousand entries; in C,
one. The dense leg's scans are int8 dot products over every row (:func:`i8_dots`; AVX2 where the
processor has it), which simsimd does too, but holding the GIL and 1.6 times slower on the
64-value rows of a projected scan. The wheel's build compiles ``_native.c`` into ``_native.so``
beside this module (the ``hatch_build.py`` hook, with the C compiler Python was built with);
where that failed or the library is out of date, :func:`library` answers ``None`` and the same
arithmetic runs in numpy and simsimd, with the same scores bit for bit
(``tests/core/memory/test_native.py``).

The C code trusts no index it is given: a slot or term id outside its table makes it stop and
this module raise :class:`IndexError`, as numpy's indexing would. The lengths and ranges it is
handed are checked here, before the call, since C cannot see where an array ends: arrays that
should pair up but differ in length, a range with a negative length or reaching past its array,
or an array of more than one dimension raise :class:`ValueError` or :class:`IndexError` naming
it, and nothing is read or written.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["ABI", "LIBRARY", "NativeLibrary", "add_ranges", "i8_dots", "library", "rescore_sums", "set_enabled"]

log = logging.getLogger(__name__)

ABI = 2
"""The interface version this module speaks; a library reporting another one is not used."""
LIBRARY = Path(__file__).with_name("_native.dll" if sys.platform == "win32" else "_native.so")
"""Where the build puts the compiled library."""

_P = ctypes.c_void_p
_I64 = ctypes.c_int64


class NativeLibrary:
    """The loaded library's functions, with their C signatures declared."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.ranges = lib.ha_bm25_ranges
        self.ranges.restype = _I64
        self.ranges.argtypes = [_P, _P, _I64, _P, _P, _P, _I64, _P, _P, ctypes.c_float, ctypes.c_int, _P, _P, _I64]
        rescore_args = [_P, _P, _I64, _P, _P, _P, _I64, _P, _I64, _P, ctypes.c_float, _P, _P]
        self.rescore: dict[int, ctypes._NamedFuncPointer] = {}
        for width, name in ((2, "ha_bm25_rescore_u16"), (4, "ha_bm25_rescore_u32")):
            fn = getattr(lib, name)
            fn.restype = _I64
            fn.argtypes = rescore_args
            self.rescore[width] = fn
        self.dots = lib.ha_i8_dots
        self.dots.restype = None
        self.dots.argtypes = [_P, _I64, _I64, _P, _P]


_lock = threading.Lock()
_loaded: NativeLibrary | None = None
_tried = False
_enabled = os.environ.get("HOMEAGENT_NATIVE", "1") != "0"


def _load() -> NativeLibrary | None:
    """Open :data:`LIBRARY` if it exists and speaks :data:`ABI`; say once why not otherwise."""
    if not LIBRARY.exists():
        log.info("document queries: no compiled BM25 loops at %s; scoring in numpy and simsimd", LIBRARY)
        return None
    try:
        lib = ctypes.CDLL(str(LIBRARY))  # CDLL calls release the GIL: a dense leg runs meanwhile
        lib.ha_native_abi.restype = ctypes.c_int
        abi = int(lib.ha_native_abi())
    except (OSError, AttributeError) as exc:
        log.warning(
            "document queries: the compiled BM25 loops %s cannot be loaded (%s); scoring in numpy and simsimd",
            LIBRARY, exc,
        )
        return None
    if abi != ABI:
        log.warning(
            "document queries: the compiled BM25 loops %s are version %d, this code needs %d (reinstall the "
            "package to rebuild them); scoring in numpy and simsimd",
            LIBRARY, abi, ABI,
        )
        return None
    return NativeLibrary(lib)


def library() -> NativeLibrary | None:
    """The compiled BM25 loops, or ``None`` when they are not built, out of date or switched off."""
    global _loaded, _tried
    if not _enabled:
        return None
    if not _tried:
        with _lock:
            if not _tried:
                _loaded = _load()
                _tried = True
    return _loaded


def set_enabled(enabled: bool) -> bool:
    """Use the compiled BM25 loops (when built) or numpy from now on; returns the previous setting.

    ``HOMEAGENT_NATIVE=0`` in the environment starts a process with them off.
    """
    global _enabled
    previous, _enabled = _enabled, enabled
    return previous


def _ptr(array: np.ndarray, dtype: type[np.generic]) -> int:
    if array.dtype != dtype or not array.flags.c_contiguous:
        raise TypeError(f"compiled loops: expected a contiguous {np.dtype(dtype)} array, got {array.dtype}")
    return int(array.ctypes.data)


def _vectors(**arrays: np.ndarray) -> None:
    """Each array is one-dimensional (its length is then all the C code is told of it)."""
    for name, array in arrays.items():
        if array.ndim != 1:
            raise ValueError(f"BM25 loops: {name} must be one-dimensional, not of shape {array.shape}")


def _same_lengths(**arrays: np.ndarray) -> None:
    """Each array one-dimensional and all of one length (the C code reads them side by side)."""
    _vectors(**arrays)
    names, lengths = list(arrays), [len(array) for array in arrays.values()]
    if len(set(lengths)) > 1:
        raise ValueError(
            f"BM25 loops: {', '.join(names[:-1])} and {names[-1]} must be equally long, "
            f"not {', '.join(map(str, lengths[:-1]))} and {lengths[-1]}"
        )


def _check_ranges(starts: npt.NDArray[np.int64], lens: npt.NDArray[np.int64], size: int) -> None:
    """Every range ``starts[r] : starts[r] + lens[r]`` lies inside an array of ``size``."""
    if not len(starts):
        return
    if int(lens.min()) < 0:
        raise ValueError(f"BM25 loops: range {int(np.argmin(lens))} has a negative length {int(lens.min())}")
    if int(starts.min()) < 0 or bool((starts > size - lens).any()):  # not starts + lens: that can wrap
        bad = int(np.flatnonzero((starts < 0) | (starts > size - lens))[0])
        raise IndexError(
            f"BM25 loops: a range reaches past an array of {size} "
            f"(range {bad}: {int(lens[bad])} from {int(starts[bad])})"
        )


def add_ranges(
    lib: NativeLibrary,
    slots: npt.NDArray[np.int32],
    tfs: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    lens: npt.NDArray[np.int64],
    weights: npt.NDArray[np.float32],
    norm: npt.NDArray[np.float32],
    unit: npt.NDArray[np.float32],
    k1: float,
    out: npt.NDArray[np.float32],
) -> None:
    """Add the BM25 contribution of postings ``slots/tfs[starts[r] : starts[r] + lens[r]]``,
    weighted by ``weights[r]``, to ``out`` (one score per slot): what
    ``lexical_scoring.accumulate`` does with the same postings concatenated."""
    pointers = (
        _ptr(slots, np.int32), _ptr(tfs, np.uint8), _ptr(starts, np.int64), _ptr(lens, np.int64),
        _ptr(weights, np.float32), _ptr(norm, np.float32), _ptr(unit, np.float32), _ptr(out, np.float32),
    )
    _same_lengths(slots=slots, tfs=tfs)
    _same_lengths(starts=starts, lens=lens, weights=weights)
    _vectors(norm=norm, unit=unit, out=out)
    size = len(out)
    if len(norm) < size or len(unit) < size:
        raise ValueError(f"BM25 loops: length factors ({len(norm)}, {len(unit)}) shorter than the {size} scores")
    _check_ranges(starts, lens, len(slots))
    many = int(lens.sum()) >= size // 2
    acc = np.zeros(size, dtype=np.float64)
    p_slots, p_tfs, p_starts, p_lens, p_weights, p_norm, p_unit, p_out = pointers
    bad = lib.ranges(
        p_slots, p_tfs, len(slots), p_starts, p_lens, p_weights, len(starts), p_norm, p_unit,
        float(np.float32(k1 + 1.0)), int(many), _ptr(acc, np.float64), p_out, size,
    )
    if bad >= 0:
        raise IndexError(f"BM25 loops: posting {bad} names a slot outside {size} slots")


def rescore_sums(
    lib: NativeLibrary,
    terms: npt.NDArray[np.integer],
    tfs: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    lens: npt.NDArray[np.int64],
    slots: npt.NDArray[np.int64],
    table: npt.NDArray[np.float32],
    norm: npt.NDArray[np.float32],
    k1: float,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """Per candidate (slot ``slots[i]``, forward entries ``terms/tfs[starts[i] : starts[i] + lens[i]]``):
    the float64 sums of its entries whose term has a non-zero weight in ``table``, under the
    few-postings and the many-postings formula of ``lexical_scoring.accumulate``, and how many
    entries matched in all."""
    width = terms.dtype.itemsize
    if terms.dtype not in (np.uint16, np.uint32) or not terms.flags.c_contiguous:
        raise TypeError(f"BM25 loops: term ids must be contiguous uint16 or uint32, not {terms.dtype}")
    pointers = (
        _ptr(tfs, np.uint8), _ptr(starts, np.int64), _ptr(lens, np.int64), _ptr(slots, np.int64),
        _ptr(table, np.float32), _ptr(norm, np.float32),
    )
    _same_lengths(terms=terms, tfs=tfs)
    _same_lengths(starts=starts, lens=lens, slots=slots)
    _vectors(table=table, norm=norm)
    if len(slots) and (int(slots.min()) < 0 or int(slots.max()) >= len(norm)):
        raise IndexError(f"BM25 loops: a candidate slot is outside the {len(norm)} length factors")
    _check_ranges(starts, lens, len(terms))
    few = np.empty(len(slots), dtype=np.float64)
    many = np.empty(len(slots), dtype=np.float64)
    p_tfs, p_starts, p_lens, p_slots, p_table, p_norm = pointers
    hits = lib.rescore[width](
        int(terms.ctypes.data), p_tfs, len(terms), p_starts, p_lens, p_slots, len(slots), p_table, len(table),
        p_norm, float(np.float32(k1 + 1.0)), _ptr(few, np.float64), _ptr(many, np.float64),
    )
    if hits < 0:
        raise IndexError(f"BM25 loops: forward entry {-hits - 1} names a term outside a table of {len(table)}")
    return few, many, int(hits)



def i8_dots(lib: NativeLibrary, rows: npt.NDArray[np.int8], q: npt.NDArray[np.int8]) -> npt.NDArray[np.float32]:
    """``rows @ q`` for int8 rows, exact integer sums as float32 (any int8 value, -128 included)."""
    if rows.ndim != 2 or q.shape != (rows.shape[1],):
        raise ValueError(f"int8 dots: rows {rows.shape} and query {q.shape} do not match")
    out = np.empty(len(rows), dtype=np.float32)
    lib.dots(_ptr(rows, np.int8), len(rows), rows.shape[1], _ptr(q, np.int8), int(out.ctypes.data))
    return out
