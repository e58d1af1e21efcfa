"""Compatibility path: the L0 working window lives in :mod:`homeagent_core.memory.context`.

The kernel may import memory (never the other way round); this re-export keeps the old import
path working for code written before the window moved to the memory package.
"""

from __future__ import annotations

from homeagent_core.memory.context import (
    ARCHIVE_EXCLUDED_SOURCES,
    ContextEvent,
    RelevanceContext,
    ToolOutput,
    apply_cleaner,
    atext_for_vector,
    clean_text,
    text_for_vector,
)

__all__ = [
    "ARCHIVE_EXCLUDED_SOURCES",
    "ContextEvent",
    "RelevanceContext",
    "ToolOutput",
    "apply_cleaner",
    "atext_for_vector",
    "clean_text",
    "text_for_vector",
]
