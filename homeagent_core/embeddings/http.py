"""External embedding service speaking the OpenAI ``POST /v1/embeddings`` shape.

Request ``{"model": ..., "input": [...]}``, response ``{"data": [{"index": i, "embedding":
[...]}, ...]}``. Text inputs are strings. Images are only sent when ``image_format`` says how
the service expects them (there is no OpenAI standard for images):

* ``"data_url"`` — the input item is a string ``data:<mime>;base64,<bytes>``;
* ``"object"`` — the input item is ``{"image": "<base64>"}`` (Jina / multimodal-server style);
* ``"none"`` (default) — the provider is text-only and images raise ``ModalityUnsupported``.

The fingerprint includes the service URL: the same model name behind two services is not
assumed to be the same weights.
"""

from __future__ import annotations

import base64
import math
from typing import TYPE_CHECKING, Any, Literal

import httpx

from homeagent_core.embeddings.common import l2_normalize
from homeagent_sdk.embeddings import (
    EmbeddingInfo,
    EmbeddingProvider,
    EmbeddingUnavailable,
    EmbedInput,
    make_fingerprint,
)
from homeagent_sdk.errors import ProviderError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["HttpEmbeddingProvider", "ImageFormat"]

ImageFormat = Literal["none", "data_url", "object"]
_MAX_ERROR_BODY = 300


def _endpoint(base_url: str) -> str:
    url = base_url.rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise EmbeddingUnavailable(
            f"embedding service URL {base_url!r} must start with http:// or https:// "
            "(for example http://127.0.0.1:8000/v1)"
        )
    return url if url.endswith("/embeddings") else f"{url}/embeddings"


class HttpEmbeddingProvider(EmbeddingProvider):
    """Embeds through an OpenAI-compatible HTTP service.

    Use :meth:`connect` when the dimension is not known: it asks the service once.

    Args:
        base_url: the API base, e.g. ``http://127.0.0.1:8000/v1`` (``/embeddings`` is added).
        model: the model name sent in every request.
        dimension: the vector length the service returns.
        api_key: sent as ``Authorization: Bearer <key>`` when given.
        timeout: seconds per request.
        image_format: how images are sent (see the module docstring).
        batch_size: inputs per request.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        dimension: int,
        api_key: str | None = None,
        timeout: float = 30.0,
        image_format: ImageFormat = "none",
        batch_size: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if image_format not in ("none", "data_url", "object"):
            raise EmbeddingUnavailable(f"image_format {image_format!r} is not one of 'none', 'data_url', 'object'")
        if dimension <= 0:
            raise EmbeddingUnavailable(f"dimension must be positive, got {dimension}")
        self.url = _endpoint(base_url)
        self.model = model
        self.image_format = image_format
        self.batch_size = max(1, batch_size)
        self.timeout = timeout
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout), transport=transport)
        modalities = {"text"} if image_format == "none" else {"text", "image"}
        self.info = EmbeddingInfo(
            name="http",
            model=model,
            dimension=dimension,
            fingerprint=make_fingerprint("http", model, dimension, self.url),
            modalities=frozenset(modalities),
        )

    @classmethod
    async def connect(
        cls,
        base_url: str,
        model: str,
        *,
        dimension: int | None = None,
        **kwargs: Any,
    ) -> HttpEmbeddingProvider:
        """Build a provider, asking the service for the dimension when it is not given.

        Raises:
            EmbeddingUnavailable: the service cannot be reached or answers badly.
        """
        if dimension is None:
            probe = cls(base_url, model, dimension=1, **kwargs)
            try:
                vectors = await probe._request(["dimension probe"])
            except ProviderError as exc:
                raise EmbeddingUnavailable(str(exc)) from exc
            finally:
                await probe.aclose()
            dimension = len(vectors[0])
        return cls(base_url, model, dimension=dimension, **kwargs)

    def _item(self, item: EmbedInput) -> Any:
        if item.modality == "text":
            return item.text or ""
        b64 = base64.b64encode(item.data or b"").decode("ascii")
        if self.image_format == "data_url":
            return f"data:{item.mime};base64,{b64}"
        return {"image": b64}

    async def _request(self, items: list[Any]) -> list[list[float]]:
        try:
            resp = await self._client.post(self.url, json={"model": self.model, "input": items})
        except httpx.TimeoutException as exc:
            raise ProviderError(
                f"embedding service {self.url} did not answer within {self.timeout:g} s; "
                "raise the timeout or check the service"
            ) from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"embedding service {self.url} unreachable: {exc}") from exc
        if resp.status_code != 200:
            raise ProviderError(
                f"embedding service {self.url} answered HTTP {resp.status_code}: {resp.text[:_MAX_ERROR_BODY]}"
            )
        try:
            data = resp.json()["data"]
            ordered = sorted(data, key=lambda d: int(d.get("index", 0)))
            vectors = [[float(x) for x in d["embedding"]] for d in ordered]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProviderError(
                f"embedding service {self.url} sent a response without data[].embedding "
                f"number lists: {resp.text[:_MAX_ERROR_BODY]}"
            ) from exc
        if len(vectors) != len(items):
            raise ProviderError(f"embedding service {self.url} returned {len(vectors)} vectors for {len(items)} inputs")
        if any(not all(math.isfinite(x) for x in v) for v in vectors):
            raise ProviderError(f"embedding service {self.url} returned NaN or infinite values")
        return vectors

    async def embed(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        import numpy as np

        self.check_inputs(inputs)
        out = np.zeros((len(inputs), self.info.dimension), dtype=np.float32)
        rows = [i for i, x in enumerate(inputs) if x.modality == "image" or (x.text or "").strip()]
        for start in range(0, len(rows), self.batch_size):
            chunk = rows[start : start + self.batch_size]
            vectors = await self._request([self._item(inputs[i]) for i in chunk])
            for row, vec in zip(chunk, vectors, strict=True):
                if len(vec) != self.info.dimension:
                    raise ProviderError(
                        f"embedding service {self.url} returned a {len(vec)}-d vector; "
                        f"this space ({self.model}) is {self.info.dimension}-d"
                    )
                out[row] = vec
        return l2_normalize(out)

    async def aclose(self) -> None:
        await self._client.aclose()
