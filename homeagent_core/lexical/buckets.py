"""Hashed terms of the lexical path: grams to buckets, a document's term counts, their stored form.

Every gram of :func:`~homeagent_core.lexical.terms.word_grams` is hashed (crc32) into one
of :data:`BUCKETS` buckets; a document is indexed as its sorted unique buckets with their
counts (:func:`term_counts`), stored with it as bytes (:func:`encode_terms`) so the index can be
rebuilt without re-tokenising. Hashing is cached per run of letters or CJK characters: words
repeat, and hashing every gram of every insert was most of an insert's cost.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from homeagent_core.lexical.terms import piece_grams, pieces, typed_word_grams

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "BUCKETS",
    "char_ngrams",
    "decode_many",
    "decode_terms",
    "encode_terms",
    "query_terms",
    "term_counts",
    "typed_query_terms",
]

BUCKETS = 1 << 20
_MASK = BUCKETS - 1


def char_ngrams(text: str) -> list[str]:
    """Every index gram of ``text`` (:func:`~homeagent_core.lexical.terms.word_grams`, flattened).

    ``"Hi Mel"`` gives ``" h", "hi", "i ", " hi", "hi ", " hi ", " m", ...``; Chinese gives
    character bigrams and whole three- or four-character words. Punctuation never forms
    part of a gram.
    """
    return [gram for word, _ in typed_word_grams(text) for gram in word]


@functools.lru_cache(maxsize=1 << 15)
def _piece_buckets(piece: str, cjk: bool) -> bytes:
    """Bucket ids (``uint32`` bytes) of every gram of one run; cached: words repeat (Zipf)."""
    grams = [gram for word in piece_grams(piece, cjk) for gram in word]
    return np.fromiter((zlib.crc32(g.encode()) & _MASK for g in grams), dtype=np.uint32, count=len(grams)).tobytes()


def term_counts(text: str) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16], int]:
    """Hashed bucket ids (sorted, unique), their counts, and the document length in grams."""
    ids = np.frombuffer(b"".join([_piece_buckets(p, cjk) for p, cjk in pieces(text)]), dtype=np.uint32)
    if not len(ids):
        return np.zeros(0, np.uint32), np.zeros(0, np.uint16), 0
    keys, counts = np.unique(ids, return_counts=True)
    return keys.astype(np.uint32), np.minimum(counts, 65535).astype(np.uint16), len(ids)


def encode_terms(buckets: npt.NDArray[np.uint32], counts: npt.NDArray[np.uint16]) -> bytes:
    """Pack :func:`term_counts` output into bytes (stored with each document)."""
    return buckets.astype("<u4").tobytes() + counts.astype("<u2").tobytes()


def decode_terms(blob: bytes) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
    """Inverse of :func:`encode_terms`."""
    n = len(blob) // 6
    buckets = np.frombuffer(blob, dtype="<u4", count=n).astype(np.uint32)
    counts = np.frombuffer(blob, dtype="<u2", count=n, offset=4 * n).astype(np.uint16)
    return buckets, counts


def decode_many(
    blobs: Sequence[bytes],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
    """Decode many :func:`encode_terms` blobs at once: terms per blob, all buckets, all counts.

    Two joins instead of a numpy call per blob, so re-indexing a store's stored terms after
    an unclean shutdown costs a fraction of a second per 100k documents.

    Raises:
        ValueError: a blob's length is not a multiple of 6 bytes.
    """
    sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    if len(sizes) and np.any(sizes % 6):
        bad = int(np.flatnonzero(sizes % 6)[0])
        raise ValueError(f"stored term blob {bad} has {int(sizes[bad])} bytes, not a multiple of 6")
    terms = sizes // 6
    cuts = (4 * terms).tolist()
    buckets = np.frombuffer(b"".join([b[:c] for b, c in zip(blobs, cuts, strict=True)]), "<u4")
    counts = np.frombuffer(b"".join([b[c:] for b, c in zip(blobs, cuts, strict=True)]), "<u2")
    return terms, buckets.astype(np.uint32, copy=False), counts.astype(np.uint16, copy=False)


def query_terms(query: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Unique buckets of the query's grams, and for each bucket the index of its first word."""
    unique, words, _ = typed_query_terms(query)
    return unique, words


#: Query terms kept for the most recent queries: one turn derives the same query's terms for the
#: working context, the document search and its coverage step (and the knowledge base).
QUERY_CACHE_SIZE = 256


@functools.lru_cache(maxsize=QUERY_CACHE_SIZE)
def typed_query_terms(query: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """:func:`query_terms`, and for each bucket whether its word is CJK (cached: read-only arrays)."""
    out = _typed_query_terms(query)
    for array in out:
        array.flags.writeable = False  # shared by every caller of the same query
    return out


def _typed_query_terms(query: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    buckets: list[int] = []
    words: list[int] = []
    kinds: list[bool] = []
    for i, (grams, cjk) in enumerate(typed_word_grams(query)):
        for gram in grams:
            buckets.append(zlib.crc32(gram.encode()) & _MASK)
            words.append(i)
            kinds.append(cjk)
    values = np.asarray(buckets, dtype=np.int64)
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    head = np.ones(len(ordered), dtype=bool)
    head[1:] = ordered[1:] != ordered[:-1]
    unique, first = ordered[head], order[head]  # as np.unique(return_index=True), without numpy.ma
    if not len(words):
        return unique, first.astype(np.int64), np.zeros(0, dtype=bool)
    return unique, np.asarray(words, dtype=np.int64)[first], np.asarray(kinds, dtype=bool)[first]
