"""``homeagent adapters``: the Lua LLM adapters this data dir can use."""

from __future__ import annotations

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

__all__ = ["app"]

app = typer.Typer(help="Inspect LLM adapters.", no_args_is_help=True)


@app.command("list")
@handle_errors
def list_adapters(data: DataOption = None, as_json: JsonOption = False) -> None:
    """List adapters: bundled, deployed, user-edited and user-written, and whether each compiles."""
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_core.providers import deploy_bundled_adapters, list_adapters

    root = prepare_data_dir(data)
    deploy_bundled_adapters(root)
    rows = list_adapters(root)
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        status = "ok" if row["status"] == "ok" else f"error: {row['error']}"
        typer.echo(f"{row['name']:<12} {row.get('version') or '-':<8} {row['origin']:<9} {status}  {row['path']}")
