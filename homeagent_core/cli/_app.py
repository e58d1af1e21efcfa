"""The root typer app and its entry point."""

from __future__ import annotations

from typing import Annotated

import typer

from homeagent_core.cli import (
    adapters_cmd,
    agents_cmd,
    backup_cmd,
    chat,
    config_cmd,
    doctor,
    install_cmd,
    knowledge_cmd,
    memory_cmd,
    pairing_cmd,
    people_cmd,
    plugins_cmd,
    reminders_cmd,
    serve,
    service_cmd,
    skills_cmd,
    store_cmd,
)
from homeagent_sdk._typer_help import hide_flag_types
from homeagent_sdk._version import __version__

__all__ = ["app", "main"]

hide_flag_types()  # typer's help would print "<bool>" beside every flag

app = typer.Typer(
    name="homeagent",
    no_args_is_help=True,
    help="HomeAgent: a self-hosted personal agent with long-term memory.",
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"homeagent {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """HomeAgent command line."""


app.command("serve")(serve.serve)
app.command("chat")(chat.chat)
app.command("ask")(chat.ask)
app.add_typer(plugins_cmd.app, name="plugins")
app.add_typer(config_cmd.app, name="config")
app.command("doctor")(doctor.doctor)
app.command("install")(install_cmd.install)
app.command("uninstall")(install_cmd.uninstall)
app.add_typer(knowledge_cmd.app, name="knowledge")
app.add_typer(memory_cmd.app, name="memory")
app.add_typer(adapters_cmd.app, name="adapters")
app.add_typer(skills_cmd.app, name="skills")
app.add_typer(pairing_cmd.app, name="pairing")
app.add_typer(people_cmd.app, name="people")
app.add_typer(agents_cmd.app, name="agents")
app.add_typer(store_cmd.app, name="store")
app.add_typer(reminders_cmd.app, name="reminders")
app.add_typer(backup_cmd.app, name="backup")
app.add_typer(service_cmd.app, name="service")


def _add_plugin_commands() -> None:
    """Let installed plugins add sub-commands (``register_commands``)."""
    from homeagent_core.plugins.manager import create_plugin_manager

    host = create_plugin_manager()
    host.register_commands(app)


def main() -> None:
    """Console-script entry point."""
    _add_plugin_commands()
    app()
