"""docs/CLI.md is the rendered ``--help`` of every command, and every command answers ``--help``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from homeagent_core.cli import _app
from homeagent_core.cli.cli_docs import (
    REGENERATE,
    CommandDoc,
    documented_apps,
    help_text,
    iter_commands,
    render_cli_reference,
)
from homeagent_core.plugins.manager import create_plugin_manager
from homeagent_sdk.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
CLI_MD = ROOT / "docs" / "CLI.md"

APPS = documented_apps()
COMMANDS = [(program, command) for program, app in APPS.items() for command in iter_commands(program, app)]


@pytest.fixture(scope="module")
def rendered() -> str:
    return render_cli_reference()


def test_the_committed_reference_is_the_rendered_one(rendered: str) -> None:
    committed = CLI_MD.read_text(encoding="utf-8") if CLI_MD.exists() else ""
    assert committed == rendered, f"docs/CLI.md is out of date; regenerate it with: {REGENERATE}"


@pytest.mark.parametrize(("program", "command"), COMMANDS, ids=[command.title for _, command in COMMANDS])
def test_every_command_answers_help_and_has_a_section(program: str, command: CommandDoc, rendered: str) -> None:
    result = CliRunner().invoke(APPS[program], [*command.path, "--help"], prog_name=program)
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    assert f" {command.title}\n\n```text\n" in rendered


def test_the_walk_reaches_nested_groups_and_the_builtin_plugins_commands() -> None:
    titles = {command.title for _, command in COMMANDS}
    assert {"homeagent", "hmapdev"} <= titles
    groups = [command for _, command in COMMANDS if command.is_group and command.path]
    assert groups, "no sub-command groups found"
    for group in groups:
        assert any(c.path[:-1] == group.path and c.program == group.program for _, c in COMMANDS), group.title
    assert "homeagent mcp" in titles, "commands added by a built-in plugin's register_commands are missing"


def test_rendering_leaves_the_importable_app_untouched(rendered: str) -> None:
    before = (list(_app.app.registered_commands), list(_app.app.registered_groups))
    assert render_cli_reference() == rendered
    assert (_app.app.registered_commands, _app.app.registered_groups) == before
    assert "mcp" not in {group.name for group in _app.app.registered_groups}


def test_terminal_colour_and_operator_switches_do_not_change_the_reference(
    rendered: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer import rich_utils

    # What typer reads once at import on a CI machine with a narrow terminal.
    monkeypatch.setattr(rich_utils, "MAX_WIDTH", 50)
    monkeypatch.setattr(rich_utils, "FORCE_TERMINAL", True)
    for name, value in {
        "COLUMNS": "40",
        "TERMINAL_WIDTH": "50",
        "FORCE_COLOR": "1",
        "HOMEAGENT_DISABLE_PLUGINS": "mcp",
        "HOMEAGENT_LOAD_PLUGINS": "",
        "HOMEAGENT_HOME": "/somewhere/else",
    }.items():
        monkeypatch.setenv(name, value)
    assert render_cli_reference() == rendered
    assert (rich_utils.MAX_WIDTH, rich_utils.FORCE_TERMINAL) == (50, True)
    assert "\x1b[" not in rendered
    assert all(line == line.rstrip() for line in rendered.splitlines())
    assert "╭─ Options" in rendered


def test_an_installed_third_party_plugin_never_reaches_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rendered: str
) -> None:
    (tmp_path / "leaky_cli_plugin.py").write_text(
        textwrap.dedent(
            '''
            from homeagent_sdk import hookimpl

            @hookimpl
            def register_commands(app):
                @app.command("leaky-command")
                def leaky_command() -> None:
                    """Must not be documented."""
            '''
        ),
        encoding="utf-8",
    )
    dist = tmp_path / "leaky_cli_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: leaky-cli-plugin\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[homeagent]\nleaky = leaky_cli_plugin\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))

    probe = typer.Typer()
    create_plugin_manager().register_commands(probe)  # the daemon's discovery does see it
    assert "leaky-command" in {command.name for command in probe.registered_commands}

    assert render_cli_reference() == rendered
    assert "leaky" not in rendered


def test_the_contents_links_point_at_headings(rendered: str) -> None:
    headings = {
        CommandDoc(*_split(title)).anchor
        for title in re.findall(r"^#{2,6} ((?:homeagent|hmapdev)(?: [\w-]+)*)$", rendered, flags=re.M)
    }
    links = re.findall(r"^ *- \[`[^`]+`\]\(#([\w-]+)\)$", rendered, flags=re.M)
    assert len(links) == len(COMMANDS)
    assert set(links) == headings


def _split(title: str) -> tuple[str, tuple[str, ...], bool]:
    program, *path = title.split(" ")
    return program, tuple(path), False


def test_a_command_that_fails_help_stops_the_rendering_with_its_name() -> None:
    with pytest.raises(UsageError, match="homeagent no-such-command --help` exited with 2"):
        help_text(APPS["homeagent"], CommandDoc("homeagent", ("no-such-command",), False))


def test_the_module_prints_the_reference_as_utf8(rendered: str) -> None:
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "LC_ALL": "C", "COLUMNS": "30"}
    out = subprocess.run(
        [sys.executable, "-m", "homeagent_core.cli.cli_docs"],
        capture_output=True, check=True, cwd=ROOT, env=env, timeout=60,
    ).stdout
    assert out.decode("utf-8") == rendered
