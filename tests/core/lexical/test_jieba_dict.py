"""jieba on the compact dictionary cuts exactly as jieba does, in a fraction of the memory."""

from __future__ import annotations

import functools
import logging
import random
from pathlib import Path

import jieba
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from homeagent_core.lexical.jieba_dict import CompactTokenizer, cache_path
from homeagent_core.lexical.segmenter import load_jieba

TEXTS = [
    "小王住在杭州市西湖区，周末常去咖啡馆看书。",
    "南京市长江大桥于1968年建成通车",
    "北京大学生前来应聘GPT-4o模型的标注工作",
    "我来到北京清华大学，他来到了网易杭研大厦",
    "工信处女干事每月经过下属科室都要亲口交代24口交换机等技术性器件的安装工作",
    "结过婚的和尚未结过婚的",
    "Alice 和 Bob 在 2024 年去了上海迪士尼乐园，买了 3 张票。",
    "",
]


@functools.cache
def reference() -> jieba.Tokenizer:
    """jieba's own tokenizer with its own prefix dictionary."""
    jieba.setLogLevel(logging.WARNING)
    tokenizer = jieba.Tokenizer()
    tokenizer.initialize()
    return tokenizer


@functools.cache
def words() -> list[str]:
    """Dictionary words (with a non-zero frequency), to build texts full of real words."""
    return sorted(w for w, f in reference().FREQ.items() if f)


@pytest.mark.parametrize("hmm", [False, True])
def test_cuts_equal_jiebas_on_sentences_and_on_texts_made_of_dictionary_words(hmm: bool) -> None:
    compact, ref = load_jieba(), reference()
    assert isinstance(compact, CompactTokenizer)
    rnd = random.Random(7)
    texts = [*TEXTS, *("".join(rnd.choices(words(), k=rnd.randint(1, 40))) for _ in range(300))]
    for text in texts:
        assert compact.lcut(text, HMM=hmm) == ref.lcut(text, HMM=hmm), text
    assert compact.lcut_for_search(TEXTS[0]) == ref.lcut_for_search(TEXTS[0])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研质",
               max_size=30))
def test_any_chinese_text_cuts_the_same(text: str) -> None:
    assert load_jieba().lcut(text, HMM=False) == reference().lcut(text, HMM=False)
    assert load_jieba().lcut(text) == reference().lcut(text)


def test_the_dictionary_is_small_and_read_only() -> None:
    compact = load_jieba()
    assert compact.total == reference().total
    assert compact.FREQ.get("咖啡馆") == reference().FREQ["咖啡馆"]
    assert "咖啡" in compact.FREQ and "咖啡馆子不存在" not in compact.FREQ
    # jieba's dict holds every prefix of every word; the trie holds the words, ~1 byte each.
    assert len(compact.FREQ) < len(reference().FREQ)
    assert len(compact._trie.tobytes()) < 4 * 1024 * 1024
    with pytest.raises(TypeError, match="read-only"):
        compact.add_word("新词语", 10)
    with pytest.raises(ValueError, match="default dictionary"):
        CompactTokenizer().initialize("/nonexistent/dict.txt")


def test_the_built_dictionary_is_cached_and_a_damaged_cache_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = cache_path()
    assert path is not None and path.parent == tmp_path / "homeagent"
    built = CompactTokenizer()
    built.initialize()
    assert path.is_file()
    loaded = CompactTokenizer()
    loaded.initialize()  # from the cache this time
    assert loaded.total == built.total and len(loaded.FREQ) == len(built.FREQ)
    for text in TEXTS:
        assert loaded.lcut(text) == built.lcut(text) == reference().lcut(text)
    for damage in (b"HAJIEBA1" + b"\0" * 40, path.read_bytes()[:-1000]):
        path.write_bytes(damage)
        again = CompactTokenizer()
        again.initialize()
        assert again.lcut(TEXTS[0]) == reference().lcut(TEXTS[0])
        assert path.stat().st_size > 1_000_000  # rewritten whole


def test_a_cache_folder_that_cannot_be_written_only_costs_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    tokenizer = CompactTokenizer()
    tokenizer.initialize()  # the child cannot write the cache; built in this process instead
    assert tokenizer.lcut(TEXTS[1]) == reference().lcut(TEXTS[1])
    assert blocker.read_text() == "x"
