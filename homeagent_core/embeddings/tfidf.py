"""TF-IDF tier: a tokenizer for Chinese and English and an incremental lexical index.

This tier is always available (it needs only jieba and numpy). It is the last fallback of the
embedding tiers; its :func:`tokenize` also gives the graph's entity-name terms. The memory tiers'
lexical search is BM25 on the shared scheme of :mod:`homeagent_core.lexical` instead.

Why it is not an :class:`~homeagent_sdk.embeddings.EmbeddingProvider`: TF-IDF vectors are sparse,
their dimension is the (growing) vocabulary, and their weights change with every document
added, because idf depends on the whole collection. They cannot live in a fixed-dimension
float32 matrix next to dense vectors, and a stored TF-IDF "vector" would be stale as soon as the
next document arrived. Callers therefore keep a :class:`TfidfIndex` next to their rows and ask it
for ranked ids; the tiering in :mod:`homeagent_core.embeddings.registry` reports this tier as
``tfidf`` (lexical) rather than handing out a provider object.

Scoring: sublinear tf (``1 + ln tf``), smooth idf (``ln((1 + N) / (1 + df)) + 1``, as
scikit-learn), cosine of the two tf-idf vectors. Document frequencies are counted on ``add`` and
idf is computed at query time, so adding a document costs O(its tokens) and never rebuilds the
index. Document norms depend on idf; they are recomputed in one vectorised pass on the first
query after a change and cached until the next change.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from array import array
from collections import Counter
from typing import TYPE_CHECKING, Any

from homeagent_core.lexical.segmenter import load_jieba

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["TfidfIndex", "tokenize", "words"]

_CJK_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_WORD = re.compile(f"^[{_CJK_CHARS}]+$")
# Any run of letters/digits that is not CJK: Latin words, numbers, accented or Cyrillic words.
_TOKEN = re.compile(f"(?P<cjk>[{_CJK_CHARS}]+)|(?P<word>[^\\W_{_CJK_CHARS}]+)")


@functools.lru_cache(maxsize=65536)
def _segment(run: str) -> tuple[str, ...]:
    """jieba words plus the new character bigrams of one CJK run (cached: phrases repeat)."""
    words = [w for w in load_jieba().lcut(run, HMM=False) if _CJK_WORD.match(w)]
    if len(run) > 1:
        seen = set(words)
        words.extend(bg for bg in (run[i : i + 2] for i in range(len(run) - 1)) if bg not in seen)
    return tuple(words)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into index terms, in text order.

    Terms are: jieba words of each Chinese run followed by that run's CJK character bigrams
    that are not already a jieba word, and lower-cased runs of other letters and digits
    (``"GPT-4o"`` gives ``gpt``, ``4o``). Punctuation and whitespace never become terms.
    """
    if not text:
        return []
    terms: list[str] = []
    for m in _TOKEN.finditer(text.lower()):
        piece = m.group()
        if m.lastgroup == "cjk":
            terms.extend(_segment(piece) if len(piece) <= 64 else _segment.__wrapped__(piece))
        else:
            terms.append(piece)
    return terms


@functools.lru_cache(maxsize=65536)
def _jieba_words(run: str) -> tuple[str, ...]:
    return tuple(w for w in load_jieba().lcut(run, HMM=False) if _CJK_WORD.match(w))


def words(text: str) -> list[str]:
    """Words of ``text`` for word-vector lookup: jieba words of Chinese runs and lower-cased
    runs of other letters/digits, in text order (no bigrams, no punctuation)."""
    out: list[str] = []
    for m in _TOKEN.finditer(text.lower()):
        piece = m.group()
        if m.lastgroup == "cjk":
            out.extend(_jieba_words(piece) if len(piece) <= 64 else _jieba_words.__wrapped__(piece))
        else:
            out.append(piece)
    return out


class TfidfIndex:
    """Incremental inverted index with cosine tf-idf ranking.

    ``add`` replaces a document with the same id; ``remove`` of an unknown id does nothing. All
    methods are thread-safe (one lock), so writers may run in a worker thread while readers
    query. Internally documents get integer slots; slots of removed documents are compacted
    away once they make up half of the index.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._vocab: dict[str, int] = {}
        self._df = array("i")
        self._postings: list[dict[int, int]] = []  # term id -> {slot: raw term count}
        self._post_cache: dict[int, tuple[npt.NDArray[Any], npt.NDArray[np.float64]]] = {}
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._terms: list[array[int] | None] = []  # term ids of each slot
        # COO triplets (slot, term, tf^2) of every live or dead slot, for the norm pass.
        self._coo_slot = array("i")
        self._coo_term = array("i")
        self._coo_tf2 = array("d")
        self._dead_entries = 0
        self._norms: npt.NDArray[np.float64] | None = None

    # -- writing ---------------------------------------------------------------------------

    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id`` (replacing what was there). O(tokens of text)."""
        counts = Counter(tokenize(text))
        with self._lock:
            if doc_id in self._slot_of:
                self._remove_locked(doc_id)
            self._insert_locked(doc_id, counts)
            self._norms = None

    def _insert_locked(self, doc_id: str, counts: dict[str, int]) -> None:
        slot = len(self._ids)
        self._ids.append(doc_id)
        self._slot_of[doc_id] = slot
        tids = array("i")
        vocab, postings, df, cache = self._vocab, self._postings, self._df, self._post_cache
        for term, c in counts.items():
            tid = vocab.get(term)
            if tid is None:
                tid = len(postings)
                vocab[term] = tid
                postings.append({})
                df.append(0)
            postings[tid][slot] = c  # raw counts: small ints are shared objects, floats are not
            df[tid] += 1
            tids.append(tid)
        if cache:
            for tid in tids:
                cache.pop(tid, None)
        self._coo_slot.extend([slot] * len(tids))
        self._coo_term.extend(tids)
        self._coo_tf2.extend([(1.0 + math.log(c)) ** 2 for c in counts.values()])
        self._terms.append(tids)

    def remove(self, doc_id: str) -> None:
        """Forget ``doc_id``; unknown ids are ignored."""
        with self._lock:
            if doc_id in self._slot_of:
                self._remove_locked(doc_id)
                self._norms = None
                if self._dead_entries > 1024 and self._dead_entries * 2 > len(self._coo_slot):
                    self._compact_locked()

    def clear(self) -> None:
        """Drop every document."""
        with self._lock:
            self._reset()

    def _remove_locked(self, doc_id: str) -> None:
        slot = self._slot_of.pop(doc_id)
        tids = self._terms[slot] or ()
        for tid in tids:
            del self._postings[tid][slot]
            self._df[tid] -= 1
            self._post_cache.pop(tid, None)
        self._dead_entries += len(tids)
        self._terms[slot] = None
        self._ids[slot] = None

    def _compact_locked(self) -> None:
        """Renumber live documents densely, dropping the entries of removed ones."""
        term_of = {tid: term for term, tid in self._vocab.items()}
        live = [
            (doc_id, {term_of[t]: self._postings[t][slot] for t in tids})
            for slot, (doc_id, tids) in enumerate(zip(self._ids, self._terms, strict=True))
            if doc_id is not None and tids is not None
        ]
        self._reset()
        for doc_id, counts in live:
            self._insert_locked(doc_id, counts)

    # -- reading ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot_of

    def ids(self) -> list[str]:
        """Ids of the indexed documents, in insertion order."""
        with self._lock:
            return [i for i in self._ids if i is not None]

    def _idf(self, tids: npt.NDArray[Any] | None = None) -> npt.NDArray[np.float64]:
        import numpy as np

        df = np.frombuffer(self._df, dtype=np.int32) if len(self._df) else np.zeros(0, np.int32)
        if tids is not None:
            df = df[tids]
        n = len(self._slot_of)
        idf: npt.NDArray[np.float64] = np.log((1.0 + n) / (1.0 + df)) + 1.0
        return idf

    def _doc_norms(self) -> npt.NDArray[np.float64]:
        import numpy as np

        if self._norms is None:
            if len(self._coo_slot):
                slots = np.frombuffer(self._coo_slot, dtype=np.int32)
                tids = np.frombuffer(self._coo_term, dtype=np.int32)
                tf2 = np.frombuffer(self._coo_tf2, dtype=np.float64)
                idf = self._idf()
                sq = np.bincount(slots, weights=tf2 * idf[tids] ** 2, minlength=len(self._ids))
                self._norms = np.sqrt(sq)
            else:
                self._norms = np.zeros(len(self._ids))
        return self._norms

    def _posting(self, tid: int) -> tuple[npt.NDArray[Any], npt.NDArray[np.float64]]:
        import numpy as np

        cached = self._post_cache.get(tid)
        if cached is None:
            post = self._postings[tid]
            cached = (
                np.fromiter(post.keys(), dtype=np.int64, count=len(post)),
                1.0 + np.log(np.fromiter(post.values(), dtype=np.float64, count=len(post))),
            )
            self._post_cache[tid] = cached
        return cached

    def query_weights(self, text: str) -> dict[str, float]:
        """The L2-normalised tf-idf weights of ``text``'s terms known to the index.

        Useful as keywords: the highest weights are the most specific terms of the text.
        """
        import numpy as np

        counts = Counter(tokenize(text))
        with self._lock:
            known = [(t, self._vocab[t], c) for t, c in counts.items() if t in self._vocab]
            if not known:
                return {}
            idf = self._idf(np.array([tid for _, tid, _ in known], dtype=np.int64))
            raw = {t: (1.0 + math.log(c)) * float(i) for (t, _, c), i in zip(known, idf, strict=True)}
        norm = math.sqrt(sum(v * v for v in raw.values())) or 1.0
        return {t: v / norm for t, v in raw.items()}

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` documents most similar to ``query`` as ``(doc_id, cosine)``, best first.

        Documents sharing no term with the query are never returned; ties keep insertion order.
        """
        import numpy as np

        if k <= 0:
            return []
        counts = Counter(tokenize(query))
        with self._lock:
            tids = [self._vocab[t] for t in counts if t in self._vocab]
            if not tids or not self._slot_of:
                return []
            qtf = np.array([1.0 + math.log(counts[t]) for t in counts if t in self._vocab], dtype=np.float64)
            idf = self._idf(np.array(tids, dtype=np.int64))
            qw = qtf * idf
            qnorm = float(np.linalg.norm(qtf * idf))
            norms = self._doc_norms()
            scores = np.zeros(len(self._ids), dtype=np.float64)
            for tid, w, i in zip(tids, qw, idf, strict=True):
                slots, tf = self._posting(tid)
                if len(slots):
                    scores[slots] += (w * i) * tf
            cand = np.flatnonzero(scores)
            if not len(cand):
                return []
            sims = scores[cand] / (norms[cand] * qnorm)
            if len(cand) > k:
                part = np.argpartition(-sims, k - 1)[:k]
                cand, sims = cand[part], sims[part]
            order = np.lexsort((cand, -sims))
            ids = self._ids
            return [(ids[int(cand[j])] or "", float(min(sims[j], 1.0))) for j in order]
