"""Unified multimodal tier: text and images in one vector space.

Two families: Chinese-CLIP through transformers (``chineseclip``, the default space; needs no
torchvision) and any open_clip model (``openclip``, in the ``clip`` extra because open_clip
needs torchvision). Constructing a provider loads the model, which takes seconds: do it in a
worker thread (:func:`asyncio.to_thread`), as :mod:`homeagent_core.embeddings.registry` does.
Inference always runs off the event loop, one batch at a time behind a lock.
"""

from __future__ import annotations

import abc
import asyncio
import io
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from homeagent_core.embeddings.common import (
    ensure_installed,
    l2_normalize,
    require,
    resolve_model,
    space_label,
    truncate_text,
    weights_identity,
)
from homeagent_sdk.embeddings import (
    EmbeddingInfo,
    EmbeddingProvider,
    EmbeddingUnavailable,
    EmbedInput,
    InvalidEmbedInput,
    make_fingerprint,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["DEFAULT_CHINESE_CLIP", "ChineseClipProvider", "OpenClipProvider", "decode_image"]

DEFAULT_CHINESE_CLIP = "OFA-Sys/chinese-clip-vit-base-patch16"


def decode_image(item: EmbedInput) -> Any:
    """Decode an image input into an RGB PIL image.

    Raises:
        InvalidEmbedInput: the bytes are empty or not an image PIL can read.
    """
    require("PIL")
    from PIL import Image, UnidentifiedImageError

    if not item.data:
        raise InvalidEmbedInput(f"image input ({item.mime}) has no bytes")
    try:
        with Image.open(io.BytesIO(item.data)) as img:
            img.load()
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise InvalidEmbedInput(
            f"input declared as {item.mime} ({len(item.data)} bytes) is not a readable image: {exc}"
        ) from exc


def _cached_open_clip_weights(open_clip: Any, model_name: str, tag: str) -> str:
    """The local cache file of an open_clip pretrained tag, without touching the network."""
    cfg = open_clip.get_pretrained_cfg(model_name, tag) or {}
    hub = cfg.get("hf_hub", "")
    if not hub:
        raise EmbeddingUnavailable(
            f"open_clip has no pretrained tag {tag!r} for {model_name!r} on the Hugging Face "
            "hub; give a local weights file as pretrained, or allow downloads explicitly"
        )
    from huggingface_hub import hf_hub_download

    parts = hub.strip("/").split("/")
    repo_id, sub = "/".join(parts[:2]), "/".join(parts[2:])
    names = [cfg["file"]] if cfg.get("file") else []
    names += ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]
    for name in names:
        try:
            path = hf_hub_download(repo_id, f"{sub}/{name}" if sub else name, local_files_only=True)
        except Exception:  # not cached under this name (or an odd hub layout): try the next
            continue
        return str(path)
    raise EmbeddingUnavailable(
        f"open_clip weights {model_name!r}/{tag!r} ({hub}) are not in the local Hugging Face "
        "cache; download them there, pass a local file as pretrained, or allow downloads"
    )


class _TorchProvider(EmbeddingProvider):
    """Shared batching: split inputs by modality, run each group off the loop, reassemble."""

    batch_size: int = 32

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @abc.abstractmethod
    def _embed_texts(self, texts: list[str]) -> Any:
        """Unnormalised text features, one row per text (runs in a worker thread)."""

    @abc.abstractmethod
    def _embed_images(self, images: list[Any]) -> Any:
        """Unnormalised image features, one row per decoded image (runs in a worker thread)."""

    def _embed_sync(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(inputs), self.info.dimension), dtype=np.float32)
        text_rows = [i for i, x in enumerate(inputs) if x.modality == "text" and (x.text or "").strip()]
        image_rows = [i for i, x in enumerate(inputs) if x.modality == "image"]
        images = [decode_image(inputs[i]) for i in image_rows]  # fail before any inference
        with self._lock:
            for start in range(0, len(text_rows), self.batch_size):
                rows = text_rows[start : start + self.batch_size]
                out[rows] = self._embed_texts([inputs[i].text or "" for i in rows])
            for start in range(0, len(image_rows), self.batch_size):
                rows = image_rows[start : start + self.batch_size]
                out[rows] = self._embed_images(images[start : start + self.batch_size])
        return l2_normalize(out)

    async def embed(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        self.check_inputs(inputs)
        return await asyncio.to_thread(self._embed_sync, inputs)


class ChineseClipProvider(_TorchProvider):
    """Chinese-CLIP (``ChineseCLIPModel`` + processor) for text and images.

    Args:
        model: a local model directory or a Hugging Face repo id found in the local cache.
        device: torch device string.
        allow_download: fetch a repo id missing from the cache (off by default).
        batch_size: inputs per forward pass.
    """

    def __init__(
        self,
        model: str = DEFAULT_CHINESE_CLIP,
        *,
        device: str = "cpu",
        allow_download: bool = False,
        batch_size: int = 32,
    ) -> None:
        super().__init__()
        for module in ("torch", "transformers", "PIL"):
            ensure_installed(module)
        # Find the weights before importing transformers (seconds): a missing model is the
        # common case on a fresh install and must be reported at once.
        path, weights_id = resolve_model(model, allow_download=allow_download)
        from transformers import AutoModel, AutoProcessor

        try:
            self._model = AutoModel.from_pretrained(str(path)).to(device).eval()
            self._processor = AutoProcessor.from_pretrained(str(path))  # type: ignore[no-untyped-call]
        except (OSError, ValueError, KeyError) as exc:
            raise EmbeddingUnavailable(f"could not load Chinese-CLIP model from {str(path)!r}: {exc}") from exc
        for attr in ("text_model", "vision_model", "text_projection", "visual_projection"):
            if not hasattr(self._model, attr):
                raise EmbeddingUnavailable(
                    f"model at {str(path)!r} is a {type(self._model).__name__}, not a "
                    "Chinese-CLIP model (config.json model_type should be 'chinese_clip')"
                )
        self._device = device
        self.batch_size = batch_size
        self.path = path
        cfg = self._model.config
        self._max_tokens = min(52, int(cfg.text_config.max_position_embeddings))
        dim = int(cfg.projection_dim)
        self.info = EmbeddingInfo(
            name="chineseclip",
            model=model,
            dimension=dim,
            fingerprint=make_fingerprint("chineseclip", space_label(model), dim, weights_id),
            modalities=frozenset({"text", "image"}),
            languages=frozenset({"zh", "en"}),  # a Chinese RoBERTa text tower; English words in its vocabulary
        )

    def _embed_texts(self, texts: list[str]) -> Any:
        import torch

        enc = self._processor.tokenizer(
            [truncate_text(t, self._max_tokens) for t in texts],
            padding=True,
            truncation=True,
            max_length=self._max_tokens,
            return_tensors="pt",
        ).to(self._device)
        with torch.inference_mode():
            hidden = self._model.text_model(**enc).last_hidden_state[:, 0, :]
            return self._model.text_projection(hidden).float().cpu().numpy()

    def _embed_images(self, images: list[Any]) -> Any:
        import torch

        pixels = self._processor.image_processor(images=images, return_tensors="pt")
        with torch.inference_mode():
            pooled = self._model.vision_model(pixel_values=pixels["pixel_values"].to(self._device)).pooler_output
            return self._model.visual_projection(pooled).float().cpu().numpy()


_LOCAL_DIR = "local-dir:"
_HF_HUB = "hf-hub:"
_OPEN_CLIP_WEIGHTS = ("*.safetensors", "*.bin", "*.pth", "*.pt")


def _open_clip_folder(folder: Path, shown: str) -> Path:
    """Check that ``folder`` holds an open_clip model (config and weights) before loading it.

    Raises:
        EmbeddingUnavailable: the folder, its ``open_clip_config.json`` or its weights are missing.
    """
    if not folder.is_dir():
        raise EmbeddingUnavailable(
            f"open_clip model folder {shown!r} does not exist; point local-dir: at a folder "
            "holding open_clip_config.json and the weights"
        )
    if not (folder / "open_clip_config.json").is_file():
        raise EmbeddingUnavailable(
            f"open_clip model folder {shown!r} has no open_clip_config.json; it is not an "
            "open_clip model folder (a transformers CLIP folder belongs to another provider)"
        )
    if not any(any(folder.glob(pattern)) for pattern in _OPEN_CLIP_WEIGHTS):
        raise EmbeddingUnavailable(
            f"open_clip model folder {shown!r} has no weights file "
            "(open_clip_model.safetensors or open_clip_pytorch_model.bin)"
        )
    return folder


def _openclip_languages(model_name: str) -> frozenset[str]:
    """open_clip text towers are English except the multilingual (XLM-R, mT5...) ones."""
    lowered = model_name.lower()
    if any(mark in lowered for mark in ("xlm", "multilingual", "mt5", "m3", "nllb")):
        return frozenset({"*"})
    return frozenset({"en"})


class OpenClipProvider(_TorchProvider):
    """Any open_clip model, with its weights from one of three places.

    * ``model_name`` an architecture (``ViT-B-32``) and ``pretrained`` a tag already in the
      local Hugging Face cache, or a local weights file;
    * ``model_name`` ``local-dir:<folder>``: a folder holding ``open_clip_config.json`` and
      the weights;
    * ``model_name`` ``hf-hub:<org>/<repo>``: such a folder in the local Hugging Face cache.

    Nothing is downloaded unless ``allow_download``. An architecture without weights is
    randomly initialised: its vectors mean nothing and differ on every start, so it is refused
    unless ``allow_random_init`` (tests and benchmarks).

    Raises:
        EmbeddingUnavailable: the model or its weights cannot be found or loaded; the message
            names what was looked for.
    """

    def __init__(
        self,
        model_name: str,
        pretrained: str | None = None,
        *,
        device: str = "cpu",
        allow_download: bool = False,
        batch_size: int = 32,
        allow_random_init: bool = False,
    ) -> None:
        super().__init__()
        require("torch", "clip")
        open_clip = require("open_clip", "clip")
        require("PIL", "clip")
        create_name, pretrained, label, weights_id = self._locate(
            open_clip, model_name, pretrained, allow_download=allow_download, allow_random_init=allow_random_init
        )
        try:
            model, _, preprocess = open_clip.create_model_and_transforms(
                create_name,
                pretrained=pretrained,
                device=device,
                # The full CLIP checkpoint holds both towers: never fetch base tower weights.
                pretrained_text=False,
                require_pretrained=not allow_random_init,
            )
            tokenizer = open_clip.get_tokenizer(create_name)
        except (RuntimeError, ValueError) as exc:
            raise EmbeddingUnavailable(
                f"could not create open_clip model {model_name!r} (pretrained={pretrained!r}): {exc}"
            ) from exc
        except OSError as exc:
            raise EmbeddingUnavailable(
                f"open_clip weights for {model_name!r}/{pretrained!r} could not be loaded: {exc}"
            ) from exc
        self._model = model.eval()
        self._preprocess = preprocess
        self._tokenizer = tokenizer
        self._device = device
        self.batch_size = batch_size
        self._max_tokens = int(getattr(tokenizer, "context_length", 77) or 77)
        dim = self._probe_dimension()
        self.info = EmbeddingInfo(
            name="openclip",
            model=f"{model_name}/{pretrained}" if pretrained and not model_name.startswith(_HF_HUB) else model_name,
            dimension=dim,
            fingerprint=make_fingerprint("openclip", label, dim, weights_id),
            modalities=frozenset({"text", "image"}),
            languages=_openclip_languages(model_name),
        )

    @staticmethod
    def _locate(
        open_clip: Any, model_name: str, pretrained: str | None, *, allow_download: bool, allow_random_init: bool
    ) -> tuple[str, str | None, str, str]:
        """Where the weights come from: ``(name for open_clip, pretrained, space label, weights id)``.

        The space label leaves out local paths, so moving a model folder or weights file keeps
        its vectors valid; the weights id tells different weights apart.
        """
        if model_name.startswith((_LOCAL_DIR, _HF_HUB)):
            if pretrained:
                raise EmbeddingUnavailable(
                    f"open_clip model {model_name!r} brings its own weights; pretrained={pretrained!r} "
                    "would be ignored, leave it empty"
                )
            if model_name.startswith(_LOCAL_DIR):
                shown = model_name[len(_LOCAL_DIR) :]
                folder = _open_clip_folder(Path(shown).expanduser(), shown)
                return f"{_LOCAL_DIR}{folder}", None, _LOCAL_DIR, weights_identity(folder)
            repo = model_name[len(_HF_HUB) :]
            snapshot, revision = resolve_model(repo, allow_download=allow_download)
            folder = _open_clip_folder(snapshot, f"{model_name} ({snapshot})")
            return f"{_LOCAL_DIR}{folder}", None, model_name, revision
        if open_clip.get_model_config(model_name.replace("/", "-")) is None:
            raise EmbeddingUnavailable(
                f"could not create open_clip model {model_name!r}: open_clip has no such architecture "
                "(open_clip.list_models() lists them); a model folder is named local-dir:<path>, "
                "a hub repo hf-hub:<org>/<repo>"
            )
        if not pretrained:
            if not allow_random_init:
                raise EmbeddingUnavailable(
                    f"open_clip model {model_name!r} has no weights: give pretrained (a tag in the "
                    "local Hugging Face cache or a weights file), or name a model folder as "
                    "local-dir:<path> or a cached hub repo as hf-hub:<org>/<repo>"
                )
            # Random initial weights are a space of their own: never equal to another instance's.
            return model_name, None, model_name, f"random-init-{uuid.uuid4().hex}"
        local = Path(pretrained).expanduser()
        if local.is_file():
            return model_name, str(local), f"{model_name}/local", weights_identity(local)
        if local.exists() or pretrained.startswith(("/", ".", "~")):
            raise EmbeddingUnavailable(
                f"open_clip weights file {pretrained!r} does not exist or is not a file; give an "
                "existing file or a pretrained tag from open_clip.list_pretrained()"
            )
        path = pretrained if allow_download else _cached_open_clip_weights(open_clip, model_name, pretrained)
        return model_name, path, f"{model_name}/{pretrained}", pretrained

    def _probe_dimension(self) -> int:
        import torch

        with torch.inference_mode():
            return int(self._model.encode_text(self._tokenizer(["a"]).to(self._device)).shape[-1])

    def _embed_texts(self, texts: list[str]) -> Any:
        import torch

        tokens = self._tokenizer([truncate_text(t, self._max_tokens) for t in texts])
        with torch.inference_mode():
            return self._model.encode_text(tokens.to(self._device)).float().cpu().numpy()

    def _embed_images(self, images: list[Any]) -> Any:
        import torch

        batch = torch.stack([self._preprocess(img) for img in images]).to(self._device)
        with torch.inference_mode():
            return self._model.encode_image(batch).float().cpu().numpy()
