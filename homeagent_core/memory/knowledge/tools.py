"""The ``knowledge`` core plugin: ``knowledge_search``, ``knowledge_create``, ``knowledge_list``,
``knowledge_delete`` over the knowledge base memory opens.

The tools act as the turn's principal (:data:`homeagent_sdk.current.CURRENT_PRINCIPAL`; the
owner outside a turn): they find, list and delete only entries that person may see, and an
entry they create is private to them (or to their group chat).

:class:`KnowledgeTools` holds the tools as typed methods (schemas from the signatures); the
plugin registers them through ``register_tools`` and binds them to the knowledge base in
``startup``. :func:`knowledge_tools` turns them into ``ToolDef`` objects for the MCP server.
Name and lookup errors become :class:`ToolError` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from homeagent_core.memory.knowledge.base import InvalidKnowledgeName, KnowledgeNotFound
from homeagent_sdk import ToolRegistryProtocol, hookimpl
from homeagent_sdk.current import CURRENT_PRINCIPAL
from homeagent_sdk.errors import ToolError, UsageError
from homeagent_sdk.schema import tool_from_function
from homeagent_sdk.threads import thread_of
from homeagent_sdk.types import ToolDef
from homeagent_sdk.visibility import PRIVATE, Audience, group_visibility

if TYPE_CHECKING:
    from homeagent_core.memory.knowledge.base import KnowledgeBase

__all__ = ["KNOWLEDGE_TOOLS", "PLUGIN_NAME", "KnowledgePlugin", "KnowledgeTools", "knowledge_tools", "make_plugin"]

PLUGIN_NAME = "knowledge"

#: The knowledge tools in the order the model sees them.
KNOWLEDGE_TOOLS = ("knowledge_search", "knowledge_create", "knowledge_list", "knowledge_delete")


def _reader(owner: str) -> tuple[Audience, str, str]:
    """The running turn's audience and the marks of what it writes (the knowledge contract keeps
    memory's :mod:`~homeagent_core.memory.audience` out of reach; the same rules)."""
    principal = CURRENT_PRINCIPAL.get()
    if principal is not None and principal.role == "system":
        return Audience(everything=True), owner, PRIVATE
    thread = thread_of(principal)
    person = owner if principal is None else principal.person or thread
    group = thread if principal is not None and ":group:" in thread else ""
    return Audience(person=person, group=group), person, group_visibility(group) if group else PRIVATE


class KnowledgeTools:
    """The four knowledge tools over a knowledge base (or a function returning it when a tool runs)."""

    def __init__(self, kb: KnowledgeBase | Callable[[], KnowledgeBase]) -> None:
        self._kb = kb

    @property
    def kb(self) -> KnowledgeBase:
        return self._kb() if callable(self._kb) else self._kb

    def tool_defs(self, *, plugin: str = "core") -> list[ToolDef]:
        """The tools as :class:`ToolDef` objects (schemas from the signatures)."""
        return [tool_from_function(getattr(self, name), plugin=plugin) for name in KNOWLEDGE_TOOLS]

    async def knowledge_search(
        self,
        query: Annotated[str, "what to look for"],
        top_k: Annotated[int, {"minimum": 1, "maximum": 50}] = 5,
        category: Annotated[str | None, "limit to a category, e.g. 'recipes'"] = None,
    ) -> dict[str, Any]:
        """Search the knowledge base (curated reference entries)."""
        if not isinstance(query, str) or not query.strip():
            raise ToolError("knowledge_search: 'query' must be a non-empty string")
        if not isinstance(top_k, int) or not 1 <= top_k <= 50:
            raise ToolError(f"knowledge_search: 'top_k' must be 1..50, got {top_k!r}")
        try:
            hits = await self.kb.search(query, top_k, audience=_reader(self.kb.owner)[0], category=category or "")
        except InvalidKnowledgeName as exc:
            raise ToolError(f"knowledge_search: {exc}") from exc
        return {
            "results": [
                {"name": h.entry.name, "score": round(h.score, 4), "content": h.entry.content}
                for h in hits
            ]
        }

    async def knowledge_create(self, name: str, content: str) -> dict[str, Any]:
        """Create or replace a knowledge entry. Names use '/' for categories, e.g. 'recipes/dumplings'."""
        audience, person, visibility = _reader(self.kb.owner)
        try:
            entry = await self.kb.create(name, content, person=person, visibility=visibility, audience=audience)
        except (InvalidKnowledgeName, UsageError) as exc:
            raise ToolError(f"knowledge_create: {exc}") from exc
        return {"created": entry.name}

    async def knowledge_list(self, category: str | None = None) -> dict[str, Any]:
        """List knowledge categories and entries (optionally under one category)."""
        kb = self.kb
        await kb.refresh()  # another daemon's changes are read off the event loop
        audience = _reader(kb.owner)[0]
        try:
            entries = kb.list(category or "", audience=audience)
        except InvalidKnowledgeName as exc:
            raise ToolError(f"knowledge_list: {exc}") from exc
        return {
            "categories": kb.categories(audience=audience),
            "entries": [{"name": e.name, "preview": e.content[:200]} for e in entries],
        }

    async def knowledge_delete(self, name: str) -> dict[str, Any]:
        """Delete a knowledge entry by full name or unique leaf name."""
        try:
            full = await self.kb.adelete(name, audience=_reader(self.kb.owner)[0])
        except (InvalidKnowledgeName, KnowledgeNotFound) as exc:
            raise ToolError(f"knowledge_delete: {exc}") from exc
        return {"deleted": full}


def knowledge_tools(kb: KnowledgeBase, *, plugin: str = "core") -> list[ToolDef]:
    """The four knowledge tools bound to ``kb``."""
    return KnowledgeTools(kb).tool_defs(plugin=plugin)


class _OpenMemory(Protocol):
    """The memory the app opened (``MemorySystem``), as far as the knowledge plugin uses it."""

    @property
    def knowledge(self) -> KnowledgeBase: ...


class _Services(Protocol):
    @property
    def memory_system(self) -> _OpenMemory | None: ...


class KnowledgeSDK(Protocol):
    """What the knowledge plugin uses of its scoped SDK: the memory the app opened."""

    @property
    def services(self) -> _Services | None: ...


class KnowledgePlugin:
    """The ``knowledge`` plugin: registered by the app whenever memory runs (it opens the knowledge base)."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self._kb: KnowledgeBase | None = None
        self.tools = KnowledgeTools(self._knowledge_base)

    def _knowledge_base(self) -> KnowledgeBase:
        if self._kb is None:
            raise ToolError("the knowledge base is not open yet (the knowledge plugin has not started)")
        return self._kb

    @hookimpl(trylast=True)
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        for name in KNOWLEDGE_TOOLS:
            registry.add(getattr(self.tools, name))

    @hookimpl(tryfirst=True)
    def startup(self, sdk: KnowledgeSDK) -> None:
        """Bind the tools to the knowledge base of the memory the app opened."""
        system = sdk.services.memory_system if sdk.services is not None else None
        if system is None:
            raise UsageError("the knowledge plugin needs memory: it runs only in an agent with memory on")
        self._kb = system.knowledge


def make_plugin() -> KnowledgePlugin:
    return KnowledgePlugin()
