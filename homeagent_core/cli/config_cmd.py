"""``homeagent config``: read and change settings in ``<data>/config.db``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors
from homeagent_sdk.errors import HomeAgentError

__all__ = ["app"]

app = typer.Typer(help="Read and change settings.", no_args_is_help=True)

KeyArg = Annotated[str, typer.Argument(help="Setting key, e.g. core.agent.max_tool_turns.")]


def _open(data: object) -> Any:
    """The (not started) app over ``data``, with every plugin's settings declared."""
    from homeagent_core.app import App

    instance = App(data)  # type: ignore[arg-type]
    instance.declare_settings()
    return instance


def _shared(config: Any, *, required: bool) -> None:
    """Read the household's shared settings from a PostgreSQL memory store (docs/SCALE_OUT.md).

    When the database cannot be reached, a command that reads settings shows this daemon's copy
    (saying so on stderr); one that changes a shared setting fails with the database's error.
    """
    from homeagent_core.memory.system import attach_shared_settings

    try:
        attach_shared_settings(config)
    except HomeAgentError as exc:
        if required:
            raise
        typer.echo(f"warning: {exc}; shared settings show this daemon's copy", err=True)


def _store(data: object):  # type: ignore[no-untyped-def]
    """The config store with every plugin's settings declared (and the shared ones attached)."""
    config = _open(data).config
    _shared(config, required=False)
    return config


@app.command("get")
@handle_errors
def get(key: KeyArg, data: DataOption = None) -> None:
    """Print the value of one setting (secrets masked)."""
    config = _store(data)
    if not config.is_known(key):
        config.validate(key, "")  # raises UnknownConfigKey with suggestions
    rows = [r for r in config.describe(key) if r["key"] == key]
    typer.echo("" if not rows or rows[0]["value"] is None else str(rows[0]["value"]))


@app.command("set")
@handle_errors
def set_(key: KeyArg, value: Annotated[str, typer.Argument(help="New value.")], data: DataOption = None) -> None:
    """Validate and store a setting; a running daemon applies it at once.

    With a daemon running on this data directory the change goes through it (as ``/settings
    set`` in ``homeagent chat`` would), so it takes effect now, or at its next restart for a
    setting read only at start. A setting the running daemon does not know yet (its plugin was
    installed with pip after the daemon started) is stored in ``config.db`` for the restart that
    loads the plugin. Without a daemon it is stored and applies when the daemon starts.
    """
    from homeagent_core.config import is_shared_key

    instance = _open(data)
    config = instance.config
    typed = config.validate(key, value)
    definition = config.definition(key)
    secret = definition is not None and (definition.secret or definition.type == "password")
    shown = "****" if secret else typed
    restart = definition is not None and definition.restart_required
    live = _set_through_daemon(config, Path(instance.data_dir), key, value)
    if live == "applied":
        note = "saved by the running daemon; it takes effect when the daemon restarts" if restart else (
            "applied to the running daemon"
        )
        typer.echo(f"{key} = {shown} ({note})")
        return
    if is_shared_key(key):
        _shared(config, required=True)
    config.set(key, value)
    if live == "unknown":
        owner = key.split(".")[1] if key.startswith("plugin.") else ""
        what = f"plugin {owner}" if owner else "this setting"
        typer.echo(
            f"{key} = {shown} (saved; the running daemon started before {what} was installed and does not "
            "know it yet: restart the daemon to load it with this setting)"
        )
        return
    note = " (restart the daemon for it to take effect)" if restart else ""
    typer.echo(f"{key} = {shown}{note}")


def _set_through_daemon(config: Any, data_dir: Path, key: str, value: str) -> str | None:
    """Send ``/settings set`` to the daemon on this data directory.

    Returns ``"applied"`` when the daemon stored it, ``"unknown"`` when the daemon refused it
    because the plugin that declares ``key`` is not loaded there, None when no daemon runs.

    Raises:
        HomeAgentError: a daemon runs but refused the change (the message says why).
    """
    from homeagent_core.cli.chat import AgentError, CliClient, DaemonUnreachable

    raw = str(config.get("plugin.cli.socket_path") or "") if config.is_known("plugin.cli.socket_path") else ""
    path = Path(raw).expanduser() if raw else data_dir / "cli.sock"
    if not path.exists():
        return None
    api_key = ""
    for name in ("plugin.cli.api_key", "plugin.webui.api_key"):
        if not api_key and config.is_known(name):
            api_key = str(config.get(name) or "")
    try:
        with CliClient(path, api_key=api_key, timeout=30) as client:
            try:
                list(client.send(f"/settings set {key} {value}"))
            except AgentError as exc:
                if _plugin_missing(client, key):
                    return "unknown"
                raise HomeAgentError(f"the running daemon refused {key}: {exc}") from None
    except DaemonUnreachable:
        return None  # a stale socket file: nobody is listening
    return "applied"


def _plugin_missing(client: Any, key: str) -> bool:
    """Whether ``key`` belongs to a plugin the daemon behind ``client`` has not loaded at all."""
    from homeagent_core.cli.chat import AgentError

    if not key.startswith("plugin."):
        return False
    try:
        list(client.send(f"/plugin info {key.split('.')[1]}"))
    except AgentError:
        return True  # "unknown plugin": e.g. installed with pip after the daemon started
    return False


@app.command("unset")
@handle_errors
def unset(key: KeyArg, data: DataOption = None) -> None:
    """Forget a stored value so the default applies again."""
    from homeagent_core.config import is_shared_key

    config = _open(data).config
    if is_shared_key(key):
        _shared(config, required=True)
    if not config.unset(key):
        raise fail(f"{key} was not set; nothing to do", code=0)
    typer.echo(f"{key} reset to its default")


@app.command("list")
@handle_errors
def list_(
    prefix: Annotated[str, typer.Argument(help="Only keys starting with this.")] = "",
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """List settings with their values and where each comes from (set, env, default)."""
    rows = _store(data).describe(prefix)
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        value = str(row["value"]).replace("\n", " ")
        if len(value) > 60:
            value = value[:57] + "..."
        typer.echo(f"{row['key']:<52} {value:<40} [{row['source']}]")
