"""``homeagent memory``: look into what the agent remembers (graph, documents, conversation log).

Run it while the daemon is stopped, or accept that writes the daemon makes meanwhile show up
only in the SQLite files (its in-memory indexes are its own). ``share``/``unshare`` go through a
running daemon (its ``cli`` socket) so its indexes change at once, and work on the data
directory directly when none runs. The commands open memory as the household's owner (from
the person registry): ``docs`` shows every document with whom it came from and who may see it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

__all__ = ["app"]

app = typer.Typer(help="Inspect memory: graph recall, documents, the conversation log.", no_args_is_help=True)

T = TypeVar("T")


def _with_memory(data: Path | None, work: Callable[[Any], Awaitable[T]]) -> T:
    """Open the data dir's memory layers, run ``work(memory)``, close them."""
    import logging

    from homeagent_core.agent.people import household_owner
    from homeagent_core.config import ConfigStore
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_core.memory.system import MemorySystem

    root = prepare_data_dir(data)
    logging.getLogger("homeagent_core.embeddings").setLevel(logging.ERROR)
    owner = household_owner(root)

    async def run() -> T:
        config = ConfigStore(root / "config.db")
        memory = await MemorySystem.open(root, config, owner=owner)
        try:
            return await work(memory)
        finally:
            await memory.aclose()
            config.close()

    return asyncio.run(run())


@app.command("recall")
@handle_errors
def recall(
    keywords: Annotated[list[str], typer.Argument(help="Entity names or words, e.g. 小王 杭州.")],
    depth: Annotated[int, typer.Option(help="Graph hops from the seeds.", min=1, max=4)] = 2,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """What the graph knows around some entities."""

    async def work(memory: Any) -> dict[str, Any]:
        result = await memory.graph.arecall(keywords, depth=depth)
        return result.to_dict()  # type: ignore[no-any-return]

    result = _with_memory(data, work)
    if as_json:
        echo_json(result)
        return
    if not result["entities"]:
        typer.echo("nothing remembered about that")
        return
    typer.echo("entities: " + ", ".join(e["name"] for e in result["entities"]))
    for rel in result["relations"]:
        typer.echo(f"  {rel['source']} —{rel['type']}→ {rel['target']}")


@app.command("docs")
@handle_errors
def docs(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    limit: Annotated[int, typer.Option(help="Results.", min=1, max=100)] = 5,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search the document store as the owner, over every person's documents (read only:
    nothing is consumed). Each line shows the id, whose it is and who may see it."""
    from homeagent_sdk.visibility import EVERYONE

    async def work(memory: Any) -> list[dict[str, Any]]:
        hits = await memory.documents.query(query, limit, audience=EVERYONE, touch=False)
        return [{**h.document.to_dict(), "score": round(h.score, 4)} for h in hits]

    rows = _with_memory(data, work)
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        typer.echo(f"{row['score']:.3f}  {row['id']}  {row['person']} ({row['visibility']})  {row['content'][:80]}")


def _set_visibility(ids: list[str], verb: str, data: Path | None, as_json: bool) -> None:
    from homeagent_core.cli._common import fail
    from homeagent_core.cli._daemon import daemon_command
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_sdk.visibility import HOUSEHOLD, PRIVATE

    answer = daemon_command(prepare_data_dir(data), f"/memory {verb} " + " ".join(ids), timeout=60.0)
    if answer is not None:
        found: dict[str, list[str]] = json.loads(answer)
    else:

        async def work(memory: Any) -> dict[str, list[str]]:
            return await memory.set_visibility(ids, HOUSEHOLD if verb == "share" else PRIVATE)  # type: ignore[no-any-return]

        found = _with_memory(data, work)
    if as_json:
        echo_json(found)
    else:
        shown = "household" if verb == "share" else "private to its person"
        for doc_id in found["documents"]:
            typer.echo(f"document {doc_id}: {shown}")
        for name in found["knowledge"]:
            typer.echo(f"knowledge {name}: {shown}")
    if found["unknown"]:
        raise fail(
            "no document or knowledge entry named " + ", ".join(found["unknown"])
            + "; `homeagent memory docs QUERY` and `homeagent knowledge list` show the ids"
        )


@app.command("share")
@handle_errors
def share(
    ids: Annotated[list[str], typer.Argument(help="Document ids (doc_…) or knowledge entry names.")],
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make documents or knowledge entries visible to the whole household (the owner's decision)."""
    _set_visibility(ids, "share", data, as_json)


@app.command("unshare")
@handle_errors
def unshare(
    ids: Annotated[list[str], typer.Argument(help="Document ids (doc_…) or knowledge entry names.")],
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make documents or knowledge entries private to the person they came from again."""
    _set_visibility(ids, "unshare", data, as_json)


@app.command("stats")
@handle_errors
def stats(data: DataOption = None, as_json: JsonOption = False) -> None:
    """Counts per memory layer and the embedding tier in use."""

    async def work(memory: Any) -> dict[str, Any]:
        return memory.status()  # type: ignore[no-any-return]

    status = _with_memory(data, work)
    if as_json:
        echo_json(status)
        return
    graph = status["graph"]
    typer.echo(f"embedding tier: {status['active_tier']}")
    typer.echo(f"graph: {graph.get('entities', 0)} entities, {graph.get('relations', 0)} relations")
    typer.echo(f"documents: {status['documents']}   context events: {status['context_events']}")
    typer.echo(f"knowledge entries: {status['knowledge_entries']}   media blobs: {status['media_blobs']}")


@app.command("export")
@handle_errors
def export(
    since: Annotated[float | None, typer.Option(help="Only records after this Unix time.")] = None,
    data: DataOption = None,
) -> None:
    """Print the conversation log as JSON lines (the durable record of every message)."""
    from homeagent_core.config import ConfigStore
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_core.memory.stores.factory import open_conversation_log

    root = prepare_data_dir(data)
    config = ConfigStore(root / "config.db")
    try:
        store, tenant = str(config.get("core.memory.store")), str(config.get("core.memory.tenant"))
    finally:
        config.close()
    log = open_conversation_log(store, root / "memory", tenant=tenant)
    try:
        for record in log.iter_records(since=since):
            typer.echo(json.dumps(record, ensure_ascii=False))
    finally:
        log.close()
