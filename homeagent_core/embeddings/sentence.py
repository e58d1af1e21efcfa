"""sentence-transformers tier: any local SentenceTransformer model (text; CLIP models also image).

The model is loaded from a local directory or the local Hugging Face cache
(``local_files_only`` unless downloads are explicitly allowed). Construction loads weights and
takes seconds: build it in a worker thread.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from homeagent_core.embeddings.clip import decode_image
from homeagent_core.embeddings.common import (
    ensure_installed,
    l2_normalize,
    model_card_languages,
    require,
    resolve_model,
    space_label,
    truncate_text,
)
from homeagent_sdk.embeddings import (
    EmbeddingInfo,
    EmbeddingProvider,
    EmbeddingUnavailable,
    EmbedInput,
    make_fingerprint,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["SentenceTransformerProvider"]


class SentenceTransformerProvider(EmbeddingProvider):
    """Embeds with ``sentence_transformers.SentenceTransformer``.

    Args:
        model: a local model directory or a repo id present in the local Hugging Face cache.
        device: torch device string.
        allow_download: fetch a repo id missing from the cache (off by default).
        batch_size: sentences per forward pass.
    """

    def __init__(
        self,
        model: str,
        *,
        device: str = "cpu",
        allow_download: bool = False,
        batch_size: int = 64,
    ) -> None:
        ensure_installed("torch")
        ensure_installed("sentence_transformers")
        path, weights_id = resolve_model(model, allow_download=allow_download)
        st = require("sentence_transformers")
        try:
            self._model = st.SentenceTransformer(str(path), device=device, local_files_only=not allow_download)
        except (OSError, ValueError, KeyError) as exc:
            raise EmbeddingUnavailable(f"could not load sentence-transformers model from {str(path)!r}: {exc}") from exc
        dim = (
            self._model.get_embedding_dimension()
            if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension()
        )
        if not dim:
            raise EmbeddingUnavailable(f"sentence-transformers model at {str(path)!r} does not declare its dimension")
        self._lock = threading.Lock()
        self._batch_size = batch_size
        self._max_tokens = int(getattr(self._model, "max_seq_length", 512) or 512)
        self.path = path
        modalities = {"text"}
        if "CLIP" in type(self._model[0]).__name__:
            modalities.add("image")
        self.info = EmbeddingInfo(
            name="sentence-transformers",
            model=model,
            dimension=int(dim),
            fingerprint=make_fingerprint("sentence-transformers", space_label(model), int(dim), weights_id),
            modalities=frozenset(modalities),
            # an undeclared card leaves the model serving any language, as before
            languages=model_card_languages(path) or frozenset({"*"}),
        )

    def _encode(self, items: list[Any]) -> Any:
        return self._model.encode(
            items,
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=False,
            show_progress_bar=False,
        )

    def _embed_sync(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        import numpy as np

        out = np.zeros((len(inputs), self.info.dimension), dtype=np.float32)
        text_rows = [i for i, x in enumerate(inputs) if x.modality == "text" and (x.text or "").strip()]
        image_rows = [i for i, x in enumerate(inputs) if x.modality == "image"]
        images = [decode_image(inputs[i]) for i in image_rows]
        with self._lock:
            if text_rows:
                texts = [truncate_text(inputs[i].text or "", self._max_tokens) for i in text_rows]
                out[text_rows] = self._encode(texts)
            if image_rows:
                out[image_rows] = self._encode(images)
        return l2_normalize(out)

    async def embed(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        self.check_inputs(inputs)
        return await asyncio.to_thread(self._embed_sync, inputs)
