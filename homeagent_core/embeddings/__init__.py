"""Embedding providers, tier selection, vector migration and the TF-IDF lexical index.

Importing this package is light: providers import torch, transformers, sentence-transformers,
open_clip or model2vec only when they are constructed.
"""

from __future__ import annotations

from homeagent_core.embeddings.common import l2_normalize, top_k
from homeagent_core.embeddings.reembed import ReembedStats, reembed_stale
from homeagent_core.embeddings.registry import (
    BUILTIN_PROVIDERS,
    ProviderRegistry,
    TierSelection,
    TierStatus,
    same_space,
)
from homeagent_core.embeddings.tfidf import TfidfIndex, tokenize, words

__all__ = [
    "BUILTIN_PROVIDERS",
    "ProviderRegistry",
    "ReembedStats",
    "TfidfIndex",
    "TierSelection",
    "TierStatus",
    "l2_normalize",
    "reembed_stale",
    "same_space",
    "tokenize",
    "top_k",
    "words",
]
