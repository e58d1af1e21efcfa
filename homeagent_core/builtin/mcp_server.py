"""HomeAgent as an MCP server (``homeagent mcp serve``, stdio): its memory, knowledge and persona.

Other MCP clients (an IDE, a desktop assistant) get this agent's long-term memory:

- tools ``memory_recall``, ``memory_commit``, ``knowledge_search`` — the agent's own tools (same
  validation, same stores), their results serialised to JSON text;
- resources: every knowledge entry as ``knowledge://<category>/<leaf>`` (Markdown, read live
  from the knowledge base) and the persona as ``persona://current``;
- prompts: ``recall_about`` (what the agent remembers about a topic, with the recalled facts),
  ``remember`` (store a fact as triples) and ``knowledge_answer`` (answer a question from the
  knowledge base, citing entries).

The server announces the package version (``homeagent_sdk.__version__``) in ``initialize``.
The ``mcp`` SDK is imported only when the server is built.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, unquote

from homeagent_sdk import HomeAgentError
from homeagent_sdk._version import __version__

if TYPE_CHECKING:
    from homeagent_core.memory.knowledge.base import KnowledgeBase
    from homeagent_sdk.types import ToolDef

__all__ = ["KNOWLEDGE_SCHEME", "PERSONA_URI", "build_server", "knowledge_uri", "serve_stdio"]

KNOWLEDGE_SCHEME = "knowledge://"
PERSONA_URI = "persona://current"
_MAX_LISTED = 1000
"""Most knowledge entries listed by ``resources/list`` (the rest stay readable by URI)."""


class MemoryTools(Protocol):
    """What the server needs of an open memory."""

    @property
    def knowledge(self) -> KnowledgeBase: ...

    def tool_defs(self) -> list[ToolDef]: ...


def knowledge_uri(name: str) -> str:
    """``knowledge://<category>/<leaf>`` for a knowledge entry name (non-ASCII percent-encoded)."""
    return KNOWLEDGE_SCHEME + quote(name, safe="/")


def build_server(memory: MemoryTools, persona: Callable[[], str] | None = None) -> Any:
    """An ``MCPServer`` exposing memory tools, knowledge/persona resources and prompts.

    Args:
        memory: an open memory (``App.open_memory()``): its tools and its knowledge base.
        persona: returns the persona text, read at each ``resources/read``; None: no persona resource.
    """
    from mcp import MCPError
    from mcp.server.lowlevel.helper_types import ReadResourceContents
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError
    from mcp.server.mcpserver.exceptions import ToolError as MCPToolError
    from mcp.types import INVALID_PARAMS, Resource

    own = {t.name: t for t in memory.tool_defs()}
    knowledge = memory.knowledge

    class HomeAgentServer(MCPServer):
        """Lists and reads knowledge and persona resources live, besides any registered ones.

        ``prompts/get`` for an unknown prompt or without a required argument is answered
        ``-32602`` (invalid params) with a message naming what is wrong; the SDK's own answer
        is code 0 and a logged traceback.
        """

        async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None, context: Any = None) -> Any:
            known = {p.name: p for p in await self.list_prompts()}
            prompt = known.get(name)
            if prompt is None:
                raise MCPError(INVALID_PARAMS, f"unknown prompt {name!r}; known: {', '.join(sorted(known))}")
            given = arguments or {}
            missing = [a.name for a in prompt.arguments or [] if a.required and given.get(a.name) is None]
            if missing:
                which, them = ("arguments", "them") if len(missing) > 1 else ("argument", "it")
                raise MCPError(
                    INVALID_PARAMS, f"prompt {name!r} needs the {which} {', '.join(missing)}; pass {them} in arguments"
                )
            return await super().get_prompt(name, arguments, context)

        async def list_resources(self) -> list[Any]:
            listed = []
            if persona is not None:
                listed.append(
                    Resource(
                        uri=PERSONA_URI,
                        name="persona",
                        title="The agent's persona",
                        description="Who the agent is and how it speaks.",
                        mime_type="text/markdown",
                    )
                )
            for entry in knowledge.list()[:_MAX_LISTED]:
                first = entry.content.strip().splitlines()[0][:160] if entry.content.strip() else ""
                listed.append(
                    Resource(
                        uri=knowledge_uri(entry.name),
                        name=entry.name,
                        description=first or None,
                        mime_type="text/markdown",
                        size=len(entry.content.encode("utf-8")),
                    )
                )
            return listed + list(await super().list_resources())

        async def read_resource(self, uri: Any, context: Any = None) -> Any:
            text = str(uri)
            if text == PERSONA_URI and persona is not None:
                return [ReadResourceContents(content=persona(), mime_type="text/markdown")]
            if text.startswith(KNOWLEDGE_SCHEME):
                name = unquote(text[len(KNOWLEDGE_SCHEME) :])
                try:
                    entry = knowledge.get(name)
                except HomeAgentError as exc:
                    raise ResourceNotFoundError(f"no knowledge entry {name!r}: {exc}") from None
                return [ReadResourceContents(content=entry.content, mime_type="text/markdown")]
            return await super().read_resource(uri, context)

    server = HomeAgentServer(
        "homeagent",
        version=__version__,
        instructions="Long-term memory (a knowledge graph), the knowledge base and the persona of a HomeAgent.",
    )

    async def run(name: str, **arguments: Any) -> str:
        handler = own[name].handler
        assert handler is not None
        try:
            value = await handler(**arguments)
        except HomeAgentError as exc:
            raise MCPToolError(str(exc)) from None
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)

    @server.tool(description=own["memory_recall"].description)
    async def memory_recall(query_intent: str, depth: int = 2) -> str:
        return await run("memory_recall", query_intent=query_intent, depth=depth)

    @server.tool(description=own["memory_commit"].description)
    async def memory_commit(triples: list[dict[str, Any]], sentence_text: str = "") -> str:
        return await run("memory_commit", triples=triples, sentence_text=sentence_text)

    @server.tool(description=own["knowledge_search"].description)
    async def knowledge_search(query: str, top_k: int = 5, category: str = "") -> str:
        return await run("knowledge_search", query=query, top_k=top_k, category=category)

    @server.prompt(
        title="What do you remember about …?",
        description="Recall what the agent's memory holds about a topic, then summarise it.",
    )
    async def recall_about(topic: str) -> str:
        try:
            facts = await run("memory_recall", query_intent=topic, depth=2)
        except MCPToolError as exc:
            facts = f"(nothing recalled: {exc})"
        return (
            f"What do you remember about {topic}? Answer from the remembered facts below (call "
            f"memory_recall or knowledge_search for more), say where each fact came from and say "
            f"plainly what is not known.\n\nRemembered facts (memory_recall):\n{facts}"
        )

    @server.prompt(description="Store a fact in the agent's long-term memory as triples.")
    def remember(fact: str) -> str:
        return (
            "Split this fact into subject/relation/object triples and store them with memory_commit, "
            f"passing the fact itself as sentence_text: {fact}"
        )

    @server.prompt(
        title="Answer from the knowledge base",
        description="Answer a question from the agent's knowledge base, citing the entries used.",
    )
    async def knowledge_answer(question: str) -> str:
        try:
            found = await run("knowledge_search", query=question, top_k=5, category="")
        except MCPToolError as exc:
            found = f"(the knowledge base could not be searched: {exc})"
        return (
            f"{question}\n\nAnswer from these knowledge base entries and cite each one you use as "
            f"knowledge://<name>; if they do not answer the question, say so.\n\n{found}"
        )

    return server


async def serve_stdio(data: Path | None) -> None:
    """Open the memory of a data directory and serve it over stdin/stdout until EOF."""
    from homeagent_core.app import App

    app = App(data, load_entrypoints=False, builtins=(), local_plugins=False)
    root, config = app.data_dir, app.config

    def persona() -> str:
        """``<data>/personal/personal.md`` when it has text, else ``core.agent.personal_prompt``."""
        path = root / "personal" / "personal.md"
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            text = ""
        return text if text.strip() else str(config.get("core.agent.personal_prompt") or "")

    try:
        memory = await app.open_memory()
        await build_server(memory, persona).run_stdio_async()
    finally:
        await app.stop()
