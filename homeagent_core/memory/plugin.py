"""The ``memory`` core plugin: the memory tools and the heartbeats, over the memory the app opened.

The app opens :class:`~homeagent_core.memory.system.MemorySystem` and hands it to the kernel as
its ``TurnMemory`` (the points of a turn where memory is written or read); everything else
memory contributes goes through this plugin, registered like any other:

* ``register_tools``: the ``memory_*`` / ``person_*`` graph tools and ``doc_query`` /
  ``doc_commit`` / ``memory_document_query``, typed methods whose schemas come from their
  signatures. They are bound to the stores in ``startup``.
* ``startup(sdk)``: binds the tools, tells memory how tools are remembered, gives resident
  sub-agents scratch graphs, starts the heartbeats (distill, rules, archive, merge, review,
  analytics; the model is asked through ``sdk.llm``) and the background re-embedding.
* ``shutdown``: stops the heartbeats (memory itself is closed by the app afterwards).

The app registers it (and the ``knowledge`` plugin) whenever memory is on, whatever the list
of built-ins says; ``HOMEAGENT_DISABLE_PLUGINS=memory`` (or ``homeagent plugins disable
memory``) runs the agent without memory: no memory tools, no heartbeats, the kernel's own
short timeline.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from homeagent_core.memory.documents.tools import DOCUMENT_TOOLS, DocBinding, DocumentTools
from homeagent_core.memory.tools import GRAPH_TOOLS, GraphBinding, GraphTools
from homeagent_sdk import ToolRegistryProtocol, hookimpl
from homeagent_sdk.errors import ToolError, UsageError
from homeagent_sdk.types import Triple

if TYPE_CHECKING:
    from homeagent_core.memory.heartbeat import Heartbeat
    from homeagent_core.memory.scratch import ScratchMemory
    from homeagent_core.memory.system import MemoryHost, MemorySystem
    from homeagent_sdk.api import LLMAPI
    from homeagent_sdk.types import Doc

__all__ = ["ANALYTICS_INTERVAL_S", "PLUGIN_NAME", "RULE_DISTILL_INTERVAL_S", "MemoryPlugin", "make_plugin"]

log = logging.getLogger(__name__)

PLUGIN_NAME = "memory"
RULE_DISTILL_INTERVAL_S = 600.0
ANALYTICS_INTERVAL_S = 600.0
"""How often entity salience is recomputed (and once at start-up), in a worker thread."""


class MemoryServices(Protocol):
    """The privileged services the memory plugin uses (``sdk.services``)."""

    @property
    def memory_system(self) -> MemorySystem | None: ...

    @property
    def kernel(self) -> MemoryHost | None: ...


class Settings(Protocol):
    def get(self, key: str, default: Any = None) -> Any: ...


class MemorySDK(Protocol):
    """What the memory plugin uses of its scoped SDK (memory never imports the kernel's types)."""

    @property
    def llm(self) -> LLMAPI: ...

    @property
    def config(self) -> Settings | None: ...

    @property
    def services(self) -> MemoryServices | None: ...


class MemoryPlugin:
    """The plugin object; one per agent."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.system: MemorySystem | None = None
        self.heartbeats: list[Heartbeat] = []
        self.graph_tools = GraphTools(self._graph_binding)
        self.document_tools = DocumentTools(self._doc_binding)
        self._graph: GraphBinding | None = None

    def _memory(self) -> MemorySystem:
        if self.system is None:
            raise ToolError("memory is not open yet (the memory plugin has not started)")
        return self.system

    def _graph_binding(self) -> GraphBinding:
        self._memory()
        assert self._graph is not None
        return self._graph

    def _doc_binding(self) -> DocBinding:
        system = self._memory()
        return system.documents, system.context

    # ------------------------------------------------------------------ hooks

    @hookimpl(trylast=True)
    def register_tools(self, registry: ToolRegistryProtocol) -> None:
        for name, options in GRAPH_TOOLS:
            registry.add(getattr(self.graph_tools, name), **options)
        for name, options in DOCUMENT_TOOLS:
            registry.add(getattr(self.document_tools, name), **options)

    @hookimpl(tryfirst=True)
    def startup(self, sdk: MemorySDK) -> None:
        """Bind the tools, equip residents, start the heartbeats and the re-embedding."""
        services = sdk.services
        system = services.memory_system if services is not None else None
        kernel = services.kernel if services is not None else None
        if system is None or kernel is None or sdk.config is None:
            raise UsageError("the memory plugin runs only inside an agent whose app opened memory")
        self.system = system
        self._graph = system.graph_binding()
        system.tool_lookup = kernel.tools  # tool definitions decide how their outputs are remembered
        self._equip_residents(kernel, system)
        self.heartbeats = _heartbeats(system, sdk, kernel)
        for heartbeat in self.heartbeats:
            heartbeat.start()
        system.start_reembedding()

    @hookimpl(trylast=True)
    async def shutdown(self) -> None:
        for heartbeat in self.heartbeats:
            await heartbeat.stop()
        self.heartbeats = []

    # ------------------------------------------------------------------ residents

    @staticmethod
    def _equip_residents(kernel: MemoryHost, system: MemorySystem) -> None:
        """Residents get scratch graphs (same embedding space); ``reclaim`` commits into the main graph."""
        from homeagent_core.memory.scratch import ScratchMemory

        embedder = system.tiers.provider

        def scratch(folder: Path) -> ScratchMemory:
            return ScratchMemory(folder / "graph.db", embedder=embedder)

        async def reclaim(triples: list[Triple]) -> int:
            # a resident runs with its creator's rights: what it reclaims is its creator's
            from homeagent_core.memory.graph.privacy import graph_marks

            person, visibility = graph_marks(system.current_principal(), system.owner_name)
            result = await system.graph.acommit(triples, "resident", person=person, visibility=visibility)
            return result.added + result.refreshed

        kernel.residents.use_memory(scratch, reclaim)


def _heartbeats(system: MemorySystem, sdk: MemorySDK, kernel: MemoryHost) -> list[Heartbeat]:
    """The consolidation heartbeats (not started); intervals from ``core.agent.*_interval``."""
    from homeagent_core.memory.heartbeat import LEDGER_NAME, ArchiveJob, Heartbeat, HeartbeatLedger, MergeJob, ReviewJob

    async def ask_llm(prompt: str) -> str:
        response = await sdk.llm.chat([{"role": "user", "content": prompt}], max_tokens=2048, temperature=0.2)
        return str(response.get("content", ""))

    async def submit_self_input(text: str) -> None:
        await kernel.submit_self_input(text)

    async def distill_context() -> int:
        pruned = await system.context.prune("")
        return len(pruned)

    async def refresh_analytics() -> Any:
        return await asyncio.to_thread(system.graph.analytics.refresh)

    assert sdk.config is not None
    get = sdk.config.get
    ledger = HeartbeatLedger(system.data_dir / "memory" / LEDGER_NAME)  # what `homeagent doctor` reads
    return [
        Heartbeat("distill", get("core.agent.distill_interval"), distill_context, ledger=ledger),
        Heartbeat("rules", RULE_DISTILL_INTERVAL_S, system.distiller.adistill_once, ledger=ledger),
        Heartbeat(
            "archive",
            get("core.agent.archive_interval"),
            ArchiveJob(system.graph, _ColdDocs(system), ask_llm),
            ledger=ledger,
        ),
        Heartbeat("merge", get("core.agent.merge_interval"), MergeJob(system.graph, submit_self_input), ledger=ledger),
        Heartbeat("review", get("core.agent.review_interval"), ReviewJob(system.graph, ask_llm), ledger=ledger),
        Heartbeat("analytics", ANALYTICS_INTERVAL_S, refresh_analytics, run_at_start=True, ledger=ledger),
    ]


@dataclass
class _ColdDocs:
    """The document store as the archive heartbeat sees it."""

    memory: MemorySystem

    async def cold_documents(self, older_than_s: float, max_reads: int, limit: int) -> list[Doc]:
        docs = await asyncio.to_thread(
            self.memory.documents.find_cold, older_than=older_than_s, max_reads=max_reads, limit=limit
        )
        return [d.to_doc() for d in docs]

    async def remove_document(self, doc_id: str) -> None:
        await asyncio.to_thread(self.memory.documents.delete, [doc_id])

    async def defer_document(self, doc_id: str) -> None:
        await asyncio.to_thread(self.memory.documents.touch, [doc_id])


def make_plugin() -> MemoryPlugin:
    return MemoryPlugin()
