"""Index terms of the document store's lexical path, for Chinese, English and mixed text.

A text is normalised first — NFKC (full-width letters, digits and punctuation become
half-width), lower case, and traditional characters mapped to simplified ones when the
``opencc`` package is installed — so "ＧＰＴ４", "GPT4" and "gpt4", or "臺灣" and "台湾", are the
same terms. It is then cut into *words*, each of which yields character grams:

* a run of Latin letters or digits is one word; its grams are the character 2–4-grams of the
  word padded with one space each side (``"mel"`` gives ``" m"``, ``"me"``, ... ``" mel "``),
  which match partial forms ("paint" / "painting") — measured on LoCoMo;
* a run of CJK characters (a clause) gives the same padded 2–4-grams over the whole run,
  minus every gram that lies wholly inside a **stop word** (什么, 哪里, 的, 吗...), and jieba
  (with its HMM, so unknown personal names come out as one word) decides which *word* each
  gram belongs to: the word it starts in.

Why the words matter: a query spends its posting budget round robin over its words
(:func:`~homeagent_core.memory.documents.lexical.scoring.budget_order`). With a whole clause as
one word, one clause's rarest grams stood for the whole question; with jieba words each
name and content word gets its turn.

What was measured and not taken (``bench/bench_memory_zh.py``, docs/BENCHMARKS.md): plain
character bigrams (the classic Chinese retrieval unit) and bigrams plus jieba words both
lost 8–15 points of recall@10 to padded 2–4-grams on the Chinese development set — the
padding marks where a clause starts, where Chinese puts its topic ("小王在哪上班？" /
"小王在华为做会计"), and the 3-grams keep three-character names whole. Dropping the grams
of stop words gained 2.6 points; restricting grams to inside jieba words lost 12 (jieba
cuts names inconsistently between a question and a statement).

:data:`TERMS_VERSION` names this scheme; the document store re-derives stored terms when it
changes.
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable
from typing import Any

from homeagent_core.lexical.segmenter import load_jieba

__all__ = ["STOP_WORDS", "TERMS_VERSION", "normalize", "piece_grams", "pieces", "typed_word_grams", "word_grams"]

TERMS_VERSION = "2"
"""Version of the term scheme stored with each document (``store_meta.lex_version``)."""

_CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_PIECE = re.compile(f"(?P<cjk>[{_CJK_CLASS}]+)|(?P<word>[^\\W_{_CJK_CLASS}]+)")
_CJK_CHAR = re.compile(f"[{_CJK_CLASS}]")

_STOP_ZH = (
    "的 了 是 在 有 和 就 不 都 一 也 很 到 说 要 去 你 会 着 没有 这 他 她 它 什么 怎么 为什么 如何 "
    "我 我们 你们 他们 她们 吗 呢 吧 啊 呀 哦 嗯 那 那个 这个 这些 那些 还 又 把 被 让 给 跟 与 或 但 而 "
    "可以 能 想 知道 一下 请 帮 帮我 告诉 记得 还记得 哪里 哪儿 哪 谁 多少 几 么 过 得 地 之 其 及 等 个 些 "
    "嘛 呐 哈 啦 咯 是不是 有没有 那么 这么 一个 还是 就是 已经 都是 是的"
)
STOP_WORDS: frozenset[str] = frozenset(_STOP_ZH.split())
"""Chinese words that never stand alone as terms. English stop words stay: the Latin path is
character grams, where BM25's idf already discounts them (measured on LoCoMo)."""

_opencc: Any = None
_opencc_lock = threading.Lock()


def _to_simplified() -> Callable[[str], str]:
    """OpenCC's traditional→simplified converter, or the identity when opencc is missing."""
    global _opencc
    if _opencc is None:
        with _opencc_lock:
            if _opencc is None:
                try:
                    import opencc

                    _opencc = opencc.OpenCC("t2s").convert
                except ImportError:  # optional: text is indexed as written
                    _opencc = str
    return _opencc  # type: ignore[no-any-return]


def normalize(text: str) -> str:
    """NFKC, lower case, traditional → simplified (when opencc is installed)."""
    text = unicodedata.normalize("NFKC", text).lower()
    if _CJK_CHAR.search(text):
        text = _to_simplified()(text)
    return text


def _latin_grams(word: str) -> list[str]:
    padded = f" {word} "
    size = len(padded)
    return [padded[i : i + n] for n in (2, 3, 4) for i in range(size - n + 1)]


@functools.lru_cache(maxsize=65536)
def _cjk_words(run: str) -> tuple[tuple[str, ...], ...]:
    """Grams of one CJK run grouped by the jieba word they start in (cached: phrases repeat).

    The grams are the run's character 2–4-grams, padded with one space each side, minus the
    grams that lie wholly inside stop words.
    """
    padded = f" {run} "
    owner = [0] * len(padded)  # index of the word each padded position belongs to
    stop = [False] * len(padded)
    pos = 1
    segments = load_jieba().lcut(run) if len(run) > 1 else [run]
    for index, seg in enumerate(segments):
        is_stop = seg in STOP_WORDS
        for i in range(pos, pos + len(seg)):
            owner[i] = index
            stop[i] = is_stop
        pos += len(seg)
    owner[-1] = len(segments) - 1
    groups: list[list[str]] = [[] for _ in segments]
    size = len(padded)
    for n in (2, 3, 4):
        for i in range(size - n + 1):
            inner = range(max(i, 1), min(i + n, size - 1))
            if all(stop[j] for j in inner):
                continue
            groups[owner[max(i, 1)] if i == 0 else owner[i]].append(padded[i : i + n])
    return tuple(tuple(g) for g in groups if g)


def pieces(text: str) -> list[tuple[str, bool]]:
    """The normalised runs of ``text`` that yield grams: (run, is CJK), in text order."""
    return [(m.group(), m.lastgroup != "word") for m in _PIECE.finditer(normalize(text))]


def piece_grams(piece: str, cjk: bool) -> list[list[str]]:
    """The grams of one run of :func:`pieces`, grouped by word."""
    if not cjk:
        return [_latin_grams(piece)]
    found = _cjk_words(piece) if len(piece) <= 64 else _cjk_words.__wrapped__(piece)
    return [list(w) for w in found]


def word_grams(text: str) -> list[list[str]]:
    """The grams of ``text`` grouped by word (see the module docstring), in text order."""
    return [grams for grams, _ in typed_word_grams(text)]


def typed_word_grams(text: str) -> list[tuple[list[str], bool]]:
    """:func:`word_grams` with each word's kind: ``(grams, is CJK)``."""
    words: list[tuple[list[str], bool]] = []
    for piece, cjk in pieces(text):
        words.extend((grams, cjk) for grams in piece_grams(piece, cjk))
    return words
