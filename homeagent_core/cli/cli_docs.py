"""The command-line reference (``docs/CLI.md``), rendered from the commands' own ``--help``.

Every ``homeagent`` command and sub-command, including those the built-in plugins add through
``register_commands`` (``homeagent mcp ...``), and every ``hmapdev`` command is run with
``--help`` in-process (:class:`typer.testing.CliRunner`) and its output pasted into the page.
Installed third-party plugins and the operator's ``HOMEAGENT_*_PLUGINS`` switches never
change the reference: the commands are collected on a copy of the root app from a plugin host
holding only the built-ins.

The help is rendered by typer's rich formatter at a fixed width, without colour, whatever
the terminal or the environment says (typer reads ``TERMINAL_WIDTH`` and ``FORCE_COLOR`` once
at import, so those settings are pinned while rendering), and trailing spaces are stripped,
so the page is the same on every machine.

Regenerate the file with ``python -m homeagent_core.cli.cli_docs > docs/CLI.md``; a test
fails when the committed file and the rendered text differ.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import typer
from typer.testing import CliRunner

from homeagent_core.cli.reference_pages import builtins_host, print_page, refuse_failed
from homeagent_sdk.errors import UsageError

__all__ = [
    "WIDTH",
    "CommandDoc",
    "documented_apps",
    "help_text",
    "iter_commands",
    "main",
    "render_cli_reference",
]

REGENERATE = "python -m homeagent_core.cli.cli_docs > docs/CLI.md"

#: Terminal width the help is rendered at.
WIDTH = 100

#: Environment of every ``--help`` run: fixed width, no colour (``None`` removes a variable).
_ENV: dict[str, str | None] = {
    "COLUMNS": str(WIDTH),
    "LINES": "40",
    "TERMINAL_WIDTH": str(WIDTH),
    "NO_COLOR": "1",
    "FORCE_COLOR": None,
    "PY_COLORS": None,
    "TTY_COMPATIBLE": None,
    "TTY_INTERACTIVE": None,
}

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

_TITLE = """\
# Command-line reference

<!-- Generated from the commands' --help; do not edit by hand.
     Regenerate: {regenerate} -->

HomeAgent installs two commands: `homeagent` runs and manages an agent, `hmapdev` builds and
packages plugins. This page is the `--help` of every command and sub-command, including those
the built-in plugins add (`homeagent mcp`). Installed plugins can add more; `homeagent --help`
lists them. Every command that takes `--data DIR` falls back to `$HOMEAGENT_HOME`, then the
data directory of the daemon running now (`homeagent serve` notes it), then `~/.homeagent`.
"""


@dataclass(frozen=True, slots=True)
class CommandDoc:
    """One command of the reference: its program, its path below it and whether it is a group."""

    program: str
    path: tuple[str, ...]
    is_group: bool

    @property
    def title(self) -> str:
        return " ".join((self.program, *self.path))

    @property
    def anchor(self) -> str:
        """The GitHub heading anchor of :attr:`title`."""
        return re.sub(r"[^a-z0-9_ -]", "", self.title.lower()).replace(" ", "-")


# ---------------------------------------------------------------------------- collecting


def _homeagent_app() -> typer.Typer:
    """A copy of the root app with the built-in plugins' sub-commands added.

    The copy keeps the importable ``homeagent_core.cli.app`` untouched, so rendering twice
    (or in a process that also runs the CLI) never registers a plugin's commands twice.

    Raises:
        PluginLoadError: a built-in failed to load or its ``register_commands`` raised; the
            reference would silently lack its commands otherwise.
    """
    from homeagent_core.cli._app import app

    clone = copy.copy(app)
    clone.registered_commands = list(app.registered_commands)
    clone.registered_groups = list(app.registered_groups)
    host = builtins_host()
    host.register_commands(clone)
    refuse_failed(host, "commands")
    return clone


def documented_apps() -> dict[str, typer.Typer]:
    """The typer apps of the reference, by program name, in page order."""
    from hmapdev.cli import app as hmapdev_app

    return {"homeagent": _homeagent_app(), "hmapdev": hmapdev_app}


def _walk(command: Any, program: str, path: tuple[str, ...]) -> Iterator[CommandDoc]:
    # Groups are recognised by their ``commands`` mapping: typer's groups are not
    # ``click.Group`` subclasses in every typer release.
    subcommands = getattr(command, "commands", None)
    is_group = isinstance(subcommands, Mapping)
    yield CommandDoc(program, path, is_group)
    if isinstance(subcommands, Mapping):
        for name, sub in subcommands.items():
            if not getattr(sub, "hidden", False):
                yield from _walk(sub, program, (*path, name))


def iter_commands(program: str, app: typer.Typer) -> list[CommandDoc]:
    """Every visible command of ``app``, depth first, in the order ``--help`` lists them."""
    return list(_walk(typer.main.get_command(app), program, ()))


# ---------------------------------------------------------------------------- rendering


@contextmanager
def _pinned_rich_console() -> Iterator[None]:
    """Fix what typer's rich formatter read from the environment at import time.

    Not thread-safe: the module attributes are swapped for the duration of the block.
    """
    from typer import rich_utils

    pinned = {"MAX_WIDTH": WIDTH, "COLOR_SYSTEM": None, "FORCE_TERMINAL": False}
    saved = {name: getattr(rich_utils, name) for name in pinned}
    for name, value in pinned.items():
        setattr(rich_utils, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(rich_utils, name, value)


def _clean(output: str) -> str:
    """No colour codes, no trailing spaces, no blank lines around the text."""
    lines = [line.rstrip() for line in _ANSI.sub("", output).splitlines()]
    return "\n".join(lines).strip("\n")


def help_text(app: typer.Typer, command: CommandDoc) -> str:
    """``<program> <path...> --help`` as the reference shows it.

    Raises:
        UsageError: the command did not answer ``--help`` with exit code 0.
    """
    runner = CliRunner()
    with _pinned_rich_console():
        result = runner.invoke(
            app, [*command.path, "--help"], env=_ENV, color=False, prog_name=command.program
        )
    if result.exit_code != 0:
        raise UsageError(
            f"`{command.title} --help` exited with {result.exit_code}: "
            f"{(result.output or repr(result.exception)).strip()[-500:]}"
        )
    return _clean(result.output)


def _heading(command: CommandDoc) -> str:
    return "#" * min(2 + len(command.path), 6) + f" {command.title}"


def _contents(commands: Sequence[CommandDoc]) -> str:
    rows = ["## Contents", ""]
    for command in commands:
        indent = "  " * len(command.path)
        rows.append(f"{indent}- [`{command.title}`](#{command.anchor})")
    return "\n".join(rows) + "\n"


def render_cli_reference(apps: dict[str, typer.Typer] | None = None) -> str:
    """The whole ``docs/CLI.md`` text.

    Args:
        apps: typer apps by program name; default: :func:`documented_apps`.
    """
    if apps is None:
        apps = documented_apps()
    commands = [(app, command) for program, app in apps.items() for command in iter_commands(program, app)]
    parts = [_TITLE.format(regenerate=REGENERATE), _contents([command for _, command in commands])]
    for app, command in commands:
        parts.append(f"{_heading(command)}\n\n```text\n{help_text(app, command)}\n```\n")
    return "\n".join(part.rstrip("\n") + "\n" for part in parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the reference to stdout (UTF-8, whatever the locale)."""
    return print_page(render_cli_reference, REGENERATE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
