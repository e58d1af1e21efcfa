"""Model-facing tools of the document layer: ``doc_query`` and ``doc_commit``.

Both act as the turn's principal (:data:`homeagent_sdk.current.CURRENT_PRINCIPAL`): ``doc_query``
finds only documents that person may see, ``doc_commit`` stores a note private to them (or to
the group chat the turn runs in).

:class:`DocumentTools` holds them as typed methods (the memory plugin registers them through
``register_tools``); :func:`document_tools` turns them into ``ToolDef`` objects.

``memory_document_query`` is the same tool under the original system's name.

``doc_query`` consumes: each hit is returned, deleted from the store, and re-inserted into the
working context as a ``cold_storage`` event at the document's original timestamp, so the
timeline shows it where it happened.

The move is crash-safe: the context (with the new events, each naming its ``doc_id``) is
written durably first, and only then are the documents deleted. A crash between the two steps
leaves a document in both places; :func:`settle_moves` (run when memory opens) finishes such a
move by deleting the store's copy, and likewise drops from the context the events a prune had
already archived to the store, so every document is found exactly once after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from homeagent_core.memory.audience import current_audience, current_marks
from homeagent_core.memory.context import ContextEvent
from homeagent_sdk.errors import ToolError, UsageError
from homeagent_sdk.schema import tool_from_function
from homeagent_sdk.types import ToolDef, ToolOptions

if TYPE_CHECKING:
    from homeagent_core.memory.context import RelevanceContext
    from homeagent_core.memory.stores.documents import BaseDocumentStore

__all__ = ["DOCUMENT_TOOLS", "DocumentTools", "document_tools", "settle_moves"]

log = logging.getLogger(__name__)

MAX_TOP_K = 20
MAX_CONTENT = 20_000
ALIAS_DESCRIPTION = (
    "Alias of doc_query (the original's name): Search long-term document memory (archived conversation "
    "and notes). Matching documents are returned and moved back into the conversation at their original time."
)

#: The store and (for re-insertion; None: documents are only consumed) the working context.
DocBinding = tuple["BaseDocumentStore", "RelevanceContext | None"]


def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


#: The document tools in the order the model sees them: (method, ``registry.add`` options).
DOCUMENT_TOOLS: tuple[tuple[str, ToolOptions], ...] = (
    ("doc_query", {}),
    ("doc_commit", {}),
    ("doc_query", {"name": "memory_document_query", "description": ALIAS_DESCRIPTION}),
)


class DocumentTools:
    """``doc_query`` and ``doc_commit`` as typed methods over a store (and a context for re-insertion).

    ``binding`` is ``(store, context)`` or a function returning it when a tool runs (the memory
    plugin registers its tools before memory is handed to it).
    """

    def __init__(self, binding: DocBinding | Callable[[], DocBinding]) -> None:
        self._binding = binding

    @property
    def bound(self) -> DocBinding:
        return self._binding if isinstance(self._binding, tuple) else self._binding()

    def tool_defs(self, *, plugin: str = "core") -> list[ToolDef]:
        """The tools as :class:`ToolDef` objects (schemas from the signatures)."""
        return [tool_from_function(getattr(self, n), plugin=plugin, **o) for n, o in DOCUMENT_TOOLS]

    async def doc_query(
        self,
        query: Annotated[str, "what to look for"],
        top_k: Annotated[int, {"minimum": 1, "maximum": MAX_TOP_K}, "how many documents to bring back"] = 3,
    ) -> dict[str, Any]:
        """Search long-term document memory (archived conversation and notes). Matching documents are returned and moved back into the conversation at their original time."""  # noqa: E501
        store, context = self.bound
        if not isinstance(query, str) or not query.strip():
            raise ToolError("doc_query: 'query' must be a non-empty string describing what to find")
        if not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ToolError(f"doc_query: 'top_k' must be an integer from 1 to {MAX_TOP_K}, got {top_k!r}")
        audience = current_audience(store.owner)  # only what the turn's person may see
        if context is None:
            hits = await store.consume(query, top_k, audience=audience)
        else:
            hits = await store.query(query, top_k, audience=audience, touch=True)
            for hit in hits:
                doc = hit.document
                await context.append(
                    ContextEvent(
                        input=doc.content if not doc.title else f"{doc.title}\n{doc.content}",
                        kind="cold_storage",
                        source="cold_storage",
                        timestamp=doc.created_at,
                        meta={"doc_id": doc.id, **({"origin": doc.meta} if doc.meta else {}),
                              "person": doc.person, "visibility": doc.visibility},
                    )
                )
            if hits:
                # Durable in the context first, then gone from the store: a crash in between
                # leaves a copy in both, which settle_moves resolves at the next start.
                await context.save_now()
                await asyncio.to_thread(store.delete, [h.document.id for h in hits])
        return {
            "found": len(hits),
            "documents": [
                {
                    "id": h.document.id,
                    "title": h.document.title,
                    "content": h.document.content,
                    "time": _when(h.document.created_at),
                    "score": round(h.score, 4),
                    **({"media_digests": h.document.media_digests} if h.document.media_digests else {}),
                }
                for h in hits
            ],
            "note": "returned documents were moved back into the conversation timeline"
            if hits
            else "no matching documents",
        }

    async def doc_commit(
        self,
        content: Annotated[str, "the text to remember"],
        title: Annotated[str | None, "optional short title"] = None,
        media_digests: Annotated[list[str] | None, "digests of stored media this note refers to"] = None,
    ) -> dict[str, Any]:
        """Store a note in long-term document memory for later doc_query."""
        store, _context = self.bound
        if not isinstance(content, str) or not content.strip():
            raise ToolError("doc_commit: 'content' must be non-empty text to store")
        if len(content) > MAX_CONTENT:
            raise ToolError(
                f"doc_commit: 'content' is {len(content)} characters; the limit is {MAX_CONTENT}, "
                "split it into several documents"
            )
        digests = list(media_digests or [])
        if not all(isinstance(d, str) and d for d in digests):
            raise ToolError("doc_commit: 'media_digests' must be a list of digest strings")
        try:
            person, visibility = current_marks(store.owner)
            doc = await store.add(content, title=title or "", source="doc_commit", media_digests=digests,
                                  person=person, visibility=visibility)
        except UsageError as exc:
            raise ToolError(f"doc_commit: {exc}") from exc
        return {"stored": True, "id": doc.id, "time": _when(doc.created_at)}


def document_tools(
    store: BaseDocumentStore, context: RelevanceContext | None = None, *, plugin: str = "core"
) -> list[ToolDef]:
    """``doc_query``, ``doc_commit`` and the alias ``memory_document_query`` bound to ``store`` (and ``context``)."""
    return DocumentTools((store, context)).tool_defs(plugin=plugin)


def settle_moves(context: RelevanceContext, store: BaseDocumentStore, *, archives: bool = True) -> tuple[int, int]:
    """Finish moves between the context and the store that a crash interrupted.

    * a ``cold_storage`` event whose ``doc_id`` is still in the store: ``doc_query`` wrote the
      context but died before deleting the document, so the store's copy is deleted;
    * an event whose id a stored document records as ``meta.event_id``: a prune archived it
      but died before the context was saved, so the event leaves the context.

    Returns (documents deleted, events removed). Call with both opened, before the first turn.
    ``archives=False`` skips the second check (it scans every stored document's metadata).
    """
    moved = [
        str(e.meta["doc_id"])
        for e in context.events
        if e.kind == "cold_storage" and isinstance(e.meta.get("doc_id"), str) and e.meta["doc_id"] in store
    ]
    deleted = store.delete(moved) if moved else 0
    archived = store.archived_event_ids(e.id for e in context.events) if archives else set()
    removed = sum(1 for event_id in archived if context.remove(event_id))
    if deleted or removed:
        log.warning(
            "memory: finished %d document move(s) and %d archive(s) interrupted by a crash "
            "(each document is kept once)",
            deleted,
            removed,
        )
    return deleted, removed
