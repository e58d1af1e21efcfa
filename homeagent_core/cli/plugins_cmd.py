"""``homeagent plugins``: what is installed, what it registered, what failed."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from homeagent_core.cli import plugins_install
from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

__all__ = ["app", "list_plugins"]

app = typer.Typer(help="Inspect plugins.", no_args_is_help=True)

#: Plugin kinds installed as packages in ``<data>/plugins/``: their tools exist once they start.
PACKAGE_KINDS = ("proc", "lua")


def collect(data: object) -> list[dict[str, object]]:
    """Load plugins the way the daemon does (without starting them) and describe them.

    Installed packages (out-of-process and Lua) register their tools when they start, so when a
    daemon runs on the data directory their rows carry its status and what they registered there.
    """
    from homeagent_core.app import App

    instance = App(data)  # type: ignore[arg-type]
    try:
        instance.declare_settings()
        instance.register_contributions()
        from homeagent_core.agent.kernel import Kernel

        # A kernel that is never started: it only collects tools and channels for the listing.
        Kernel(instance.host, instance.bus, provider=None).register_plugins()  # type: ignore[arg-type]
        rows = [p.to_dict() for p in instance.host.plugins()]
    finally:
        instance.config.close()
    _from_daemon(Path(instance.data_dir), rows)
    return rows


def _from_daemon(root: Path, rows: list[dict[str, object]]) -> None:
    """Replace the status and contributions of package rows by the running daemon's (if one runs)."""
    from homeagent_core.cli._daemon import DaemonRefused, daemon_command

    for row in rows:
        if row["kind"] not in PACKAGE_KINDS:
            continue
        try:
            reply = daemon_command(root, f"/plugin info {row['name']}")
        except DaemonRefused:
            continue  # installed after the daemon started and not started there
        if reply is None:
            return  # no daemon runs
        live = json.loads(reply)
        row["status"] = live.get("status") or row["status"]
        row["contributions"] = live.get("contributions") or row["contributions"]
        row["error"] = live.get("error") or row["error"]


@app.command("list")
@handle_errors
def list_plugins(data: DataOption = None, as_json: JsonOption = False) -> None:
    """List plugins: name, kind, version, hooks, what each registered, and status.

    Installed packages register their tools when they start: with a daemon running on the data
    directory their rows show what they registered there.
    """
    rows = collect(data)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        typer.echo("no plugins")
        return
    for row in rows:
        line = f"{row['name']:<16} {row['kind']:<11} {row['status']:<8} {row['version'] or '-':<8}"
        contributions = row["contributions"]
        assert isinstance(contributions, dict)
        summary = "; ".join(f"{k}: {', '.join(v)}" for k, v in contributions.items())
        typer.echo(f"{line} hooks: {', '.join(row['hooks']) or '-'}")  # type: ignore[arg-type]
        if row["kind"] in PACKAGE_KINDS and "tools" not in contributions and row["status"] == "loaded":
            summary = "; ".join([*filter(None, [summary]), "tools: registered when it starts (homeagent serve)"])
        if summary:
            typer.echo(f"{'':<16} {summary}")
        if row["error"]:
            typer.secho(f"{'':<16} error: {row['error']}", fg=typer.colors.RED)


app.command("install")(plugins_install.install)
app.command("remove")(plugins_install.remove)
app.command("enable")(plugins_install.enable)
app.command("disable")(plugins_install.disable)
app.command("reload")(plugins_install.reload)
