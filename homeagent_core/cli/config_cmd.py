"""``homeagent config``: read and change settings in ``<data>/config.db``."""

from __future__ import annotations

from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors

__all__ = ["app"]

app = typer.Typer(help="Read and change settings.", no_args_is_help=True)

KeyArg = Annotated[str, typer.Argument(help="Setting key, e.g. core.agent.max_tool_turns.")]


def _store(data: object):  # type: ignore[no-untyped-def]
    """The config store with every plugin's settings declared."""
    from homeagent_core.app import App

    instance = App(data)  # type: ignore[arg-type]
    instance.declare_settings()
    return instance.config


@app.command("get")
@handle_errors
def get(key: KeyArg, data: DataOption = None) -> None:
    """Print the value of one setting (secrets masked)."""
    config = _store(data)
    if not config.is_known(key):
        config.validate(key, "")  # raises UnknownConfigKey with suggestions
    rows = [r for r in config.describe(key) if r["key"] == key]
    typer.echo("" if not rows or rows[0]["value"] is None else str(rows[0]["value"]))


@app.command("set")
@handle_errors
def set_(key: KeyArg, value: Annotated[str, typer.Argument(help="New value.")], data: DataOption = None) -> None:
    """Validate and store a setting."""
    config = _store(data)
    typed = config.set(key, value)
    definition = config.definition(key)
    shown = "****" if definition is not None and definition.secret else typed
    note = " (restart the daemon for it to take effect)" if definition and definition.restart_required else ""
    typer.echo(f"{key} = {shown}{note}")


@app.command("unset")
@handle_errors
def unset(key: KeyArg, data: DataOption = None) -> None:
    """Forget a stored value so the default applies again."""
    config = _store(data)
    if not config.unset(key):
        raise fail(f"{key} was not set; nothing to do", code=0)
    typer.echo(f"{key} reset to its default")


@app.command("list")
@handle_errors
def list_(
    prefix: Annotated[str, typer.Argument(help="Only keys starting with this.")] = "",
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """List settings with their values and where each comes from (set, env, default)."""
    rows = _store(data).describe(prefix)
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        value = str(row["value"]).replace("\n", " ")
        if len(value) > 60:
            value = value[:57] + "..."
        typer.echo(f"{row['key']:<52} {value:<40} [{row['source']}]")
