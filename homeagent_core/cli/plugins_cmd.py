"""``homeagent plugins``: what is installed, what it registered, what failed."""

from __future__ import annotations

import typer

from homeagent_core.cli import plugins_install
from homeagent_core.cli._common import DataOption, JsonOption, echo_json, handle_errors

__all__ = ["app", "list_plugins"]

app = typer.Typer(help="Inspect plugins.", no_args_is_help=True)


def collect(data: object) -> list[dict[str, object]]:
    """Load plugins the way the daemon does (without starting them) and describe them."""
    from homeagent_core.app import App

    instance = App(data)  # type: ignore[arg-type]
    try:
        instance.declare_settings()
        instance.register_contributions()
        from homeagent_core.agent.kernel import Kernel

        # A kernel that is never started: it only collects tools and channels for the listing.
        Kernel(instance.host, instance.bus, provider=None).register_plugins()  # type: ignore[arg-type]
        return [p.to_dict() for p in instance.host.plugins()]
    finally:
        instance.config.close()


@app.command("list")
@handle_errors
def list_plugins(data: DataOption = None, as_json: JsonOption = False) -> None:
    """List plugins: name, kind, version, hooks, what each registered, and status."""
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
        if summary:
            typer.echo(f"{'':<16} {summary}")
        if row["error"]:
            typer.secho(f"{'':<16} error: {row['error']}", fg=typer.colors.RED)


app.command("install")(plugins_install.install)
app.command("remove")(plugins_install.remove)
app.command("enable")(plugins_install.enable)
app.command("disable")(plugins_install.disable)
app.command("reload")(plugins_install.reload)
