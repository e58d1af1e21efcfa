"""``homeagent service``: start the daemon at boot (systemd user unit / launchd agent).

The work is done by :mod:`homeagent_core.ops.service`; see docs/SERVICE.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

__all__ = ["app"]

app = typer.Typer(help="Run the daemon as a service that starts at boot and restarts after a crash.",
                  no_args_is_help=True)


def _linger_hint() -> None:
    from homeagent_core.ops.service import linger_enabled

    if linger_enabled() is False:
        typer.echo("note: this user's services stop at logout and start only at login; to run HomeAgent from "
                   "boot without a login, run: loginctl enable-linger $USER")


@app.command("install")
@handle_errors
def install(
    data: DataOption = None,
    no_start: Annotated[bool, typer.Option("--no-start", help="Enable at boot but do not start now.")] = False,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the unit (or plist) for this data directory and change nothing.")
    ] = False,
) -> None:
    """Write and enable the service for a data directory (systemd on Linux, launchd on macOS)."""
    from homeagent_core.datadir import default_data_dir
    from homeagent_core.ops import service

    root: Path = (data or default_data_dir()).expanduser().resolve()
    target = service.service_file()
    if print_only:
        text = service.systemd_unit(root) if target.manager == "systemd" else service.launchd_plist(root).decode()
        typer.echo(text, nl=False)
        return
    service.install(root, start=not no_start)
    typer.echo(f"installed {target.path} ({target.manager}) for {root}" + ("" if no_start else "; started"))
    if target.manager == "systemd":
        typer.echo("logs: journalctl --user -u homeagent -f")
        _linger_hint()


@app.command("uninstall")
@handle_errors
def uninstall() -> None:
    """Stop and disable the service and remove its unit file (the data directory is kept)."""
    from homeagent_core.ops import service

    target = service.uninstall()
    typer.echo(f"removed {target.path}")


@app.command("status")
@handle_errors
def status(as_json: JsonOption = False) -> None:
    """Say whether the service is installed, enabled and running."""
    from homeagent_core.ops import service

    state = service.status()
    if as_json:
        echo_json(state.to_dict())
        return
    if not state.installed:
        typer.echo(f"not installed ({state.path} does not exist); run: homeagent service install")
        return
    typer.echo(f"{state.manager}: {state.path}")
    typer.echo(f"  enabled: {'yes' if state.enabled else 'no'}   running: {'yes' if state.active else 'no'}"
               f"   ({state.detail})")
    if state.linger is False:
        _linger_hint()
