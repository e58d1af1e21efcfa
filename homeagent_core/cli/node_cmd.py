"""``homeagent node``: this device as a node of a home agent (join with a code, then serve).

Runs with only the base install (Linux, macOS, Termux). The node's own data directory
(``--data DIR``, ``$HOMEAGENT_NODE_HOME``, else ``~/.homeagent-node``) holds ``node.json`` (what
this device allows: the node is authoritative) and its device token (mode 0600).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from homeagent_core.cli._common import fail, handle_errors

__all__ = ["app"]

app = typer.Typer(help="Make this device a node of a home agent: join with a code, then serve.",
                  no_args_is_help=True)

NodeDataOption = Annotated[
    Path | None,
    typer.Option("--data", help="The node's data directory (default $HOMEAGENT_NODE_HOME or ~/.homeagent-node)."),
]


def _folder(data: Path | None) -> Path:
    from homeagent_core.node.config import default_node_dir

    return (data or default_node_dir()).expanduser().resolve()


@app.command("join")
@handle_errors
def join(
    url: Annotated[str, typer.Argument(help="The home's web address, e.g. http://192.168.1.10:8080.")],
    code: Annotated[str, typer.Argument(help="The one-time code from `homeagent nodes pair NAME` on the home.")],
    data: NodeDataOption = None,
) -> None:
    """Trade a pairing code for this device's token; writes node.json (status and notify enabled)."""
    from homeagent_core.node.client import join as do_join

    folder = _folder(data)
    config = do_join(url, code, folder)
    typer.echo(f"joined {config.url} as node {config.name}; token saved in {folder / 'token'} (mode 0600)")
    typer.echo(f"enable more capabilities in {config.path}, then run: homeagent node serve --data {folder}")


@app.command("serve")
@handle_errors
def serve(data: NodeDataOption = None) -> None:
    """Keep this node connected to its home (one outbound WebSocket; reconnects by itself)."""
    import asyncio
    import logging

    from homeagent_core.node.client import NodeClient, TokenRefused

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        client = NodeClient.from_folder(_folder(data))
    except ValueError as exc:
        raise fail(f"node.json: {exc}") from None
    try:
        asyncio.run(client.run_forever())
    except TokenRefused as exc:
        raise fail(str(exc), code=2) from None
    except KeyboardInterrupt:
        pass
