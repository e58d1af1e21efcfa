"""A scratch graph memory: the temporary memory of one resident sub-agent.

It is an ordinary :class:`~homeagent_core.memory.graph.store.GraphStore` on its own file (a
resident keeps it under ``<data>/residents/<name>/graph.db``), with the ``memory_*`` /
``person_*`` tools bound to it. :meth:`ScratchMemory.learned` lists what was stored there as
triples, so the main memory can take it over (``reclaim``) with an ordinary commit.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from homeagent_sdk.types import ToolDef, Triple

if TYPE_CHECKING:
    from homeagent_core.memory.graph.store import GraphStore
    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = ["ScratchMemory"]

_LEARNED_SQL = """
SELECT s.name, s.type, r.type, o.name, o.type, r.confidence, COALESCE(t.text, '')
FROM relations r
JOIN entities s ON s.id = r.source_id
JOIN entities o ON o.id = r.target_id
LEFT JOIN sentences t ON t.id = r.sentence_id
WHERE r.status = 'active'
ORDER BY r.id
"""


class ScratchMemory:
    """A resident's temporary graph memory; opened lazily on first use (idle residents cost nothing)."""

    def __init__(self, path: Path, *, embedder: EmbeddingProvider | None = None) -> None:
        self.path = path
        self.embedder = embedder
        self._graph: GraphStore | None = None
        self._tools: list[ToolDef] | None = None

    @property
    def graph(self) -> GraphStore:
        if self._graph is None:
            from homeagent_core.memory.graph.store import GraphStore

            self._graph = GraphStore(self.path, embedder=self.embedder)
        return self._graph

    def tools(self) -> list[ToolDef]:
        """The ``memory_*`` / ``person_*`` tools over this scratch graph (built once)."""
        if self._tools is None:
            from homeagent_core.memory.social import SocialGraph
            from homeagent_core.memory.tools import memory_tools

            graph = self.graph
            self._tools = memory_tools(graph, SocialGraph(graph))
        return self._tools

    def learned(self) -> list[Triple]:
        """Every active relation stored here, with its source sentence, oldest first."""
        if self._graph is None and not self.path.exists():
            return []

        def run(conn: sqlite3.Connection) -> list[Triple]:
            return [
                Triple(
                    subject=row[0],
                    subject_type=row[1],
                    relation=row[2],
                    object=row[3],
                    object_type=row[4],
                    confidence=float(row[5]),
                    sentence_text=row[6],
                )
                for row in conn.execute(_LEARNED_SQL)
            ]

        return self.graph.read(run)

    async def alearned(self) -> list[Triple]:
        return await asyncio.to_thread(self.learned)

    def close(self) -> None:
        if self._graph is not None:
            self._graph.close()
            self._graph = None
            self._tools = None
