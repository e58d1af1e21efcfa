"""``homeagent agents``: list, message, stop and destroy the running daemon's resident sub-agents.

Thin client of the daemon's ``cli`` socket (the ``/agents`` command): it needs a running
``homeagent serve``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, fail
from homeagent_core.cli.chat import (
    EXIT_ERROR,
    EXIT_UNREACHABLE,
    AgentError,
    CliClient,
    DaemonUnreachable,
    KeyOption,
    SocketOption,
    _socket_path,
)

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Resident sub-agents of the running daemon.")

NameArg = Annotated[str, typer.Argument(help="The resident's name (see `homeagent agents list`).")]


def _command(line: str, data: DataOption, sock: SocketOption, api_key: str) -> None:
    try:
        with CliClient(_socket_path(data, sock), api_key=api_key, timeout=30.0) as client:
            for event in client.send(line):
                if event.get("type") == "response":
                    typer.echo(event.get("content", ""))
    except DaemonUnreachable as exc:
        raise fail(str(exc), EXIT_UNREACHABLE) from None
    except AgentError as exc:
        raise fail(str(exc), EXIT_ERROR) from None


@app.command("list")
def list_agents(data: DataOption = None, sock: SocketOption = None, api_key: KeyOption = "") -> None:
    """Residents (status, queue, what they do, last output) and spawn_child sub-agents."""
    _command("/agents list", data, sock, api_key)


@app.command("send")
def send(
    name: NameArg,
    text: Annotated[str, typer.Argument(help="What the resident should do.")],
    data: DataOption = None,
    sock: SocketOption = None,
    api_key: KeyOption = "",
) -> None:
    """Queue a message for a resident; it reports the result to the main agent."""
    if not text.strip() or "\n" in text:
        raise fail("the message must be one non-empty line")
    _command(f"/agents send {name} {text.strip()}", data, sock, api_key)


@app.command("stop")
def stop(name: NameArg, data: DataOption = None, sock: SocketOption = None, api_key: KeyOption = "") -> None:
    """Cancel a resident's work in progress and drop its queued messages (it stays defined)."""
    _command(f"/agents stop {name}", data, sock, api_key)


@app.command("destroy")
def destroy(
    name: NameArg,
    drop: Annotated[
        bool, typer.Option("--drop", help="Drop its unfinished messages instead of handing them to the main agent.")
    ] = False,
    data: DataOption = None,
    sock: SocketOption = None,
    api_key: KeyOption = "",
) -> None:
    """Remove a resident; unfinished messages go to the main agent (or are dropped with --drop)."""
    _command(f"/agents destroy {name} {'drop' if drop else 'keep'}", data, sock, api_key)
