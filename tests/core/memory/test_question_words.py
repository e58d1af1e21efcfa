"""Every word of a question weighs in: a long name does not drown the asked attribute, and the
chosen documents together hold the question's words (a question about two people brings both)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from homeagent_core.lexical.bm25 import word_weights
from homeagent_core.memory.documents.ranking import cover_words
from homeagent_core.memory.documents.store import Document
from homeagent_sdk.visibility import EVERYONE

WANG = [
    "王芳是我的上司，她的电话是13912345678。",
    "王芳喜欢在周末去爬山，王芳说山上空气好。",
    "王芳的名字就是王芳。",
    "我和王芳一起吃了午饭，王芳点了面条。",
    "王芳的爱好是摄影，王芳拍了很多照片。",
    "王芳下周要去北京出差，王芳很忙。",
]
LI = [
    "李强是我的表弟，他在深圳工作。",
    "李强的爱好是打篮球。",
]


async def _store(tmp_path: Path, open_documents: Callable[..., Any], texts: list[str]) -> Any:
    store = open_documents(tmp_path / "docs.db")
    await store.add_many(
        [Document(content=f"我: {t}", source=f"s{i}", created_at=1000.0 * (i + 1)) for i, t in enumerate(texts)]
    )
    return store


ACTIVITIES = ["爬山", "摄影", "吃面条", "看电影", "打羽毛球", "读小说", "做蛋糕", "学英语", "去北京出差", "养猫",
              "种花", "跑步", "买衣服", "听音乐会", "写报告", "开会", "逛超市", "修电脑", "做瑜伽", "钓鱼"]


async def test_a_question_about_two_people_brings_a_message_about_each(
    tmp_path: Path, open_documents: Callable[..., Any]
) -> None:
    texts = [f"王芳昨天说她喜欢{a}，王芳还约我下次一起去{a}。" for a in ACTIVITIES]
    texts += ["王芳是我的上司，其年龄是44岁。", "李强是我的表弟，其年龄是36岁。"]
    texts += [f"李强最近在忙着{a}。" for a in ACTIVITIES[:4]] + [f"今天的天气不错，我去{a}了。" for a in ACTIVITIES]
    texts += ["我的同事小刘年龄是29岁。", "我的邻居老陈年龄是70岁。"]
    store = await _store(tmp_path, open_documents, texts)
    hits = await store.query("王芳和李强谁的年龄更大？", 10, touch=False, audience=EVERYONE)
    found = [h.document.content for h in hits]
    assert "我: 王芳是我的上司，其年龄是44岁。" in found and "我: 李强是我的表弟，其年龄是36岁。" in found, found


async def test_the_message_with_the_asked_attribute_outranks_one_that_repeats_the_name(
    tmp_path: Path, open_documents: Callable[..., Any]
) -> None:
    texts = [*WANG, "王芳是我的上司，她今年44岁，年龄比我大。", *LI]
    store = await _store(tmp_path, open_documents, texts)
    hits = await store.query("王芳的年龄是多少？", 1, touch=False, audience=EVERYONE)
    assert hits[0].document.content == "我: 王芳是我的上司，她今年44岁，年龄比我大。"


def test_the_grams_of_a_chinese_word_share_its_weight_and_latin_words_keep_theirs() -> None:
    idf = np.ones(8, dtype=np.float64)
    words = np.array([0, 0, 0, 0, 1, 1, 2, 2])  # a four-gram name, a two-gram word, a Latin word
    cjk = np.array([True] * 6 + [False] * 2)
    weights = word_weights(idf, words, cjk, 0.5)
    assert np.isclose(weights[:4].sum(), 2.0) and np.isclose(weights[4:6].sum(), np.sqrt(2.0))
    assert np.allclose(weights[6:], 1.0)
    assert np.allclose(word_weights(idf, words, cjk, 0.0), 1.0)


def test_choosing_by_coverage_takes_a_lower_document_that_adds_a_missing_word() -> None:
    pool = [(1, 1.0), (2, 0.95), (3, 0.9), (4, 0.5)]
    holds = np.array([[True, False], [True, False], [True, False], [False, True]])
    assert [s for s, _ in cover_words(pool, holds, 2, 1.0)] == [1, 4]
    assert [s for s, _ in cover_words(pool, holds, 2, 0.0)] == [1, 2]
    assert cover_words(pool, np.zeros((4, 0), dtype=bool), 2, 0.6) == pool[:2]
