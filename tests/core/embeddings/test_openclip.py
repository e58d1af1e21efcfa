from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from homeagent_sdk.embeddings import EmbeddingUnavailable, EmbedInput

open_clip = pytest.importorskip("open_clip")
torch = pytest.importorskip("torch")

from homeagent_core.embeddings.clip import OpenClipProvider  # noqa: E402

TINY = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "patch_size": 8},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}


@pytest.fixture(scope="module")
def tiny_name(tmp_path_factory: pytest.TempPathFactory) -> str:
    cfg_dir = tmp_path_factory.mktemp("openclip-cfg")
    (cfg_dir / "homeagent-tiny-clip.json").write_text(json.dumps(TINY), encoding="utf-8")
    open_clip.add_model_config(cfg_dir)
    return "homeagent-tiny-clip"


async def test_an_open_clip_model_embeds_text_and_images(tiny_name: str, make_png) -> None:  # type: ignore[no-untyped-def]
    provider = OpenClipProvider(tiny_name)
    assert provider.info.dimension == 16
    assert provider.info.modalities == frozenset({"text", "image"})
    vecs = await provider.embed(
        [EmbedInput.of_text("a cat"), EmbedInput.of_image(make_png((10, 200, 30))), EmbedInput.of_text("")]
    )
    assert vecs.shape == (3, 16) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs[:2], axis=1), 1.0, atol=1e-5)
    assert not vecs[2].any()


async def test_local_weights_reload_into_the_same_space(tiny_name: str, tmp_path: Path) -> None:
    first = OpenClipProvider(tiny_name)
    weights = tmp_path / "tiny.pt"
    torch.save(first._model.state_dict(), weights)
    a = OpenClipProvider(tiny_name, str(weights))
    b = OpenClipProvider(tiny_name, str(weights))
    assert a.info.fingerprint == b.info.fingerprint != first.info.fingerprint
    va = await a.embed_texts(["hello world"])
    vb = await first.embed_texts(["hello world"])
    assert np.allclose(va, vb, atol=1e-5)


def test_missing_weights_and_uncached_tags_are_unavailable(tiny_name: str, tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match="does not exist"):
        OpenClipProvider(tiny_name, str(tmp_path / "none.pt"))
    with pytest.raises(EmbeddingUnavailable):
        OpenClipProvider("ViT-B-32", "laion2b_s34b_b79k")
    with pytest.raises(EmbeddingUnavailable, match="could not create open_clip model"):
        OpenClipProvider("no-such-architecture")
