from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from homeagent_core.embeddings.static import StaticEmbedder, load_word_vectors
from homeagent_sdk.embeddings import EmbeddingUnavailable, EmbedInput, ModalityUnsupported

# Three topics in 6 dimensions; words listed most frequent first, as real files are.
TOPICS = {
    "pet": np.array([1, 0.1, 0, 0, 0, 0.05]),
    "city": np.array([0, 0, 1, 0.1, 0, 0.05]),
    "weather": np.array([0, 0, 0, 0, 1, 0.2]),
    "func": np.array([0.3, 0.3, 0.3, 0.3, 0.3, 0.3]),
}
WORDS = [
    ("的", "func"),
    ("我", "func"),
    ("the", "func"),
    ("猫", "pet"),
    ("狗", "pet"),
    ("宠物", "pet"),
    ("cat", "pet"),
    ("dog", "pet"),
    ("杭州", "city"),
    ("上海", "city"),
    ("city", "city"),
    ("下雨", "weather"),
    ("天气", "weather"),
    ("rain", "weather"),
    ("杭", "city"),
    ("州", "city"),
]


def vec_for(topic: str, i: int) -> np.ndarray:
    rng = np.random.default_rng(i)
    return TOPICS[topic] + rng.normal(0, 0.02, 6)


def write_vec(path: Path, *, header: bool = True, prefix: str = "") -> Path:
    lines = [f"{len(WORDS)} 6"] if header else []
    for i, (word, topic) in enumerate(WORDS):
        lines.append(prefix + word + " " + " ".join(f"{x:.5f}" for x in vec_for(topic, i)))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def test_a_word2vec_text_file_gives_semantic_sentence_vectors(tmp_path: Path) -> None:
    emb = StaticEmbedder(str(write_vec(tmp_path / "tiny.vec")))
    assert emb.info.dimension == 6 and emb.info.modalities == frozenset({"text"})
    vecs = await emb.embed_texts(["我的猫", "小狗和宠物", "杭州下雨", "the dog"])
    assert vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sims = vecs @ vecs[0]
    assert sims[1] > sims[2]
    assert sims[3] > sims[2]  # English and Chinese words of one topic share the space


def test_the_header_line_is_optional(tmp_path: Path) -> None:
    wv = load_word_vectors(write_vec(tmp_path / "noheader.txt", header=False))
    assert len(wv.words) == len(WORDS) and wv.dimension == 6
    assert wv.report["words"] == len(WORDS)
    assert wv.report["rss_mb_after"] >= 0


def test_numberbatch_keys_keep_only_the_configured_languages(tmp_path: Path) -> None:
    path = tmp_path / "numberbatch-mini.txt"
    body = write_vec(tmp_path / "x.vec", header=False).read_text(encoding="utf-8").splitlines()
    lines = [f"/c/zh/{ln}" if not ln[0].isascii() else f"/c/en/{ln}" for ln in body]
    lines.append("/c/fr/chat " + " ".join(["0.1"] * 6))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    wv = load_word_vectors(path)
    assert wv.kind == "numberbatch"
    assert "猫" in wv.words and "cat" in wv.words and "chat" not in wv.words
    assert "chat" in load_word_vectors(path, languages=("fr",)).words


async def test_word2vec_binary_files_load_like_text_files(tmp_path: Path) -> None:
    path = tmp_path / "tiny.bin"
    with path.open("wb") as fh:
        fh.write(f"{len(WORDS)} 6\n".encode())
        for i, (word, topic) in enumerate(WORDS):
            fh.write(word.encode() + b" " + vec_for(topic, i).astype("<f4").tobytes() + b"\n")
    text = StaticEmbedder(str(write_vec(tmp_path / "tiny.vec")))
    binary = StaticEmbedder(str(path))
    a = await text.embed_texts(["我的猫在杭州"])
    b = await binary.embed_texts(["我的猫在杭州"])
    assert np.allclose(a, b, atol=1e-4)


def test_a_fasttext_binary_model_is_refused_with_advice(tmp_path: Path) -> None:
    path = tmp_path / "cc.zh.300.bin"
    path.write_bytes(struct.pack("<ii", 793712314, 12) + b"\0" * 64)
    with pytest.raises(EmbeddingUnavailable, match=r"fastText \.bin .*\.vec"):
        load_word_vectors(path)


def test_a_corrupt_vector_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    path = write_vec(tmp_path / "broken.vec")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[5] = "坏 0.1 0.2 oops 0.4 0.5 0.6"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(EmbeddingUnavailable, match=r"broken\.vec:6: expected a word followed by 6"):
        load_word_vectors(path)


def test_a_truncated_binary_file_is_reported_as_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "cut.bin"
    path.write_bytes(b"3 6\nword " + b"\0" * 10)
    with pytest.raises(EmbeddingUnavailable, match="truncated"):
        load_word_vectors(path)


def test_missing_files_and_empty_configuration_are_unavailable(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match="does not exist"):
        StaticEmbedder(str(tmp_path / "nope.vec"))
    with pytest.raises(EmbeddingUnavailable, match="no word-vector files configured"):
        StaticEmbedder(" , ")
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(EmbeddingUnavailable, match=r"without config\.json"):
        StaticEmbedder(str(tmp_path / "emptydir"))


async def test_several_files_are_concatenated_into_one_space(tmp_path: Path) -> None:
    a = write_vec(tmp_path / "a.vec")
    b = write_vec(tmp_path / "b.vec")
    emb = StaticEmbedder(f"{a}, {b}")
    assert emb.info.dimension == 12 and len(emb.load_reports) == 2
    vec = (await emb.embed_texts(["猫"]))[0]
    assert np.isclose(np.linalg.norm(vec[:6]), np.linalg.norm(vec[6:]), atol=1e-5)


async def test_unknown_chinese_words_fall_back_to_their_characters(tmp_path: Path) -> None:
    emb = StaticEmbedder(str(write_vec(tmp_path / "t.vec")))
    # jieba keeps 杭州市 as one word; it is not in the file, but 杭 and 州 are.
    vecs = await emb.embed_texts(["杭州市", "城市杭州", "天气"])
    assert vecs[0].any()
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]


def test_sif_weights_make_frequent_words_count_less(tmp_path: Path) -> None:
    wv = load_word_vectors(write_vec(tmp_path / "t.vec"))
    weights = wv.sif_weights()
    assert weights[0] < weights[-1] and np.all(np.diff(weights) >= 0)


async def test_empty_text_is_a_zero_row_and_images_are_refused(tmp_path: Path) -> None:
    emb = StaticEmbedder(str(write_vec(tmp_path / "t.vec")))
    vecs = await emb.embed_texts(["", "xyzzy plugh 龘"])
    assert not vecs.any()
    with pytest.raises(ModalityUnsupported):
        await emb.embed([EmbedInput.of_image(b"...")])


def test_fingerprint_follows_the_weights_not_the_location(tmp_path: Path) -> None:
    a = StaticEmbedder(str(write_vec(tmp_path / "one.vec")))
    (tmp_path / "moved").mkdir()
    b = StaticEmbedder(str(write_vec(tmp_path / "moved" / "one.vec")))
    assert a.info.fingerprint == b.info.fingerprint
    path = tmp_path / "one.vec"
    path.write_text(path.read_text(encoding="utf-8").replace("0.0", "0.1", 1), encoding="utf-8")
    assert StaticEmbedder(str(path)).info.fingerprint != a.info.fingerprint


async def test_a_model2vec_folder_is_a_static_source(tmp_path: Path) -> None:
    model2vec = pytest.importorskip("model2vec")
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "[PAD]": 1, "cat": 2, "dog": 3, "city": 4, "rain": 5}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    vectors = np.stack(
        [TOPICS["func"], TOPICS["func"], TOPICS["pet"], TOPICS["pet"] + 0.05, TOPICS["city"], TOPICS["weather"]]
    ).astype(np.float32)
    model2vec.StaticModel(vectors=vectors, tokenizer=tok, normalize=True).save_pretrained(tmp_path / "m2v")
    emb = StaticEmbedder(str(tmp_path / "m2v"))
    assert emb.load_reports[0]["kind"] == "model2vec" and emb.info.dimension == 6
    vecs = await emb.embed_texts(["cat", "dog", "city"])
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2]
