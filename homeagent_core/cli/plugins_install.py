"""``homeagent plugins install|remove|enable|disable|reload``: manage installed packages.

These act on the data directory (and its config database). When a daemon runs on that data
directory, ``install`` asks it to start the package at once, ``remove`` goes through it (it
stops the plugin, then deletes it) and ``reload`` restarts what changed; without a daemon the
change applies when one starts.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors

__all__ = ["disable", "enable", "install", "install_hmap", "live_note", "reload", "remove", "report_install",
           "start_in_daemon"]


def _data(data: Path | None) -> Path:
    from homeagent_core.datadir import prepare_data_dir

    return prepare_data_dir(data)


@handle_errors
def install(
    source: Annotated[str, typer.Argument(help="Path or http(s) URL of a .hmap package.")],
    force: Annotated[bool, typer.Option("--force", help="Replace an installed plugin (settings are kept).")] = False,
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Install a .hmap plugin package into <data>/plugins/; a daemon running there starts it at once."""
    from homeagent_core.plugins.packages import PackageError

    root = _data(data)
    try:
        result = install_hmap(root, source, force=force)
    except PackageError as exc:
        if as_json:
            echo_json(exc.to_dict())
        raise fail(str(exc)) from None
    report_install(root, result, as_json=as_json)


def install_hmap(root: Path, source: str, *, force: bool = False) -> dict[str, Any]:
    """Install one ``.hmap`` (a path or an http(s) URL) into ``root``'s plugin folder; the installer's result.

    Raises:
        PackageError: the package is invalid, could not be downloaded, or is installed already.
    """
    from homeagent_core.plugins.packages import download, install_package

    fetched: Path | None = None
    try:
        if source.startswith(("http://", "https://")):
            fetched = asyncio.run(download(source, Path(tempfile.gettempdir())))
        return install_package(root, fetched or Path(source).expanduser(), overwrite=force)
    finally:
        if fetched is not None:
            fetched.unlink(missing_ok=True)


def report_install(root: Path, result: dict[str, Any], *, as_json: bool = False) -> None:
    """Have a daemon running on ``root`` start the installed package, then print what happened.

    Raises:
        typer.Exit: the daemon could not start it (after printing the install).
    """
    live, problem = start_in_daemon(root, str(result["name"]))
    if as_json:
        echo_json({**result, "daemon": live, **({"daemon_error": problem} if problem else {})})
    else:
        typer.echo(f"installed {result['name']} {result['version']} into {root / 'plugins'}{_replaced(result)}")
        typer.echo(_grants(result.get("capabilities") or []))
        typer.echo(live_note(root, live))
    if problem:
        raise fail(f"the running daemon could not start {result['name']}: {problem}")


def _replaced(result: dict[str, Any]) -> str:
    """`` (upgraded from 0.1.0)`` when the install replaced another version, else nothing.

    Whether the plugin runs is said once, by :func:`live_note`: the installer's own ``action``
    (``reload_required`` for a fresh install) is the library's hint to its caller, not news.
    """
    action, previous = result.get("action"), result.get("previous_version")
    if action not in ("upgraded", "downgraded") or not previous:
        return ""
    return " (reinstalled)" if previous == result.get("version") else f" ({action} from {previous})"


def start_in_daemon(root: Path, name: str) -> tuple[str | None, str]:
    """Ask the daemon on ``root`` to start (or restart) ``name``: ``(its reply or None, error or "")``."""
    from homeagent_core.cli._daemon import DaemonRefused, daemon_command

    try:
        return daemon_command(root, f"/plugin start {name}"), ""
    except DaemonRefused as exc:
        return "", str(exc)


def live_note(root: Path, reply: str | None) -> str:
    """What the running daemon did with the package, or that none runs on ``root``."""
    if reply is None:
        return f"no daemon runs on {root}: the plugin starts with `homeagent serve --data {root}`"
    return f"running daemon: {reply}"


def _grants(capabilities: list[str]) -> str:
    """What the installed plugin may use beyond registering itself (least privilege)."""
    if not capabilities:
        return (
            "capabilities granted: none (it may register tools, stages and channels and use its own settings; "
            "every other core call is refused)"
        )
    line = f"capabilities granted: {', '.join(capabilities)}"
    if "secrets" in capabilities:
        line += " (secrets: it can read API keys and other secret settings)"
    return line


@handle_errors
def remove(name: Annotated[str, typer.Argument(help="Plugin name.")], data: DataOption = None) -> None:
    """Uninstall a plugin: stop it in a running daemon, delete its directory and its settings."""
    from homeagent_core.cli._daemon import DaemonRefused, daemon_command
    from homeagent_core.config import ConfigStore
    from homeagent_core.plugins.packages import remove_plugin

    root = _data(data)
    try:
        reply = daemon_command(root, f"/plugin remove {name}")
    except DaemonRefused as exc:
        raise fail(f"the running daemon did not remove {name}: {exc}") from None
    if reply is not None:
        typer.echo(f"{reply} (the running daemon stopped it first)")
        return
    config = ConfigStore(root / "config.db")
    try:
        remove_plugin(root, name, config=config)
    finally:
        config.close()
    typer.echo(f"removed {name}")


def _set_enabled(name: str, data: Path | None, enabled: bool) -> None:
    from homeagent_core.config import ConfigStore
    from homeagent_core.plugins.packages import set_plugin_enabled

    config = ConfigStore(_data(data) / "config.db")
    try:
        set_plugin_enabled(config, name, enabled)
    finally:
        config.close()


def _tell_daemon(root: Path, command: str, done: str) -> None:
    """Pass an enable/disable on to a daemon running on ``root`` and print what it did."""
    from homeagent_core.cli._daemon import DaemonRefused, daemon_command

    try:
        reply = daemon_command(root, command)
    except DaemonRefused as exc:
        typer.echo(f"{done}; the running daemon answered: {exc}")
        return
    typer.echo(f"running daemon: {reply}" if reply is not None else f"{done}; it applies when the daemon starts")


@handle_errors
def enable(name: Annotated[str, typer.Argument(help="Plugin name.")], data: DataOption = None) -> None:
    """Enable a plugin (persisted); a daemon running on the data directory starts an installed package."""
    _set_enabled(name, data, True)
    _tell_daemon(_data(data), f"/plugin enable {name}", f"enabled {name}")


@handle_errors
def disable(name: Annotated[str, typer.Argument(help="Plugin name.")], data: DataOption = None) -> None:
    """Disable a plugin (persisted; it is not started again until enabled); a running daemon stops it."""
    _set_enabled(name, data, False)
    _tell_daemon(_data(data), f"/plugin disable {name}", f"disabled {name}")


@handle_errors
def reload(
    name: Annotated[str, typer.Argument(help="Plugin name (empty: every plugin whose entry changed).")] = "",
    data: DataOption = None,
) -> None:
    """Check installed plugins; a daemon running on the data directory restarts (or starts) them."""
    from homeagent_core.plugins.packages import PackageError, load_manifest

    root = _data(data)
    names = (
        [name]
        if name
        else sorted(p.name for p in (root / "plugins").iterdir() if p.is_dir() and not p.name.startswith("."))
    )
    for item in names:
        try:
            manifest = load_manifest(root / "plugins" / item)
        except PackageError as exc:
            raise fail(str(exc)) from None
        typer.echo(f"{manifest.name} {manifest.version}: valid")
    from homeagent_core.cli._daemon import DaemonRefused, daemon_command

    try:
        reply = daemon_command(root, f"/plugin reload {name}".strip())
    except DaemonRefused as exc:
        raise fail(f"the running daemon could not reload {name or 'the plugins'}: {exc}") from None
    typer.echo(live_note(root, reply))
