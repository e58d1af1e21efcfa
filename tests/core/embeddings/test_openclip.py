"""OpenClipProvider on a tiny open_clip model built here (needs the ``clip`` extra)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from homeagent_sdk.embeddings import EmbeddingUnavailable, EmbedInput

open_clip = pytest.importorskip("open_clip")
torch = pytest.importorskip("torch")

from homeagent_core.embeddings.clip import OpenClipProvider  # noqa: E402

TINY = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "head_width": 16, "patch_size": 8},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 2},
}
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def tiny_name(tmp_path_factory: pytest.TempPathFactory) -> str:
    cfg_dir = tmp_path_factory.mktemp("openclip-cfg")
    (cfg_dir / "homeagent-tiny-clip.json").write_text(json.dumps(TINY), encoding="utf-8")
    open_clip.add_model_config(cfg_dir)
    return "homeagent-tiny-clip"


def write_model_folder(folder: Path, model: object) -> Path:
    """An open_clip model folder as open_clip's own hub repos lay it out."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": TINY}), encoding="utf-8")
    torch.save(model.state_dict(), folder / "open_clip_pytorch_model.bin")  # type: ignore[attr-defined]
    return folder


async def test_an_open_clip_model_embeds_text_and_images(tiny_name: str, make_png) -> None:  # type: ignore[no-untyped-def]
    provider = OpenClipProvider(tiny_name, allow_random_init=True)
    assert provider.info.dimension == 16
    assert provider.info.modalities == frozenset({"text", "image"})
    vecs = await provider.embed(
        [EmbedInput.of_text("a cat"), EmbedInput.of_image(make_png((10, 200, 30))), EmbedInput.of_text("")]
    )
    assert vecs.shape == (3, 16) and vecs.dtype == np.float32 and vecs.flags["C_CONTIGUOUS"]
    assert np.allclose(np.linalg.norm(vecs[:2], axis=1), 1.0, atol=1e-5)
    assert not vecs[2].any()


async def test_local_weights_reload_into_the_same_space(tiny_name: str, tmp_path: Path) -> None:
    first = OpenClipProvider(tiny_name, allow_random_init=True)
    weights = tmp_path / "tiny.pt"
    torch.save(first._model.state_dict(), weights)
    a = OpenClipProvider(tiny_name, str(weights))
    b = OpenClipProvider(tiny_name, str(weights))
    assert a.info.fingerprint == b.info.fingerprint != first.info.fingerprint
    va = await a.embed_texts(["hello world"])
    vb = await first.embed_texts(["hello world"])
    assert np.allclose(va, vb, atol=1e-5)


def test_an_architecture_without_weights_is_refused_unless_random_init_is_asked_for(tiny_name: str) -> None:
    with pytest.raises(EmbeddingUnavailable, match=r"has no weights.*local-dir:.*hf-hub:"):
        OpenClipProvider(tiny_name)
    a = OpenClipProvider(tiny_name, allow_random_init=True)
    b = OpenClipProvider(tiny_name, allow_random_init=True)
    assert a.info.fingerprint != b.info.fingerprint


def test_missing_weights_and_uncached_tags_are_unavailable(tiny_name: str, tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match="does not exist"):
        OpenClipProvider(tiny_name, str(tmp_path / "none.pt"))
    with pytest.raises(EmbeddingUnavailable, match="not in the local Hugging Face cache"):
        OpenClipProvider("ViT-B-32", "laion2b_s34b_b79k")
    with pytest.raises(EmbeddingUnavailable, match="no such architecture"):
        OpenClipProvider("no-such-architecture")


async def test_a_local_model_folder_loads_its_weights_and_keeps_its_space_when_moved(
    tiny_name: str, tmp_path: Path
) -> None:
    source = OpenClipProvider(tiny_name, allow_random_init=True)
    folder = write_model_folder(tmp_path / "models" / "tiny", source._model)
    loaded = OpenClipProvider(f"local-dir:{folder}")
    assert loaded.info.dimension == 16 and loaded.info.model == f"local-dir:{folder}"
    assert np.allclose(await loaded.embed_texts(["一只猫"]), await source.embed_texts(["一只猫"]), atol=1e-5)
    moved = shutil.copytree(folder, tmp_path / "elsewhere")
    assert OpenClipProvider(f"local-dir:{moved}").info.fingerprint == loaded.info.fingerprint
    other = write_model_folder(tmp_path / "other", OpenClipProvider(tiny_name, allow_random_init=True)._model)
    assert OpenClipProvider(f"local-dir:{other}").info.fingerprint != loaded.info.fingerprint


def test_an_incomplete_model_folder_is_unavailable_with_what_is_missing(tiny_name: str, tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match="does not exist"):
        OpenClipProvider(f"local-dir:{tmp_path / 'absent'}")
    folder = write_model_folder(tmp_path / "m", OpenClipProvider(tiny_name, allow_random_init=True)._model)
    (folder / "open_clip_pytorch_model.bin").unlink()
    with pytest.raises(EmbeddingUnavailable, match="no weights file"):
        OpenClipProvider(f"local-dir:{folder}")
    (folder / "open_clip_config.json").unlink()
    with pytest.raises(EmbeddingUnavailable, match=r"no open_clip_config\.json"):
        OpenClipProvider(f"local-dir:{folder}")
    with pytest.raises(EmbeddingUnavailable, match="would be ignored"):
        OpenClipProvider(f"local-dir:{folder}", "laion2b_s34b_b79k")


async def test_a_hub_repo_loads_from_the_local_cache_without_the_network(
    tiny_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    repo = cache / "models--homeagent--tiny-open-clip"
    source = OpenClipProvider(tiny_name, allow_random_init=True)
    write_model_folder(repo / "snapshots" / COMMIT, source._model)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT, encoding="utf-8")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    loaded = OpenClipProvider("hf-hub:homeagent/tiny-open-clip")
    assert loaded.info.model == "hf-hub:homeagent/tiny-open-clip"
    assert np.allclose(await loaded.embed_texts(["a dog"]), await source.embed_texts(["a dog"]), atol=1e-5)
    assert OpenClipProvider("hf-hub:homeagent/tiny-open-clip").info.fingerprint == loaded.info.fingerprint
    with pytest.raises(EmbeddingUnavailable, match="not in the local Hugging Face cache"):
        OpenClipProvider("hf-hub:homeagent/not-downloaded")
