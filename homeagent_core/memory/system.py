"""All memory layers of one agent, opened together and wired into the turn.

:class:`MemorySystem` owns the embedding tiers, the media store, the graph (with its social
layer, recall indexer and rule distiller), the document store, the working context, the
conversation log and the knowledge base. It implements the kernel's ``TurnMemory`` protocol
(the points of a turn where memory is written or read); the app opens it and hands it to the
kernel. Its tools and heartbeats belong to the ``memory`` plugin (``memory/plugin.py``).

Durability: ``record_input`` appends to the conversation log (fsync) before the turn goes on,
so an input that was answered is never lost (the record names the turn's person and thread); a
turn reads and writes only the working window of its own thread (:func:`homeagent_sdk.threads.thread_of`),
never another person's; the context is saved debounced and flushed on
close, except when ``doc_query`` moves documents into it (saved durably before they leave the
store; a move a crash interrupted is finished when memory opens). Turns a thread's context file
missed in a crash are restored from the conversation log: ``main``'s when memory opens, any other
thread's when it is first used. The rule distiller's raw record
of an input is also written (atomically, fsync'd) before the turn goes on, not at its next tick;
an input in which it recognises a plain fact (我叫X, I live in X) is distilled into the graph
right then, so the graph shows it after the turn (the model distiller runs on its heartbeat).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from homeagent_core.memory.audience import audience_of, marks_of, owner_or_default, says_household
from homeagent_core.memory.textlog import record_thread, record_visibility
from homeagent_core.workers import pool, run_blocking
from homeagent_sdk.errors import MemoryStoreError
from homeagent_sdk.threads import MAIN_THREAD, thread_of
from homeagent_sdk.types import MediaAttachment, Principal, StageContext, ToolDef, Triple
from homeagent_sdk.visibility import HOUSEHOLD, Audience

if TYPE_CHECKING:
    from homeagent_core.config import ConfigStore
    from homeagent_core.embeddings.registry import TierSelection
    from homeagent_core.memory.context import RelevanceContext, ThreadContexts
    from homeagent_core.memory.distill import RuleDistiller
    from homeagent_core.memory.graph.store import GraphStore
    from homeagent_core.memory.indexer import MemoryIndexer
    from homeagent_core.memory.knowledge.base import KnowledgeBase
    from homeagent_core.memory.media import MediaStore
    from homeagent_core.memory.scratch import ScratchMemory
    from homeagent_core.memory.social import SocialGraph
    from homeagent_core.memory.stores.documents import BaseDocumentStore
    from homeagent_core.memory.textlog import ConversationLog
    from homeagent_core.memory.tools import GraphBinding
    from homeagent_sdk.embeddings import EmbeddingProvider

__all__ = [
    "MemoryHost",
    "MemorySystem",
    "ResidentMemorySeam",
    "ToolLookup",
    "attach_shared_settings",
    "embedding_tier_config",
]

log = logging.getLogger(__name__)

#: seconds memory waits at close for store calls still running in its worker pool
_DRAIN_SECONDS = 10.0

#: How far back from the end of the conversation log a thread's missed turns are looked for
#: when it is first used in a run (the turns a crash can lose are the last few seconds' ones).
_THREAD_REPLAY_BYTES = 4 * 1024 * 1024

#: Channels whose turns are never remembered.
UNREMEMBERED_CHANNELS = frozenset({"_consolidation_", "_child_"})


class ToolLookup(Protocol):
    """Finds a registered tool's definition by name."""

    def get(self, name: str) -> ToolDef | None: ...


class MemoryHost(Protocol):
    """What the memory plugin needs from the agent that runs it (the kernel satisfies this).

    Memory never imports the kernel: it looks up tool definitions, queues consolidation input
    and equips residents through this narrow seam (the model is asked through ``sdk.llm``).
    """

    @property
    def tools(self) -> ToolLookup: ...

    def submit_self_input(self, text: str) -> Awaitable[Any]: ...

    @property
    def residents(self) -> ResidentMemorySeam: ...


class ResidentMemorySeam(Protocol):
    """How memory equips resident sub-agents: a scratch graph per resident, and ``reclaim``."""

    def use_memory(
        self,
        scratch_factory: Callable[[Path], ScratchMemory],
        reclaimer: Callable[[list[Triple]], Awaitable[int]],
    ) -> None: ...


def embedding_tier_config(config: ConfigStore) -> dict[str, Any]:
    """``ProviderRegistry.select`` arguments from the ``core.embeddings.*`` settings."""
    provider = config.get("core.embeddings.provider")
    dense: dict[str, Any] = {"allow_download": config.get("core.embeddings.allow_download")}
    for key in ("model", "base_url", "api_key", "dimension", "languages"):
        value = config.get(f"core.embeddings.{key}")
        if value:
            dense[key] = value
    return {
        "dense": None if provider == "none" else provider,
        "dense_config": dense,
        "static_paths": config.get("core.agent.embedding_model_path"),
    }


@dataclass
class MemorySystem:
    """The opened memory layers; build with :meth:`open`."""

    data_dir: Path
    tiers: TierSelection
    media: MediaStore
    graph: GraphStore
    social: SocialGraph
    indexer: MemoryIndexer
    documents: BaseDocumentStore
    context: RelevanceContext
    textlog: ConversationLog
    knowledge: KnowledgeBase
    distiller: RuleDistiller
    #: Tool definitions, which decide how each tool's output is remembered (set by the memory plugin).
    tool_lookup: ToolLookup | None = None
    #: The PostgreSQL pool the log, media and knowledge share (None on SQLite); closed after them.
    database: Any = None
    #: The owner's registry name, set by the app once the person registry is open ("" in library
    #: use: one user, who reads everything; see :mod:`homeagent_core.memory.graph.privacy`).
    owner_name: str = ""
    #: The principal of the turn running now (the kernel's ``CURRENT_PRINCIPAL.get``, handed in by
    #: the app: memory does not import the kernel); the graph tools read and write as it.
    current_principal: Callable[[], Principal | None] = field(default=lambda: None)
    #: Graph relations written before there were people and claimed for the owner at this start
    #: (:meth:`claim_graph_for_owner`), for the first-start notice.
    graph_migrated: int = 0
    #: The household owner's name (:func:`~homeagent_core.memory.audience.owner_or_default`): what a
    #: turn without a principal reads and writes as, and whose the items stored before people are.
    owner: str = ""
    _current: dict[int, str] = field(default_factory=dict)
    _threads: ThreadContexts | None = None
    _replayed: set[str] = field(default_factory=set)
    _reembed_task: asyncio.Task[dict[str, int]] | None = None

    # ------------------------------------------------------------------ opening

    @classmethod
    async def open(
        cls,
        data_dir: Path,
        config: ConfigStore,
        *,
        extra_factories: dict[str, Any] | None = None,
        embedder: EmbeddingProvider | None = None,
        owner: str = "",
    ) -> MemorySystem:
        """Open every layer under ``<data>/memory`` and ``<data>/knowledge``.

        ``owner`` names the household's owner (the person registry's; "" without one:
        :data:`~homeagent_core.memory.audience.LIBRARY_OWNER`). Items stored before items
        recorded their person become the owner's and private; the first open after that says
        so once in the log.

        ``embedder`` forces the dense space (tests, library use); otherwise the configured
        tiers are tried best first and each unavailable one is reported once.
        """
        from homeagent_core.embeddings.registry import ProviderRegistry, TierSelection, TierStatus
        from homeagent_core.memory.context import RelevanceContext
        from homeagent_core.memory.distill import RuleDistiller
        from homeagent_core.memory.indexer import MemoryIndexer
        from homeagent_core.memory.knowledge.base import KnowledgeBase
        from homeagent_core.memory.media import MediaStore
        from homeagent_core.memory.social import SocialGraph
        from homeagent_core.memory.stores.factory import (
            open_conversation_log,
            open_database,
            open_document_store,
            open_graph_store,
            open_knowledge_storage,
            open_media_index,
        )

        owner = owner_or_default(owner)
        memory_dir = data_dir / "memory"
        memory_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        await asyncio.to_thread(attach_shared_settings, config)
        if embedder is not None:
            status = TierStatus("dense", embedder.info.name, available=True, active=True)
            tiers = TierSelection("dense", embedder, [status], dense=embedder)
        else:
            registry = ProviderRegistry()
            for name, factory in (extra_factories or {}).items():
                registry.add(name, factory, plugin="plugin")
            tiers = await registry.select(**embedding_tier_config(config))
        active = tiers.provider
        image_space = tiers.dense if tiers.dense is not None and tiers.dense.supports("image") else None

        def open_stores() -> tuple[Any, ...]:
            store, tenant = config.get("core.memory.store"), config.get("core.memory.tenant")
            enabled = config.get("core.memory.media.enabled")
            db = open_database(store)  # one pool and listener for the log, media and knowledge
            media = MediaStore(
                memory_dir / "media",
                embedder=image_space,
                max_blob_bytes=config.get("core.memory.media.max_blob_bytes"),
                enabled=enabled,
                index=open_media_index(store, tenant=tenant, db=db) if enabled else None,
            )
            graph = open_graph_store(
                config.get("core.memory.store"), memory_dir, active, tenant=config.get("core.memory.tenant")
            )
            documents = open_document_store(
                config.get("core.memory.store"), memory_dir, active, tenant=config.get("core.memory.tenant"),
                owner=owner,
            )
            textlog = open_conversation_log(store, memory_dir, tenant=tenant, db=db)
            knowledge = KnowledgeBase(
                data_dir / "knowledge", embedder=active, storage=open_knowledge_storage(store, tenant=tenant, db=db),
                owner=owner,
            )
            return media, graph, documents, textlog, knowledge, db

        media, graph, documents, textlog, knowledge, database = await asyncio.to_thread(open_stores)
        context = RelevanceContext(
            memory_dir / "context.json",
            embedder=active,
            documents=documents,
            max_context_size=config.get("core.agent.max_context_size"),
        )
        from homeagent_core.memory.documents.tools import settle_moves

        await asyncio.to_thread(settle_moves, context, documents)
        await _replay_log_tail(context, textlog)
        distiller = await asyncio.to_thread(RuleDistiller, memory_dir / "raw", graph)
        if documents.migrated:
            log.warning(
                "memory: %d document(s) stored before memory recorded who said what now belong to the owner "
                "%r and are private; `homeagent memory share ID` (or the web UI's memory page) makes one "
                "visible to the whole household", documents.migrated, owner,
            )
        return cls(
            data_dir=data_dir,
            tiers=tiers,
            media=media,
            graph=graph,
            social=SocialGraph(graph),
            indexer=MemoryIndexer(graph),
            documents=documents,
            context=context,
            textlog=textlog,
            knowledge=knowledge,
            distiller=distiller,
            database=database,
            owner=owner,
        )

    @property
    def threads(self) -> ThreadContexts:
        """The working window of every conversation thread; :attr:`context` is the main thread's."""
        if self._threads is None:
            from homeagent_core.memory.context import ThreadContexts

            self._threads = ThreadContexts(self.context, self.data_dir / "memory" / "threads")
        return self._threads

    def start_reembedding(self) -> None:
        """Start :meth:`reembed_stale` in the background (cancelled by :meth:`aclose`)."""
        if self._reembed_task is None:
            self._reembed_task = asyncio.get_running_loop().create_task(self.reembed_stale(), name="memory-reembed")

    async def reembed_stale(self) -> dict[str, int]:
        """Re-embed rows stored in another embedding space (after a model change), in batches.

        Runs in the background at start; resumable, because each written row carries the new
        fingerprint and is skipped next time.
        """
        done: dict[str, int] = {}
        if self.tiers.provider is not None:
            done["documents"] = await self.documents.reembed_stale()
            graph = await self.graph.reembed_stale(self.tiers.provider)
            done["graph"] = sum(graph.values())
        if self.media.embedder is not None:
            done["media"] = (await self.media.reembed_stale()).reembedded
        if any(done.values()):
            log.info("re-embedded rows from other embedding spaces: %s", done)
        return done

    async def aclose(self) -> None:
        """Stop the re-embedding, flush everything pending, close every store."""
        if self._reembed_task is not None and not self._reembed_task.done():
            self._reembed_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reembed_task
        # A store write whose caller was cancelled (a stopped turn) still runs in the memory pool:
        # let it finish before the stores close (its threads do not hold the process open).
        if not await pool("memory").drain(_DRAIN_SECONDS):
            log.warning("closing memory with store calls still running after %g s: %s", _DRAIN_SECONDS,
                        pool("memory").stats())
        await self.threads.aclose()
        await asyncio.to_thread(self.distiller.flush)
        await self.documents.aclose()
        await self.graph.aclose()
        await asyncio.to_thread(self.textlog.close)
        await asyncio.to_thread(self.media.close)
        await asyncio.to_thread(self.knowledge.close)
        if self.database is not None:
            await asyncio.to_thread(self.database.close)
        await self.tiers.aclose()

    # ------------------------------------------------------------------ tools

    def graph_binding(self) -> GraphBinding:
        """The main graph for its tools: media digests resolved, purges and edits reaching the log."""
        from homeagent_core.memory.tools import GraphBinding

        def resolve_digest(ref: str) -> str | None:
            try:
                return self.media.resolve(ref)
            except Exception:
                return None

        def text_purge(contains: str) -> int:
            return self.textlog.purge(contains=contains)

        return GraphBinding(
            self.graph,
            self.social,
            self.indexer,
            resolve_digest=resolve_digest,
            text_purge=text_purge,
            text_replace=self.textlog.edit,
            principal=lambda: self.current_principal(),
            owner=lambda: self.owner_name,
        )

    async def claim_graph_for_owner(self) -> int:
        """Make the graph rows written before there were people the owner's (private); returns how many relations.

        Called by the app once :attr:`owner_name` is set. Relations, sentences and media blocks
        with no person become the owner's, and the entity "用户" (the one user the distillers
        knew) becomes the owner's entity (renamed, or merged into it). Adds the count to
        :attr:`graph_migrated`; 0 when there was nothing to claim (every later start).
        """
        if not self.owner_name:
            return 0
        claimed = await self.graph.aclaim_for_owner(self.owner_name, self.distiller.subject)
        self.graph_migrated += claimed
        if claimed:
            log.info("graph memory: %d relations written before there were people are now %s's (private)",
                     claimed, self.owner_name)
        return claimed

    def tool_defs(self) -> list[ToolDef]:
        """Memory's and the knowledge base's tools bound to these stores, for use without an agent
        (``homeagent mcp serve``); a running agent gets them from the ``memory`` and ``knowledge`` plugins."""
        from homeagent_core.memory.documents.tools import document_tools
        from homeagent_core.memory.knowledge.tools import knowledge_tools
        from homeagent_core.memory.tools import GraphTools

        return [
            *GraphTools(self.graph_binding()).tool_defs(),
            *document_tools(self.documents, self.context, plugin="memory"),
            *knowledge_tools(self.knowledge, plugin="knowledge"),
        ]

    # ------------------------------------------------------------------ TurnMemory

    @staticmethod
    def _remembered(ctx: StageContext) -> bool:
        return not ctx.no_memory and ctx.channel not in UNREMEMBERED_CHANNELS

    async def _window(self, ctx: StageContext) -> tuple[str, RelevanceContext]:
        """The turn's thread and its working window (never another thread's).

        The first time a thread is used in this run, the turns its (debounced) file missed in a
        crash are restored from the end of the conversation log, and ``doc_query`` moves a crash
        cut are finished, as ``main``'s are at open.
        """
        thread = thread_of(ctx.principal)
        context = self.threads.get(thread)
        if thread != MAIN_THREAD and thread not in self._replayed:
            self._replayed.add(thread)
            # doc_query moves documents into the asker's own window: finish a move a crash cut
            # there, as memory does for main's when it opens
            from homeagent_core.memory.documents.tools import settle_moves

            await asyncio.to_thread(functools.partial(settle_moves, context, self.documents, archives=False))
            await _replay_log_tail(context, self.textlog, thread=thread, max_bytes=_THREAD_REPLAY_BYTES)
        return thread, context

    async def record_input(self, ctx: StageContext, item: Any) -> None:
        """Durably log the input, then add it to the working context."""
        from homeagent_core.memory.context import ContextEvent

        if not self._remembered(ctx):
            return
        for att in ctx.attachments:
            if att.data and not att.digest:
                record = await self.media.put(att.data, att.mime, name=att.name)
                if record is not None:
                    att.digest = record.digest
        attachments = [MediaAttachment(digest=a.digest, mime=a.mime, name=a.name) for a in ctx.attachments] or None
        thread, context = await self._window(ctx)
        person = ctx.principal.person if ctx.principal is not None else ""
        marks = self.input_marks(ctx)
        await self.textlog.aappend("user", ctx.raw_message, channel=ctx.channel, source=ctx.source,
                                   attachments=attachments, person=person, thread=thread, visibility=marks[1])
        if thread != MAIN_THREAD:
            await asyncio.to_thread(self.threads.note, thread, "" if ":group:" in thread else person,
                                    title=ctx.raw_message)
        cleaner = getattr(item, "cleaner", None)
        event = await context.append(
            ContextEvent(input=ctx.raw_message, kind="user", source=ctx.source, channel=ctx.channel,
                         no_memory=ctx.no_memory, meta={"person": marks[0], "visibility": marks[1]}),
            channel_cleaner=cleaner,
        )
        if len(self._current) > 64:  # turns that ended without an output (errors, stops)
            self._current.clear()
        self._current[id(ctx)] = event.id
        from homeagent_core.memory.graph.privacy import graph_marks, speaker_name

        speaker = speaker_name(ctx.principal, self.owner_name)
        marked_person, visibility = graph_marks(ctx.principal, self.owner_name)
        if marks[1] == HOUSEHOLD:  # "告诉全家": the facts it states are the household's too
            visibility = HOUSEHOLD
        if self.distiller.add(ctx.raw_message, session=ctx.channel, speaker=speaker, person=marked_person,
                              visibility=visibility) is not None:
            # On disk before the reply, like the log: a crash must not lose the facts said in it.
            await self.distiller.aflush()
            from homeagent_core.memory.distill import extract_triples

            if extract_triples(ctx.raw_message, speaker):
                # Facts said plainly (我叫X, I live in X) reach the graph with this turn, not at the
                # next heartbeat; the model distiller still runs on the heartbeat.
                await self.distiller.adistill_once()

    def audience(self, ctx: StageContext) -> Audience:
        """What the turn's principal may read (:func:`~homeagent_core.memory.audience.audience_of`)."""
        return audience_of(ctx.principal, owner=self.owner)

    def input_marks(self, ctx: StageContext) -> tuple[str, str]:
        """``(person, visibility)`` of what the turn's input stores: its principal's marks, or
        ``household`` when the input says so ("告诉全家", "remember this for everyone")."""
        person, visibility = marks_of(ctx.principal, owner=self.owner)
        return person, HOUSEHOLD if says_household(ctx.raw_message) else visibility

    async def prune(self, ctx: StageContext) -> None:
        _, context = await self._window(ctx)
        if len(context) > context.max_context_size:
            await context.prune(ctx.raw_message)

    async def recall(self, ctx: StageContext) -> list[str]:
        """System-prompt blocks: the graph index, related documents, knowledge hits.

        Recall only adds context: a store that cannot be read (a PostgreSQL server away longer
        than its retry window, a damaged file) leaves its block out for this turn, says so in
        ``ctx.errors`` and the log, and the turn is answered without it.
        """
        text = ctx.raw_message
        blocks: list[str] = []
        audience = self.audience(ctx)
        index_block = functools.partial(self._index_block, principal=ctx.principal)
        for what, block in (("graph index", index_block),
                            ("related documents", functools.partial(self._documents_block, audience=audience)),
                            ("knowledge", functools.partial(self._knowledge_block, audience=audience))):
            try:
                found = await block(text)
            except MemoryStoreError as exc:
                log.warning("recall: %s left out of this turn: %s", what, exc)
                ctx.errors.append(f"memory recall: {what} left out: {exc}")
                continue
            if found:
                blocks.append(found)
        return blocks

    async def _index_block(self, text: str, *, principal: Principal | None = None) -> str:
        """The graph index line, recalled as the turn's audience (its principal's)."""
        from homeagent_core.memory.graph.privacy import graph_reader

        return await self.indexer.build_context(text, graph_reader(principal, self.owner_name))

    async def _documents_block(self, text: str, *, audience: Audience) -> str:
        hits = await self.documents.query(text, 3, audience=audience, touch=False)  # read-only injection
        if not hits:
            return ""
        from homeagent_core.memory.documents.store import format_related

        return format_related(hits)

    async def _knowledge_block(self, text: str, *, audience: Audience) -> str:
        await self.knowledge.refresh()  # another daemon's changes are read off the loop
        if not len(self.knowledge):
            return ""
        good = [h for h in await self.knowledge.search(text, 2, audience=audience) if h.score > 0.2]
        if not good:
            return ""
        lines = [f"- {h.entry.name}: {h.entry.content[:120]}" for h in good]
        return "[相关知识]\n" + "\n".join(lines) + "\n（完整内容用 knowledge_search 查询）"

    async def record_output(self, ctx: StageContext) -> None:
        """Log the reply durably and add it (with remembered tool outputs) to the context."""
        from homeagent_core.memory.context import ContextEvent, ToolOutput

        self._current.pop(id(ctx), None)
        if not self._remembered(ctx):
            return
        outputs = []
        summaries: list[dict[str, Any]] = []
        for result in ctx.tool_results:
            tool = self.tool_lookup.get(result.name) if self.tool_lookup is not None else None
            no_memory = bool(tool and tool.no_memory)
            summaries.append({"name": result.name, "success": result.success,
                              **({} if no_memory else {"result": result.result[:500]})})
            if not result.success:
                continue
            outputs.append(
                ToolOutput(result.name, result.result, no_memory=no_memory,
                           cleaner=tool.cleaner if tool is not None else None)
            )
        thread, context = await self._window(ctx)
        person, visibility = marks_of(ctx.principal, owner=self.owner)  # a reply may draw on private items
        await self.textlog.aappend("assistant", ctx.final_text, channel=ctx.channel, source="agent",
                                   reasoning=ctx.reasoning_content or "", tools=summaries or None,
                                   person=ctx.principal.person if ctx.principal is not None else "", thread=thread,
                                   visibility=visibility)
        await context.append(
            ContextEvent(response=ctx.final_text, kind="agent", source="agent", channel=ctx.channel,
                         tool_outputs=outputs, meta={"person": person, "visibility": visibility})
        )

    async def timeline(self, ctx: StageContext, budget_tokens: int) -> list[dict[str, Any]]:
        """Past messages for the prompt, oldest first, without the current input."""
        current = self._current.get(id(ctx))
        messages: list[dict[str, Any]] = []
        _, context = await self._window(ctx)
        for event in context.timeline(max_chars=max(0, int(budget_tokens))):
            if event.id == current:
                continue
            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(event.timestamp))
            if event.kind == "agent":
                messages.append({"role": "assistant", "content": event.response})
            elif event.kind == "cold_storage":
                text = "\n".join(t for t in (event.input, event.response) if t)
                messages.append({"role": "system", "content": f"[取回的记忆 {stamp}] {text}"})
            elif event.kind == "user":
                messages.append({"role": "user", "content": event.input})
        return messages

    # ------------------------------------------------------------------ who may see what

    async def set_visibility(self, ids: list[str], visibility: str) -> dict[str, list[str]]:
        """Mark documents (by id) and knowledge entries (by name) ``household`` or back ``private``
        (the owner's ``homeagent memory share``/``unshare``); durable on return.

        Returns ``{"documents": [...], "knowledge": [...], "unknown": [...]}``: what each id named.

        Raises:
            UsageError: ``visibility`` is not one a store accepts.
        """
        from homeagent_core.memory.knowledge.base import InvalidKnowledgeName, KnowledgeNotFound

        found: dict[str, list[str]] = {"documents": [], "knowledge": [], "unknown": []}
        for item in dict.fromkeys(ids):
            if await run_blocking("memory", self.documents.set_visibility, [item], visibility):
                found["documents"].append(item)
                continue
            try:
                await self.knowledge.refresh()
                entry = await run_blocking("memory", self.knowledge.set_visibility, item, visibility)
            except (InvalidKnowledgeName, KnowledgeNotFound):
                found["unknown"].append(item)
            else:
                found["knowledge"].append(entry.name)
        return found

    # ------------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """Counts and active tiers, for ``/api/v1/kernel`` and ``homeagent doctor``."""
        stats = self.graph.cache.stats() if hasattr(self.graph.cache, "stats") else {}
        return {
            "embedding_tiers": self.tiers.to_dicts(),
            "active_tier": self.tiers.tier,
            "graph": stats,
            "documents": len(self.documents),
            "context_events": len(self.context),
            "knowledge_entries": len(self.knowledge),
            "media_blobs": len(self.media),
        }


def attach_shared_settings(config: ConfigStore) -> None:
    """Read the household's shared settings from a PostgreSQL memory store (once; nothing on SQLite).

    Raises:
        MemoryStoreError: the database cannot be reached (the message names it without its password).
    """
    from homeagent_core.memory.stores.factory import open_shared_settings

    if config.shared is not None:
        return
    shared = open_shared_settings(config.get("core.memory.store"), tenant=config.get("core.memory.tenant"))
    if shared is not None:
        config.attach_shared(shared)


async def _replay_log_tail(
    context: RelevanceContext, textlog: ConversationLog, *, thread: str = MAIN_THREAD, max_bytes: int | None = None
) -> int:
    """Add to the context the turns the log has but the (debounced) context file missed.

    The log is written before every acknowledgement, the context file at most every few
    seconds: after a crash, the records newer than the context's newest event are appended as
    the events they were (user input, reply), so the next prompt still shows the last turns.
    Returns how many events were added.
    """
    from homeagent_core.memory.context import ContextEvent

    newest = max((e.timestamp for e in context.events if e.kind in ("user", "agent")), default=None)

    def wanted(record: dict[str, Any]) -> bool:
        ts = record.get("timestamp")
        return (
            record.get("role") in ("user", "assistant")
            and record.get("channel", "") not in UNREMEMBERED_CHANNELS
            and record_thread(record) == thread
            and isinstance(ts, int | float)
            and (newest is None or ts > newest)
        )

    bound = {} if max_bytes is None else {"max_bytes": max_bytes}
    records = await run_blocking(
        "memory", functools.partial(textlog.tail, context.max_context_size, accept=wanted, **bound)
    )
    for record in records:
        user = record["role"] == "user"
        person = record.get("person")
        marks = {"visibility": record_visibility(record), **({"person": person} if isinstance(person, str) and person
                                                             else {})}
        await context.append(
            ContextEvent(
                input=str(record.get("content", "")) if user else "",
                response="" if user else str(record.get("content", "")),
                kind="user" if user else "agent",
                source=str(record.get("source", "")),
                channel=str(record.get("channel", "")),
                timestamp=float(record["timestamp"]),
                meta=marks,
            )
        )
    if records:
        log.info("memory: %d recent turn(s) restored to the working context from the conversation log", len(records))
        await context.save_now()
    return len(records)
