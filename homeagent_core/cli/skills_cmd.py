"""``homeagent skills``: install, list and remove SKILL.md skills in ``<data>/skills/``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

__all__ = ["app"]

app = typer.Typer(help="Manage SKILL.md skills (Agent Skills / OpenClaw format).", no_args_is_help=True)


def _skills_dir(data: Path | None) -> Path:
    from homeagent_core.datadir import prepare_data_dir

    return prepare_data_dir(data) / "skills"


@app.command("install")
@handle_errors
def install(
    source: Annotated[Path, typer.Argument(help="A skill folder, a .zip or a .hmap file.")],
    force: Annotated[bool, typer.Option("--force", "-f", help="Replace an installed skill of the same name.")] = False,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Install a skill (validated first; nothing is written when it is broken)."""
    from homeagent_core.plugins.skills import install_skill

    skill = install_skill(source, _skills_dir(data), overwrite=force)
    if as_json:
        echo_json({"status": "installed", **skill.to_dict()})
        return
    typer.echo(f"installed skill {skill.name} -> {skill.path}")
    for note in skill.notes:
        typer.secho(f"note: {note}", fg=typer.colors.YELLOW)


@app.command("list")
@handle_errors
def list_skills(data: DataOption = None, as_json: JsonOption = False) -> None:
    """List skills with their description, and the ones that failed to load with the reason."""
    from homeagent_core.datadir import prepare_data_dir
    from homeagent_core.plugins.skills import discover_skills

    index = discover_skills(prepare_data_dir(data))
    skills = list(index.skills.values())
    if as_json:
        echo_json({"skills": [s.to_dict() for s in skills], "problems": [p.to_dict() for p in index.problems]})
        return
    if not skills and not index.problems:
        typer.echo("no skills")
    for skill in skills:
        desc = skill.description if len(skill.description) <= 70 else skill.description[:69] + "…"
        state = "" if skill.enabled else " (disabled)"
        typer.echo(f"{skill.name:<24} {skill.version or '-':<8} {desc}{state}")
    for problem in index.problems:
        typer.secho(f"failed: {problem.path}: {problem.error}", fg=typer.colors.RED)


@app.command("remove")
@handle_errors
def remove(
    name: Annotated[str, typer.Argument(help="The skill's name (or its folder name).")],
    data: DataOption = None,
) -> None:
    """Remove an installed skill from ``<data>/skills/``."""
    from homeagent_core.plugins.skills import remove_skill

    path = remove_skill(name, _skills_dir(data))
    typer.echo(f"removed skill {name} ({path})")
