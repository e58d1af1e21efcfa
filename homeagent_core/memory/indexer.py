"""Automatic graph recall for the system prompt.

Before each turn the kernel asks :meth:`MemoryIndexer.build_context` for a compact index of
what the graph knows about the input: keywords (at most five, stop words removed) and, when an
embedder is set, the five entity names nearest to the input seed a depth-2 walk of the mirror.
The result is one line in the original's format::

    【记忆索引】 关联 N 个记忆实体，高频：a、b、c 索引: e1, e2(Type), … | 需更多细节请用 memory_recall 查询

Relations are left out on purpose (tokens); the model calls ``memory_recall`` for them.
The walk reads as the turn's audience (:class:`~homeagent_sdk.visibility.Audience`): what
the speaker may not see is never seeded, walked or counted. Entities a tool already fetched
this turn (:meth:`mark_recalled`) are kept out of the next
injection so the prompt does not repeat what the model has just read.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from homeagent_core.memory.graph.cache import RecallResult
from homeagent_core.memory.keywords import extract_keywords, warm_up
from homeagent_sdk.visibility import EVERYONE, Audience

if TYPE_CHECKING:
    from homeagent_core.memory.graph.store import GraphStore

__all__ = ["MemoryIndexer", "format_index"]

SHOWN_NAMES = 5
FREQUENT_NAMES = 3


def format_index(
    result: RecallResult,
    shown: int = SHOWN_NAMES,
    *,
    salient: Callable[[list[str], int], list[str] | None] | None = None,
) -> str:
    """The ``【记忆索引】`` line for ``result`` ("" when it found no entity).

    The "高频" names are the most salient recalled entities when ``salient`` ranks them
    (:meth:`GraphAnalytics.salient_names`), else the most mentioned.
    """
    entities = result.entities
    if not entities:
        return ""
    by_mentions = [e.name for e in sorted(entities, key=lambda e: (-e.mention_count, e.distance))]
    frequent = (salient(by_mentions, FREQUENT_NAMES) if salient is not None else None) or by_mentions[:FREQUENT_NAMES]
    parts = [f"关联 {len(entities)} 个记忆实体，高频：" + "、".join(frequent)]
    names: list[str] = []
    for e in entities[:shown]:
        names.append(e.name if e.type in ("", "Concept") else f"{e.name}({e.type})")
    more = "…" if len(entities) > shown else ""
    return f"【记忆索引】 {parts[0]} 索引: {', '.join(names)}{more} | 需更多细节请用 memory_recall 查询"


class MemoryIndexer:
    """Builds the per-turn memory index from the graph mirror.

    ``depth`` is the walk depth (default 2); ``max_entities`` caps how many entities count
    towards "关联 N 个". The graph's embedder (if any) provides the vector seeds.
    """

    def __init__(self, graph: GraphStore, *, depth: int = 2, max_entities: int = 30) -> None:
        self.graph = graph
        self.depth = depth
        self.max_entities = max_entities
        self._recalled: set[str] = set()
        self._lock = threading.Lock()
        self._warm = False

    def mark_recalled(self, names: Iterable[str]) -> None:
        """Keep these entity names out of the next :meth:`build_context` (then forget them)."""
        with self._lock:
            self._recalled.update(names)

    async def recall(self, text: str, audience: Audience = EVERYONE) -> RecallResult:
        """Keyword + vector recall for ``text`` (jieba loads in a worker thread the first time)."""
        if not self._warm:
            await asyncio.to_thread(warm_up)
            self._warm = True
        keywords = extract_keywords(text)
        with self._lock:
            exclude, self._recalled = self._recalled, set()
        return await self.graph.arecall(
            keywords,
            query_text=text,
            depth=self.depth,
            max_entities=self.max_entities,
            max_relations=0,
            exclude=exclude,
            audience=audience,
        )

    async def build_context(self, text: str, audience: Audience = EVERYONE) -> str:
        """The ``【记忆索引】`` line for a user input, or "" when the graph knows nothing ``audience`` may see of it."""
        if not text.strip():
            return ""
        return format_index(await self.recall(text, audience), salient=self.graph.analytics.salient_names)
