"""``homeagent knowledge``: the knowledge base under ``<data>/knowledge`` (or on the shared PostgreSQL store)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors

__all__ = ["app"]

app = typer.Typer(help="Manage the knowledge base.", no_args_is_help=True)


def _kb(data: Path | None):  # type: ignore[no-untyped-def]
    """The knowledge base: ``<data>/knowledge``, or the tenant's on a shared PostgreSQL store."""
    from homeagent_core.config import ConfigStore
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_core.memory.knowledge.base import KnowledgeBase
    from homeagent_core.memory.stores.factory import open_knowledge_storage

    root = prepare_data_dir(data)
    config = ConfigStore(root / "config.db")
    try:
        store, tenant = str(config.get("core.memory.store")), str(config.get("core.memory.tenant"))
    finally:
        config.close()
    from homeagent_core.agent.people import household_owner

    return KnowledgeBase(
        root / "knowledge", storage=open_knowledge_storage(store, tenant=tenant), owner=household_owner(root)
    )


@app.command("add")
@handle_errors
def add(
    name: Annotated[str, typer.Argument(help="Entry name; '/' separates categories, e.g. 家电/空调/说明书.")],
    file: Annotated[Path | None, typer.Option("--file", "-f", help="Read the content from this file.")] = None,
    text: Annotated[str | None, typer.Option("--text", "-t", help="The content itself.")] = None,
    data: DataOption = None,
) -> None:
    """Add or replace an entry (content from --text, --file, or standard input)."""
    if text is None and file is None:
        import sys

        if sys.stdin.isatty():
            raise fail("give the content with --text, --file, or on standard input")
        text = sys.stdin.read()
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise fail(f"cannot read {file}: {exc}") from None
    entry = _kb(data).create_sync(name, text or "")
    typer.echo(f"saved {entry.name}")


@app.command("search")
@handle_errors
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    limit: Annotated[int, typer.Option(help="Results to show.", min=1, max=100)] = 5,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Search every person's entries as the owner (dense + lexical fusion)."""
    from homeagent_sdk.visibility import EVERYONE

    hits = _kb(data).search_sync(query, limit, audience=EVERYONE)
    if as_json:
        echo_json([{**h.entry.to_dict(), "score": h.score} for h in hits])
        return
    if not hits:
        typer.echo("no matches")
    for hit in hits:
        preview = hit.entry.content.strip().replace("\n", " ")[:80]
        typer.echo(f"{hit.score:.3f}  {hit.entry.name}  {preview}")


@app.command("list")
@handle_errors
def list_(
    category: Annotated[str, typer.Argument(help="Only this category.")] = "",
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """List entries."""
    entries = _kb(data).list(category)
    if as_json:
        echo_json([{"name": e.name, "category": e.category, "updated_at": e.updated_at} for e in entries])
        return
    for entry in entries:
        typer.echo(entry.name)


@app.command("rm")
@handle_errors
def rm(name: Annotated[str, typer.Argument(help="Full name or a unique leaf name.")], data: DataOption = None) -> None:
    """Delete an entry (empty categories are cleaned up)."""
    removed = _kb(data).delete(name)
    typer.echo(f"deleted {removed}")
