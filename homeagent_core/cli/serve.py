"""``homeagent serve``: run the daemon until Ctrl-C / SIGTERM."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from homeagent_core.cli._common import DataOption, handle_errors

__all__ = ["serve"]


@handle_errors
def serve(
    data: DataOption = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Address the web UI binds to (default: 127.0.0.1, or plugin.webui.addr). "
            "Keep 127.0.0.1 unless a reverse proxy with TLS fronts it.",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port of the web UI; 0 picks a free one (default: 8080, or plugin.webui.addr).",
            min=0,
            max=65535,
            show_default=False,
        ),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="Memory store: sqlite, or a postgresql://user:password@host/db URL shared by "
            "several daemons (saved as core.memory.store; see docs/SCALE_OUT.md).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start the HomeAgent daemon: load plugins, run until SIGINT/SIGTERM, shut down cleanly."""
    from homeagent_core.app import App, configure_logging
    from homeagent_core.datadir import forget_running, note_running

    app = App(data)
    if store is not None:
        app.config.set("core.memory.store", store)
    app.services.listen_host, app.services.listen_port = host, port
    configure_logging(app.data_dir, app.config.get("core.daemon.log_level"))
    # Commands run without --data find this daemon's data directory through the note.
    note_running(app.data_dir)
    try:
        _run(app.run_until_signalled())
    finally:
        forget_running(app.data_dir)


def _run(coro: object) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]
    else:
        uvloop.run(coro)  # type: ignore[arg-type]
