"""``homeagent nodes``: pair, list and revoke remote devices ("nodes") of this home.

Pairing codes and device tokens live in ``<data>/plugin_data/nodes/nodes.db``. Each command asks
the running daemon first (it knows the address its web UI listens on, which nodes are connected,
and closes a revoked node's link at once) and works on that file directly when none runs.
The device side is ``homeagent node``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from homeagent_core.cli._common import DataOption, JsonOption, echo_json, fail, handle_errors

if TYPE_CHECKING:
    from homeagent_core.builtin.nodes_store import NodeStore

__all__ = ["app"]

app = typer.Typer(help="Pair, list and revoke remote devices (nodes) of this home.", no_args_is_help=True)


def _root(data: Path | None) -> Path:
    from homeagent_core.datadir import prepare_data_dir

    return prepare_data_dir(data)


def _store(root: Path) -> NodeStore:
    from homeagent_core.builtin.nodes_store import DB_NAME, PLUGIN_NAME, NodeStore
    from homeagent_core.datadir import plugin_data_dir

    return NodeStore(plugin_data_dir(root, PLUGIN_NAME) / DB_NAME)


def _daemon(root: Path, command: str) -> str | None:
    from homeagent_core.cli._daemon import DaemonRefused, daemon_command

    try:
        return daemon_command(root, command, timeout=30.0)
    except DaemonRefused as exc:
        raise fail(str(exc)) from None


def _web_address(root: Path) -> str:
    from homeagent_core.config import ConfigStore

    config = ConfigStore(root / "config.db")
    try:
        addr = str(config.get("plugin.webui.addr") or "127.0.0.1:8080")
    finally:
        config.close()
    host, _, port = addr.rpartition(":")
    if host in ("", "0.0.0.0", "::", "[::]"):
        import socket

        host = socket.gethostname()
    return f"http://{host}:{port}"


@app.command("pair")
@handle_errors
def pair(
    name: Annotated[str, typer.Argument(help="The node's name (a-z, 0-9, '-'), e.g. lap: its tools are node_lap_*.")],
    data: DataOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make a one-time code (valid 10 minutes) that a device trades for its token with `homeagent node join`."""
    from homeagent_core.builtin.nodes_store import NodesError

    root = _root(data)
    answer = _daemon(root, f"/nodes pair {name}")
    if answer is not None:  # the running daemon knows the address its web UI listens on
        made = json.loads(answer)
        code, expires, url = str(made["code"]), float(made["expires"]), str(made["url"] or _web_address(root))
    else:
        store = _store(root)
        try:
            code, expires = store.pair(name)
        except NodesError as exc:
            raise fail(str(exc)) from None
        finally:
            store.close()
        url = _web_address(root)
    host = url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    if host in ("0.0.0.0", "::"):
        import socket

        url = url.replace(host, socket.gethostname(), 1)
    row = {"name": name.strip().lower(), "code": code, "expires": expires, "join": f"homeagent node join {url} {code}"}
    if as_json:
        echo_json(row)
        return
    until = time.strftime("%H:%M:%S", time.localtime(expires))
    typer.echo(f"pairing code for node {row['name']}: {code}  (valid until {until}, once)")
    typer.echo(f"on the device run:  {row['join']}")
    typer.echo("(use the address the device reaches this machine by; the web UI must listen there: "
               "homeagent serve --host 0.0.0.0)")


@app.command("list")
@handle_errors
def list_(data: DataOption = None, as_json: JsonOption = False) -> None:
    """The paired nodes: name, online, last seen, capabilities (and a problem it was cut off for)."""
    root = _root(data)
    answer = _daemon(root, "/nodes list")
    rows: list[dict[str, Any]]
    if answer is not None:
        rows = json.loads(answer)
    else:
        store = _store(root)
        try:
            rows = [{**r.to_dict(), "online": False} for r in store.list()]
        finally:
            store.close()
    if as_json:
        echo_json(rows)
        return
    if not rows:
        typer.echo("no nodes paired; `homeagent nodes pair NAME` makes a code")
        return
    for row in rows:
        seen = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row["last_seen"])) if row["last_seen"] else "never"
        state = "online " if row["online"] else "offline"
        problem = f"  problem: {row['problem']}" if row.get("problem") else ""
        typer.echo(f"{row['name']:<16} {state}  last seen {seen}  {', '.join(row['capabilities']) or '-'}{problem}")


@app.command("revoke")
@handle_errors
def revoke(
    name: Annotated[str, typer.Argument(help="The node's name (`homeagent nodes list` shows them).")],
    data: DataOption = None,
) -> None:
    """Forget a node: its token stops working at once and a running daemon closes its link."""
    root = _root(data)
    answer = _daemon(root, f"/nodes revoke {name}")
    if answer is not None:
        typer.echo(answer)
        return
    store = _store(root)
    try:
        known = store.revoke(name)
    finally:
        store.close()
    if not known:
        raise fail(f"no node named {name!r}; `homeagent nodes list` shows them")
    typer.echo(f"node {name.strip().lower()} revoked")
