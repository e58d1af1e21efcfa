"""What plugins and the web UI see of memory: small async facades over the memory system.

They implement the SDK's ``MemoryAPI``, ``DocAPI``, ``KnowledgeAPI``, ``SocialAPI`` and
``LLMAPI`` Protocols (plus the original's extra data functions: introspect, merge, purge,
stats, list, the read-only social queries and the LLM source switch) and return the SDK wire
types or plain JSON-compatible data. In-process, Lua and out-of-process plugins all reach
memory through these objects; every blocking store call runs in the ``memory`` worker pool
(:mod:`homeagent_core.workers`), never on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from homeagent_core.memory.graph.privacy import graph_marks, graph_reader
from homeagent_core.workers import run_blocking
from homeagent_sdk.errors import HomeAgentError, ProviderError, UsageError
from homeagent_sdk.types import Doc, Entity, MediaAttachment, Relation, TextEvent, Triple
from homeagent_sdk.visibility import Audience

if TYPE_CHECKING:
    from homeagent_core.memory.system import MemorySystem

__all__ = ["DocFacade", "KnowledgeFacade", "LLMFacade", "MemoryFacade", "SocialFacade"]

PURGE_MODES = ("soft", "hard")


def _relation_dict(rel: dict[str, Any]) -> dict[str, Any]:
    """A recalled relation with the SDK's ``Relation`` keys added next to the graph's own."""
    return {
        **rel,
        "source_name": rel.get("source", ""),
        "target_name": rel.get("target", ""),
        "relation_type": rel.get("type", ""),
    }


class MemoryFacade:
    """The memory graph, the conversation log (append only) and the working context (read only).

    The graph is read as the audience of the turn running now (the system's
    ``current_principal``; outside a turn: the owner) and written with its person and visibility.
    """

    def __init__(self, system: MemorySystem) -> None:
        self._m = system

    def _reader(self) -> Audience:
        return graph_reader(self._m.current_principal(), self._m.owner_name)

    async def recall(self, keywords: list[str], depth: int = 2, audience: Audience | None = None) -> dict[str, Any]:
        """``{seeds, entities, relations}``; never null arrays. Read as ``audience`` (default: the current reader).

        Each relation carries the graph's ``source/target/type`` and the SDK ``Relation`` keys
        ``source_name/target_name/relation_type``.
        """
        if isinstance(keywords, str):
            keywords = [keywords]
        reader = audience if audience is not None else self._reader()
        found = await self._m.graph.arecall([str(k) for k in keywords], depth=int(depth), audience=reader)
        result = found.to_dict()
        result["entities"] = list(result.get("entities") or [])
        result["relations"] = [_relation_dict(r) for r in result.get("relations") or []]
        return result

    async def commit(self, triples: list[Triple]) -> dict[str, Any]:
        """Store triples; ``{added, refreshed, skipped[reasons], media_blocks}``.

        Raises:
            TypeError: an item is neither a ``Triple`` nor a dict with subject/relation/object.
        """
        items = [t if isinstance(t, Triple) else Triple.from_dict(t) for t in triples]
        person, visibility = graph_marks(self._m.current_principal(), self._m.owner_name)
        result = await self._m.graph.acommit(items, person=person, visibility=visibility)
        return result.to_dict()

    def _entity_rows(self, audience: Audience | None = None) -> list[Any]:
        """The entities ``audience`` (default: the current reader) may see: those a visible relation touches."""
        cache = self._m.graph.cache
        audience = audience if audience is not None else self._reader()
        with cache.lock:
            if audience.everything:
                return list(cache.entities.values())
            seen = cache.compact.visible_entities(cache.compact.scope_codes(audience))
            return [e for e in cache.entities.values() if e.id < len(seen) and seen[e.id]]

    async def entities(self, query: str = "", limit: int = 50) -> list[Entity]:
        """Entities whose name contains ``query`` (all when empty), most mentioned first."""
        rows = self._entity_rows()
        if query:
            rows = [r for r in rows if query.lower() in r.name.lower()]
        rows.sort(key=lambda r: (-r.mention_count, r.name))
        return [Entity(r.name, r.type, r.mention_count) for r in rows[: max(0, int(limit))]]

    async def relations(self, entity: str) -> list[Relation]:
        """The active relations that start or end at ``entity`` (empty when unknown)."""
        result = await self._m.graph.arecall([entity], depth=1, max_relations=500, audience=self._reader())
        name = entity.strip()
        return [
            Relation(r.source, r.target, r.type, r.confidence)
            for r in result.relations
            if name in (r.source, r.target)
        ]

    async def introspect(self) -> dict[str, Any]:
        """Counts, top entities, relation types and vector coverage of the graph."""
        return await self._m.graph.aintrospect(self._reader())

    async def merge(self, source: str, target: str) -> dict[str, int]:
        """Fold entity ``source`` into ``target`` (the original's argument order).

        Returns ``{merged, moved, deduplicated, removed_self_loops}``; ``merged`` counts the
        relations that now belong to ``target``.

        Raises:
            MemoryStoreError: either name is unknown, or both name the same entity.
        """
        counts = await self._m.graph.amerge(target, source)
        return {"merged": counts["moved"] + counts["deduplicated"], **counts}

    async def purge(self, criteria: Mapping[str, Any], mode: str = "soft") -> int:
        """Soft- or hard-delete relations matching ``criteria``; returns how many.

        Raises:
            UsageError: ``mode`` is neither ``soft`` nor ``hard``.
            MemoryStoreError: no criteria or an unknown criterion (the message lists them).
        """
        if mode not in PURGE_MODES:
            raise UsageError(f"purge mode must be 'soft' or 'hard', got {mode!r}")
        return await self._m.graph.apurge(dict(criteria), mode, audience=self._reader())

    async def append_text(self, event: TextEvent | dict[str, Any], *, source: str = "") -> str:
        """Append one record to the conversation log (durable on return); returns its id.

        ``event`` is a ``TextEvent`` or its dict form (``role``, ``content``, optional
        ``timestamp``, ``channel``); a zero or missing timestamp means now.

        Raises:
            UsageError: the role is empty or the event is not an object.
            MemoryStoreError: the disk write failed (nothing was recorded).
        """
        if isinstance(event, dict):
            data = {"timestamp": 0.0, **event}
            try:
                event = TextEvent.from_dict(data)
            except TypeError as exc:
                raise UsageError(f"text event needs role and content: {exc}") from None
        if not isinstance(event, TextEvent):
            raise UsageError(f"text event must be a TextEvent or an object, got {type(event).__name__}")
        return await self._m.textlog.aappend(
            str(event.role),
            str(event.content),
            channel=event.channel,
            source=source,
            timestamp=float(event.timestamp) if event.timestamp else None,
            attachments=list(event.attachments) or None,
        )

    async def graph_snapshot(self, limit: int = 200, audience: Audience | None = None) -> dict[str, Any]:
        """The most mentioned entities and the relations among them, for a picture.

        Only what ``audience`` (default: the current turn's, the owner's outside a turn) may
        see: its relations and the entities they touch.
        """
        audience = audience if audience is not None else self._reader()
        cache = self._m.graph.cache
        with cache.lock:
            entities = self._entity_rows(audience)
            top = sorted(entities, key=lambda r: (-r.mention_count, r.name))[:limit]
            ids = {r.id for r in top}
            edges = [
                {"source": r.source_id, "target": r.target_id, "type": r.type, "visibility": r.visibility}
                for r in cache.relations.values()
                if r.source_id in ids and r.target_id in ids and audience.sees(r.person, r.visibility)
            ]
        nodes = [{"id": r.id, "name": r.name, "type": r.type, "mention_count": r.mention_count} for r in top]
        return {"nodes": nodes, "edges": edges, "total_entities": len(entities)}

    async def threads(self, person: str) -> list[dict[str, Any]]:
        """The conversation threads of ``person`` (``{id, person, title, created, updated}``), newest first."""
        return self._m.threads.threads(person)

    async def thread(self, thread: str) -> dict[str, Any] | None:
        """One thread's ``{id, person, title, created, updated}``, or None when nobody used it yet."""
        return self._m.threads.info(thread)

    async def new_thread(self, thread: str, person: str, title: str = "") -> dict[str, Any]:
        """Record the new thread ``thread`` of ``person`` (durable on return).

        Raises:
            UsageError: ``thread`` is not a usable thread id.
        """
        self._m.threads.check(thread)
        return await run_blocking("memory", self._m.threads.note, thread, person, title)

    async def context_timeline(self) -> list[dict[str, Any]]:
        """The working context, oldest first."""
        return [
            {"id": e.id, "time": e.timestamp, "kind": e.kind, "channel": e.channel, "source": e.source,
             "text": e.text}
            for e in self._m.context.events
        ]


class DocFacade:
    """The document store (searches never consume; ``doc_query`` is the model's tool for that)."""

    def __init__(self, system: MemorySystem, *, source: str = "plugin") -> None:
        self._m = system
        self._source = source

    async def query(self, text: str, top_k: int = 5) -> list[Doc]:
        """The ``top_k`` documents most related to ``text``, with scores."""
        hits = await self._m.documents.query(text, int(top_k), touch=False)
        return [h.document.to_doc(h.score) for h in hits]

    async def commit(self, title: str, content: str) -> str:
        """Store a document (durable on return); returns its id.

        Raises:
            UsageError: title and content are both empty.
        """
        doc = await self._m.documents.add(content, title=title, source=self._source)
        return doc.id

    async def insert(self, doc: Doc | dict[str, Any]) -> str:
        """:meth:`commit` of a ``Doc`` or ``{title, content}`` (the original's ``doc.insert``)."""
        if isinstance(doc, Doc):
            return await self.commit(doc.title, doc.content)
        if not isinstance(doc, dict):
            raise UsageError(f"doc.insert needs a document object {{title, content}}, got {type(doc).__name__}")
        return await self.commit(str(doc.get("title") or ""), str(doc.get("content") or ""))

    async def remove(self, doc_id: str) -> bool:
        """Delete one document; True when it existed."""
        return bool(await run_blocking("memory", self._m.documents.delete, [str(doc_id)]))

    async def stats(self) -> dict[str, Any]:
        """Counts of the store (documents, dense rows, stale vectors, space)."""
        return await run_blocking("memory", self._m.documents.stats)

    async def search(self, text: str, limit: int = 20) -> list[dict[str, Any]]:
        return [d.to_dict() for d in await self.query(text, limit)]

    async def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        docs = await run_blocking("memory", self._m.documents.all)
        docs.sort(key=lambda d: d.created_at, reverse=True)
        return [d.to_doc().to_dict() for d in docs[:limit]]


class KnowledgeFacade:
    """The knowledge base; entries come back as ``Doc`` (``id`` and ``title`` = the entry name)."""

    def __init__(self, system: MemorySystem) -> None:
        self._kb = system.knowledge

    async def search(self, query: str, limit: int = 5) -> list[Doc]:
        """Fused dense + lexical search, best first."""
        hits = await self._kb.search(query, int(limit))
        return [Doc(id=h.entry.name, title=h.entry.name, content=h.entry.content, score=round(h.score, 4))
                for h in hits]

    async def create(self, name: str, content: str) -> str:
        """Create or replace entry ``name`` (``category/…/leaf``); returns the normalised name.

        Raises:
            InvalidKnowledgeName: unsafe name or it would nest with an existing entry.
            UsageError: empty content.
        """
        entry = await self._kb.create(name, content)
        return entry.name

    async def get(self, name: str) -> Doc:
        """One entry by full name or unique leaf.

        Raises:
            KnowledgeNotFound: no such entry, or the leaf is ambiguous.
        """
        await self._kb.refresh()
        entry = self._kb.get(name)
        return Doc(id=entry.name, title=entry.name, content=entry.content)

    async def list(self, category: str = "") -> list[str]:
        """Entry names under ``category`` ("" = all), sorted."""
        await self._kb.refresh()
        return [e.name for e in self._kb.list(category)]

    async def delete(self, name: str) -> str:
        return await self._kb.adelete(name)

    async def overview(self) -> dict[str, Any]:
        await self._kb.refresh()
        entries = self._kb.list()
        return {
            "categories": self._kb.categories(),
            "entries": [{"name": e.name, "category": e.category, "updated_at": e.updated_at} for e in entries],
            "stats": {"entries": len(entries)},
        }


class SocialFacade:
    """People, traits and relations; in-process plugins may also link chat accounts to people."""

    def __init__(self, system: MemorySystem) -> None:
        self._social = system.social

    async def person(self, name: str) -> dict[str, Any]:
        """``{name, type, mention_count, traits, relations[{person, relation, direction}]}``; ``{}`` if unknown."""
        return await self._social.aget_person(name) or {}

    async def persons(self) -> list[str]:
        """Every known person, sorted."""
        return self._social.list_persons()

    async def trait(self, name: str, trait: str) -> str | None:
        """One trait's value, or None."""
        return await run_blocking("memory", self._social.get_trait, name, trait)

    async def relations(self, name: str) -> list[dict[str, str]]:
        """The person's relations (``person``, ``relation``, ``direction``); ``[]`` if unknown."""
        return list((await self.person(name)).get("relations") or [])

    async def network(self, name: str, depth: int = 2) -> dict[str, Any]:
        """People within ``depth`` hops: ``{center, people[{name, distance}], relations}``.

        Raises:
            MemoryStoreError: ``name`` is not a known person.
        """
        return self._social.network(name, int(depth))

    async def link_account(self, person: str, platform: str, account: str) -> None:
        """Link ``account`` on ``platform`` to ``person`` (created if new)."""
        await run_blocking("memory", self._social.link_account, person, platform, str(account))

    async def person_for_account(self, platform: str, account: str) -> str | None:
        """The person linked to ``account`` on ``platform``, or None."""
        return await run_blocking("memory", self._social.person_for_account, platform, str(account))


class MediaFacade:
    """The content-addressed media store (photos, voice notes and files of chat bridges)."""

    def __init__(self, system: MemorySystem) -> None:
        self._media = system.media

    async def put(self, data: bytes, mime: str, *, name: str = "") -> MediaAttachment:
        """Store ``data``; returns its attachment (``digest`` set, no ``data``).

        Raises:
            HomeAgentError: the media store is disabled or the blob is over its size cap.
        """
        record = await self._media.put(data, mime, name=name)
        if record is None:
            raise HomeAgentError("the media store is disabled (core.memory.media.enabled = false)")
        return MediaAttachment(digest=record.digest, mime=record.mime, name=record.name)

    async def get(self, ref: str) -> MediaAttachment:
        """The stored media ``ref`` (a digest or unique digest prefix) with its bytes.

        Raises:
            MemoryStoreError: unknown or ambiguous ``ref``, or the blob failed its checksum.
        """
        record, data = await self._media.get_with_record(ref)
        return MediaAttachment(digest=record.digest, mime=record.mime, name=record.name, data=data)


class LLMFacade:
    """Direct model calls outside a turn (never remembered) and the source switch."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider

    async def chat(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        """One unified request; returns the unified response (``content``, ``tool_calls``...).

        Raises:
            UsageError: ``messages`` is not a non-empty list of ``{role, content}`` objects.
            ProviderError: the model call failed.
        """
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise UsageError('llm.chat needs a non-empty list of messages like [{"role": "user", "content": "..."}]')
        return await self._provider.chat({"messages": list(messages), **options})  # type: ignore[no-any-return]

    async def quick_chat(self, prompt: str) -> str:
        """One user message, short answer; returns its text."""
        response = await self.chat([{"role": "user", "content": prompt}], max_tokens=128)
        return str(response.get("content", ""))

    async def list_sources(self) -> list[dict[str, Any]]:
        """The configured sources (never api keys); a single provider is its own one source."""
        lister = getattr(self._provider, "list_sources", None)
        if callable(lister):
            return list(lister())
        return [{"name": self._name(), "default": True, "available": True}]

    async def current_source(self) -> str:
        """The name of the default source."""
        default = getattr(self._provider, "default", None)
        if isinstance(default, str) and default:
            return default
        if callable(getattr(self._provider, "list_sources", None)):
            sources = await self.list_sources()
            usable = [s for s in sources if s.get("available")] or sources
            return str(usable[0]["name"]) if usable else ""
        return self._name()

    async def set_source(self, name: str) -> None:
        """Make ``name`` the default source.

        Raises:
            ProviderError: no such source.
        """
        setter = getattr(self._provider, "set_source", None)
        if callable(setter):
            setter(str(name))
            return
        if str(name) != self._name():
            raise ProviderError(f"unknown source {name!r}; the only source is {self._name()!r}")

    def _name(self) -> str:
        return str(getattr(self._provider, "name", "") or type(self._provider).__name__)
