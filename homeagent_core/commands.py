"""Options and error handling shared by every ``homeagent`` command: the CLI's own and those
plugins add through ``register_commands`` (the ``mcp`` built-in's ``homeagent mcp ...``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from homeagent_core.i18n import cli_language, t
from homeagent_sdk.errors import HomeAgentError

__all__ = ["DataOption", "JsonOption", "echo_json", "fail", "handle_errors"]

F = TypeVar("F", bound=Callable[..., Any])

DataOption = Annotated[
    Path | None,
    typer.Option(
        "--data",
        "-d",
        help="Data directory (default: $HOMEAGENT_HOME, else the running daemon's, else ~/.homeagent).",
        envvar="HOMEAGENT_HOME",
        show_default=False,
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def fail(message: str, code: int = 1, *, language: str | None = None) -> typer.Exit:
    """Print ``Error: message`` to stderr in ``language`` (default: :func:`homeagent_core.i18n.cli_language`)."""
    typer.secho(t(language or cli_language(), "cli.error", message=message), fg=typer.colors.RED, err=True)
    return typer.Exit(code)


def handle_errors(fn: F) -> F:
    """Turn HomeAgentError into a clean one-line error and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except HomeAgentError as exc:
            raise fail(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))
