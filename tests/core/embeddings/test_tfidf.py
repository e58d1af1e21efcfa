from __future__ import annotations

import math
import threading
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from homeagent_core.embeddings.tfidf import TfidfIndex, tokenize


def reference_search(docs: dict[str, str], query: str) -> dict[str, float]:
    """Dense textbook tf-idf cosine (sublinear tf, smooth idf) to check the index against."""
    toks = {d: Counter(tokenize(t)) for d, t in docs.items()}
    vocab = sorted({t for c in toks.values() for t in c})
    col = {t: i for i, t in enumerate(vocab)}
    n = len(docs)
    df = np.zeros(len(vocab))
    for c in toks.values():
        for t in c:
            df[col[t]] += 1
    idf = np.log((1 + n) / (1 + df)) + 1

    def vec(counts: Counter[str]) -> np.ndarray:
        v = np.zeros(len(vocab))
        for t, c in counts.items():
            if t in col:
                v[col[t]] = (1 + math.log(c)) * idf[col[t]]
        return v

    q = vec(Counter(tokenize(query)))
    out = {}
    for d, c in toks.items():
        v = vec(c)
        denom = np.linalg.norm(q) * np.linalg.norm(v)
        s = float(q @ v / denom) if denom else 0.0
        if s > 0:
            out[d] = s
    return out


def test_tokenize_mixes_jieba_words_cjk_bigrams_and_lowercase_latin_words() -> None:
    terms = tokenize("我住在杭州，喜欢用Python写代码! GPT-4o")
    assert "杭州" in terms
    assert "住在" in terms  # a character bigram
    assert "python" in terms and "gpt" in terms and "4o" in terms
    assert not any(t in {"，", "!", " ", "-"} for t in terms)
    assert terms.index("杭州") < terms.index("python") < terms.index("gpt")


def test_tokenize_does_not_repeat_a_bigram_that_is_already_a_jieba_word() -> None:
    assert tokenize("杭州").count("杭州") == 1


def test_tokenize_of_empty_or_punctuation_only_text_is_empty() -> None:
    assert tokenize("") == []
    assert tokenize("，。！？ ... ---") == []


def test_tokenize_handles_a_one_megabyte_string() -> None:
    text = ("今天天气很好，我们去西湖散步。" * 4000 + "hello world " * 40000)[: 1 << 20]
    terms = tokenize(text)
    assert "西湖" in terms and "hello" in terms


def test_search_ranks_the_matching_document_first_with_descending_scores() -> None:
    idx = TfidfIndex()
    idx.add("a", "我住在杭州西湖边")
    idx.add("b", "明天上海下雨")
    idx.add("c", "I like coffee in the morning")
    idx.add("d", "杭州的咖啡店很多")
    hits = idx.search("杭州西湖")
    assert hits[0][0] == "a"
    assert [h[0] for h in hits] == ["a", "d"]
    assert hits[0][1] > hits[1][1] > 0
    assert idx.search("coffee")[0][0] == "c"


def test_a_document_is_its_own_best_match_with_cosine_one() -> None:
    idx = TfidfIndex()
    idx.add("x", "机器学习 machine learning")
    idx.add("y", "深度学习")
    (best, score), *_ = idx.search("机器学习 machine learning")
    assert best == "x"
    assert math.isclose(score, 1.0, rel_tol=1e-9)


def test_re_adding_an_id_replaces_its_text() -> None:
    idx = TfidfIndex()
    idx.add("n1", "苹果")
    idx.add("n1", "香蕉")
    assert len(idx) == 1
    assert idx.search("苹果") == []
    assert idx.search("香蕉")[0][0] == "n1"


def test_remove_forgets_a_document_and_ignores_unknown_ids() -> None:
    idx = TfidfIndex()
    idx.add("a", "北京烤鸭")
    idx.add("b", "北京天气")
    idx.remove("a")
    idx.remove("never-added")
    assert "a" not in idx and "b" in idx and len(idx) == 1
    assert [h[0] for h in idx.search("北京烤鸭")] == ["b"]


def test_search_with_no_shared_term_or_empty_index_returns_nothing() -> None:
    idx = TfidfIndex()
    assert idx.search("anything") == []
    idx.add("a", "hello")
    assert idx.search("world") == []
    assert idx.search("") == []
    assert idx.search("hello", k=0) == []


def test_k_limits_the_number_of_results() -> None:
    idx = TfidfIndex()
    for i in range(50):
        idx.add(f"d{i}", f"common word{i}")
    hits = idx.search("common", k=7)
    assert len(hits) == 7
    assert [h[0] for h in hits] == [f"d{i}" for i in range(7)]  # ties keep insertion order


def test_scores_match_a_dense_reference_after_adds_replacements_and_removals() -> None:
    docs = {f"d{i}": f"文档{i % 7} 杭州{'西湖' * (i % 3)} topic{i % 5} common" for i in range(40)}
    idx = TfidfIndex()
    for d, t in docs.items():
        idx.add(d, t)
    for i in range(0, 40, 3):
        idx.remove(f"d{i}")
        del docs[f"d{i}"]
    docs["d1"] = "完全不同的内容 topic9"
    idx.add("d1", docs["d1"])
    for query in ["杭州西湖", "topic3 common", "文档2", "内容 topic9"]:
        want = reference_search(docs, query)
        got = dict(idx.search(query, k=100))
        assert got.keys() == want.keys()
        for d, s in want.items():
            assert math.isclose(got[d], s, rel_tol=1e-9, abs_tol=1e-12)


def test_compaction_after_many_removals_keeps_results_correct() -> None:
    idx = TfidfIndex()
    docs = {f"d{i}": f"word{i % 97} shared{i % 11} 北京{i % 13}" for i in range(3000)}
    for d, t in docs.items():
        idx.add(d, t)
    for i in range(2500):
        idx.remove(f"d{i}")
        del docs[f"d{i}"]
    assert len(idx) == 500 and idx.ids()[0] == "d2500"
    want = reference_search(docs, "word5 shared3")
    got = dict(idx.search("word5 shared3", k=1000))
    assert got.keys() == want.keys()
    assert all(math.isclose(got[d], s, rel_tol=1e-9) for d, s in want.items())


def test_query_weights_favour_rare_terms() -> None:
    idx = TfidfIndex()
    for i in range(20):
        idx.add(str(i), "我 喜欢 咖啡" if i == 0 else "我 喜欢 茶")
    weights = idx.query_weights("我喜欢咖啡")
    assert max(weights, key=weights.__getitem__) == "咖啡"
    assert math.isclose(sum(v * v for v in weights.values()), 1.0)


def test_concurrent_writers_and_readers_do_not_corrupt_the_index() -> None:
    idx = TfidfIndex()
    errors: list[BaseException] = []

    def writer(base: int) -> None:
        try:
            for i in range(300):
                idx.add(f"{base}-{i}", f"线程{base} 文本{i} shared")
                if i % 4 == 0:
                    idx.remove(f"{base}-{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(200):
                idx.search("shared 文本", k=5)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(b,)) for b in range(3)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert len(idx) == 3 * 225
    assert len(idx.search("shared", k=10_000)) == 675


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"id{i}" for i in range(12)]),
        st.lists(st.sampled_from(["猫", "狗", "杭州", "cat", "dog", "下雨", "天"]), max_size=6),
        max_size=12,
    ),
    st.lists(st.sampled_from(["猫", "杭州", "dog", "rain", "天"]), min_size=1, max_size=3),
)
def test_ranking_equals_the_dense_reference_for_random_collections(
    docs: dict[str, list[str]], query: list[str]
) -> None:
    texts = {d: " ".join(words) for d, words in docs.items()}
    idx = TfidfIndex()
    for d, t in texts.items():
        idx.add(d, t)
    want = reference_search(texts, " ".join(query))
    got = dict(idx.search(" ".join(query), k=100))
    assert got.keys() == want.keys()
    assert all(math.isclose(got[d], s, rel_tol=1e-9) for d, s in want.items())
