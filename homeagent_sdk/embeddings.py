"""Embedding provider SPI shared by every memory layer.

A provider turns inputs (text, or image bytes with a MIME type) into float32, L2-normalised
row vectors of one space. Every vector HomeAgent stores carries the space's ``fingerprint``;
vectors are only compared with vectors of the same fingerprint and dimension.

Providers are contributed by plugins through the ``register_embedding_providers`` hook. A
provider that cannot embed a modality raises :class:`ModalityUnsupported`; it never answers
with another model's vector.
"""

from __future__ import annotations

import abc
import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from homeagent_sdk.errors import HomeAgentError, ModalityUnsupported

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "EmbedInput",
    "EmbeddingInfo",
    "EmbeddingProvider",
    "EmbeddingUnavailable",
    "InvalidEmbedInput",
    "Modality",
    "ModalityUnsupported",
    "make_fingerprint",
    "text_language",
]

Modality = Literal["text", "image"]


class EmbeddingUnavailable(HomeAgentError):
    """A provider cannot be built: its package, model path, cached weights or file is missing
    or unreadable. The message names what was looked for and how to provide it; callers fall
    back to the next embedding tier."""


class InvalidEmbedInput(HomeAgentError, ValueError):
    """An input cannot be embedded as given (bytes that are not a decodable image, ...)."""


def make_fingerprint(provider: str, model: str, dimension: int, weights_id: str = "") -> str:
    """A short, stable id of an embedding space.

    ``weights_id`` identifies the actual weights (a file hash, a revision); two spaces with the
    same provider, model name and dimension but different weights get different fingerprints.
    """
    raw = f"{provider}\x00{model}\x00{dimension}\x00{weights_id}".encode()
    return hashlib.sha256(raw).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class EmbedInput:
    """One thing to embed: ``text``, or ``data`` bytes with a ``mime`` such as ``image/png``."""

    text: str | None = None
    data: bytes | None = None
    mime: str = "text/plain"

    @property
    def modality(self) -> Modality:
        if self.data is not None and self.mime.startswith("image/"):
            return "image"
        if self.text is not None:
            return "text"
        raise ModalityUnsupported(
            f"unsupported input: mime {self.mime!r} (HomeAgent embeds text and image/* only)"
        )

    @classmethod
    def of_text(cls, text: str) -> EmbedInput:
        return cls(text=text)

    @classmethod
    def of_image(cls, data: bytes, mime: str = "image/png") -> EmbedInput:
        return cls(data=data, mime=mime)


@dataclass(frozen=True, slots=True)
class EmbeddingInfo:
    """Describes one embedding space.

    ``languages`` are the languages whose text the model understands (ISO 639-1 codes such as
    ``"zh"``, ``"en"``; ``"*"`` = any). Search fuses a dense path only for queries in one of
    them (:func:`text_language`): an English-only model's vectors of a Chinese question are
    noise, and fusing them lowers recall.
    """

    name: str
    model: str
    dimension: int
    fingerprint: str
    modalities: frozenset[str] = field(default_factory=lambda: frozenset({"text"}))
    languages: frozenset[str] = field(default_factory=lambda: frozenset({"*"}))

    def serves(self, language: str) -> bool:
        """True when text in ``language`` (as :func:`text_language` names it) embeds meaningfully."""
        return "*" in self.languages or language in self.languages


_CJK_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_RE = re.compile("[A-Za-z]")


def text_language(text: str) -> str:
    """The language of a query for fusion: ``"zh"`` when CJK characters are at least a
    quarter of its letters, else ``"en"`` (Latin script; other scripts are rare in practice).
    """
    cjk = len(_CJK_RE.findall(text))
    latin = len(_LATIN_RE.findall(text))
    return "zh" if cjk and cjk * 3 >= latin else "en"


class EmbeddingProvider(abc.ABC):
    """Base class of every embedding provider.

    Subclasses set :attr:`info` and implement :meth:`embed`. CPU-heavy models must run their
    inference off the event loop (``asyncio.to_thread``).
    """

    info: EmbeddingInfo

    @abc.abstractmethod
    async def embed(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        """Embed ``inputs``; returns an ``(len(inputs), dimension)`` float32 matrix.

        Rows are L2-normalised. An input whose text is empty embeds as a zero row.

        Raises:
            ModalityUnsupported: an input's modality is not in ``info.modalities``.
        """

    async def embed_texts(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Shorthand for embedding plain strings."""
        return await self.embed([EmbedInput.of_text(t) for t in texts])

    def supports(self, modality: str) -> bool:
        return modality in self.info.modalities

    def check_inputs(self, inputs: list[EmbedInput]) -> None:
        """Raise :class:`ModalityUnsupported` for the first input this provider cannot embed."""
        for item in inputs:
            modality = item.modality
            if modality not in self.info.modalities:
                raise ModalityUnsupported(
                    f"embedding provider {self.info.name!r} ({self.info.model}) does not embed "
                    f"{modality}; it supports {sorted(self.info.modalities)}"
                )

    async def aclose(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release models or connections; the default has nothing to release."""
