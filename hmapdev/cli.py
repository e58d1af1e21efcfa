"""``hmapdev``: create, build, package, validate and try out HomeAgent plugins.

* ``hmapdev new NAME --kind proc|lua|skill|inproc`` — a project folder ``NAME/`` whose own
  tests pass out of the box.
* ``hmapdev build`` — inside the project: ``build/plugin.pyz`` (proc; its pure-Python
  dependencies from ``requirements.txt`` vendored — when every line pins ``name==version``,
  installed by pip from the index into a clean folder, reproducibly; otherwise copied from this
  environment — compiled ones refused by name) or the Lua / skill files.
* ``hmapdev pack`` — ``dist/<name>-<version>.hmap`` with plugin.json, the entry, README,
  LICENSE, ``thirdpart/`` and ``checksums.sha256``; checked with the installer's rules.
* ``hmapdev validate FILE.hmap`` — the installer's checks, same messages.
* ``hmapdev run`` — start the built plugin against an in-process kernel with a scripted model.

Every failing step exits non-zero.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from hmapdev.build import BuildError, build_project, pack_project, read_project, render_template
from homeagent_sdk._typer_help import hide_flag_types
from homeagent_sdk.errors import HomeAgentError

__all__ = ["app", "main"]

hide_flag_types()  # typer's help would print "<bool>" beside every flag

app = typer.Typer(help="Build and package HomeAgent plugins (.hmap).", no_args_is_help=True, add_completion=False)

KINDS = ("proc", "lua", "skill", "inproc")
ProjectOption = Annotated[Path, typer.Option("--project", "-C", help="Project folder (default: current directory).")]


def _fail(message: str) -> typer.Exit:
    typer.secho(f"Error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(1)


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="Plugin name: letters, digits, '_' and '-'.")],
    kind: Annotated[str, typer.Option("--kind", "-k", help="proc, lua, skill or inproc.")] = "proc",
) -> None:
    """Create the project folder NAME/ in the current directory from a template."""
    if kind not in KINDS:
        raise _fail(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    target = Path.cwd() / name
    try:
        render_template(kind, name, target)
    except BuildError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"created {kind} plugin project {target}")
    if kind == "inproc":
        # An in-process plugin is a Python distribution, installed with pip, not packed as .hmap.
        typer.echo(f"next: cd {name} && python -m pytest tests && homeagent install -e .")
    else:
        typer.echo(f"next: cd {name} && python -m pytest tests && hmapdev build && hmapdev pack")


@app.command()
def build(project: ProjectOption = Path(".")) -> None:
    """Build the project's entry into build/ (pin requirements.txt as name==version for a reproducible build)."""
    try:
        out = build_project(project.resolve())
    except BuildError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"built {out}")


@app.command()
def pack(project: ProjectOption = Path(".")) -> None:
    """Write dist/<name>-<version>.hmap from the built project (builds first if needed)."""
    try:
        out = pack_project(project.resolve())
    except BuildError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"packed {out}")


@app.command()
def validate(file: Annotated[Path, typer.Argument(help="The .hmap to check.")]) -> None:
    """Run the installer's checks on a package."""
    from homeagent_core.plugins.packages import PackageError, validate_package

    try:
        manifest = validate_package(file)
    except PackageError as exc:
        raise _fail(str(exc)) from None
    typer.echo(f"ok: {manifest.name} {manifest.version} (entry {manifest.entry}, kind {manifest.kind})")


@app.command()
def run(
    project: ProjectOption = Path("."),
    say: Annotated[str, typer.Option(help="Text to send to the agent.")] = "hello",
    call: Annotated[str, typer.Option(help="Make the scripted model call this tool first.")] = "",
    args: Annotated[str, typer.Option(help="JSON arguments of --call.")] = "{}",
) -> None:
    """Start the built plugin against an in-process kernel with a scripted model."""
    try:
        arguments = json.loads(args)
    except json.JSONDecodeError as exc:
        raise _fail(f"--args is not JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise _fail("--args must be a JSON object")
    try:
        report = asyncio.run(_run(project.resolve(), say, call, arguments))
    except HomeAgentError as exc:
        raise _fail(str(exc)) from None
    typer.echo(json.dumps(report, ensure_ascii=False, indent=2))


async def _run(project: Path, say: str, call: str, arguments: dict[str, Any]) -> dict[str, Any]:
    from homeagent_core.agent.kernel import Kernel
    from homeagent_core.config import ConfigStore
    from homeagent_core.events import EventBus
    from homeagent_core.plugins.manager import create_plugin_manager
    from homeagent_core.plugins.packages import PackageError, install_package
    from homeagent_core.plugins.proc import ProcPlugin
    from homeagent_core.plugins.sdk import ScopedSDK, Services
    from homeagent_core.plugins.supervisor import Supervisor
    from homeagent_sdk._fake_model import FakeModel, ToolCallReply

    manifest = read_project(project)
    if manifest.get("entry") not in ("plugin.pyz", "plugin.bin"):
        raise BuildError("hmapdev run starts out-of-process plugins (entry plugin.pyz or plugin.bin)")
    package = pack_project(project)
    with tempfile.TemporaryDirectory(prefix="hmapdev-run-") as tmp:
        data = Path(tmp)
        try:
            install_package(data, package)
        except PackageError as exc:
            raise BuildError(str(exc)) from None
        script: list[Any] = [ToolCallReply(call, arguments), "(scripted model) done"] if call else []
        model = FakeModel(script, default=f"(scripted model) you said: {say}")
        bus = EventBus()
        config = ConfigStore(":memory:")
        supervisor = Supervisor()
        plugin = ProcPlugin(data / "plugins" / manifest["name"], supervisor=supervisor)
        host = create_plugin_manager(load_entrypoints=False, builtins=[], plugins=[plugin])
        kernel = Kernel(host, bus, model)
        services = Services(config=config, bus=bus, data_dir=data, kernel=kernel)
        try:
            await kernel.start()
            await plugin.startup(ScopedSDK.for_plugin(plugin.name, services, privileged=True))
            reply = await kernel.ask(say, timeout=60)
            info = plugin.runtime_info()
            return {"plugin": info["name"], "tools": info["tools"], "stages": info["stages"], "reply": str(reply)}
        finally:
            await plugin.shutdown()
            await kernel.aclose()
            await bus.aclose()
            config.close()


def main() -> None:
    """Console-script entry."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
