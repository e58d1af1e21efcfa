"""HomeAgent as an MCP server (``homeagent mcp serve``): its memory, knowledge and persona.

Tools ``memory_recall``, ``memory_commit``, ``knowledge_search``; resources for every knowledge
entry and the persona; prompts ``recall_about`` and ``remember``. The server announces
HomeAgent's version in its ``initialize`` answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from homeagent_sdk import HomeAgentError

__all__ = ["build_server", "serve_stdio"]

def build_server(memory: Any, persona: Callable[[], str] | None = None) -> Any:
    """An ``MCPServer`` exposing ``memory_recall``, ``memory_commit`` and ``knowledge_search``.

    The tools are the agent's own (same validation, same stores); only their results are
    serialised to JSON text for MCP. It announces HomeAgent's version and also offers
    resources — every knowledge entry (``knowledge://<quoted name>``, read fresh each time) and
    the persona (``homeagent://persona``) — and the prompts ``recall_about(topic)`` and
    ``remember(fact)``.
    """
    from urllib.parse import quote

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError as MCPToolError

    from homeagent_core.knowledge_tools import knowledge_tools
    from homeagent_core.memory.tools import memory_tools
    from homeagent_sdk._version import __version__

    own = {t.name: t for t in memory_tools(memory.graph, memory.social, memory.indexer)}
    own.update({t.name: t for t in knowledge_tools(memory.knowledge)})
    server = MCPServer(
        "homeagent",
        version=__version__,
        instructions="Long-term memory (a knowledge graph) and the knowledge base of a HomeAgent.",
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

    kb = memory.knowledge
    def reader(name: str) -> Callable[[], str]:
        def read() -> str:
            return str(kb.get(name).content)

        return read

    for entry in kb.list():
        read = reader(entry.name)
        server.resource(f"knowledge://{quote(entry.name, safe='')}", name=entry.name,
                        description=f"Knowledge entry {entry.name}", mime_type="text/markdown")(read)

    if persona is not None:
        get_persona = persona

        @server.resource("homeagent://persona", name="persona", description="The agent's persona text.",
                         mime_type="text/markdown")
        def persona_text() -> str:
            return get_persona()

    @server.prompt(description="Recall what the agent's memory holds about a topic, then summarise it.")
    def recall_about(topic: str) -> str:
        return (f"Call memory_recall with query_intent {topic!r} (and knowledge_search with the same words), "
                f"then summarise what is known about {topic}, saying where each fact came from.")

    @server.prompt(description="Store a fact in the agent's long-term memory as triples.")
    def remember(fact: str) -> str:
        return (f"Split this fact into subject/relation/object triples and store them with memory_commit, "
                f"passing the fact itself as sentence_text: {fact}")

    return server


async def serve_stdio(data: Path | None) -> None:
    """Open the memory of a data directory and serve it over stdin/stdout until EOF."""
    from homeagent_core.config import ConfigStore
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_core.memory.system import MemorySystem

    root = prepare_data_dir(data)
    config = ConfigStore(root / "config.db")
    memory = await MemorySystem.open(root, config)

    def persona() -> str:
        path = root / "personal" / "personal.md"
        if path.is_file():
            return path.read_text(encoding="utf-8")
        return str(config.get("core.agent.personal_prompt") or "")

    try:
        await build_server(memory, persona).run_stdio_async()
    finally:
        await memory.aclose()
        config.close()
