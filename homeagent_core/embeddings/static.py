"""Static word-vector tier: word2vec / fastText / ConceptNet Numberbatch files and model2vec.

Sources (``core.agent.embedding_model_path``, comma separated, combined):

* a model2vec folder (``config.json`` + ``model.safetensors`` + ``tokenizer.json``), encoded by
  ``model2vec.StaticModel`` with its own tokenizer and weighting;
* word2vec / fastText text files (``.vec``, ``.txt``, optionally ``.gz``; an optional
  ``"<count> <dim>"`` header line), and word2vec binary ``.bin`` files. fastText's own ``.bin``
  model format is not supported (use the ``.vec`` file published next to it);
* ConceptNet Numberbatch multilingual files: keys like ``/c/zh/杭州`` are kept for the configured
  languages (default zh and en) and looked up by their bare word.

Text is split into words with jieba (Chinese) and a regex (other scripts); a Chinese word
missing from a file falls back to its characters. The sentence vector of one file is the
**SIF-weighted** mean of its word vectors: ``a / (a + p(w))`` with ``a = 1e-3`` and ``p(w)``
estimated from the word's rank in the file through Zipf's law (these files list words by
descending frequency), so frequent function words weigh little. Several files are combined by
**concatenating** their sentence vectors (dimension = sum of the files' dimensions), so spaces
that are not aligned with each other never get averaged together.

Loading streams the file in chunks of lines parsed by numpy, keeps only the wanted languages
and at most ``max_words`` words, and records the resident memory before and after
(:attr:`StaticEmbedder.load_reports`).
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import math
import struct
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from homeagent_core.embeddings.common import l2_normalize, require, rss_mb, weights_identity
from homeagent_core.embeddings.tfidf import words as split_words
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

__all__ = ["StaticEmbedder", "WordVectors", "load_word_vectors", "split_paths"]

log = logging.getLogger(__name__)

_CHUNK_LINES = 20_000
_FASTTEXT_MAGIC = 793712314
_SIF_A = 1e-3


def split_paths(value: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"a.vec, b.txt"`` or a list -> clean list of paths."""
    items = value.split(",") if isinstance(value, str) else list(value)
    return [p.strip() for p in items if p and p.strip()]


@dataclass
class WordVectors:
    """One loaded word-vector file: ``words[w]`` is the row of ``w`` in ``matrix``."""

    path: str
    kind: str
    words: dict[str, int]
    matrix: npt.NDArray[np.float32]
    report: dict[str, Any] = field(default_factory=dict)

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[1])

    def sif_weights(self) -> npt.NDArray[np.float32]:
        """Per-row SIF weight from the Zipf-estimated frequency of the row's rank."""
        import numpy as np

        n = max(len(self.words), 1)
        harmonic = math.log(n) + 0.5772156649 + 1.0 / (2 * n)
        p = 1.0 / ((np.arange(n, dtype=np.float64) + 1.0) * harmonic)
        return (_SIF_A / (_SIF_A + p)).astype(np.float32)


def _open_text(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open("r", encoding="utf-8", errors="replace")


def _key(raw: str, languages: frozenset[str]) -> str | None:
    """The lookup word of a file key; Numberbatch ``/c/<lang>/<word>`` keys are filtered."""
    if raw.startswith("/c/"):
        parts = raw.split("/")
        if len(parts) < 4 or parts[2] not in languages:
            return None
        raw = parts[3]
    return raw.lower()


def _parse_chunk(path: Path, first_line: int, rows: list[str], dim: int) -> npt.NDArray[np.float32]:
    import numpy as np

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            flat = np.fromstring("\n".join(rows), sep=" ", dtype=np.float32)
        except (ValueError, DeprecationWarning):
            flat = np.zeros(0, dtype=np.float32)
    if flat.size == len(rows) * dim:
        return flat.reshape(len(rows), dim)
    for offset, row in enumerate(rows):
        fields = row.split()
        try:
            ok = len(fields) == dim and all(math.isfinite(float(x)) for x in fields)
        except ValueError:
            ok = False
        if not ok:
            raise EmbeddingUnavailable(
                f"{path}:{first_line + offset}: expected a word followed by {dim} numbers, "
                f"found {len(fields)} field(s) {' '.join(fields[:3])[:60]!r}...; the vector "
                "file is corrupt or truncated"
            )
    raise EmbeddingUnavailable(f"{path}: could not parse lines {first_line}.. as vectors")


def _read_text_vectors(
    path: Path, languages: frozenset[str], max_words: int | None
) -> tuple[dict[str, int], npt.NDArray[np.float32]]:
    import numpy as np

    vocab: dict[str, int] = {}
    chunks: list[npt.NDArray[np.float32]] = []
    pending_words: list[str] = []
    pending_rows: list[str] = []
    pending_first = 0
    dim = 0
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.rstrip("\n\r")
            if not line.strip():
                continue
            word, _, rest = line.partition(" ")
            if lineno == 1:
                head = line.split()
                if len(head) == 2 and all(x.isdigit() for x in head):
                    dim = int(head[1])
                    continue
            if not dim:
                dim = len(rest.split())
                if dim == 0:
                    raise EmbeddingUnavailable(f"{path}:{lineno}: no numbers after {word!r}; not a word-vector file")
            key = _key(word, languages)
            if key is None or key in vocab:
                continue
            if not pending_rows:
                pending_first = lineno
            vocab[key] = len(vocab)
            pending_words.append(key)
            pending_rows.append(rest)
            if len(pending_rows) >= _CHUNK_LINES:
                chunks.append(_parse_chunk(path, pending_first, pending_rows, dim))
                pending_words, pending_rows = [], []
            if max_words is not None and len(vocab) >= max_words:
                break
    if pending_rows:
        chunks.append(_parse_chunk(path, pending_first, pending_rows, dim))
    if not vocab:
        raise EmbeddingUnavailable(
            f"{path}: no word vectors found (empty file, or no keys for languages {sorted(languages)})"
        )
    matrix = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    return vocab, np.ascontiguousarray(matrix, dtype=np.float32)


def _iter_word2vec_bin(fh: IO[bytes], path: Path) -> Iterator[tuple[bytes, bytes]]:
    header = fh.readline().split()
    if len(header) != 2 or not all(x.isdigit() for x in header):
        raise EmbeddingUnavailable(f"{path}: not a word2vec binary file (bad header)")
    count, dim = int(header[0]), int(header[1])
    size = 4 * dim
    for index in range(count):
        word = bytearray()
        while True:
            ch = fh.read(1)
            if not ch:
                raise EmbeddingUnavailable(f"{path}: truncated after {index} of {count} vectors; the file is corrupt")
            if ch == b" ":
                break
            if ch != b"\n":
                word += ch
        data = fh.read(size)
        if len(data) != size:
            raise EmbeddingUnavailable(f"{path}: truncated inside vector {index} of {count}; the file is corrupt")
        yield bytes(word), data


def _read_word2vec_bin(
    path: Path, languages: frozenset[str], max_words: int | None
) -> tuple[dict[str, int], npt.NDArray[np.float32]]:
    import numpy as np

    with path.open("rb") as fh:
        magic = fh.read(4)
        if len(magic) == 4 and struct.unpack("<i", magic)[0] == _FASTTEXT_MAGIC:
            raise EmbeddingUnavailable(
                f"{path} is a fastText .bin model, which is not supported; use the .vec text file published with it"
            )
        fh.seek(0)
        vocab: dict[str, int] = {}
        rows: list[bytes] = []
        for word, data in _iter_word2vec_bin(fh, path):
            key = _key(word.decode("utf-8", errors="replace"), languages)
            if key is None or key in vocab:
                continue
            vocab[key] = len(vocab)
            rows.append(data)
            if max_words is not None and len(vocab) >= max_words:
                break
    if not vocab:
        raise EmbeddingUnavailable(f"{path}: no word vectors found")
    matrix = np.frombuffer(b"".join(rows), dtype="<f4").reshape(len(rows), -1)
    if not np.isfinite(matrix).all():
        raise EmbeddingUnavailable(f"{path}: contains NaN or infinite values; the file is corrupt")
    return vocab, np.ascontiguousarray(matrix, dtype=np.float32)


def load_word_vectors(
    path: str | Path,
    *,
    languages: tuple[str, ...] = ("zh", "en"),
    max_words: int | None = None,
) -> WordVectors:
    """Stream one word-vector file into memory.

    Raises:
        EmbeddingUnavailable: missing file, unsupported format, or a corrupt line (named with
            its line number).
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise EmbeddingUnavailable(
            f"word-vector file {str(p)!r} does not exist; set core.agent.embedding_model_path "
            "to existing .vec/.txt/.bin files or model2vec folders (comma separated)"
        )
    rss_before, started = rss_mb(), time.perf_counter()
    langs = frozenset(languages)
    if p.suffix == ".bin":
        vocab, matrix = _read_word2vec_bin(p, langs, max_words)
        kind = "word2vec-bin"
    else:
        vocab, matrix = _read_text_vectors(p, langs, max_words)
        kind = "numberbatch" if "numberbatch" in p.name.lower() else "word2vec-text"
    report = {
        "path": str(p),
        "kind": kind,
        "words": len(vocab),
        "dimension": int(matrix.shape[1]),
        "seconds": round(time.perf_counter() - started, 3),
        "rss_mb_before": round(rss_before, 1),
        "rss_mb_after": round(rss_mb(), 1),
        "matrix_mb": round(matrix.nbytes / 2**20, 1),
    }
    log.info("loaded word vectors %s", report)
    return WordVectors(str(p), kind, vocab, matrix, report)


class _Model2VecSource:
    def __init__(self, path: Path) -> None:
        model2vec = require("model2vec")
        rss_before, started = rss_mb(), time.perf_counter()
        try:
            self.model = model2vec.StaticModel.from_pretrained(str(path), force_download=False)
        except (OSError, ValueError, KeyError) as exc:
            raise EmbeddingUnavailable(f"could not load model2vec folder {str(path)!r}: {exc}") from exc
        self.path = str(path)
        self.dimension = int(self.model.dim)
        self.report = {
            "path": str(path),
            "kind": "model2vec",
            "words": len(self.model.tokens),
            "dimension": self.dimension,
            "seconds": round(time.perf_counter() - started, 3),
            "rss_mb_before": round(rss_before, 1),
            "rss_mb_after": round(rss_mb(), 1),
        }

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        return np.asarray(
            self.model.encode(texts, use_multiprocessing=False, show_progress_bar=False),
            dtype=np.float32,
        )


class _WordSource:
    def __init__(self, vectors: WordVectors) -> None:
        self.vectors = vectors
        self.path = vectors.path
        self.dimension = vectors.dimension
        self.report = vectors.report
        self._weights = vectors.sif_weights()

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        vocab, matrix, weights = self.vectors.words, self.vectors.matrix, self._weights
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            idx: list[int] = []
            for word in split_words(text):
                i = vocab.get(word)
                if i is not None:
                    idx.append(i)
                elif len(word) > 1 and "\u3400" <= word[0] <= "\u9fff":
                    idx.extend(j for ch in word if (j := vocab.get(ch)) is not None)
            if idx:
                w = weights[idx]
                out[row] = (w @ matrix[idx]) / float(w.sum())
        return out


class StaticEmbedder(EmbeddingProvider):
    """Sentence vectors from static word vectors (text only).

    Args:
        paths: files or model2vec folders, as a list or a comma-separated string.
        languages: Numberbatch languages to keep.
        max_words: keep at most this many (most frequent) words per file.
    """

    def __init__(
        self,
        paths: str | list[str],
        *,
        languages: tuple[str, ...] = ("zh", "en"),
        max_words: int | None = None,
    ) -> None:
        items = split_paths(paths)
        if not items:
            raise EmbeddingUnavailable("no word-vector files configured (core.agent.embedding_model_path is empty)")
        self._sources: list[_Model2VecSource | _WordSource] = []
        for item in items:
            p = Path(item).expanduser()
            if p.is_dir():
                if not (p / "config.json").is_file():
                    raise EmbeddingUnavailable(
                        f"{str(p)!r} is a folder without config.json; a model2vec folder holds "
                        "config.json, model.safetensors and tokenizer.json"
                    )
                self._sources.append(_Model2VecSource(p))
            else:
                self._sources.append(_WordSource(load_word_vectors(p, languages=languages, max_words=max_words)))
        dim = sum(s.dimension for s in self._sources)
        model = ",".join(Path(s.path).name for s in self._sources) + "#sif"
        weights_id = "+".join(weights_identity(s.path) for s in self._sources)
        self.load_reports = [s.report for s in self._sources]
        self.info = EmbeddingInfo(
            name="static",
            model=model,
            dimension=dim,
            fingerprint=make_fingerprint("static", model, dim, weights_id),
            modalities=frozenset({"text"}),
        )

    def _embed_sync(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        live = [i for i, t in enumerate(texts) if t.strip()]
        out = np.zeros((len(texts), self.info.dimension), dtype=np.float32)
        if live:
            batch = [texts[i] for i in live]
            parts = [l2_normalize(s.encode(batch)) for s in self._sources]
            out[live] = np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
        return l2_normalize(out)

    async def embed(self, inputs: list[EmbedInput]) -> npt.NDArray[np.float32]:
        self.check_inputs(inputs)
        texts = [x.text or "" for x in inputs]
        return await asyncio.to_thread(self._embed_sync, texts)
