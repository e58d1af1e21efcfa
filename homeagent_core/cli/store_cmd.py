"""``homeagent store``: move the memory stores between the data directory and PostgreSQL."""

from __future__ import annotations

from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

__all__ = ["app"]

app = typer.Typer(help="Move memory stores between SQLite and PostgreSQL.", no_args_is_help=True)


@app.command("migrate")
@handle_errors
def migrate(
    to: Annotated[str, typer.Option("--to", help="Target: a postgresql://user:password@host/db URL, or sqlite.")],
    source: Annotated[
        str, typer.Option("--from", help="Source: sqlite (the data directory's file) or a postgresql:// URL.")
    ] = "sqlite",
    tenant: Annotated[
        str | None,
        typer.Option(help="Tenant on the PostgreSQL side (default: core.memory.tenant).", show_default=False),
    ] = None,
    batch: Annotated[int, typer.Option(help="Documents per transaction.", min=1)] = 1000,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Copy documents, graph, log, media, knowledge and shared settings, verified; rerun to resume.

    Stop the daemons first. Documents, graph rows, log records, media blocks, knowledge entries and
    shared settings the target already holds (same id, digest, name or key) are skipped, so an interrupted copy
    continues where it stopped. A data directory without a graph.db or media copies what it has.
    Counts and checksums of both sides are compared at the end. Afterwards set core.memory.store
    to the target.
    """
    from homeagent_core.config import ConfigStore
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_core.memory.stores.postgresql.database import redact_url
    from homeagent_core.memory.stores.postgresql.migrate import migrate_documents
    from homeagent_core.memory.stores.postgresql.migrate_graph import migrate_graph
    from homeagent_core.memory.stores.postgresql.migrate_knowledge import migrate_knowledge
    from homeagent_core.memory.stores.postgresql.migrate_media import migrate_media
    from homeagent_core.memory.stores.postgresql.migrate_settings import migrate_settings
    from homeagent_core.memory.stores.postgresql.migrate_textlog import migrate_textlog

    root = prepare_data_dir(data)
    if tenant is None:
        config = ConfigStore(root / "config.db")
        try:
            tenant = str(config.get("core.memory.tenant"))
        finally:
            config.close()
    report = migrate_documents(source, to, data_dir=root, tenant=tenant, batch=batch)
    graph = None
    if source.strip() not in ("", "sqlite") or (root / "memory" / "graph.db").exists():
        graph = migrate_graph(source, to, data_dir=root, tenant=tenant, batch=batch)
    textlog = migrate_textlog(source, to, data_dir=root, tenant=tenant, batch=batch)
    media = None
    if source.strip() not in ("", "sqlite") or (root / "memory" / "media" / "media.db").exists():
        media = migrate_media(source, to, data_dir=root, tenant=tenant, batch=batch)
    settings = migrate_settings(source, to, data_dir=root, tenant=tenant)
    knowledge = migrate_knowledge(source, to, data_dir=root, tenant=tenant)
    if as_json:
        echo_json({**report.to_dict(), "graph": graph.to_dict() if graph else None, "log": textlog.to_dict(),
                   "media": media.to_dict() if media else None, "settings": settings.to_dict(),
                   "knowledge": knowledge.to_dict()})
        return
    typer.echo(
        f"copied {report.copied} documents from {redact_url(source)} to {redact_url(to)} "
        f"({report.skipped} already there); verified: {report.target_count} documents, "
        f"sha256 {report.source_checksum[:16]} on both sides ({report.seconds:.1f} s)"
    )
    typer.echo(
        f"copied {textlog.copied} conversation log records ({textlog.skipped} already there); verified: "
        f"{textlog.target_count} records, sha256 {textlog.source_checksum[:16]} on both sides ({textlog.seconds:.1f} s)"
    )
    typer.echo(
        f"copied {knowledge.copied} knowledge entries ({knowledge.skipped} already there); verified: "
        f"{knowledge.target_count} entries, sha256 {knowledge.source_checksum[:16]} on both sides"
    )
    typer.echo(
        f"copied {settings.copied} shared settings ({settings.skipped} already there); verified: "
        f"{settings.target_count} settings on both sides"
    )
    if media is not None:
        typer.echo(
            f"copied {media.copied} media blocks with their bytes ({media.skipped} already there); verified: "
            f"{media.target_count} blocks, sha256 {media.source_checksum[:16]} on both sides ({media.seconds:.1f} s)"
        )
    if graph is None:
        typer.echo("no graph.db in the data directory: no graph to copy")
        return
    typer.echo(
        f"copied the graph: {graph.copied['entities']} entities, {graph.copied['relations']} relations "
        f"({sum(graph.copied.values())} rows in all); verified: {graph.target_counts['entities']} entities, "
        f"{graph.target_counts['relations']} relations, sha256 {graph.source_checksum[:16]} on both sides "
        f"({graph.seconds:.1f} s)"
    )
