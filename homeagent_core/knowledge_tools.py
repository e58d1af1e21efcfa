"""Model-facing knowledge tools: ``knowledge_search``, ``knowledge_create``, ``knowledge_list``,
``knowledge_delete``. Name and lookup errors become :class:`ToolError` with the reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from homeagent_core.knowledge import InvalidKnowledgeName, KnowledgeNotFound
from homeagent_sdk.errors import ToolError, UsageError
from homeagent_sdk.types import ToolDef

if TYPE_CHECKING:
    from homeagent_core.knowledge import KnowledgeBase

__all__ = ["knowledge_tools"]


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def knowledge_tools(kb: KnowledgeBase, *, plugin: str = "core") -> list[ToolDef]:
    """The four knowledge tools bound to ``kb``."""

    async def knowledge_search(query: str, top_k: int = 5, category: str = "") -> dict[str, Any]:
        if not isinstance(query, str) or not query.strip():
            raise ToolError("knowledge_search: 'query' must be a non-empty string")
        if not isinstance(top_k, int) or not 1 <= top_k <= 50:
            raise ToolError(f"knowledge_search: 'top_k' must be 1..50, got {top_k!r}")
        try:
            hits = await kb.search(query, top_k, category=category)
        except InvalidKnowledgeName as exc:
            raise ToolError(f"knowledge_search: {exc}") from exc
        return {
            "results": [
                {"name": h.entry.name, "score": round(h.score, 4), "content": h.entry.content}
                for h in hits
            ]
        }

    async def knowledge_create(name: str, content: str) -> dict[str, Any]:
        try:
            entry = await kb.create(name, content)
        except (InvalidKnowledgeName, UsageError) as exc:
            raise ToolError(f"knowledge_create: {exc}") from exc
        return {"created": entry.name}

    async def knowledge_list(category: str = "") -> dict[str, Any]:
        try:
            entries = kb.list(category)
        except InvalidKnowledgeName as exc:
            raise ToolError(f"knowledge_list: {exc}") from exc
        return {
            "categories": kb.categories(),
            "entries": [{"name": e.name, "preview": e.content[:200]} for e in entries],
        }

    async def knowledge_delete(name: str) -> dict[str, Any]:
        try:
            full = kb.delete(name)
        except (InvalidKnowledgeName, KnowledgeNotFound) as exc:
            raise ToolError(f"knowledge_delete: {exc}") from exc
        return {"deleted": full}

    text = {"type": "string"}
    return [
        ToolDef(
            "knowledge_search",
            "Search the knowledge base (curated reference entries).",
            _obj(
                {
                    "query": {**text, "description": "what to look for"},
                    "top_k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5},
                    "category": {**text, "description": "limit to a category, e.g. 'recipes'"},
                },
                ["query"],
            ),
            plugin=plugin,
            handler=knowledge_search,
        ),
        ToolDef(
            "knowledge_create",
            "Create or replace a knowledge entry. Names use '/' for categories, e.g. 'recipes/dumplings'.",
            _obj({"name": text, "content": text}, ["name", "content"]),
            plugin=plugin,
            handler=knowledge_create,
        ),
        ToolDef(
            "knowledge_list",
            "List knowledge categories and entries (optionally under one category).",
            _obj({"category": text}, []),
            plugin=plugin,
            handler=knowledge_list,
        ),
        ToolDef(
            "knowledge_delete",
            "Delete a knowledge entry by full name or unique leaf name.",
            _obj({"name": text}, ["name"]),
            plugin=plugin,
            handler=knowledge_delete,
        ),
    ]
