"""Helpers shared by the embedding providers: lazy imports, model lookup, vector math.

Model weights come only from a local path or the local Hugging Face cache unless a caller opts
in to downloading; :func:`resolve_model` enforces that and records what it looked for, so an
unavailable tier can say exactly where its weights were expected.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from homeagent_sdk.embeddings import EmbeddingUnavailable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "l2_normalize",
    "model_card_languages",
    "parse_languages",
    "require",
    "resolve_model",
    "rss_mb",
    "space_label",
    "top_k",
    "truncate_text",
    "weights_identity",
]

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".vec", ".txt", ".npy", ".gz")


def ensure_installed(module: str, extra: str = "multimodal") -> None:
    """Raise the :func:`require` ImportError if ``module`` is missing, without importing it.

    Used before the (slow) import of torch-based stacks, so a missing model can be reported
    first and at once.
    """
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"{module} is not installed; install it with: pip install 'homeagent[{extra}]'")


def require(module: str, extra: str = "multimodal") -> ModuleType:
    """Import ``module`` or raise an :class:`ImportError` naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{module} is not installed; install it with: pip install 'homeagent[{extra}]'") from exc


def l2_normalize(matrix: Any) -> npt.NDArray[np.float32]:
    """Rows scaled to unit length as a contiguous float32 matrix; all-zero rows stay zero."""
    import numpy as np

    mat = np.ascontiguousarray(matrix, dtype=np.float32)
    if mat.ndim == 1:
        mat = mat.reshape(1, -1)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    np.divide(mat, norms, out=mat, where=norms > 0)
    mat[~np.isfinite(mat)] = 0.0
    return mat


def top_k(matrix: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int) -> list[tuple[int, float]]:
    """Brute-force cosine top-``k`` of L2-normalised rows: one matrix-vector product."""
    import numpy as np

    if k <= 0 or matrix.shape[0] == 0:
        return []
    scores = matrix @ query.reshape(-1)
    if scores.shape[0] > k:
        idx = np.argpartition(-scores, k - 1)[:k]
        idx = idx[np.argsort(-scores[idx], kind="stable")]
    else:
        idx = np.argsort(-scores, kind="stable")
    return [(int(i), float(scores[i])) for i in idx]


def truncate_text(text: str, max_tokens: int) -> str:
    """Cut text that could never fit ``max_tokens`` tokens, so a 1 MB string stays cheap.

    A token covers at least one character, and rarely more than 16, so keeping the first
    ``16 * max_tokens`` characters never changes what the tokenizer's own truncation keeps.
    """
    limit = max(64, 16 * max_tokens)
    return text if len(text) <= limit else text[:limit]


def weights_identity(path: str | os.PathLike[str]) -> str:
    """A cheap, stable identity of weight files: names, sizes and the first/last 64 KiB.

    Hashing multi-GB files fully on every start would cost minutes; sizes plus head and tail
    change whenever a file is replaced by different weights in practice.
    """
    root = Path(path)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    h = hashlib.sha256()
    for f in files:
        if root.is_dir() and f.suffix not in _WEIGHT_SUFFIXES and f.name != "config.json":
            continue
        size = f.stat().st_size
        h.update(f"{f.relative_to(root) if root.is_dir() else f.name}\0{size}\0".encode())
        with f.open("rb") as fh:
            h.update(fh.read(65536))
            if size > 65536:
                fh.seek(max(size - 65536, 65536))
                h.update(fh.read(65536))
    return h.hexdigest()[:16]


def _looks_like_path(model: str) -> bool:
    """Hub ids are ``name`` or ``org/name``; anything else is meant as a filesystem path."""
    return model.startswith(("/", ".", "~")) or model.count("/") > 1 or "\\" in model


def resolve_model(model: str, *, allow_download: bool = False) -> tuple[Path, str]:
    """Find ``model`` (a local directory or a Hugging Face repo id) on this machine.

    Returns ``(directory, weights_id)``: the id is the cache snapshot revision for hub models,
    or :func:`weights_identity` of a local directory.

    Raises:
        EmbeddingUnavailable: the path does not exist, or the repo is not in the local
            Hugging Face cache and downloading is not allowed. The message names both.
    """
    local = Path(model).expanduser()
    if local.exists():
        if not local.is_dir():
            raise EmbeddingUnavailable(
                f"model path {str(local)!r} is a file; point it at the model's directory "
                "(the one holding config.json and the weights)"
            )
        return local, weights_identity(local)
    if _looks_like_path(model):
        raise EmbeddingUnavailable(
            f"model path {str(local)!r} does not exist; set it to a directory holding the "
            "model's config.json and weights"
        )
    require("huggingface_hub")
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        snap = Path(snapshot_download(model, local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError) as exc:
        if not allow_download:
            raise EmbeddingUnavailable(
                f"model {model!r} is not in the local Hugging Face cache "
                f"({constants.HF_HUB_CACHE}); download it there (hf download "
                f"{model}), give a local directory instead, or allow downloads explicitly"
            ) from exc
        try:
            snap = Path(snapshot_download(model))
        except Exception as exc2:
            raise EmbeddingUnavailable(f"downloading model {model!r} failed: {exc2}") from exc2
    return snap, snap.name


def space_label(model: str) -> str:
    """The model part of a fingerprint: the repo id, or ``"local"`` for a directory.

    A local model is identified by its weights alone, so moving or copying the directory (a
    new data dir, a backup restore) does not make every stored vector stale.
    """
    return "local" if Path(model).expanduser().exists() else model


def rss_mb() -> float:
    """Resident set size of this process in MiB (0.0 where /proc is unavailable)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


_MULTILINGUAL = frozenset({"multilingual", "multi", "*"})


def parse_languages(value: object) -> frozenset[str]:
    """Languages from a setting or a model card: ``"zh, en"``, ``["zh", "en"]``, ``"*"``.

    ``multilingual`` means any language. Codes are lower-cased; region suffixes are dropped
    (``zh-CN`` → ``zh``). An empty value gives an empty set (= not declared).
    """
    if isinstance(value, str):
        items = [x for x in value.replace(";", ",").split(",")]
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = [str(x) for x in value]
    else:
        return frozenset()
    codes = {x.strip().lower().replace("_", "-").split("-")[0] for x in items if x.strip()}
    if codes & _MULTILINGUAL:
        return frozenset({"*"})
    return frozenset(codes)


def model_card_languages(directory: Path) -> frozenset[str]:
    """The ``language:`` of a Hugging Face model card (``README.md`` front matter) in ``directory``.

    Empty when the card is missing, unreadable or silent. Ten or more languages count as
    multilingual (``{"*"}``): such cards list the training languages, not a restriction.
    """
    card = directory / "README.md"
    try:
        text = card.read_text(encoding="utf-8", errors="replace")[:20000]
    except OSError:
        return frozenset()
    if not text.startswith("---"):
        return frozenset()
    end = text.find("\n---", 3)
    if end < 0:
        return frozenset()
    import yaml

    try:
        meta = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return frozenset()
    if not isinstance(meta, dict):
        return frozenset()
    languages = parse_languages(meta.get("language"))
    return frozenset({"*"}) if len(languages) >= 10 else languages
