"""``homeagent plugins install|remove|enable|disable|reload``: manage installed packages.

These act on the data directory (and its config database) directly; a running daemon picks
the change up on ``reload`` or restart.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors

__all__ = ["disable", "enable", "install", "reload", "remove"]


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
    """Install a .hmap plugin package into <data>/plugins/."""
    from homeagent_core.plugins.packages import PackageError, download, install_package

    root = _data(data)
    fetched: Path | None = None
    try:
        if source.startswith(("http://", "https://")):
            fetched = asyncio.run(download(source, Path(tempfile.gettempdir())))
        result = install_package(root, fetched or Path(source).expanduser(), overwrite=force)
    except PackageError as exc:
        if as_json:
            echo_json(exc.to_dict())
        raise fail(str(exc)) from None
    finally:
        if fetched is not None:
            fetched.unlink(missing_ok=True)
    if as_json:
        echo_json(result)
        return
    typer.echo(f"installed {result['name']} {result['version']} ({result['action']})")
    typer.echo(_grants(result.get("capabilities") or []))


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
    """Uninstall a plugin: delete its directory and its settings."""
    from homeagent_core.config import ConfigStore
    from homeagent_core.plugins.packages import remove_plugin

    root = _data(data)
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


@handle_errors
def enable(name: Annotated[str, typer.Argument(help="Plugin name.")], data: DataOption = None) -> None:
    """Enable a plugin (persisted; takes effect on reload or restart)."""
    _set_enabled(name, data, True)
    typer.echo(f"enabled {name}")


@handle_errors
def disable(name: Annotated[str, typer.Argument(help="Plugin name.")], data: DataOption = None) -> None:
    """Disable a plugin (persisted; it is not started again until enabled)."""
    _set_enabled(name, data, False)
    typer.echo(f"disabled {name}")


@handle_errors
def reload(
    name: Annotated[str, typer.Argument(help="Plugin name (empty: every plugin whose entry changed).")] = "",
    data: DataOption = None,
) -> None:
    """Check an installed plugin and tell how its new version goes live."""
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
    typer.echo(
        "a running daemon reloads out-of-process plugins whose entry changed through the pluginmgr tool "
        "plugin_reload, or on restart"
    )
