"""Test kit for HomeAgent and its plugins (a pytest plugin).

Enable it with ``pytest_plugins = ["homeagent_sdk.testing"]`` (it is also registered through
the ``pytest11`` entry point). It provides deterministic doubles that never touch the network:

* :class:`FakeModel` — a scripted chat model (replies, tool calls, streaming, delays) that
  records every request it was sent.
* :class:`FakeEmbedder` — a character n-gram hashing embedder: similar texts get similar
  vectors, equal texts equal vectors, so recall and ranking can be tested without a model.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from typing import TYPE_CHECKING

from homeagent_sdk._fake_model import FakeModel, FakeReply, ToolCallReply
from homeagent_sdk.embeddings import EmbeddingInfo, EmbeddingProvider, EmbedInput, make_fingerprint

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["FakeEmbedder", "FakeModel", "FakeReply", "ToolCallReply"]

_WORD = re.compile(r"[a-z0-9]+")


class FakeEmbedder(EmbeddingProvider):
    """Deterministic hashing embedder for tests (text, and optionally images).

    Text features: CJK characters and their bigrams, lower-cased Latin words. Image inputs
    (when ``image=True``) hash their bytes, so the same image always gets the same vector.
    """

    __test__ = False

    def __init__(self, dimension: int = 64, *, image: bool = False, name: str = "fake") -> None:
        modalities = frozenset({"text", "image"} if image else {"text"})
        self.info = EmbeddingInfo(
            name=name,
            model=f"fake-{dimension}",
            dimension=dimension,
            fingerprint=make_fingerprint(name, f"fake-{dimension}", dimension),
            modalities=modalities,
        )
        self.calls: list[list[EmbedInput]] = []

    @staticmethod
    def features(text: str) -> list[str]:
        text = text.lower()
        cjk = [c for c in text if "\u4e00" <= c <= "\u9fff"]
        feats = cjk + [a + b for a, b in itertools.pairwise(cjk)]
        feats += _WORD.findall(text)
        return feats

    def _bucket(self, feature: str) -> int:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") % self.info.dimension

    async def embed(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        import numpy as np

        self.check_inputs(inputs)
        self.calls.append(list(inputs))
        out = np.zeros((len(inputs), self.info.dimension), dtype=np.float32)
        for row, item in enumerate(inputs):
            if item.modality == "image":
                feats = [hashlib.sha256(item.data or b"").hexdigest()[i : i + 4] for i in range(8)]
            else:
                feats = self.features(item.text or "")
            for feat in feats:
                out[row, self._bucket(feat)] += 1.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out
