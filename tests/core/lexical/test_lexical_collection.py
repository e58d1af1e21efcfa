"""The knowledge base's in-memory BM25: the scores of the shared scheme, kept through adds and removes."""

from __future__ import annotations

import random

import numpy as np
import pytest

from homeagent_core.lexical import collection as collection_module
from homeagent_core.lexical.bm25 import score_texts
from homeagent_core.lexical.collection import LexicalCollection

WORDS = [
    "alpha", "beta", "gamma", "paint", "painted", "painting", "sunrise", "lake", "camping", "melanie",
    "caroline", "pottery", "guitar", "小王", "小李", "华为", "腾讯", "会计", "年龄", "北京", "上海", "喜欢",
    "打篮球", "住在", "工作", "生日",
]
QUERIES = [
    "who painted the sunrise at the lake",
    "melanie pottery",
    "小王在哪里工作？",
    "小李的年龄是多少",
    "小王和小李喜欢什么",
    "guitar 北京",
]


def random_texts(rng: random.Random, count: int) -> dict[str, str]:
    return {f"t{i}": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for i in range(count)}


def assert_scores_as_score_texts(col: LexicalCollection, texts: dict[str, str], among: list[str] | None = None) -> None:
    """The collection scores ``among`` (all: None) exactly as scoring just those texts does."""
    ids = sorted(texts) if among is None else among
    for query in QUERIES:
        got = col.scores(query, among)
        want = score_texts(query, [texts[i] for i in ids]) if ids else np.zeros(0)
        assert set(got) <= set(ids)
        np.testing.assert_allclose([got.get(i, 0.0) for i in ids], want, rtol=1e-5, atol=1e-6)
        assert all(got[i] > 0 for i in got)


@pytest.mark.parametrize("delta_max", [0, 40, 1 << 16])
def test_adds_replacements_and_removes_keep_the_scores_of_the_texts_held(monkeypatch, delta_max):
    monkeypatch.setattr(collection_module, "DELTA_MAX", delta_max)  # fold every query, sometimes, never
    rng = random.Random(delta_max)
    col, held = LexicalCollection(), {}
    for step in range(120):
        op = rng.random()
        doc_id = f"t{rng.randrange(40)}"
        if op < 0.6:
            held[doc_id] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))
            col.add(doc_id, held[doc_id])
        else:
            held.pop(doc_id, None)
            col.remove(doc_id)
        if step % 25 == 24:
            col.fold()  # as after a load: the delta and the dead postings leave
            assert not col._delta and not col._dead
        if step % 10 == 9:
            assert sorted(col.ids()) == sorted(held) and len(col) == len(held)
            assert_scores_as_score_texts(col, held)
    col.clear()
    assert len(col) == 0 and col.scores("melanie") == {}


def test_a_search_sees_only_the_texts_among_and_the_others_change_nothing():
    rng = random.Random(3)
    texts = random_texts(rng, 30)
    col = LexicalCollection()
    for doc_id, text in texts.items():
        col.add(doc_id, text)
    visible = sorted(rng.sample(sorted(texts), 12))
    assert_scores_as_score_texts(col, texts, visible)
    assert col.scores("melanie", []) == {}
    assert col.scores("melanie", ["unknown"]) == {}


def test_search_ranks_best_first_ties_by_id_and_skips_texts_without_a_term():
    col = LexicalCollection()
    col.add("b", "identical text")
    col.add("a", "identical text")
    col.add("c", "小王在华为做会计")
    assert [doc for doc, _ in col.search("identical text", 5)] == ["a", "b"]
    assert col.search("identical text", 0) == []
    assert col.search("？！", 5) == []
    assert col.search("腾讯", 5) == []
