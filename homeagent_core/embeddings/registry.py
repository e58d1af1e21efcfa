"""Embedding provider registry and tier selection.

Tiers, best first: (1) the configured dense provider (``chineseclip`` by default, or
``openclip``, ``sentence-transformers``, ``http``, or one a plugin registered through
``register_embedding_providers``); (2) ``static`` word vectors; (3) ``tfidf``, the lexical
index that is always available. :meth:`ProviderRegistry.select` tries them in order and keeps a
:class:`TierStatus` for each: whether it is available, active, why not, and which paths or
models it looked for. Each unavailable tier is logged once per process with that reason;
``homeagent doctor`` prints :meth:`TierSelection.to_dicts`.

Fusion rule: vectors are comparable only within one space, i.e. equal fingerprint *and*
dimension (:func:`same_space`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from homeagent_core.embeddings.clip import DEFAULT_CHINESE_CLIP
from homeagent_core.embeddings.common import parse_languages
from homeagent_sdk.embeddings import EmbeddingProvider, EmbeddingUnavailable
from homeagent_sdk.errors import UsageError

__all__ = [
    "BUILTIN_PROVIDERS",
    "ProviderFactory",
    "ProviderRegistry",
    "TierSelection",
    "TierStatus",
    "same_space",
]

log = logging.getLogger(__name__)

ProviderFactory = Callable[[dict[str, Any]], EmbeddingProvider]

_reported: set[str] = set()


def same_space(fp_a: str | None, dim_a: int, fp_b: str | None, dim_b: int) -> bool:
    """True when two vectors may be compared: same non-empty fingerprint and dimension."""
    return bool(fp_a) and fp_a == fp_b and dim_a == dim_b


def _flag(config: dict[str, Any], key: str) -> bool:
    value = config.get(key, False)
    return value if isinstance(value, bool) else str(value).lower() in {"1", "true", "yes"}


def _chineseclip(config: dict[str, Any]) -> EmbeddingProvider:
    from homeagent_core.embeddings.clip import ChineseClipProvider

    return ChineseClipProvider(
        str(config.get("model") or DEFAULT_CHINESE_CLIP),
        device=str(config.get("device") or "cpu"),
        allow_download=_flag(config, "allow_download"),
        batch_size=int(config.get("batch_size") or 32),
    )


def _openclip(config: dict[str, Any]) -> EmbeddingProvider:
    from homeagent_core.embeddings.clip import OpenClipProvider

    if not config.get("model"):
        raise EmbeddingUnavailable("openclip needs a model name (e.g. 'ViT-B-32')")
    return OpenClipProvider(
        str(config["model"]),
        config.get("pretrained") or None,
        device=str(config.get("device") or "cpu"),
        allow_download=_flag(config, "allow_download"),
    )


def _sentence(config: dict[str, Any]) -> EmbeddingProvider:
    from homeagent_core.embeddings.sentence import SentenceTransformerProvider

    if not config.get("model"):
        raise EmbeddingUnavailable("sentence-transformers needs a model (a local directory or a cached repo id)")
    return SentenceTransformerProvider(
        str(config["model"]),
        device=str(config.get("device") or "cpu"),
        allow_download=_flag(config, "allow_download"),
    )


def _http(config: dict[str, Any]) -> EmbeddingProvider:
    from homeagent_core.embeddings.http import HttpEmbeddingProvider

    if not config.get("base_url") or not config.get("model"):
        raise EmbeddingUnavailable("the http embedding provider needs base_url and model")
    kwargs: dict[str, Any] = {
        "api_key": config.get("api_key") or None,
        "timeout": float(config.get("timeout") or 30.0),
        "image_format": config.get("image_format") or "none",
    }
    if config.get("dimension"):
        return HttpEmbeddingProvider(
            str(config["base_url"]),
            str(config["model"]),
            dimension=int(config["dimension"]),
            **kwargs,
        )
    # Factories run in a worker thread without an event loop: probe the dimension there.
    return asyncio.run(HttpEmbeddingProvider.connect(str(config["base_url"]), str(config["model"]), **kwargs))


def _static(config: dict[str, Any]) -> EmbeddingProvider:
    from homeagent_core.embeddings.static import StaticEmbedder

    languages = config.get("languages") or ("zh", "en")
    if isinstance(languages, str):
        languages = tuple(x.strip() for x in languages.split(",") if x.strip())
    max_words = config.get("max_words")
    return StaticEmbedder(
        config.get("paths") or "",
        languages=tuple(languages),
        max_words=int(max_words) if max_words else None,
    )


BUILTIN_PROVIDERS: dict[str, ProviderFactory] = {
    "chineseclip": _chineseclip,
    "openclip": _openclip,
    "sentence-transformers": _sentence,
    "http": _http,
    "static": _static,
}


def _looked_for(name: str, config: dict[str, Any]) -> list[str]:
    if name == "static":
        from homeagent_core.embeddings.static import split_paths

        return [str(Path(p).expanduser()) for p in split_paths(config.get("paths") or "")]
    if name == "http":
        return [str(config.get("base_url") or "")]
    model = str(config.get("model") or (DEFAULT_CHINESE_CLIP if name == "chineseclip" else ""))
    out = [model] if model else []
    for prefix in ("hf-hub:", "local-dir:"):
        if model.startswith(prefix):
            model = model[len(prefix):]
    if model and not Path(model).expanduser().exists() and model.count("/") <= 1:
        try:
            from huggingface_hub import constants

            out.append(str(Path(constants.HF_HUB_CACHE) / f"models--{model.replace('/', '--')}"))
        except ImportError:
            pass
    if name == "openclip" and config.get("pretrained"):
        out.append(str(config["pretrained"]))
    return out


@dataclass
class TierStatus:
    """One tier as ``homeagent doctor`` shows it."""

    tier: str
    provider: str
    available: bool
    active: bool = False
    reason: str = ""
    looked_for: list[str] = field(default_factory=list)
    dimension: int | None = None
    fingerprint: str | None = None
    modalities: list[str] = field(default_factory=list)
    languages: list[str] = field(default_factory=list)
    load: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tier": self.tier,
            "provider": self.provider,
            "available": self.available,
            "active": self.active,
            "reason": self.reason,
            "looked_for": list(self.looked_for),
            "dimension": self.dimension,
            "fingerprint": self.fingerprint,
            "modalities": list(self.modalities),
            "languages": list(self.languages),
            "load": list(self.load),
        }


@dataclass
class TierSelection:
    """The result of :meth:`ProviderRegistry.select`.

    ``provider`` is the active dense or static provider, or ``None`` when only TF-IDF is left
    (``tier == "tfidf"``). ``dense`` is the unified-space provider when it loaded (media and
    images need it; static and TF-IDF embed text only).
    """

    tier: str
    provider: EmbeddingProvider | None
    statuses: list[TierStatus]
    dense: EmbeddingProvider | None = None
    static: EmbeddingProvider | None = None

    def to_dicts(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.statuses]

    async def aclose(self) -> None:
        for p in {id(p): p for p in (self.dense, self.static) if p is not None}.values():
            await p.aclose()


class ProviderRegistry:
    """Named provider factories; the object handed to ``register_embedding_providers``."""

    def __init__(self, *, builtins: bool = True) -> None:
        self._factories: dict[str, ProviderFactory] = dict(BUILTIN_PROVIDERS) if builtins else {}
        self._owners: dict[str, str] = {n: "homeagent" for n in self._factories}

    def add(self, name: str, factory: ProviderFactory, *, plugin: str = "") -> None:
        """Register ``factory(config) -> EmbeddingProvider`` under ``name``.

        Raises:
            UsageError: the name is taken or the factory is not callable.
        """
        if not callable(factory):
            raise UsageError(
                f"embedding provider {name!r}: factory must be callable (config dict -> "
                f"EmbeddingProvider), got {type(factory).__name__}"
            )
        if name in self._factories:
            raise UsageError(
                f"embedding provider {name!r} is already registered by "
                f"{self._owners.get(name) or 'another plugin'}; choose another name"
            )
        self._factories[name] = factory
        self._owners[name] = plugin

    def names(self) -> list[str]:
        return sorted(self._factories)

    def build(self, name: str, config: dict[str, Any] | None = None) -> EmbeddingProvider:
        """Build provider ``name`` synchronously (loads weights: call from a worker thread).

        Raises:
            EmbeddingUnavailable: unknown name, missing package, weights or service.
        """
        factory = self._factories.get(name)
        if factory is None:
            raise EmbeddingUnavailable(f"unknown embedding provider {name!r}; known: {', '.join(self.names())}")
        try:
            provider = factory(dict(config or {}))
        except ImportError as exc:
            raise EmbeddingUnavailable(str(exc)) from exc
        if not isinstance(provider, EmbeddingProvider):
            raise EmbeddingUnavailable(
                f"embedding provider factory {name!r} returned {type(provider).__name__}, not an EmbeddingProvider"
            )
        languages = parse_languages((config or {}).get("languages"))
        if languages:
            provider.info = dataclasses.replace(provider.info, languages=languages)
        return provider

    async def _try(self, tier: str, name: str, config: dict[str, Any]) -> tuple[EmbeddingProvider | None, TierStatus]:
        status = TierStatus(tier, name, available=False, looked_for=_looked_for(name, config))
        try:
            provider = await asyncio.to_thread(self.build, name, config)
        except Exception as exc:  # a tier that fails to load, for any reason, is skipped
            status.reason = str(exc) or type(exc).__name__
            return None, status  # reported by select(), once, with the tier that is used instead
        status.available = True
        status.dimension = provider.info.dimension
        status.fingerprint = provider.info.fingerprint
        status.modalities = sorted(provider.info.modalities)
        status.languages = sorted(provider.info.languages)
        status.load = list(getattr(provider, "load_reports", []))
        return provider, status

    async def select(
        self,
        dense: str | None = "chineseclip",
        dense_config: dict[str, Any] | None = None,
        static_paths: str | list[str] = "",
        static_config: dict[str, Any] | None = None,
    ) -> TierSelection:
        """Load the best available tiers: dense, then static, then TF-IDF.

        Both the dense and the static tier are tried (the static space is still used by layers
        that want cheap text vectors); the active tier is the best one that loaded.
        """
        statuses: list[TierStatus] = []
        dense_p: EmbeddingProvider | None = None
        if dense:
            dense_p, status = await self._try("dense", dense, dict(dense_config or {}))
            statuses.append(status)
        else:
            statuses.append(TierStatus("dense", "", available=False, reason="no dense provider configured"))
        cfg = dict(static_config or {})
        cfg.setdefault("paths", static_paths)
        static_p: EmbeddingProvider | None = None
        if cfg.get("paths"):
            static_p, status = await self._try("static", "static", cfg)
            statuses.append(status)
        else:
            statuses.append(
                TierStatus(
                    "static",
                    "static",
                    available=False,
                    reason="no word-vector files configured (core.agent.embedding_model_path)",
                )
            )
        statuses.append(TierStatus("tfidf", "tfidf", available=True, modalities=["text"], languages=["*"]))
        if dense_p is not None:
            tier, active = "dense", dense_p
            statuses[0].active = True
        elif static_p is not None:
            tier, active = "static", static_p
            statuses[1].active = True
        else:
            tier, active = "tfidf", None
            statuses[2].active = True
        _report(tier if active is None else active.info.name, statuses)
        return TierSelection(tier, active, statuses, dense=dense_p, static=static_p)


def _report(in_use: str, statuses: list[TierStatus]) -> None:
    """One INFO line per distinct outcome: the tier in use and how to get a better one.

    A missing model is the normal state of a fresh install, not a fault: the line says what is
    used instead and what to download or set (each tier's reason carries the exact command).
    """
    better: list[str] = []
    for status in statuses:
        if status.active:
            break
        if status.provider and status.reason:
            better.append(f"{status.tier} ({status.provider}) not loaded: {status.reason}")
    message = f"embedding tier in use: {in_use}" + (f"; for a better one, {'; '.join(better)}" if better else "")
    if message not in _reported:
        _reported.add(message)
        log.info("%s", message)
