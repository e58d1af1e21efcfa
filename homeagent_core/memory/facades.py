"""What plugins and the web UI see of memory: small async facades over the memory system.

They implement the SDK's ``MemoryAPI``, ``DocAPI``, ``KnowledgeAPI``, ``SocialAPI`` and
``LLMAPI`` Protocols and return plain JSON-compatible data.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from homeagent_sdk.types import Doc, Entity, Relation, Triple

if TYPE_CHECKING:
    from homeagent_core.memory.system import MemorySystem

__all__ = ["DocFacade", "KnowledgeFacade", "LLMFacade", "MemoryFacade", "SocialFacade"]


class MemoryFacade:
    """The memory graph (and the working context, read only)."""

    def __init__(self, system: MemorySystem) -> None:
        self._m = system

    async def recall(self, keywords: list[str], depth: int = 2) -> dict[str, Any]:
        result = await self._m.graph.arecall(list(keywords), depth=depth)
        return result.to_dict()

    async def commit(self, triples: list[Triple]) -> dict[str, Any]:
        triples = [t if isinstance(t, Triple) else Triple.from_dict(t) for t in triples]
        result = await self._m.graph.acommit(triples)
        return result.to_dict() if hasattr(result, "to_dict") else {"result": str(result)}

    def _entity_rows(self) -> list[Any]:
        cache = self._m.graph.cache
        with cache.lock:
            return list(cache.entities.values())

    async def entities(self, query: str = "", limit: int = 50) -> list[Entity]:
        rows = self._entity_rows()
        if query:
            rows = [r for r in rows if query.lower() in r.name.lower()]
        rows.sort(key=lambda r: (-r.mention_count, r.name))
        return [Entity(r.name, r.type, r.mention_count) for r in rows[:limit]]

    async def relations(self, entity: str) -> list[Relation]:
        result = await self._m.graph.arecall([entity], depth=1)
        return [
            Relation(r["source"], r["target"], r["type"], r.get("confidence", 1.0))
            for r in (result.to_dict()["relations"])
            if isinstance(r, dict) and "source" in r
        ]

    async def graph_snapshot(self, limit: int = 200) -> dict[str, Any]:
        """The most mentioned entities and the relations among them, for a picture."""
        cache = self._m.graph.cache
        with cache.lock:
            top = sorted(cache.entities.values(), key=lambda r: (-r.mention_count, r.name))[:limit]
            ids = {r.id for r in top}
            edges = [
                {"source": r.source_id, "target": r.target_id, "type": r.type}
                for r in cache.relations.values()
                if r.source_id in ids and r.target_id in ids
            ]
        nodes = [{"id": r.id, "name": r.name, "type": r.type, "mention_count": r.mention_count} for r in top]
        return {"nodes": nodes, "edges": edges, "total_entities": len(cache.entities)}

    async def context_timeline(self) -> list[dict[str, Any]]:
        return [
            {"id": e.id, "time": e.timestamp, "kind": e.kind, "channel": e.channel, "source": e.source,
             "text": e.text}
            for e in self._m.context.events
        ]


class DocFacade:
    """The document store (searches never consume; ``doc_query`` is the model's tool for that)."""

    def __init__(self, system: MemorySystem) -> None:
        self._m = system

    async def query(self, text: str, top_k: int = 5) -> list[Doc]:
        hits = await self._m.documents.query(text, top_k, touch=False)
        return [h.document.to_doc(h.score) for h in hits]

    async def commit(self, title: str, content: str) -> str:
        doc = await self._m.documents.add(content, title=title, source="plugin")
        return doc.id

    async def search(self, text: str, limit: int = 20) -> list[dict[str, Any]]:
        return [d.to_dict() for d in await self.query(text, limit)]

    async def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        docs = await asyncio.to_thread(self._m.documents.all)
        docs.sort(key=lambda d: d.created_at, reverse=True)
        return [d.to_doc().to_dict() for d in docs[:limit]]


class KnowledgeFacade:
    """The knowledge base."""

    def __init__(self, system: MemorySystem) -> None:
        self._kb = system.knowledge

    async def search(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        hits = await self._kb.search(query, limit)
        return [{**h.entry.to_dict(), "score": round(h.score, 4)} for h in hits]

    async def create(self, name: str, content: str) -> str:
        entry = await self._kb.create(name, content)
        return entry.name

    async def delete(self, name: str) -> str:
        return await asyncio.to_thread(self._kb.delete, name)

    async def overview(self) -> dict[str, Any]:
        entries = await asyncio.to_thread(self._kb.list)
        return {
            "categories": self._kb.categories(),
            "entries": [{"name": e.name, "category": e.category, "updated_at": e.updated_at} for e in entries],
            "stats": {"entries": len(entries)},
        }


class SocialFacade:
    """People, traits and relations (read only for plugins)."""

    def __init__(self, system: MemorySystem) -> None:
        self._social = system.social

    async def person(self, name: str) -> dict[str, Any]:
        return await self._social.aget_person(name) or {}


class LLMFacade:
    """Direct model calls outside a turn (never remembered)."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        return await self._provider.chat({"messages": list(messages), **options})  # type: ignore[no-any-return]

    async def quick_chat(self, prompt: str) -> str:
        response = await self.chat([{"role": "user", "content": prompt}], max_tokens=128)
        return str(response.get("content", ""))
