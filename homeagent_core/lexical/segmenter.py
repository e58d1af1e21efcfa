"""The one jieba every Chinese word splitter shares (the lexical terms, memory keywords, the TF-IDF tier)."""

from __future__ import annotations

import logging
import threading
from typing import Any

__all__ = ["load_jieba"]

_jieba: Any = None
_jieba_lock = threading.Lock()


def load_jieba() -> Any:
    """A jieba tokenizer, made once, quietly, with its dictionary loaded (first use costs 1–2 s).

    The one loader every Chinese word splitter (the lexical terms, memory keywords, the TF-IDF
    tier) goes through, so the dictionary loads once per process. It is jieba on a compact
    dictionary (:mod:`homeagent_core.lexical.jieba_dict`: the same words cut, ~5 MB instead of
    ~62 MB of a long-running daemon's memory). Thread-safe; jieba is imported on first use, so
    importing this module stays light.
    """
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                import jieba

                from homeagent_core.lexical.jieba_dict import CompactTokenizer

                jieba.setLogLevel(logging.WARNING)
                tokenizer = CompactTokenizer()
                tokenizer.initialize()
                _jieba = tokenizer
    return _jieba
