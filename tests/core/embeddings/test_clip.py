from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from homeagent_core.embeddings.clip import ChineseClipProvider
from homeagent_sdk.embeddings import (
    EmbeddingUnavailable,
    EmbedInput,
    InvalidEmbedInput,
    ModalityUnsupported,
)

pytest.importorskip("transformers")

PngMaker = Callable[..., bytes]


@pytest.fixture(scope="module")
def clip(tiny_clip_dir: Path) -> ChineseClipProvider:
    return ChineseClipProvider(str(tiny_clip_dir))


def test_tiny_chinese_clip_loads_through_the_production_loader(clip: ChineseClipProvider) -> None:
    assert clip.info.name == "chineseclip"
    assert clip.info.dimension == 16
    assert clip.info.modalities == frozenset({"text", "image"})
    assert len(clip.info.fingerprint) == 12


async def test_text_and_images_embed_into_one_normalised_float32_space(
    clip: ChineseClipProvider, make_png: PngMaker
) -> None:
    vecs = await clip.embed(
        [
            EmbedInput.of_text("我住在杭州"),
            EmbedInput.of_image(make_png((255, 0, 0))),
            EmbedInput.of_text("明天下雨"),
            EmbedInput.of_image(make_png((0, 0, 255), (64, 20)), "image/png"),
        ]
    )
    assert vecs.dtype == np.float32 and vecs.shape == (4, 16) and vecs.flags.c_contiguous
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(vecs[0], vecs[2])
    assert not np.allclose(vecs[1], vecs[3])


async def test_embedding_is_deterministic_and_independent_of_batch_composition(
    clip: ChineseClipProvider, make_png: PngMaker
) -> None:
    alone = await clip.embed_texts(["我住在杭州"])
    mixed = await clip.embed([EmbedInput.of_image(make_png((1, 2, 3))), EmbedInput.of_text("我住在杭州")])
    assert np.allclose(alone[0], mixed[1], atol=1e-5)


async def test_empty_text_embeds_as_a_zero_row_and_a_megabyte_string_is_truncated(
    clip: ChineseClipProvider,
) -> None:
    vecs = await clip.embed_texts(["", "   ", "杭" * (1 << 20)])
    assert not vecs[0].any() and not vecs[1].any()
    assert np.isclose(np.linalg.norm(vecs[2]), 1.0, atol=1e-5)


async def test_bytes_that_are_not_an_image_raise_a_clear_error(clip: ChineseClipProvider) -> None:
    with pytest.raises(InvalidEmbedInput, match="not a readable image"):
        await clip.embed([EmbedInput.of_image(b"definitely not a png", "image/png")])
    with pytest.raises(InvalidEmbedInput, match="no bytes"):
        await clip.embed([EmbedInput.of_image(b"", "image/jpeg")])


async def test_unsupported_modality_raises_instead_of_substituting(
    clip: ChineseClipProvider,
) -> None:
    with pytest.raises(ModalityUnsupported):
        await clip.embed([EmbedInput(data=b"RIFF....", mime="audio/wav")])


def test_fingerprint_is_stable_for_the_same_weights_and_changes_with_other_weights(
    tiny_clip_dir: Path,
    tmp_path: Path,
    clip: ChineseClipProvider,
    build_tiny_chinese_clip: Callable[..., Path],
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tiny_clip_dir, copy)
    assert ChineseClipProvider(str(copy)).info.fingerprint == clip.info.fingerprint
    other = build_tiny_chinese_clip(tmp_path / "other", seed=1)
    assert ChineseClipProvider(str(other)).info.fingerprint != clip.info.fingerprint


def test_a_model_path_that_does_not_exist_is_unavailable_and_named(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(EmbeddingUnavailable, match="does not exist") as info:
        ChineseClipProvider(str(missing))
    assert str(missing) in str(info.value)


def test_a_hub_model_missing_from_the_local_cache_is_unavailable_offline() -> None:
    with pytest.raises(EmbeddingUnavailable, match="not in the local Hugging Face cache"):
        ChineseClipProvider("homeagent-tests/no-such-clip-model")


def test_a_directory_holding_another_kind_of_model_is_rejected(tmp_path: Path) -> None:
    from transformers import BertConfig, BertModel

    BertModel(
        BertConfig(
            vocab_size=50,
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=1,
            intermediate_size=8,
        )
    ).save_pretrained(tmp_path / "bert")
    with pytest.raises(EmbeddingUnavailable):
        ChineseClipProvider(str(tmp_path / "bert"))
