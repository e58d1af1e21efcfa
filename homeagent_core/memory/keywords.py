"""Query keywords and name similarity for graph memory.

* :func:`extract_keywords` picks at most five search words from a user message (jieba words of
  the Chinese parts, Latin words, stop words removed) — the keyword half of automatic recall.
  Queries and entity names are normalised the way the document store's lexical path normalises
  text (:func:`homeagent_core.lexical.terms.normalize`), and its stop words are
  never seeds: one scheme for what a written word is, across documents and graph.
* :func:`name_terms` is how an entity name is indexed in the in-memory keyword index (the
  shared TF-IDF tokenizer plus the whole lower-cased name), replacing SQL ``LIKE``;
  :func:`terms_fingerprint` identifies the tokenizer, so terms stored next to each entity are
  recomputed when it changes.
* :func:`bigram_jaccard` is the cheap similarity the merge heartbeat uses to propose
  duplicate entities.
"""

from __future__ import annotations

import functools
import hashlib
import re

from homeagent_core.embeddings.tfidf import tokenize
from homeagent_core.lexical.segmenter import load_jieba
from homeagent_core.lexical.terms import STOP_WORDS as DOCUMENT_STOP_WORDS
from homeagent_core.lexical.terms import normalize

__all__ = [
    "STOP_WORDS",
    "bigram_jaccard",
    "bigrams",
    "extract_keywords",
    "name_terms",
    "terms_fingerprint",
    "warm_up",
]

_STOP_ZH = (
    "的 了 是 在 有 和 就 不 人 都 一 一个 上 也 很 到 "
    "说 要 去 你 会 着 没有 看 好 自己 这 他 她 它 什么 "
    "怎么 为什么 如何 我 我们 你们 他们 她们 吗 呢 吧 啊 "
    "呀 哦 嗯 那 那个 这个 这些 那些 还 又 把 被 让 给 "
    "跟 与 或 但 而 如果 因为 所以 可以 能 想 知道 一下 "
    "请 帮 帮我 告诉 记得 还记得 现在 今天 刚才 之前 以前 "
    "哪里 哪儿 谁 多少 几 么 过 得 地 之 其 及 等 个 些 "
    "每 最 更 太 非常 已经"
)
_STOP_EN = (
    "the a an and or but of to in on at for with from by is are was were be been being am do "
    "does did have has had i me my mine you your he him his she her it its we us our they them "
    "their this that these those what which who whom whose when where why how not no yes can "
    "could would should will shall may might must about as into than then there here please "
    "tell remember know just also very so if"
)
STOP_WORDS: frozenset[str] = frozenset(_STOP_ZH.split()) | frozenset(_STOP_EN.split()) | DOCUMENT_STOP_WORDS
"""Words never used as seeds: the document store's Chinese stop words, and more (a seed must name something)."""

_CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK = re.compile(f"[{_CJK_CLASS}]")
_CJK_WORD = re.compile(f"^[{_CJK_CLASS}]+$")
# A run of CJK characters, or a run of other letters/digits.
_PIECE = re.compile(f"[{_CJK_CLASS}]+|[^\\W_{_CJK_CLASS}]+")


def extract_keywords(text: str, limit: int = 5) -> list[str]:
    """Up to ``limit`` distinct search words of ``text``, in order of appearance.

    Words are jieba words of the Chinese parts (two characters or more) and Latin words or
    numbers, of the text normalised as the document store normalises it (NFKC: full-width forms
    become half-width; lower case; traditional characters simplified when opencc is installed),
    so "臺北" and "ＧＰＴ４" seed the entities "台北" and "gpt4"; stop words are dropped. A text
    of only stop words gives ``[]``.
    """
    out: list[str] = []
    seen: set[str] = set()
    for word in _words(text):
        if word in STOP_WORDS or word in seen or len(word) < 2:
            continue
        seen.add(word)
        out.append(word)
        if len(out) >= limit:
            break
    return out


def _words(text: str) -> list[str]:
    words: list[str] = []
    for match in _PIECE.finditer(normalize(text)):
        piece = match.group(0)
        if _CJK.match(piece):
            words.extend(w for w in load_jieba().lcut(piece) if _CJK_WORD.match(w))
        else:
            words.append(piece)
    return words


def warm_up() -> None:
    """Load jieba now (call it in a worker thread at start-up, not on the event loop)."""
    load_jieba()
    tokenize("预热")


@functools.lru_cache(maxsize=4096)
def name_terms(name: str) -> frozenset[str]:
    """Index terms of an entity name: tokenizer terms plus the whole name, normalised as
    :func:`extract_keywords` normalises a query."""
    name = normalize(name)
    terms = set(tokenize(name))
    whole = name.strip()
    if whole:
        terms.add(whole)
    return frozenset(terms)


# Bump when name_terms changes in a way the probes below might not notice.
TERMS_VERSION = 2
_TERMS_PROBES = (
    "小王住在杭州市西湖区",
    "中华人民共和国",
    "南京市长江大桥",
    "北京大学生前来应聘",
    "咖啡馆",
    "Alice Smith",
    "GPT-4o模型",
    "Ünïcode Wörds 123",
    "__init__-x",
)


@functools.lru_cache(maxsize=1)
def terms_fingerprint() -> str:
    """A short hash of how :func:`name_terms` splits a fixed set of probe names."""
    probe = repr([TERMS_VERSION] + [sorted(name_terms(p)) for p in _TERMS_PROBES])
    return hashlib.sha256(probe.encode("utf-8")).hexdigest()[:16]


def bigrams(text: str) -> set[str]:
    """Character bigrams of ``text`` lower-cased with spaces removed (the name itself if < 2)."""
    s = "".join(text.lower().split())
    if len(s) < 2:
        return {s} if s else set()
    return {s[i : i + 2] for i in range(len(s) - 1)}


def bigram_jaccard(a: str, b: str) -> float:
    """Jaccard similarity of the character-bigram sets of ``a`` and ``b`` (0.0 – 1.0)."""
    ba, bb = bigrams(a), bigrams(b)
    if not ba or not bb:
        return 0.0
    return len(ba & bb) / len(ba | bb)
